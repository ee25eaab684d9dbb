//! `cilium-lab up --kubernetes`: the lab with a Kubernetes control plane
//! built from tools/k8s, the agents its clients as the DaemonSet's
//! ServiceAccount; the demo's Service and policy go through the API
//! server, and kubectl shows the CiliumNodes and CiliumEndpoints.

mod common;

use common::{text, Lab};

#[test]
fn up_with_kubernetes_runs_the_demo_through_the_api_server() {
    let lab = Lab::new();
    let up = lab.run(&["up", "--kubernetes"]);
    let out = text(&up);
    assert!(up.status.success(), "{out}");
    for want in [
        "kube-apiserver at https://198.18.0.1:6443",
        "Kubernetes:              Ok   1.34 (v1.34.",
        "\"cilium/v2::CiliumNetworkPolicy\"",
        "service/demo created",
        "TCP pod-a -> 10.96.0.10:80 (pod-b)",
        "ciliumnetworkpolicy.cilium.io/demo-tcp-only created",
        "dropped by the policy (Policy denied)",
        "node1   10.1.0.1           198.18.0.11",
        "node2   10.2.0.1           198.18.0.12",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    assert!(
        out.lines().any(|l| l.starts_with("default     pod-b")
            && l.contains("ready")
            && l.contains("10.2.0.2")),
        "{out}"
    );
    let ceps = lab.ok(&["kubectl", "get", "ciliumendpoints", "-A", "-o", "name"]);
    assert!(ceps.contains("ciliumendpoint.cilium.io/pod-a"), "{ceps}");

    let down = lab.ok(&["down"]);
    assert!(down.contains("Kubernetes control plane stopped"), "{down}");
    assert!(!lab.dir.path().join("k8s").exists());
}
