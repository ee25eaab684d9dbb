//! A dual-stack node (`enable-ipv6`): pods get an IPv4 and an IPv6 address
//! from the agent's two allocators through cilium-cni, and talk over both
//! through the dual-stack datapath: ping and TCP, IPv6 ingress policy
//! that admits TCP and refuses ICMPv6, and no `Unsupported L3 protocol`
//! drop (the IPv6 an IPv4-only node refuses) anywhere.

mod common;

use common::ipv6::{ping6, pods_on_two_nodes_talk};
use common::*;
use std::net::Ipv6Addr;
use testsupport::client::{self, Placement, Proto};

const RANGE6: &str = "fd00:10:0:9::/112";

/// The IPv6 address cilium-cni gave `pod` (its second `ips` entry).
fn add_dual_stack_pod(node: &Node, pod: &str, labels: &str) -> Ipv6Addr {
    let ns = node.create_netns(pod);
    let out = node.cni_pod_labeled("ADD", pod, ns.to_str().unwrap(), labels);
    assert_eq!(out.code, 0, "ADD {pod}: {}", out.json);
    let ips = out.json["ips"].as_array().expect("ips");
    assert_eq!(ips.len(), 2, "both families: {}", out.json);
    let routes = out.json["routes"].to_string();
    assert!(routes.contains("\"::/0\""), "IPv6 default route: {routes}");
    let addr = ips[1]["address"].as_str().expect("ips[1].address");
    assert!(addr.ends_with("/128"), "{addr}");
    addr.trim_end_matches("/128")
        .parse()
        .expect("an IPv6 address")
}

/// A UDP datagram of `size` bytes from the pod at `client` to `server_ip`
/// and its echo back, between the pods' namespaces; whether the echo came
/// whole, from `server_ip`. Above the route MTU the datagram travels as IPv6 fragments.
fn udp_echo6(
    server: &std::path::Path,
    client: &std::path::Path,
    server_ip: Ipv6Addr,
    size: usize,
) -> bool {
    use std::net::UdpSocket;
    let timeout = std::time::Duration::from_secs(3);
    let (server, client) = (
        netdev::NetNs::open(server).unwrap(),
        netdev::NetNs::open(client).unwrap(),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let srv = std::thread::spawn(move || {
        server.enter().unwrap();
        let sock = UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 9000)).unwrap();
        sock.set_read_timeout(Some(timeout)).unwrap();
        tx.send(()).unwrap();
        let mut buf = vec![0; 65536];
        if let Ok((n, peer)) = sock.recv_from(&mut buf) {
            let _ = sock.send_to(&buf[..n], peer);
        }
    });
    rx.recv().unwrap();
    let cli = std::thread::spawn(move || {
        client.enter().unwrap();
        let sock = UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0)).unwrap();
        sock.set_read_timeout(Some(timeout)).unwrap();
        let payload: Vec<u8> = (0..size).map(|i| i as u8).collect();
        // connected: an echo from any other address is not taken
        sock.connect((server_ip, 9000)).unwrap();
        sock.send(&payload).unwrap();
        let mut buf = vec![0; 65536];
        matches!(sock.recv(&mut buf), Ok(n) if buf[..n] == payload[..])
    });
    let ok = cli.join().unwrap();
    srv.join().unwrap();
    ok
}

