//! Traffic between pods, shown the way a user would check it.

use crate::layout;
use anyhow::{bail, Context};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use topology::NodeDir;

pub fn ping(l: &NodeDir, from: &str, to: Ipv4Addr) -> anyhow::Result<bool> {
    println!("\n$ cilium-lab exec {from} -- ping -c 2 {to}");
    let st = Command::new("nsenter")
        .arg(format!("--net={}", l.netns(from).display()))
        .args(["ping", "-c", "2", "-W", "2", &to.to_string()])
        .status()
        .context("running ping")?;
    Ok(st.success())
}

/// Pings `to` from `from` (on the node of `holder`) until its answer is
/// `answered` or 30 s pass; returns how long it took.
fn wait_ping(
    holder: i32,
    l: &NodeDir,
    from: &str,
    to: Ipv4Addr,
    answered: bool,
) -> anyhow::Result<Option<Duration>> {
    layout::enter_node(holder)?;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        let ok = Command::new("nsenter")
            .arg(format!("--net={}", l.netns(from).display()))
            .args(["ping", "-c", "1", "-W", "1", &to.to_string()])
            .stdout(Stdio::null())
            .status()
            .context("running ping")?
            .success();
        if ok == answered {
            return Ok(Some(t.elapsed()));
        }
    }
    Ok(None)
}

/// Waits until `from` (on the node of `holder`) gets an answer from `to`:
/// a pod on another node is reachable once that node's agent published it
/// and this node's agent learned it.
pub fn wait_reachable(holder: i32, l: &NodeDir, from: &str, to: Ipv4Addr) -> anyhow::Result<()> {
    match wait_ping(holder, l, from, to, true)? {
        Some(took) => {
            println!("==> {to} reachable from {from} after {took:?}");
            Ok(())
        }
        None => bail!("{to} did not become reachable from {from} within 30s"),
    }
}

/// Waits until a policy drops `from`'s pings to `to` (every node has it);
/// false when they still pass after 30 s.
pub fn wait_blocked(holder: i32, l: &NodeDir, from: &str, to: Ipv4Addr) -> anyhow::Result<bool> {
    let blocked = wait_ping(holder, l, from, to, false)?.is_some();
    if blocked {
        println!(
            "\n==> ping {from} -> {to}: dropped by the policy (Policy denied), TCP still allowed"
        );
    } else {
        println!("\n==> ping {from} -> {to}: still answered, the policy is not enforced");
    }
    Ok(blocked)
}

/// Waits until the node of `holder` balances `vip` to `backend` (the
/// service reached it through the kvstore).
pub fn wait_service(holder: i32, vip: Ipv4Addr, backend: Ipv4Addr) -> anyhow::Result<()> {
    layout::enter_node(holder)?;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        let out = Command::new(layout::sibling("cilium")?)
            .args(["bpf", "lb", "list"])
            .output()
            .context("running cilium")?;
        let text = String::from_utf8_lossy(&out.stdout);
        if text.contains(&vip.to_string()) && text.contains(&backend.to_string()) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("service {vip} never reached this node")
}

/// A pod's network namespace, opened from inside its node (where it is mounted).
pub fn open_pod(holder: i32, l: &NodeDir, pod: &str) -> anyhow::Result<netdev::NetNs> {
    layout::enter_node(holder)?;
    netdev::NetNs::open(&l.netns(pod)).with_context(|| format!("opening the netns of {pod}"))
}

/// One TCP request/response from `client` to a listener in `server`.
pub fn tcp(
    client_ns: netdev::NetNs,
    client: &str,
    server_ns: netdev::NetNs,
    server: &str,
    server_ip: Ipv4Addr,
    port: u16,
) -> anyhow::Result<()> {
    println!("\n==> TCP {client} -> {server_ip}:{port} ({server})");
    let (_, reply) = netdev::netns::tcp_request(server_ns, client_ns, server_ip, port, b"ping")
        .with_context(|| format!("TCP from {client} to {server_ip}:{port}"))?;
    println!("    reply: {}", String::from_utf8_lossy(&reply));
    Ok(())
}

/// One message from `client` (its namespace `client_ns`) to the built-in
/// server of `server` at `ip:port`, which answers with its pod's name.
pub fn talk(
    client_ns: netdev::NetNs,
    client: &str,
    server: &str,
    ip: Ipv4Addr,
    port: u16,
) -> anyhow::Result<()> {
    println!("\n==> TCP {client} -> {ip}:{port} ({server})");
    // a thread of its own enters the pod, so this one stays where it is
    let reply = std::thread::spawn(move || -> anyhow::Result<Vec<u8>> {
        client_ns.enter()?;
        crate::connect::exchange((ip, port).into(), false, b"ping")
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the client thread panicked"))?
    .with_context(|| format!("TCP from {client} to {ip}:{port}"))?;
    let reply = String::from_utf8_lossy(&reply);
    println!("    reply: {reply}");
    if !reply.starts_with(&format!("{server}: ")) {
        bail!("{ip}:{port} answered {reply:?}, not {server}");
    }
    Ok(())
}

/// A message from `client` to the outside host, which answers with the
/// address it saw: the node's (`node_ip`) when the pod's traffic was
/// masqueraded.
pub fn outside(client_ns: netdev::NetNs, client: &str, node_ip: Ipv4Addr) -> anyhow::Result<bool> {
    let target = (topology::OUTSIDE_IP, crate::outside::PORT);
    println!(
        "\n==> TCP {client} -> {}:{} (the outside host, no node of the cluster)",
        target.0, target.1
    );
    let reply = std::thread::spawn(move || -> anyhow::Result<Vec<u8>> {
        client_ns.enter()?;
        crate::connect::exchange(target.into(), false, b"hello")
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the client thread panicked"))?
    .with_context(|| format!("TCP from {client} to the outside host"))?;
    let seen = String::from_utf8_lossy(&reply).trim().to_owned();
    let masqueraded = seen.starts_with(&format!("{node_ip}:"));
    println!(
        "    it saw the client at {seen}{}",
        if masqueraded {
            " (the node's address: masqueraded)"
        } else {
            ""
        }
    );
    Ok(masqueraded)
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
