//! Kubernetes' own `Service endpoints latency` conformance test (e2e.test,
//! scripts/build-e2e.sh) on two real nodes with Cilium, and again on two
//! nodes with Debian's `bridge` plugin and kube-proxy in iptables mode,
//! built from the same release: the p50, p90 and p99 the test logs (each
//! of 200 Services, created 50 at a time, until a watch sees its
//! Endpoints name the test's pod).

use crate::goals;
use crate::real_node::{parse_debug_duration, Lab};
use anyhow::{bail, Context};
use std::process::Command;

const FOCUS: &str = r"Service endpoints latency should not be very high \[Conformance\]";

/// The test's (p50, p90, p99) on `lab`, in ms.
fn percentiles(lab: &Lab, e2e: &str) -> anyhow::Result<[f64; 3]> {
    let out = lab
        .cmd(&[
            "admin",
            "--",
            e2e,
            "--provider=skeleton",
            &format!("--ginkgo.focus={FOCUS}"),
            "--ginkgo.v",
            "--ginkgo.no-color",
        ])
        .output()
        .context("running e2e.test")?;
    // the suite's log lines go to either stream
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        bail!("e2e.test failed: {}", tail(&log, 30));
    }
    let mut found = [0.0; 3];
    for (slot, p) in found.iter_mut().zip(["50", "90", "99"]) {
        let marker = format!("{p} %ile: ");
        let word = log
            .lines()
            .find_map(|l| l.split_once(&marker).map(|(_, v)| v.trim()))
            .with_context(|| {
                format!(
                    "e2e.test logged no {p}th percentile; it ended with:\n{}",
                    tail(&log, 15)
                )
            })?;
        *slot = parse_debug_duration(word)? * 1000.0;
    }
    Ok(found)
}

/// The last `n` lines of `log`.
fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn build_e2e() -> anyhow::Result<String> {
    let release = testsupport::bin("cilium-lab");
    let workspace = release
        .parent()
        .and_then(|p| p.parent())
        .and_then(|p| p.parent())
        .context("cilium-lab is not in a workspace's target/release")?;
    // the first build downloads modules: not from a sandbox's netns
    let script = workspace.join("scripts/build-e2e.sh");
    let out = crate::in_start_netns(|| crate::run(&mut Command::new(&script)))?;
    Ok(out.trim().to_owned())
}

pub fn run_bench() -> anyhow::Result<()> {
    println!(
        "Kubernetes e2e `Service endpoints latency` (200 Services, 50 at a time), 2 real nodes:"
    );
    let e2e = build_e2e()?;
    let ours = percentiles(&Lab::up(2, "cilium")?, &e2e)?;
    let base = percentiles(&Lab::up(2, "bridge")?, &e2e)?;
    let line = |name: &str, [p50, p90, p99]: [f64; 3]| {
        println!("  {name:40} p50 {p50:7.1} ms  p90 {p90:7.1} ms  p99 {p99:7.1} ms");
    };
    line("Cilium (kube-proxy replacement)", ours);
    line("bridge + kube-proxy (iptables)", base);
    println!(
        "  ratio: p50 {:.2}x, p90 {:.2}x, p99 {:.2}x   {}",
        ours[0] / base[0],
        ours[1] / base[1],
        ours[2] / base[2],
        goals::at_most(
            "Kubernetes e2e Service endpoints latency vs kube-proxy (p50)",
            ours[0] / base[0],
            goals::REAL_NODE_RATIO
        )
    );
    Ok(())
}
