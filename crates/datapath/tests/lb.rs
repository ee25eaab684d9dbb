//! ClusterIP load balancing in cil_from_container on crafted packets, with
//! the LB maps written from `lb`'s own entries: DNAT to a backend with valid
//! checksums, the flow kept on its backend, replies turned back into the
//! frontend (ICMP errors too), fragmented datagrams, terminating backends,
//! and services without backends.

mod common;

use abi::endpoint::EndpointInfo;
use abi::metrics::DIR_EGRESS;
use common::*;
use datapath::objects::BPF_LXC;
use datapath::testrun::TestObject;
use lb::{BackendState, Frontend, LoadBalancer, ServiceSpec, ServiceType};
use std::net::Ipv4Addr;
use testsupport::Sandbox;

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
const BACKEND_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 6);
const BACKEND_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 7);
const VIP: Ipv4Addr = Ipv4Addr::new(172, 16, 16, 87);

fn pods(sb: &Sandbox) -> TestObject {
    let obj = load(sb, BPF_LXC);
    for (i, ip) in [CLIENT, BACKEND_A, BACKEND_B].into_iter().enumerate() {
        let mac = [2, 0, 0, 0, 0, i as u8 + 1];
        let lxc = [2, 0, 0, 0, 1, i as u8 + 1];
        add_endpoint(
            &obj,
            ip,
            EndpointInfo::pod(TEST_IFINDEX, 11 + i as u16, mac, lxc, 1000),
        );
    }
    obj
}

fn service(obj: &TestObject, lb: &mut LoadBalancer, backends: &[(Ipv4Addr, BackendState)]) {
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
            .map(|(ip, st)| ((*ip).into(), 8080, *st))
            .collect(),
        affinity_timeout: 0,
        ext_local: false,
        loopback: false,
    };
    let (up, _) = lb.upsert(&spec).unwrap();
    datapath::lbmap::apply(obj.pin_dir(), &up).unwrap();
}

fn syn(sport: u16) -> Vec<u8> {
    with_l4_checksum(ipv4(CLIENT, VIP, 6, &tcp(sport, 80, 0x02)))
}

fn setup(sb: &Sandbox) -> (TestObject, LoadBalancer) {
    (pods(sb), LoadBalancer::new())
}

#[test]
fn a_fragmented_datagram_to_a_frontend_goes_whole_to_its_backend() {
    let sb = Sandbox::enter();
    let (mut obj, mut lb) = setup(&sb);
    service(&obj, &mut lb, &[(BACKEND_A, BackendState::Active)]);
    let (first, rest) = udp_fragments((CLIENT, 40000), (VIP, 80), 21);
    let out = obj.run("cil_from_container", &first).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(addrs(&out.packet), (CLIENT, BACKEND_A, 40000, 8080));
    let out = obj.run("cil_from_container", &rest).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_rest_translated(&out.packet, CLIENT, BACKEND_A);
}

#[test]
fn an_icmp_error_from_the_backend_speaks_of_the_frontend() {
    let sb = Sandbox::enter();
    let (mut obj, mut lb) = setup(&sb);
    service(&obj, &mut lb, &[(BACKEND_A, BackendState::Active)]);
    let query = ipv4(CLIENT, VIP, 17, &udp(40000, 80));
    let sent = obj.run("cil_from_container", &query).unwrap();
    assert_eq!(addrs(&sent.packet), (CLIENT, BACKEND_A, 40000, 8080));

    // nothing listens on the backend's port
    let error = port_unreachable(BACKEND_A, CLIENT, &sent.packet);
    let out = obj.run("cil_from_container", &error).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    let p = &out.packet;
    assert_eq!(addrs(p).0, VIP, "from the frontend");
    assert_eq!(ipv4_checksum(&p[14..34]), 0);
    assert_eq!(ipv4_checksum(&p[34..]), 0, "ICMP checksum");
    let quoted = &p[42..];
    assert_eq!(&quoted[16..20], &VIP.octets(), "about the frontend");
    assert_eq!(&quoted[22..24], &80u16.to_be_bytes(), "and its port");
    assert_eq!(&quoted[12..16], &CLIENT.octets());
    assert_eq!(ipv4_checksum(&quoted[..20]), 0, "quoted header checksum");
}

