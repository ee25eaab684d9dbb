//! Node IDs: one per other node, for all its addresses, kept in the node
//! map and taken back from it after a restart.

use controlplane::node_ids::NodeIds;
use controlplane::ports::NodeIdMap;
use std::net::IpAddr;
use std::sync::Arc;
use testsupport::fakes::FakeKernel;

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[test]
fn each_node_gets_the_lowest_free_id_for_all_its_addresses() {
    let kernel = Arc::new(FakeKernel::default());
    let ids = NodeIds::new(kernel.clone());
    let a = ips(&["198.18.0.11", "10.1.0.1"]);
    let b = ips(&["198.18.0.12", "10.2.0.1"]);
    assert_eq!(ids.assign(&a).unwrap(), 1);
    assert_eq!(ids.assign(&b).unwrap(), 2);
    // again, or with one more address: the same ID
    assert_eq!(ids.assign(&a).unwrap(), 1);
    let mut a2 = a.clone();
    a2.push("fd00::b".parse().unwrap());
    assert_eq!(ids.assign(&a2).unwrap(), 1);
    assert_eq!(kernel.held().node_ids.len(), 5);
    ids.release(&a2);
    let mut b_sorted = b.clone();
    b_sorted.sort();
    assert_eq!(ids.list(), vec![(2, b_sorted)]);
    assert_eq!(kernel.held().node_ids.len(), 2);
    // the freed ID goes to the next node
    assert_eq!(ids.assign(&ips(&["198.18.0.13"])).unwrap(), 1);
}

#[test]
fn a_restart_keeps_each_nodes_id_and_drops_id_zero() {
    let kernel = Arc::new(FakeKernel::default());
    kernel.write("198.18.0.12".parse().unwrap(), 7).unwrap();
    kernel.write("198.18.0.99".parse().unwrap(), 0).unwrap();
    let ids = NodeIds::new(kernel.clone());
    assert_eq!(ids.restore(), 1);
    assert_eq!(ids.assign(&ips(&["198.18.0.12", "10.2.0.1"])).unwrap(), 7);
    assert_eq!(ids.assign(&ips(&["198.18.0.13"])).unwrap(), 1);
    assert!(!kernel
        .held()
        .node_ids
        .contains_key(&"198.18.0.99".parse().unwrap()));
}

#[test]
fn a_refused_write_leaves_no_id_behind() {
    let kernel = Arc::new(FakeKernel::default());
    let ids = NodeIds::new(kernel.clone());
    kernel.fail("node_ids", true);
    assert!(ids.assign(&ips(&["198.18.0.11"])).is_err());
    assert!(ids.list().is_empty());
    kernel.fail("node_ids", false);
    assert_eq!(ids.assign(&ips(&["198.18.0.11"])).unwrap(), 1);
}
