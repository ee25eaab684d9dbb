//! NodePort for IPv6 on crafted packets (the dual-stack bpf_host and
//! bpf_lxc): a connection to a node address and NodePort is DNATed to its
//! backend, SNATed to the node address when the backend is elsewhere and
//! not when it is local, and the backend's reply (through cil_from_netdev,
//! or cil_from_container for a local one) leaves as one from the node's
//! NodePort; masquerading's reverse path does not take NodePort entries.

mod common;

use abi::ct::Ipv6CtTuple;
use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::lb::{Ipv6NatEntry, NAT6_F_LOCAL, NAT6_F_NODEPORT, NAT_DIR_EGRESS, NAT_DIR_INGRESS};
use abi::Be16;
use common::*;
use datapath::objects::{BPF_HOST_V6, BPF_LXC_V6};
use datapath::testrun::TestObject;
use lb::{BackendState, Frontend, LoadBalancer, ServiceSpec, ServiceType};
use std::net::Ipv6Addr;
use testsupport::Sandbox;

const NODE: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x198, 0x18, 0, 0, 0, 0, 0x11);
const CLIENT: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x198, 0x18, 0, 0, 0, 0, 0x50);
const BACKEND: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x6);
/// A backend on another node (no tunnel: the stack routes it).
const REMOTE_BACKEND: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0, 2, 0, 0, 0, 0x6);
const WIRE: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 9, 1], [2, 0, 0, 0, 9, 2]);
const BACKEND_MACS: ([u8; 6], [u8; 6]) = ([2, 0, 0, 0, 0, 6], [2, 0, 0, 0, 1, 6]);

/// NodePort 30080 on every node address ([::]), to `backend` port 8080.
fn nodeport(backend: Ipv6Addr) -> ServiceSpec {
    ServiceSpec {
        id: 9,
        frontend: Frontend {
            ip: Ipv6Addr::UNSPECIFIED.into(),
            port: 30080,
            proto: abi::lb::PROTO_ANY,
            scope: abi::lb::LB_LOOKUP_SCOPE_EXT,
        },
        kind: ServiceType::NodePort,
        backends: vec![(backend.into(), 8080, BackendState::Active)],
        affinity_timeout: 0,
        ext_local: false,
        loopback: false,
    }
}

/// The dual-stack bpf_host of a node at NODE with BACKEND as its pod, and
/// NodePort 30080 to `backend`.
fn node_with_backend(sb: &Sandbox, backend: Ipv6Addr) -> TestObject {
    let obj = load(sb, BPF_HOST_V6);
    obj.map(abi::maps::LXC)
        .unwrap()
        .put(&EndpointKey::new(NODE.into()), &EndpointInfo::host())
        .unwrap();
    add_endpoint(
        &obj,
        BACKEND,
        EndpointInfo::pod(TEST_IFINDEX, 12, BACKEND_MACS.0, BACKEND_MACS.1, 1000),
    );
    let config = obj.open::<datapath::maps::RuntimeConfig>().unwrap();
    config.set_native_ifindex(TEST_IFINDEX).unwrap();
    config.set_node_ipv6(Some(NODE)).unwrap();
    let (up, _) = LoadBalancer::new().upsert(&nodeport(backend)).unwrap();
    datapath::lbmap::apply(obj.pin_dir(), &up).unwrap();
    obj
}

fn tcp_packet(
    macs: ([u8; 6], [u8; 6]),
    src: Ipv6Addr,
    dst: Ipv6Addr,
    ports: (u16, u16),
    flags: u8,
) -> Vec<u8> {
    with_l6_checksum(ipv6(macs, src, dst, (6, 64), &tcp(ports.0, ports.1, flags)))
}

fn nat(
    obj: &TestObject,
    saddr: Ipv6Addr,
    daddr: Ipv6Addr,
    ports: (u16, u16),
    dir: u8,
) -> Option<Ipv6NatEntry> {
    let key = Ipv6CtTuple {
        saddr: saddr.into(),
        daddr: daddr.into(),
        sport: Be16::new(ports.0),
        dport: Be16::new(ports.1),
        nexthdr: 6,
        flags: dir,
    };
    obj.map(abi::maps::SNAT6_EXTERNAL)
        .unwrap()
        .get(&key)
        .unwrap()
}

#[test]
fn a_remote_backend_sees_the_node_and_its_reply_goes_back_to_the_client() {
    let sb = Sandbox::enter();
    let mut obj = node_with_backend(&sb, REMOTE_BACKEND);

    let syn = tcp_packet(WIRE, CLIENT, NODE, (45000, 30080), 0x02);
    let out = obj.run("cil_from_netdev", &syn).unwrap();
    assert_eq!(out.retval, TC_ACT_OK, "routed by the stack");
    assert_eq!(
        addrs6(&out.packet),
        (NODE, REMOTE_BACKEND, 45000, 8080),
        "SNATed, the client's port kept when free"
    );
    assert_eq!(l6_checksum(&out.packet), 0);
    let fwd = nat(&obj, CLIENT, NODE, (45000, 30080), NAT_DIR_EGRESS).expect("egress entry");
    assert_eq!(
        (fwd.to_addr.ip(), fwd.to_port.get(), fwd.flags),
        (REMOTE_BACKEND, 8080, NAT6_F_NODEPORT)
    );
    let rev =
        nat(&obj, REMOTE_BACKEND, NODE, (8080, 45000), NAT_DIR_INGRESS).expect("ingress entry");
    assert_eq!(
        (rev.to_addr.ip(), rev.to_port.get(), rev.rev_port.get()),
        (CLIENT, 45000, 30080)
    );

    // the flow's next packet is translated alike
    let ack = tcp_packet(WIRE, CLIENT, NODE, (45000, 30080), 0x10);
    assert_eq!(
        addrs6(&obj.run("cil_from_netdev", &ack).unwrap().packet),
        (NODE, REMOTE_BACKEND, 45000, 8080)
    );

    let reply = tcp_packet(WIRE, REMOTE_BACKEND, NODE, (8080, 45000), 0x12);
    let back = obj.run("cil_from_netdev", &reply).unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT, "out of the native device");
    assert_eq!(addrs6(&back.packet), (NODE, CLIENT, 30080, 45000));
    assert_eq!(l6_checksum(&back.packet), 0);
}

