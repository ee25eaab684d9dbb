//! Native routing on crafted packets: with no encap device nothing is
//! encapsulated, even when the ipcache names the node behind a pod, so the
//! stack routes it (`<pod CIDR> via <node IP>`); at the receiving node the
//! stack hands the packet to cilium_host, where cil_from_host applies the
//! pod's ingress policy to the sender's identity from the ipcache.

mod common;

use abi::metrics::{DIR_EGRESS, DIR_INGRESS};
use abi::runtime_config::ENCAP_IFINDEX;
use common::*;
use datapath::objects::{BPF_HOST, BPF_LXC};
use datapath::testrun::TestObject;
use std::net::Ipv4Addr;
use testsupport::Sandbox;

const LOCAL_POD: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const LOCAL_EP: u16 = 11;
const ALLOWED_POD: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 7);
const OTHER_POD: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 8);
const ALLOWED_ID: u32 = 1000;
const OTHER_ID: u32 = 1001;
const REMOTE_NODE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 12);

/// A pod on this node, no encap device, and two pods on another node that
/// the ipcache knows with their identities and node (as the agent writes
/// them in either mode).
fn native_node(sb: &Sandbox, object: datapath::objects::Object) -> TestObject {
    let obj = load(sb, object);
    add_pod(&obj, LOCAL_POD, LOCAL_EP, 0xa, 2000);
    obj.map(abi::maps::RUNTIME_CONFIG)
        .unwrap()
        .put(&ENCAP_IFINDEX, &0u64)
        .unwrap();
    for (ip, id) in [(ALLOWED_POD, ALLOWED_ID), (OTHER_POD, OTHER_ID)] {
        learn_remote(&obj, ip, id, REMOTE_NODE);
    }
    obj
}

#[test]
fn pod_traffic_to_a_remote_pod_goes_to_the_stack_unencapsulated() {
    let sb = Sandbox::enter();
    let mut obj = native_node(&sb, BPF_LXC);
    let pkt = ipv4(LOCAL_POD, ALLOWED_POD, 6, &tcp(40000, 80, 0x02));
    let out = obj.run("cil_from_container", &pkt).expect("test run");
    assert_eq!(out.retval, TC_ACT_OK, "handed to the stack, not redirected");
    assert_eq!(out.packet, pkt, "no outer header");
    assert_eq!(metric(&obj, 0, DIR_EGRESS).0, 1, "forwarded, not dropped");
}

#[test]
fn host_traffic_to_a_remote_pod_is_left_to_the_stack() {
    let sb = Sandbox::enter();
    let mut obj = native_node(&sb, BPF_HOST);
    let router = Ipv4Addr::new(10, 1, 0, 1);
    let pkt = ipv4(router, ALLOWED_POD, 17, &udp(1, 2));
    let out = obj.run("cil_from_host", &pkt).unwrap();
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(out.packet, pkt);
}

#[test]
fn ingress_from_a_remote_pod_is_judged_by_its_ipcache_identity() {
    let sb = Sandbox::enter();
    let mut obj = native_node(&sb, BPF_HOST);
    set_policy(&obj, LOCAL_EP, &[(ALLOWED_ID, false, 0, 0)], &[]);
    let allowed = ipv4(ALLOWED_POD, LOCAL_POD, 6, &tcp(40000, 80, 0x02));
    assert_eq!(
        obj.run("cil_from_host", &allowed).unwrap().retval,
        TC_ACT_REDIRECT,
        "the allowed identity reaches the pod's veth"
    );
    let other = ipv4(OTHER_POD, LOCAL_POD, 6, &tcp(40001, 80, 0x02));
    assert_eq!(
        obj.run("cil_from_host", &other).unwrap().retval,
        TC_ACT_SHOT
    );
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY, DIR_INGRESS).0, 1);
}
