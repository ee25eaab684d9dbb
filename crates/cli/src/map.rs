//! `cilium map list|get|events`: the maps the agent pins, its userspace
//! views of them, and the ipcache's recent changes.

use crate::table::{print, print_json, ListArgs};
use crate::{row, Ctx};
use api::models::{BpfMap, BpfMapList};
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List all open BPF maps
    #[command(alias = "ls")]
    List {
        #[command(flatten)]
        args: ListArgs,
        /// Print cache contents of all maps
        #[arg(long)]
        verbose: bool,
    },
    /// Display cached content of given BPF map
    Get {
        /// Map name, e.g. cilium_ipcache
        name: String,
        #[command(flatten)]
        args: ListArgs,
    },
    /// Display cached list of events for a BPF map
    Events {
        /// Map name, e.g. cilium_ipcache
        name: String,
        /// If set then events will be streamed
        #[arg(short = 'f', long)]
        follow: bool,
        #[command(flatten)]
        args: ListArgs,
    },
}

fn map_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Cilium's `map get` body for one map.
fn print_entries(map: &BpfMap) {
    let Some(cache) = &map.cache else {
        println!("Cache is disabled\n");
        return;
    };
    if cache.is_empty() {
        println!("Cache is empty\n");
        return;
    }
    let mut rows = vec![row!["Key", "Value", "State", "Error"]];
    for e in cache {
        rows.push(row![e.key, e.value, e.desired_action, e.last_error]);
    }
    print(&rows);
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    match cmd {
        Command::List { args, verbose } => {
            let list: BpfMapList = client.get_json("/map", &[])?;
            if args.output.is_some() {
                print_json(&list)?;
                return Ok(ExitCode::SUCCESS);
            }
            if *verbose {
                for m in &list.maps {
                    println!("## Map: {}", map_name(&m.path));
                    print_entries(m);
                    println!();
                }
                return Ok(ExitCode::SUCCESS);
            }
            let mut rows = vec![row!["Name", "Num entries", "Num errors", "Cache enabled"]];
            for m in &list.maps {
                let cache = m.cache.as_deref().unwrap_or_default();
                let errors = cache.iter().filter(|e| !e.last_error.is_empty()).count();
                rows.push(row![
                    map_name(&m.path),
                    cache.len(),
                    errors,
                    m.cache.is_some()
                ]);
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
            print_entries(&map);
        }
        Command::Events { name, follow, args } => return events(&client, name, *follow, args),
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the map's events as Cilium does, one line each; following, asks
/// again every second and prints what is newer.
fn events(
    client: &api::client::Client,
    name: &str,
    follow: bool,
    args: &ListArgs,
) -> anyhow::Result<ExitCode> {
    let path = format!("/map/{}/events", api::client::escape(name));
    let mut last: Option<serde_json::Value> = None;
    loop {
        let body = client
            .call("GET", &path, &[], None)
            .map_err(|e| anyhow::anyhow!("could not get map {name} events: {e}"))?;
        let text = String::from_utf8_lossy(&body);
        let events: Vec<serde_json::Value> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .map_err(|e| anyhow::anyhow!("error while reading stream: {e}"))?;
        // the agent keeps the latest events only: new ones follow the last
        // one printed, or are all of them once it has gone
        let start = last
            .as_ref()
            .and_then(|l| events.iter().rposition(|e| e == l))
            .map_or(0, |i| i + 1);
        for e in &events[start..] {
            if args.output.is_some() {
                print_json(e)?;
                continue;
            }
            let field = |k: &str| {
                e[k].as_str()
                    .unwrap_or_default()
                    .replace('"', "\\\"")
                    .replace('\n', "\\n")
            };
            println!(
                "key={:?} value={:?} time={} action={} desiredState={} lastError={:?}",
                field("key"),
                field("value"),
                field("timestamp"),
                field("action"),
                field("desired-action"),
                field("last-error")
            );
        }
        if let Some(e) = events.last() {
            last = Some(e.clone());
        }
        if !follow {
            return Ok(ExitCode::SUCCESS);
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}
