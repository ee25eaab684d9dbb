//! cilium-operator's target: from a Node appearing to its CiliumNode
//! having a pod CIDR and its agent being ready, with 1 and with N nodes
//! joining at once, against Kubernetes' own node IPAM in the same run
//! (kube-controller-manager's `--allocate-node-cidrs` writing
//! `Node.spec.podCIDRs`, the agents with `ipam=kubernetes`).
//!
//! One sandbox holds the nodes on one underlay, etcd, kube-apiserver,
//! kube-controller-manager and one operator replica. Each round applies
//! its Nodes in one request and starts their agents at the same moment;
//! the agents (the DaemonSet's ServiceAccount) create their CiliumNodes
//! and wait for a CIDR. Rounds use nodes of their own, so nothing of an
//! earlier round is restored; cluster-pool and the baseline take turns.

use crate::{goals, latency_line};
use anyhow::Context;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use testsupport::cluster::Cluster;
use testsupport::kube;
use testsupport::topology;

/// How long one round may take before the bench gives up.
const ROUND_LIMIT: Duration = Duration::from_secs(180);

/// The client rate limits Cilium's chart sets for Kubernetes 1.27 and
/// later, for the operator as for the agents (kube-controller-manager
/// keeps its own defaults, 20 and 30).
const CLIENT_QPS: &str = "--k8s-client-qps=10";
const CLIENT_BURST: &str = "--k8s-client-burst=20";

/// Whether the agent behind `socket` says it is Ok (`cilium status
/// --brief`'s question, asked without starting a process).
fn agent_ready(socket: &Path) -> bool {
    let ask = || -> Option<bool> {
        let mut s = UnixStream::connect(socket).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        s.write_all(b"GET /v1/healthz?brief=true HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .ok()?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).ok()?;
        let body = reply.split_once("\r\n\r\n")?.1;
        let v: serde_json::Value = serde_json::from_str(body).ok()?;
        Some(v["cilium"]["state"] == "Ok")
    };
    ask().unwrap_or(false)
}

/// When each object of a kind is first seen with a pod CIDR, from a
/// `kubectl get --watch` started before the round's Nodes: polling with
/// one `kubectl get` after another measured in seconds on two cores busy
/// with 50 starting agents.
struct CidrWatch {
    kubectl: std::process::Child,
    seen: std::sync::mpsc::Receiver<(String, bool, Instant)>,
}

impl CidrWatch {
    /// Watches `kind` (`nodes` or `ciliumnodes`), reading the CIDR at
    /// `path`; returns once the first object of the initial list is in
    /// (so the watch is up), or after 5 s when there is none.
    fn start(cp: &kubeplane::ControlPlane, kind: &str, path: &str) -> anyhow::Result<Self> {
        use std::io::BufRead;
        let mut kubectl = cp
            .kubectl()
            .args([
                "get",
                kind,
                "--watch",
                "-o",
                &format!("jsonpath={{.metadata.name}} {{{path}}}{{\"\\n\"}}"),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting kubectl get --watch")?;
        let out = kubectl.stdout.take().context("kubectl's stdout")?;
        let (tx, seen) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let (name, cidr) = line.split_once(' ').unwrap_or((&line, ""));
                let event = (name.to_owned(), !cidr.trim().is_empty(), Instant::now());
                if tx.send(event).is_err() {
                    return;
                }
            }
        });
        let watch = Self { kubectl, seen };
        // the earlier rounds' objects come first; none in the first round
        let _ = watch.seen.recv_timeout(Duration::from_secs(5));
        Ok(watch)
    }

    /// The objects seen since the last call: name, whether with a CIDR,
    /// and when.
    fn events(&self) -> Vec<(String, bool, Instant)> {
        self.seen.try_iter().collect()
    }
}

impl Drop for CidrWatch {
    fn drop(&mut self) {
        let _ = self.kubectl.kill();
        let _ = self.kubectl.wait();
    }
}