#[test]
fn dual_stack_pods_talk_over_both_families_and_ipv6_policy_is_enforced() {
    let mut node = Node::new("10.0.9.0/24");
    node.agent_args = vec![
        "--enable-ipv6=true".into(),
        format!("--ipv6-range={RANGE6}"),
    ];
    node.start_agent();
    let status = node.cilium_ok(&["status", "--verbose"]);
    assert!(status.contains("IPv6"), "{status}");

    let a6 = add_dual_stack_pod(&node, "pod-a", "app=client");
    let b6 = add_dual_stack_pod(&node, "pod-b", "app=server");
    let prefix: u128 = u128::from("fd00:10:0:9::".parse::<Ipv6Addr>().unwrap());
    for ip in [a6, b6] {
        assert_eq!(u128::from(ip) >> 16, prefix >> 16, "{ip} from {RANGE6}");
    }
    let b4 = eth0_ipv4(&node.netns("pod-b")).expect("pod-b's IPv4 address");
    assert!(node.ping("pod-a", b4), "pod-a pings pod-b over IPv4");
    assert!(ping6(&node, "pod-a", b6), "pod-a pings pod-b over IPv6");
    assert!(ping6(&node, "pod-b", a6), "pod-b pings pod-a over IPv6");
    tcp_exchange(node.netns("pod-b"), node.netns("pod-a"), b6, 8080);
    let (na, nb) = (node.netns("pod-a"), node.netns("pod-b"));
    assert!(udp_echo6(&nb, &na, b6, 200), "UDP over IPv6");
    // fragments, which 1.16 drops (code 157) and we track
    assert!(udp_echo6(&nb, &na, b6, 4000), "fragmented UDP over IPv6");

    // Hubble names both ends of an IPv6 flow
    let mut v6_flow = String::new();
    wait_for("Hubble to show an IPv6 TCP flow to pod-b", 10, || {
        let flows = node.cilium_ok(&["observe", "--last", "1000", "-o", "json"]);
        v6_flow = flows
            .lines()
            .find(|l| l.contains(&format!("\"destination\":\"{b6}\"")) && l.contains("\"TCP\""))
            .unwrap_or_default()
            .to_owned();
        !v6_flow.is_empty()
    });
    assert!(
        v6_flow.contains("\"pod_name\":\"pod-a\"") && v6_flow.contains("\"pod_name\":\"pod-b\""),
        "{v6_flow}"
    );
    // the node itself reaches a pod over IPv6 (cil_from_host)
    let out = node
        .command("ping")
        .args(["-6", "-c", "1", "-W", "2", &b6.to_string()])
        .output()
        .expect("run ping");
    assert!(out.status.success(), "the node pings pod-b over IPv6");
    // a restarted agent takes both addresses back: no new ones, still talking
    node.kill_agent();
    node.start_agent();
    assert!(
        ping6(&node, "pod-a", b6),
        "IPv6 after a kill -9 of the agent"
    );
    let status = node.cilium_ok(&["status", "--verbose"]);
    assert!(
        status.contains(&b6.to_string()),
        "pod-b keeps its IPv6 address:\n{status}"
    );

    let endpoints = node.cilium_ok(&["endpoint", "list", "-o", "json"]);
    assert!(endpoints.contains(&b6.to_string()), "{endpoints}");
    let ipcache = node.cilium_ok(&["bpf", "ipcache", "list"]);
    assert!(ipcache.contains(&format!("{b6}/128")), "{ipcache}");
    let lxc = node.cilium_ok(&["bpf", "endpoint", "list"]);
    assert!(
        lxc.lines().any(|l| l.starts_with(&format!("{b6} "))),
        "{lxc}"
    );
    let ct = node.cilium_ok(&["bpf", "ct", "list", "global"]);
    let flow = format!("TCP OUT [{a6}]:");
    assert!(
        ct.lines()
            .any(|l| l.starts_with(&flow) && l.contains(&format!("-> [{b6}]:8080"))),
        "no IPv6 TCP entry in:\n{ct}"
    );

    // pod-b admits TCP 8080 from the client and nothing else
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

    // an icmps rule of family IPv6 lets the echo through again
    let out = node.import_policy(
        r#"[{
  "endpointSelector": {"matchLabels": {"app": "server"}},
  "ingress": [{
    "fromEndpoints": [{"matchLabels": {"app": "client"}}],
    "icmps": [{"fields": [{"type": "EchoRequest", "family": "IPv6"}]}]
  }]
}]"#,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for("IPv6 echo to pod-b allowed by its icmps rule", 10, || {
        ping6(&node, "pod-a", b6)
    });

    let metrics = node.cilium_ok(&["bpf", "metrics", "list"]);
    assert!(
        !metrics.contains("Unsupported L3 protocol"),
        "IPv6 dropped as unknown on a dual-stack node:\n{metrics}"
    );
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
fn ipv6_pods_on_two_nodes_talk_through_the_ipv4_overlay() {
    let mut cluster = Cluster::new(2, &["--enable-ipv6=true"]);
    for (i, node) in cluster.nodes.iter_mut().enumerate() {
        node.agent_args
            .push(format!("--ipv6-range=fd00:10:0:{}::/112", i + 1));
        node.start_agent();
    }
    let a6 = add_dual_stack_pod(&cluster.nodes[0], "pod-a", "app=client");
    let b6 = add_dual_stack_pod(&cluster.nodes[1], "pod-b", "app=server");
    wait_for(
        "each node's ipcache to hold the other's IPv6 pod",
        30,
        || {
            [(0, b6, 2), (1, a6, 1)].iter().all(|(n, ip, host)| {
                let ipcache = cluster.nodes[*n].cilium_ok(&["bpf", "ipcache", "list"]);
                ipcache.lines().any(|l| {
                    l.starts_with(&format!("{ip}/128"))
                        && l.contains(&format!("tunnelendpoint={}", node_ip(*host)))
                })
            })
        },
    );
    assert!(
        ping6(&cluster.nodes[0], "pod-a", b6),
        "pod-a pings pod-b across nodes"
    );
    assert!(
        ping6(&cluster.nodes[1], "pod-b", a6),
        "pod-b pings pod-a across nodes"
    );
    tcp_exchange(
        cluster.nodes[1].netns("pod-b"),
        cluster.nodes[0].netns("pod-a"),
        b6,
        8080,
    );
    let (na, nb) = (
        cluster.nodes[0].netns("pod-a"),
        cluster.nodes[1].netns("pod-b"),
    );
    assert!(udp_echo6(&nb, &na, b6, 4000), "fragmented UDP across nodes");

    // each node publishes its IPv6 router and pod CIDR: the other routes
    // that CIDR into cilium_host and knows the router as remote-node, so
    // the node itself reaches the other's pods over IPv6
    let router2: Ipv6Addr = "fd00:10:0:2::1".parse().unwrap();
    wait_for("node1 to learn node2's IPv6 router", 30, || {
        cluster.nodes[0]
            .cilium_ok(&["bpf", "ipcache", "list"])
            .lines()
            .any(|l| l.starts_with(&format!("{router2}/128")) && l.contains("identity=6 "))
    });
    let out = cluster.nodes[0]
        .command("ping")
        .args(["-6", "-c", "1", "-W", "2", &b6.to_string()])
        .output()
        .expect("run ping");
    assert!(out.status.success(), "node1 pings pod-b on node2 over IPv6");
    for node in &cluster.nodes {
        let metrics = node.cilium_ok(&["bpf", "metrics", "list"]);
        assert!(!metrics.contains("Unsupported L3 protocol"), "{metrics}");
    }
}

