//! cil_from_container on crafted packets: verdicts, rewrites, conntrack
//! entries and cilium_metrics.

mod common;

use abi::ct::{CtEntry, Ipv4CtTuple, TUPLE_F_IN, TUPLE_F_OUT};
use abi::endpoint::EndpointInfo;
use abi::metrics::{DIR_EGRESS, DIR_INGRESS};
use common::*;
use datapath::objects::BPF_LXC;
use std::net::Ipv4Addr;
use testsupport::Sandbox;

const POD_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
const POD_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 6);
const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
const LXC_A: [u8; 6] = [0x02, 0, 0, 0, 1, 0x0a];
const LXC_B: [u8; 6] = [0x02, 0, 0, 0, 1, 0x0b];

fn two_pods(sb: &Sandbox) -> datapath::testrun::TestObject {
    let obj = load(sb, BPF_LXC);
    add_endpoint(
        &obj,
        POD_A,
        EndpointInfo::pod(TEST_IFINDEX, 11, MAC_A, LXC_A, 1000),
    );
    add_endpoint(
        &obj,
        POD_B,
        EndpointInfo::pod(TEST_IFINDEX, 12, MAC_B, LXC_B, 1001),
    );
    obj
}

fn ct_entry(obj: &datapath::testrun::TestObject, map: &str, key: Ipv4CtTuple) -> Option<CtEntry> {
    obj.map(map)
        .expect("open ct map")
        .get(&key)
        .expect("ct lookup")
}

#[test]
fn ipv4_from_unknown_source_is_dropped_as_invalid_sip() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb, BPF_LXC);
    let pkt = ipv4(POD_A, POD_B, 17, &udp(1, 2));
    let out = obj.run("cil_from_container", &pkt).expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT);
    assert_eq!(metric(&obj, abi::drop::DROP_INVALID_SIP, DIR_EGRESS).0, 1);
}

#[test]
fn ipv4_to_a_non_pod_destination_goes_to_the_stack_counted_as_forwarded() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    let pkt = ipv4(POD_A, Ipv4Addr::new(198, 18, 0, 9), 17, &udp(1000, 53));
    let out = obj.run("cil_from_container", &pkt).expect("test run");
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(out.packet, pkt, "packet must leave unmodified");
    assert_eq!(metric(&obj, 0, DIR_EGRESS).0, 1);
}

#[test]
fn a_reply_to_the_stack_is_marked_to_keep_its_source_and_a_new_flow_is_not() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    let outside = Ipv4Addr::new(198, 18, 0, 9);
    let out = obj
        .run(
            "cil_from_container",
            &ipv4(POD_A, outside, 6, &tcp(40000, 80, 0x02)),
        )
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(
        out.mark & abi::ct::MARK_MAGIC_MASK,
        0,
        "a new flow may be masqueraded"
    );

    // outside:50000 -> pod A:8080 reached the pod without the stack (the
    // overlay, a NodePort): its ingress entry, addresses named for the reply
    let inbound = Ipv4CtTuple {
        daddr: outside.into(),
        saddr: POD_A.into(),
        dport: abi::Be16::new(8080),
        sport: abi::Be16::new(50000),
        nexthdr: 6,
        flags: TUPLE_F_IN,
    };
    let entry = CtEntry {
        lifetime: u32::MAX,
        src_sec_id: 2,
        ..CtEntry::default()
    };
    obj.map(abi::maps::CT4_GLOBAL)
        .expect("open ct map")
        .put(&inbound, &entry)
        .expect("seed the inbound flow");
    let reply = ipv4(POD_A, outside, 6, &tcp(8080, 50000, 0x12));
    let out = obj.run("cil_from_container", &reply).expect("test run");
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(
        out.mark & abi::ct::MARK_MAGIC_MASK,
        abi::ct::MARK_MAGIC_SNAT_DONE,
        "the reply keeps its source"
    );
    let seen = ct_entry(&obj, abi::maps::CT4_GLOBAL, inbound).expect("the inbound entry");
    assert_eq!({ seen.packets }, 1, "the reply matched the inbound flow");
}

