//! The agent against a real API server (built from tools/k8s), as the
//! DaemonSet's ServiceAccount: `cilium status` names the server's version
//! as Cilium's does, and an API server that goes away makes the agent
//! unhealthy until it is back.

use testsupport::node::{wait_for, Node};

/// Go's GOARCH of this machine, as the API server reports its platform.
fn goarch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The `Kubernetes:` line of `cilium status` (which exits 1 while the
/// agent is unhealthy, so its output is read either way).
fn kubernetes_line(node: &Node) -> String {
    String::from_utf8_lossy(&node.cilium(&["status"]).stdout)
        .lines()
        .find(|l| l.starts_with("Kubernetes:"))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn status_names_the_api_server_and_its_loss() {
    let mut node = Node::new("10.1.0.0/24");
    let (cp, apiserver) = testsupport::kube::start(node.sandbox_mut());
    let kubeconfig = testsupport::kube::agent_kubeconfig(&cp);
    node.agent_args = vec![format!("--k8s-kubeconfig-path={}", kubeconfig.display())];
    node.start_agent();

    let version = kubeplane::bins::version();
    let minor = version.trim_start_matches("v1.").split('.').next().unwrap();
    let want = format!("Ok   1.{minor} ({version}) [linux/{}]", goarch());
    let status = node.cilium_ok(&["status"]);
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Kubernetes:") && l.ends_with(&want)),
        "{status}"
    );
    assert!(status.contains("Kubernetes APIs:"), "{status}");

    testsupport::kube::stop_apiserver(node.sandbox_mut(), apiserver);
    wait_for("Kubernetes: Failure", 30, || {
        kubernetes_line(&node).contains("Failure")
    });
    let out = node.cilium(&["status", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["cilium"]["state"], "Failure");
    assert!(
        json["cilium"]["msg"]
            .as_str()
            .unwrap()
            .contains("Kubernetes service is not ready"),
        "{json}"
    );

    testsupport::kube::start_apiserver(node.sandbox_mut(), &cp);
    wait_for("Kubernetes: Ok again", 30, || {
        kubernetes_line(&node).ends_with(&want)
    });
}
