//! The observability targets on one node with a real agent:
//!
//! - event throughput: a paced UDP stream between two pods with
//!   monitor-aggregation none (one trace notification per packet) at rising
//!   rates (the sender shares the 2 cores, so what it manages is shown
//!   too), counting what the agent read and what the rings lost, against
//!   the same stream read by a bare ring reader that only counts (the
//!   agent stopped; its programs keep writing);
//! - the per-packet cost of tracing every packet: pod-to-pod TCP
//!   throughput with monitor-aggregation none against medium, with a
//!   `cilium monitor` client attached.

use crate::{goals, scaled};
use anyhow::Context;
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testsupport::cluster::Cluster;
use testsupport::node::Node;

const RATES: [u64; 5] = [10_000, 25_000, 50_000, 100_000, 200_000];
/// How long each rate is held.
fn step() -> Duration {
    scaled(Duration::from_secs(2), Duration::from_millis(500))
}

fn rates() -> &'static [u64] {
    scaled(&RATES[..], &RATES[..1])
}
const PROM_PORT: u16 = 9962;

/// Sends UDP datagrams from the netns at `client` to ip:9 at `rate` a
/// second for `step()`; returns how many left.
fn paced_udp(client: &std::path::Path, ip: Ipv4Addr, rate: u64) -> anyhow::Result<u64> {
    let ns = netdev::NetNs::open(client)?;
    std::thread::scope(|s| {
        s.spawn(|| -> anyhow::Result<u64> {
            ns.enter()?;
            let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
            sock.connect((ip, 9))?;
            let t = Instant::now();
            let (mut tried, mut sent) = (0u64, 0u64);
            while t.elapsed() < step() {
                let due = (t.elapsed().as_secs_f64() * rate as f64) as u64;
                while tried < due {
                    tried += 1;
                    // A refused send (full buffer) is not counted as sent.
                    if sock.send(b"event-bench").is_ok() {
                        sent += 1;
                    }
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            Ok(sent)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("sender panicked"))?
    })
}

/// Holds port 9 open in the server pod, so datagrams are taken in rather
/// than answered with ICMP (which would be more events).
fn sink(server: &std::path::Path) -> anyhow::Result<UdpSocket> {
    let ns = netdev::NetNs::open(server)?;
    std::thread::scope(|s| {
        s.spawn(|| -> anyhow::Result<UdpSocket> {
            ns.enter()?;
            Ok(UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 9))?)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("sink thread panicked"))?
    })
}

/// The sum of a Prometheus family's samples on the node.
fn scraped_sum(text: &str, family: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(family) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// (read, lost) by the agent so far, and the lost by where (Hubble's
/// `source` label: the kernel's rings or the observer's queue).
fn agent_counts() -> (u64, u64, Vec<String>) {
    let text = testsupport::node::scrape(testsupport::topology::node_ip(1), PROM_PORT);
    let by_source = text
        .lines()
        .filter(|l| l.starts_with("hubble_lost_events_total{"))
        .map(str::to_owned)
        .collect();
    (
        scraped_sum(&text, "hubble_flows_processed_total"),
        scraped_sum(&text, "hubble_lost_events_total"),
        by_source,
    )
}

struct Step {
    rate: u64,
    sent: u64,
    read: u64,
    lost: u64,
}

fn print_steps(name: &str, steps: &[Step]) -> u64 {
    println!("  {name}:");
    let mut best = 0;
    for s in steps {
        let lossless = s.lost == 0;
        println!(
            "    offered {:>7}/s   sent {:>8.0}/s   read {:>8.0}/s   lost {:>8}{}",
            s.rate,
            s.sent as f64 / step().as_secs_f64(),
            s.read as f64 / step().as_secs_f64(),
            s.lost,
            if lossless { "" } else { "  (loss)" }
        );
        if lossless && s.read > 0 {
            best = best.max((s.read as f64 / step().as_secs_f64()) as u64);
        }
    }
    best
}

/// Counts what a bare reader gets from the rings while `f` runs.
fn bare_reader_counts(
    node: &Node,
    f: impl FnOnce() -> anyhow::Result<u64>,
) -> anyhow::Result<(u64, u64)> {
    let mut reader = datapath::events::EventReader::open(&node.bpffs())?;
    let stop = Arc::new(AtomicBool::new(false));
    let (read, lost) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let handle = {
        let (stop, read, lost) = (stop.clone(), read.clone(), lost.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                reader.poll(50, &mut |_, rec| match rec {
                    datapath::events::Record::Sample(_) => {
                        read.fetch_add(1, Ordering::Relaxed);
                    }
                    datapath::events::Record::Lost(n) => {
                        lost.fetch_add(n, Ordering::Relaxed);
                    }
                });
            }
        })
    };
    f()?;
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("reader panicked"))?;
    Ok((read.load(Ordering::Relaxed), lost.load(Ordering::Relaxed)))
}

