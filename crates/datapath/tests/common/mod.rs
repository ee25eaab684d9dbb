//! Packet builders and map helpers shared by the datapath tests.
#![allow(dead_code)]

use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::metrics::{MetricsKey, MetricsValue};
use datapath::testrun::TestObject;
use std::net::{IpAddr, Ipv4Addr};
use testsupport::Sandbox;

pub const TC_ACT_OK: u32 = 0;
pub const TC_ACT_SHOT: u32 = 2;
pub const TC_ACT_REDIRECT: u32 = 7;
/// BPF_PROG_TEST_RUN runs packets on the sandbox's loopback device.
pub const TEST_IFINDEX: u32 = 1;

pub fn frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(14 + payload.len());
    p.extend_from_slice(&dst);
    p.extend_from_slice(&src);
    p.extend_from_slice(&ethertype.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in hdr.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 packet (in an Ethernet frame) with a valid header checksum.
pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, l4: &[u8]) -> Vec<u8> {
    let total = (20 + l4.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let csum = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    ip.extend_from_slice(l4);
    frame(
        [0x02, 0, 0, 0, 0, 0xaa],
        [0x02, 0, 0, 0, 0, 0x01],
        0x0800,
        &ip,
    )
}

/// A fragment of IP datagram `id`: `offset` in 8-byte units, `more` sets
/// MF; `payload` is what this fragment carries (an L4 header only in the
/// first).
pub fn fragment(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    id: u16,
    offset: u16,
    more: bool,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = ipv4(src, dst, proto, payload);
    f[18..20].copy_from_slice(&id.to_be_bytes());
    let frag = offset | if more { 0x2000 } else { 0 };
    f[20..22].copy_from_slice(&frag.to_be_bytes());
    f[24..26].copy_from_slice(&[0, 0]);
    let csum = ipv4_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&csum.to_be_bytes());
    f
}

/// ICMP port unreachable from `from` to `to` about `datagram` (a frame): it
/// quotes the datagram's IP header and first 8 bytes, and has a valid
/// checksum.
pub fn port_unreachable(from: Ipv4Addr, to: Ipv4Addr, datagram: &[u8]) -> Vec<u8> {
    let mut icmp = vec![3, 3, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&datagram[14..14 + 28]);
    let csum = ipv4_checksum(&icmp);
    icmp[2..4].copy_from_slice(&csum.to_be_bytes());
    ipv4(from, to, 1, &icmp)
}

/// The last 8 bytes of a `udp_fragments` datagram: read as a UDP header,
/// they would name port 9999 to 9999.
pub const FRAGMENT_REST: [u8; 8] = [0x27, 0x0f, 0x27, 0x0f, 1, 2, 3, 4];

/// UDP datagram `id` from src:sport to dst:dport in two fragments: the
/// first with the UDP header and 16 bytes, then (at byte 24) FRAGMENT_REST.
pub fn udp_fragments(
    (src, sport): (Ipv4Addr, u16),
    (dst, dport): (Ipv4Addr, u16),
    id: u16,
) -> (Vec<u8>, Vec<u8>) {
    let first = [udp(sport, dport), vec![0xab; 16]].concat();
    (
        fragment(src, dst, 17, id, 0, true, &first),
        fragment(src, dst, 17, id, 3, false, &FRAGMENT_REST),
    )
}

/// A later fragment after translation: addresses as given, the payload
/// untouched (it has no L4 header), the IP checksum right.
pub fn assert_rest_translated(frame: &[u8], src: Ipv4Addr, dst: Ipv4Addr) {
    let (s, d, _, _) = addrs(frame);
    assert_eq!((s, d), (src, dst));
    assert_eq!(&frame[34..], &FRAGMENT_REST, "no L4 header to rewrite");
    assert_eq!(ipv4_checksum(&frame[14..34]), 0);
}

pub fn tcp(sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    t
}

pub fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&[0, 8, 0, 0]);
    u
}

/// A test node's map sizes: small CT maps (and so, as in Cilium, a NAT map
/// of 2/3 their size).
fn sizes() -> Vec<(&'static str, u32)> {
    datapath::MapSizes {
        ct_tcp: 1024,
        ct_any: 1024,
        ..Default::default()
    }
    .overrides()
    .to_vec()
}

pub fn load(sb: &Sandbox, obj: datapath::objects::Object) -> TestObject {
    let pins = sb.bpffs().join("tc/globals");
    TestObject::load(obj, &pins, &sizes()).expect("load BPF object")
}

