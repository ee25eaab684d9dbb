//! The lab's Kubernetes control plane (`up`): kube-apiserver,
//! kube-controller-manager and kube-scheduler, built by
//! scripts/build-k8s.sh, in the underlay's namespace beside etcd, the API
//! server on the underlay's address where every node reaches it. `up`
//! applies deploy/kubernetes (CRDs, the agent's ServiceAccount and RBAC),
//! makes each node's kubelet credentials, and gives the agents a
//! kubeconfig with the ServiceAccount's token, as the DaemonSet's pods
//! would have it: a permission missing from our ClusterRole fails the
//! agent, not hidden by an admin credential.

use crate::layout::{self, Holder};
use crate::stack::Stack;
use anyhow::{bail, Context};
use kubeplane::components::Ranges;
use kubeplane::{Binaries, ControlPlane};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The API server's port on the underlay address.
pub const API_PORT: u16 = 6443;
/// Where the control plane's machine directory is (holder, logs).
pub const MACHINE: &str = "control-plane";
/// Where the operator's replicas are kept (holder, logs).
pub const OPERATOR_MACHINE: &str = "operator";
/// How many operator replicas run, as the Deployment has.
pub const OPERATOR_REPLICAS: usize = 2;

const CRDS: &str = include_str!("../../../deploy/kubernetes/crds.yaml");
const CILIUM: &str = include_str!("../../../deploy/kubernetes/cilium.yaml");
const OPERATOR: &str = include_str!("../../../deploy/kubernetes/cilium-operator.yaml");

fn dir() -> PathBuf {
    layout::root().join("k8s")
}

/// Hubble's CA and certificates for `cluster`, made beside the cluster's
/// own at the first `up`.
pub fn hubble_pki(cluster: &str) -> anyhow::Result<kubeplane::pki::HubblePki> {
    Ok(kubeplane::pki::HubblePki::create(
        &dir().join("hubble"),
        cluster,
    )?)
}

/// The control plane's files: made by `up` (`create`), read after.
/// Its addresses are of the running lab's families (`up` writes them
/// first).
pub fn control_plane(create: bool) -> anyhow::Result<ControlPlane> {
    let bins = Binaries::find()?;
    let stack = Stack::running();
    let (address, etcd) = (stack.api_address(), topology::etcd_url());
    let ranges: Ranges = stack.ranges();
    Ok(if create {
        ControlPlane::create(bins, &dir(), address, API_PORT, &etcd, ranges)?
    } else {
        ControlPlane::open(bins, &dir(), address, API_PORT, &etcd, ranges)
    })
}

/// `cmd` in the underlay's network namespace, where the API server is.
fn in_underlay(cmd: &Command) -> anyhow::Result<Command> {
    let underlay = layout::machine_dir(layout::UNDERLAY)
        .running_holder()
        .context("the lab's underlay is not up")?;
    let mut c = Command::new("nsenter");
    c.arg(format!("--net=/proc/{underlay}/ns/net"))
        .arg(cmd.get_program())
        .args(cmd.get_args());
    Ok(c)
}

/// kubectl as the cluster admin, in the underlay.
pub fn kubectl(args: &[String]) -> anyhow::Result<Command> {
    let cp = control_plane(false)?;
    let mut cmd = in_underlay(&cp.kubectl())?;
    cmd.args(args);
    Ok(cmd)
}

/// `command` as the cluster admin, in the underlay (`cilium-lab admin`).
pub fn admin(command: &[String]) -> anyhow::Result<Command> {
    let cp = control_plane(false)?;
    let mut inner = Command::new(&command[0]);
    inner.args(&command[1..]);
    let mut cmd = in_underlay(&inner)?;
    cmd.env("KUBECONFIG", cp.admin_kubeconfig());
    Ok(cmd)
}