/// Until the operator holds its Lease, so the first round times the
/// allocator, not the operator's own start (kube-controller-manager has
/// been up since before the CRDs went in).
fn wait_leading(cp: &kubeplane::ControlPlane) -> anyhow::Result<()> {
    let t0 = Instant::now();
    loop {
        let held = cp
            .kubectl()
            .args([
                "-n",
                "kube-system",
                "get",
                "lease",
                "cilium-operator-resource-lock",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?
            .success();
        if held {
            return Ok(());
        }
        anyhow::ensure!(
            t0.elapsed() < ROUND_LIMIT,
            "cilium-operator did not take its Lease within {ROUND_LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Per node, from the Nodes' apply (ms).
#[derive(Default)]
struct Round {
    /// Node by node: to the object the agent waits on being there (the
    /// Node at once, a CiliumNode when its agent made it), and to a pod
    /// CIDR on it.
    per_node: Vec<(Option<f64>, Option<f64>)>,
    /// To its agent being ready.
    ready: Vec<f64>,
}

impl Round {
    fn made(&self) -> Vec<f64> {
        self.per_node.iter().filter_map(|(made, _)| *made).collect()
    }

    fn cidr(&self) -> Vec<f64> {
        self.per_node.iter().filter_map(|(_, cidr)| *cidr).collect()
    }

    /// Per node, from its object being there to its CIDR.
    fn made_to_cidr(&self) -> Vec<f64> {
        self.per_node
            .iter()
            .filter_map(|(made, cidr)| Some((*cidr)? - (*made)?))
            .collect()
    }

    /// This round's samples and `other`'s together.
    fn merge(mut self, other: Round) -> Round {
        self.per_node.extend(other.per_node);
        self.ready.extend(other.ready);
        self
    }
}

/// Samples each side gets at least, per size: a round of one node gives
/// one, and a p50 of one sample swung the 1-node row by a third between
/// runs, so small sizes take several rounds (alternating sides).
const MIN_SAMPLES: usize = 5;

fn rounds_of(n: usize) -> usize {
    crate::scaled(MIN_SAMPLES.div_ceil(n.max(1)), 1)
}

/// Nodes `first..first + n` of the cluster join at once with `ipam`.
fn round(
    cluster: &mut Cluster,
    cp: &kubeplane::ControlPlane,
    kubeconfig: &Path,
    first: usize,
    n: usize,
    ipam: &str,
) -> anyhow::Result<Round> {
    let idx: Vec<usize> = (first..first + n).collect();
    let objects: Vec<String> = idx
        .iter()
        .map(|&i| {
            format!(
                r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{}"}}}}"#,
                cluster.nodes[i].name
            )
        })
        .collect();
    for &i in &idx {
        let node = &mut cluster.nodes[i];
        node.quiet = true;
        node.agent_args = vec![
            format!("--k8s-kubeconfig-path={}", kubeconfig.display()),
            format!("--ipv4-node={}", topology::node_ip(i + 1)),
            format!("--ipam={ipam}"),
            // Every node of this one machine shares the kernel's one ARP
            // table (gc_thresh3, 1024 entries for all namespaces): agents
            // probing their ~100 peers filled it ("neighbor table
            // overflow"), and a later round's agents then could not reach
            // the API server for 30 s or more. Health probing is not what
            // this section times.
            "--enable-health-checking=false".into(),
        ];
    }
    let list = format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
        objects.join(",")
    );
    let (kind, path) = if ipam == "kubernetes" {
        ("nodes", ".spec.podCIDR")
    } else {
        ("ciliumnodes", ".spec.ipam.podCIDRs[0]")
    };
    let watch = CidrWatch::start(cp, kind, path)?;
    let t0 = Instant::now();
    // `create`, not `apply`: it reads no OpenAPI document first, whose
    // first build after the CRDs took up to a second, all of it inside
    // the first round
    crate::kubernetes::kubectl(cp, "create", &list)?;
    for &i in &idx {
        cluster.nodes[i].spawn_agent();
    }
    let mut created = vec![None; n];
    let mut cidr = vec![None; n];
    let mut ready = vec![None; n];
    while ready.iter().any(Option::is_none) || cidr.iter().any(Option::is_none) {
        if t0.elapsed() >= ROUND_LIMIT {
            let stuck = idx.iter().zip(&ready).find(|(_, r)| r.is_none());
            let log = stuck
                .map(|(&i, _)| {
                    let node = &cluster.nodes[i];
                    format!(
                        "; the log of {}'s agent ends:\n{}",
                        node.name,
                        node.agent_log_tail(30)
                    )
                })
                .unwrap_or_default();
            anyhow::bail!(
                "{n} nodes with ipam={ipam}: not all ready within {ROUND_LIMIT:?} ({} without a pod CIDR, {} agents not ready){log}",
                cidr.iter().filter(|c| c.is_none()).count(),
                ready.iter().filter(|r| r.is_none()).count()
            );
        }
        for (name, has_cidr, at) in watch.events() {
            let Some(k) = idx.iter().position(|&i| cluster.nodes[i].name == name) else {
                continue;
            };
            let ms = Some(at.duration_since(t0).as_secs_f64() * 1000.0);
            if created[k].is_none() {
                created[k] = ms;
            }
            if has_cidr && cidr[k].is_none() {
                cidr[k] = ms;
            }
        }
        for (k, &i) in idx.iter().enumerate() {
            if ready[k].is_none() && agent_ready(&cluster.nodes[i].socket()) {
                ready[k] = Some(t0.elapsed().as_secs_f64() * 1000.0);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for &i in &idx {
        cluster.nodes[i].kill_agent();
    }
    Ok(Round {
        per_node: created.into_iter().zip(cidr).collect(),
        ready: ready.into_iter().flatten().collect(),
    })
}

pub fn run_bench(sizes: &[usize]) -> anyhow::Result<()> {
    // one node of each kind first, unmeasured (see below)
    let total: usize = (sizes.iter().map(|&n| n * rounds_of(n)).sum::<usize>() + 1) * 2;
    anyhow::ensure!(
        total <= topology::MAX_NODES,
        "at most {} nodes in all",
        topology::MAX_NODES
    );
    let mut cluster = Cluster::new(total, &[]);
    let bins = kubeplane::Binaries::find()?;
    // node IPAM's pool kept apart from the operator's, as nodes of both
    // kinds see each other's CiliumNodes
    let ranges = kubeplane::components::Ranges {
        pods: "10.0.0.0/9".into(),
        ..Default::default()
    };
    let cp = kubeplane::ControlPlane::create(
        bins,
        &cluster.sb.path().join("k8s"),
        topology::UNDERLAY_IP.into(),
        kube::PORT,
        testsupport::ETCD_URL,
        ranges,
    )?;
    kube::start_apiserver(&mut cluster.sb, &cp);
    let cm = cp
        .controller_manager()
        .spawn()
        .context("starting kube-controller-manager")?;
    cluster.sb.adopt(cm);
    kube::apply_crds(&cp);
    let kubeconfig = kube::agent_kubeconfig(&cp);
    let operator_kubeconfig = kube::operator_kubeconfig(&cp);
    let operator = std::process::Command::new(testsupport::bin("cilium-operator"))
        .args([
            format!("--k8s-kubeconfig-path={}", operator_kubeconfig.display()),
            "--cluster-pool-ipv4-cidr=10.128.0.0/9".into(),
            "--cluster-pool-ipv4-mask-size=24".into(),
            CLIENT_QPS.into(),
            CLIENT_BURST.into(),
        ])
        .env("CILIUM_K8S_NAMESPACE", "kube-system")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(
            cluster.sb.path().join("operator.log"),
        )?)
        .spawn()
        .context("starting cilium-operator")?;
    cluster.sb.adopt(operator);
    wait_leading(&cp)?;

    println!("cilium-operator: a Node appearing to a pod CIDR and its agent ready, against kube-controller-manager's node IPAM (agents with ipam=kubernetes):");
    // A first round paid for things no later one does (the API server's
    // first Nodes and CiliumNodes, the first agents' start), by up to a
    // second; a pair of unmeasured rounds takes that.
    round(&mut cluster, &cp, &kubeconfig, 0, 1, "cluster-pool")?;
    round(&mut cluster, &cp, &kubeconfig, 1, 1, "kubernetes")?;
    let mut first = 2;
    for &n in sizes {
        let (mut ours, mut base) = (Round::default(), Round::default());
        for _ in 0..rounds_of(n) {
            for (side, ipam) in [(&mut ours, "cluster-pool"), (&mut base, "kubernetes")] {
                let sampled = round(&mut cluster, &cp, &kubeconfig, first, n, ipam)?;
                *side = std::mem::take(side).merge(sampled);
                first += n;
            }
        }
        println!(
            "  {n} node(s) joining at once ({} round(s) a side):",
            rounds_of(n)
        );
        // the operator's own share: from its agent making the CiliumNode
        // to the CIDR on it (kube-controller-manager's share is the whole
        // of its row, the bench makes the Nodes)
        let mut share = ours.made_to_cidr();
        let mut made = ours.made();
        let mut ours_cidr = ours.cidr();
        let mut base_cidr = base.cidr();
        let mut ours_ready = ours.ready;
        let mut base_ready = base.ready;
        latency_line("CiliumNode made by its agent", &mut made);
        latency_line("  then its CIDR (the operator's share)", &mut share);
        let (c50, c99) = latency_line("CiliumNode CIDR (operator)", &mut ours_cidr);
        let (b50, b99) = latency_line("baseline: Node podCIDR", &mut base_cidr);
        println!(
            "    ratio: p50 {:.2}x  p99 {:.2}x   {}",
            c50 / b50,
            c99 / b99,
            goals::at_most(
                &format!(
                    "operator: Node to pod CIDR, {n} node(s), vs kube-controller-manager (p50)"
                ),
                c50 / b50,
                goals::OPERATOR_CIDR_RATIO
            )
        );
        let (r50, r99) = latency_line("agent ready, cluster-pool", &mut ours_ready);
        let (q50, q99) = latency_line("baseline: agent ready, kubernetes", &mut base_ready);
        println!("    ratio: p50 {:.2}x  p99 {:.2}x", r50 / q50, r99 / q99);
    }
    Ok(())
}
