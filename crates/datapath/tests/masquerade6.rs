//! BPF masquerading of IPv6 on crafted packets (the dual-stack bpf_host):
//! cil_to_netdev gives a pod's packet leaving the cluster the node's IPv6
//! address (its own port when free, another when a second pod holds it
//! towards the same peer) for TCP, UDP and ICMPv6 echo; cil_from_netdev
//! turns each reply, and an ICMPv6 error about a flow, back to its pod;
//! the cluster's own destinations, translated packets and the node's
//! servers are left alone.

mod common;

use abi::ct::{Ipv6CtTuple, MARK_MAGIC_SNAT_DONE};
use abi::endpoint::EndpointInfo;
use abi::lb::{Ipv6NatEntry, NAT_DIR_EGRESS, NAT_DIR_INGRESS};
use abi::Be16;
use common::*;
use datapath::objects::BPF_HOST_V6;
use datapath::testrun::TestObject;
use std::net::Ipv6Addr;
use testsupport::Sandbox;

const NODE: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x198, 0x18, 0, 0, 0, 0, 0x11);
const OUTSIDE: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x198, 0x18, 0, 0, 0, 0, 0x50);
const ROUTER: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x198, 0x18, 0, 0, 0, 0, 0x1);
const POD_A: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x5);
const POD_B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x6);
/// Another node's pod, in the exclusion prefix.
const REMOTE_POD: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 2, 0, 0, 0, 0x5);
const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP6: u8 = 58;
const WIRE: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 9, 1], [2, 0, 0, 0, 9, 2]);

/// The dual-stack bpf_host of a node at NODE with pods A and B,
/// masquerading to NODE except towards fd00:10::/32.
fn node(sb: &Sandbox) -> TestObject {
    let obj = load(sb, BPF_HOST_V6);
    for (i, ip) in [POD_A, POD_B].into_iter().enumerate() {
        let n = 5 + i as u8;
        add_endpoint(
            &obj,
            ip,
            EndpointInfo::pod(
                TEST_IFINDEX,
                12 + i as u16,
                [2, 0, 0, 0, 0, n],
                [2, 0, 0, 0, 1, n],
                1000,
            ),
        );
    }
    obj.open::<datapath::maps::RuntimeConfig>()
        .unwrap()
        .set_masquerade6(Some((
            NODE,
            (Ipv6Addr::new(0xfd00, 0x10, 0, 0, 0, 0, 0, 0), 32),
        )))
        .unwrap();
    obj
}

fn packet(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, l4: &[u8]) -> Vec<u8> {
    let frame = ipv6(WIRE, src, dst, (proto, 64), l4);
    if proto == ICMP6 {
        frame
    } else {
        with_l6_checksum(frame)
    }
}

fn key(
    saddr: Ipv6Addr,
    daddr: Ipv6Addr,
    sport: u16,
    dport: u16,
    proto: u8,
    dir: u8,
) -> Ipv6CtTuple {
    Ipv6CtTuple {
        saddr: saddr.into(),
        daddr: daddr.into(),
        sport: Be16::new(sport),
        dport: Be16::new(dport),
        nexthdr: proto,
        flags: dir,
    }
}

fn nat(obj: &TestObject, k: &Ipv6CtTuple) -> Option<Ipv6NatEntry> {
    obj.map(abi::maps::SNAT6_EXTERNAL).unwrap().get(k).unwrap()
}

#[test]
fn a_pods_tcp_leaves_as_the_node_and_its_reply_comes_back_to_it() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);

    let out = obj
        .run(
            "cil_to_netdev",
            &packet(POD_A, OUTSIDE, TCP, &tcp(40000, 80, 0x02)),
        )
        .unwrap();
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(
        addrs6(&out.packet),
        (NODE, OUTSIDE, 40000, 80),
        "its port kept"
    );
    assert_eq!(l6_checksum(&out.packet), 0);
    let fwd =
        nat(&obj, &key(POD_A, OUTSIDE, 40000, 80, TCP, NAT_DIR_EGRESS)).expect("egress entry");
    assert_eq!((fwd.to_addr.ip(), fwd.to_port.get()), (NODE, 40000));
    let rev =
        nat(&obj, &key(OUTSIDE, NODE, 80, 40000, TCP, NAT_DIR_INGRESS)).expect("ingress entry");
    assert_eq!((rev.to_addr.ip(), rev.to_port.get()), (POD_A, 40000));

    let back = obj
        .run(
            "cil_from_netdev",
            &packet(OUTSIDE, NODE, TCP, &tcp(80, 40000, 0x12)),
        )
        .unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT, "delivered to the pod");
    assert_eq!(addrs6(&back.packet), (OUTSIDE, POD_A, 80, 40000));
    assert_eq!(l6_checksum(&back.packet), 0);
}

