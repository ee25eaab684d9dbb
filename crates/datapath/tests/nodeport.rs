//! cil_from_netdev on crafted packets: a NodePort connection is DNATed to
//! its backend, SNATed to the node address when the backend is on another
//! node and not when it is local, both NAT entries exist, and the backend's
//! reply (through cil_from_netdev, or cil_from_container for a local one)
//! is turned back into one from the node's NodePort; the later fragments
//! of a datagram follow its first.

mod common;

use abi::ct::Ipv4CtTuple;
use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::lb::{Ipv4NatEntry, NAT_DIR_EGRESS, NAT_DIR_INGRESS};
use abi::metrics::DIR_INGRESS;
use abi::Be16;
use common::*;
use datapath::objects::{BPF_HOST, BPF_LXC};
use datapath::testrun::TestObject;
use lb::{BackendState, Frontend, LoadBalancer, ServiceSpec, ServiceType};
use std::net::Ipv4Addr;
use testsupport::Sandbox;

const NODE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 11);
const CLIENT: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 50);
const BACKEND: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 6);
/// A backend on another node (no tunnel: the stack routes it).
const REMOTE_BACKEND: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 6);

/// NodePort 30080 on every node address, to `backends` port 8080.
fn nodeport(backends: &[Ipv4Addr]) -> ServiceSpec {
    ServiceSpec {
        id: 9,
        frontend: Frontend {
            ip: Ipv4Addr::UNSPECIFIED.into(),
            port: 30080,
            proto: abi::lb::PROTO_ANY,
            scope: abi::lb::LB_LOOKUP_SCOPE_EXT,
        },
        kind: ServiceType::NodePort,
        backends: backends
            .iter()
            .map(|ip| ((*ip).into(), 8080, BackendState::Active))
            .collect(),
        affinity_timeout: 0,
        ext_local: false,
        loopback: false,
    }
}

/// bpf_host loaded for a node whose address is NODE.
fn node(sb: &Sandbox) -> TestObject {
    let obj = load(sb, BPF_HOST);
    obj.map(abi::maps::LXC)
        .unwrap()
        .put(&EndpointKey::v4(NODE), &EndpointInfo::host())
        .unwrap();
    obj
}

fn nat_key(saddr: Ipv4Addr, daddr: Ipv4Addr, sport: u16, dport: u16, dir: u8) -> Ipv4CtTuple {
    Ipv4CtTuple {
        saddr: saddr.into(),
        daddr: daddr.into(),
        sport: Be16::new(sport),
        dport: Be16::new(dport),
        nexthdr: 6,
        flags: dir,
    }
}

/// A node with NodePort 30080 to BACKEND, a pod of its own.
fn node_with_local_backend(sb: &Sandbox) -> TestObject {
    node_with_backend(sb, BACKEND)
}

/// A node with NodePort 30080 to `backend`, and BACKEND as a pod of its own.
fn node_with_backend(sb: &Sandbox, backend: Ipv4Addr) -> TestObject {
    let obj = node(sb);
    add_endpoint(
        &obj,
        BACKEND,
        EndpointInfo::pod(
            TEST_IFINDEX,
            12,
            [2, 0, 0, 0, 0, 6],
            [2, 0, 0, 0, 1, 6],
            1000,
        ),
    );
    obj.map(abi::maps::RUNTIME_CONFIG)
        .unwrap()
        .put(
            &abi::runtime_config::NATIVE_IFINDEX,
            &u64::from(TEST_IFINDEX),
        )
        .unwrap();
    let (up, _) = LoadBalancer::new().upsert(&nodeport(&[backend])).unwrap();
    datapath::lbmap::apply(obj.pin_dir(), &up).unwrap();
    obj
}

#[test]
fn a_fragmented_datagram_to_a_nodeport_is_translated_whole() {
    let sb = Sandbox::enter();
    let mut obj = node_with_local_backend(&sb);
    let (first, rest) = udp_fragments((CLIENT, 45000), (NODE, 30080), 33);
    let out = obj.run("cil_from_netdev", &first).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(addrs(&out.packet), (CLIENT, BACKEND, 45000, 8080));
    let out = obj.run("cil_from_netdev", &rest).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_rest_translated(&out.packet, CLIENT, BACKEND);
}

