//! The control plane built from tools/k8s, run for real in a sandbox: the
//! API server serves with RBAC on Debian's etcd, takes our manifests
//! (CRDs, the agent's ServiceAccount and ClusterRole), grants the agent
//! what the role says and nothing more, the controller manager hands
//! Nodes their pod CIDRs, and a Service asking for both families gets a
//! ClusterIP of each.

use kubeplane::ControlPlane;
use std::time::{Duration, Instant};
use testsupport::kube::{self, kubectl_ok, log_tail};
use testsupport::Sandbox;

const AGENT: &str = "system:serviceaccount:kube-system:cilium";

fn can_i(cp: &ControlPlane, verb: &str, resource: &str) -> bool {
    let out = cp
        .kubectl()
        .args(["auth", "can-i", verb, resource, "--as", AGENT])
        .output()
        .expect("kubectl auth can-i");
    String::from_utf8_lossy(&out.stdout).trim() == "yes"
}

#[test]
fn the_api_server_takes_our_manifests_and_nodes_get_pod_cidrs() {
    let mut sb = Sandbox::enter();
    let (cp, _) = testsupport::kube::start(&mut sb);

    let version: serde_json::Value =
        serde_json::from_str(&kubectl_ok(&cp, &["version", "-o", "json"])).unwrap();
    assert_eq!(
        version["serverVersion"]["gitVersion"],
        kubeplane::bins::version()
    );
    assert_eq!(
        version["clientVersion"]["gitVersion"],
        kubeplane::bins::version()
    );

    kube::apply_crds(&cp);
    let cilium = kube::manifest("cilium.yaml").display().to_string();
    kubectl_ok(&cp, &["apply", "-f", &cilium]);
    // the agent's ServiceAccount may do what its ClusterRole says, no more
    assert!(can_i(&cp, "watch", "nodes"));
    assert!(can_i(&cp, "list", "ciliumnetworkpolicies.cilium.io"));
    assert!(!can_i(&cp, "delete", "nodes"));
    assert!(!can_i(&cp, "get", "secrets"));

    // node IPAM in the controller manager cuts a pod CIDR for a new Node
    let node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"node1"}}"#;
    kube::apply(&cp, node);
    let started = Instant::now();
    let cidr = loop {
        let cidr = kubectl_ok(
            &cp,
            &["get", "node", "node1", "-o", "jsonpath={.spec.podCIDR}"],
        );
        if !cidr.is_empty() {
            break cidr;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "node1 got no pod CIDR\nkube-controller-manager log:\n{}",
            log_tail(&cp, "kube-controller-manager")
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(cidr.starts_with("10.") && cidr.ends_with("/24"), "{cidr}");

    // Services are dual-stack: one that asks for both families gets a
    // ClusterIP of each, IPv4 first; one that asks nothing stays IPv4
    let dual = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"dual","namespace":"default"},
      "spec":{"ipFamilyPolicy":"RequireDualStack","ports":[{"port":80}]}}"#;
    let single = r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"single","namespace":"default"},
      "spec":{"ports":[{"port":80}]}}"#;
    kube::apply(&cp, dual);
    kube::apply(&cp, single);
    let ips = |name: &str| {
        kubectl_ok(
            &cp,
            &[
                "get",
                "service",
                name,
                "-o",
                "jsonpath={.spec.clusterIPs[*]}",
            ],
        )
    };
    let dual = ips("dual");
    let (v4, v6) = dual.trim().split_once(' ').unwrap_or_default();
    assert!(
        v4.starts_with("10.") && v6.starts_with("fd00:96::"),
        "{dual}"
    );
    let single = ips("single");
    assert!(
        single.trim().starts_with("10.") && !single.contains(':'),
        "{single}"
    );
}