#[test]
fn ipv6_pods_on_two_nodes_talk_over_direct_routes_in_native_routing() {
    let mut cluster = Cluster::new(
        2,
        &[
            "--enable-ipv6=true",
            "--routing-mode=native",
            "--auto-direct-node-routes=true",
            "--ipv4-native-routing-cidr=10.0.0.0/8",
            "--ipv6-native-routing-cidr=fd00:10::/48",
        ],
    );
    for (i, node) in cluster.nodes.iter_mut().enumerate() {
        node.agent_args
            .push(format!("--ipv6-range=fd00:10:0:{}::/112", i + 1));
        node.start_agent();
    }
    // each node routes the other's IPv6 pod CIDR via its IPv6 underlay
    // address (fd00:198:18::<octet>), straight out of the underlay device
    for (n, other) in [(0, 2), (1, 1)] {
        let cidr = format!("fd00:10:0:{other}::/112");
        let gateway = testsupport::topology::underlay_ipv6(node_ip(other));
        wait_for(&format!("node{} to route {cidr}", n + 1), 30, || {
            let out = cluster.nodes[n]
                .command("ip")
                .args(["-6", "route", "show", &cidr])
                .output()
                .expect("run ip");
            let routes = String::from_utf8_lossy(&out.stdout).into_owned();
            routes.lines().count() == 1 && routes.contains(&format!("via {gateway} dev "))
        });
    }
    let a6 = add_dual_stack_pod(&cluster.nodes[0], "pod-a", "app=client");
    let b6 = add_dual_stack_pod(&cluster.nodes[1], "pod-b", "app=server");
    wait_for("node2's ipcache to hold pod-a's IPv6 address", 30, || {
        cluster.nodes[1]
            .cilium_ok(&["bpf", "ipcache", "list"])
            .lines()
            .any(|l| l.starts_with(&format!("{a6}/128")))
    });
    pods_on_two_nodes_talk(&cluster, a6, b6);
    let (na, nb) = (
        cluster.nodes[0].netns("pod-a"),
        cluster.nodes[1].netns("pod-b"),
    );
    assert!(udp_echo6(&nb, &na, b6, 4000), "fragmented UDP across nodes");
    for node in &cluster.nodes {
        let status = node.cilium_ok(&["status"]);
        assert!(status.contains("Network: Native"), "{status}");
        let metrics = node.cilium_ok(&["bpf", "metrics", "list"]);
        assert!(!metrics.contains("Unsupported L3 protocol"), "{metrics}");
    }
}

