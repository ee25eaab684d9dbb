//! Notifications in cilium_events: a drop reaches the ring with its record
//! and packet, the events rate limit lets `burst` through and counts the
//! rest in cilium_rs_ratelimit_metrics, a notification type turned off
//! writes nothing, and debug captures are Cilium 1.16's delivery captures.

mod common;

use abi::ratelimit::{RatelimitMetricsKey, RatelimitMetricsValue, USAGE_EVENTS_MAP};
use abi::runtime_config::{EVENTS_BURST_LIMIT, EVENTS_DISABLED, EVENTS_RATE_LIMIT};
use common::*;
use datapath::events::{EventReader, Record};
use datapath::objects::BPF_LXC;
use datapath::testrun::TestObject;
use std::net::Ipv4Addr;
use testsupport::Sandbox;

/// A packet from an address no endpoint has: dropped, and reported.
fn send_invalid(obj: &mut TestObject, n: usize) {
    let pkt = ipv4(
        Ipv4Addr::new(10, 0, 0, 5),
        Ipv4Addr::new(10, 0, 0, 6),
        17,
        &udp(1, 2),
    );
    for _ in 0..n {
        assert_eq!(
            obj.run("cil_from_container", &pkt).unwrap().retval,
            TC_ACT_SHOT
        );
    }
}

/// Records of notification type `kind` in the rings now.
fn records(reader: &mut EventReader, kind: u8) -> Vec<Vec<u8>> {
    let mut seen = Vec::new();
    reader.poll(200, &mut |_, rec| {
        if let Record::Sample(b) = rec {
            if b[0] == kind {
                seen.push(b.to_vec());
            }
        }
    });
    seen
}

fn drops_read(reader: &mut EventReader) -> Vec<Vec<u8>> {
    records(reader, abi::events::NOTIFY_DROP)
}

fn set(obj: &TestObject, index: u32, value: u64) {
    obj.map(abi::maps::RUNTIME_CONFIG)
        .unwrap()
        .put(&index, &value)
        .unwrap();
}

fn refused(obj: &TestObject) -> u64 {
    obj.map(abi::maps::RATELIMIT_METRICS)
        .unwrap()
        .get::<_, RatelimitMetricsValue>(&RatelimitMetricsKey {
            usage: USAGE_EVENTS_MAP,
        })
        .unwrap()
        .map_or(0, |v| v.dropped)
}

#[test]
fn records_keep_coming_whole_once_the_rings_have_wrapped() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb, BPF_LXC);
    let mut reader = EventReader::open(&sb.bpffs()).expect("open the rings");
    // well over a ring's 256 KB of ~130-byte records, read in rounds
    // short of filling it, so records straddle the ring's end
    let (mut seen, mut whole) = (0, true);
    for _ in 0..40 {
        send_invalid(&mut obj, 150);
        for rec in drops_read(&mut reader) {
            seen += 1;
            whole &= rec[1] == abi::drop::DROP_INVALID_SIP && rec.len() >= 36 + 42;
        }
    }
    assert_eq!(seen, 40 * 150);
    assert!(whole, "every record read whole");
}

#[test]
fn drops_are_reported_rate_limited_and_can_be_turned_off() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb, BPF_LXC);
    let mut reader = EventReader::open(&sb.bpffs()).expect("open the rings");

    send_invalid(&mut obj, 1);
    let seen = drops_read(&mut reader);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0][1], abi::drop::DROP_INVALID_SIP);
    assert!(seen[0].len() >= 36 + 42, "record and captured packet");

    // 2 a second with a bucket of 3: of 10 at once, 3 pass.
    set(&obj, EVENTS_RATE_LIMIT, 2);
    set(&obj, EVENTS_BURST_LIMIT, 3);
    send_invalid(&mut obj, 10);
    assert_eq!(drops_read(&mut reader).len(), 3);
    assert_eq!(refused(&obj), 7);
    // Metrics still count every drop.
    assert_eq!(
        metric(&obj, abi::drop::DROP_INVALID_SIP, abi::metrics::DIR_EGRESS).0,
        11
    );

    // bpf-events-drop-enabled=false
    set(&obj, EVENTS_RATE_LIMIT, 0);
    set(&obj, EVENTS_DISABLED, 1 << abi::events::NOTIFY_DROP);
    send_invalid(&mut obj, 3);
    assert!(drops_read(&mut reader).is_empty());
    set(&obj, EVENTS_DISABLED, 0);
    send_invalid(&mut obj, 1);
    assert_eq!(drops_read(&mut reader).len(), 1);
}

