//! Pods reaching a host outside the cluster through masquerading: TCP
//! throughput (iperf3) and connection rate from a pod to the lab's outside
//! host, with BPF masquerading against iptables masquerading (Cilium's
//! default), two one-node labs up side by side and measured in turns.

use crate::{goals, interleaved, iperf_bits_per_second, run};
use anyhow::Context;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const OUTSIDE: &str = "198.18.0.254";
/// The outside host's own server answers a line with a line.
const OUTSIDE_PORT: u16 = 80;
const IPERF_PORT: &str = "5201";

/// A one-node lab of its own (its own CILIUM_LAB_DIR), down at drop.
struct Lab {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Lab {
    fn up(settings: &[&str]) -> anyhow::Result<Self> {
        let bin = std::env::current_exe()?
            .parent()
            .context("the bench's directory")?
            .join("cilium-lab");
        let lab = Self {
            dir: tempfile::tempdir()?,
            bin,
        };
        let mut args = vec![
            "up",
            "--without-kubernetes",
            "--nodes",
            "1",
            "--pod",
            "client",
        ];
        for s in settings {
            args.extend(["--set", s]);
        }
        run(&mut lab.cmd(&args)).context("cilium-lab up")?;
        Ok(lab)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.env("CILIUM_LAB_DIR", self.dir.path()).args(args);
        c
    }

    /// `cilium-lab exec <target> -- args...`
    fn exec(&self, target: &str, args: &[&str]) -> Command {
        let mut all = vec!["exec", target, "--"];
        all.extend(args);
        self.cmd(&all)
    }

    fn iperf(&self, secs: u32) -> anyhow::Result<f64> {
        let mut server: Child = self
            .exec("outside", &["iperf3", "-s", "-1", "-p", IPERF_PORT])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting iperf3 on the outside host")?;
        std::thread::sleep(Duration::from_millis(300));
        let secs = secs.to_string();
        let out = run(&mut self.exec(
            "client",
            &["iperf3", "-c", OUTSIDE, "-p", IPERF_PORT, "-J", "-t", &secs],
        ));
        let _ = server.kill();
        let _ = server.wait();
        iperf_bits_per_second(&out?)
    }

    /// Connections a second from the pod to the outside host, each one
    /// line there and back.
    fn conn_rate(&self, secs: u32) -> anyhow::Result<f64> {
        let bench = std::env::current_exe()?;
        let bench = bench.to_string_lossy();
        let (port, secs) = (OUTSIDE_PORT.to_string(), secs.to_string());
        let out = run(&mut self.exec("client", &[&bench, "conn-rate", OUTSIDE, &port, &secs]))?;
        out.trim().parse().context("the conn-rate client's answer")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.cmd(&["down"]).output();
    }
}

pub fn run_bench(secs: u32) -> anyhow::Result<()> {
    println!("\n== Masquerading: pod to the outside host, BPF against iptables (same run) ==");
    let iptables = Lab::up(&[])?;
    let bpf = Lab::up(&["enable-bpf-masquerade=true"])?;
    // the first connections wait for ARP; neither lab measures that
    iptables.conn_rate(1)?;
    bpf.conn_rate(1)?;
    let [t_bpf, t_ipt] = interleaved(3, [&mut || bpf.iperf(secs), &mut || iptables.iperf(secs)])?;
    println!(
        "TCP throughput (iperf3 {secs}s, median of 3): BPF {:.2} Gbit/s, iptables {:.2} Gbit/s, ratio {:.2}   {}",
        t_bpf / 1e9,
        t_ipt / 1e9,
        t_bpf / t_ipt,
        goals::at_least(
            "BPF masquerade vs iptables masquerade, throughput",
            t_bpf / t_ipt,
            goals::MASQ_THROUGHPUT
        )
    );
    let [c_bpf, c_ipt] = interleaved(
        3,
        [&mut || bpf.conn_rate(secs), &mut || {
            iptables.conn_rate(secs)
        }],
    )?;
    println!(
        "TCP connection rate ({secs}s, median of 3): BPF {c_bpf:.0}/s, iptables {c_ipt:.0}/s, ratio {:.2}   {}",
        c_bpf / c_ipt,
        goals::at_least(
            "BPF masquerade vs iptables masquerade, connection rate",
            c_bpf / c_ipt,
            goals::MASQ_CONN_RATE
        )
    );
    Ok(())
}