/// A dual-stack node at fd00:198:18::11 with `args`, and an outside host
/// at fd00:198:18::50: pod-a reaches it over IPv6 by TCP and ping, seen as
/// the node; `cilium status` names the masquerading `mode`. The cluster
/// and the outside host's namespace.
fn masquerades_ipv6(args: &[&str], mode: &str) -> (Cluster, std::path::PathBuf) {
    let node_v6: Ipv6Addr = "fd00:198:18::11".parse().unwrap();
    let outside_v6: Ipv6Addr = "fd00:198:18::50".parse().unwrap();
    let mut all = vec!["--enable-ipv6=true", "--ipv6-range=fd00:10:0:1::/112"];
    all.extend_from_slice(args);
    let mut cluster = Cluster::new(1, &all);
    // the underlay gives every machine its IPv6 twin (fd00:198:18::<octet>)
    let outside = cluster.machine("outside", std::net::Ipv4Addr::new(198, 18, 0, 50));
    let node = &mut cluster.nodes[0];
    node.start_agent();
    let status = node.cilium_ok(&["status"]);
    assert!(
        status.lines().any(|l| l.starts_with("Masquerading:")
            && l[13..].trim_start().starts_with(mode)
            && l.ends_with("[IPv4: Enabled, IPv6: Enabled]")),
        "{status}"
    );
    add_dual_stack_pod(node, "pod-a", "");
    let (_, reply) = netdev::netns::tcp_request(
        netdev::NetNs::open(&outside).unwrap(),
        netdev::NetNs::open(&node.netns("pod-a")).unwrap(),
        outside_v6,
        8080,
        b"hello",
    )
    .expect("TCP from the pod to the outside over IPv6");
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.starts_with(&format!("pong to [{node_v6}]:")),
        "the outside saw the node's address: {reply}"
    );
    assert!(
        node.in_pod(
            "pod-a",
            &["ping", "-6", "-c", "1", "-W", "2", &outside_v6.to_string()]
        )
        .status
        .success(),
        "pod-a pings the outside over IPv6"
    );
    (cluster, outside)
}

#[test]
fn ipv6_leaving_the_cluster_is_masqueraded_with_ip6tables() {
    masquerades_ipv6(&[], "IPTables");
}

