//! What the dual-stack and IPv6-only node tests both check over IPv6.
#![allow(dead_code)]

use std::net::Ipv6Addr;
use testsupport::cluster::Cluster;
use testsupport::node::Node;

pub fn ping6(node: &Node, from: &str, to: Ipv6Addr) -> bool {
    node.in_pod(from, &["ping", "-6", "-c", "1", "-W", "2", &to.to_string()])
        .status
        .success()
}

/// pod-a on the first node (at `a6`) and pod-b on the second (at `b6`)
/// ping each other, and pod-b sees pod-a's own address on a TCP
/// connection (nothing masquerades it inside the cluster).
pub fn pods_on_two_nodes_talk(cluster: &Cluster, a6: Ipv6Addr, b6: Ipv6Addr) {
    assert!(ping6(&cluster.nodes[0], "pod-a", b6), "pod-a pings pod-b");
    assert!(ping6(&cluster.nodes[1], "pod-b", a6), "pod-b pings pod-a");
    let (na, nb) = (
        cluster.nodes[0].netns("pod-a"),
        cluster.nodes[1].netns("pod-b"),
    );
    let (_, reply) = netdev::netns::tcp_request(
        netdev::NetNs::open(&nb).unwrap(),
        netdev::NetNs::open(&na).unwrap(),
        b6,
        8080,
        b"hello",
    )
    .expect("TCP from pod-a to pod-b over IPv6");
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with(&format!("pong to [{a6}]:")),
        "pod-b saw pod-a's own address: {reply}"
    );
}
