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

/// The pod CIDR each named object has, by name: Nodes' `spec.podCIDR` or
/// CiliumNodes' `spec.ipam.podCIDRs`.
fn with_cidrs(cp: &kubeplane::ControlPlane, kind: &str, path: &str) -> anyhow::Result<Vec<String>> {
    let out = cp
        .kubectl()
        .args([
            "get",
            kind,
            "-o",
            &format!("jsonpath={{range .items[*]}}{{.metadata.name}} {{{path}}}{{\"\\n\"}}{{end}}"),
        ])
        .stderr(Stdio::null())
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (name, cidr) = l.split_once(' ')?;
            (!cidr.trim().is_empty()).then(|| name.to_owned())
        })
        .collect())
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

struct Round {
    /// Per node: from the Nodes' apply to a pod CIDR on the object the
    /// agent waits on, and to its agent being ready (ms).
    cidr: Vec<f64>,
    ready: Vec<f64>,
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
        ];
    }
    let list = format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[{}]}}"#,
        objects.join(",")
    );
    let t0 = Instant::now();
    // `create`, not `apply`: it reads no OpenAPI document first, whose
    // first build after the CRDs took up to a second, all of it inside
    // the first round
    crate::kubernetes::kubectl(cp, "create", &list)?;
    for &i in &idx {
        cluster.nodes[i].spawn_agent();
    }
    let (kind, path) = if ipam == "kubernetes" {
        ("nodes", ".spec.podCIDR")
    } else {
        ("ciliumnodes", ".spec.ipam.podCIDRs[0]")
    };
    let mut cidr = vec![None; n];
    let mut ready = vec![None; n];
    while ready.iter().any(Option::is_none) || cidr.iter().any(Option::is_none) {
        anyhow::ensure!(
            t0.elapsed() < ROUND_LIMIT,
            "{n} nodes with ipam={ipam}: not all ready within {ROUND_LIMIT:?} ({} without a pod CIDR, {} agents not ready)",
            cidr.iter().filter(|c| c.is_none()).count(),
            ready.iter().filter(|r| r.is_none()).count()
        );
        if cidr.iter().any(Option::is_none) {
            let have = with_cidrs(cp, kind, path)?;
            let now = t0.elapsed().as_secs_f64() * 1000.0;
            for (k, &i) in idx.iter().enumerate() {
                if cidr[k].is_none() && have.contains(&cluster.nodes[i].name) {
                    cidr[k] = Some(now);
                }
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
        cidr: cidr.into_iter().flatten().collect(),
        ready: ready.into_iter().flatten().collect(),
    })
}

pub fn run_bench(sizes: &[usize]) -> anyhow::Result<()> {
    // one node of each kind first, unmeasured (see below)
    let total: usize = (sizes.iter().sum::<usize>() + 1) * 2;
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
        .stderr(Stdio::null())
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
        let ours = round(&mut cluster, &cp, &kubeconfig, first, n, "cluster-pool")?;
        first += n;
        let base = round(&mut cluster, &cp, &kubeconfig, first, n, "kubernetes")?;
        first += n;
        println!("  {n} node(s) joining at once:");
        let mut ours_cidr = ours.cidr;
        let mut base_cidr = base.cidr;
        let mut ours_ready = ours.ready;
        let mut base_ready = base.ready;
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
