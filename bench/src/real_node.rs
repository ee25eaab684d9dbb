//! The real-node targets (issue 30), on labs of real kubelets and
//! containerd (`cilium-lab up`), each against the same lab with Debian's
//! reference `bridge` CNI plugin instead of Cilium (`--cni bridge`), made
//! in turn in the same run:
//!
//! - pod create to Running through the real kubelet, p50/p99 over N pods
//!   (default 50) made one after another on one node: from the API
//!   server's answer to the create until a watch sees the pod Running;
//! - node boot: the last kubelet's start until every node is Ready (and,
//!   with Cilium, untainted), on 2 and 3 nodes; and with Cilium,
//!   `kubectl apply` of deploy/kubernetes until every agent is Ready;
//! - the agent's memory as a container (its cgroup's RSS), next to the
//!   node's containerd and kubelet (their processes' RSS).

use crate::{goals, latency_line, run, scaled};
use anyhow::{bail, Context};
use std::io::{BufRead, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.56";

/// A lab of the bench's own, taken down when dropped.
pub(crate) struct Lab {
    dir: tempfile::TempDir,
    /// What `up` printed.
    up: String,
}

impl Lab {
    pub(crate) fn up(nodes: usize, cni: &str) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let mut lab = Self {
            dir,
            up: String::new(),
        };
        let nodes = nodes.to_string();
        lab.up = run(&mut lab.cmd(&["up", "--nodes", &nodes, "--cni", cni]))
            .with_context(|| format!("cilium-lab up --nodes {nodes} --cni {cni}"))?;
        Ok(lab)
    }

    pub(crate) fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(testsupport::bin("cilium-lab"));
        c.env("CILIUM_LAB_DIR", self.dir.path()).args(args);
        c
    }

    fn kubectl(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut all = vec!["kubectl"];
        all.extend_from_slice(args);
        run(&mut self.cmd(&all))
    }

    /// The duration `up` printed on the line starting with `prefix`, as
    /// `{:?}` prints one (`12.3s`, `850ms`), in seconds.
    fn printed(&self, prefix: &str) -> anyhow::Result<f64> {
        let line = self
            .up
            .lines()
            .find(|l| l.starts_with(prefix))
            .with_context(|| format!("`up` printed no line {prefix:?}"))?;
        let word = line
            .split_whitespace()
            .find(|w| w.starts_with(|c: char| c.is_ascii_digit()) && w.ends_with('s'))
            .with_context(|| format!("no duration in {line:?}"))?;
        parse_debug_duration(word)
    }

    /// Host pid of a process of node1 named `comm` (the node's own, below
    /// its init).
    fn node_process(&self, comm: &str) -> anyhow::Result<u32> {
        let init: u32 = std::fs::read_to_string(self.dir.path().join("node1/holder.pid"))?
            .trim()
            .parse()?;
        for e in std::fs::read_dir("/proc")? {
            let Some(pid) = e?.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if name.trim() == comm && parent(pid) == Some(init) {
                return Ok(pid);
            }
        }
        bail!("no {comm} process on node1")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.cmd(&["down"]).output();
    }
}

fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "<pid> (<comm>) <state> <ppid> ..."
    stat.rsplit_once(") ")?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `1.5s`, `850ms`, `90µs` in seconds.
pub(crate) fn parse_debug_duration(s: &str) -> anyhow::Result<f64> {
    let s = s.trim_end_matches([')', ',']);
    for (unit, scale) in [("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9), ("s", 1.0)] {
        if let Some(n) = s.strip_suffix(unit) {
            return Ok(n.parse::<f64>().with_context(|| format!("{s:?}"))? * scale);
        }
    }
    bail!("{s:?} is not a duration")
}

/// Makes `count` pods on node1 one after another, each timed from the API
/// server's answer to its create until the watch sees it Running; ms.
fn pod_starts(lab: &Lab, count: usize) -> anyhow::Result<Vec<f64>> {
    let mut watch = lab
        .cmd(&[
            "kubectl",
            "get",
            "pods",
            "-l",
            "bench=pods",
            "--watch",
            "-o",
            r#"jsonpath={.metadata.name} {.status.phase}{"\n"}"#,
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("kubectl get pods --watch")?;
    let (tx, rx) = mpsc::channel();
    let out = watch.stdout.take().context("watch output")?;
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send((line, Instant::now())).is_err() {
                return;
            }
        }
    });
    let result = (|| {
        let mut took = Vec::with_capacity(count);
        for i in 0..count {
            let name = format!("bench-{i}");
            let pod = serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {"bench": "pods"}},
                "spec": {
                    "nodeName": "node1",
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "c", "image": AGNHOST, "args": ["pause"]}],
                },
            });
            let mut create = lab
                .cmd(&["kubectl", "create", "-f", "-"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()?;
            create
                .stdin
                .take()
                .context("stdin")?
                .write_all(pod.to_string().as_bytes())?;
            if !create.wait()?.success() {
                bail!("kubectl create {name} failed");
            }
            let created = Instant::now();
            let running = format!("{name} Running");
            loop {
                let (line, at) = rx
                    .recv_timeout(Duration::from_secs(60))
                    .with_context(|| format!("{name} not Running within 60 s"))?;
                if line.trim() == running {
                    took.push(at.saturating_duration_since(created).as_secs_f64() * 1000.0);
                    break;
                }
            }
        }
        Ok(took)
    })();
    let _ = watch.kill();
    let _ = watch.wait();
    result
}

