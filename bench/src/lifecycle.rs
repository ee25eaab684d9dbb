//! The node-lifecycle targets:
//!
//! - agent start to ready (`cilium status` answers OK) on a node with 0
//!   and with 100 endpoints to restore (after kill -9), against the goal
//!   (`goals::START_TO_READY_MS`);
//! - packets lost across kill -9 and restart of both agents under a 10k
//!   packets/s UDP stream and an established TCP stream between pods on
//!   two nodes (with etcd), against the same streams with no restart.

use crate::{goals, scaled};
use anyhow::Context;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testsupport::cluster::Cluster;
use testsupport::node::{in_netns, Node};

const RATE: u32 = 10_000;

/// How long each stream runs, and when the agents die in it.
fn stream_secs() -> u32 {
    scaled(6, 2)
}

fn kill_after() -> Duration {
    scaled(Duration::from_millis(1500), Duration::from_millis(500))
}

/// Time from spawning a (killed) agent until it answers ready.
fn restart_ms(node: &mut Node) -> f64 {
    node.kill_agent();
    let t = Instant::now();
    node.start_agent();
    t.elapsed().as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn start_times() -> anyhow::Result<()> {
    let mut cluster = Cluster::new(1, &[]);
    let node = &mut cluster.nodes[0];
    node.quiet = true;
    node.start_agent();
    let (restarts, endpoints) = scaled((5, 100), (1, 3));
    let empty = median((0..restarts).map(|_| restart_ms(node)).collect());
    for i in 0..endpoints {
        node.add_pod(&format!("p{i}"));
    }
    let full = median((0..restarts).map(|_| restart_ms(node)).collect());
    let list: serde_json::Value =
        serde_json::from_str(&node.cilium_ok(&["endpoint", "list", "-o", "json"]))?;
    let listed = list
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| !testsupport::node::is_node_endpoint(e))
        .count();
    anyhow::ensure!(
        listed == endpoints,
        "{listed} pod endpoints restored of {endpoints}"
    );
    println!("agent start to ready after kill -9 (cilium status OK, median of {restarts}):");
    for (what, ms) in [
        "0 endpoints".to_owned(),
        format!("{endpoints} endpoints restored"),
    ]
    .into_iter()
    .zip([empty, full])
    {
        println!(
            "  {what:<24} {ms:7.1} ms   {}",
            goals::under(
                &format!("agent start to ready, {what}"),
                ms,
                goals::START_TO_READY_MS,
                "ms"
            )
        );
    }
    Ok(())
}

/// Runs the streams pod-a -> pod-b, killing both agents `kill_after` into
/// them (None: no restart); returns (udp lost, udp sent, tcp round trips).
fn stream(
    cluster: &mut Cluster,
    kill_after: Option<Duration>,
) -> anyhow::Result<(u64, u64, String)> {
    let script = cluster.nodes[0].dir.join("stream.py");
    std::fs::write(&script, testsupport::traffic::STREAM_PY)?;
    let b_ip = cluster.nodes[1].add_pod_if_missing("pod-b");
    cluster.nodes[0].add_pod_if_missing("pod-a");
    let mut recv = Command::new("python3");
    recv.arg(&script).arg("recv").stdout(Stdio::piped());
    in_netns(&mut recv, &cluster.nodes[1].netns("pod-b"));
    let mut recv = recv.spawn().context("python3 receiver")?;
    let mut out = std::io::BufReader::new(recv.stdout.take().context("stdout")?);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line)?;
    anyhow::ensure!(line.trim() == "ready", "receiver: {line}");
    let mut send = Command::new("python3");
    send.arg(&script)
        .args([
            "send",
            &b_ip.to_string(),
            &RATE.to_string(),
            &stream_secs().to_string(),
        ])
        .stdout(Stdio::piped());
    in_netns(&mut send, &cluster.nodes[0].netns("pod-a"));
    let send = send.spawn().context("python3 sender")?;
    if let Some(after) = kill_after {
        std::thread::sleep(after);
        for node in &mut cluster.nodes {
            node.kill_agent();
        }
        for node in &mut cluster.nodes {
            node.start_agent();
        }
    }
    let sent = String::from_utf8_lossy(&send.wait_with_output()?.stdout).into_owned();
    let mut got = String::new();
    std::io::Read::read_to_string(&mut out, &mut got)?;
    let _ = recv.wait();
    let words: Vec<&str> = got.split_whitespace().collect();
    anyhow::ensure!(words.first() == Some(&"udp"), "receiver said {got:?}");
    let (received, total): (u64, u64) = (words[1].parse()?, words[2].parse()?);
    let tcp = sent
        .split_whitespace()
        .nth(3)
        .unwrap_or("failed")
        .to_owned();
    Ok((total - received, total, tcp))
}

fn restart_loss() -> anyhow::Result<()> {
    let mut cluster = Cluster::new(2, &[]);
    for node in &mut cluster.nodes {
        node.quiet = true;
        node.start_agent();
    }
    let (base_lost, base_sent, base_tcp) = stream(&mut cluster, None)?;
    let (lost, sent, tcp) = stream(&mut cluster, Some(kill_after()))?;
    println!(
        "packets lost across kill -9 and restart of both agents ({RATE}/s UDP and a TCP stream, pod to pod across nodes, {} s):",
        stream_secs()
    );
    println!(
        "  with both agents restarted    UDP lost {lost:>5} of {sent}   TCP round trips {tcp}"
    );
    println!("  baseline: no restart          UDP lost {base_lost:>5} of {base_sent}   TCP round trips {base_tcp}");
    println!(
        "  lost beyond the baseline: {}   {}",
        lost.saturating_sub(base_lost),
        goals::holds(
            "packets lost across a restart of both agents, beyond the baseline",
            format!("{} (TCP {tcp})", lost.saturating_sub(base_lost)),
            "0, TCP unbroken",
            lost <= base_lost && tcp != "failed"
        )
    );
    Ok(())
}

pub fn run_bench() -> anyhow::Result<()> {
    start_times()?;
    restart_loss()
}
