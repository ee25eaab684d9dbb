//! IPv6 between pods in the dual-stack build: conntrack in cilium_ct6_*,
//! policy, local delivery, the overlay, extension headers, fragments and
//! ICMPv6 errors as related traffic.

mod common;

use abi::ct::{CtEntry, Ipv6CtTuple, TUPLE_F_IN, TUPLE_F_OUT, TUPLE_F_RELATED};
use abi::endpoint::EndpointInfo;
use abi::metrics::{DIR_EGRESS, DIR_INGRESS};
use common::*;
use datapath::objects::BPF_LXC_V6;
use datapath::testrun::TestObject;
use std::net::{Ipv4Addr, Ipv6Addr};
use testsupport::Sandbox;

const ROUTER: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x1);
const POD_A: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x5);
const POD_B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x6);
const REMOTE_POD: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 2, 0, 0, 0, 0x7);
const REMOTE_NODE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 12);
const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
const LXC_A: [u8; 6] = [0x02, 0, 0, 0, 1, 0x0a];
const LXC_B: [u8; 6] = [0x02, 0, 0, 0, 1, 0x0b];
const ID_A: u32 = 1000;
const ID_B: u32 = 1001;
const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP6: u8 = 58;

fn runtime_config(obj: &TestObject, index: u32, value: u64) {
    obj.map(abi::maps::RUNTIME_CONFIG)
        .expect("runtime config")
        .put(&index, &value)
        .expect("set runtime config");
}

/// A dual-stack node (router address set) with pods A and B; each pod's
/// identity is known to the ipcache, as the agent writes it.
fn two_pods(sb: &Sandbox) -> TestObject {
    let obj = load(sb, BPF_LXC_V6);
    let halves = abi::runtime_config::ipv6_halves(ROUTER);
    runtime_config(&obj, abi::runtime_config::ROUTER_IPV6_HI, halves[0]);
    runtime_config(&obj, abi::runtime_config::ROUTER_IPV6_LO, halves[1]);
    add_endpoint(
        &obj,
        POD_A,
        EndpointInfo::pod(TEST_IFINDEX, 11, MAC_A, LXC_A, ID_A),
    );
    add_endpoint(
        &obj,
        POD_B,
        EndpointInfo::pod(TEST_IFINDEX, 12, MAC_B, LXC_B, ID_B),
    );
    learn_remote(&obj, POD_A, ID_A, Ipv4Addr::UNSPECIFIED);
    learn_remote(&obj, POD_B, ID_B, Ipv4Addr::UNSPECIFIED);
    obj
}

/// A packet between two pods: from A's MAC to its gateway's.
fn packet(src: Ipv6Addr, dst: Ipv6Addr, nexthdr: u8, payload: &[u8]) -> Vec<u8> {
    let macs = if src == POD_A {
        (MAC_A, LXC_A)
    } else {
        (MAC_B, LXC_B)
    };
    ipv6(macs, src, dst, (nexthdr, 64), payload)
}

fn echo(src: Ipv6Addr, dst: Ipv6Addr, id: u16) -> Vec<u8> {
    let mut body = id.to_be_bytes().to_vec();
    body.extend_from_slice(&[0, 1]);
    packet(src, dst, ICMP6, &icmp6(src, dst, 128, &body))
}

fn tuple(
    daddr: Ipv6Addr,
    saddr: Ipv6Addr,
    ports: (u16, u16),
    nexthdr: u8,
    flags: u8,
) -> Ipv6CtTuple {
    Ipv6CtTuple {
        daddr: daddr.into(),
        saddr: saddr.into(),
        dport: abi::Be16::new(ports.0),
        sport: abi::Be16::new(ports.1),
        nexthdr,
        flags,
    }
}

fn ct6(obj: &TestObject, map: &str, key: Ipv6CtTuple) -> Option<CtEntry> {
    obj.map(map)
        .expect("open ct map")
        .get(&key)
        .expect("ct lookup")
}