pub fn run_bench(secs: u32) -> anyhow::Result<()> {
    let mut cluster = Cluster::new(
        1,
        &[
            &format!("--prometheus-serve-addr=:{PROM_PORT}"),
            "--monitor-aggregation=none",
        ],
    );
    let node = &mut cluster.nodes[0];
    node.quiet = true;
    node.start_agent();
    let server = node.add_pod("server");
    node.add_pod("client");
    let (sns, cns) = (node.netns("server"), node.netns("client"));
    let _sink = sink(&sns).context("binding the sink")?;
    // A monitor client, as a user watching would have.
    let mut watcher = std::process::Command::new(testsupport::bin("cilium"))
        .arg("-H")
        .arg(format!("unix://{}", node.socket().display()))
        .args(["monitor", "-o", "json"])
        .stdout(std::process::Stdio::null())
        .spawn()?;

    // Tracing every packet against medium (new and closing packets only).
    let [none, medium] = crate::iperf_per_setting(
        node,
        [
            "MonitorAggregationLevel=None",
            "MonitorAggregationLevel=Medium",
        ],
        (&sns, &cns, server, secs),
    )?;
    println!("per-packet cost of monitor-aggregation none (iperf3 pod to pod, {secs} s, median of 3, cilium monitor attached):");
    println!("  none (every packet traced)   {:7.2} Gbit/s", none / 1e9);
    println!("  baseline: medium             {:7.2} Gbit/s", medium / 1e9);
    println!(
        "  ratio {:.2}x   {}",
        none / medium,
        goals::at_least(
            "every packet traced vs aggregation medium, throughput",
            none / medium,
            goals::TRACE_ALL_THROUGHPUT
        )
    );

    // Event throughput, through the agent.
    node.cilium_ok(&["config", "MonitorAggregationLevel=None"]);
    let mut agent_steps = Vec::new();
    let mut lost_by = Vec::new();
    for &rate in rates() {
        let (r0, l0, _) = agent_counts();
        let sent = paced_udp(&cns, server, rate)?;
        std::thread::sleep(Duration::from_millis(300));
        let (r1, l1, by) = agent_counts();
        lost_by = by;
        agent_steps.push(Step {
            rate,
            sent,
            read: r1 - r0,
            lost: l1 - l0,
        });
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
    // The same, read by a bare counting reader (the agent stopped; the
    // programs and the runtime config stay).
    node.kill_agent();
    let mut bare_steps = Vec::new();
    for &rate in rates() {
        let mut sent = 0;
        let (read, lost) = bare_reader_counts(node, || {
            sent = paced_udp(&cns, server, rate)?;
            Ok(sent)
        })?;
        bare_steps.push(Step {
            rate,
            sent,
            read,
            lost,
        });
    }
    println!(
        "event throughput without loss (paced UDP pod to pod, one trace event per packet, {:.1} s per rate):",
        step().as_secs_f64()
    );
    let agent = print_steps(
        "cilium-agent (decode, keep for observe, stream to a monitor client)",
        &agent_steps,
    );
    if !lost_by.is_empty() {
        println!("    lost in all, by where: {}", lost_by.join(", "));
    }
    let bare = print_steps("baseline: bare ring reader (count only)", &bare_steps);
    println!(
        "  highest lossless rate: agent {agent}/s, bare reader {bare}/s, ratio {:.2}x   {}",
        agent as f64 / bare.max(1) as f64,
        goals::at_least(
            "events lossless, agent vs bare ring reader",
            agent as f64 / bare.max(1) as f64,
            goals::EVENTS_LOSSLESS
        )
    );
    anyhow::ensure!(
        agent_steps[0].read > 0,
        "the agent read no event at {}/s",
        agent_steps[0].rate
    );
    Ok(())
}
