//! The overlay's halves on crafted packets: pod and host traffic to a pod on
//! another node is encapsulated towards that node (ipcache tunnel endpoint,
//! else the tunnel map), and cil_from_overlay refuses packets that did not
//! come out of a tunnel.

mod common;

use abi::endpoint::EndpointInfo;
use abi::metrics::{DIR_EGRESS, DIR_INGRESS};
use abi::runtime_config::{ENCAP_IFINDEX, IPV4_MASK};
use abi::tunnel::{TunnelKey, TunnelValue};
use common::*;
use datapath::objects::{BPF_HOST, BPF_LXC, BPF_OVERLAY};
use datapath::testrun::TestObject;
use std::net::Ipv4Addr;
use testsupport::Sandbox;

const POD_A: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const REMOTE_POD: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 7);
const REMOTE_NODE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 12);

fn runtime_config(obj: &TestObject, index: u32, value: u64) {
    obj.map(abi::maps::RUNTIME_CONFIG)
        .unwrap()
        .put(&index, &value)
        .unwrap();
}

/// A pod on this node and the overlay device at ifindex 42.
fn node(sb: &Sandbox, object: datapath::objects::Object, encap_ifindex: u64) -> TestObject {
    let obj = load(sb, object);
    add_endpoint(
        &obj,
        POD_A,
        EndpointInfo::pod(
            TEST_IFINDEX,
            11,
            [2, 0, 0, 0, 0, 0xa],
            [2, 0, 0, 0, 1, 0xa],
            1000,
        ),
    );
    runtime_config(&obj, ENCAP_IFINDEX, encap_ifindex);
    runtime_config(&obj, IPV4_MASK, u64::from(0xffff_ff00u32.to_be()));
    obj
}

fn learn_remote_pod(obj: &TestObject) {
    learn_remote(obj, REMOTE_POD, 1000, REMOTE_NODE);
}

#[test]
fn pod_traffic_to_a_remote_pod_is_encapsulated() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb, BPF_LXC, 42);
    learn_remote_pod(&obj);
    let pkt = ipv4(POD_A, REMOTE_POD, 6, &tcp(40000, 80, 0x02));
    let out = obj.run("cil_from_container", &pkt).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(out.packet, pkt, "the inner packet travels unchanged");
    assert_eq!(metric(&obj, 0, DIR_EGRESS).0, 1);
}

#[test]
fn the_tunnel_map_covers_pods_the_ipcache_does_not_know() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb, BPF_LXC, 42);
    let pkt = ipv4(POD_A, REMOTE_POD, 17, &udp(1000, 53));
    assert_eq!(
        obj.run("cil_from_container", &pkt).unwrap().retval,
        TC_ACT_OK
    );
    obj.map(abi::maps::TUNNEL)
        .unwrap()
        .put(
            &TunnelKey::v4(Ipv4Addr::new(10, 2, 0, 0)),
            &TunnelValue::v4(REMOTE_NODE),
        )
        .unwrap();
    assert_eq!(
        obj.run("cil_from_container", &pkt).unwrap().retval,
        TC_ACT_REDIRECT
    );
}

#[test]
fn host_traffic_to_a_remote_pod_is_encapsulated() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb, BPF_HOST, 42);
    learn_remote_pod(&obj);
    let router = Ipv4Addr::new(10, 1, 0, 1);
    let out = obj
        .run("cil_from_host", &ipv4(router, REMOTE_POD, 17, &udp(1, 2)))
        .unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT);
}

#[test]
fn packets_without_tunnel_metadata_are_dropped_on_the_overlay() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb, BPF_OVERLAY, 42);
    let pkt = ipv4(REMOTE_POD, POD_A, 17, &udp(1, 2));
    let out = obj.run("cil_from_overlay", &pkt).unwrap();
    assert_eq!(out.retval, TC_ACT_SHOT);
    assert_eq!(
        metric(&obj, abi::drop::DROP_NO_TUNNEL_KEY, DIR_INGRESS).0,
        1
    );
}

#[test]
fn packets_leaving_without_a_tunnel_key_are_dropped_with_a_reason() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb, BPF_OVERLAY, 42);
    let pkt = ipv4(POD_A, REMOTE_POD, 17, &udp(1, 2));
    assert_eq!(obj.run("cil_to_overlay", &pkt).unwrap().retval, TC_ACT_SHOT);
    assert_eq!(metric(&obj, abi::drop::DROP_NO_TUNNEL_KEY, DIR_EGRESS).0, 1);
}