#[test]
fn tcp_between_local_pods_is_delivered_and_tracked_in_the_v6_tables() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);

    let syn = packet(POD_A, POD_B, TCP, &tcp(40000, 80, 0x02));
    let out = obj.run("cil_from_container", &syn).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(&out.packet[0..6], &MAC_B, "dst MAC is pod B");
    assert_eq!(&out.packet[6..12], &LXC_B, "src MAC is B's host-side veth");
    assert_eq!(out.packet[14 + 7], 63, "hop limit decremented");

    // Cilium's key bytes: addresses named for the reply, ports for the original.
    let egress = tuple(POD_A, POD_B, (80, 40000), TCP, TUPLE_F_OUT);
    let ingress = Ipv6CtTuple {
        flags: TUPLE_F_IN,
        ..egress
    };
    let entry = ct6(&obj, abi::maps::CT6_GLOBAL, egress).expect("egress entry");
    assert_eq!({ entry.src_sec_id }, ID_A);
    assert!(
        ct6(&obj, abi::maps::CT6_GLOBAL, ingress).is_some(),
        "ingress entry"
    );
    let related = tuple(POD_A, POD_B, (0, 0), ICMP6, TUPLE_F_OUT | TUPLE_F_RELATED);
    assert!(
        ct6(&obj, abi::maps::CT_ANY6_GLOBAL, related).is_some(),
        "the ICMPv6 entry its errors pass by"
    );

    let synack = packet(POD_B, POD_A, TCP, &tcp(80, 40000, 0x12));
    let out = obj.run("cil_from_container", &synack).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(&out.packet[0..6], &MAC_A);
    let entry = ct6(&obj, abi::maps::CT6_GLOBAL, egress).expect("egress entry");
    assert_eq!({ entry.packets }, 2, "the reply matched the flow");
    assert_eq!(metric(&obj, 0, DIR_INGRESS).0, 2, "two deliveries");
}

#[test]
fn ingress_policy_denies_icmpv6_and_allows_tcp_and_errors_pass_as_related() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    // B admits A on TCP port 80 only
    set_policy(&obj, 12, &[(ID_A, false, TCP, 80), (0, true, 0, 0)], &[]);

    let out = obj
        .run("cil_from_container", &echo(POD_A, POD_B, 7))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT);
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY, DIR_INGRESS).0, 1);

    let syn = packet(POD_A, POD_B, TCP, &tcp(40000, 80, 0x02));
    let out = obj.run("cil_from_container", &syn).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);

    // A's stack answers B's... the other way: A sends B a "packet too big"
    // about the flow; it quotes B's reply and passes as related.
    let mut quote = vec![0, 0, 0x05, 0x00];
    quote.extend_from_slice(&packet(POD_B, POD_A, TCP, &tcp(80, 40000, 0x12))[14..]);
    let too_big = packet(POD_A, POD_B, ICMP6, &icmp6(POD_A, POD_B, 2, &quote));
    let out = obj.run("cil_from_container", &too_big).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT, "related to the TCP flow");
}

#[test]
fn echo_is_tracked_by_its_identifier_and_the_reply_passes() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    let out = obj
        .run("cil_from_container", &echo(POD_A, POD_B, 9))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    let key = tuple(POD_A, POD_B, (0, 9), ICMP6, TUPLE_F_OUT);
    assert!(ct6(&obj, abi::maps::CT_ANY6_GLOBAL, key).is_some());

    // B's reply may pass even where B's egress policy allows nothing
    set_policy(&obj, 12, &[(0, false, 0, 0)], &[]);
    let mut body = 9u16.to_be_bytes().to_vec();
    body.extend_from_slice(&[0, 1]);
    let reply = packet(POD_B, POD_A, ICMP6, &icmp6(POD_B, POD_A, 129, &body));
    let out = obj.run("cil_from_container", &reply).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
}

/// `l4` behind the given extension headers (each 8 bytes, no options).
fn behind_headers(headers: &[u8], l4_proto: u8, l4: &[u8]) -> (u8, Vec<u8>) {
    let mut payload = Vec::new();
    for (i, _) in headers.iter().enumerate() {
        let next = headers.get(i + 1).copied().unwrap_or(l4_proto);
        payload.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
    }
    payload.extend_from_slice(l4);
    (headers.first().copied().unwrap_or(l4_proto), payload)
}

#[test]
fn extension_headers_are_skipped_to_reach_l4_up_to_four_of_them() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    // hop by hop, destination options, routing: then UDP
    let (first, payload) = behind_headers(&[0, 60, 43], UDP, &udp(5000, 53));
    let out = obj
        .run("cil_from_container", &packet(POD_A, POD_B, first, &payload))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    let key = tuple(POD_A, POD_B, (53, 5000), UDP, TUPLE_F_OUT);
    assert!(
        ct6(&obj, abi::maps::CT_ANY6_GLOBAL, key).is_some(),
        "tracked by the UDP ports behind the headers"
    );

    let (first, payload) = behind_headers(&[0, 60, 60, 60, 60], UDP, &udp(5000, 53));
    let out = obj
        .run("cil_from_container", &packet(POD_A, POD_B, first, &payload))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT, "five are more than 1.16 walks");
    let (first, payload) = behind_headers(&[60], 59, &[]);
    let out = obj
        .run("cil_from_container", &packet(POD_A, POD_B, first, &payload))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT, "no next header");
    assert_eq!(
        metric(&obj, abi::drop::DROP_INVALID_EXTHDR, DIR_EGRESS).0,
        2
    );
}

