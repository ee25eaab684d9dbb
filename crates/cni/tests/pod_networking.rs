//! Two pods on one node through cilium-cni and the agent: they ping and
//! talk TCP through our programs, survive a kill -9 of the agent, come back
//! with the same IDs and addresses, and DEL removes everything.

mod common;

use common::*;

/// (ID, address, state) of every pod's endpoint (not the node's own).
fn endpoints(node: &Node) -> Vec<(u64, String, String)> {
    let out = node.cilium_ok(&["endpoint", "list", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter(|e| !is_node_endpoint(e))
        .map(|e| {
            (
                e["id"].as_u64().unwrap(),
                e["status"]["networking"]["addressing"][0]["ipv4"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                e["status"]["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn two_pods_talk_survive_agent_kill_and_are_deleted_cleanly() {
    let mut node = Node::new("10.0.9.0/24");
    node.start_agent();
    let a = node.add_pod("pod-a");
    let b = node.add_pod("pod-b");
    assert_ne!(a, b);

    // ADD attached tc filters; the agent then moves endpoints onto pinned tcx links.
    for (id, _, _) in endpoints(&node) {
        let pin = node
            .bpffs()
            .join(format!("cilium/endpoints/{id}/links/cil_from_container"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !pin.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "endpoint {id} not on tcx"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
    assert!(node.ping("pod-a", b), "pod-a pings pod-b");
    assert!(node.ping("pod-b", a), "pod-b pings pod-a");
    let sport = tcp_exchange(node.netns("pod-b"), node.netns("pod-a"), b, 8080);

    // Proof the traffic went through our programs: conntrack and metrics.
    let ct = node.cilium_ok(&["bpf", "ct", "list", "global"]);
    let flow = format!("TCP OUT {a}:{sport} -> {b}:8080");
    assert!(ct.contains(&flow), "no CT entry {flow:?} in:\n{ct}");
    assert!(
        ct.contains(&format!("TCP IN {a}:{sport} -> {b}:8080")),
        "ingress entry of pod-b:\n{ct}"
    );
    assert!(ct.contains("ICMP OUT"), "ICMP entries:\n{ct}");
    assert!(
        ct.contains(&format!("ICMP OUT {a}:0 -> {b}:0 related ")),
        "the TCP flow's entry for ICMP errors about it:\n{ct}"
    );
    // Flushing conntrack empties both tables; new flows start over.
    let flushed = node.cilium_ok(&["bpf", "ct", "flush", "global"]);
    assert!(
        flushed.lines().count() == 2
            && flushed.contains("cilium_ct4_global")
            && flushed.contains("cilium_ct_any4_global")
            && !flushed.contains("Flushed 0 entries from"),
        "{flushed}"
    );
    let ct = node.cilium_ok(&["bpf", "ct", "list", "global"]);
    assert!(ct.trim().is_empty() || !ct.contains("TCP"), "{ct}");
    tcp_exchange(node.netns("pod-b"), node.netns("pod-a"), b, 8082);
    let nat = node.cilium_ok(&["bpf", "nat", "flush"]);
    assert!(
        nat.starts_with("Flushed 0 entries from") && nat.contains("cilium_snat_v4_external"),
        "{nat}"
    );
    let metrics = node.cilium_ok(&["bpf", "metrics", "list"]);
    assert!(
        metrics.contains("Success") || metrics.contains("Forwarded"),
        "forward counters:\n{metrics}"
    );

    let status = node.cilium_ok(&["status"]);
    assert!(
        status.contains("IPAM:                    IPv4: 4/254 allocated from 10.0.9.0/24,"),
        "{status}"
    );
    let before = endpoints(&node);
    assert_eq!(before.len(), 2);
    assert!(before.iter().all(|(_, _, st)| st == "ready"));

    node.kill_agent();
    assert!(node.ping("pod-a", b), "pods still talk with the agent dead");
    tcp_exchange(node.netns("pod-a"), node.netns("pod-b"), a, 8081);

    node.start_agent();
    assert_eq!(
        endpoints(&node),
        before,
        "restored with the same IDs and addresses"
    );
    assert!(node.ping("pod-b", a), "pods talk after the restart");
    // A restarted agent must not hand out a restored address again.
    let c = node.add_pod("pod-c");
    assert!(c != a && c != b);

    for pod in ["pod-a", "pod-b", "pod-c"] {
        let ns = node.netns(pod);
        assert_eq!(node.cni_pod("DEL", pod, ns.to_str().unwrap()).code, 0);
        // Idempotent, also once the netns is gone.
        assert_eq!(node.cni_pod("DEL", pod, ns.to_str().unwrap()).code, 0);
        netdev::netns::remove(&ns).unwrap();
        assert_eq!(node.cni_pod("DEL", pod, ns.to_str().unwrap()).code, 0);
    }
    assert!(endpoints(&node).is_empty());
    assert_eq!(
        node.lxc_links(),
        ["lxc_health"],
        "veths left:\n{}",
        node.links()
    );
    let status = node.cilium_ok(&["status"]);
    assert!(
        status.contains("IPv4: 2/254 allocated"),
        "only the router and the health endpoint keep addresses:\n{status}"
    );
    let lxc = node.cilium_ok(&["bpf", "endpoint", "list"]);
    for pod in [a, b, c] {
        assert!(
            !lxc.contains(&format!("{pod}:")),
            "{pod} left in cilium_lxc:\n{lxc}"
        );
    }
}