#[test]
fn clusterip_flows_are_dnated_kept_on_their_backend_and_replies_come_from_the_frontend() {
    let sb = Sandbox::enter();
    let (mut obj, mut lb) = setup(&sb);
    service(
        &obj,
        &mut lb,
        &[
            (BACKEND_A, BackendState::Active),
            (BACKEND_B, BackendState::Active),
        ],
    );

    let out = obj.run("cil_from_container", &syn(40000)).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    let (src, dst, sport, dport) = addrs(&out.packet);
    assert_eq!((src, sport, dport), (CLIENT, 40000, 8080));
    assert!(dst == BACKEND_A || dst == BACKEND_B, "{dst}");
    assert_eq!(ipv4_checksum(&out.packet[14..34]), 0);
    assert_eq!(l4_checksum(&out.packet), 0, "TCP checksum follows the DNAT");

    // Later packets of the flow go to the same backend.
    for _ in 0..8 {
        let ack = with_l4_checksum(ipv4(CLIENT, VIP, 6, &tcp(40000, 80, 0x10)));
        let again = obj.run("cil_from_container", &ack).unwrap();
        assert_eq!(addrs(&again.packet).1, dst);
    }

    // The backend's reply reaches the client from the frontend.
    let reply = with_l4_checksum(ipv4(dst, CLIENT, 6, &tcp(8080, 40000, 0x12)));
    let back = obj.run("cil_from_container", &reply).unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT);
    assert_eq!(addrs(&back.packet), (VIP, CLIENT, 80, 40000));
    assert_eq!(ipv4_checksum(&back.packet[14..34]), 0);
    assert_eq!(l4_checksum(&back.packet), 0);

    // Both backends get flows.
    let mut seen = std::collections::BTreeSet::new();
    for sport in 41000..41064 {
        seen.insert(addrs(&obj.run("cil_from_container", &syn(sport)).unwrap().packet).1);
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
}

#[test]
fn a_removed_backend_keeps_its_flow_but_gets_no_new_one() {
    let sb = Sandbox::enter();
    let (mut obj, mut lb) = setup(&sb);
    service(&obj, &mut lb, &[(BACKEND_A, BackendState::Active)]);
    let first = obj.run("cil_from_container", &syn(40000)).unwrap();
    assert_eq!(addrs(&first.packet).1, BACKEND_A);

    service(&obj, &mut lb, &[(BACKEND_B, BackendState::Active)]);
    let ack = with_l4_checksum(ipv4(CLIENT, VIP, 6, &tcp(40000, 80, 0x10)));
    assert_eq!(
        addrs(&obj.run("cil_from_container", &ack).unwrap().packet).1,
        BACKEND_A
    );
    for sport in 42000..42016 {
        assert_eq!(
            addrs(&obj.run("cil_from_container", &syn(sport)).unwrap().packet).1,
            BACKEND_B
        );
    }
}

#[test]
fn a_service_without_backends_drops_with_a_reason() {
    let sb = Sandbox::enter();
    let (mut obj, mut lb) = setup(&sb);
    service(&obj, &mut lb, &[]);
    // A SYN is answered with a RST from the frontend, so connect() fails at once.
    let out = obj.run("cil_from_container", &syn(40000)).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(out.packet.len(), 14 + 40);
    assert_eq!(addrs(&out.packet), (VIP, CLIENT, 80, 40000));
    assert_eq!(out.packet[14 + 20 + 13], 0x14, "RST|ACK");
    assert_eq!(
        &out.packet[14 + 28..14 + 32],
        &2u32.to_be_bytes(),
        "acks the SYN (seq 1)"
    );
    assert_eq!(ipv4_checksum(&out.packet[14..34]), 0);
    assert_eq!(l4_checksum(&out.packet), 0);
    assert_eq!(metric(&obj, abi::drop::DROP_NO_SERVICE, DIR_EGRESS).0, 1);
    // Anything else is dropped.
    let udp_pkt = ipv4(CLIENT, VIP, 17, &udp(5000, 80));
    assert_eq!(
        obj.run("cil_from_container", &udp_pkt).unwrap().retval,
        TC_ACT_SHOT
    );
}

