//! `cilium metrics list`: the agent's metrics, with Cilium's names.

use crate::table::{print, print_json};
use crate::{row, Ctx};
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List all metrics
    #[command(alias = "ls")]
    List {
        /// Only metrics whose name contains this
        #[arg(short = 'p', long = "match-pattern")]
        pattern: Option<String>,
        #[arg(short = 'o', long)]
        output: Option<String>,
    },
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let Command::List { pattern, output } = cmd;
    let all: Vec<serde_json::Value> = ctx.client()?.get_json("/metrics/", &[])?;
    let shown: Vec<&serde_json::Value> = all
        .iter()
        .filter(|m| {
            pattern
                .as_deref()
                .is_none_or(|p| m["name"].as_str().unwrap_or_default().contains(p))
        })
        .collect();
    if output.is_some() {
        print_json(&shown)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = vec![row!["Metric", "Labels", "Value"]];
    for m in shown {
        let labels: Vec<String> = m["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}=\"{}\"", v.as_str().unwrap_or_default()))
            .collect();
        rows.push(row![
            m["name"].as_str().unwrap_or_default(),
            labels.join(" "),
            format!("{:.6}", m["value"].as_f64().unwrap_or_default())
        ]);
    }
    print(&rows);
    Ok(ExitCode::SUCCESS)
}
