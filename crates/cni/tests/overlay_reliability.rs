//! The overlay without its control plane: etcd stopped and restarted while
//! pods talk across nodes, and a node whose agent died leaving the others.

mod common;

use common::{tcp_exchange, wait_for, Cluster};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

fn in_ipcache(node: &common::Node, ip: Ipv4Addr) -> bool {
    node.cilium_ok(&["bpf", "ipcache", "list"])
        .lines()
        .any(|l| l.starts_with(&format!("{ip}/32")))
}

/// Pings from `from` on node 0 to `to` every 100 ms for `span`; every one
/// must be answered.
fn keep_pinging(cluster: &Cluster, from: &str, to: Ipv4Addr, span: Duration) {
    let end = Instant::now() + span;
    let mut sent = 0;
    while Instant::now() < end {
        assert!(
            cluster.nodes[0].ping(from, to),
            "ping {sent} from {from} to {to} was lost"
        );
        sent += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn etcd_outage_keeps_traffic_and_agents_resync() {
    let mut cluster = Cluster::new(2, &[]);
    for node in &mut cluster.nodes {
        node.start_agent();
    }
    let a = cluster.nodes[0].add_pod_labeled("web-1", "app=web");
    let b = cluster.nodes[1].add_pod_labeled("web-2", "app=web");
    wait_for("node1 to learn web-2", 30, || {
        in_ipcache(&cluster.nodes[0], b)
    });
    wait_for("node2 to learn web-1", 30, || {
        in_ipcache(&cluster.nodes[1], a)
    });
    assert!(cluster.nodes[0].ping("web-1", b));

    cluster.stop_etcd();
    keep_pinging(&cluster, "web-1", b, Duration::from_secs(3));
    // The agents say so: no pretending to be connected.
    wait_for("status to report etcd unreachable", 20, || {
        let status = cluster.nodes[0].cilium_ok(&["status"]);
        status.contains("KVStore:")
            && status.contains("Failure")
            && status.contains("etcd: 0/1 connected")
    });
    let brief = cluster.nodes[0].cilium(&["status", "--brief"]);
    assert!(!brief.status.success());
    assert!(String::from_utf8_lossy(&brief.stdout).contains("kvstore-health"));
    tcp_exchange(
        cluster.nodes[1].netns("web-2"),
        cluster.nodes[0].netns("web-1"),
        b,
        8080,
    );
    // A pod whose identity the node already holds is made while etcd is
    // down; the others learn it once etcd is back.
    let c = cluster.nodes[1].add_pod_labeled("web-3", "app=web");
    assert!(cluster.nodes[1].ping("web-3", b));

    cluster.start_etcd();
    keep_pinging(&cluster, "web-1", b, Duration::from_secs(1));
    wait_for("node1 to learn web-3 after etcd returned", 60, || {
        in_ipcache(&cluster.nodes[0], c)
    });
    assert!(cluster.nodes[0].ping("web-1", c));
    // New labels need the kvstore, which answers again.
    let d = cluster.nodes[1].add_pod_labeled("db-2", "app=db");
    wait_for("node1 to learn db-2", 30, || {
        in_ipcache(&cluster.nodes[0], d)
    });
    for node in &cluster.nodes {
        wait_for("status to report etcd connected", 20, || {
            node.cilium_ok(&["status"]).contains("etcd: 1/1 connected")
        });
        let nodes = node.cilium_ok(&["node", "list"]);
        assert!(
            nodes.contains("node1") && nodes.contains("node2"),
            "{nodes}"
        );
    }
}

#[test]
fn a_dead_agents_node_and_endpoints_expire() {
    let mut cluster = Cluster::new(2, &["--kvstore-lease-ttl=3s"]);
    for node in &mut cluster.nodes {
        node.start_agent();
    }
    let b = cluster.nodes[1].add_pod_labeled("web-2", "app=web");
    wait_for("node1 to learn web-2", 30, || {
        in_ipcache(&cluster.nodes[0], b)
    });
    wait_for("node1 to list node2", 30, || {
        cluster.nodes[0]
            .cilium_ok(&["node", "list"])
            .contains("node2")
    });

    cluster.nodes[1].kill_agent();
    wait_for("node2 to expire on node1", 30, || {
        !cluster.nodes[0]
            .cilium_ok(&["node", "list"])
            .contains("node2")
    });
    wait_for("web-2 to leave node1's ipcache", 30, || {
        !in_ipcache(&cluster.nodes[0], b)
    });
    let tunnels = cluster.nodes[0].cilium_ok(&["bpf", "tunnel", "list"]);
    assert!(!tunnels.contains("10.2.0.0"), "{tunnels}");
}
