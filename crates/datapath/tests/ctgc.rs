//! Conntrack GC against the maps the programs write: a flow the datapath
//! just tracked stays, entries whose lifetime has passed go, and nothing
//! else is touched; NodePort NAT pairs go only when both directions idle.

mod common;

use abi::ct::{CtEntry, Ipv4CtTuple};
use abi::lb::{Ipv4NatEntry, NAT_DIR_EGRESS, NAT_DIR_INGRESS};
use common::*;
use datapath::ctmap::{gc_map, gc_nat, now_secs};
use datapath::maps::{Ct4Global, Snat4External};
use datapath::objects::BPF_LXC;
use std::net::Ipv4Addr;
use testsupport::Sandbox;

const POD_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
const POD_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 6);

fn tuple(sport: u16) -> Ipv4CtTuple {
    Ipv4CtTuple {
        daddr: Ipv4Addr::new(10, 9, 9, 9).into(),
        saddr: Ipv4Addr::new(10, 9, 9, 8).into(),
        dport: abi::Be16::new(80),
        sport: abi::Be16::new(sport),
        nexthdr: 6,
        flags: 0,
    }
}

#[test]
fn expired_entries_go_and_live_flows_stay() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb, BPF_LXC);
    add_pod(&obj, POD_A, 11, 0xa, 1000);
    add_pod(&obj, POD_B, 12, 0xb, 1001);
    // A real flow, tracked by the program.
    let syn = ipv4(POD_A, POD_B, 6, &tcp(40000, 80, 0x02));
    obj.run("cil_from_container", &syn).unwrap();
    let ct = obj.map(abi::maps::CT4_GLOBAL).unwrap();
    let tracked = ct.entries::<Ipv4CtTuple, CtEntry>().unwrap().len();
    assert!(tracked >= 1);

    // The pass runs 10 s ahead of the clock the program stamped the flow
    // with: entries due before that go, the flow (a SYN lives 60 s) stays.
    // Nothing is subtracted from the clock, which counts from boot and may
    // be only seconds old.
    let now = now_secs() + 10;
    let old = CtEntry {
        lifetime: now - 5,
        ..Default::default()
    };
    let young = CtEntry {
        lifetime: now + 300,
        ..Default::default()
    };
    for i in 0..10u16 {
        ct.put(&tuple(1000 + i), &old).unwrap();
        ct.put(&tuple(2000 + i), &young).unwrap();
    }
    let globals = sb.bpffs().join(abi::maps::GLOBALS_DIR);
    let stats = gc_map(&Ct4Global::open_in(&globals).unwrap(), now).unwrap();
    assert_eq!(stats.deleted, 10);
    assert_eq!(stats.alive, 10 + tracked as u64);
    assert_eq!(stats.max_entries, 1024);
    let left = ct.entries::<Ipv4CtTuple, CtEntry>().unwrap();
    assert!(left.iter().all(|(_, e)| e.lifetime >= now));
    assert_eq!(left.len(), 10 + tracked);
    // the flow goes on as established
    let ack = ipv4(POD_A, POD_B, 6, &tcp(40000, 80, 0x10));
    assert_eq!(
        obj.run("cil_from_container", &ack).unwrap().retval,
        TC_ACT_REDIRECT
    );
    assert_eq!(
        gc_map(&Ct4Global::open_in(&globals).unwrap(), now)
            .unwrap()
            .deleted,
        0
    );
}

fn nat_key(saddr: [u8; 4], daddr: [u8; 4], sport: u16, dport: u16, flags: u8) -> Ipv4CtTuple {
    Ipv4CtTuple {
        saddr: Ipv4Addr::from(saddr).into(),
        daddr: Ipv4Addr::from(daddr).into(),
        sport: abi::Be16::new(sport),
        dport: abi::Be16::new(dport),
        nexthdr: 6,
        flags,
    }
}

