//! `cilium config`: show or change the agent's mutable options.

use crate::table::{print, print_json, Output};
use crate::{row, Ctx};
use api::models::{DaemonConfiguration, DaemonConfigurationSpec};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Options to change, as <option>=<value> (e.g. Debug=Enabled, policy-enforcement=always)
    changes: Vec<String>,
    /// Display all cilium configurations
    #[arg(short = 'a', long)]
    all: bool,
    #[arg(short = 'o', long = "output", value_enum)]
    output: Option<Output>,
}

pub fn run(ctx: &Ctx, args: &Args) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    if args.changes.is_empty() {
        let cfg: DaemonConfiguration = client.get_json("/config", &[])?;
        if args.output.is_some() {
            print_json(&cfg)?;
            return Ok(ExitCode::SUCCESS);
        }
        let mut rows: Vec<Vec<String>> = Vec::new();
        if args.all {
            rows.extend(
                cfg.status
                    .daemon_configuration_map
                    .iter()
                    .map(|(k, v)| row![k, v.as_str().unwrap_or_default()]),
            );
        } else {
            rows.extend(cfg.status.realized.options.iter().map(|(k, v)| row![k, v]));
            rows.push(row![
                "PolicyEnforcement",
                cfg.status.realized.policy_enforcement.unwrap_or_default()
            ]);
        }
        print(&rows);
        return Ok(ExitCode::SUCCESS);
    }
    let mut spec = DaemonConfigurationSpec::default();
    for change in &args.changes {
        let Some((name, value)) = change.split_once('=') else {
            anyhow::bail!("invalid option {change:?}: expected <option>=<value>");
        };
        if name.eq_ignore_ascii_case("policy-enforcement") || name == "PolicyEnforcement" {
            spec.policy_enforcement = Some(value.to_owned());
        } else {
            spec.options.insert(name.to_owned(), value.to_owned());
        }
    }
    let body = serde_json::to_vec(&spec)?;
    client.call("PATCH", "/config", &[], Some(&body))?;
    Ok(ExitCode::SUCCESS)
}
