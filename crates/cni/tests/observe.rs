//! Observability end to end on a 2-node cluster: a forwarded flow, a
//! policy drop and a drop for a service without backends each show up in
//! `cilium monitor` (one-line, verbose and agent notifications, filtered by
//! endpoint), in `cilium observe` with pod names, identities and verdicts
//! (filtered by pod, namespace, verdict and port), and in the Prometheus
//! counters; `cilium explain` names the same reasons.

mod common;

use common::{wait_for, Cluster, LineServer};
use std::net::Ipv4Addr;
use std::sync::mpsc::Receiver;
use std::time::Duration;

const ALLOW_WEB: &str = testsupport::policies::DB_FROM_WEB;

const NO_BACKENDS: Ipv4Addr = Ipv4Addr::new(172, 16, 16, 98);

/// A stream of output lines, searchable in any order: a line one search
/// passes over stays there for the next.
struct Lines {
    rx: Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn new(rx: Receiver<String>) -> Self {
        Self {
            rx,
            seen: Vec::new(),
        }
    }

    /// The first line `pred` accepts, waiting up to 10 s for it.
    fn find(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        if let Some(l) = self.seen.iter().find(|l| pred(l)) {
            return l.clone();
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = self
                .rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what} within 10s in {:#?}", self.seen));
            self.seen.push(line.clone());
            if pred(&line) {
                return line;
            }
        }
    }
}