/// A NodePort flow's pair: client 198.18.0.50:`cport` to node
/// 198.18.0.11:30080, balanced to backend 10.2.0.2:80 from node port `cport`.
fn nat_pair(cport: u16, fwd_used: u64, rev_used: u64) -> [(Ipv4CtTuple, Ipv4NatEntry); 2] {
    let (client, node, backend) = ([198, 18, 0, 50], [198, 18, 0, 11], [10, 2, 0, 2]);
    let entry = |to: [u8; 4], to_port: u16, rev_port: u16, used: u64| Ipv4NatEntry {
        created: 1,
        last_used: used,
        from_addr: Ipv4Addr::from(node).into(),
        to_addr: Ipv4Addr::from(to).into(),
        to_port: abi::Be16::new(to_port),
        rev_port: abi::Be16::new(rev_port),
        ..Default::default()
    };
    [
        (
            nat_key(client, node, cport, 30080, NAT_DIR_EGRESS),
            entry(backend, 80, cport, fwd_used),
        ),
        (
            nat_key(backend, node, 80, cport, NAT_DIR_INGRESS),
            entry(client, cport, 30080, rev_used),
        ),
    ]
}

/// A masqueraded flow's pair: pod 10.1.0.5:`port` to 198.18.0.254:80, from
/// the node's 198.18.0.11:`port`.
fn masquerade_pair(port: u16, fwd_used: u64, rev_used: u64) -> [(Ipv4CtTuple, Ipv4NatEntry); 2] {
    let (pod, node, peer) = ([10, 1, 0, 5], [198, 18, 0, 11], [198, 18, 0, 254]);
    let entry = |to: [u8; 4], used: u64| Ipv4NatEntry {
        created: 1,
        last_used: used,
        to_addr: Ipv4Addr::from(to).into(),
        to_port: abi::Be16::new(port),
        ..Default::default()
    };
    [
        (
            nat_key(pod, peer, port, 80, NAT_DIR_EGRESS),
            entry(node, fwd_used),
        ),
        (
            nat_key(peer, node, 80, port, NAT_DIR_INGRESS),
            entry(pod, rev_used),
        ),
    ]
}

#[test]
fn masqueraded_pairs_go_together_when_idle() {
    let sb = Sandbox::enter();
    let obj = load(&sb, BPF_LXC);
    let nat = obj.map(abi::maps::SNAT4_EXTERNAL).unwrap();
    let now: u64 = 1_000_000;
    let idle = masquerade_pair(40001, now - 30_000, now - 30_000);
    // only replies come (a download): the pair stays whole
    let half = masquerade_pair(40002, now - 30_000, now);
    for (k, v) in idle.iter().chain(&half) {
        nat.put(k, v).unwrap();
    }
    let globals = sb.bpffs().join(abi::maps::GLOBALS_DIR);
    let stats = gc_nat(&Snat4External::open_in(&globals).unwrap(), now as u32).unwrap();
    assert_eq!((stats.deleted, stats.alive), (2, 2));
    let left: Vec<Ipv4CtTuple> = nat.keys().unwrap();
    assert_eq!(left.len(), 2);
    assert!(half.iter().all(|(k, _)| left.contains(k)));
}

#[test]
fn nat_pairs_go_only_when_both_directions_are_idle() {
    let sb = Sandbox::enter();
    let obj = load(&sb, BPF_LXC);
    let nat = obj.map(abi::maps::SNAT4_EXTERNAL).unwrap();
    // The pass judges only the entries written here, against a clock of
    // the test's own: no program stamps them, so the real clock (which
    // counts from boot) has no say.
    let now: u64 = 1_000_000;
    // idle both ways for longer than a TCP connection lives
    let idle = nat_pair(40001, now - 30_000, now - 30_000);
    // the client went quiet, the backend still answers
    let half = nat_pair(40002, now - 30_000, now - 5);
    let busy = nat_pair(40003, now, now);
    for (k, v) in idle.iter().chain(&half).chain(&busy) {
        nat.put(k, v).unwrap();
    }
    // a reply entry whose pair is gone, idle
    let orphan = nat_pair(40004, 0, now - 30_000)[1];
    nat.put(&orphan.0, &orphan.1).unwrap();

    let globals = sb.bpffs().join(abi::maps::GLOBALS_DIR);
    let stats = gc_nat(&Snat4External::open_in(&globals).unwrap(), now as u32).unwrap();
    assert_eq!((stats.deleted, stats.alive), (3, 4));
    let left: Vec<Ipv4CtTuple> = nat.keys().unwrap();
    for (k, _) in half.iter().chain(&busy) {
        assert!(left.contains(k));
    }
    assert!(!left.contains(&idle[0].0) && !left.contains(&idle[1].0));
    assert!(!left.contains(&orphan.0));
}

