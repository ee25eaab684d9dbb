//! ClusterIP load balancing of IPv6 in cil_from_container (the dual-stack
//! build) on crafted packets, with the cilium_lb6_* maps written from
//! `lb`'s own entries: DNAT to a backend with a valid checksum, the flow
//! kept on its backend, replies and ICMPv6 errors turned back into the
//! frontend, fragments, affinity, and services without backends (refused with a RST, as IPv4's are).

mod common;

use abi::ct::{Ipv6CtTuple, TUPLE_F_SERVICE};
use abi::endpoint::EndpointInfo;
use abi::metrics::DIR_EGRESS;
use common::*;
use datapath::objects::BPF_LXC_V6;
use datapath::testrun::TestObject;
use lb::{BackendState, Frontend, LoadBalancer, ServiceSpec, ServiceType};
use std::net::{Ipv4Addr, Ipv6Addr};
use testsupport::Sandbox;

const ROUTER: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x1);
const CLIENT: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x5);
const BACKEND_A: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x6);
const BACKEND_B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x7);
const VIP: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x96, 0, 0, 0, 0, 0, 0x30);
const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP6: u8 = 58;

fn mac(i: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0, i + 1]
}

fn lxc_mac(i: u8) -> [u8; 6] {
    [2, 0, 0, 0, 1, i + 1]
}

/// A dual-stack node with the client and two backend pods.
fn pods(sb: &Sandbox) -> TestObject {
    let obj = load(sb, BPF_LXC_V6);
    let halves = abi::runtime_config::ipv6_halves(ROUTER);
    let config = obj.map(abi::maps::RUNTIME_CONFIG).expect("runtime config");
    config
        .put(&abi::runtime_config::ROUTER_IPV6_HI, &halves[0])
        .expect("router");
    config
        .put(&abi::runtime_config::ROUTER_IPV6_LO, &halves[1])
        .expect("router");
    for (i, ip) in [CLIENT, BACKEND_A, BACKEND_B].into_iter().enumerate() {
        let i = i as u8;
        add_endpoint(
            &obj,
            ip,
            EndpointInfo::pod(TEST_IFINDEX, 11 + u16::from(i), mac(i), lxc_mac(i), 1000),
        );
        learn_remote(&obj, ip, 1000, Ipv4Addr::UNSPECIFIED);
    }
    obj
}

fn service(obj: &TestObject, lb: &mut LoadBalancer, backends: &[Ipv6Addr], affinity_timeout: u32) {
    let spec = ServiceSpec {
        id: 5,
        frontend: Frontend {
            ip: VIP.into(),
            port: 80,
            proto: abi::lb::PROTO_ANY,
            scope: abi::lb::LB_LOOKUP_SCOPE_EXT,
        },
        kind: ServiceType::ClusterIP,
        backends: backends
            .iter()
            .map(|ip| ((*ip).into(), 8080, BackendState::Active))
            .collect(),
        affinity_timeout,
        ext_local: false,
        loopback: false,
    };
    let (up, _) = lb.upsert(&spec).unwrap();
    datapath::lbmap::apply(obj.pin_dir(), &up).unwrap();
}

/// A packet from the pod at `src` (its MACs) to `dst`.
fn packet(src: Ipv6Addr, dst: Ipv6Addr, proto: u8, l4: &[u8]) -> Vec<u8> {
    let i = [CLIENT, BACKEND_A, BACKEND_B]
        .iter()
        .position(|ip| *ip == src)
        .unwrap_or(0) as u8;
    ipv6((mac(i), lxc_mac(i)), src, dst, (proto, 64), l4)
}

fn syn(sport: u16) -> Vec<u8> {
    with_l6_checksum(packet(CLIENT, VIP, TCP, &tcp(sport, 80, 0x02)))
}

fn run(obj: &mut TestObject, frame: &[u8]) -> (u32, Vec<u8>) {
    let out = obj.run("cil_from_container", frame).expect("test run");
    (out.retval, out.packet)
}