/// The agent container's resident memory from its memory cgroup, in MB:
/// anonymous and mapped file pages (cgroup v1's `total_rss` +
/// `total_mapped_file`, v2's `anon` + `file_mapped`), as a process's RSS
/// counts them; and the host pid of its process.
fn agent_cgroup_rss_mb(lab: &Lab) -> anyhow::Result<(f64, u32)> {
    let id = lab.kubectl(&[
        "get",
        "pods",
        "-n",
        "kube-system",
        "-l",
        "k8s-app=cilium",
        "-o",
        r#"jsonpath={.items[0].status.containerStatuses[?(@.name=="cilium-agent")].containerID}"#,
    ])?;
    let id = id.trim().trim_start_matches("containerd://");
    anyhow::ensure!(!id.is_empty(), "the agent has no container id");
    let found = run(Command::new("find").args([
        "/sys/fs/cgroup",
        "-maxdepth",
        "10",
        "-type",
        "d",
        "-name",
        &format!("*{id}*"),
    ]))
    .unwrap_or_default();
    for dir in found.lines() {
        let Ok(stat) = std::fs::read_to_string(format!("{dir}/memory.stat")) else {
            continue;
        };
        let value = |key: &str| -> Option<f64> {
            stat.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse().ok())
        };
        let bytes = match (value("total_rss"), value("anon")) {
            (Some(rss), _) => rss + value("total_mapped_file").unwrap_or(0.0),
            (None, Some(anon)) => anon + value("file_mapped").unwrap_or(0.0),
            _ => continue,
        };
        let procs = std::fs::read_to_string(format!("{dir}/cgroup.procs"))?;
        let pid = procs
            .split_whitespace()
            .next()
            .context("the agent's cgroup has no process")?
            .parse()?;
        return Ok((bytes / (1024.0 * 1024.0), pid));
    }
    bail!("no memory cgroup of the agent's container {id}")
}

pub fn run_bench(pods: usize) -> anyhow::Result<()> {
    println!("real nodes: pod create to Running through kubelet and containerd, {pods} pods one after another on one node:");
    let (mut ours, memory) = {
        let lab = Lab::up(1, "cilium")?;
        let took = pod_starts(&lab, pods)?;
        let (agent, pid) = agent_cgroup_rss_mb(&lab)?;
        let agent_process = crate::rss_mb(pid)?;
        let kubelet = crate::rss_mb(lab.node_process("kubelet")?)?;
        let containerd = crate::rss_mb(lab.node_process("containerd")?)?;
        (took, (agent, agent_process, kubelet, containerd))
    };
    let mut bridge = {
        let lab = Lab::up(1, "bridge")?;
        pod_starts(&lab, pods)?
    };
    let (p50, p99) = latency_line("cilium-cni", &mut ours);
    let (b50, b99) = latency_line("bridge (Debian's plugin)", &mut bridge);
    println!(
        "  ratio to bridge: p50 {:.2}x, p99 {:.2}x   {}",
        p50 / b50,
        p99 / b99,
        goals::at_most(
            "real node: pod create to Running vs bridge (p50)",
            p50 / b50,
            goals::REAL_NODE_RATIO
        )
    );

    println!(
        "real nodes: node boot (the last kubelet's start until every node is Ready and untainted; with Cilium this holds its install, applied once every node registered):"
    );
    // A smoke run skips the boots: the endpoints-latency section boots the
    // same 2-node labs of both kinds right after, and CI's time is short.
    for &nodes in scaled(&[2, 3][..], &[][..]) {
        let (boot, install) = {
            let lab = Lab::up(nodes, "cilium")?;
            (
                lab.printed("==> every node Ready and untainted")?,
                lab.printed("==> DaemonSet cilium: every agent Ready")?,
            )
        };
        let base = Lab::up(nodes, "bridge")?.printed("==> every node Ready")?;
        println!(
            "  {nodes} nodes: Cilium {boot:6.2} s, bridge {base:6.2} s, ratio {:.2}x; kubectl apply of deploy/kubernetes to every agent Ready {install:6.2} s",
            boot / base
        );
    }

    let (agent, agent_process, kubelet, containerd) = memory;
    println!("real nodes: memory on a node with {pods} pods made:");
    println!("  cilium-agent (its container's cgroup RSS) {agent:7.1} MB   (its process's RSS {agent_process:.1} MB)");
    println!(
        "  kubelet (process RSS)                     {kubelet:7.1} MB   agent/kubelet {:.2}x",
        agent / kubelet
    );
    println!(
        "  containerd (process RSS)                  {containerd:7.1} MB   agent/containerd {:.2}x",
        agent / containerd
    );
    Ok(())
}