#[test]
fn the_ipv6_tables_are_collected_too() {
    use abi::ct::Ipv6CtTuple;
    use datapath::maps::Ct6Global;
    let sb = Sandbox::enter();
    let _obj = load(&sb, datapath::objects::BPF_LXC_V6);
    let globals = sb.bpffs().join(abi::maps::GLOBALS_DIR);
    let ct = Ct6Global::open_in(&globals).unwrap();
    let now = now_secs() + 10;
    let key = |sport: u16| Ipv6CtTuple {
        daddr: std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 5).into(),
        saddr: std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 6).into(),
        dport: abi::Be16::new(80),
        sport: abi::Be16::new(sport),
        nexthdr: 6,
        flags: 0,
    };
    for (sport, lifetime) in [(1000, now - 5), (2000, now + 300)] {
        let entry = CtEntry {
            lifetime,
            ..Default::default()
        };
        ct.put(&key(sport), &entry).unwrap();
    }
    let stats = gc_map(&ct, now).unwrap();
    assert_eq!((stats.deleted, stats.alive), (1, 1));
    assert!(ct.get(&key(2000)).unwrap().is_some());
}

#[test]
fn ipv6_nat_pairs_of_masquerading_and_nodeport_go_together_when_idle() {
    use abi::lb::{Ipv6NatEntry, NAT6_F_LOCAL, NAT6_F_NODEPORT};
    use datapath::maps::Snat6External;
    use std::net::Ipv6Addr;
    let sb = Sandbox::enter();
    let _obj = load(&sb, datapath::objects::BPF_HOST_V6);
    let globals = sb.bpffs().join(abi::maps::GLOBALS_DIR);
    let nat = Snat6External::open_in(&globals).unwrap();
    let (pod, node, peer) = (
        Ipv6Addr::new(0xfd00, 0x10, 0, 1, 0, 0, 0, 5),
        Ipv6Addr::new(0xfd00, 0x198, 0x18, 0, 0, 0, 0, 0x11),
        Ipv6Addr::new(0xfd00, 0x198, 0x18, 0, 0, 0, 0, 0x50),
    );
    let key = |s: Ipv6Addr, d: Ipv6Addr, sp: u16, dp: u16, dir: u8| abi::ct::Ipv6CtTuple {
        saddr: s.into(),
        daddr: d.into(),
        sport: abi::Be16::new(sp),
        dport: abi::Be16::new(dp),
        nexthdr: 6,
        flags: dir,
    };
    let entry = |to: Ipv6Addr, port: u16, rev: u16, flags: u64, used: u64| Ipv6NatEntry {
        last_used: used,
        flags,
        to_addr: to.into(),
        to_port: abi::Be16::new(port),
        rev_port: abi::Be16::new(rev),
        ..Default::default()
    };
    let now: u64 = 1_000_000;
    let old = now - 30_000;
    let pairs = [
        // masquerading: pod:40000 leaves as node:40000
        (
            key(pod, peer, 40000, 80, NAT_DIR_EGRESS),
            entry(node, 40000, 0, 0, old),
        ),
        (
            key(peer, node, 80, 40000, NAT_DIR_INGRESS),
            entry(pod, 40000, 0, 0, old),
        ),
        // a NodePort flow to a local backend, which sees the client
        (
            key(peer, node, 45000, 30080, NAT_DIR_EGRESS),
            entry(pod, 8080, 45000, NAT6_F_NODEPORT | NAT6_F_LOCAL, old),
        ),
        (
            key(pod, peer, 8080, 45000, NAT_DIR_INGRESS),
            entry(peer, 45000, 30080, NAT6_F_NODEPORT | NAT6_F_LOCAL, old),
        ),
        // a NodePort flow to a backend elsewhere, which sees the node
        (
            key(peer, node, 45001, 30080, NAT_DIR_EGRESS),
            entry(pod, 8080, 45001, NAT6_F_NODEPORT, now),
        ),
        (
            key(pod, node, 8080, 45001, NAT_DIR_INGRESS),
            entry(peer, 45001, 30080, NAT6_F_NODEPORT, old),
        ),
    ];
    for (k, v) in &pairs {
        nat.put(k, v).unwrap();
    }
    let stats = gc_nat(&nat, now as u32).unwrap();
    assert_eq!(
        (stats.deleted, stats.alive),
        (4, 2),
        "the busy pair stays whole"
    );
    let left = nat.keys().unwrap();
    assert!(pairs[4..].iter().all(|(k, _)| left.contains(k)), "{left:?}");
}
