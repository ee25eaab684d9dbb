//! A Kubernetes control plane in the sandbox: etcd, kube-apiserver (RBAC,
//! serving on 198.18.0.1, an address of the sandbox's own on its `lo`, as
//! the `kubernetes` Service's endpoint may not be in 127.0.0.0/8),
//! kube-controller-manager and kube-scheduler, built by
//! scripts/build-k8s.sh.

use crate::Sandbox;
use kubeplane::components::Ranges;
use kubeplane::{Binaries, ControlPlane};
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

/// Where the API server listens in the sandbox.
pub const ADDRESS: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const PORT: u16 = 6443;

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {args:?} failed");
}

/// The last lines of a component's log, for a failure message.
pub fn log_tail(cp: &ControlPlane, name: &str) -> String {
    let text = std::fs::read_to_string(cp.dir.join(format!("{name}.log"))).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// The control plane's files in the sandbox, nothing started.
pub fn prepare(sb: &Sandbox) -> ControlPlane {
    ip(&["addr", "add", &format!("{ADDRESS}/24"), "dev", "lo"]);
    let bins = Binaries::find().unwrap_or_else(|e| panic!("{e}"));
    ControlPlane::create(
        bins,
        &sb.path().join("k8s"),
        ADDRESS.into(),
        PORT,
        crate::ETCD_URL,
        Ranges::default(),
    )
    .expect("control plane files")
}

/// Starts the API server (etcd must run) and waits until it is ready;
/// returns its index among the sandbox's children.
pub fn start_apiserver(sb: &mut Sandbox, cp: &ControlPlane) -> usize {
    let child = sb.adopt(cp.apiserver().spawn().expect("start kube-apiserver"));
    if let Err(e) = cp.wait_ready(Duration::from_secs(90)) {
        panic!(
            "{e}\nkube-apiserver log:\n{}",
            log_tail(cp, "kube-apiserver")
        );
    }
    child
}

/// etcd and the three components, the API server ready; returns the
/// control plane and the API server's index among the sandbox's children.
pub fn start(sb: &mut Sandbox) -> (ControlPlane, usize) {
    let cp = prepare(sb);
    let etcd = crate::start_etcd(&sb.path().join("etcd"));
    sb.adopt(etcd);
    let apiserver = start_apiserver(sb, &cp);
    sb.adopt(
        cp.controller_manager()
            .spawn()
            .expect("start kube-controller-manager"),
    );
    sb.adopt(cp.scheduler().spawn().expect("start kube-scheduler"));
    (cp, apiserver)
}

/// Stops the API server (the other components keep running).
pub fn stop_apiserver(sb: &mut Sandbox, index: usize) {
    let child = sb.child(index);
    child.kill().expect("kill kube-apiserver");
    child.wait().expect("reap kube-apiserver");
}

/// The deploy/kubernetes manifest `name`.
pub fn manifest(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/kubernetes")
        .join(name)
}

/// kubectl as the cluster admin with `args`, insisting on success; its
/// output.
pub fn kubectl_ok(cp: &ControlPlane, args: &[&str]) -> String {
    let out = cp.kubectl().args(args).output().expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `kubectl apply -f -` of `text` as the cluster admin, insisting on
/// success; its output.
pub fn apply(cp: &ControlPlane, text: &str) -> String {
    use std::io::Write;
    let mut child = cp
        .kubectl()
        .args(["apply", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kubectl apply");
    child
        .stdin
        .take()
        .expect("kubectl's stdin")
        .write_all(text.as_bytes())
        .expect("write to kubectl");
    let out = child.wait_with_output().expect("kubectl apply");
    assert!(
        out.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until namespace `namespace` has its `default` ServiceAccount
/// (the controller manager makes it; admission refuses pods until then).
pub fn wait_default_service_account(cp: &ControlPlane, namespace: &str) {
    crate::node::wait_for("the default ServiceAccount", 30, || {
        cp.kubectl()
            .args(["get", "serviceaccount", "default", "-n", namespace])
            .output()
            .is_ok_and(|o| o.status.success())
    });
}

/// The operator's part of cluster-pool IPAM, for tests that run agents
/// without one: node `node`'s CiliumNode with `cidr` as its pod CIDR.
pub fn give_pod_cidr(cp: &ControlPlane, node: &str, cidr: &str) {
    apply(
        cp,
        &format!(
            r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumNode","metadata":{{"name":"{node}"}},"spec":{{"ipam":{{"podCIDRs":["{cidr}"]}}}}}}"#
        ),
    );
}

/// Applies deploy/kubernetes/crds.yaml and waits until every CRD is
/// established.
pub fn apply_crds(cp: &ControlPlane) {
    kubectl_ok(
        cp,
        &["apply", "-f", &manifest("crds.yaml").display().to_string()],
    );
    kubectl_ok(
        cp,
        &[
            "wait",
            "--for=condition=established",
            "--timeout=60s",
            "crd",
            "--all",
        ],
    );
}

/// A kubeconfig for the agent's ServiceAccount (`kube-system/cilium`,
/// from deploy/kubernetes/cilium.yaml, which this applies) with a token
/// file, as the DaemonSet's pod would have it.
pub fn agent_kubeconfig(cp: &ControlPlane) -> std::path::PathBuf {
    service_account_kubeconfig(cp, "cilium.yaml", "cilium")
}

/// The same for the operator's (`kube-system/cilium-operator`, from
/// deploy/kubernetes/cilium-operator.yaml).
pub fn operator_kubeconfig(cp: &ControlPlane) -> std::path::PathBuf {
    service_account_kubeconfig(cp, "cilium-operator.yaml", "cilium-operator")
}

fn service_account_kubeconfig(
    cp: &ControlPlane,
    manifest_name: &str,
    account: &str,
) -> std::path::PathBuf {
    kubectl_ok(
        cp,
        &[
            "apply",
            "-f",
            &manifest(manifest_name).display().to_string(),
        ],
    );
    let args = ControlPlane::token_args("kube-system", account);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let token = kubectl_ok(cp, &args);
    cp.service_account_kubeconfig("kube-system", account, &token)
        .expect("ServiceAccount kubeconfig")
}
