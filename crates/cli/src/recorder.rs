//! `cilium recorder list|get`: pcap recorders (none here: the agent runs
//! no recorder), in 1.16's tables.

use crate::table::{print_json, tabwrite, ListArgs};
use crate::Ctx;
use serde_json::Value;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Command {
    /// List current pcap recorders
    #[command(alias = "ls")]
    List(ListArgs),
    /// Display individual pcap recorder
    Get {
        /// recorder id
        id: String,
        #[command(flatten)]
        args: ListArgs,
    },
}

fn recorder_rows(recorders: &[Value]) -> String {
    let mut text = String::from("ID\tCapture Length\tWildcard Filters\t\n");
    let mut realized: Vec<&Value> = recorders.iter().map(|r| &r["status"]["realized"]).collect();
    realized.sort_by_key(|r| r["id"].as_i64().unwrap_or(0));
    for r in realized {
        let id = r["id"].as_i64().unwrap_or(0);
        let cap = match r["capture-length"].as_i64().unwrap_or(0) {
            0 => "full".to_owned(),
            n => format!("<= {n}"),
        };
        let filters = r["filters"].as_array().cloned().unwrap_or_default();
        if filters.is_empty() {
            text.push_str(&format!("{id}\t{cap}\t(none)\n"));
        }
        for (i, f) in filters.iter().enumerate() {
            let s = |k: &str| f[k].as_str().unwrap_or("").to_owned();
            let lead = if i == 0 {
                format!("{id}\t{cap}")
            } else {
                "\t".to_owned()
            };
            text.push_str(&format!(
                "{lead}\t{}:{}\t->\t{}:{}\t{}\n",
                s("src-prefix"),
                s("src-port"),
                s("dst-prefix"),
                s("dst-port"),
                s("protocol")
            ));
        }
    }
    text.push('\n');
    tabwrite(&text, 5, 3)
}

fn mask_rows(masks: &[Value]) -> String {
    let mut text = String::from("Users\tPriority   \tWildcard Masks\t\n");
    let realized: Vec<&Value> = masks.iter().map(|m| &m["status"]["realized"]).collect();
    let (mut v4, mut v6): (Vec<&Value>, Vec<&Value>) = realized
        .into_iter()
        .partition(|m| m["src-prefix-mask"].as_str().is_some_and(|s| s.len() == 8));
    for list in [&mut v6, &mut v4] {
        list.sort_by_key(|m| std::cmp::Reverse(m["priority"].as_i64().unwrap_or(0)));
    }
    for m in v6.into_iter().chain(v4) {
        let s = |k: &str| m[k].as_str().unwrap_or("").to_owned();
        text.push_str(&format!(
            "{}\t{}\t{}:{}\t->\t{}:{}\t{}\n",
            m["users"].as_i64().unwrap_or(0),
            m["priority"].as_i64().unwrap_or(0),
            s("src-prefix-mask"),
            s("src-port-mask"),
            s("dst-prefix-mask"),
            s("dst-port-mask"),
            s("protocol-mask")
        ));
    }
    tabwrite(&text, 5, 3)
}

pub fn run(ctx: &Ctx, cmd: &Command) -> anyhow::Result<ExitCode> {
    let client = ctx.client()?;
    match cmd {
        Command::List(args) => {
            let recorders: Vec<Value> = client
                .get_json("/recorder", &[])
                .map_err(|e| anyhow::anyhow!("Cannot get recorder list: {e}"))?;
            let masks: Vec<Value> = client
                .get_json("/recorder/masks", &[])
                .map_err(|e| anyhow::anyhow!("Cannot get recorder mask list: {e}"))?;
            if args.output.is_some() {
                print_json(&recorders)?;
                print_json(&masks)?;
            } else {
                print!("{}{}", recorder_rows(&recorders), mask_rows(&masks));
            }
        }
        Command::Get { id, args } => {
            let n = id
                .parse::<i64>()
                .map_err(|_| anyhow::anyhow!("Unable to parse recorder ID: {id}"))?;
            let recorder: Value = match client.get_json(&format!("/recorder/{n}"), &[]) {
                Ok(r) => r,
                Err(e) if e.status() == Some(404) => anyhow::bail!(
                    "Cannot get recorder '{n}': [GET /recorder/{{id}}][404] getRecorderIdNotFound \n"
                ),
                Err(e) => anyhow::bail!("Cannot get recorder '{n}': {e}\n"),
            };
            if args.output.is_some() {
                print_json(&recorder)?;
            } else if recorder["status"]["realized"].is_null() {
                anyhow::bail!("Cannot get recorder '{n}': empty response\n");
            } else {
                print!("{}", recorder_rows(std::slice::from_ref(&recorder)));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