#[test]
fn debug_captures_are_written_only_when_asked_for() {
    let sb = Sandbox::enter();
    let mut obj = load(&sb, BPF_LXC);
    // not send_invalid's addresses
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 7), Ipv4Addr::new(10, 0, 0, 8));
    add_pod(&obj, a, 11, 0xa, 1000);
    add_pod(&obj, b, 12, 0xb, 1001);
    let mut reader = EventReader::open(&sb.bpffs()).expect("open the rings");
    let captures = |reader: &mut EventReader| records(reader, abi::events::NOTIFY_DBG_CAPTURE);
    let pkt = ipv4(a, b, 17, &udp(1000, 53));
    let deliver = |obj: &mut TestObject| {
        assert_eq!(
            obj.run("cil_from_container", &pkt).unwrap().retval,
            TC_ACT_REDIRECT
        );
    };
    deliver(&mut obj);
    assert!(captures(&mut reader).is_empty());
    set(&obj, abi::runtime_config::DEBUG_DATAPATH, 1);
    deliver(&mut obj);
    // A drop is no capture point in Cilium 1.16: only the delivery is.
    send_invalid(&mut obj, 1);
    let seen = captures(&mut reader);
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0][1],
        abi::events::DBG_CAPTURE_DELIVERY,
        "DBG_CAPTURE_DELIVERY"
    );
    let msg = <abi::events::DebugCaptureMsg as abi::Plain>::from_bytes(&seen[0]).unwrap();
    assert_eq!(msg.hdr.source, 12, "the receiving endpoint");
    assert_eq!(msg.arg1, TEST_IFINDEX, "the receiving endpoint's ifindex");
    assert_eq!(
        abi::events::capture_point_text(seen[0][1]),
        "Delivery to ifindex"
    );
    // the packet follows (perf pads the sample to 8 bytes)
    assert_eq!(msg.len_cap, 42);
    assert!(seen[0].len() >= 24 + 42);
}

#[test]
fn aggregation_keeps_new_and_closing_packets_from_medium_on() {
    use abi::runtime_config::MONITOR_AGGREGATION;
    let sb = Sandbox::enter();
    let mut obj = load(&sb, BPF_LXC);
    let (a, b) = (Ipv4Addr::new(10, 0, 0, 5), Ipv4Addr::new(10, 0, 0, 6));
    add_pod(&obj, a, 11, 0xa, 1000);
    add_pod(&obj, b, 12, 0xb, 1001);
    let mut reader = EventReader::open(&sb.bpffs()).expect("open the rings");
    let mut traced = |obj: &mut TestObject, flags: u8| {
        let pkt = ipv4(a, b, 6, &tcp(40000, 80, flags));
        assert_eq!(
            obj.run("cil_from_container", &pkt).unwrap().retval,
            TC_ACT_REDIRECT
        );
        records(&mut reader, abi::events::NOTIFY_TRACE).len()
    };
    // Medium (3): the SYN and the FIN, not the established ACK.
    set(&obj, MONITOR_AGGREGATION, 3);
    assert_eq!(traced(&mut obj, 0x02), 1, "SYN");
    assert_eq!(traced(&mut obj, 0x10), 0, "established ACK");
    assert_eq!(traced(&mut obj, 0x11), 1, "FIN");
    // Low (2) and none (0) trace every packet.
    for level in [2, 0] {
        set(&obj, MONITOR_AGGREGATION, level);
        assert_eq!(traced(&mut obj, 0x10), 1, "ACK at level {level}");
    }
}
