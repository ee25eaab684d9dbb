//! `cilium config`: show or change the agent's mutable options.

use crate::table::{print, print_json, Output};
use crate::{row, Ctx};
use api::models::{DaemonConfiguration, DaemonConfigurationSpec};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    sub: Option<Sub>,
    /// Options to change, as <option>=<value> (e.g. Debug=Enabled, policy-enforcement=always)
    changes: Vec<String>,
    /// Display all cilium configurations
    #[arg(short = 'a', long)]
    all: bool,
    #[arg(short = 'o', long = "output", value_enum)]
    output: Option<Output>,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Retrieve cilium configuration
    Get { name: Option<String> },
}

/// `cilium config get <name>`: one option, mutable or not, found by its
/// name in any case and with or without dashes (`policy-enforcement`,
/// `PolicyEnforcement`), printed as Go's `%v` prints it.
fn get(ctx: &Ctx, name: Option<&str>) -> anyhow::Result<ExitCode> {
    let path = ["config", "get"];
    let name = match name {
        None => return Ok(crate::usage_error(&path, "Missing config name argument")),
        Some("") => return Ok(crate::usage_error(&path, "Empty config argument")),
        Some(n) => n,
    };
    let squash = |s: &str| -> String {
        s.to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let cfg: DaemonConfiguration = ctx
        .client()?
        .get_json("/config", &[])
        .map_err(|e| anyhow::anyhow!("Error while retrieving configuration: {e}"))?;
    let mut all: std::collections::HashMap<String, serde_json::Value> = cfg
        .status
        .daemon_configuration_map
        .iter()
        .map(|(k, v)| (k.to_lowercase(), v.clone()))
        .collect();
    for (k, v) in &cfg.status.realized.options {
        all.insert(k.to_lowercase(), v.clone().into());
    }
    all.insert(
        "policyenforcement".into(),
        cfg.status
            .realized
            .policy_enforcement
            .clone()
            .unwrap_or_default()
            .into(),
    );
    match all.get(&squash(name)) {
        Some(v) => {
            println!("{}", crate::gofmt::value(v));
            Ok(ExitCode::SUCCESS)
        }
        None => anyhow::bail!("Configuration does not exist"),
    }
}

pub fn run(ctx: &Ctx, args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(Sub::Get { name }) = &args.sub {
        return get(ctx, name.as_deref());
    }
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
