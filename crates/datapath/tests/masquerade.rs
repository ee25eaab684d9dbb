//! BPF masquerading on crafted packets: cil_to_netdev gives a pod's packet
//! leaving the cluster the node's address (its own port when free, another
//! when a second pod already holds that port towards the same peer) for
//! TCP, UDP and ICMP echo; cil_from_netdev turns each reply back to the
//! pod it belongs to; the cluster's own destinations, translated packets,
//! overlay packets and the node's servers are left alone; the node's own
//! connections keep their ports and reserve them.

mod common;

use abi::ct::{Ipv4CtTuple, MARK_MAGIC_OVERLAY, MARK_MAGIC_SNAT_DONE};
use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::lb::{Ipv4NatEntry, NAT_DIR_EGRESS, NAT_DIR_INGRESS};
use abi::Be16;
use common::*;
use datapath::objects::BPF_HOST;
use datapath::testrun::TestObject;
use std::net::Ipv4Addr;
use testsupport::Sandbox;

const NODE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 11);
const OUTSIDE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 254);
const POD_A: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const POD_B: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 6);
/// Another node's pod, in the exclusion CIDR.
const REMOTE_POD: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 5);

/// bpf_host of a node at NODE with pods A and B, masquerading to NODE
/// except towards 10.0.0.0/8.
fn node(sb: &Sandbox) -> TestObject {
    let obj = load(sb, BPF_HOST);
    obj.map(abi::maps::LXC)
        .unwrap()
        .put(&EndpointKey::v4(NODE), &EndpointInfo::host())
        .unwrap();
    add_pod(&obj, POD_A, 12, 5, 1000);
    add_pod(&obj, POD_B, 13, 6, 1000);
    obj.open::<datapath::maps::RuntimeConfig>()
        .unwrap()
        .set_masquerade(Some((NODE, (Ipv4Addr::new(10, 0, 0, 0), 8))))
        .unwrap();
    obj
}

fn key(
    saddr: Ipv4Addr,
    daddr: Ipv4Addr,
    sport: u16,
    dport: u16,
    proto: u8,
    dir: u8,
) -> Ipv4CtTuple {
    Ipv4CtTuple {
        saddr: saddr.into(),
        daddr: daddr.into(),
        sport: Be16::new(sport),
        dport: Be16::new(dport),
        nexthdr: proto,
        flags: dir,
    }
}

fn nat(obj: &TestObject, k: &Ipv4CtTuple) -> Option<Ipv4NatEntry> {
    obj.map(abi::maps::SNAT4_EXTERNAL).unwrap().get(k).unwrap()
}

/// An ICMP echo request (type 8) or reply (0) with identifier `id`.
fn echo(kind: u8, id: u16) -> Vec<u8> {
    let mut m = vec![kind, 0, 0, 0];
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0, 1, 0xab, 0xcd]);
    let sum = ipv4_checksum(&m);
    m[2..4].copy_from_slice(&sum.to_be_bytes());
    m
}

/// The ICMP identifier of an echo frame, and whether its checksum holds.
fn echo_id(frame: &[u8]) -> (u16, bool) {
    let icmp = &frame[34..];
    (
        u16::from_be_bytes([icmp[4], icmp[5]]),
        ipv4_checksum(icmp) == 0,
    )
}

#[test]
fn a_pods_tcp_leaves_as_the_node_and_its_reply_comes_back_to_it() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);

    let syn = with_l4_checksum(ipv4(POD_A, OUTSIDE, 6, &tcp(40000, 80, 0x02)));
    let out = obj.run("cil_to_netdev", &syn).unwrap();
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(
        addrs(&out.packet),
        (NODE, OUTSIDE, 40000, 80),
        "the pod's port is kept when free"
    );
    assert_eq!(ipv4_checksum(&out.packet[14..34]), 0);
    assert_eq!(l4_checksum(&out.packet), 0);

    let fwd = nat(&obj, &key(POD_A, OUTSIDE, 40000, 80, 6, NAT_DIR_EGRESS)).expect("egress entry");
    assert_eq!(
        (fwd.to_addr.ip(), fwd.to_port.get(), fwd.from_addr.ip()),
        (NODE, 40000, Ipv4Addr::UNSPECIFIED)
    );
    let rev = nat(&obj, &key(OUTSIDE, NODE, 80, 40000, 6, NAT_DIR_INGRESS)).expect("ingress entry");
    assert_eq!((rev.to_addr.ip(), rev.to_port.get()), (POD_A, 40000));

    let reply = with_l4_checksum(ipv4(OUTSIDE, NODE, 6, &tcp(80, 40000, 0x12)));
    let back = obj.run("cil_from_netdev", &reply).unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT, "delivered to the pod");
    assert_eq!(addrs(&back.packet), (OUTSIDE, POD_A, 80, 40000));
    assert_eq!(ipv4_checksum(&back.packet[14..34]), 0);
    assert_eq!(l4_checksum(&back.packet), 0);

    // the same flow's next packet reuses the mapping
    let ack = with_l4_checksum(ipv4(POD_A, OUTSIDE, 6, &tcp(40000, 80, 0x10)));
    assert_eq!(
        addrs(&obj.run("cil_to_netdev", &ack).unwrap().packet),
        (NODE, OUTSIDE, 40000, 80)
    );
}

