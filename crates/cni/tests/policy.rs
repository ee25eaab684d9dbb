//! Identity-based policy on a 2-node cluster: a policy imported on node1
//! is enforced on node2 (where the selected pod runs), default deny, an
//! allow rule for exactly one pod pair and port across nodes, deny over
//! allow, entity rules, drops counted under Cilium's reasons, established
//! allowed flows kept across policy changes, bad input refused with the
//! old policy still in force, and deletion giving traffic back, also to
//! a node whose agent was down when the policy was deleted.

mod common;

use common::{connect_in, exchange, is_node_endpoint, wait_for, Cluster, LineServer};
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::Duration;

fn reachable(from: &Path, ip: Ipv4Addr, port: u16) -> bool {
    common::tcp_reachable(from, ip, port, Duration::from_millis(700))
}

/// Waits until ip:port is (or is not) reachable from `from`.
fn expect(from: &Path, ip: Ipv4Addr, port: u16, open: bool, what: &str) {
    wait_for(what, 20, || reachable(from, ip, port) == open);
}

/// Waits until `node`'s ipcache has the endpoint at `ip`.
fn learn(node: &common::Node, ip: Ipv4Addr, what: &str) {
    wait_for(what, 30, || {
        node.cilium_ok(&["bpf", "ipcache", "list"])
            .contains(&format!("{ip}/32"))
    });
}

fn import(node: &common::Node, text: &str) -> std::process::Output {
    node.import_policy(text)
}

