//! Cluster health in a three-node kvstore lab (issue 21): every node and
//! health endpoint reachable; node3's underlay link cut shows on node1 and
//! node2 as node3 unreachable on the node path within two probe intervals
//! and `2/3 reachable`, then recovers; node3's health endpoint's lxc
//! entry removed fails only the endpoint path; and node3's health endpoint
//! keeps its address, ID and identity across a kill -9 of its agent.
//! The cut is seen by the periodic rounds; the recoveries after it are
//! asked for with `cilium-health status --probe` (a round now, as Cilium's
//! PUT /status/probe), so the test does not wait out 60 s intervals.

mod common;

use common::{endpoints, eventually, Lab};

/// Two probe intervals (60 s each) and the slack of one probe round.
const TWO_INTERVALS: u64 = 130;
const HEALTH_IDENTITY: u64 = 4;

fn status(lab: &Lab, node: &str) -> String {
    lab.ok(&["exec", node, "--", "cilium", "status"])
}

/// `cilium-health status -o json` on `node`: the last probe round.
fn report(lab: &Lab, node: &str) -> serde_json::Value {
    let out = lab.ok(&["exec", node, "--", "cilium-health", "status", "-o", "json"]);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// `name`'s entry in a report.
fn node_in<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["name"] == name))
        .unwrap_or_else(|| panic!("{name} missing from {r:#}"))
}

/// Whether both probes of a path (`host` or `health-endpoint`) answered.
fn path_ok(node: &serde_json::Value, path: &str) -> bool {
    let p = &node[path]["primary-address"];
    ["icmp", "http"]
        .iter()
        .all(|probe| p[probe].is_object() && p[probe]["status"].as_str().unwrap_or("").is_empty())
}

/// Waits until `node`'s `cilium status` reports `want` reachable.
fn wait_reachable(lab: &Lab, node: &str, want: &str, secs: u64) -> String {
    let line = format!("{want} reachable");
    eventually(&format!("{node}: {line}"), secs, || {
        let s = status(lab, node);
        s.lines()
            .any(|l| l.starts_with("Cluster health:") && l.contains(&line))
            .then(|| s.clone())
            .ok_or(s)
    })
}

/// Runs a probe round on `node` now, then waits until its `cilium status`
/// reports `want` reachable, probing again while it does not.
fn probe_until_reachable(lab: &Lab, node: &str, want: &str) -> String {
    let line = format!("{want} reachable");
    eventually(&format!("{node}: {line} after a probe"), 60, || {
        lab.ok(&["exec", node, "--", "cilium-health", "status", "--probe"]);
        let s = status(lab, node);
        s.lines()
            .any(|l| l.starts_with("Cluster health:") && l.contains(&line))
            .then(|| s.clone())
            .ok_or(s)
    })
}

/// (id, ipv4, identity) of node3's health endpoint.
fn health_endpoint(lab: &Lab) -> (u64, String, u64) {
    let eps = endpoints(lab, "node3");
    eps.iter()
        .find(|(_, _, identity)| *identity == HEALTH_IDENTITY)
        .cloned()
        .unwrap_or_else(|| panic!("no health endpoint in {eps:?}"))
}

#[test]
fn node_and_endpoint_paths_fail_and_recover_and_the_health_endpoint_survives_restarts() {
    let lab = Lab::new();
    lab.ok(&["up", "--without-kubernetes", "--nodes", "3"]);

    for node in ["node1", "node2", "node3"] {
        let s = wait_reachable(&lab, node, "3/3", 60);
        assert!(
            s.lines()
                .any(|l| l.starts_with("Cilium health daemon:") && l.ends_with(" Ok")),
            "{s}"
        );
    }
    let (id, ip, identity) = health_endpoint(&lab);
    assert_eq!(ip, "10.3.0.254", "the highest address of node3's pod CIDR");
    let r = report(&lab, "node1");
    let node3 = node_in(&r, "node3");
    assert_eq!(
        node3["health-endpoint"]["primary-address"]["ip"],
        ip.as_str()
    );
    assert!(
        path_ok(node3, "host") && path_ok(node3, "health-endpoint"),
        "{r:#}"
    );

    // the underlay cut: node3 unreachable on the node path from both others
    lab.ok(&["exec", "node3", "--", "ip", "link", "set", "eth0", "down"]);
    for node in ["node1", "node2"] {
        let s = wait_reachable(&lab, node, "2/3", TWO_INTERVALS);
        let row = s
            .lines()
            .find(|l| l.trim_start().starts_with("node3"))
            .unwrap_or_else(|| panic!("node3 listed as unhealthy:\n{s}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cols,
            ["node3", "198.18.0.13", "unreachable", "unreachable"],
            "{s}"
        );
    }
    let r = report(&lab, "node1");
    assert!(!path_ok(node_in(&r, "node3"), "host"), "{r:#}");
    let verbose = lab.ok(&["exec", "node1", "--", "cilium", "status", "--verbose"]);
    assert!(verbose.contains("node3"), "{verbose}");

    lab.ok(&["exec", "node3", "--", "ip", "link", "set", "eth0", "up"]);
    for node in ["node1", "node2"] {
        probe_until_reachable(&lab, node, "3/3");
    }

    // node3's datapath drops its health endpoint: only that path fails
    lab.ok(&[
        "exec", "node3", "--", "cilium", "bpf", "endpoint", "delete", &ip,
    ]);
    let r = eventually("node1 sees node3's endpoint path fail", 60, || {
        lab.ok(&["exec", "node1", "--", "cilium-health", "status", "--probe"]);
        let r = report(&lab, "node1");
        let node3 = node_in(&r, "node3");
        (!path_ok(node3, "health-endpoint"))
            .then(|| r.clone())
            .ok_or(format!("{r:#}"))
    });
    let node3 = node_in(&r, "node3");
    assert!(path_ok(node3, "host"), "the node path still answers: {r:#}");
    let s = wait_reachable(&lab, "node1", "2/3", 5);
    let row = s
        .lines()
        .find(|l| l.trim_start().starts_with("node3"))
        .unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cols,
        ["node3", "198.18.0.13", "reachable", "unreachable"],
        "{s}"
    );

    // a restart rewrites the lxc entry and keeps the endpoint as it was
    let pid = lab.agent_pid(3).expect("node3's agent pid");
    // SAFETY: the agent of a node this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    lab.wait_agent_back(3, pid);
    assert_eq!(health_endpoint(&lab), (id, ip, identity));
    for node in ["node1", "node2", "node3"] {
        probe_until_reachable(&lab, node, "3/3");
    }
}