#[test]
fn ipv6_cidr_policies_select_the_outside_by_prefix() {
    let (cluster, outside) = masquerades_ipv6(&[], "IPTables");
    let node = &cluster.nodes[0];
    let tcp = || {
        netdev::netns::tcp_request(
            netdev::NetNs::open(&outside).unwrap(),
            netdev::NetNs::open(&node.netns("pod-a")).unwrap(),
            "fd00:198:18::50".parse::<Ipv6Addr>().unwrap(),
            8080,
            b"hello",
        )
        .is_ok()
    };
    let ping = || {
        node.in_pod(
            "pod-a",
            &["ping", "-6", "-c", "1", "-W", "1", "fd00:198:18::50"],
        )
        .status
        .success()
    };
    let import = |rules: &str| {
        let out = node.import_policy(rules);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // TCP 8080 to the outside host's /128, nothing else: ICMPv6 refused
    import(
        r#"[{"endpointSelector": {"matchLabels": {}},
  "egress": [{"toCIDR": ["fd00:198:18::50/128"],
              "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}]}]}]"#,
    );
    wait_for("ICMPv6 to the outside refused by policy", 10, || !ping());
    assert!(tcp(), "TCP 8080 to fd00:198:18::50/128 is allowed");
    let ipcache = node.cilium_ok(&["bpf", "ipcache", "list"]);
    assert!(
        ipcache
            .lines()
            .any(|l| l.starts_with("fd00:198:18::50/128 ") && l.contains("identity=16777")),
        "the prefix has a CIDR identity:\n{ipcache}"
    );
    // the underlay's /64 except the host: everything else there, not it
    node.cilium_ok(&["policy", "delete", "--all"]);
    import(
        r#"[{"endpointSelector": {"matchLabels": {}},
  "egress": [{"toCIDRSet": [{"cidr": "fd00:198:18::/64", "except": ["fd00:198:18::50/128"]}]}]}]"#,
    );
    wait_for("TCP to the excepted host refused", 10, || !tcp());
    assert!(!ping());
    let drops = node.cilium_ok(&["bpf", "metrics", "list"]);
    assert!(drops.contains("Policy denied"), "{drops}");
}

#[test]
fn ipv6_leaving_the_cluster_is_masqueraded_in_bpf() {
    let (cluster, _) = masquerades_ipv6(
        &[
            "--enable-bpf-masquerade=true",
            "--kube-proxy-replacement=true",
        ],
        "BPF",
    );
    let nat = cluster.nodes[0].cilium_ok(&["bpf", "nat", "list"]);
    assert!(
        nat.lines().any(|l| l.starts_with("TCP OUT [fd00:10:0:1::")
            && l.contains("-> [fd00:198:18::50]:8080 XLATE_SRC [fd00:198:18::11]:")),
        "the flow's IPv6 NAT entry:\n{nat}"
    );
    assert!(
        nat.contains("ICMPv6 OUT [fd00:10:0:1::"),
        "the ping's:\n{nat}"
    );
}

#[test]
fn an_ipv6_nodeport_reaches_backends_from_the_underlay() {
    ipv6_nodeport(&[]);
}

#[test]
fn an_ipv6_nodeport_reaches_backends_in_native_routing() {
    ipv6_nodeport(&[
        "--routing-mode=native",
        "--auto-direct-node-routes=true",
        "--ipv4-native-routing-cidr=10.0.0.0/8",
        "--ipv6-native-routing-cidr=fd00:10::/48",
    ]);
}

/// A NodePort `[::]:30080` with web-2 on node2 behind it, on two nodes
/// started with `args` beside dual stack and kube-proxy replacement: the
/// outside host reaches it through each node's IPv6 address.
fn ipv6_nodeport(args: &[&str]) {
    let mut all = vec!["--enable-ipv6=true", "--kube-proxy-replacement=true"];
    all.extend_from_slice(args);
    let mut cluster = Cluster::new(2, &all);
    let outside = cluster.machine("outside", std::net::Ipv4Addr::new(198, 18, 0, 50));
    let node_v6 = |i: usize| testsupport::topology::underlay_ipv6(node_ip(i));
    for (i, node) in cluster.nodes.iter_mut().enumerate() {
        node.agent_args
            .push(format!("--ipv6-range=fd00:10:0:{}::/112", i + 1));
        node.start_agent();
    }
    let web2 = add_dual_stack_pod(&cluster.nodes[1], "web-2", "app=web");
    let _server = testsupport::node::LineServer::start_on(
        &cluster.nodes[1].netns("web-2"),
        Ipv6Addr::UNSPECIFIED.into(),
        8080,
        "web-2",
    )
    .unwrap();
    wait_for("node1 to learn web-2", 30, || {
        cluster.nodes[0]
            .cilium_ok(&["bpf", "ipcache", "list"])
            .contains(&format!("{web2}/128"))
    });
    cluster.nodes[0].cilium_ok(&[
        "service",
        "update",
        "--id",
        "9",
        "--frontend",
        "[::]:30080",
        "--backends",
        &format!("[{web2}]:8080"),
        "--k8s-node-port",
    ]);
    for node in &cluster.nodes {
        wait_for("the IPv6 NodePort on every node", 30, || {
            node.cilium_ok(&["bpf", "lb", "list"])
                .contains("[::]:30080")
        });
    }
    // through node1 (the backend elsewhere) and node2 (the backend its
    // own): replies come from the address the client connected to
    for i in [1, 2] {
        for round in 0..3 {
            let mut conn = testsupport::node::connect_in(&outside, node_v6(i), 30080)
                .unwrap_or_else(|e| {
                    panic!(
                        "connect to [{}]:30080: {e}\n{}",
                        node_v6(i),
                        cluster.nodes[i - 1].cilium_ok(&["bpf", "metrics", "list"])
                    )
                });
            assert_eq!(
                conn.peer_addr().unwrap(),
                std::net::SocketAddr::from((node_v6(i), 30080))
            );
            assert_eq!(
                testsupport::node::exchange(&mut conn, &format!("hi {round}")).unwrap(),
                format!("web-2: hi {round}")
            );
        }
    }
    let nat = cluster.nodes[0].cilium_ok(&["bpf", "nat", "list"]);
    assert!(
        nat.lines()
            .any(|l| l.starts_with("TCP OUT [fd00:198:18::50]:")
                && l.contains(&format!("XLATE_DST [{web2}]:8080"))),
        "node1's NodePort entries:\n{nat}"
    );
}

/// `cilium service update --id <id> --frontend <f> --backends <b>` on
/// `node`: whether it was taken, and what it said on stderr.
fn service_update(node: &Node, id: &str, frontend: &str, backends: &str) -> (bool, String) {
    let out = node.cilium(&[
        "service",
        "update",
        "--id",
        id,
        "--frontend",
        frontend,
        "--backends",
        backends,
    ]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn ipv6_services_fill_the_lb6_maps_and_an_ipv4_node_refuses_them() {
    let mut node = Node::new("10.0.9.0/24");
    node.agent_args = vec![
        "--enable-ipv6=true".into(),
        format!("--ipv6-range={RANGE6}"),
        "--bpf-lb-sock=true".into(),
    ];
    node.start_agent();
    let (taken, said) = service_update(
        &node,
        "30",
        "[fd00:96::30]:80",
        "[fd00:10:0:9::5]:8080,[fd00:10:0:9::6]:8080",
    );
    assert!(taken, "{said}");
    let list = node.cilium_ok(&["service", "list"]);
    assert!(
        list.lines()
            .any(|l| l.contains("[fd00:96::30]:80")
                && l.contains("1 => [fd00:10:0:9::5]:8080 (active)")),
        "{list}"
    );
    let maps = node.cilium_ok(&["bpf", "lb", "list"]);
    assert!(
        maps.contains("[::]:0 (30) (0) [ClusterIP, non-routable]")
            && maps.contains("[fd00:10:0:9::6]:8080 (30) (2)"),
        "{maps}"
    );

    // a backend of the other family is refused, naming it
    let (taken, said) = service_update(&node, "31", "[fd00:96::31]:80", "10.0.9.5:8080");
    assert!(
        !taken && said.contains("10.0.9.5:8080 is not of frontend"),
        "{said}"
    );
    node.cilium_ok(&["service", "delete", "30"]);
    let maps = node.cilium_ok(&["bpf", "lb", "list"]);
    assert!(!maps.contains("fd00:96::30"), "{maps}");

    // the datapath balances it: a pod reaches another through the IPv6
    // frontend over TCP and UDP, the replies coming from the frontend
    let _a6 = add_dual_stack_pod(&node, "pod-a", "app=client");
    let b6 = add_dual_stack_pod(&node, "pod-b", "app=server");
    let vip: Ipv6Addr = "fd00:96::40".parse().unwrap();
    for (id, port) in [("40", 8080), ("41", 9000)] {
        let (taken, said) = service_update(
            &node,
            id,
            &format!("[{vip}]:{port}"),
            &format!("[{b6}]:{port}"),
        );
        assert!(taken, "{said}");
    }
    tcp_exchange(node.netns("pod-b"), node.netns("pod-a"), vip, 8080);
    let (na, nb) = (node.netns("pod-a"), node.netns("pod-b"));
    assert!(
        udp_echo6(&nb, &na, vip, 200),
        "UDP through the IPv6 frontend"
    );
    let ct = node.cilium_ok(&["bpf", "ct", "list", "global"]);
    assert!(
        ct.lines()
            .any(|l| l.starts_with(&format!("TCP OUT [{vip}]:8080 -> ")) && l.contains(" service ")),
        "the flow's SERVICE entry:\n{ct}"
    );
    // socket LB (bpf-lb-sock): a process in the node's cgroup
    // is given the backend at connect6() and still sees the frontend
    let _server = testsupport::node::LineServer::start_on(
        &node.netns("pod-b"),
        Ipv6Addr::UNSPECIFIED.into(),
        8081,
        "b",
    )
    .unwrap();
    service_update(&node, "42", &format!("[{vip}]:81"), &format!("[{b6}]:8081"));
    let placement = Placement {
        netns: Some(&na),
        cgroup: Some(&node.cgroup),
    };
    assert_eq!(
        client::run(placement, Proto::Tcp, vip, 81, 2),
        vec![format!("peer={vip}:81 reply=b: hello"); 2]
    );

    // a node without IPv6 has no IPv6 maps and says why
    let mut v4 = Node::new("10.0.8.0/24");
    v4.start_agent();
    let (taken, said) = service_update(&v4, "30", "[fd00:96::30]:80", "[fd00:10:0:9::5]:8080");
    assert!(!taken && said.contains("needs enable-ipv6"), "{said}");
}
