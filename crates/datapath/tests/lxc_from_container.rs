//! cil_from_container on crafted packets: verdict and cilium_metrics.

use abi::metrics::{MetricsKey, MetricsValue, DIR_EGRESS};
use datapath::objects::BPF_LXC;
use datapath::testrun::TestObject;
use testsupport::Sandbox;

const TC_ACT_OK: u32 = 0;
const TC_ACT_SHOT: u32 = 2;

fn frame(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02];
    p.extend_from_slice(&ethertype.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

fn ipv4_udp() -> Vec<u8> {
    let mut ip = vec![
        0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 5, 10, 0, 0, 6,
    ];
    ip.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 8, 0, 0]);
    frame(0x0800, &ip)
}

fn load(sb: &Sandbox) -> TestObject {
    let pins = sb.bpffs().join("tc/globals");
    TestObject::load(
        BPF_LXC,
        &pins,
        &[
            (abi::maps::CT4_GLOBAL, 1024),
            (abi::maps::CT_ANY4_GLOBAL, 1024),
        ],
    )
    .expect("load bpf_lxc.o")
}

/// Sum over CPUs of the metrics entries with this reason and direction.
fn metric(obj: &TestObject, reason: u8, dir: u8) -> (u64, Option<MetricsKey>) {
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

#[test]
fn ipv4_from_pod_is_passed_and_counted_as_forwarded() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb);
    let pkt = ipv4_udp();
    let out = obj.run("cil_from_container", &pkt).expect("test run");
    assert_eq!(out.retval, TC_ACT_OK);
    assert_eq!(out.packet, pkt, "packet must leave unmodified");
    assert_eq!(metric(&obj, 0, DIR_EGRESS).0, 1);
}

#[test]
fn non_ethernet_ii_frame_is_dropped_as_unsupported_l2() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb);
    let out = obj
        .run("cil_from_container", &frame(0x0100, &[0u8; 46]))
        .expect("test run");
    assert_eq!(out.retval, TC_ACT_SHOT);
    let (count, key) = metric(&obj, abi::drop::DROP_UNSUPPORTED_L2, DIR_EGRESS);
    assert_eq!(count, 1);
    let key = key.expect("metrics key");
    assert_eq!(abi::metrics::source_file_name(key.file), "bpf_lxc.c");
    assert_ne!(key.line, 0, "drop site line is recorded");
}

#[test]
fn unknown_l3_and_malformed_ipv4_are_dropped_with_their_reasons() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb);
    assert_eq!(
        obj.run("cil_from_container", &frame(0x86dd, &[0u8; 60]))
            .unwrap()
            .retval,
        TC_ACT_SHOT
    );
    let bad_ihl = [
        0x44, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 5, 10, 0, 0, 6,
    ];
    assert_eq!(
        obj.run("cil_from_container", &frame(0x0800, &bad_ihl))
            .unwrap()
            .retval,
        TC_ACT_SHOT
    );
    assert_eq!(metric(&obj, abi::drop::DROP_UNKNOWN_L3, DIR_EGRESS).0, 1);
    assert_eq!(metric(&obj, abi::drop::DROP_INVALID, DIR_EGRESS).0, 1);
    assert_eq!(metric(&obj, 0, DIR_EGRESS).0, 0, "nothing was forwarded");
}

#[test]
fn arp_from_pod_is_passed_uncounted() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb);
    let out = obj
        .run("cil_from_container", &frame(0x0806, &[0u8; 28]))
        .unwrap();
    assert_eq!(out.retval, TC_ACT_OK);
}
