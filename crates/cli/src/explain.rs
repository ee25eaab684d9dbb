//! `cilium explain <src> <dst>`: each map the datapath would consult for a
//! new flow, its decision, and the verdict.

use crate::Ctx;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Source: a pod ([namespace:]name) or an IPv4 address
    src: String,
    /// Destination: a pod, an IPv4 address or a service frontend
    dst: String,
    /// Destination port
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Protocol: TCP, UDP or ICMP
    #[arg(long, default_value = "TCP")]
    proto: String,
    #[arg(short = 'o', long)]
    output: Option<String>,
}

pub fn run(ctx: &Ctx, a: &Args) -> anyhow::Result<ExitCode> {
    let body = serde_json::json!({
        "src": a.src, "dst": a.dst, "port": a.port, "protocol": a.proto,
    });
    let resp = ctx
        .client()?
        .call("GET", "/explain", &[], Some(&serde_json::to_vec(&body)?))?;
    let resp: serde_json::Value = serde_json::from_slice(&resp)?;
    if a.output.is_some() {
        crate::table::print_json(&resp)?;
        return Ok(ExitCode::SUCCESS);
    }
    for (i, step) in resp["steps"].as_array().into_iter().flatten().enumerate() {
        println!("{:>2}. {}", i + 1, step.as_str().unwrap_or_default());
    }
    let verdict = resp["verdict"].as_str().unwrap_or_default();
    match resp["reason"].as_str().filter(|r| !r.is_empty()) {
        Some(reason) => println!("Verdict: {} ({reason})", verdict.to_uppercase()),
        None => println!("Verdict: {}", verdict.to_uppercase()),
    }
    Ok(ExitCode::SUCCESS)
}
