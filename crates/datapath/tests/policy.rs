//! Policy enforcement in cil_from_container on crafted packets: egress at
//! the source and ingress at the destination, per endpoint, with Cilium's
//! drop reasons; replies of allowed flows pass whatever the policy says the
//! other way, as do ICMP errors about them; later fragments of a datagram
//! are judged by its first's ports; and an endpoint without a policy map is
//! not served.

mod common;

use abi::endpoint::EndpointInfo;
use abi::ipcache::{IpcacheKey, RemoteEndpointInfo};
use abi::metrics::{DIR_EGRESS, DIR_INGRESS};
use common::*;
use datapath::objects::BPF_LXC;
use datapath::testrun::TestObject;
use std::net::Ipv4Addr;
use testsupport::Sandbox;

const POD_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
const POD_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 6);
const ID_A: u32 = 1000;
const ID_B: u32 = 1001;
const EP_A: u16 = 11;
const EP_B: u16 = 12;
const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;

fn two_pods(sb: &Sandbox) -> TestObject {
    let obj = load(sb, BPF_LXC);
    for (ip, ep, id, n) in [(POD_A, EP_A, ID_A, 0xa), (POD_B, EP_B, ID_B, 0xb)] {
        add_endpoint(
            &obj,
            ip,
            EndpointInfo::pod(TEST_IFINDEX, ep, [2, 0, 0, 0, 0, n], [2, 0, 0, 0, 1, n], id),
        );
        obj.map(abi::maps::IPCACHE)
            .unwrap()
            .put(
                &IpcacheKey::v4(ip, 32),
                &RemoteEndpointInfo {
                    sec_identity: id,
                    ..Default::default()
                },
            )
            .unwrap();
    }
    obj
}

fn syn(dport: u16) -> Vec<u8> {
    ipv4(POD_A, POD_B, TCP, &tcp(40000, dport, 0x02))
}

#[test]
fn egress_is_enforced_at_the_source() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    set_policy(
        &obj,
        EP_A,
        &[(0, false, 0, 0), (ID_B, true, TCP, 80)],
        &[(ID_B, true, TCP, 81)],
    );
    assert_eq!(
        obj.run("cil_from_container", &syn(80)).unwrap().retval,
        TC_ACT_REDIRECT
    );
    assert_eq!(
        obj.run("cil_from_container", &syn(82)).unwrap().retval,
        TC_ACT_SHOT
    );
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY, DIR_EGRESS).0, 1);
    assert_eq!(
        obj.run("cil_from_container", &syn(81)).unwrap().retval,
        TC_ACT_SHOT
    );
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY_DENY, DIR_EGRESS).0, 1);
    // the allow entry counted its packet
    let map = obj.map(&datapath::policymap::name(EP_A)).unwrap();
    let counted: u64 = map
        .entries::<abi::policy::PolicyKey, abi::policy::PolicyEntry>()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.dport.get() == 80)
        .map(|(_, v)| v.packets)
        .sum();
    assert_eq!(counted, 1);
}

#[test]
fn ingress_is_enforced_at_the_destination_and_replies_pass() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    // B takes A on port 80 only, and may send nothing itself
    set_policy(&obj, EP_B, &[(ID_A, false, TCP, 80)], &[]);
    assert_eq!(
        obj.run("cil_from_container", &syn(80)).unwrap().retval,
        TC_ACT_REDIRECT
    );
    let reply = ipv4(POD_B, POD_A, TCP, &tcp(80, 40000, 0x12));
    assert_eq!(
        obj.run("cil_from_container", &reply).unwrap().retval,
        TC_ACT_REDIRECT,
        "a reply is not subject to B's egress policy"
    );
    assert_eq!(
        obj.run("cil_from_container", &syn(8080)).unwrap().retval,
        TC_ACT_SHOT
    );
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY, DIR_INGRESS).0, 1);
    let new_from_b = ipv4(POD_B, POD_A, TCP, &tcp(41000, 22, 0x02));
    assert_eq!(
        obj.run("cil_from_container", &new_from_b).unwrap().retval,
        TC_ACT_SHOT
    );
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY, DIR_EGRESS).0, 1);
}

#[test]
fn errors_about_an_allowed_flow_pass_as_related() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    // B takes A's UDP on 53 and may send nothing itself
    set_policy(&obj, EP_B, &[(ID_A, false, UDP, 53)], &[]);
    let query = ipv4(POD_A, POD_B, UDP, &udp(40000, 53));
    let error = port_unreachable(POD_B, POD_A, &query);
    assert_eq!(
        obj.run("cil_from_container", &error).unwrap().retval,
        TC_ACT_SHOT,
        "with no flow behind it, the error is B's own new ICMP traffic"
    );
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY, DIR_EGRESS).0, 1);
    assert_eq!(
        obj.run("cil_from_container", &query).unwrap().retval,
        TC_ACT_REDIRECT
    );
    assert_eq!(
        obj.run("cil_from_container", &error).unwrap().retval,
        TC_ACT_REDIRECT,
        "an error about the flow is related to it"
    );
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY, DIR_EGRESS).0, 1);
    let ct = obj.map(abi::maps::CT_ANY4_GLOBAL).unwrap();
    let related = ct
        .entries::<abi::ct::Ipv4CtTuple, abi::ct::CtEntry>()
        .unwrap()
        .into_iter()
        .filter(|(k, _)| k.nexthdr == ICMP && k.flags & abi::ct::TUPLE_F_RELATED != 0)
        .count();
    assert_eq!(
        related, 2,
        "one for A's egress entry, one for B's ingress entry"
    );
}