/// A pod on this node: endpoint `id`, MACs ending in `n`, identity `identity`.
pub fn add_pod(obj: &TestObject, ip: Ipv4Addr, id: u16, n: u8, identity: u32) {
    add_endpoint(
        obj,
        ip,
        EndpointInfo::pod(
            TEST_IFINDEX,
            id,
            [2, 0, 0, 0, 0, n],
            [2, 0, 0, 0, 1, n],
            identity,
        ),
    );
}

/// Puts an endpoint's ingress program, of `obj`'s build (IPv4 only or dual
/// stack), into its cilium_call_policy slot (the slot keeps the program
/// when this object goes).
pub fn install_ingress(obj: &TestObject, endpoint_id: u16) {
    use datapath::loader::{install_tail_call, load_classifier, load_object, LXC_POLICY};
    let v6 = obj.object().name.ends_with("_v6.o");
    let lxc = datapath::objects::Family::of(v6).lxc;
    let mut lxc = load_object(lxc, obj.pin_dir(), &sizes()).expect("load bpf_lxc");
    let prog =
        load_classifier(&mut lxc, "bpf_lxc.o", LXC_POLICY).expect("load the ingress program");
    install_tail_call(obj.pin_dir(), prog, endpoint_id).expect("fill cilium_call_policy");
}

/// An address the ipcache knows: its identity and the node it is behind.
pub fn learn_remote(obj: &TestObject, ip: impl Into<IpAddr>, identity: u32, node: Ipv4Addr) {
    let info = abi::ipcache::RemoteEndpointInfo {
        sec_identity: identity,
        tunnel_endpoint: node.into(),
        ..Default::default()
    };
    let ip = ip.into();
    let key = abi::ipcache::IpcacheKey::new(ip, abi::ipcache::host_prefix_len(ip));
    obj.map(abi::maps::IPCACHE)
        .expect("open cilium_ipcache")
        .put(&key, &info)
        .expect("insert ipcache entry");
}

/// Adds an endpoint (of either family) whose policy allows everything
/// both ways.
pub fn add_endpoint(obj: &TestObject, ip: impl Into<IpAddr>, info: EndpointInfo) {
    obj.map(abi::maps::LXC)
        .expect("open cilium_lxc")
        .put(&EndpointKey::new(ip.into()), &info)
        .expect("insert endpoint");
    set_policy(obj, info.lxc_id, &[(0, false, 0, 0), (0, true, 0, 0)], &[]);
    install_ingress(obj, info.lxc_id);
}

/// Sets an endpoint's policy: allow and deny entries as (identity,
/// egress, protocol, port); port 0 is every port.
pub fn set_policy(
    obj: &TestObject,
    endpoint_id: u16,
    allow: &[(u32, bool, u8, u16)],
    deny: &[(u32, bool, u8, u16)],
) {
    let key = |(id, egress, proto, port): &(u32, bool, u8, u16)| {
        policy::Key::new(*id, *egress, *proto, *port, if *port == 0 { 0 } else { 16 })
    };
    let allows: Vec<_> = allow.iter().map(key).collect();
    let denies: Vec<_> = deny.iter().map(key).collect();
    let state = policy::MapState::build(&allows, &denies);
    datapath::policymap::PolicyMap::open(obj.pin_dir(), endpoint_id)
        .expect("policy map")
        .sync(&state.to_abi())
        .expect("write policy");
}

/// Sum over CPUs of the metrics entries with this reason and direction.
pub fn metric(obj: &TestObject, reason: u8, dir: u8) -> (u64, Option<MetricsKey>) {
    let map = obj.map(abi::maps::METRICS).expect("open cilium_metrics");
    let entries = map
        .percpu_entries::<MetricsKey, MetricsValue>()
        .expect("list metrics");
    let mut total = 0;
    let mut found = None;
    for (key, per_cpu) in entries {
        if key.reason == reason && key.dir == dir {
            total += per_cpu.iter().map(|v| v.count).sum::<u64>();
            found = Some(key);
        }
    }
    (total, found)
}

/// The TCP or UDP checksum of an Ethernet + IPv4 frame, computed over the
/// pseudo header; 0 when the stored one is right.
pub fn l4_checksum(frame: &[u8]) -> u16 {
    let ip = &frame[14..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let l4 = &ip[ihl..];
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&ip[12..20]);
    pseudo.extend_from_slice(&[0, ip[9]]);
    pseudo.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(l4);
    if pseudo.len() % 2 == 1 {
        pseudo.push(0);
    }
    ipv4_checksum(&pseudo)
}

/// Stores a valid TCP (or UDP) checksum in the frame.
pub fn with_l4_checksum(mut frame: Vec<u8>) -> Vec<u8> {
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let off = 14 + ihl + if frame[14 + 9] == 6 { 16 } else { 6 };
    frame[off..off + 2].copy_from_slice(&[0, 0]);
    let sum = l4_checksum(&frame);
    frame[off..off + 2].copy_from_slice(&sum.to_be_bytes());
    frame
}

