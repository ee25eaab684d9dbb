//! cil_from_host: the node's own traffic to a pod is tracked as the pod's
//! ingress and handed to its veth.

mod common;

use abi::ct::{CtEntry, Ipv4CtTuple, TUPLE_F_IN};
use abi::endpoint::EndpointInfo;
use abi::metrics::DIR_INGRESS;
use common::*;
use datapath::objects::BPF_HOST;
use std::net::Ipv4Addr;
use testsupport::Sandbox;

#[test]
fn host_to_pod_traffic_is_tracked_and_redirected_to_the_veth() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb, BPF_HOST);
    let pod = Ipv4Addr::new(10, 0, 0, 5);
    let (mac, lxc) = ([2, 0, 0, 0, 0, 0x0a], [2, 0, 0, 0, 1, 0x0a]);
    add_endpoint(
        &obj,
        pod,
        EndpointInfo::pod(TEST_IFINDEX, 11, mac, lxc, 1000),
    );
    let router = Ipv4Addr::new(10, 0, 0, 1);
    let mut icmp = vec![8, 0, 0, 0, 0x12, 0x34, 0, 1];
    icmp.extend_from_slice(&[0; 8]);
    let out = obj
        .run("cil_from_host", &ipv4(router, pod, 1, &icmp))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_REDIRECT);
    assert_eq!(&out.packet[0..6], &mac);
    assert_eq!(&out.packet[6..12], &lxc);
    let key = Ipv4CtTuple {
        daddr: router.into(),
        saddr: pod.into(),
        dport: abi::Be16::new(0),
        sport: abi::Be16::new(0x1234),
        nexthdr: 1,
        flags: TUPLE_F_IN,
    };
    let e: CtEntry = obj
        .map(abi::maps::CT_ANY4_GLOBAL)
        .unwrap()
        .get(&key)
        .unwrap()
        .expect("ICMP ingress entry of the pod");
    assert_eq!(
        e.src_sec_id,
        abi::identity::WORLD,
        "no ipcache entry: world"
    );
    assert_eq!(metric(&obj, 0, DIR_INGRESS).0, 1);

    // Not a pod: the stack keeps it.
    let other = ipv4(router, Ipv4Addr::new(198, 18, 0, 1), 17, &udp(1, 2));
    assert_eq!(obj.run("cil_from_host", &other).unwrap().retval, TC_ACT_OK);
}
