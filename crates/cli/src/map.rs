//! `cilium map list|get`: the agent's userspace caches of BPF maps.

use crate::table::{print, print_json, ListArgs};
use crate::{row, Ctx};
use api::models::{BpfMap, BpfMapList};
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List all open BPF maps
    #[command(alias = "ls")]
    List(ListArgs),
    /// Display cached content of given BPF map
    Get {
        /// Map name, e.g. cilium_ipcache
        name: String,
        #[command(flatten)]
        args: ListArgs,
    },
}

fn map_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    match cmd {
        Command::List(args) => {
            let list: BpfMapList = client.get_json("/map", &[])?;
            if args.output.is_some() {
                print_json(&list)?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut rows = vec![row!["Name", "Num entries", "Num errors", "Cache enabled"]];
            for m in &list.maps {
                let errors = m.cache.iter().filter(|e| !e.last_error.is_empty()).count();
                rows.push(row![map_name(&m.path), m.cache.len(), errors, "true"]);
            }
            print(&rows);
        }
        Command::Get { name, args } => {
            let map: BpfMap =
                client.get_json(&format!("/map/{}", api::client::escape(name)), &[])?;
            if args.output.is_some() {
                print_json(&map)?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut rows = vec![row!["Key", "Value", "State", "Error"]];
            for e in &map.cache {
                rows.push(row![e.key, e.value, e.desired_action, e.last_error]);
            }
            print(&rows);
        }
    }
    Ok(ExitCode::SUCCESS)
}