fn import_ok(node: &common::Node, text: &str) {
    let out = import(node, text);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `cilium monitor --type <kind>` on `node`, once it is listening.
fn monitor(
    node: &common::Node,
    kind: &str,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    node.monitor(&["--type", kind])
}

/// `cilium explain` on `node`: its verdict line.
fn explain(node: &common::Node, src: &str, dst: &str, port: u16) -> String {
    let out = node.cilium_ok(&["explain", src, dst, "--port", &port.to_string()]);
    out.lines()
        .find(|l| l.starts_with("Verdict: "))
        .unwrap_or_else(|| panic!("no verdict in {out}"))
        .to_owned()
}

/// `cilium policy trace` between two pods: its final verdict.
fn trace(node: &common::Node, from: &str, to: &str, port: &str) -> String {
    let out = node.cilium_ok(&[
        "policy",
        "trace",
        "--src-k8s-pod",
        &format!("default:{from}"),
        "--dst-k8s-pod",
        &format!("default:{to}"),
        "--dport",
        &format!("{port}/TCP"),
    ]);
    out.lines()
        .find_map(|l| l.strip_prefix("Final verdict: "))
        .unwrap_or_else(|| panic!("no verdict in {out}"))
        .to_owned()
}

const WEB_EGRESS: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: web-egress
spec:
  endpointSelector:
    matchLabels: {app: web}
  egress:
  - toEndpoints:
    - matchLabels: {app: db}
  - toCIDR: [198.18.0.50/32]
    toPorts:
    - ports:
      - port: "9000"
"#;

const DEFAULT_DENY: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: db-default-deny
spec:
  endpointSelector:
    matchLabels: {app: db}
  ingress:
  - {}
"#;

const ALLOW_WEB: &str = testsupport::policies::DB_FROM_WEB;

const DENY_WEB: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumClusterwideNetworkPolicy
metadata:
  name: deny-web-to-db
spec:
  endpointSelector:
    matchLabels: {k8s:app: db}
  ingressDeny:
  - fromEndpoints:
    - matchLabels: {k8s:app: web}
"#;

const OTHER_TO_HOST_ONLY: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: other-egress
spec:
  endpointSelector:
    matchLabels: {app: other}
  egress:
  - toEntities: [host]
"#;

#[test]
fn policies_are_enforced_across_nodes_and_explained_by_drop_reasons() {
    let mut cluster = Cluster::new(2, &["--prometheus-serve-addr=:9962"]);
    for node in &mut cluster.nodes {
        node.start_agent();
    }
    let web_ip = cluster.nodes[0].add_pod_labeled("web", "app=web");
    cluster.nodes[0].add_pod_labeled("other", "app=other");
    let db = cluster.nodes[1].add_pod_labeled("db", "app=db");
    let _s1 = LineServer::start(&cluster.nodes[1].netns("db"), 5432, "db").unwrap();
    let _s2 = LineServer::start(&cluster.nodes[1].netns("db"), 8080, "db-admin").unwrap();
    let (web, other) = (
        cluster.nodes[0].netns("web"),
        cluster.nodes[0].netns("other"),
    );
    learn(&cluster.nodes[0], db, "node1 to learn db");
    expect(&web, db, 5432, true, "web to reach db before any policy");
    let list = cluster.nodes[1].cilium_ok(&["endpoint", "list"]);
    assert!(list.contains("Disabled           Disabled"), "{list}");

    // Default deny, imported on node1, enforced on node2.
    let out = import(&cluster.nodes[0], DEFAULT_DENY);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Revision: "));
    expect(&web, db, 5432, false, "default deny to block web");
    let list = cluster.nodes[1].cilium_ok(&["endpoint", "list"]);
    assert!(list.contains("Enabled            Disabled"), "{list}");

    // Exactly web, exactly 5432; node2's monitor shows the drops.
    let (mut mon, events) = monitor(&cluster.nodes[1], "drop");
    let (mut tmon, traces) = monitor(&cluster.nodes[1], "trace");
    let (mut vmon, verdicts) = monitor(&cluster.nodes[1], "policy-verdict");
    import_ok(&cluster.nodes[0], ALLOW_WEB);
    expect(&web, db, 5432, true, "web to reach db:5432");
    assert!(!reachable(&web, db, 8080), "web must not reach db:8080");
    let wanted = format!("-> {db}:8080 tcp SYN");
    let seen = loop {
        let line = events
            .recv_timeout(Duration::from_secs(10))
            .expect("cilium monitor to report the drop");
        if line.contains(&wanted) {
            break line;
        }
    };
    assert!(
        seen.starts_with("xx drop (Policy denied) flow 0x") && seen.contains("file bpf_lxc.c:"),
        "{seen}"
    );
    let _ = mon.kill();
    let _ = mon.wait();
    // ...and the allowed connection as a trace into db's endpoint.
    let wanted = format!("-> {db}:5432 tcp SYN");
    let seen = loop {
        let line = traces
            .recv_timeout(Duration::from_secs(10))
            .expect("cilium monitor to trace the forwarded flow");
        if line.contains(&wanted) && line.starts_with("-> endpoint ") {
            break line;
        }
    };
    assert!(seen.contains("state new"), "{seen}");
    let _ = tmon.kill();
    let _ = tmon.wait();
    // ...and both decisions as policy verdicts.
    let (mut allow, mut deny) = (None, None);
    while allow.is_none() || deny.is_none() {
        let line = verdicts
            .recv_timeout(Duration::from_secs(10))
            .expect("policy verdicts for the allowed and the denied flow");
        if line.contains(&format!("-> {db}:5432 tcp SYN")) {
            allow = Some(line);
        } else if line.contains(&format!("-> {db}:8080 tcp SYN")) {
            deny = Some(line);
        }
    }
    let (allow, deny) = (allow.unwrap(), deny.unwrap());
    assert!(
        allow.starts_with("Policy verdict log: flow 0x")
            && allow.contains("proto 6, ingress, action allow, auth: disabled, match L3-L4"),
        "{allow}"
    );
    assert!(
        deny.contains("ingress, action deny, auth: disabled, match none"),
        "{deny}"
    );
    let _ = vmon.kill();
    let _ = vmon.wait();
    // cilium explain names the same outcomes, map by map.
    assert_eq!(
        explain(&cluster.nodes[0], "web", "db", 5432),
        "Verdict: FORWARDED"
    );
    assert_eq!(
        explain(&cluster.nodes[0], "web", "db", 8080),
        "Verdict: DROPPED (Policy denied)"
    );
    assert_eq!(
        explain(&cluster.nodes[1], "other", "db", 5432),
        "Verdict: DROPPED (Policy denied)"
    );

    // A service without backends: the monitor and explain agree on why.
    let (mut mon1, events1) = monitor(&cluster.nodes[0], "drop");
    cluster.nodes[0].cilium_ok(&[
        "service",
        "update",
        "--id",
        "20",
        "--frontend",
        "172.16.16.99:80",
        "--backends",
        "",
    ]);
    assert!(!reachable(&web, Ipv4Addr::new(172, 16, 16, 99), 80));
    let seen = loop {
        let line = events1
            .recv_timeout(Duration::from_secs(10))
            .expect("cilium monitor to report the service drop");
        if line.contains("-> 172.16.16.99:80 tcp SYN") {
            break line;
        }
    };
    assert!(
        seen.starts_with("xx drop (Service backend not found)"),
        "{seen}"
    );
    let _ = mon1.kill();
    let _ = mon1.wait();
    assert_eq!(
        explain(&cluster.nodes[0], "web", "172.16.16.99", 80),
        "Verdict: DROPPED (Service backend not found)"
    );
    assert!(!reachable(&other, db, 5432), "other must not reach db:5432");
    let metrics = cluster.nodes[1].cilium_ok(&["bpf", "metrics", "list"]);
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("Policy denied ") && l.contains("INGRESS")),
        "{metrics}"
    );

    // The trace (on either node) says what the datapath did.
    assert_eq!(trace(&cluster.nodes[0], "web", "db", "5432"), "ALLOWED");
    assert_eq!(trace(&cluster.nodes[1], "web", "db", "8080"), "DENIED");
    assert_eq!(trace(&cluster.nodes[0], "other", "db", "5432"), "DENIED");
    let db_ep = cluster.nodes[1].cilium_ok(&["endpoint", "list", "-o", "json"]);
    let db_ep: serde_json::Value = serde_json::from_str(&db_ep).unwrap();
    let db_id = db_ep
        .as_array()
        .unwrap()
        .iter()
        .find(|e| !is_node_endpoint(e))
        .expect("db's endpoint")["id"]
        .as_u64()
        .unwrap()
        .to_string();
    let map = cluster.nodes[1].cilium_ok(&["bpf", "policy", "get", &db_id]);
    assert!(
        map.lines()
            .any(|l| l.starts_with("Allow    Ingress     k8s:app=web") && l.contains("5432/TCP")),
        "{map}"
    );

    // An established allowed flow survives an unrelated policy change.
    let mut held = connect_in(&web, db, 5432).unwrap();
    assert_eq!(exchange(&mut held, "a").unwrap(), "db: a");
    import_ok(&cluster.nodes[0], OTHER_TO_HOST_ONLY);
    assert_eq!(exchange(&mut held, "b").unwrap(), "db: b");

    // Entity rule: other may reach only its host.
    let node1_ip = common::node_ip(1);
    assert!(
        cluster.nodes[0]
            .in_pod(
                "other",
                &["ping", "-c", "1", "-W", "2", &node1_ip.to_string()]
            )
            .status
            .success(),
        "other to its host"
    );
    assert!(
        !cluster.nodes[0]
            .in_pod("other", &["ping", "-c", "1", "-W", "1", &db.to_string()])
            .status
            .success(),
        "other must not reach db"
    );
    let metrics = cluster.nodes[0].cilium_ok(&["bpf", "metrics", "list"]);
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("Policy denied ") && l.contains("EGRESS")),
        "{metrics}"
    );

    // Deny beats allow.
    import_ok(&cluster.nodes[0], DENY_WEB);
    expect(&web, db, 5432, false, "the deny to win over the allow");
    let metrics = cluster.nodes[1].cilium_ok(&["bpf", "metrics", "list"]);
    assert!(metrics.contains("Policy denied by denylist"), "{metrics}");
    assert_eq!(trace(&cluster.nodes[0], "web", "db", "5432"), "DENIED");
    assert_eq!(
        explain(&cluster.nodes[0], "web", "db", 5432),
        "Verdict: DROPPED (Policy denied by denylist)"
    );
    // The same counters, as Prometheus scrapes them from node2.
    let scraped = common::scrape(common::node_ip(2), 9962);
    let denied = scraped
        .lines()
        .find(|l| l.starts_with("cilium_drop_count_total{direction=\"INGRESS\",reason=\"Policy denied by denylist\"}"))
        .unwrap_or_else(|| panic!("{scraped}"));
    assert!(
        denied.rsplit(' ').next().unwrap().parse::<f64>().unwrap() >= 1.0,
        "{denied}"
    );
    assert!(
        scraped.contains("cilium_forward_count_total{direction=\"EGRESS\"}"),
        "{scraped}"
    );
    assert!(scraped.contains("# TYPE cilium_policy gauge"), "{scraped}");
    let listed = cluster.nodes[1].cilium_ok(&["metrics", "list", "-p", "drop_count"]);
    assert!(listed.contains("reason=\"Policy denied\""), "{listed}");

    // CIDR and world rules: a machine outside the cluster.
    let outside_ip = Ipv4Addr::new(198, 18, 0, 50);
    let outside = cluster.machine("outside", outside_ip);
    let mut ip = std::process::Command::new("ip");
    ip.args([
        "route",
        "add",
        "10.1.0.0/24",
        "via",
        &common::node_ip(1).to_string(),
    ]);
    common::in_netns(&mut ip, &outside);
    assert!(ip.status().unwrap().success());
    let _ext1 = LineServer::start(&outside, 9000, "ext").unwrap();
    let _ext2 = LineServer::start(&outside, 9001, "ext-admin").unwrap();
    expect(
        &web,
        outside_ip,
        9001,
        true,
        "web to reach the outside before egress policy",
    );
    import_ok(&cluster.nodes[0], WEB_EGRESS);
    expect(
        &web,
        outside_ip,
        9001,
        false,
        "the CIDR rule to leave only port 9000",
    );
    assert!(
        reachable(&web, outside_ip, 9000),
        "web to the allowed CIDR and port"
    );
    let ids = cluster.nodes[0].cilium_ok(&["bpf", "ipcache", "list"]);
    assert!(
        ids.contains("198.18.0.50/32"),
        "the CIDR has an identity: {ids}"
    );
    assert!(
        !reachable(&other, outside_ip, 9000),
        "other may reach only its host"
    );
    import_ok(
        &cluster.nodes[0],
        &OTHER_TO_HOST_ONLY.replace("[host]", "[host, world]"),
    );
    expect(
        &other,
        outside_ip,
        9000,
        true,
        "the world entity to let other out",
    );
    import_ok(
        &cluster.nodes[0],
        &OTHER_TO_HOST_ONLY.replace("[host]", "[cluster]"),
    );
    expect(
        &other,
        outside_ip,
        9000,
        false,
        "the cluster entity to exclude the outside",
    );
    assert!(
        cluster.nodes[0]
            .in_pod(
                "other",
                &["ping", "-c", "1", "-W", "2", &web_ip.to_string()]
            )
            .status
            .success(),
        "the cluster entity to include pods"
    );

    // Bad input: refused, named, nothing changed.
    let bad = import(&cluster.nodes[0], &ALLOW_WEB.replace("\"5432\"", "99999"));
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("spec.ingress[0].toPorts[0].ports[0].port") && err.contains("line"),
        "{err}"
    );
    let got = cluster.nodes[0].cilium_ok(&["policy", "get"]);
    assert!(
        got.contains("deny-web-to-db") && got.contains("5432"),
        "{got}"
    );

    // Delete one, then all: traffic comes back.
    cluster.nodes[0].cilium_ok(&[
        "policy",
        "delete",
        "k8s:io.cilium.k8s.policy.name=deny-web-to-db",
    ]);
    expect(
        &web,
        db,
        5432,
        true,
        "web to reach db once the deny is gone",
    );
    cluster.nodes[0].cilium_ok(&["policy", "delete", "--all"]);
    expect(&other, db, 5432, true, "other to reach db with no policy");
    let list = cluster.nodes[1].cilium_ok(&["endpoint", "list"]);
    assert!(list.contains("Disabled           Disabled"), "{list}");
}

#[test]
fn a_policy_deleted_while_an_agent_is_down_is_gone_when_it_is_back() {
    let mut cluster = Cluster::new(2, &[]);
    for node in &mut cluster.nodes {
        node.start_agent();
    }
    cluster.nodes[0].add_pod_labeled("web", "app=web");
    let db = cluster.nodes[1].add_pod_labeled("db", "app=db");
    let _s = LineServer::start(&cluster.nodes[1].netns("db"), 5432, "db").unwrap();
    let web = cluster.nodes[0].netns("web");
    learn(&cluster.nodes[0], db, "node1 to learn db");
    import_ok(&cluster.nodes[0], DEFAULT_DENY);
    expect(&web, db, 5432, false, "default deny to block web");

    // node2 keeps the policy in its state dir; the kvstore loses it while
    // node2's agent is down.
    cluster.nodes[1].kill_agent();
    cluster.nodes[0].cilium_ok(&["policy", "delete", "--all"]);
    cluster.nodes[1].start_agent();
    expect(
        &web,
        db,
        5432,
        true,
        "node2 to drop the policy deleted meanwhile",
    );
    let got = cluster.nodes[1].cilium_ok(&["policy", "get"]);
    assert!(!got.contains("db-default-deny"), "{got}");
}
