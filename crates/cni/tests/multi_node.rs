//! Three nodes on one underlay, one etcd: pods on every node reach pods on
//! the others through cilium_vxlan; every agent learns every node, every
//! pod's address with its identity and node, and the same labels give the
//! same identity everywhere.

mod common;

use common::{node_ip, tcp_exchange, wait_for, Cluster};
use std::net::Ipv4Addr;

/// The identity `cilium endpoint get` reports for the endpoint of `pod`.
fn identity_of(node: &common::Node, pod: &str) -> u64 {
    let eps: serde_json::Value =
        serde_json::from_str(&node.cilium_ok(&["endpoint", "list", "-o", "json"])).unwrap();
    eps.as_array()
        .unwrap()
        .iter()
        .find(|e| e["status"]["external-identifiers"]["k8s-pod-name"] == pod)
        .and_then(|e| e["status"]["identity"]["id"].as_u64())
        .unwrap_or_else(|| panic!("no endpoint for {pod}: {eps}"))
}

#[test]
fn pods_on_three_nodes_talk_through_the_overlay() {
    let mut cluster = Cluster::new(3, &[]);
    for node in &mut cluster.nodes {
        node.start_agent();
    }
    let mut pods: Vec<(usize, String, Ipv4Addr)> = Vec::new();
    for (i, node) in cluster.nodes.iter().enumerate() {
        let name = format!("web-{}", i + 1);
        pods.push((i, name.clone(), node.add_pod_labeled(&name, "app=web")));
    }
    let db = cluster.nodes[0].add_pod_labeled("db-1", "app=db");

    for node in &cluster.nodes {
        wait_for("every node to be listed", 30, || {
            let list = node.cilium_ok(&["node", "list"]);
            (1..=3).all(|i| {
                list.contains(&format!("node{i} ")) && list.contains(&node_ip(i).to_string())
            })
        });
    }
    for (n, node) in cluster.nodes.iter().enumerate() {
        wait_for("every remote pod in the ipcache", 30, || {
            let ipcache = node.cilium_ok(&["bpf", "ipcache", "list"]);
            pods.iter().filter(|(i, _, _)| *i != n).all(|(i, _, ip)| {
                ipcache.lines().any(|l| {
                    l.starts_with(&format!("{ip}/32"))
                        && l.contains(&format!("tunnelendpoint={}", node_ip(i + 1)))
                })
            })
        });
    }

    let web: Vec<u64> = pods
        .iter()
        .map(|(i, name, _)| identity_of(&cluster.nodes[*i], name))
        .collect();
    assert!(web.iter().all(|id| *id == web[0] && *id >= 256), "{web:?}");
    let db_id = identity_of(&cluster.nodes[0], "db-1");
    assert_ne!(db_id, web[0]);
    for node in &cluster.nodes {
        let ipcache = node.cilium_ok(&["bpf", "ipcache", "list"]);
        for (_, _, ip) in &pods {
            let line = ipcache
                .lines()
                .find(|l| l.starts_with(&format!("{ip}/32")))
                .unwrap_or_else(|| panic!("{ip} missing on {}: {ipcache}", node.name));
            assert!(line.contains(&format!("identity={} ", web[0])), "{line}");
        }
        wait_for("identities to be listed", 10, || {
            let ids = node.cilium_ok(&["identity", "list"]);
            ids.contains("k8s:app=web") && ids.contains(&db_id.to_string())
        });
    }
    let got = cluster.nodes[2].cilium_ok(&["identity", "get", &web[0].to_string()]);
    assert!(got.contains("k8s:app=web"), "{got}");

    for (i, from, _) in &pods {
        for (j, _, to) in &pods {
            if i != j {
                assert!(
                    cluster.nodes[*i].ping(from, *to),
                    "{from} on node{} cannot ping {to} on node{}",
                    i + 1,
                    j + 1
                );
            }
        }
    }
    assert!(cluster.nodes[2].ping("web-3", db));
    // Datagrams above the route MTU go as fragments, across nodes too.
    assert!(cluster.nodes[0].ping_sized("web-1", pods[1].2, 3000));
    assert!(cluster.nodes[2].ping_sized("web-3", db, 3000));
    let frags = cluster.nodes[0].cilium_ok(&["bpf", "frag", "list"]);
    assert!(
        frags.starts_with("ID") && frags.contains(&format!("ICMP    {}:", pods[0].2)),
        "{frags}"
    );
    for (i, _, _) in &pods {
        let j = (i + 1) % 3;
        let (client, server) = (&cluster.nodes[*i], &cluster.nodes[j]);
        tcp_exchange(
            server.netns(&format!("web-{}", j + 1)),
            client.netns(&format!("web-{}", i + 1)),
            pods[j].2,
            8080,
        );
    }
    // The receiving node learned the sender's identity from the VNI.
    for node in &cluster.nodes {
        let ct = node.cilium_ok(&["bpf", "ct", "list", "global"]);
        assert!(
            ct.lines().any(|l| l.starts_with("TCP IN")
                && l.contains(":8080 ")
                && l.contains(&format!("SourceSecurityID={} ", web[0]))),
            "{}: {ct}",
            node.name
        );
    }
    let node1 = &cluster.nodes[0];
    let cached = node1.cilium_ok(&["map", "get", "cilium_ipcache"]);
    assert!(
        cached
            .lines()
            .any(|l| l.starts_with(&format!("{}/32", pods[1].2))
                && l.contains(&format!("tunnelendpoint={}", node_ip(2)))
                && l.contains("sync")),
        "{cached}"
    );
    assert!(node1.cilium_ok(&["map", "list"]).contains("cilium_ipcache"));
    assert!(!node1
        .cilium(&["map", "get", "cilium_nope"])
        .status
        .success());
    assert!(node1.links().contains("cilium_vxlan"));
    let tunnels = node1.cilium_ok(&["bpf", "tunnel", "list"]);
    assert!(
        tunnels.contains("10.2.0.0") && tunnels.contains(&node_ip(2).to_string()),
        "{tunnels}"
    );
}