fn checked(what: &str, out: Output) -> anyhow::Result<String> {
    if !out.status.success() {
        bail!("{what}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `kubectl apply` of `text`.
pub fn apply(what: &str, text: &str) -> anyhow::Result<String> {
    stdin(what, &["apply", "-f", "-"], text)
}

/// kubectl with `args`, `text` on its stdin.
fn stdin(what: &str, args: &[&str], text: &str) -> anyhow::Result<String> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let mut child = kubectl(&args)?
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running kubectl")?;
    child
        .stdin
        .take()
        .context("kubectl's stdin")?
        .write_all(text.as_bytes())?;
    checked(what, child.wait_with_output()?)
}

/// kubectl with `args`; its output.
pub fn run_args(args: &[&str]) -> anyhow::Result<String> {
    run(&format!("kubectl {}", args.join(" ")), args)
}

fn run(what: &str, args: &[&str]) -> anyhow::Result<String> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    checked(what, kubectl(&args)?.output().context("running kubectl")?)
}

/// What a cluster has before its nodes start: the CRDs, the agent's and
/// the operator's ServiceAccounts and RBAC, each node's kubelet
/// credentials (the kubelet stand-in registers its Node); returns the
/// agents' kubeconfig (the ServiceAccount's token).
pub fn prepare(nodes: usize) -> anyhow::Result<PathBuf> {
    prepare_nodes(nodes)?;
    run(
        "waiting for the CRDs",
        &[
            "wait",
            "--for=condition=established",
            "--timeout=60s",
            "crd",
            "--all",
        ],
    )?;
    apply("applying the agent's ServiceAccount and RBAC", CILIUM)?;
    apply("applying the operator's ServiceAccount and RBAC", OPERATOR)?;
    let cp = control_plane(false)?;
    // The controller manager makes each namespace's `default`
    // ServiceAccount; until it has, admission refuses pods there.
    let t = Instant::now();
    while run(
        "waiting for the default ServiceAccount",
        &["get", "serviceaccount", "default", "-o", "name"],
    )
    .is_err()
    {
        if t.elapsed() > Duration::from_secs(60) {
            bail!("the default ServiceAccount did not appear within 60s");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    service_account_kubeconfig(&cp, "cilium-operator")?;
    service_account_kubeconfig(&cp, "cilium")
}

/// A kubeconfig with ServiceAccount `kube-system/<account>`'s token.
fn service_account_kubeconfig(cp: &ControlPlane, account: &str) -> anyhow::Result<PathBuf> {
    let args = ControlPlane::token_args("kube-system", account);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let token = run(&format!("making {account}'s token"), &args)?;
    Ok(cp.service_account_kubeconfig("kube-system", account, &token)?)
}

/// What a cluster of real nodes has before they start: the CRDs and each
/// node's kubelet credentials; Cilium itself comes with deploy/kubernetes
/// once the nodes are registered.
pub fn prepare_nodes(nodes: usize) -> anyhow::Result<()> {
    apply("applying the CRDs", CRDS)?;
    let cp = control_plane(false)?;
    for i in 1..=nodes {
        node_credentials(&cp, &topology::node_name(i))?;
    }
    Ok(())
}

/// Polls `check` (kubectl's output says whether it holds) every 500 ms.
fn wait_until(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let t = Instant::now();
    loop {
        let last = check();
        match last {
            Ok(true) => return Ok(()),
            _ if t.elapsed() > timeout => {
                let why = last.err().map(|e| format!(": {e:#}")).unwrap_or_default();
                bail!("{what}: not within {timeout:?}{why}");
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    }
}

/// Waits until `nodes` Nodes exist (their kubelets registered).
pub fn wait_nodes_registered(nodes: usize, timeout: Duration) -> anyhow::Result<()> {
    wait_until("waiting for the kubelets to register", timeout, || {
        let out = run("listing nodes", &["get", "nodes", "-o", "name"])?;
        Ok(out.lines().count() >= nodes)
    })
}

/// Waits until `nodes` Nodes are Ready.
pub fn wait_nodes_ready(nodes: usize, timeout: Duration) -> anyhow::Result<()> {
    wait_until(
        "waiting for every node to be Ready and untainted",
        timeout,
        || {
            let out = run(
                "listing nodes",
                &[
                    "get",
                    "nodes",
                    "-o",
                    r#"jsonpath={range .items[*]}{.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}{"\n"}{end}"#,
                ],
            )?;
            // Cilium's taint is gone once the node's agent runs
            let ready = out
                .lines()
                .filter(|l| l.starts_with("True") && !l.contains(crate::AGENT_NOT_READY_TAINT))
                .count();
            Ok(ready >= nodes)
        },
    )
}

/// Waits until a kube-system Deployment is Available (its minimum of
/// ready replicas: on one node only one operator replica can run, as
/// their anti-affinity wants them on different nodes).
pub fn wait_available(what: &str, timeout: Duration) -> anyhow::Result<()> {
    run(
        &format!("waiting for {what} to be Available"),
        &[
            "wait",
            "-n",
            "kube-system",
            "--for=condition=Available",
            what,
            &format!("--timeout={}s", timeout.as_secs()),
        ],
    )
    .map(drop)
}

/// `kubectl rollout status` of a workload in kube-system.
pub fn wait_rollout(what: &str, timeout: Duration) -> anyhow::Result<()> {
    run(
        &format!("waiting for {what} to roll out"),
        &[
            "rollout",
            "status",
            "-n",
            "kube-system",
            what,
            &format!("--timeout={}s", timeout.as_secs()),
        ],
    )
    .map(drop)
}

/// The agents' kubeconfig (the ServiceAccount `kube-system/cilium`'s
/// token), as `prepare` made it.
pub fn agent_kubeconfig() -> anyhow::Result<PathBuf> {
    Ok(control_plane(false)?.kubeconfig("cilium"))
}

/// Puts the lab's keys (`boot::config_map_keys`) into
/// `kube-system/cilium-config` in place of what it holds, so the nodes' `cilium build-config` reads them from the API
/// server.
pub fn publish_config_map() -> anyhow::Result<()> {
    let data: serde_json::Map<String, serde_json::Value> = crate::boot::config_map_keys()?
        .into_iter()
        .map(|(k, v)| (k, v.into()))
        .collect();
    let cm = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cilium-config", "namespace": "kube-system"},
        "data": data,
    });
    stdin(
        "replacing kube-system/cilium-config",
        &["replace", "-f", "-"],
        &cm.to_string(),
    )?;
    Ok(())
}

/// The operator's kubeconfig (its ServiceAccount's token), as `prepare`
/// made it.
pub fn operator_kubeconfig() -> anyhow::Result<PathBuf> {
    Ok(control_plane(false)?.kubeconfig("cilium-operator"))
}

/// Node `node`'s kubeconfig, as its kubelet has one: a client certificate
/// for `system:node:<node>` in `system:nodes`; its presence is what tells
/// a node holder the lab runs Kubernetes.
pub fn node_kubeconfig(node: &str) -> PathBuf {
    dir().join(format!("{node}.kubeconfig"))
}

/// kube-proxy's kubeconfig (the baseline's nodes): a client certificate
/// for `system:kube-proxy`, which Kubernetes' bootstrap policy binds to
/// `system:node-proxier`, as kubeadm's kube-proxy has.
pub fn kube_proxy_kubeconfig() -> PathBuf {
    dir().join("kube-proxy.kubeconfig")
}

/// Writes [`kube_proxy_kubeconfig`].
pub fn kube_proxy_credentials() -> anyhow::Result<()> {
    control_plane(false)?.write_client_kubeconfig("kube-proxy", "system:kube-proxy", &[])?;
    Ok(())
}

fn node_credentials(cp: &ControlPlane, node: &str) -> anyhow::Result<()> {
    let user = format!("system:node:{node}");
    // the same file node_kubeconfig names: `<k8s dir>/<node>.kubeconfig`
    cp.write_client_kubeconfig(node, &user, &["system:nodes"])?;
    Ok(())
}

/// Waits until pod `name` (in `default`) is Running with an IP; the IP.
pub fn wait_running<A: std::str::FromStr>(name: &str, timeout: Duration) -> anyhow::Result<A> {
    let t = Instant::now();
    let mut last = String::new();
    while t.elapsed() < timeout {
        last = run(
            "reading a pod's status",
            &[
                "get",
                "pod",
                name,
                "-o",
                "jsonpath={.status.phase} {.status.podIP}",
            ],
        )?;
        if let Some(ip) = last
            .strip_prefix("Running ")
            .and_then(|ip| ip.trim().parse().ok())
        {
            return Ok(ip);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bail!("pod {name} was not Running with an IP within {timeout:?} (phase and IP: {last:?})")
}

/// Node `node`'s pod CIDR, as its CiliumNode has it.
pub fn pod_cidr(node: &str) -> anyhow::Result<String> {
    let out = run(
        "reading a CiliumNode's pod CIDR",
        &[
            "get",
            "ciliumnode",
            node,
            "-o",
            "jsonpath={.spec.ipam.podCIDRs[0]}",
        ],
    )?;
    Ok(out.trim().to_owned())
}

/// Routes each node's pod CIDR through that node from the control plane's
/// namespace, as a cluster's control plane reaches pods: the API server's
/// proxy, webhooks and `kubectl port-forward` connect to pod addresses, and
/// the node's datapath takes them in from its native device. Returns the
/// routes, `cidr via node-ip`.
pub fn route_pod_cidrs(nodes: usize) -> anyhow::Result<Vec<String>> {
    let mut routes = Vec::new();
    for index in 1..=nodes {
        let node = topology::node_name(index);
        let cidr = pod_cidr(&node)?;
        if cidr.is_empty() {
            bail!("{node} has no pod CIDR yet");
        }
        let via = Stack::running()
            .underlay_address(topology::node_ip(index))
            .to_string();
        let mut ip = Command::new("ip");
        ip.args(["route", "replace", &cidr, "via", &via]);
        let out = in_underlay(&ip)?.output().context("running ip route")?;
        checked(&format!("routing {cidr} via {node}"), out)?;
        routes.push(format!("{cidr} via {via}"));
    }
    Ok(routes)
}

/// Whether the lab runs with Kubernetes (its control plane is up).
pub fn running() -> bool {
    layout::machine_dir(MACHINE).running_holder().is_some()
}

/// Whether the API server answers as ready.
pub fn ready(cp: &ControlPlane) -> bool {
    cp.kubectl()
        .args(["get", "--raw", "/readyz"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