#[test]
fn a_local_backend_sees_the_client_and_its_reply_leaves_from_the_nodeport() {
    let sb = Sandbox::enter();
    let mut host = node_with_backend(&sb, BACKEND);

    let syn = tcp_packet(WIRE, CLIENT, NODE, (45000, 30080), 0x02);
    let out = host.run("cil_from_netdev", &syn).unwrap();
    assert_eq!(
        out.retval, TC_ACT_REDIRECT,
        "delivered to the local backend"
    );
    assert_eq!(addrs6(&out.packet), (CLIENT, BACKEND, 45000, 8080));
    assert_eq!(l6_checksum(&out.packet), 0);
    let rev = nat(&host, BACKEND, CLIENT, (8080, 45000), NAT_DIR_INGRESS).expect("ingress entry");
    assert_eq!(rev.flags, NAT6_F_NODEPORT | NAT6_F_LOCAL);

    // the backend's reply, leaving its pod: from the NodePort again
    let mut lxc = load(&sb, BPF_LXC_V6);
    lxc.open::<datapath::maps::RuntimeConfig>()
        .unwrap()
        .set_router_ipv6(Some(Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 1)))
        .unwrap();
    let macs = (BACKEND_MACS.0, BACKEND_MACS.1);
    let reply = tcp_packet(macs, BACKEND, CLIENT, (8080, 45000), 0x12);
    let back = lxc.run("cil_from_container", &reply).unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT, "out of the native device");
    assert_eq!(addrs6(&back.packet), (NODE, CLIENT, 30080, 45000));
    assert_eq!(l6_checksum(&back.packet), 0);

    // the pod's own connections to the same client are not translated
    let own = tcp_packet(macs, BACKEND, CLIENT, (8080, 45001), 0x02);
    let out = lxc.run("cil_from_container", &own).unwrap();
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(addrs6(&out.packet), (BACKEND, CLIENT, 8080, 45001));
}

#[test]
fn masquerading_leaves_nodeport_replies_to_nodeport() {
    let sb = Sandbox::enter();
    let mut obj = node_with_backend(&sb, REMOTE_BACKEND);
    obj.open::<datapath::maps::RuntimeConfig>()
        .unwrap()
        .set_masquerade6(Some((
            NODE,
            (Ipv6Addr::new(0xfd00, 0x10, 0, 0, 0, 0, 0, 0), 32),
        )))
        .unwrap();
    let syn = tcp_packet(WIRE, CLIENT, NODE, (45000, 30080), 0x02);
    obj.run("cil_from_netdev", &syn).unwrap();
    let reply = tcp_packet(WIRE, REMOTE_BACKEND, NODE, (8080, 45000), 0x12);
    let back = obj.run("cil_from_netdev", &reply).unwrap();
    assert_eq!(addrs6(&back.packet), (NODE, CLIENT, 30080, 45000));
    // a packet to the node that no entry knows is the stack's
    let stray = tcp_packet(WIRE, CLIENT, NODE, (45000, 22), 0x02);
    let out = obj.run("cil_from_netdev", &stray).unwrap();
    assert_eq!((out.retval, out.packet), (TC_ACT_OK, stray));
}

#[test]
fn with_maglev_ipv6_nodeport_backends_come_from_the_service_table() {
    let sb = Sandbox::enter();
    let mut obj = node_with_backend(&sb, BACKEND);
    let other = Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 0x7);
    add_endpoint(
        &obj,
        other,
        EndpointInfo::pod(
            TEST_IFINDEX,
            13,
            [2, 0, 0, 0, 0, 7],
            [2, 0, 0, 0, 1, 7],
            1000,
        ),
    );
    let config = obj.open::<datapath::maps::RuntimeConfig>().unwrap();
    config
        .set_lb_algorithm(datapath::maps::LbAlgorithm::Maglev)
        .unwrap();
    config.set_maglev_seed6(0x1234_5678).unwrap();
    let mut spec = nodeport(BACKEND);
    spec.backends
        .push((other.into(), 8080, BackendState::Active));
    let mut lb = LoadBalancer::with_maglev(lb::MaglevConfig {
        table_size: abi::lb::LB_MAGLEV_LUT_SIZE as u64,
        seed: 0x24b7_ef82,
    });
    let (mut up, _) = lb.upsert(&spec).unwrap();
    assert_eq!(up.put_maglev.len(), 1);
    // every slot names the second backend: random selection would not
    let second = up
        .put_backends
        .iter()
        .find(|(_, b)| b.address().0 == std::net::IpAddr::from(other))
        .unwrap()
        .0;
    up.put_maglev[0].2.iter_mut().for_each(|id| *id = second);
    datapath::lbmap::apply(obj.pin_dir(), &up).unwrap();
    for sport in 46000..46024 {
        let syn = tcp_packet(WIRE, CLIENT, NODE, (sport, 30080), 0x02);
        let out = obj.run("cil_from_netdev", &syn).unwrap();
        assert_eq!(addrs6(&out.packet).1, other);
    }
}