#[test]
fn clusterip_flows_are_dnated_kept_on_their_backend_and_replies_come_from_the_frontend() {
    let sb = Sandbox::enter();
    let mut obj = pods(&sb);
    service(&obj, &mut LoadBalancer::new(), &[BACKEND_A, BACKEND_B], 0);

    let (ret, p) = run(&mut obj, &syn(40000));
    assert_eq!(ret, TC_ACT_REDIRECT);
    let (src, dst, sport, dport) = addrs6(&p);
    assert_eq!((src, sport, dport), (CLIENT, 40000, 8080));
    assert!(dst == BACKEND_A || dst == BACKEND_B, "{dst}");
    assert_eq!(l6_checksum(&p), 0, "TCP checksum follows the DNAT");

    // the flow's SERVICE entry, keyed as 1.16 keys it, names the backend
    let key = Ipv6CtTuple {
        daddr: VIP.into(),
        saddr: CLIENT.into(),
        dport: abi::Be16::new(40000),
        sport: abi::Be16::new(80),
        nexthdr: TCP,
        flags: TUPLE_F_SERVICE,
    };
    let entry = obj
        .map(abi::maps::CT6_GLOBAL)
        .unwrap()
        .get::<_, abi::ct::CtEntry>(&key)
        .unwrap()
        .expect("SERVICE entry");
    assert_eq!(entry.rev_nat_index.get(), 5);
    assert_ne!({ entry.backend_id }, 0);

    for _ in 0..8 {
        let ack = with_l6_checksum(packet(CLIENT, VIP, TCP, &tcp(40000, 80, 0x10)));
        assert_eq!(addrs6(&run(&mut obj, &ack).1).1, dst, "same backend");
    }

    let reply = with_l6_checksum(packet(dst, CLIENT, TCP, &tcp(8080, 40000, 0x12)));
    let (ret, p) = run(&mut obj, &reply);
    assert_eq!(ret, TC_ACT_REDIRECT);
    assert_eq!(addrs6(&p), (VIP, CLIENT, 80, 40000), "from the frontend");
    assert_eq!(l6_checksum(&p), 0);

    let mut seen = std::collections::BTreeSet::new();
    for sport in 41000..41064 {
        seen.insert(addrs6(&run(&mut obj, &syn(sport)).1).1);
    }
    assert_eq!(seen.len(), 2, "both backends get flows: {seen:?}");
}

#[test]
fn an_icmpv6_error_from_the_backend_speaks_of_the_frontend() {
    let sb = Sandbox::enter();
    let mut obj = pods(&sb);
    service(&obj, &mut LoadBalancer::new(), &[BACKEND_A], 0);
    let query = with_l6_checksum(packet(CLIENT, VIP, UDP, &udp(40000, 80)));
    let (_, sent) = run(&mut obj, &query);
    assert_eq!(addrs6(&sent), (CLIENT, BACKEND_A, 40000, 8080));

    // destination unreachable, port unreachable: nothing listens there
    let mut body = vec![0, 0, 0, 0];
    body.extend_from_slice(&sent[14..]);
    let mut error = icmp6(BACKEND_A, CLIENT, 1, &body);
    error[1] = 4;
    error[2..4].copy_from_slice(&[0, 0]);
    let csum = icmp6_checksum(BACKEND_A, CLIENT, &error);
    error[2..4].copy_from_slice(&csum.to_be_bytes());
    let (ret, p) = run(&mut obj, &packet(BACKEND_A, CLIENT, ICMP6, &error));
    assert_eq!(ret, TC_ACT_REDIRECT, "related to the client's flow");
    let (src, dst, _, _) = addrs6(&p);
    assert_eq!((src, dst), (VIP, CLIENT), "from the frontend");
    assert_eq!(icmp6_checksum(VIP, CLIENT, &p[54..]), 0, "ICMPv6 checksum");
    let quoted = &p[54 + 8..];
    assert_eq!(&quoted[8..24], &CLIENT.octets());
    assert_eq!(&quoted[24..40], &VIP.octets(), "about the frontend");
    assert_eq!(&quoted[42..44], &80u16.to_be_bytes(), "and its port");
}

