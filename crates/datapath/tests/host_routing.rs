//! BPF host routing on crafted packets. The sandbox's own FIB is what the
//! programs look up: a veth `hr0` on the node's underlay with a route to
//! another node's pods via its address (neighbour known) and one via an
//! address whose neighbour is not (the kernel resolves it), no default
//! route, and forwarding on. Packets run on the sandbox's loopback, as
//! if it were the pod's veth.

mod common;

use abi::metrics::{DIR_EGRESS, DIR_INGRESS};
use abi::runtime_config::{ENCAP_IFINDEX, HOST_ROUTING};
use common::*;
use datapath::objects::{BPF_HOST, BPF_LXC};
use datapath::testrun::TestObject;
use std::net::Ipv4Addr;
use std::process::Command;
use testsupport::Sandbox;

const LOCAL_POD: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const LOCAL_EP: u16 = 11;
const REMOTE_POD: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 7);
const REMOTE_ID: u32 = 1000;
const OTHER_ID: u32 = 1001;
/// A pod behind a node whose MAC the sandbox has not learnt.
const UNRESOLVED_POD: Ipv4Addr = Ipv4Addr::new(10, 3, 0, 7);
/// An address no route of the sandbox covers.
const NO_ROUTE: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 9);
const NODE_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 11);
const REMOTE_NODE: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 12);
const REMOTE_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x09, 0x09];

fn sh(args: &[&str]) {
    let status = Command::new(args[0]).args(&args[1..]).status().unwrap();
    assert!(status.success(), "{args:?} failed");
}

/// The sandbox's underlay and FIB; returns hr0's ifindex and MAC.
fn underlay() -> (u32, [u8; 6]) {
    sh(&[
        "ip", "link", "add", "hr0", "type", "veth", "peer", "name", "hr1",
    ]);
    sh(&["ip", "addr", "add", &format!("{NODE_IP}/24"), "dev", "hr0"]);
    sh(&["ip", "link", "set", "hr0", "up"]);
    sh(&["ip", "link", "set", "hr1", "up"]);
    sh(&[
        "ip",
        "route",
        "add",
        "10.2.0.0/24",
        "via",
        &REMOTE_NODE.to_string(),
    ]);
    sh(&["ip", "route", "add", "10.3.0.0/24", "via", "198.18.0.13"]);
    sh(&[
        "ip",
        "neigh",
        "replace",
        &REMOTE_NODE.to_string(),
        "lladdr",
        "02:00:00:00:09:09",
        "dev",
        "hr0",
        "nud",
        "permanent",
    ]);
    // the sandbox's own netns: its loopback forwards as a node's pod
    // veths do
    set_forwarding(true);
    // `5: hr0@hr1: <...> ... link/ether 02:...:09 brd ...` (the host's
    // /sys shows the host's devices, not the sandbox's)
    let out = Command::new("ip")
        .args(["-o", "link", "show", "hr0"])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    let ifindex = line.split(':').next().unwrap().trim().parse().unwrap();
    let mac = line
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .unwrap();
    (ifindex, parse_mac(mac))
}

fn set_forwarding(on: bool) {
    let v = if on { "1" } else { "0" };
    sh(&[
        "sysctl",
        "-qw",
        &format!("net.ipv4.conf.all.forwarding={v}"),
        &format!("net.ipv4.conf.lo.forwarding={v}"),
    ]);
}

fn parse_mac(s: &str) -> [u8; 6] {
    let mut mac = [0u8; 6];
    for (b, part) in mac.iter_mut().zip(s.split(':')) {
        *b = u8::from_str_radix(part, 16).unwrap();
    }
    mac
}

/// A node in native routing (no encap device) with host routing `on`: a
/// local pod, and the remote pods the ipcache knows.
fn node(sb: &Sandbox, object: datapath::objects::Object, on: bool) -> TestObject {
    let obj = load(sb, object);
    add_pod(&obj, LOCAL_POD, LOCAL_EP, 0xa, 2000);
    let rc = obj.map(abi::maps::RUNTIME_CONFIG).unwrap();
    rc.put(&ENCAP_IFINDEX, &0u64).unwrap();
    rc.put(&HOST_ROUTING, &u64::from(on)).unwrap();
    learn_remote(&obj, REMOTE_POD, REMOTE_ID, REMOTE_NODE);
    learn_remote(
        &obj,
        UNRESOLVED_POD,
        OTHER_ID,
        Ipv4Addr::new(198, 18, 0, 13),
    );
    obj
}

/// Runs `pkt` through `program`: it must be left, untouched, to the stack.
fn assert_to_stack(obj: &mut TestObject, program: &str, pkt: &[u8], why: &str) {
    let out = obj.run(program, pkt).unwrap();
    assert_eq!(out.retval, TC_ACT_OK, "{why}");
    assert_eq!(out.packet, pkt, "{why}: untouched");
}

fn ttl(pkt: &[u8]) -> u8 {
    pkt[14 + 8]
}

#[test]
fn pod_traffic_leaves_by_the_fib_with_the_neighbours_macs() {
    let sb = Sandbox::enter();
    let (hr0, hr0_mac) = underlay();
    let mut obj = node(&sb, BPF_LXC, true);
    let pkt = ipv4(LOCAL_POD, REMOTE_POD, 6, &tcp(40000, 80, 0x02));
    let out = obj.run("cil_from_container", &pkt).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT, "redirected, not the stack's");
    assert_eq!(&out.packet[0..6], &REMOTE_MAC, "to the next hop's MAC");
    assert_eq!(&out.packet[6..12], &hr0_mac, "from the device's");
    assert_eq!(ttl(&out.packet), ttl(&pkt) - 1, "forwarded: one hop less");
    assert_eq!(
        ipv4_checksum(&out.packet[14..34]),
        0,
        "header checksum still right"
    );
    assert!(hr0 > 1);
    assert_eq!(metric(&obj, 0, DIR_EGRESS).0, 1, "forwarded");
}