#[test]
fn two_pods_with_one_source_port_get_two_node_ports_and_their_own_replies() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);

    let a = obj
        .run(
            "cil_to_netdev",
            &with_l4_checksum(ipv4(POD_A, OUTSIDE, 17, &udp(40000, 80))),
        )
        .unwrap();
    let b = obj
        .run(
            "cil_to_netdev",
            &with_l4_checksum(ipv4(POD_B, OUTSIDE, 17, &udp(40000, 80))),
        )
        .unwrap();
    let (_, _, port_a, _) = addrs(&a.packet);
    let (src_b, _, port_b, _) = addrs(&b.packet);
    assert_eq!(port_a, 40000);
    assert_eq!(src_b, NODE);
    assert_ne!(port_b, 40000, "the second pod gets a port of its own");
    assert!(port_b >= 32768, "from the NAT range: {port_b}");
    assert_eq!(l4_checksum(&b.packet), 0);

    for (port, pod) in [(port_a, POD_A), (port_b, POD_B)] {
        let reply = with_l4_checksum(ipv4(OUTSIDE, NODE, 17, &udp(80, port)));
        let back = obj.run("cil_from_netdev", &reply).unwrap();
        assert_eq!(back.retval, TC_ACT_REDIRECT);
        assert_eq!(addrs(&back.packet), (OUTSIDE, pod, 80, 40000));
        assert_eq!(l4_checksum(&back.packet), 0);
    }
}

#[test]
fn a_pods_ping_leaves_as_the_node_and_the_echo_reply_comes_back() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);

    let out = obj
        .run("cil_to_netdev", &ipv4(POD_A, OUTSIDE, 1, &echo(8, 7)))
        .unwrap();
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(addrs(&out.packet).0, NODE);
    assert_eq!(ipv4_checksum(&out.packet[14..34]), 0);
    assert_eq!(echo_id(&out.packet), (7, true));
    // a second pod's ping with the same identifier gets another one
    let other = obj
        .run("cil_to_netdev", &ipv4(POD_B, OUTSIDE, 1, &echo(8, 7)))
        .unwrap();
    let (id_b, sum_ok) = echo_id(&other.packet);
    assert!(id_b != 7 && sum_ok, "{id_b} {sum_ok}");

    for (id, pod) in [(7, POD_A), (id_b, POD_B)] {
        let back = obj
            .run("cil_from_netdev", &ipv4(OUTSIDE, NODE, 1, &echo(0, id)))
            .unwrap();
        assert_eq!(back.retval, TC_ACT_REDIRECT);
        assert_eq!(addrs(&back.packet).1, pod);
        assert_eq!(echo_id(&back.packet), (7, true));
        assert_eq!(ipv4_checksum(&back.packet[14..34]), 0);
    }
}

