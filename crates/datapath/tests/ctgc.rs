//! Conntrack GC against the maps the programs write: a flow the datapath
//! just tracked stays, entries whose lifetime has passed go, and nothing
//! else is touched.

mod common;

use abi::ct::{CtEntry, Ipv4CtTuple};
use common::*;
use datapath::ctmap::{gc_map, now_secs};
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

    let now = now_secs();
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
    let stats = gc_map(&globals, abi::maps::CT4_GLOBAL, now).unwrap();
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
        gc_map(&globals, abi::maps::CT4_GLOBAL, now)
            .unwrap()
            .deleted,
        0
    );
}
