//! Neighbour discovery from pods in cil_from_container, as 1.16 answers
//! it: solicitations for the router and for other local pods get an
//! advertisement with the pod's host-side veth MAC; those for the node's
//! own addresses go to the stack; unknown targets are dropped.

mod common;

use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::metrics::DIR_EGRESS;
use common::*;
use datapath::objects::BPF_LXC;
use datapath::testrun::TestObject;
use std::net::Ipv6Addr;
use testsupport::Sandbox;

const ROUTER: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x1);
const POD_A: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x5);
const POD_B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x6);
const NODE: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x198, 0x18, 0, 0, 0, 0, 0xb);
const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const LXC_A: [u8; 6] = [0x02, 0, 0, 0, 1, 0x0a];
const NS: u8 = 135;
const NA: u8 = 136;

fn put_endpoint(obj: &TestObject, ip: Ipv6Addr, info: EndpointInfo) {
    obj.map(abi::maps::LXC)
        .expect("open cilium_lxc")
        .put(&EndpointKey::v6(ip), &info)
        .expect("insert endpoint");
}

/// A node with IPv6 on (`router` set), pods A and B, and `NODE` as one
/// of its own addresses.
fn node(sb: &Sandbox, router: Option<Ipv6Addr>) -> TestObject {
    let obj = load(sb, BPF_LXC);
    if let Some(router) = router {
        let config = obj.map(abi::maps::RUNTIME_CONFIG).expect("runtime config");
        let halves = abi::runtime_config::ipv6_halves(router);
        let indexes = [
            abi::runtime_config::ROUTER_IPV6_HI,
            abi::runtime_config::ROUTER_IPV6_LO,
        ];
        for (index, value) in indexes.iter().zip(halves) {
            config.put(index, &value).expect("set the router address");
        }
    }
    put_endpoint(
        &obj,
        POD_A,
        EndpointInfo::pod(TEST_IFINDEX, 11, MAC_A, LXC_A, 1000),
    );
    put_endpoint(
        &obj,
        POD_B,
        EndpointInfo::pod(
            TEST_IFINDEX,
            12,
            [2, 0, 0, 0, 0, 0x0b],
            [2, 0, 0, 0, 1, 0x0b],
            1001,
        ),
    );
    put_endpoint(&obj, NODE, EndpointInfo::host());
    obj
}

/// Pod A's solicitation for `target`, to its solicited-node group.
fn solicitation(target: Ipv6Addr) -> Vec<u8> {
    let t = target.octets();
    let group = Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(t[13]),
        u16::from_be_bytes([t[14], t[15]]),
    );
    let mut body = vec![0; 4];
    body.extend_from_slice(&t);
    body.extend_from_slice(&[1, 1]);
    body.extend_from_slice(&MAC_A);
    let mac = [0x33, 0x33, 0xff, t[13], t[14], t[15]];
    ipv6(
        (MAC_A, mac),
        POD_A,
        group,
        (58, 255),
        &icmp6(POD_A, group, NS, &body),
    )
}

/// Checks an advertisement for `target` with `flags` sent back to pod A.
fn assert_advertisement(frame: &[u8], target: Ipv6Addr, flags: u8) {
    assert_eq!(frame.len(), 14 + 40 + 32);
    assert_eq!(&frame[0..6], &MAC_A, "to the pod");
    assert_eq!(&frame[6..12], &LXC_A, "from its host-side veth");
    let ip = &frame[14..54];
    assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 32, "payload length");
    assert_eq!((ip[6], ip[7]), (58, 255), "ICMPv6, hop limit 255");
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap());
    let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap());
    assert_eq!((src, dst), (ROUTER, POD_A), "from the router to the pod");
    let msg = &frame[54..];
    assert_eq!((msg[0], msg[1]), (NA, 0));
    assert_eq!(icmp6_checksum(src, dst, msg), 0, "checksum");
    assert_eq!(msg[4], flags);
    assert_eq!(&msg[8..24], &target.octets());
    assert_eq!(&msg[24..26], &[2, 1], "target link-layer option");
    assert_eq!(&msg[26..32], &LXC_A);
}

#[test]
fn a_solicitation_for_the_router_is_answered_with_the_host_side_mac() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb, Some(ROUTER));
    let out = obj
        .run("cil_from_container", &solicitation(ROUTER))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_advertisement(&out.packet, ROUTER, 0x80 | 0x40);
}

#[test]
fn a_solicitation_for_another_local_pod_is_answered_for_it() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb, Some(ROUTER));
    let out = obj
        .run("cil_from_container", &solicitation(POD_B))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_advertisement(&out.packet, POD_B, 0x40 | 0x20);
}

#[test]
fn a_solicitation_for_a_node_address_goes_to_the_stack_and_an_unknown_target_is_dropped() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb, Some(ROUTER));
    let ns = solicitation(NODE);
    let out = obj.run("cil_from_container", &ns).expect("test run");
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(out.packet, ns, "left as it came");

    let unknown = Ipv6Addr::new(0xfd00, 0x10, 0, 9, 0, 0, 0, 0x9);
    let out = obj
        .run("cil_from_container", &solicitation(unknown))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT);
    assert_eq!(
        metric(&obj, abi::drop::DROP_UNKNOWN_TARGET, DIR_EGRESS).0,
        1
    );
}

#[test]
fn advertisements_from_a_pod_go_to_the_stack() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb, Some(ROUTER));
    let mut body = vec![0x20, 0, 0, 0];
    body.extend_from_slice(&POD_A.octets());
    let na = ipv6(
        (MAC_A, [0x33, 0x33, 0, 0, 0, 1]),
        POD_A,
        "ff02::1".parse().unwrap(),
        (58, 255),
        &icmp6(POD_A, "ff02::1".parse().unwrap(), NA, &body),
    );
    let out = obj.run("cil_from_container", &na).expect("test run");
    assert_eq!(out.retval, TC_ACT_OK);
}

#[test]
fn without_ipv6_a_solicitation_is_an_unknown_l3_drop() {
    let sb = Sandbox::enter();
    let mut off = node(&sb, None);
    let out = off
        .run("cil_from_container", &solicitation(ROUTER))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT);
    assert_eq!(metric(&off, abi::drop::DROP_UNKNOWN_L3, DIR_EGRESS).0, 1);
}
