//! cilium-operator against a real API server, as its ServiceAccount: two
//! replicas elect one leader on the Lease and the other takes over when
//! the leader is killed; cluster-pool IPAM gives every CiliumNode its own
//! CIDR through nodes joining and leaving and operator restarts, takes
//! back the CIDRs of deleted nodes, and says when the pool is exhausted;
//! in dual stack every node gets a CIDR of each family.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use testsupport::kube;
use testsupport::node::wait_for;

use common::{tail, Cluster, LEASE};

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Every node has exactly one CIDR, in `pool`, and no two share one.
fn assert_disjoint(all: &[(String, Vec<String>)], within: &str) {
    let mut seen = BTreeSet::new();
    for (node, cidrs) in all {
        assert_eq!(cidrs.len(), 1, "{node}: {cidrs:?}");
        assert!(
            cidrs[0].starts_with(within),
            "{node}: {cidrs:?} outside {within}"
        );
        assert!(
            seen.insert(cidrs[0].clone()),
            "{} given twice: {all:?}",
            cidrs[0]
        );
    }
}

fn all_have_cidrs(c: &Cluster) -> bool {
    c.cidrs().iter().all(|(_, cidrs)| !cidrs.is_empty())
}

fn leader_log(c: &Cluster, replicas: &[usize]) -> Option<usize> {
    replicas.iter().copied().find(|r| {
        std::fs::read_to_string(c.log(*r))
            .unwrap_or_default()
            .contains("Leading the operator HA deployment")
    })
}

#[test]
fn one_replica_leads_and_the_other_takes_over_when_it_is_killed() {
    let mut c = Cluster::start();
    let children = [
        c.operator(1, "10.20.0.0/16", 24),
        c.operator(2, "10.20.0.0/16", 24),
    ];
    wait_for("a leader", 30, || !c.holder().is_empty());
    let first = c.holder();
    let leader = leader_log(&c, &[1, 2]).unwrap_or_else(|| {
        panic!(
            "no replica says it leads; holder {first}\n{}\n{}",
            tail(&c.log(1)),
            tail(&c.log(2))
        )
    });
    let follower = 3 - leader;
    assert!(
        !std::fs::read_to_string(c.log(follower))
            .unwrap()
            .contains("Leading the operator"),
        "both replicas lead"
    );
    c.add_nodes(&names("early-", 1));
    wait_for("the leader gives a CIDR", 30, || all_have_cidrs(&c));

    // kill -9: no release; the follower waits out the lease
    let killed = Instant::now();
    c.kill(children[leader - 1]);
    wait_for("the follower to take over", 30, || {
        let h = c.holder();
        !h.is_empty() && h != first
    });
    let took = killed.elapsed();
    assert!(
        took <= LEASE + Duration::from_secs(4),
        "takeover after {took:?} (lease {LEASE:?})"
    );
    assert!(std::fs::read_to_string(c.log(follower))
        .unwrap()
        .contains("Leading the operator"));
    c.add_nodes(&names("late-", 1));
    wait_for("the new leader gives a CIDR", 30, || all_have_cidrs(&c));
    assert_disjoint(&c.cidrs(), "10.20.");

    // a clean stop gives the lease up at once
    let second = c.holder();
    let _restarted = c.operator(leader, "10.20.0.0/16", 24);
    let pid = c.sb.child(children[follower - 1]).id() as i32;
    // SAFETY: signalling a child this test started.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let stopped = Instant::now();
    wait_for("the restarted replica to lead", 30, || {
        let h = c.holder();
        !h.is_empty() && h != second
    });
    assert!(
        stopped.elapsed() < LEASE,
        "a released lease is taken at once, not after {:?}",
        stopped.elapsed()
    );
}

#[test]
fn pod_cidrs_are_never_shared_nor_leaked_through_churn_and_restarts() {
    let mut c = Cluster::start();
    // 16 blocks
    let (pool, mask, within) = ("10.30.0.0/22", 26, "10.30.");
    let op = c.operator(1, pool, mask);
    c.add_nodes(&names("a-", 12));
    wait_for("12 nodes with CIDRs", 60, || all_have_cidrs(&c));
    assert_disjoint(&c.cidrs(), within);

    // half leave while more join, and the operator restarts in between
    c.delete_nodes(&names("a-", 6));
    c.kill(op);
    c.add_nodes(&names("b-", 8));
    let op = c.operator(1, pool, mask);
    wait_for("14 nodes with CIDRs", 60, || {
        let all = c.cidrs();
        all.len() == 14 && all_have_cidrs(&c)
    });
    assert_disjoint(&c.cidrs(), within);
    c.kill(op);
    let _op = c.operator(1, pool, mask);

    // down to 2, then up to the pool's 16: every CIDR given back was
    // taken back
    let keep = ["a-6".to_string(), "b-0".to_string()];
    let gone: Vec<String> = c
        .cidrs()
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| !keep.contains(n))
        .collect();
    c.delete_nodes(&gone);
    c.add_nodes(&names("c-", 14));
    wait_for("16 nodes with CIDRs", 60, || {
        let all = c.cidrs();
        all.len() == 16 && all_have_cidrs(&c)
    });
    assert_disjoint(&c.cidrs(), within);

    // the 17th: the pool is exhausted, and its CiliumNode says so
    c.add_nodes(&names("d-", 1));
    wait_for("the exhausted pool reported on d-0", 30, || {
        c.kubectl(&[
            "get",
            "ciliumnode",
            "d-0",
            "-o",
            "jsonpath={.status.ipam.operator-status.error}",
        ])
        .contains("all IPv4 pod CIDRs of the cluster pool are allocated")
    });
    assert!(c
        .cidrs()
        .iter()
        .any(|(n, cidrs)| n == "d-0" && cidrs.is_empty()));
}

#[test]
fn dual_stack_gives_every_node_a_cidr_of_each_family() {
    let mut c = Cluster::start();
    // a node from before IPv6 was turned on keeps its IPv4 CIDR
    kube::apply(
        &c.cp,
        r#"{"apiVersion":"cilium.io/v2","kind":"CiliumNode","metadata":{"name":"old"},"spec":{"addresses":[],"ipam":{"podCIDRs":["10.30.5.0/24"]}}}"#,
    );
    c.add_nodes(&names("n-", 2));
    let _op = c.operator_with(
        1,
        &[
            "--cluster-pool-ipv4-cidr=10.30.0.0/16".into(),
            "--enable-ipv6=true".into(),
            "--cluster-pool-ipv6-cidr=fd00:30::/104".into(),
            "--cluster-pool-ipv6-mask-size=120".into(),
        ],
    );
    wait_for("a CIDR of each family on every node", 30, || {
        c.cidrs().iter().all(|(_, cidrs)| cidrs.len() == 2)
    });
    let all = c.cidrs();
    let mut seen = BTreeSet::new();
    for (node, cidrs) in &all {
        assert!(
            cidrs[0].starts_with("10.30.") && cidrs[0].ends_with("/24"),
            "{node}: {cidrs:?}"
        );
        assert!(
            cidrs[1].starts_with("fd00:30::") && cidrs[1].ends_with("/120"),
            "{node}: {cidrs:?}"
        );
        assert!(
            seen.insert(cidrs[1].clone()),
            "{} given twice: {all:?}",
            cidrs[1]
        );
    }
    let old = all.iter().find(|(n, _)| n == "old").unwrap();
    assert_eq!(old.1[0], "10.30.5.0/24", "{all:?}");
}