#[test]
fn a_remote_backend_sees_the_node_and_its_reply_goes_back_to_the_client() {
    let sb = Sandbox::enter();
    let mut obj = node_with_backend(&sb, REMOTE_BACKEND);

    let syn = with_l4_checksum(ipv4(CLIENT, NODE, 6, &tcp(45000, 30080, 0x02)));
    let out = obj.run("cil_from_netdev", &syn).unwrap();
    assert_eq!(out.retval, TC_ACT_OK, "routed by the stack");
    let (src, dst, sport, dport) = addrs(&out.packet);
    assert_eq!((src, dst, dport), (NODE, REMOTE_BACKEND, 8080));
    assert_eq!(sport, 45000, "the client's port is kept when free");
    assert_eq!(ipv4_checksum(&out.packet[14..34]), 0);
    assert_eq!(l4_checksum(&out.packet), 0);

    let nat = obj.map(abi::maps::SNAT4_EXTERNAL).unwrap();
    let fwd: Ipv4NatEntry = nat
        .get(&nat_key(CLIENT, NODE, 45000, 30080, NAT_DIR_EGRESS))
        .unwrap()
        .expect("egress entry");
    assert_eq!(
        (fwd.from_addr.ip(), fwd.to_addr.ip(), fwd.to_port.get()),
        (NODE, REMOTE_BACKEND, 8080)
    );
    // NAT GC goes by the last packet's time
    let now = u64::from(datapath::ctmap::now_secs());
    assert!(fwd.last_used + 1 >= now && fwd.last_used <= now, "{fwd:?}");
    let rev: Ipv4NatEntry = nat
        .get(&nat_key(REMOTE_BACKEND, NODE, 8080, 45000, NAT_DIR_INGRESS))
        .unwrap()
        .expect("ingress entry");
    assert_eq!(
        (rev.to_addr.ip(), rev.to_port.get(), rev.rev_port.get()),
        (CLIENT, 45000, 30080)
    );

    let reply = with_l4_checksum(ipv4(REMOTE_BACKEND, NODE, 6, &tcp(8080, 45000, 0x12)));
    let back = obj.run("cil_from_netdev", &reply).unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT);
    assert_eq!(addrs(&back.packet), (NODE, CLIENT, 30080, 45000));
    assert_eq!(l4_checksum(&back.packet), 0);

    // Not a NodePort: the stack's.
    let other = ipv4(CLIENT, NODE, 17, &udp(1, 53));
    assert_eq!(
        obj.run("cil_from_netdev", &other).unwrap().retval,
        TC_ACT_OK
    );
}

#[test]
fn a_local_backend_sees_the_client_and_its_reply_leaves_from_the_nodeport() {
    let sb = Sandbox::enter();
    let mut host = node_with_local_backend(&sb);

    let syn = with_l4_checksum(ipv4(CLIENT, NODE, 6, &tcp(45000, 30080, 0x02)));
    let out = host.run("cil_from_netdev", &syn).unwrap();
    assert_eq!(
        out.retval, TC_ACT_REDIRECT,
        "delivered to the local backend"
    );
    assert_eq!(addrs(&out.packet), (CLIENT, BACKEND, 45000, 8080));
    assert_eq!(l4_checksum(&out.packet), 0);
    assert_eq!(metric(&host, 0, DIR_INGRESS).0, 1);

    // the backend's reply, leaving its pod: from the NodePort again
    let mut lxc = load(&sb, BPF_LXC);
    let reply = with_l4_checksum(ipv4(BACKEND, CLIENT, 6, &tcp(8080, 45000, 0x12)));
    let back = lxc.run("cil_from_container", &reply).unwrap();
    assert_eq!(back.retval, TC_ACT_REDIRECT, "out of the native device");
    assert_eq!(addrs(&back.packet), (NODE, CLIENT, 30080, 45000));
    assert_eq!(l4_checksum(&back.packet), 0);

    // the pod's own connections to the same client are not translated
    let own = with_l4_checksum(ipv4(BACKEND, CLIENT, 6, &tcp(8080, 45001, 0x02)));
    let out = lxc.run("cil_from_container", &own).unwrap();
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(addrs(&out.packet), (BACKEND, CLIENT, 8080, 45001));
}

#[test]
fn with_maglev_nodeport_backends_come_from_the_service_table() {
    let sb = Sandbox::enter();
    let mut obj = node(&sb);
    let other = Ipv4Addr::new(10, 0, 0, 7);
    for (ip, id) in [(BACKEND, 12), (other, 13)] {
        let mac = [2, 0, 0, 0, 0, id as u8];
        add_endpoint(
            &obj,
            ip,
            EndpointInfo::pod(TEST_IFINDEX, id, mac, mac, 1000),
        );
    }
    let config = obj.map(abi::maps::RUNTIME_CONFIG).unwrap();
    config
        .put(
            &abi::runtime_config::LB_ALGORITHM,
            &abi::runtime_config::LB_ALGORITHM_MAGLEV,
        )
        .unwrap();
    let spec = nodeport(&[BACKEND, other]);
    let mut lb = LoadBalancer::with_maglev(lb::MaglevConfig {
        table_size: abi::lb::LB_MAGLEV_LUT_SIZE as u64,
        seed: 0x24b7_ef82,
    });
    let (mut up, _) = lb.upsert(&spec).unwrap();
    assert_eq!(up.put_maglev.len(), 1);
    // Every slot names the second backend: random selection would not.
    let second = up
        .put_backends
        .iter()
        .find(|(_, b)| b.address().0 == other)
        .unwrap()
        .0;
    up.put_maglev[0].2.iter_mut().for_each(|id| *id = second);
    datapath::lbmap::apply(obj.pin_dir(), &up).unwrap();
    for sport in 46000..46024 {
        let syn = with_l4_checksum(ipv4(CLIENT, NODE, 6, &tcp(sport, 30080, 0x02)));
        let out = obj.run("cil_from_netdev", &syn).unwrap();
        assert_eq!(addrs(&out.packet).1, other);
    }
}