#[test]
fn a_direct_flow_on_the_tuple_of_a_balanced_one_is_not_reverse_translated() {
    let sb = Sandbox::enter();
    let (mut obj, mut lb) = setup(&sb);
    service(&obj, &mut lb, &[(BACKEND_A, BackendState::Active)]);
    obj.run("cil_from_container", &syn(40000)).unwrap();
    let fin = with_l4_checksum(ipv4(CLIENT, VIP, 6, &tcp(40000, 80, 0x11)));
    obj.run("cil_from_container", &fin).unwrap();
    let fin_back = with_l4_checksum(ipv4(BACKEND_A, CLIENT, 6, &tcp(8080, 40000, 0x11)));
    obj.run("cil_from_container", &fin_back).unwrap();

    // The client reuses its port to reach the backend directly.
    let direct = with_l4_checksum(ipv4(CLIENT, BACKEND_A, 6, &tcp(40000, 8080, 0x02)));
    assert_eq!(
        addrs(&obj.run("cil_from_container", &direct).unwrap().packet).1,
        BACKEND_A
    );
    let reply = with_l4_checksum(ipv4(BACKEND_A, CLIENT, 6, &tcp(8080, 40000, 0x12)));
    let back = obj.run("cil_from_container", &reply).unwrap();
    assert_eq!(addrs(&back.packet), (BACKEND_A, CLIENT, 8080, 40000));
}

#[test]
fn a_pod_reaching_itself_through_a_service_is_hairpinned() {
    let sb = Sandbox::enter();
    let (mut obj, mut lb) = setup(&sb);
    service(&obj, &mut lb, &[(CLIENT, BackendState::Active)]);
    let loopback = Ipv4Addr::new(169, 254, 42, 1);
    let out = obj.run("cil_from_container", &syn(40000)).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(addrs(&out.packet), (loopback, CLIENT, 40000, 8080));
    assert_eq!(l4_checksum(&out.packet), 0);
    let reply = with_l4_checksum(ipv4(CLIENT, loopback, 6, &tcp(8080, 40000, 0x12)));
    let back = obj.run("cil_from_container", &reply).unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT);
    assert_eq!(addrs(&back.packet), (VIP, CLIENT, 80, 40000));
    assert_eq!(ipv4_checksum(&back.packet[14..34]), 0);
    assert_eq!(l4_checksum(&back.packet), 0);
}

#[test]
fn session_affinity_keeps_a_client_on_one_backend() {
    let sb = Sandbox::enter();
    let (mut obj, mut lb) = setup(&sb);
    let spec = ServiceSpec {
        id: 6,
        frontend: Frontend {
            ip: VIP.into(),
            port: 80,
            proto: abi::lb::PROTO_ANY,
            scope: abi::lb::LB_LOOKUP_SCOPE_EXT,
        },
        kind: ServiceType::ClusterIP,
        backends: vec![
            (BACKEND_A.into(), 8080, BackendState::Active),
            (BACKEND_B.into(), 8080, BackendState::Active),
        ],
        affinity_timeout: 60,
        ext_local: false,
        loopback: false,
    };
    let (up, _) = lb.upsert(&spec).unwrap();
    datapath::lbmap::apply(obj.pin_dir(), &up).unwrap();
    let first = addrs(&obj.run("cil_from_container", &syn(43000)).unwrap().packet).1;
    for sport in 43001..43032 {
        let next = addrs(&obj.run("cil_from_container", &syn(sport)).unwrap().packet).1;
        assert_eq!(
            next, first,
            "every new connection of the client goes to {first}"
        );
    }
}