#[test]
fn two_pods_with_one_source_port_get_two_node_ports_and_their_own_replies() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);
    let mut ports = Vec::new();
    for pod in [POD_A, POD_B] {
        let out = obj
            .run("cil_to_netdev", &packet(pod, OUTSIDE, UDP, &udp(5000, 53)))
            .unwrap();
        let (src, _, port, _) = addrs6(&out.packet);
        assert_eq!(src, NODE);
        assert_eq!(l6_checksum(&out.packet), 0);
        ports.push(port);
    }
    assert_eq!(ports[0], 5000);
    assert_ne!(ports[1], 5000);
    for (pod, port) in [POD_A, POD_B].into_iter().zip(ports) {
        let back = obj
            .run(
                "cil_from_netdev",
                &packet(OUTSIDE, NODE, UDP, &udp(53, port)),
            )
            .unwrap();
        assert_eq!(back.retval, TC_ACT_REDIRECT);
        assert_eq!(addrs6(&back.packet), (OUTSIDE, pod, 53, 5000));
        assert_eq!(l6_checksum(&back.packet), 0);
    }
}

fn echo(src: Ipv6Addr, dst: Ipv6Addr, ty: u8, id: u16) -> Vec<u8> {
    let mut body = id.to_be_bytes().to_vec();
    body.extend_from_slice(&[0, 1, 0xab, 0xcd]);
    packet(src, dst, ICMP6, &icmp6(src, dst, ty, &body))
}

#[test]
fn a_pods_ping_leaves_as_the_node_and_the_echo_reply_comes_back() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);
    let out = obj
        .run("cil_to_netdev", &echo(POD_A, OUTSIDE, 128, 77))
        .unwrap();
    let (src, _, _, _) = addrs6(&out.packet);
    assert_eq!(src, NODE);
    assert_eq!(
        &out.packet[58..60],
        &77u16.to_be_bytes(),
        "its identifier kept"
    );
    assert_eq!(icmp6_checksum(NODE, OUTSIDE, &out.packet[54..]), 0);

    let back = obj
        .run("cil_from_netdev", &echo(OUTSIDE, NODE, 129, 77))
        .unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT);
    let (src, dst, _, _) = addrs6(&back.packet);
    assert_eq!((src, dst), (OUTSIDE, POD_A));
    assert_eq!(icmp6_checksum(OUTSIDE, POD_A, &back.packet[54..]), 0);
}

#[test]
fn the_cluster_translated_packets_and_the_nodes_servers_are_left_alone() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);
    let to_cluster = packet(POD_A, REMOTE_POD, TCP, &tcp(40000, 80, 0x02));
    let out = obj.run("cil_to_netdev", &to_cluster).unwrap();
    assert_eq!(out.packet, to_cluster);
    let to_world = packet(POD_A, OUTSIDE, TCP, &tcp(40001, 80, 0x02));
    let out = obj
        .run_marked("cil_to_netdev", &to_world, MARK_MAGIC_SNAT_DONE)
        .unwrap();
    assert_eq!(addrs6(&out.packet).0, POD_A);
    let server_reply = packet(NODE, OUTSIDE, TCP, &tcp(22, 40000, 0x12));
    let out = obj.run("cil_to_netdev", &server_reply).unwrap();
    assert_eq!(out.packet, server_reply);
    let table = obj.open::<datapath::maps::Snat6External>().unwrap();
    assert!(table.entries().unwrap().is_empty(), "nothing recorded");

    // the node's own connection keeps its port and reserves it
    let own = packet(NODE, OUTSIDE, TCP, &tcp(40002, 80, 0x02));
    assert_eq!(obj.run("cil_to_netdev", &own).unwrap().packet, own);
    let pod = packet(POD_A, OUTSIDE, TCP, &tcp(40002, 80, 0x02));
    assert_ne!(
        addrs6(&obj.run("cil_to_netdev", &pod).unwrap().packet).2,
        40002
    );

    obj.open::<datapath::maps::RuntimeConfig>()
        .unwrap()
        .set_masquerade6(None)
        .unwrap();
    let out = obj.run("cil_to_netdev", &to_world).unwrap();
    assert_eq!(
        addrs6(&out.packet).0,
        POD_A,
        "off: pods leave as themselves"
    );
}

#[test]
fn a_packet_too_big_about_a_masqueraded_flow_reaches_the_pod_quoting_its_own_datagram() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);
    // pod-b holds 40000 first, so pod-a's datagram leaves from another port
    obj.run(
        "cil_to_netdev",
        &packet(POD_B, OUTSIDE, UDP, &udp(40000, 53)),
    )
    .unwrap();
    let out = obj
        .run(
            "cil_to_netdev",
            &packet(POD_A, OUTSIDE, UDP, &udp(40000, 53)),
        )
        .unwrap();
    let port = addrs6(&out.packet).2;
    assert_ne!(port, 40000);

    // a router on the way says the datagram was too big (MTU 1280)
    let mut body = 1280u32.to_be_bytes().to_vec();
    body.extend_from_slice(&out.packet[14..]);
    let error = packet(ROUTER, NODE, ICMP6, &icmp6(ROUTER, NODE, 2, &body));
    let back = obj.run("cil_from_netdev", &error).unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT, "to pod-a");
    let p = &back.packet;
    let (src, dst, _, _) = addrs6(p);
    assert_eq!((src, dst), (ROUTER, POD_A));
    assert_eq!(
        icmp6_checksum(ROUTER, POD_A, &p[54..]),
        0,
        "ICMPv6 checksum"
    );
    let quoted = &p[54 + 8..];
    assert_eq!(&quoted[8..24], &POD_A.octets(), "quotes pod-a's datagram");
    assert_eq!(
        &quoted[40..42],
        &40000u16.to_be_bytes(),
        "from its own port"
    );
}
