//! The node-lifecycle targets:
//!
//! - agent start to ready (`cilium status` answers OK) on a node with 0
//!   and with 100 endpoints to restore (after kill -9), against the 300 ms
//!   and 1 s targets;
//! - packets lost across kill -9 and restart of both agents under a 10k
//!   packets/s UDP stream and an established TCP stream between pods on
//!   two nodes (with etcd), against the same streams with no restart.

use crate::verdict;
use anyhow::Context;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use testsupport::cluster::Cluster;
use testsupport::node::{in_netns, Node};

const START_TARGET_MS: [f64; 2] = [300.0, 1000.0];
const RATE: u32 = 10_000;
const SECS: u32 = 6;

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
    let empty = median((0..5).map(|_| restart_ms(node)).collect());
    for i in 0..100 {
        node.add_pod(&format!("p{i}"));
    }
    let full = median((0..5).map(|_| restart_ms(node)).collect());
    let list: serde_json::Value =
        serde_json::from_str(&node.cilium_ok(&["endpoint", "list", "-o", "json"]))?;
    let listed = list
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| !testsupport::node::is_node_endpoint(e))
        .count();
    anyhow::ensure!(listed == 100, "{listed} pod endpoints restored of 100");
    println!("agent start to ready after kill -9 (cilium status OK, median of 5):");
    for ((what, ms), target) in [("0 endpoints", empty), ("100 endpoints restored", full)]
        .into_iter()
        .zip(START_TARGET_MS)
    {
        println!(
            "  {what:<24} {ms:7.1} ms   ratio to the {target} ms target {:.2}x: {}",
            ms / target,
            verdict(ms < target)
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
            &SECS.to_string(),
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
    let (lost, sent, tcp) = stream(&mut cluster, Some(Duration::from_millis(1500)))?;
    println!("packets lost across kill -9 and restart of both agents ({RATE}/s UDP and a TCP stream, pod to pod across nodes, {SECS} s):");
    println!(
        "  with both agents restarted    UDP lost {lost:>5} of {sent}   TCP round trips {tcp}"
    );
    println!("  baseline: no restart          UDP lost {base_lost:>5} of {base_sent}   TCP round trips {base_tcp}");
    println!(
        "  lost beyond the baseline: {}   target 0 with TCP unbroken: {}",
        lost.saturating_sub(base_lost),
        verdict(lost <= base_lost && tcp != "failed")
    );
    Ok(())
}

pub fn run_bench() -> anyhow::Result<()> {
    start_times()?;
    restart_loss()
}