fn endpoint_id(node: &common::Node, ip: Ipv4Addr) -> u64 {
    let list = node.cilium_ok(&["endpoint", "list", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .find(|e| e.to_string().contains(&format!("\"{ip}\"")))
        .unwrap_or_else(|| panic!("no endpoint with {ip} in {list}"))["id"]
        .as_u64()
        .unwrap()
}

/// A Prometheus sample's value, 0 when absent.
fn sample(scraped: &str, series: &str) -> f64 {
    scraped
        .lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

fn observe(node: &common::Node, args: &[&str]) -> Vec<String> {
    let all: Vec<&str> = std::iter::once("observe")
        .chain(args.iter().copied())
        .collect();
    node.cilium_ok(&all).lines().map(str::to_owned).collect()
}

#[test]
fn flows_drops_and_agent_events_are_observable() {
    let mut cluster = Cluster::new(2, &["--prometheus-serve-addr=:9962"]);
    for node in &mut cluster.nodes {
        node.start_agent();
    }
    let (mut agent_mon, agent_events) = cluster.nodes[0].monitor(&["--type", "agent"]);
    let mut agent_events = Lines::new(agent_events);
    let web = cluster.nodes[0].add_pod_labeled("web", "app=web");
    let db = cluster.nodes[1].add_pod_labeled("db", "app=db");
    let _s1 = LineServer::start(&cluster.nodes[1].netns("db"), 5432, "db").unwrap();
    let _s2 = LineServer::start(&cluster.nodes[1].netns("db"), 8080, "db-admin").unwrap();
    let web_ns = cluster.nodes[0].netns("web");
    wait_for("node1 to learn db", 30, || {
        cluster.nodes[0]
            .cilium_ok(&["bpf", "ipcache", "list"])
            .contains(&format!("{db}/32"))
    });
    let created = agent_events.find("endpoint created", |l| {
        l.starts_with(">> Endpoint created: ")
    });
    assert!(created.contains("\"pod-name\":\"web\""), "{created}");
    // node2's health endpoint may be learned first
    let db_cidr = format!("\"cidr\":\"{db}/32\"");
    agent_events.find("db's ipcache upsert", |l| {
        l.starts_with(">> IPCache entry upserted: ") && l.contains(&db_cidr)
    });

    // node2 watches db's traffic: one-line and verbose, by endpoint.
    let db_id = endpoint_id(&cluster.nodes[1], db);
    let db_id_s = db_id.to_string();
    let (mut mon, events) = cluster.nodes[1].monitor(&["--related-to", &db_id_s]);
    let mut events = Lines::new(events);
    let (mut vmon, verbose) = cluster.nodes[1].monitor(&["--to", &db_id_s, "-v", "--type", "drop"]);
    let mut verbose = Lines::new(verbose);
    let (mut fmon, from_other) = cluster.nodes[1].monitor(&["--from", "9999"]);

    cluster.nodes[0].import_policy(ALLOW_WEB);
    let updated = agent_events.find("policy updated", |l| l.starts_with(">> Policy updated: "));
    assert!(
        updated.contains("k8s:io.cilium.k8s.policy.name=db-from-web")
            && updated.contains("\"rule_count\":1"),
        "{updated}"
    );
    wait_for("the policy to block db:8080", 20, || {
        !common::tcp_reachable(&web_ns, db, 8080, Duration::from_millis(700))
    });
    assert!(common::tcp_reachable(
        &web_ns,
        db,
        5432,
        Duration::from_secs(2)
    ));

    // The forwarded SYN, its policy verdict, and the policy drop.
    let to_5432 = format!("-> {db}:5432 tcp SYN");
    let to_8080 = format!("-> {db}:8080 tcp SYN");
    let fwd = events.find("the forwarded SYN", |l| {
        l.starts_with(&format!("-> endpoint {db_id} ")) && l.contains(&to_5432)
    });
    assert!(fwd.contains("state new"), "{fwd}");
    let allowed = events.find("the allow verdict", |l| {
        l.starts_with("Policy verdict log") && l.contains(&to_5432)
    });
    assert!(
        allowed.contains(&format!("local EP ID {db_id}, "))
            && allowed.contains("ingress, action allow")
            && allowed.contains("match L3-L4"),
        "{allowed}"
    );
    let dropped = events.find("the policy drop", |l| {
        l.starts_with("xx drop") && l.contains(&to_8080)
    });
    assert!(
        dropped.starts_with("xx drop (Policy denied) flow 0x")
            && dropped.contains(&format!("to endpoint {db_id},")),
        "{dropped}"
    );
    let v = verbose.find("the verbose drop", |l| {
        l.contains("DROP:") && l.contains("Policy denied")
    });
    assert!(v.starts_with("CPU "), "{v}");
    assert!(v.ends_with(&format!("to endpoint {db_id}")), "{v}");
    let stray: Vec<String> = from_other.try_iter().collect();
    assert!(
        stray.is_empty(),
        "--from 9999 must show nothing: {stray:#?}"
    );

    // A service without backends, dropped where web sends.
    cluster.nodes[0].cilium_ok(&[
        "service",
        "update",
        "--id",
        "21",
        "--frontend",
        &format!("{NO_BACKENDS}:80"),
        "--backends",
        "",
    ]);
    agent_events.find("service upserted", |l| {
        l.starts_with(">> Service upserted: ") && l.contains("\"id\":21")
    });
    assert!(!common::tcp_reachable(
        &web_ns,
        NO_BACKENDS,
        80,
        Duration::from_millis(700)
    ));

    // cilium observe: the kept flows with names, identities, verdicts.
    let drops = observe(
        &cluster.nodes[1],
        &["--pod", "default/db", "--verdict", "DROPPED"],
    );
    assert!(
        drops.iter().any(|l| l.contains("default/web:")
            && l.contains(" -> default/db:8080 (ID:")
            && l.ends_with("Policy denied DROPPED (TCP Flags: SYN)")),
        "{drops:#?}"
    );
    assert!(
        drops
            .iter()
            .all(|l| l.contains("DROPPED") || l.contains("INGRESS DENIED")),
        "{drops:#?}"
    );
    let forwarded = observe(
        &cluster.nodes[1],
        &["--to-pod", "db", "--verdict", "forwarded", "--port", "5432"],
    );
    assert!(
        forwarded
            .iter()
            .any(|l| l.contains(" -> default/db:5432 ") && l.contains("to-endpoint FORWARDED")),
        "{forwarded:#?}"
    );
    assert!(
        forwarded
            .iter()
            .any(|l| l.contains("policy-verdict:L3-L4 INGRESS ALLOWED")),
        "{forwarded:#?}"
    );
    assert!(
        observe(&cluster.nodes[1], &["-n", "kube-system"]).is_empty(),
        "no pods in kube-system"
    );
    // Hubble's address, protocol and identity filters
    let by_ip = observe(
        &cluster.nodes[1],
        &[
            "--from-ip",
            &web.to_string(),
            "--to-ip",
            &format!("{db}/32"),
            "--protocol",
            "tcp",
        ],
    );
    assert!(
        !by_ip.is_empty()
            && by_ip
                .iter()
                .all(|l| l.contains("default/web:") && l.contains("-> default/db:")),
        "{by_ip:#?}"
    );
    assert!(observe(
        &cluster.nodes[1],
        &["--from-ip", &web.to_string(), "--protocol", "udp"]
    )
    .is_empty());
    // the refusal reaches the client before the agent reads the drop
    wait_for("the drop for the service without backends", 10, || {
        observe(
            &cluster.nodes[0],
            &["--from-pod", "web", "--type", "drop", "-o", "json"],
        )
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .any(|f| {
            f["drop_reason_desc"] == "SERVICE_BACKEND_NOT_FOUND"
                && f["IP"]["destination"] == NO_BACKENDS.to_string()
                && f["source"]["pod_name"] == "web"
                && f["l4"]["TCP"]["destination_port"] == 80
        })
    });
    assert_eq!(
        observe(&cluster.nodes[1], &["--last", "1"]).len(),
        1,
        "--last 1"
    );

    // The same three, counted for Prometheus.
    let node1 = common::scrape(common::node_ip(1), 9962);
    assert!(
        sample(
            &node1,
            "cilium_drop_count_total{direction=\"EGRESS\",reason=\"Service backend not found\"}"
        ) >= 1.0,
        "{node1}"
    );
    let node2 = common::scrape(common::node_ip(2), 9962);
    assert!(
        sample(
            &node2,
            "cilium_drop_count_total{direction=\"INGRESS\",reason=\"Policy denied\"}"
        ) >= 1.0,
        "{node2}"
    );
    assert!(
        sample(&node2, "cilium_forward_count_total{direction=\"INGRESS\"}") >= 1.0,
        "{node2}"
    );
    assert!(
        node2.contains("hubble_lost_events_total{source=\"perf_event_ring_buffer\"} 0"),
        "{node2}"
    );
    // conntrack GC ran at start
    assert!(
        sample(
            &node2,
            "cilium_datapath_conntrack_gc_runs_total{status=\"completed\"}"
        ) >= 1.0,
        "{node2}"
    );

    // explain agrees with each.
    let verdict = |node: &common::Node, src: &str, dst: &str, port: &str| {
        let out = node.cilium_ok(&["explain", src, dst, "--port", port]);
        out.lines()
            .find(|l| l.starts_with("Verdict: "))
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        verdict(&cluster.nodes[0], "web", "db", "5432"),
        "Verdict: FORWARDED"
    );
    assert_eq!(
        verdict(&cluster.nodes[0], "web", "db", "8080"),
        "Verdict: DROPPED (Policy denied)"
    );
    assert_eq!(
        verdict(&cluster.nodes[0], "web", &NO_BACKENDS.to_string(), "80"),
        "Verdict: DROPPED (Service backend not found)"
    );

    // Deleting the endpoint is announced.
    let ns = web_ns.to_str().unwrap().to_owned();
    assert_eq!(cluster.nodes[0].cni_pod("DEL", "web", &ns).code, 0);
    agent_events.find("endpoint deleted", |l| {
        l.starts_with(">> Endpoint deleted: ") && l.contains("\"pod-name\":\"web\"")
    });
    let _ = web;
    for child in [&mut agent_mon, &mut mon, &mut vmon, &mut fmon] {
        let _ = child.kill();
        let _ = child.wait();
    }
}