#[test]
fn a_fragmented_datagram_to_a_frontend_goes_whole_to_its_backend() {
    let sb = Sandbox::enter();
    let mut obj = pods(&sb);
    service(&obj, &mut LoadBalancer::new(), &[BACKEND_A], 0);
    let first = [udp(40000, 80), vec![0xab; 8]].concat();
    let (ret, p) = run(
        &mut obj,
        &packet(CLIENT, VIP, 44, &fragment6(0, true, 21, UDP, &first)),
    );
    assert_eq!(ret, TC_ACT_REDIRECT);
    assert_eq!(&p[14 + 24..14 + 40], &BACKEND_A.octets());
    assert_eq!(&p[62 + 2..62 + 4], &8080u16.to_be_bytes(), "its port too");

    let rest = [0xcd; 16];
    let (ret, p) = run(
        &mut obj,
        &packet(CLIENT, VIP, 44, &fragment6(2, false, 21, UDP, &rest)),
    );
    assert_eq!(ret, TC_ACT_REDIRECT, "the later fragment follows");
    assert_eq!(&p[14 + 24..14 + 40], &BACKEND_A.octets());
    assert_eq!(&p[62..], &rest, "no L4 header to rewrite");
}

#[test]
fn session_affinity_keeps_a_client_on_one_backend() {
    let sb = Sandbox::enter();
    let mut obj = pods(&sb);
    service(&obj, &mut LoadBalancer::new(), &[BACKEND_A, BACKEND_B], 60);
    let first = addrs6(&run(&mut obj, &syn(40000)).1).1;
    for sport in 40001..40033 {
        assert_eq!(addrs6(&run(&mut obj, &syn(sport)).1).1, first);
    }
}

#[test]
fn a_service_without_backends_drops_with_a_reason() {
    let sb = Sandbox::enter();
    let mut obj = pods(&sb);
    service(&obj, &mut LoadBalancer::new(), &[], 0);
    // a SYN is answered with a RST from the frontend: connect() fails at once
    let (ret, p) = run(&mut obj, &syn(40000));
    assert_eq!(ret, TC_ACT_REDIRECT);
    assert_eq!(p.len(), 14 + 40 + 20);
    assert_eq!(addrs6(&p), (VIP, CLIENT, 80, 40000));
    assert_eq!(p[54 + 13], 0x14, "RST|ACK");
    assert_eq!(&p[54 + 8..54 + 12], &2u32.to_be_bytes(), "acks the SYN");
    assert_eq!(l6_checksum(&p), 0);
    assert_eq!(metric(&obj, abi::drop::DROP_NO_SERVICE, DIR_EGRESS).0, 1);
    // anything else is dropped
    let query = with_l6_checksum(packet(CLIENT, VIP, UDP, &udp(5000, 80)));
    assert_eq!(run(&mut obj, &query).0, TC_ACT_SHOT);
    assert_eq!(metric(&obj, abi::drop::DROP_NO_SERVICE, DIR_EGRESS).0, 2);
}

#[test]
fn traffic_to_a_backend_address_itself_is_not_translated() {
    let sb = Sandbox::enter();
    let mut obj = pods(&sb);
    service(&obj, &mut LoadBalancer::new(), &[BACKEND_A], 0);
    let direct = with_l6_checksum(packet(CLIENT, BACKEND_A, TCP, &tcp(40000, 8080, 0x02)));
    let (ret, p) = run(&mut obj, &direct);
    assert_eq!(ret, TC_ACT_REDIRECT);
    assert_eq!(addrs6(&p), (CLIENT, BACKEND_A, 40000, 8080));
    assert_eq!(p[54..], direct[54..], "the segment untouched");
}