#[test]
fn icmp_rules_match_the_type() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    let echo = |id: u16| {
        ipv4(
            POD_A,
            POD_B,
            ICMP,
            &[8, 0, 0, 0, (id >> 8) as u8, id as u8, 0, 1],
        )
    };
    // B takes echo requests (type 8) from A, keyed type << 8 as in Cilium
    set_policy(&obj, EP_B, &[(ID_A, false, ICMP, 8 << 8)], &[]);
    assert_eq!(
        obj.run("cil_from_container", &echo(1)).unwrap().retval,
        TC_ACT_REDIRECT
    );
    let reply = ipv4(POD_B, POD_A, ICMP, &[0, 0, 0, 0, 0, 1, 0, 1]);
    assert_eq!(
        obj.run("cil_from_container", &reply).unwrap().retval,
        TC_ACT_REDIRECT,
        "the reply is the flow's"
    );
    // only timestamp requests (type 13): an echo request is refused
    set_policy(&obj, EP_B, &[(ID_A, false, ICMP, 13 << 8)], &[]);
    assert_eq!(
        obj.run("cil_from_container", &echo(2)).unwrap().retval,
        TC_ACT_SHOT
    );
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY, DIR_INGRESS).0, 1);
}

#[test]
fn later_fragments_follow_their_first_through_policy() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    // B takes A's UDP on 53 only
    set_policy(&obj, EP_B, &[(ID_A, false, UDP, 53)], &[]);
    let datagram = |id: u16, dport: u16| udp_fragments((POD_A, 40000), (POD_B, dport), id);
    let run =
        |obj: &mut TestObject, frame: &[u8]| obj.run("cil_from_container", frame).unwrap().retval;

    let (first, rest) = datagram(7, 53);
    assert_eq!(run(&mut obj, &first), TC_ACT_REDIRECT);
    assert_eq!(
        run(&mut obj, &rest),
        TC_ACT_REDIRECT,
        "the rest of an allowed datagram"
    );

    let (first, rest) = datagram(8, 54);
    assert_eq!(run(&mut obj, &first), TC_ACT_SHOT);
    assert_eq!(
        run(&mut obj, &rest),
        TC_ACT_SHOT,
        "the rest of a denied datagram"
    );
    assert_eq!(metric(&obj, abi::drop::DROP_POLICY, DIR_INGRESS).0, 2);

    let (_, orphan) = datagram(9, 53);
    assert_eq!(
        run(&mut obj, &orphan),
        TC_ACT_SHOT,
        "no first fragment seen"
    );
    assert_eq!(
        metric(&obj, abi::drop::DROP_FRAG_NOT_FOUND, DIR_EGRESS).0,
        1
    );

    // enable-ipv4-fragment-tracking=false: later fragments are refused
    obj.map(abi::maps::RUNTIME_CONFIG)
        .unwrap()
        .put(&abi::runtime_config::FRAGMENTS_DISABLED, &1u64)
        .unwrap();
    let (first, rest) = datagram(10, 53);
    assert_eq!(
        obj.run("cil_from_container", &first).unwrap().retval,
        TC_ACT_REDIRECT
    );
    assert_eq!(
        obj.run("cil_from_container", &rest).unwrap().retval,
        TC_ACT_SHOT
    );
    assert_eq!(
        metric(&obj, abi::drop::DROP_FRAG_NOSUPPORT, DIR_EGRESS).0,
        1
    );
}

#[test]
fn a_denied_flow_leaves_no_conntrack_entry() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    set_policy(&obj, EP_B, &[], &[]);
    assert_eq!(
        obj.run("cil_from_container", &syn(80)).unwrap().retval,
        TC_ACT_SHOT
    );
    let ct = obj.map(abi::maps::CT4_GLOBAL).unwrap();
    let entries = ct
        .entries::<abi::ct::Ipv4CtTuple, abi::ct::CtEntry>()
        .unwrap();
    assert_eq!(entries.len(), 1, "only A's egress entry: {entries:?}");
}

#[test]
fn an_endpoint_without_a_policy_map_is_not_served() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    datapath::policymap::remove(obj.pin_dir(), EP_B);
    assert_eq!(
        obj.run("cil_from_container", &syn(80)).unwrap().retval,
        TC_ACT_SHOT
    );
    assert_eq!(metric(&obj, abi::drop::DROP_NO_CONFIG, DIR_INGRESS).0, 1);
}

#[test]
fn an_endpoint_without_an_ingress_program_is_not_served() {
    let sb = Sandbox::enter();
    let mut obj = two_pods(&sb);
    obj.map(abi::maps::CALL_POLICY)
        .unwrap()
        .remove(&u32::from(EP_B))
        .unwrap();
    assert_eq!(
        obj.run("cil_from_container", &syn(80)).unwrap().retval,
        TC_ACT_SHOT
    );
    assert_eq!(
        metric(&obj, abi::drop::DROP_MISSED_TAIL_CALL, DIR_INGRESS).0,
        1
    );
}
