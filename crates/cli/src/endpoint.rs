//! `cilium endpoint list|get`.

use crate::table::{print, print_json, ListArgs, Output};
use crate::{row, Ctx};
use api::endpoint::Endpoint;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List all endpoints
    #[command(alias = "ls")]
    List(ListArgs),
    /// Display endpoint information
    Get {
        /// Endpoint ID ([prefix:]value, e.g. 42, pod-name:default/web)
        id: String,
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<Output>,
    },
}

fn enforcement(policy_enabled: &str, dir: &str) -> &'static str {
    if policy_enabled == "both" || policy_enabled == dir {
        "Enabled"
    } else {
        "Disabled"
    }
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    match cmd {
        Command::List(ListArgs { output }) => {
            let mut eps: Vec<Endpoint> = client.get_json("/endpoint", &[])?;
            eps.sort_by_key(|e| e.id);
            if output.is_some() {
                print_json(&eps)?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut rows = vec![
                row![
                    "ENDPOINT",
                    "POLICY (ingress)",
                    "POLICY (egress)",
                    "IDENTITY",
                    "LABELS (source:key[=value])",
                    "IPv6",
                    "IPv4",
                    "STATUS"
                ],
                row!["", "ENFORCEMENT", "ENFORCEMENT", "", "", "", "", ""],
            ];
            for ep in &eps {
                let st = &ep.status;
                let policy = &st.policy.realized.policy_enabled;
                let identity = st
                    .identity
                    .as_ref()
                    .map_or(String::new(), |i| i.id.to_string());
                let labels = st
                    .identity
                    .as_ref()
                    .map(|i| i.labels.clone())
                    .unwrap_or_default();
                let net = st.networking.clone().unwrap_or_default();
                let addr = net.addressing.first().cloned().unwrap_or_default();
                rows.push(row![
                    ep.id,
                    enforcement(policy, "ingress"),
                    enforcement(policy, "egress"),
                    identity,
                    labels.first().cloned().unwrap_or_default(),
                    addr.ipv6,
                    addr.ipv4,
                    st.state
                ]);
                for extra in labels.iter().skip(1) {
                    rows.push(row!["", "", "", "", extra, "", "", ""]);
                }
            }
            print(&rows);
        }
        Command::Get { id, output: _ } => {
            let ep: Endpoint =
                client.get_json(&format!("/endpoint/{}", api::client::escape(id)), &[])?;
            print_json(&vec![ep])?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
