//! Traffic between pods, shown the way a user would check it.

use crate::layout::{self, Layout};
use anyhow::Context;
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

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
    let (sns, cns): (PathBuf, PathBuf) = (l.netns(server), l.netns(client));
    let (tx, rx) = std::sync::mpsc::channel();
    let srv = std::thread::spawn(move || -> anyhow::Result<()> {
        netdev::NetNs::open(&sns)?.enter()?;
        let listener = std::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))?;
        tx.send(()).ok();
        let (mut s, peer) = listener.accept()?;
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf)?;
        s.write_all(format!("pong to {peer}: {}", String::from_utf8_lossy(&buf[..n])).as_bytes())?;
        Ok(())
    });
    rx.recv_timeout(Duration::from_secs(5))
        .context("server did not start")?;
    let cli = std::thread::spawn(move || -> anyhow::Result<String> {
        netdev::NetNs::open(&cns)?.enter()?;
        let mut s = std::net::TcpStream::connect_timeout(
            &(server_ip, port).into(),
            Duration::from_secs(5),
        )?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"ping")?;
        let mut reply = String::new();
        s.read_to_string(&mut reply)?;
        Ok(reply)
    });
    let reply = cli.join().expect("client thread")?;
    srv.join().expect("server thread")?;
    println!("    reply: {reply}");
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
