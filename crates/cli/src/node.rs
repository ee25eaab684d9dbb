//! `cilium node list`.

use crate::table::{print, print_json, ListArgs};
use crate::{row, Ctx};
use api::models::ClusterNodeStatus;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List nodes
    #[command(alias = "ls")]
    List(ListArgs),
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let Command::List(ListArgs { output }) = cmd;
    let status: ClusterNodeStatus = ctx.client()?.get_json("/cluster/nodes", &[])?;
    if output.is_some() {
        print_json(&status)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut nodes = status.nodes_added.clone();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut rows = vec![row![
        "Name",
        "IPv4 Address",
        "Endpoint CIDR",
        "IPv6 Address",
        "Endpoint CIDR",
        "Source"
    ]];
    for n in &nodes {
        let v4 = n.primary_address.ipv4.clone().unwrap_or_default();
        let v6 = n.primary_address.ipv6.clone().unwrap_or_default();
        rows.push(row![
            n.name,
            v4.ip,
            v4.alloc_range,
            v6.ip,
            v6.alloc_range,
            n.source
        ]);
    }
    print(&rows);
    Ok(ExitCode::SUCCESS)
}