/// Addresses of a frame: (source, destination, source port, destination port).
pub fn addrs(frame: &[u8]) -> (Ipv4Addr, Ipv4Addr, u16, u16) {
    let ip = &frame[14..];
    let l4 = &ip[usize::from(ip[0] & 0x0f) * 4..];
    (
        Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
        Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
        u16::from_be_bytes([l4[0], l4[1]]),
        u16::from_be_bytes([l4[2], l4[3]]),
    )
}

/// The ones' complement sum of `bytes` as 16-bit words, folded.
fn sum16(bytes: &[u8], mut sum: u32) -> u32 {
    for c in bytes.chunks(2) {
        sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum
}

/// The checksum of an upper-layer message `msg` of protocol `proto` over
/// IPv6's pseudo header (its own checksum field zero, or as stored: then
/// 0 means right) between `src` and `dst`.
pub fn ipv6_upper_checksum(
    src: std::net::Ipv6Addr,
    dst: std::net::Ipv6Addr,
    proto: u8,
    msg: &[u8],
) -> u16 {
    let mut pseudo = Vec::with_capacity(40);
    pseudo.extend_from_slice(&src.octets());
    pseudo.extend_from_slice(&dst.octets());
    pseudo.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    pseudo.extend_from_slice(&[0, 0, 0, proto]);
    !(sum16(msg, sum16(&pseudo, 0)) as u16)
}

/// The ICMPv6 checksum of `msg` between `src` and `dst`.
pub fn icmp6_checksum(src: std::net::Ipv6Addr, dst: std::net::Ipv6Addr, msg: &[u8]) -> u16 {
    ipv6_upper_checksum(src, dst, 58, msg)
}

/// Addresses and ports of an Ethernet + IPv6 frame without extension
/// headers: (source, destination, source port, destination port).
pub fn addrs6(frame: &[u8]) -> (std::net::Ipv6Addr, std::net::Ipv6Addr, u16, u16) {
    let ip = &frame[14..];
    let addr =
        |at: usize| std::net::Ipv6Addr::from(<[u8; 16]>::try_from(&ip[at..at + 16]).unwrap());
    (
        addr(8),
        addr(24),
        u16::from_be_bytes([ip[40], ip[41]]),
        u16::from_be_bytes([ip[42], ip[43]]),
    )
}

/// The upper-layer checksum of an Ethernet + IPv6 frame without extension
/// headers, as stored: 0 when it is right.
pub fn l6_checksum(frame: &[u8]) -> u16 {
    let (src, dst, _, _) = addrs6(frame);
    ipv6_upper_checksum(src, dst, frame[14 + 6], &frame[54..])
}

/// Stores a valid TCP or UDP checksum in an IPv6 frame without extension
/// headers.
pub fn with_l6_checksum(mut frame: Vec<u8>) -> Vec<u8> {
    let off = 54 + if frame[14 + 6] == 6 { 16 } else { 6 };
    frame[off..off + 2].copy_from_slice(&[0, 0]);
    let sum = l6_checksum(&frame);
    frame[off..off + 2].copy_from_slice(&sum.to_be_bytes());
    frame
}

/// An IPv6 packet in an Ethernet frame from `src_mac` to `dst_mac`.
pub fn ipv6(
    (src_mac, dst_mac): ([u8; 6], [u8; 6]),
    src: std::net::Ipv6Addr,
    dst: std::net::Ipv6Addr,
    (nexthdr, hop_limit): (u8, u8),
    payload: &[u8],
) -> Vec<u8> {
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[nexthdr, hop_limit]);
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    ip.extend_from_slice(payload);
    frame(dst_mac, src_mac, 0x86dd, &ip)
}

/// An ICMPv6 message of `ty` with its checksum between `src` and `dst`.
pub fn icmp6(src: std::net::Ipv6Addr, dst: std::net::Ipv6Addr, ty: u8, body: &[u8]) -> Vec<u8> {
    let mut msg = vec![ty, 0, 0, 0];
    msg.extend_from_slice(body);
    let csum = icmp6_checksum(src, dst, &msg);
    msg[2..4].copy_from_slice(&csum.to_be_bytes());
    msg
}

/// An IPv6 fragment header (offset in 8-byte units, more fragments, id)
/// for a datagram of `proto`, and what follows it.
pub fn fragment6(offset: u16, more: bool, id: u32, proto: u8, rest: &[u8]) -> Vec<u8> {
    let mut f = vec![proto, 0];
    f.extend_from_slice(&((offset << 3) | u16::from(more)).to_be_bytes());
    f.extend_from_slice(&id.to_be_bytes());
    f.extend_from_slice(rest);
    f
}