#[test]
fn udp_fragments_are_tracked_where_1_16_drops_them() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    let mut first = udp(5000, 53);
    first.extend_from_slice(&[0xaa; 8]);
    let out = obj
        .run(
            "cil_from_container",
            &packet(POD_A, POD_B, 44, &fragment6(0, true, 77, UDP, &first)),
        )
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT, "the first fragment");
    let later = packet(POD_A, POD_B, 44, &fragment6(2, false, 77, UDP, &[0xbb; 16]));
    let out = obj.run("cil_from_container", &later).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT, "a later fragment");
    let key = tuple(POD_A, POD_B, (53, 5000), UDP, TUPLE_F_OUT);
    let entry = ct6(&obj, abi::maps::CT_ANY6_GLOBAL, key).expect("the datagram's flow");
    assert_eq!({ entry.packets }, 2, "both fragments counted on its flow");

    let stray = packet(POD_A, POD_B, 44, &fragment6(2, false, 78, UDP, &[0xbb; 16]));
    let out = obj.run("cil_from_container", &stray).expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT);
    assert_eq!(
        metric(&obj, abi::drop::DROP_FRAG_NOT_FOUND, DIR_EGRESS).0,
        1
    );
}

#[test]
fn traffic_to_a_pod_on_another_node_is_encapsulated_over_the_ipv4_underlay() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    runtime_config(&obj, abi::runtime_config::ENCAP_IFINDEX, 42);
    learn_remote(&obj, REMOTE_POD, 1005, REMOTE_NODE);
    let syn = packet(POD_A, REMOTE_POD, TCP, &tcp(40000, 80, 0x02));
    let out = obj.run("cil_from_container", &syn).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(out.packet, syn, "the inner packet travels unchanged");

    let outside = Ipv6Addr::new(0xfd00, 0x198, 0x18, 0, 0, 0, 0, 0x9);
    let pkt = packet(POD_A, outside, UDP, &udp(1000, 53));
    let out = obj.run("cil_from_container", &pkt).expect("test run");
    assert_eq!(out.retval, TC_ACT_OK, "beyond the cluster: the stack");
    assert_eq!(out.packet, pkt);
}

#[test]
fn a_pod_may_only_send_from_its_own_v6_address() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    let spoofed = ipv6((MAC_A, LXC_A), REMOTE_POD, POD_B, (UDP, 64), &udp(1, 2));
    let out = obj.run("cil_from_container", &spoofed).expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT);
    assert_eq!(metric(&obj, abi::drop::DROP_INVALID_SIP, DIR_EGRESS).0, 1);
    assert_eq!(metric(&obj, abi::drop::DROP_UNKNOWN_L3, DIR_EGRESS).0, 0);
}

#[test]
fn the_nodes_own_v6_traffic_reaches_a_pod_through_its_ingress_and_ndp_goes_on() {
    let sb = Sandbox::enter();
    let lxc = two_pods(&sb);
    let mut host = load(&sb, datapath::objects::BPF_HOST_V6);
    learn_remote(&lxc, ROUTER, abi::identity::HOST, Ipv4Addr::UNSPECIFIED);
    // B admits the host only on TCP 8080
    set_policy(
        &lxc,
        12,
        &[(abi::identity::HOST, false, TCP, 8080), (0, true, 0, 0)],
        &[],
    );
    let from_host = |payload: (u8, Vec<u8>)| {
        ipv6(
            ([2, 0, 0, 0, 9, 9], MAC_B),
            ROUTER,
            POD_B,
            (payload.0, 64),
            &payload.1,
        )
    };
    let out = host
        .run("cil_from_host", &from_host((TCP, tcp(33000, 8080, 0x02))))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(&out.packet[0..6], &MAC_B);
    let key = tuple(ROUTER, POD_B, (8080, 33000), TCP, TUPLE_F_IN);
    let entry = ct6(&host, abi::maps::CT6_GLOBAL, key).expect("B's ingress entry");
    assert_eq!({ entry.src_sec_id }, abi::identity::HOST);

    let out = host
        .run("cil_from_host", &from_host((TCP, tcp(33000, 22, 0x02))))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT, "B's policy refuses port 22");

    // the node resolving a pod's neighbour: multicast, the stack's
    let group: Ipv6Addr = "ff02::1:ff00:6".parse().unwrap();
    let ns = ipv6(
        ([2, 0, 0, 0, 9, 9], [0x33, 0x33, 0xff, 0, 0, 6]),
        ROUTER,
        group,
        (ICMP6, 255),
        &icmp6(ROUTER, group, 135, &[0; 20]),
    );
    let out = host.run("cil_from_host", &ns).expect("test run");
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(out.packet, ns);
}
