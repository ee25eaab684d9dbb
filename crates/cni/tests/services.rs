//! Seed 004's walk on a 3-node cluster: a pod on node1 reaches a ClusterIP
//! whose backends run on node2 and node3; connections spread over them,
//! replies come from the ClusterIP, every node learns the service through
//! the kvstore, and removing a backend moves new connections away while an
//! established one keeps working.

mod common;

use common::{connect_in, exchange, udp_refused_in, wait_for, Cluster, LineServer};
use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use testsupport::client::{self, Placement, Proto};

const VIP: Ipv4Addr = Ipv4Addr::new(172, 16, 16, 87);
const SOCK_VIP: Ipv4Addr = Ipv4Addr::new(172, 16, 16, 90);

#[test]
fn a_pod_reaches_a_clusterip_with_backends_on_other_nodes() {
    let mut cluster = Cluster::new(3, &[]);
    for node in &mut cluster.nodes {
        node.start_agent();
    }
    let client = cluster.nodes[0].add_pod_labeled("client", "app=client");
    let web2 = cluster.nodes[1].add_pod_labeled("web-2", "app=web");
    let web3 = cluster.nodes[2].add_pod_labeled("web-3", "app=web");
    let _s2 = LineServer::start(&cluster.nodes[1].netns("web-2"), 8080, "web-2").unwrap();
    let _s3 = LineServer::start(&cluster.nodes[2].netns("web-3"), 8080, "web-3").unwrap();
    for (n, ip) in [(0, web2), (0, web3), (1, client)] {
        wait_for("pods known across nodes", 30, || {
            cluster.nodes[n]
                .cilium_ok(&["bpf", "ipcache", "list"])
                .contains(&format!("{ip}/32"))
        });
    }

    let backends = format!("{web2}:8080,{web3}:8080");
    let out = cluster.nodes[0].cilium_ok(&[
        "service",
        "update",
        "--id",
        "5",
        "--frontend",
        &format!("{VIP}:80"),
        "--backends",
        &backends,
        "--k8s-cluster-ip",
    ]);
    assert!(
        out.contains("Creating new service with id '5'") && out.contains("Added 2 backends"),
        "{out}"
    );
    for node in &cluster.nodes {
        wait_for("every node to learn the service", 30, || {
            let list = node.cilium_ok(&["service", "list"]);
            list.contains(&format!("{VIP}:80"))
                && list.contains(&format!("2 => {web3}:8080 (active)"))
        });
        let lb = node.cilium_ok(&["bpf", "lb", "list"]);
        assert!(
            lb.contains("0.0.0.0:0 (5) (0) [ClusterIP, non-routable]"),
            "{}: {lb}",
            node.name
        );
        assert!(lb.contains(&format!("{web2}:8080 (5) (1)")), "{lb}");
    }

    let client_ns = cluster.nodes[0].netns("client");
    let mut answered = BTreeSet::new();
    for i in 0..24 {
        let mut conn = connect_in(&client_ns, VIP, 80).expect("connect to the ClusterIP");
        assert_eq!(
            conn.peer_addr().unwrap(),
            SocketAddr::from((VIP, 80)),
            "replies come from the ClusterIP"
        );
        let reply = exchange(&mut conn, &format!("hello {i}")).unwrap();
        answered.insert(reply.split(':').next().unwrap().to_owned());
    }
    assert_eq!(
        answered,
        BTreeSet::from(["web-2".to_owned(), "web-3".to_owned()])
    );
    // Nothing takes UDP on the backends' port: the client's socket hears
    // the port unreachable, which the datapath turned into the frontend's.
    assert!(
        udp_refused_in(&client_ns, VIP, 80).unwrap(),
        "UDP to the ClusterIP is refused at once"
    );

    // An established connection to web-2 survives web-2 leaving the service.
    let mut held = loop {
        let mut c = connect_in(&client_ns, VIP, 80).unwrap();
        if exchange(&mut c, "who").unwrap().starts_with("web-2") {
            break c;
        }
    };
    let out = cluster.nodes[1].cilium_ok(&[
        "service",
        "update",
        "--id",
        "5",
        "--frontend",
        &format!("{VIP}:80"),
        "--backends",
        &format!("{web3}:8080"),
    ]);
    assert!(
        out.contains("Updating existing service with id '5'"),
        "{out}"
    );
    wait_for("node1 to drop web-2 from the service", 30, || {
        !cluster.nodes[0]
            .cilium_ok(&["service", "list"])
            .contains(&format!("{web2}:8080"))
    });
    for i in 0..12 {
        let mut conn = connect_in(&client_ns, VIP, 80).unwrap();
        let reply = exchange(&mut conn, &format!("again {i}")).unwrap();
        assert!(reply.starts_with("web-3"), "{reply}");
    }
    assert_eq!(
        exchange(&mut held, "still there?").unwrap(),
        "web-2: still there?"
    );

    // No backends: the connection fails instead of hanging forever.
    cluster.nodes[2].cilium_ok(&[
        "service",
        "update",
        "--id",
        "5",
        "--frontend",
        &format!("{VIP}:80"),
        "--backends",
        "",
    ]);
    wait_for("node1 to see the empty service", 30, || {
        !cluster.nodes[0]
            .cilium_ok(&["service", "list"])
            .contains(&format!("{web3}:8080"))
    });
    let t = std::time::Instant::now();
    let refused = connect_in(&client_ns, VIP, 80).expect_err("no backend to connect to");
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{refused}: {}",
        cluster.nodes[0].cilium_ok(&["bpf", "metrics", "list"])
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(1),
        "refused at once, not after retries"
    );
    let metrics = cluster.nodes[0].cilium_ok(&["bpf", "metrics", "list"]);
    assert!(metrics.contains("Service backend not found"), "{metrics}");

    cluster.nodes[0].cilium_ok(&["service", "delete", "5"]);
    for node in &cluster.nodes {
        wait_for("the service to leave every node", 30, || {
            !node
                .cilium_ok(&["bpf", "lb", "list"])
                .contains(&VIP.to_string())
        });
    }
    let bad = cluster.nodes[0].cilium(&["service", "update", "--id", "6", "--frontend", "nope:80"]);
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("460"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn nodeport_reaches_backends_from_the_underlay() {
    let mut cluster = Cluster::new(
        2,
        &["--kube-proxy-replacement=true", "--bpf-lb-algorithm=maglev"],
    );
    for node in &mut cluster.nodes {
        node.start_agent();
    }
    let status = cluster.nodes[0].cilium_ok(&["status"]);
    assert!(
        status.contains("KubeProxyReplacement:    True   [eth0   198.18.0.11]"),
        "{status}"
    );
    let web2 = cluster.nodes[1].add_pod_labeled("web-2", "app=web");
    let _s2 = LineServer::start(&cluster.nodes[1].netns("web-2"), 8080, "web-2").unwrap();
    wait_for("node1 to learn web-2", 30, || {
        cluster.nodes[0]
            .cilium_ok(&["bpf", "ipcache", "list"])
            .contains(&format!("{web2}/32"))
    });
    cluster.nodes[0].cilium_ok(&[
        "service",
        "update",
        "--id",
        "9",
        "--frontend",
        "0.0.0.0:30080",
        "--backends",
        &format!("{web2}:8080"),
        "--k8s-node-port",
    ]);
    for node in &cluster.nodes {
        wait_for("the NodePort on every node", 30, || {
            node.cilium_ok(&["bpf", "lb", "list"])
                .contains("0.0.0.0:30080")
        });
    }
    let lb = cluster.nodes[0].cilium_ok(&["bpf", "lb", "list"]);
    assert!(lb.contains("[NodePort, non-routable]"), "{lb}");
    // Its Maglev table: every slot names the one backend.
    let maglev = cluster.nodes[0].cilium_ok(&["bpf", "lb", "maglev", "list", "-o", "json"]);
    let tables: serde_json::Value = serde_json::from_str(&maglev).unwrap();
    let table = tables["[9]/v4"][0]
        .as_str()
        .unwrap_or_else(|| panic!("{maglev}"));
    let slots: Vec<&str> = table.trim_matches(['[', ']']).split(' ').collect();
    assert_eq!(slots.len(), 16381);
    assert!(slots.iter().all(|s| *s == slots[0] && *s != "0"), "{table}");
    let shown = cluster.nodes[0].cilium_ok(&["bpf", "lb", "maglev", "list"]);
    assert!(
        shown.starts_with("SVC ID") && shown.contains("[9]/v4"),
        "{shown}"
    );

    // A machine on the underlay, through node1 (backend remote) and node2
    // (backend local); replies come from the address it connected to.
    let outside = cluster.machine("outside", Ipv4Addr::new(198, 18, 0, 50));
    for (i, node_ip) in [common::node_ip(1), common::node_ip(2)]
        .into_iter()
        .enumerate()
    {
        for round in 0..3 {
            let mut conn = connect_in(&outside, node_ip, 30080).unwrap_or_else(|e| {
                panic!(
                    "NodePort via node{}: {e}\n{}",
                    i + 1,
                    cluster.nodes[i].cilium_ok(&["bpf", "metrics", "list"])
                )
            });
            assert_eq!(
                conn.peer_addr().unwrap(),
                SocketAddr::from((node_ip, 30080))
            );
            assert_eq!(
                exchange(&mut conn, &format!("hi {round}")).unwrap(),
                format!("web-2: hi {round}")
            );
        }
    }

    // Socket LB (on with kube-proxy-replacement): a process of a pod on
    // node1, in the node's cgroup, is given the backend at connect(); it
    // still sees the frontend it asked for.
    cluster.nodes[0].add_pod("client");
    cluster.nodes[0].cilium_ok(&[
        "service",
        "update",
        "--id",
        "10",
        "--frontend",
        &format!("{SOCK_VIP}:80"),
        "--backends",
        &format!("{web2}:8080"),
        "--k8s-cluster-ip",
    ]);
    wait_for("node1 to learn the ClusterIP", 30, || {
        cluster.nodes[0]
            .cilium_ok(&["service", "list"])
            .contains(&format!("{SOCK_VIP}:80"))
    });
    let pod_ns = cluster.nodes[0].netns("client");
    let in_pod = || Placement {
        netns: Some(&pod_ns),
        cgroup: Some(&cluster.nodes[0].cgroup),
    };
    assert_eq!(
        client::run(in_pod(), Proto::Tcp, SOCK_VIP, 80, 3),
        vec![format!("peer={SOCK_VIP}:80 reply=web-2: hello"); 3]
    );
    let node2 = common::node_ip(2);
    assert_eq!(
        client::run(in_pod(), Proto::Tcp, node2, 30080, 2),
        vec![format!("peer={node2}:30080 reply=web-2: hello"); 2],
        "a NodePort through another node's address"
    );
    // Translated before any packet: no SERVICE conntrack entry names the
    // frontend, as the per-packet path would have made.
    let ct = cluster.nodes[0].cilium_ok(&["bpf", "ct", "list", "global"]);
    assert!(!ct.contains(&SOCK_VIP.to_string()), "{ct}");
    assert!(!ct.contains(&format!("{node2}:30080")), "{ct}");

    // A service deleted while node1's agent is down leaves node1's maps
    // when the agent is back; the others stay.
    cluster.nodes[0].kill_agent();
    cluster.nodes[1].cilium_ok(&["service", "delete", "10"]);
    cluster.nodes[0].start_agent();
    wait_for("node1 to drop the service deleted meanwhile", 30, || {
        !cluster.nodes[0]
            .cilium_ok(&["bpf", "lb", "list"])
            .contains(&SOCK_VIP.to_string())
    });
    let lb = cluster.nodes[0].cilium_ok(&["bpf", "lb", "list"]);
    assert!(
        lb.contains("0.0.0.0:30080") && lb.contains(&format!("{web2}:8080")),
        "{lb}"
    );
}

#[test]
fn without_a_kvstore_services_survive_an_agent_restart() {
    let mut node = common::Node::new("10.0.20.0/24");
    node.start_agent();
    node.add_pod("client");
    let server = node.add_pod("server");
    let _s = LineServer::start(&node.netns("server"), 8080, "server").unwrap();
    node.cilium_ok(&[
        "service",
        "update",
        "--id",
        "3",
        "--frontend",
        &format!("{VIP}:80"),
        "--backends",
        &format!("{server}:8080"),
    ]);
    let lb_before = node.cilium_ok(&["bpf", "lb", "list"]);
    let mut held = connect_in(&node.netns("client"), VIP, 80).unwrap();
    assert_eq!(exchange(&mut held, "one").unwrap(), "server: one");

    node.kill_agent();
    assert_eq!(
        exchange(&mut held, "two").unwrap(),
        "server: two",
        "the datapath keeps serving"
    );
    node.start_agent();
    let list = node.cilium_ok(&["service", "list"]);
    assert!(
        list.contains(&format!(
            "3    {VIP}:80   ClusterIP      1 => {server}:8080 (active)"
        )),
        "{list}"
    );
    assert_eq!(
        node.cilium_ok(&["bpf", "lb", "list"]),
        lb_before,
        "same entries, same backend ID"
    );
    let mut conn = connect_in(&node.netns("client"), VIP, 80).unwrap();
    assert_eq!(exchange(&mut conn, "three").unwrap(), "server: three");
    assert_eq!(exchange(&mut held, "four").unwrap(), "server: four");
}
