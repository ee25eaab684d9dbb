//! `cilium recorder list|get|update|delete`: pcap recorders (none here:
//! the agent runs no recorder and refuses new ones as 1.16 does with
//! `--enable-recorder` off), in 1.16's tables and words.

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
    /// Update individual pcap recorder
    Update(UpdateArgs),
    /// Delete individual pcap recorder
    Delete {
        /// recorder id
        id: Option<String>,
    },
}

#[derive(clap::Args)]
pub struct UpdateArgs {
    /// Identifier
    #[arg(long, default_value_t = 0)]
    id: u64,
    /// Capture Length (0 is full capture)
    #[arg(long, default_value_t = 0)]
    caplen: u64,
    /// List of filters ('<srcCIDR> <srcPort> <dstCIDR> <dstPort> <proto>')
    #[arg(long, value_delimiter = ',')]
    filters: Vec<String>,
}

/// One `--filters` entry as 1.16 scans it: five words, the protocol TCP,
/// UDP or ANY.
fn filter(text: &str) -> anyhow::Result<Value> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [src, sport, dst, dport, proto, ..] = words[..] else {
        anyhow::bail!("Cannot parse filter: EOF");
    };
    let proto = proto.to_uppercase();
    if !["TCP", "UDP", "ANY"].contains(&proto.as_str()) {
        anyhow::bail!("Cannot parse filter: %!s(<nil>)");
    }
    Ok(serde_json::json!({
        "dst-port": dport, "dst-prefix": dst, "protocol": proto,
        "src-port": sport, "src-prefix": src,
    }))
}

fn update(client: &api::Client, a: &UpdateArgs) -> anyhow::Result<ExitCode> {
    if a.id == 0 {
        return Ok(crate::usage_error(
            &["recorder", "update"],
            "Empty recorder id argument",
        ));
    }
    let id = a.id;
    let mut spec = match client.get_json::<Value>(&format!("/recorder/{id}"), &[]) {
        Ok(r) if r["status"]["realized"].is_object() => {
            println!("Updating existing recorder with id '{id}'");
            r["status"]["realized"].clone()
        }
        Ok(_) => anyhow::bail!("Cannot update recorder {id}: empty state"),
        Err(_) => {
            println!("Creating new recorder with id '{id}'");
            serde_json::json!({ "id": id })
        }
    };
    // 1.16 leaves a full capture's length out
    match spec.as_object_mut() {
        Some(o) if a.caplen == 0 => {
            o.remove("capture-length");
        }
        _ => spec["capture-length"] = a.caplen.into(),
    }
    let filters = a
        .filters
        .iter()
        .map(|f| filter(f))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let count = filters.len();
    spec["filters"] = filters.into();
    let body = spec.to_string();
    match client.raw(
        "PUT",
        &format!("/recorder/{id}"),
        &[],
        Some(body.as_bytes()),
    ) {
        Ok(r) if r.status == 201 => println!("Added recorder with {count} filter"),
        Ok(r) if r.status == 200 => println!("Updated recorder with {count} filter"),
        Ok(r) => {
            let msg = serde_json::from_slice::<String>(&r.body).unwrap_or_default();
            let what = match r.status {
                403 => "putRecorderIdForbidden ".to_owned(),
                500 => format!("putRecorderIdFailure  {msg}"),
                n => anyhow::bail!("Cannot add/update recorder: [PUT /recorder/{{id}}] PutRecorderID (status {n}): {{}}"),
            };
            anyhow::bail!(
                "Cannot add/update recorder: [PUT /recorder/{{id}}][{}] {what}",
                r.status
            )
        }
        Err(e) => anyhow::bail!("Cannot add/update recorder: {e}"),
    }
    Ok(ExitCode::SUCCESS)
}

fn delete(client: &api::Client, id: Option<&str>) -> anyhow::Result<ExitCode> {
    let path = ["recorder", "delete"];
    let text = match id {
        None => return Ok(crate::usage_error(&path, "Missing recorder id argument")),
        Some("") => return Ok(crate::usage_error(&path, "Empty recorder id argument")),
        Some(t) => t,
    };
    let n: i64 = text
        .parse()
        .map_err(|_| anyhow::anyhow!("Unable to parse recorder ID: {text}"))?;
    match client.call("DELETE", &format!("/recorder/{n}"), &[], None) {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            let why = match e.status() {
                Some(403) => "[DELETE /recorder/{id}][403] deleteRecorderIdForbidden ".to_owned(),
                Some(404) => "[DELETE /recorder/{id}][404] deleteRecorderIdNotFound ".to_owned(),
                _ => e.to_string(),
            };
            anyhow::bail!("Cannot delete recorder '{n}': {why}\n")
        }
    }
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
        Command::Update(a) => return update(&client, a),
        Command::Delete { id } => return delete(&client, id.as_deref()),
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
