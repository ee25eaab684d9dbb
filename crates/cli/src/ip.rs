//! `cilium ip list`: the agent's userspace ipcache.

use crate::table::{print, print_json, Output};
use crate::{row, Ctx};
use api::ipam::IpListEntry;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List IP addresses in the userspace IPcache
    #[command(alias = "ls")]
    List {
        #[arg(short = 'o', long = "output", value_enum)]
        output: Option<Output>,
        /// Show numeric identities only
        #[arg(short = 'n', long = "numeric")]
        numeric: bool,
    },
}

fn identity_name(id: u32, numeric: bool) -> String {
    match abi::identity::reserved_name(id) {
        Some(name) if !numeric => format!("{id} reserved:{name}"),
        _ => id.to_string(),
    }
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let Command::List { output, numeric } = cmd;
    let mut entries: Vec<IpListEntry> = ctx.client()?.get_json("/ip", &[])?;
    entries.sort_by(|a, b| a.cidr.cmp(&b.cidr));
    if output.is_some() {
        print_json(&entries)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut rows = vec![row!["IP", "IDENTITY", "SOURCE"]];
    for e in &entries {
        let source = e
            .metadata
            .as_ref()
            .map(|m| m.source.clone())
            .unwrap_or_default();
        rows.push(row![e.cidr, identity_name(e.identity, *numeric), source]);
    }
    print(&rows);
    Ok(ExitCode::SUCCESS)
}