#[test]
fn tcp_between_local_pods_is_peer_redirected_and_tracked_both_ways() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);

    let syn = ipv4(POD_A, POD_B, 6, &tcp(40000, 80, 0x02));
    let out = obj.run("cil_from_container", &syn).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(&out.packet[0..6], &MAC_B, "dst MAC is pod B");
    assert_eq!(&out.packet[6..12], &LXC_B, "src MAC is B's host-side veth");
    assert_eq!(out.packet[14 + 8], 63, "TTL decremented");
    assert_eq!(
        ipv4_checksum(&out.packet[14..34]),
        0,
        "header checksum still valid"
    );

    // Cilium's key bytes: addresses named for the reply, ports for the original.
    let egress = Ipv4CtTuple {
        daddr: POD_A.into(),
        saddr: POD_B.into(),
        dport: abi::Be16::new(80),
        sport: abi::Be16::new(40000),
        nexthdr: 6,
        flags: TUPLE_F_OUT,
    };
    let ingress = Ipv4CtTuple {
        flags: TUPLE_F_IN,
        ..egress
    };
    let e = ct_entry(&obj, abi::maps::CT4_GLOBAL, egress).expect("egress entry of pod A");
    assert_eq!(e.src_sec_id, 1000);
    assert_eq!(e.tx_flags_seen, 0x02);
    let i = ct_entry(&obj, abi::maps::CT4_GLOBAL, ingress).expect("ingress entry of pod B");
    assert_eq!(i.src_sec_id, 1000);

    let synack = ipv4(POD_B, POD_A, 6, &tcp(80, 40000, 0x12));
    let out = obj.run("cil_from_container", &synack).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(&out.packet[0..6], &MAC_A);
    let e = ct_entry(&obj, abi::maps::CT4_GLOBAL, egress).unwrap();
    let i = ct_entry(&obj, abi::maps::CT4_GLOBAL, ingress).unwrap();
    assert_eq!({ e.packets }, 2, "reply matched pod A's entry");
    assert_eq!({ i.packets }, 2, "reply matched pod B's entry");
    assert_eq!(e.rx_flags_seen, 0x12);
    assert_eq!(metric(&obj, 0, DIR_EGRESS).0, 2);
    assert_eq!(metric(&obj, 0, DIR_INGRESS).0, 2);
}

#[test]
fn arp_request_from_pod_is_answered_with_the_host_veth_mac() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    let gw = Ipv4Addr::new(10, 0, 0, 1);
    let mut arp = vec![0, 1, 8, 0, 6, 4, 0, 1];
    arp.extend_from_slice(&MAC_A);
    arp.extend_from_slice(&POD_A.octets());
    arp.extend_from_slice(&[0; 6]);
    arp.extend_from_slice(&gw.octets());
    let req = frame([0xff; 6], MAC_A, 0x0806, &arp);
    let out = obj.run("cil_from_container", &req).expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    let p = &out.packet;
    assert_eq!(&p[0..6], &MAC_A);
    assert_eq!(&p[6..12], &LXC_A);
    assert_eq!(&p[20..22], &[0, 2], "ARP reply");
    assert_eq!(&p[22..28], &LXC_A, "sender MAC is the veth's");
    assert_eq!(&p[28..32], &gw.octets(), "sender IP is the asked-for one");
    assert_eq!(&p[32..38], &MAC_A);
    assert_eq!(&p[38..42], &POD_A.octets());
}

#[test]
fn non_ethernet_ii_frame_is_dropped_as_unsupported_l2() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb, BPF_LXC);
    let out = obj
        .run(
            "cil_from_container",
            &frame([2; 6], [4; 6], 0x0100, &[0u8; 46]),
        )
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT);
    let (count, key) = metric(&obj, abi::drop::DROP_UNSUPPORTED_L2, DIR_EGRESS);
    assert_eq!(count, 1);
    let key = key.expect("metrics key");
    assert_eq!(abi::metrics::source_file_name(key.file), "bpf_lxc.c");
    assert_ne!(key.line, 0, "drop site line is recorded");
}

#[test]
fn unknown_l3_and_malformed_ipv4_are_dropped_with_their_reasons() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb, BPF_LXC);
    let v6 = frame([2; 6], [4; 6], 0x86dd, &[0u8; 60]);
    assert_eq!(
        obj.run("cil_from_container", &v6).unwrap().retval,
        TC_ACT_SHOT
    );
    let bad_ihl = [
        0x44, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 5, 10, 0, 0, 6,
    ];
    let bad = frame([2; 6], [4; 6], 0x0800, &bad_ihl);
    assert_eq!(
        obj.run("cil_from_container", &bad).unwrap().retval,
        TC_ACT_SHOT
    );
    assert_eq!(metric(&obj, abi::drop::DROP_UNKNOWN_L3, DIR_EGRESS).0, 1);
    assert_eq!(metric(&obj, abi::drop::DROP_INVALID, DIR_EGRESS).0, 1);
    assert_eq!(metric(&obj, 0, DIR_EGRESS).0, 0, "nothing was forwarded");
}
