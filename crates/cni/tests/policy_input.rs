//! Policy on one node through the CLI: every kind of bad input is refused
//! with the field named and a non-zero exit while the policy in force
//! stays; ICMP rules by type; `cilium policy selectors`; the `always` and
//! `never` enforcement modes switched at run time.

mod common;

use common::{wait_for, LineServer, Node};
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

fn reachable(from: &Path, ip: Ipv4Addr, port: u16) -> bool {
    common::tcp_reachable(from, ip, port, Duration::from_millis(500))
}

const GOOD: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: b-from-a
spec:
  endpointSelector:
    matchLabels: {app: b}
  ingress:
  - fromEndpoints:
    - matchLabels: {app: a}
    toPorts:
    - ports:
      - port: "80"
        protocol: TCP
"#;

fn revision(node: &Node) -> String {
    let got = node.cilium_ok(&["policy", "get"]);
    got.lines()
        .find(|l| l.starts_with("Revision: "))
        .unwrap()
        .to_owned()
}

#[test]
fn bad_policies_are_refused_by_field_and_change_nothing() {
    let mut node = Node::new("10.3.0.0/24");
    node.start_agent();
    node.add_pod_labeled("a", "app=a");
    let b = node.add_pod_labeled("b", "app=b");
    node.add_pod_labeled("c", "app=c");
    let _srv = LineServer::start(&node.netns("b"), 80, "b").unwrap();
    let out = node.import_policy(GOOD);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("c to be blocked", 10, || {
        !reachable(&node.netns("c"), b, 80)
    });
    let before = revision(&node);

    // Every endpoint runs the imported revision: `policy wait` returns at
    // once; a revision nobody has reached fails after --max-wait-time.
    let rev: u64 = before.trim_start_matches("Revision: ").parse().unwrap();
    node.cilium_ok(&["policy", "wait", &rev.to_string()]);
    let ahead = node.cilium(&[
        "policy",
        "wait",
        &(rev + 100).to_string(),
        "--max-wait-time",
        "0.3",
        "--sleep-time",
        "0.1",
    ]);
    assert!(!ahead.status.success());
    assert!(
        // three pods, the health and the host endpoint
        String::from_utf8_lossy(&ahead.stderr).contains("5 endpoints still not ready"),
        "{}",
        String::from_utf8_lossy(&ahead.stderr)
    );

    let cases: &[(&str, String, &str)] = &[
        ("invalid YAML", GOOD.replace("{app: a}", "{app: a"), "line"),
        (
            "unknown field",
            GOOD.replace("fromEndpoints", "fromEndpoint"),
            "spec.ingress[0].fromEndpoint",
        ),
        (
            "bad selector",
            GOOD.replace(
                "matchLabels: {app: b}",
                "matchExpressions: [{key: app, operator: Is}]",
            ),
            "spec.endpointSelector.matchExpressions[0].operator",
        ),
        (
            "bad CIDR",
            GOOD.replace(
                "  - fromEndpoints:",
                "  - fromCIDR: [10.0.0.0/40]\n  - fromEndpoints:",
            ),
            "spec.ingress[0].fromCIDR[0]",
        ),
        (
            "port out of range",
            GOOD.replace("\"80\"", "\"65536\""),
            "spec.ingress[0].toPorts[0].ports[0].port",
        ),
        ("unknown protocol", GOOD.replace("TCP", "XTP"), "protocol"),
        (
            "ICMPs beside toPorts",
            GOOD.replace(
                "    toPorts:",
                "    icmps: [{fields: [{type: 8}]}]\n    toPorts:",
            ),
            "ICMPs block may only be present without ToPorts",
        ),
        (
            "unknown ICMP type",
            GOOD.replace(
                "    toPorts:\n    - ports:\n      - port: \"80\"\n        protocol: TCP\n",
                "    icmps: [{fields: [{type: EchoPlease}]}]\n",
            ),
            "spec.ingress[0].icmps[0].fields[0].type",
        ),
        (
            "wrong kind",
            GOOD.replace("CiliumNetworkPolicy", "CiliumPolicy"),
            "kind",
        ),
        ("empty", String::new(), "no rules"),
    ];
    for (what, text, field) in cases {
        let out = node.import_policy(text);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{what} was accepted");
        assert!(
            err.contains(field),
            "{what}: the error must name {field}: {err}"
        );
        assert_eq!(revision(&node), before, "{what} changed the policy");
    }
    assert!(
        reachable(&node.netns("a"), b, 80),
        "the good policy still allows a"
    );
    assert!(!reachable(&node.netns("c"), b, 80), "and still blocks c");

    // ICMP rules: c may ping b (echo requests only); a, allowed TCP 80
    // alone, may not.
    assert!(!node.ping("c", b) && !node.ping("a", b));
    let icmp = GOOD
        .replace("b-from-a", "b-pinged-by-c")
        .replace("{app: a}", "{app: c}")
        .replace(
            "    toPorts:\n    - ports:\n      - port: \"80\"\n        protocol: TCP\n",
            "    icmps:\n    - fields:\n      - {type: EchoRequest, family: IPv4}\n",
        );
    let out = node.import_policy(&icmp);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("c to ping b", 10, || node.ping("c", b));
    assert!(!node.ping("a", b), "a has no ICMP rule");
    node.cilium_ok(&[
        "policy",
        "delete",
        "k8s:io.cilium.k8s.policy.name=b-pinged-by-c",
    ]);

    let sel = node.cilium_ok(&["policy", "selectors"]);
    assert!(
        sel.contains("any:app=a") && sel.contains("default/b-from-a"),
        "{sel}"
    );

    // always: every endpoint is default-deny, also a (no rule selects it)
    node.cilium_ok(&["config", "PolicyEnforcement=always"]);
    let a = node.cilium_ok(&["endpoint", "list"]);
    assert!(a.matches("Enabled            Enabled").count() == 4, "{a}");
    // never: nothing is enforced, not even b's rule
    node.cilium_ok(&["config", "PolicyEnforcement=never"]);
    wait_for("c to reach b with enforcement off", 10, || {
        reachable(&node.netns("c"), b, 80)
    });
    node.cilium_ok(&["config", "PolicyEnforcement=default"]);
    wait_for("c to be blocked again", 10, || {
        !reachable(&node.netns("c"), b, 80)
    });

    let bad = node.cilium(&["policy", "delete"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--all"));
    let missing = node.cilium(&["policy", "delete", "k8s:io.cilium.k8s.policy.name=nope"]);
    assert!(!missing.status.success());
}
