//! An IPv6-only node (`enable-ipv4=false`, `enable-ipv6=true`): pods get
//! one address, an IPv6 one, through cilium-cni and talk over it; IPv6
//! policy is enforced; the node keeps them across a kill -9; and nothing
//! of IPv4 is handed out or configured.

mod common;

use common::ipv6::{ping6, pods_on_two_nodes_talk};
use common::*;
use std::net::Ipv6Addr;

const RANGE6: &str = "fd00:10:0:8::/112";

/// The only address cilium-cni gave `pod`: an IPv6 one, with routes to
/// the IPv6 router alone.
fn add_ipv6_pod(node: &Node, pod: &str, labels: &str) -> Ipv6Addr {
    let ns = node.create_netns(pod);
    let out = node.cni_pod_labeled("ADD", pod, ns.to_str().unwrap(), labels);
    assert_eq!(out.code, 0, "ADD {pod}: {}", out.json);
    let ips = out.json["ips"].as_array().expect("ips");
    assert_eq!(ips.len(), 1, "one family: {}", out.json);
    let routes = out.json["routes"].to_string();
    assert!(routes.contains("\"::/0\""), "IPv6 default route: {routes}");
    assert!(!routes.contains("0.0.0.0/0"), "no IPv4 route: {routes}");
    let addr = ips[0]["address"].as_str().expect("ips[0].address");
    assert!(addr.ends_with("/128"), "{addr}");
    addr.trim_end_matches("/128")
        .parse()
        .expect("an IPv6 address")
}

#[test]
fn ipv6_only_pods_talk_and_ipv6_policy_is_enforced() {
    let mut node = Node::new("10.0.8.0/24");
    node.agent_args = vec![
        "--enable-ipv4=false".into(),
        "--enable-ipv6=true".into(),
        format!("--ipv6-range={RANGE6}"),
    ];
    node.start_agent();
    let status = node.cilium_ok(&["status", "--verbose"]);
    assert!(status.contains("IPv6"), "{status}");

    let a6 = add_ipv6_pod(&node, "pod-a", "app=client");
    let b6 = add_ipv6_pod(&node, "pod-b", "app=server");
    assert_eq!(eth0_ipv4(&node.netns("pod-b")), None, "no IPv4 in a pod");
    assert!(ping6(&node, "pod-a", b6), "pod-a pings pod-b");
    assert!(ping6(&node, "pod-b", a6), "pod-b pings pod-a");
    tcp_exchange(node.netns("pod-b"), node.netns("pod-a"), b6, 8080);
    let out = node
        .command("ping")
        .args(["-6", "-c", "1", "-W", "2", &b6.to_string()])
        .output()
        .expect("run ping");
    assert!(out.status.success(), "the node pings pod-b");

    // the endpoint's addressing and the maps hold IPv6 alone
    let endpoints = node.cilium_ok(&["endpoint", "list"]);
    assert!(endpoints.contains(&b6.to_string()), "{endpoints}");
    let lxc = node.cilium_ok(&["bpf", "endpoint", "list"]);
    assert!(
        lxc.lines().any(|l| l.starts_with(&format!("{b6} "))),
        "{lxc}"
    );
    assert!(!lxc.contains("0.0.0.0"), "{lxc}");
    // the world of an IPv6-only node is the plain world (2), as 1.16's
    let ipcache = node.cilium_ok(&["bpf", "ipcache", "list"]);
    assert!(
        ipcache
            .lines()
            .any(|l| l.starts_with("::/0 ") && l.contains("identity=2 ")),
        "{ipcache}"
    );
    assert!(!ipcache.contains("0.0.0.0/0"), "{ipcache}");

    node.kill_agent();
    node.start_agent();
    assert!(
        ping6(&node, "pod-a", b6),
        "IPv6 after a kill -9 of the agent"
    );
    let endpoints = node.cilium_ok(&["endpoint", "list"]);
    assert!(endpoints.contains(&b6.to_string()), "{endpoints}");

    let out = node.import_policy(
        r#"[{
  "endpointSelector": {"matchLabels": {"app": "server"}},
  "ingress": [{
    "fromEndpoints": [{"matchLabels": {"app": "client"}}],
    "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}]
  }]
}]"#,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("IPv6 ping to pod-b refused by policy", 10, || {
        !ping6(&node, "pod-a", b6)
    });
    tcp_exchange(node.netns("pod-b"), node.netns("pod-a"), b6, 8080);

    let metrics = node.cilium_ok(&["bpf", "metrics", "list"]);
    assert!(!metrics.contains("Unsupported L3 protocol"), "{metrics}");
    assert!(metrics.contains("Policy denied"), "{metrics}");

    for pod in ["pod-a", "pod-b"] {
        let ns = node.netns(pod);
        let out = node.cni_pod("DEL", pod, ns.to_str().unwrap());
        assert_eq!(out.code, 0, "DEL {pod}: {}", out.json);
    }
    let ipcache = node.cilium_ok(&["bpf", "ipcache", "list"]);
    assert!(!ipcache.contains(&format!("{b6}/128")), "{ipcache}");
}

#[test]
fn ipv6_only_pods_on_two_nodes_talk_over_direct_routes() {
    let mut cluster = Cluster::new(
        2,
        &[
            "--enable-ipv4=false",
            "--enable-ipv6=true",
            "--routing-mode=native",
            "--auto-direct-node-routes=true",
            "--ipv6-native-routing-cidr=fd00:10::/48",
        ],
    );
    for (i, node) in cluster.nodes.iter_mut().enumerate() {
        node.agent_args
            .push(format!("--ipv6-range=fd00:10:0:{}::/112", i + 1));
        node.start_agent();
    }
    let a6 = add_ipv6_pod(&cluster.nodes[0], "pod-a", "app=client");
    let b6 = add_ipv6_pod(&cluster.nodes[1], "pod-b", "app=server");
    wait_for("node2's ipcache to hold pod-a's address", 30, || {
        cluster.nodes[1]
            .cilium_ok(&["bpf", "ipcache", "list"])
            .lines()
            .any(|l| l.starts_with(&format!("{a6}/128")))
    });
    pods_on_two_nodes_talk(&cluster, a6, b6);
    for node in &cluster.nodes {
        let routes = node.cilium_ok(&["node", "list"]);
        assert!(routes.contains("fd00:10:0:1::/112"), "{routes}");
        let metrics = node.cilium_ok(&["bpf", "metrics", "list"]);
        assert!(!metrics.contains("Unsupported L3 protocol"), "{metrics}");
    }
}
