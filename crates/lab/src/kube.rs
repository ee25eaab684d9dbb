//! The lab's Kubernetes control plane (`up --kubernetes`): kube-apiserver,
//! kube-controller-manager and kube-scheduler, built by
//! scripts/build-k8s.sh, in the underlay's namespace beside etcd, the API
//! server on the underlay's address where every node reaches it. `up`
//! applies deploy/kubernetes (CRDs, the agent's ServiceAccount and RBAC),
//! registers the nodes, and gives the agents a kubeconfig with the
//! ServiceAccount's token, as the DaemonSet's pods would have it: a
//! permission missing from our ClusterRole fails the agent, not hidden by
//! an admin credential.

use crate::layout::{self, Holder};
use anyhow::{bail, Context};
use kubeplane::components::Ranges;
use kubeplane::{Binaries, ControlPlane};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// The API server's port on the underlay address.
pub const API_PORT: u16 = 6443;
/// Where the control plane's machine directory is (holder, logs).
pub const MACHINE: &str = "control-plane";

const CRDS: &str = include_str!("../../../deploy/kubernetes/crds.yaml");
const CILIUM: &str = include_str!("../../../deploy/kubernetes/cilium.yaml");

fn dir() -> PathBuf {
    layout::root().join("k8s")
}

/// The control plane's files: made by `up` (`create`), read after.
pub fn control_plane(create: bool) -> anyhow::Result<ControlPlane> {
    let bins = Binaries::find()?;
    let (address, etcd) = (topology::UNDERLAY_IP, topology::etcd_url());
    Ok(if create {
        ControlPlane::create(bins, &dir(), address, API_PORT, &etcd, Ranges::default())?
    } else {
        ControlPlane::open(bins, &dir(), address, API_PORT, &etcd, Ranges::default())
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

fn checked(what: &str, out: Output) -> anyhow::Result<String> {
    if !out.status.success() {
        bail!("{what}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `kubectl apply` of `text`.
pub fn apply(what: &str, text: &str) -> anyhow::Result<String> {
    let mut child = kubectl(&["apply".into(), "-f".into(), "-".into()])?
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

fn run(what: &str, args: &[&str]) -> anyhow::Result<String> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    checked(what, kubectl(&args)?.output().context("running kubectl")?)
}

/// What a cluster has before its agents start: the CRDs and the agent's
/// ServiceAccount and RBAC, a Node per lab node; returns the agents'
/// kubeconfig (the ServiceAccount's token).
pub fn prepare(nodes: usize) -> anyhow::Result<PathBuf> {
    apply("applying the CRDs", CRDS)?;
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
    for i in 1..=nodes {
        let node = format!(
            r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{}","labels":{{"kubernetes.io/hostname":"{0}"}}}}}}"#,
            topology::node_name(i)
        );
        apply("registering a Node", &node)?;
    }
    let args = ControlPlane::token_args("kube-system", "cilium");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let token = run("making the agent's token", &args)?;
    let cp = control_plane(false)?;
    Ok(cp.service_account_kubeconfig("kube-system", "cilium", &token)?)
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
