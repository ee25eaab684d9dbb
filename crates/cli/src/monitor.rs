//! `cilium monitor`: the agent's stream of datapath events, in Cilium's
//! one-line format (or `-o json`).

use crate::Ctx;
use anyhow::Context;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Filter by event types (drop, trace, policy-verdict, l7, agent)
    #[arg(short = 't', long = "type", value_parser = ["drop", "trace", "policy-verdict", "l7", "agent", "capture", "debug"])]
    types: Vec<String>,
    /// Filter by events related to endpoint IDs
    #[arg(long = "related-to")]
    related_to: Vec<u32>,
    /// Filter by destination endpoint IDs
    #[arg(long = "to")]
    to: Vec<u32>,
    /// Enable verbose output
    #[arg(short = 'v', long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// json for the events as the agent sends them
    #[arg(short = 'o', long)]
    output: Option<String>,
}

/// The monitor socket beside the agent's API socket.
fn socket(ctx: &Ctx) -> PathBuf {
    let api = match ctx.host.as_deref() {
        Some(h) => h.strip_prefix("unix://").unwrap_or(h).to_owned(),
        None => {
            std::env::var("CILIUM_SOCK").unwrap_or_else(|_| "/var/run/cilium/cilium.sock".into())
        }
    };
    PathBuf::from(api).with_file_name("monitor1_2.sock")
}

/// Cilium's line for a trace event.
fn trace_line(ev: &serde_json::Value) -> String {
    let to = match ev["obs_point"].as_str().unwrap_or_default() {
        "to-endpoint" => format!("-> endpoint {}", ev["dst_id"]),
        "to-stack" => "-> stack".to_owned(),
        "to-overlay" => "-> overlay".to_owned(),
        "to-host" => "-> host".to_owned(),
        other => format!("-> {other}"),
    };
    format!(
        "{to} flow {:#x} , identity {}->{} state {} ifindex {} orig-ip 0.0.0.0: {}",
        ev["hash"].as_u64().unwrap_or(0),
        ev["src_label"],
        ev["dst_label"],
        ev["state"].as_str().unwrap_or_default(),
        ev["ifindex"],
        ev["summary"].as_str().unwrap_or_default()
    )
}

/// Cilium's line for a policy verdict (for these, the agent sends the
/// local endpoint as dst_id, the peer as src_label, the port as line and
/// the protocol as file).
fn verdict_line(ev: &serde_json::Value) -> String {
    format!(
        "Policy verdict log: flow {:#x} local EP ID {}, remote ID {}, proto {}, {}, action {}, auth: disabled, match {}, {}",
        ev["hash"].as_u64().unwrap_or(0),
        ev["dst_id"],
        ev["src_label"],
        ev["file"].as_str().unwrap_or_default(),
        ev["obs_point"].as_str().unwrap_or_default(),
        ev["reason_text"].as_str().unwrap_or_default(),
        ev["state"].as_str().unwrap_or_default(),
        ev["summary"].as_str().unwrap_or_default()
    )
}

/// Cilium's line for a drop event.
fn drop_line(ev: &serde_json::Value) -> String {
    format!(
        "xx drop ({}) flow {:#x} to endpoint {}, ifindex {}, file {}:{}, , identity {}->{}: {}",
        ev["reason_text"].as_str().unwrap_or_default(),
        ev["hash"].as_u64().unwrap_or(0),
        ev["dst_id"],
        ev["ifindex"],
        ev["file"].as_str().unwrap_or_default(),
        ev["line"],
        ev["src_label"],
        ev["dst_label"],
        ev["summary"].as_str().unwrap_or_default()
    )
}

pub fn run(ctx: &Ctx, args: &Args) -> anyhow::Result<ExitCode> {
    let path = socket(ctx);
    let stream = std::os::unix::net::UnixStream::connect(&path)
        .with_context(|| format!("connecting to the monitor at {}", path.display()))?;
    let mut out = std::io::stdout().lock();
    for line in BufReader::new(stream).lines() {
        let line = line.context("reading from the monitor")?;
        let ev: serde_json::Value = serde_json::from_str(&line).context("malformed event")?;
        let kind = ev["type"].as_str().unwrap_or_default();
        if kind == "hello" {
            if args.output.is_none() {
                writeln!(
                    out,
                    "Listening for events on {} CPUs with 64x4096 of shared memory\nPress Ctrl-C to quit",
                    ev["cpus"]
                )?;
                out.flush()?;
            }
            continue;
        }
        if !args.types.is_empty() && !args.types.iter().any(|t| t == kind) {
            continue;
        }
        let dst = ev["dst_id"].as_u64().unwrap_or(0) as u32;
        if !args.related_to.is_empty() && !args.related_to.contains(&dst) {
            continue;
        }
        if !args.to.is_empty() && !args.to.contains(&dst) {
            continue;
        }
        if args.output.is_some() {
            writeln!(out, "{line}")?;
        } else if kind == "drop" {
            writeln!(out, "{}", drop_line(&ev))?;
        } else if kind == "trace" {
            writeln!(out, "{}", trace_line(&ev))?;
        } else if kind == "policy-verdict" {
            writeln!(out, "{}", verdict_line(&ev))?;
        } else if kind == "lost" {
            writeln!(out, "Lost {} events", ev["len_orig"])?;
        }
        out.flush()?;
        let _ = args.verbose;
    }
    Ok(ExitCode::SUCCESS)
}
