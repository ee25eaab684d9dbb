//! `cilium policy import|get|delete`.

use crate::table::print_json;
use crate::Ctx;
use anyhow::Context;
use api::models::Policy;
use std::io::Read;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Import security policy in YAML or JSON format (a file, or - for stdin)
    Import {
        /// Policy file; `-` reads standard input
        path: String,
    },
    /// Display policy node information
    Get {
        /// Only policies whose labels include all of these
        labels: Vec<String>,
        /// json for the agent's answer as is
        #[arg(short = 'o', long)]
        output: Option<String>,
    },
    /// Delete policy rules
    Delete {
        /// Policies whose labels include all of these
        labels: Vec<String>,
        /// Delete all policies
        #[arg(long)]
        all: bool,
    },
}

fn read(path: &str) -> anyhow::Result<String> {
    let mut text = String::new();
    if path == "-" {
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading the policy from stdin")?;
    } else {
        text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    }
    Ok(text)
}

fn parse(body: &[u8]) -> anyhow::Result<Policy> {
    serde_json::from_slice(body).context("unexpected answer from the agent")
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    match cmd {
        Command::Import { path } => {
            let text = read(path)?;
            let p = parse(&client.call("PUT", "/policy", &[], Some(text.as_bytes()))?)?;
            println!("Revision: {}", p.revision);
        }
        Command::Get { labels, output } => {
            let joined = labels.join(",");
            let headers: Vec<(&str, &str)> = if labels.is_empty() {
                Vec::new()
            } else {
                vec![("labels", joined.as_str())]
            };
            let p = parse(&client.call("GET", "/policy", &headers, None)?)?;
            if output.is_some() {
                print_json(&p)?;
            } else {
                print!("{}", p.policy);
                println!("Revision: {}", p.revision);
            }
        }
        Command::Delete { labels, all } => {
            if labels.is_empty() && !all {
                anyhow::bail!("specify the labels of the policies to delete, or --all");
            }
            if !labels.is_empty() && *all {
                anyhow::bail!("give either labels or --all, not both");
            }
            let body = serde_json::to_vec(labels)?;
            let p = parse(&client.call("DELETE", "/policy", &[], Some(&body))?)?;
            println!("Revision: {}", p.revision);
        }
    }
    Ok(ExitCode::SUCCESS)
}