#[test]
fn the_cluster_translated_and_overlay_packets_and_the_nodes_servers_are_left_alone() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);
    let table = obj.open::<datapath::maps::Snat4External>().unwrap();

    let to_cluster = with_l4_checksum(ipv4(POD_A, REMOTE_POD, 6, &tcp(40000, 80, 0x02)));
    let out = obj.run("cil_to_netdev", &to_cluster).unwrap();
    assert_eq!(addrs(&out.packet), (POD_A, REMOTE_POD, 40000, 80));

    let to_world = with_l4_checksum(ipv4(POD_A, OUTSIDE, 6, &tcp(40001, 80, 0x02)));
    for mark in [MARK_MAGIC_SNAT_DONE, MARK_MAGIC_OVERLAY] {
        let out = obj.run_marked("cil_to_netdev", &to_world, mark).unwrap();
        assert_eq!(addrs(&out.packet).0, POD_A, "mark {mark:#x}");
    }

    let server_reply = with_l4_checksum(ipv4(NODE, OUTSIDE, 6, &tcp(22, 40000, 0x12)));
    let out = obj.run("cil_to_netdev", &server_reply).unwrap();
    assert_eq!(addrs(&out.packet), (NODE, OUTSIDE, 22, 40000));
    assert!(table.entries().unwrap().is_empty(), "nothing recorded");

    // without masquerading, pods leave as themselves
    obj.open::<datapath::maps::RuntimeConfig>()
        .unwrap()
        .set_masquerade(None)
        .unwrap();
    let out = obj.run("cil_to_netdev", &to_world).unwrap();
    assert_eq!(addrs(&out.packet).0, POD_A);
}

#[test]
fn the_nodes_own_connection_keeps_its_port_and_a_pod_then_gets_another() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);

    let own = with_l4_checksum(ipv4(NODE, OUTSIDE, 6, &tcp(40000, 80, 0x02)));
    let out = obj.run("cil_to_netdev", &own).unwrap();
    assert_eq!(addrs(&out.packet), (NODE, OUTSIDE, 40000, 80));
    let rev = nat(&obj, &key(OUTSIDE, NODE, 80, 40000, 6, NAT_DIR_INGRESS))
        .expect("the port is reserved");
    assert_eq!((rev.to_addr.ip(), rev.to_port.get()), (NODE, 40000));
    assert_eq!(rev.needs_ct, 1, "as Cilium marks the node's own flows");

    let pod = with_l4_checksum(ipv4(POD_A, OUTSIDE, 6, &tcp(40000, 80, 0x02)));
    let (_, _, port, _) = addrs(&obj.run("cil_to_netdev", &pod).unwrap().packet);
    assert_ne!(port, 40000);

    // the node's reply comes back to the node's stack, unchanged
    let reply = with_l4_checksum(ipv4(OUTSIDE, NODE, 6, &tcp(80, 40000, 0x12)));
    let back = obj.run("cil_from_netdev", &reply).unwrap();
    assert_eq!(back.retval, TC_ACT_OK);
    assert_eq!(addrs(&back.packet), (OUTSIDE, NODE, 80, 40000));
}

#[test]
fn an_icmp_error_about_a_masqueraded_flow_reaches_the_pod_quoting_its_own_datagram() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);
    // pod-b holds 40000 first, so pod-a's datagram leaves from another port
    obj.run(
        "cil_to_netdev",
        &with_l4_checksum(ipv4(POD_B, OUTSIDE, 17, &udp(40000, 53))),
    )
    .unwrap();
    let out = obj
        .run(
            "cil_to_netdev",
            &with_l4_checksum(ipv4(POD_A, OUTSIDE, 17, &udp(40000, 53))),
        )
        .unwrap();
    let (_, _, port, _) = addrs(&out.packet);
    assert_ne!(port, 40000);

    let error = port_unreachable(OUTSIDE, NODE, &out.packet);
    let back = obj.run("cil_from_netdev", &error).unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT, "to the pod");
    let (src, dst, _, _) = addrs(&back.packet);
    assert_eq!((src, dst), (OUTSIDE, POD_A));
    assert_eq!(ipv4_checksum(&back.packet[14..34]), 0);
    let icmp = &back.packet[34..];
    assert_eq!(ipv4_checksum(icmp), 0, "the ICMP checksum follows");
    let quoted = &icmp[8..];
    assert_eq!(ipv4_checksum(&quoted[..20]), 0, "the quoted header's too");
    assert_eq!(
        Ipv4Addr::new(quoted[12], quoted[13], quoted[14], quoted[15]),
        POD_A
    );
    assert_eq!(u16::from_be_bytes([quoted[20], quoted[21]]), 40000);

    // one about no flow of ours is the stack's
    let stray = port_unreachable(
        OUTSIDE,
        NODE,
        &with_l4_checksum(ipv4(NODE, OUTSIDE, 17, &udp(41234, 53))),
    );
    assert_eq!(
        obj.run("cil_from_netdev", &stray).unwrap().retval,
        TC_ACT_OK
    );
}
