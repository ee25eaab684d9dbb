//! `cilium cgroups list`: the pods' cgroups the agent knows, in 1.16's
//! table.

use crate::table::{print_json, tabwrite, Output};
use crate::Ctx;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// Display cgroup metadata maintained by Cilium
    #[command(alias = "ls")]
    List {
        /// Do not print headers
        #[arg(long)]
        no_headers: bool,
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<Output>,
    },
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let Command::List { no_headers, output } = cmd;
    let meta: serde_json::Value = ctx.client()?.get_json("/cgroup-dump-metadata", &[])?;
    let pods = &meta["pod-metadatas"];
    if output.is_some() {
        print_json(pods)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut text = String::new();
    if !no_headers {
        text.push_str("POD NAME\tPOD NAMESPACE\tCGROUP IDS\t\n");
    }
    for pod in pods.as_array().into_iter().flatten() {
        for (i, c) in pod["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let id = c["cgroup-id"].as_u64().unwrap_or(0);
            if i == 0 {
                text.push_str(&format!(
                    "{}\t{}\t{id}\t\n",
                    pod["name"].as_str().unwrap_or(""),
                    pod["namespace"].as_str().unwrap_or("")
                ));
            } else {
                text.push_str(&format!("\t\t{id}\t\n"));
            }
        }
    }
    print!("{}", tabwrite(&text, 5, 3));
    Ok(ExitCode::SUCCESS)
}