#[test]
fn an_unknown_neighbour_is_left_to_the_kernel_to_resolve() {
    let sb = Sandbox::enter();
    underlay();
    let mut obj = node(&sb, BPF_LXC, true);
    let pkt = ipv4(LOCAL_POD, UNRESOLVED_POD, 17, &udp(1000, 53));
    let out = obj.run("cil_from_container", &pkt).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT, "bpf_redirect_neigh");
    assert_eq!(
        &out.packet[0..12],
        &pkt[0..12],
        "MACs are the kernel's to write"
    );
    assert_eq!(ttl(&out.packet), ttl(&pkt) - 1);
}

#[test]
fn what_the_fib_cannot_route_falls_back_to_the_stack() {
    let sb = Sandbox::enter();
    underlay();
    let mut obj = node(&sb, BPF_LXC, true);
    let pkt = ipv4(LOCAL_POD, NO_ROUTE, 6, &tcp(40000, 80, 0x02));
    assert_to_stack(
        &mut obj,
        "cil_from_container",
        &pkt,
        "no route: the stack answers it",
    );

    // forwarding off on the pod's device: the FIB refuses, the stack
    // decides
    set_forwarding(false);
    let pkt = ipv4(LOCAL_POD, REMOTE_POD, 6, &tcp(40001, 80, 0x02));
    assert_to_stack(&mut obj, "cil_from_container", &pkt, "the stack's");
    assert_eq!(metric(&obj, 0, DIR_EGRESS).0, 2, "both forwarded");
}

#[test]
fn the_last_hop_of_a_ttl_is_the_stacks_to_answer() {
    let sb = Sandbox::enter();
    underlay();
    let mut obj = node(&sb, BPF_LXC, true);
    let mut pkt = ipv4(LOCAL_POD, REMOTE_POD, 17, &udp(33434, 33434));
    pkt[14 + 8] = 1;
    pkt[24..26].copy_from_slice(&[0, 0]);
    let csum = ipv4_checksum(&pkt[14..34]);
    pkt[24..26].copy_from_slice(&csum.to_be_bytes());
    assert_to_stack(
        &mut obj,
        "cil_from_container",
        &pkt,
        "the stack sends time exceeded",
    );
}

#[test]
fn legacy_host_routing_leaves_it_to_the_stack() {
    let sb = Sandbox::enter();
    underlay();
    let mut obj = node(&sb, BPF_LXC, false);
    let pkt = ipv4(LOCAL_POD, REMOTE_POD, 6, &tcp(40000, 80, 0x02));
    assert_to_stack(&mut obj, "cil_from_container", &pkt, "the stack's");
}

#[test]
fn the_node_itself_is_reached_through_the_stack() {
    let sb = Sandbox::enter();
    underlay();
    let mut obj = node(&sb, BPF_LXC, true);
    // the node's address as the agent writes it: identity host
    let host = abi::ipcache::RemoteEndpointInfo {
        sec_identity: 1,
        ..Default::default()
    };
    obj.map(abi::maps::IPCACHE)
        .unwrap()
        .put(&abi::ipcache::IpcacheKey::v4(REMOTE_NODE, 32), &host)
        .unwrap();
    let pkt = ipv4(LOCAL_POD, REMOTE_NODE, 6, &tcp(40000, 10250, 0x02));
    assert_to_stack(&mut obj, "cil_from_container", &pkt, "the stack's");
}

#[test]
fn from_the_native_device_a_local_pod_is_entered_directly_through_its_policy() {
    let sb = Sandbox::enter();
    underlay();
    let mut obj = node(&sb, BPF_HOST, true);
    set_policy(&obj, LOCAL_EP, &[(REMOTE_ID, false, 0, 0)], &[]);
    let allowed = ipv4(REMOTE_POD, LOCAL_POD, 6, &tcp(40000, 80, 0x02));
    let out = obj.run("cil_from_netdev", &allowed).unwrap();
    assert_eq!(out.retval, TC_ACT_REDIRECT, "into the pod (peer redirect)");
    assert_eq!(&out.packet[0..6], &[2, 0, 0, 0, 0, 0xa], "to the pod's MAC");
    assert_eq!(ttl(&out.packet), ttl(&allowed) - 1);
    let other = ipv4(UNRESOLVED_POD, LOCAL_POD, 6, &tcp(40001, 80, 0x02));
    assert_eq!(
        obj.run("cil_from_netdev", &other).unwrap().retval,
        TC_ACT_SHOT,
        "judged by the ipcache's identity"
    );
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY, DIR_INGRESS).0, 1);

    // not a local pod: the stack's
    let passing = ipv4(REMOTE_POD, NODE_IP, 6, &tcp(40002, 22, 0x02));
    assert_to_stack(&mut obj, "cil_from_netdev", &passing, "the stack's");
}

#[test]
fn without_host_routing_the_native_device_leaves_pods_traffic_to_the_stack() {
    let sb = Sandbox::enter();
    underlay();
    let mut obj = node(&sb, BPF_HOST, false);
    let pkt = ipv4(REMOTE_POD, LOCAL_POD, 6, &tcp(40000, 80, 0x02));
    assert_to_stack(&mut obj, "cil_from_netdev", &pkt, "the stack's");
}
