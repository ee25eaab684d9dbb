//! Traffic between pods, shown the way a user would check it.

use crate::layout::{self, Layout};
use anyhow::Context;
use std::net::Ipv4Addr;
use std::process::Command;

pub fn ping(l: &Layout, from: &str, to: Ipv4Addr) -> anyhow::Result<bool> {
    println!("\n$ cilium-lab exec {from} -- ping -c 2 {to}");
    let st = Command::new("nsenter")
        .arg(format!("--net={}", l.netns(from).display()))
        .args(["ping", "-c", "2", "-W", "2", &to.to_string()])
        .status()
        .context("running ping")?;
    Ok(st.success())
}

/// One TCP request/response from `client` to a listener in `server`.
pub fn tcp(
    l: &Layout,
    client: &str,
    server: &str,
    server_ip: Ipv4Addr,
    port: u16,
) -> anyhow::Result<()> {
    println!("\n==> TCP {client} -> {server_ip}:{port} ({server})");
    let (_, reply) =
        netdev::netns::tcp_request(&l.netns(server), &l.netns(client), server_ip, port, b"ping")
            .with_context(|| format!("TCP from {client} to {server_ip}:{port}"))?;
    println!("    reply: {}", String::from_utf8_lossy(&reply));
    Ok(())
}

/// Runs the cilium CLI inside the node and prints what it says.
pub fn cilium(args: &[&str]) -> anyhow::Result<()> {
    println!("\n$ cilium {}", args.join(" "));
    let out = Command::new(layout::sibling("cilium")?)
        .args(args)
        .output()
        .context("running cilium")?;
    print!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
