//! The operator's node taints against a real API server and scheduler:
//! a node is untainted (and `NetworkUnavailable=False`, `CiliumIsUp`) once
//! its agent pod is Ready, tainted again when it no longer is
//! (`set-cilium-node-taints`), and the scheduler places pods only on
//! nodes whose agent is ready.

use std::process::{Command, Stdio};
use testsupport::kube;
use testsupport::node::wait_for;
use testsupport::Sandbox;

const TAINT: &str = "node.cilium.io/agent-not-ready";

fn node(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Node","metadata":{{"name":"{name}","labels":{{"kubernetes.io/hostname":"{name}"}}}},
            "spec":{{"taints":[{{"key":"{TAINT}","value":"true","effect":"NoSchedule"}}]}}}}"#
    )
}

/// The status a kubelet would post: Ready, with room for pods.
const NODE_STATUS: &str = r#"{"status":{"capacity":{"cpu":"2","memory":"4Gi","pods":"110"},
    "allocatable":{"cpu":"2","memory":"4Gi","pods":"110"},
    "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"ready"}]}}"#;

fn agent_pod(node: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"cilium-{node}","namespace":"kube-system","labels":{{"k8s-app":"cilium"}}}},
            "spec":{{"nodeName":"{node}","hostNetwork":true,"tolerations":[{{"operator":"Exists"}}],
                    "containers":[{{"name":"cilium-agent","image":"cilium-rs:dev"}}]}}}}"#
    )
}

fn app_pod(name: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"default"}},
            "spec":{{"containers":[{{"name":"app","image":"cilium-lab/builtin"}}]}}}}"#
    )
}

fn set_ready(cp: &kubeplane::ControlPlane, node: &str, ready: bool) {
    let status = if ready { "True" } else { "False" };
    let patch = format!(
        r#"{{"status":{{"phase":"Running","conditions":[{{"type":"Ready","status":"{status}"}}]}}}}"#
    );
    kube::kubectl_ok(
        cp,
        &[
            "patch",
            "pod",
            "-n",
            "kube-system",
            &format!("cilium-{node}"),
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ],
    );
}

fn get(cp: &kubeplane::ControlPlane, args: &[&str]) -> String {
    let out = cp.kubectl().args(args).output().expect("run kubectl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tainted(cp: &kubeplane::ControlPlane, node: &str) -> bool {
    get(
        cp,
        &["get", "node", node, "-o", "jsonpath={.spec.taints[*].key}"],
    )
    .contains(TAINT)
}

fn cilium_up(cp: &kubeplane::ControlPlane, node: &str) -> bool {
    get(
        cp,
        &[
            "get",
            "node",
            node,
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="NetworkUnavailable")].reason}"#,
        ],
    )
    .contains("CiliumIsUp")
}

fn placed(cp: &kubeplane::ControlPlane, pod: &str) -> String {
    get(cp, &["get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"])
        .trim()
        .to_owned()
}

#[test]
fn pods_are_scheduled_only_where_the_agent_is_ready() {
    let mut sb = Sandbox::enter();
    let (cp, _) = kube::start(&mut sb);
    let kubeconfig = kube::operator_kubeconfig(&cp);
    for n in ["n1", "n2"] {
        kube::apply(&cp, &node(n));
        kube::kubectl_ok(
            &cp,
            &[
                "patch",
                "node",
                n,
                "--subresource=status",
                "--type=merge",
                "-p",
                NODE_STATUS,
            ],
        );
    }
    kube::wait_default_service_account(&cp, "default");
    kube::wait_default_service_account(&cp, "kube-system");
    kube::apply(&cp, &agent_pod("n1"));
    kube::apply(&cp, &agent_pod("n2"));
    set_ready(&cp, "n1", true);
    let log = sb.path().join("operator.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_cilium-operator"))
        .args([
            format!("--k8s-kubeconfig-path={}", kubeconfig.display()),
            "--cluster-pool-ipv4-cidr=10.40.0.0/16".into(),
            "--set-cilium-node-taints=true".into(),
        ])
        .env("CILIUM_K8S_NAMESPACE", "kube-system")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("start cilium-operator");
    sb.adopt(child);

    wait_for("n1 untainted, Cilium up there", 30, || {
        !tainted(&cp, "n1") && cilium_up(&cp, "n1")
    });
    assert!(tainted(&cp, "n2"), "n2's agent is not ready");
    kube::apply(&cp, &app_pod("first"));
    wait_for("first scheduled", 30, || !placed(&cp, "first").is_empty());
    assert_eq!(placed(&cp, "first"), "n1");

    // n1's agent no longer Ready: tainted again, and nothing fits
    set_ready(&cp, "n1", false);
    wait_for("n1 tainted again", 30, || tainted(&cp, "n1"));
    kube::apply(&cp, &app_pod("second"));
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(placed(&cp, "second"), "", "no node has a ready agent");

    // n2's agent comes up: the waiting pod goes there
    set_ready(&cp, "n2", true);
    wait_for("second scheduled", 30, || !placed(&cp, "second").is_empty());
    assert_eq!(placed(&cp, "second"), "n2");
    // the condition follows the taint's removal, which let the pod in
    wait_for("Cilium up on n2", 30, || cilium_up(&cp, "n2"));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("Added the agent-not-ready taint"), "{text}");
}
