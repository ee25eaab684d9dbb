//! Records of `cilium_events` decoded into the events clients get.

use abi::Plain;
pub use api::monitor::{MonitorEvent, Packet};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The addresses, L4 protocol and L4 header of an IPv4 or IPv6 frame (IPv6
/// extension headers are not walked: a summary names what follows).
fn l3(frame: &[u8]) -> Option<(String, String, u8, &[u8])> {
    match frame.get(12..14)? {
        [0x08, 0x00] if frame.len() >= 34 => {
            let ip = &frame[14..];
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            Some((
                crate::text::ipv4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15])),
                crate::text::ipv4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19])),
                ip[9],
                ip.get(ihl..).unwrap_or_default(),
            ))
        }
        [0x86, 0xdd] if frame.len() >= 54 => {
            let ip = &frame[14..];
            let addr = |at: usize| {
                let bytes: [u8; 16] = ip[at..at + 16].try_into().expect("16 bytes");
                Ipv6Addr::from(bytes).to_string()
            };
            Some((addr(8), addr(24), ip[6], &ip[40..]))
        }
        _ => None,
    }
}

/// The addresses, ports and TCP flags of a captured Ethernet frame.
pub fn parse_packet(frame: &[u8]) -> Option<Packet> {
    let (src_ip, dst_ip, proto, l4) = l3(frame)?;
    let port = |at: usize| -> u16 {
        l4.get(at..at + 2)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
    };
    let mut p = Packet {
        src_ip,
        dst_ip,
        ..Default::default()
    };
    match proto {
        6 => {
            p.protocol = "TCP".into();
            (p.src_port, p.dst_port) = (port(0), port(2));
            let flags = l4.get(13).copied().unwrap_or(0);
            p.flags = [
                (0x02, "SYN"),
                (0x10, "ACK"),
                (0x01, "FIN"),
                (0x04, "RST"),
                (0x08, "PSH"),
            ]
            .iter()
            .filter(|(bit, _)| flags & bit != 0)
            .map(|(_, n)| (*n).to_owned())
            .collect();
        }
        17 => {
            p.protocol = "UDP".into();
            (p.src_port, p.dst_port) = (port(0), port(2));
        }
        1 => {
            p.protocol = "ICMPv4".into();
            let kind = match l4.first() {
                Some(8) => "EchoRequest",
                Some(0) => "EchoReply",
                Some(3) => "DestinationUnreachable",
                _ => "other",
            };
            p.flags = vec![kind.into()];
        }
        58 => {
            p.protocol = "ICMPv6".into();
            let kind = match l4.first() {
                Some(128) => "EchoRequest",
                Some(129) => "EchoReply",
                Some(1) => "DestinationUnreachable",
                Some(2) => "PacketTooBig",
                Some(3) => "TimeExceeded",
                Some(135) => "NeighborSolicitation",
                Some(136) => "NeighborAdvertisement",
                _ => "other",
            };
            p.flags = vec![kind.into()];
        }
        n => p.protocol = format!("proto {n}"),
    }
    Some(p)
}

/// The summary Cilium prints for a captured frame ("" when not IP).
pub fn summarize(frame: &[u8]) -> String {
    parse_packet(frame).map(|p| p.summary()).unwrap_or_default()
}

/// The captured bytes behind a record's fixed header `T`.
fn captured<T>(bytes: &[u8], len_cap: u16) -> &[u8] {
    let payload = bytes.get(std::mem::size_of::<T>()..).unwrap_or_default();
    &payload[..usize::from(len_cap).min(payload.len())]
}

/// An event carrying a captured packet.
fn with_packet(kind: &str, hdr: &abi::events::NotifyCommonHdr, frame: &[u8]) -> MonitorEvent {
    let packet = parse_packet(frame);
    MonitorEvent {
        kind: kind.into(),
        source: u32::from(hdr.source),
        hash: hdr.hash,
        summary: packet.as_ref().map(Packet::summary).unwrap_or_default(),
        packet,
        data: abi::hex::encode(frame),
        ..Default::default()
    }
}

fn state_name(s: u8) -> &'static str {
    match s {
        0 => "new",
        1 => "established",
        2 => "reply",
        3 => "related",
        _ => "unknown",
    }
}

fn decode_trace(bytes: &[u8]) -> Option<MonitorEvent> {
    let n = abi::events::TraceNotify::from_bytes(bytes)?;
    let frame = captured::<abi::events::TraceNotify>(bytes, n.len_cap);
    Some(MonitorEvent {
        obs_point: abi::events::TRACE_POINTS
            .get(usize::from(n.hdr.subtype))
            .copied()
            .unwrap_or("unknown")
            .into(),
        state: state_name(n.reason).into(),
        src_label: n.src_label,
        dst_label: n.dst_label,
        dst_id: u32::from(n.dst_id),
        ifindex: n.ifindex,
        len_orig: n.len_orig,
        ..with_packet("trace", &n.hdr, frame)
    })
}

fn decode_verdict(bytes: &[u8]) -> Option<MonitorEvent> {
    let n = abi::events::PolicyVerdictNotify::from_bytes(bytes)?;
    let frame = captured::<abi::events::PolicyVerdictNotify>(bytes, n.len_cap);
    let denied = n.verdict < 0;
    Some(MonitorEvent {
        obs_point: if n.flags & 0x3 == 2 {
            "egress"
        } else {
            "ingress"
        }
        .into(),
        state: abi::events::match_type_name((n.flags >> 3) & 0x7).into(),
        reason: if denied {
            n.verdict.unsigned_abs() as u8
        } else {
            0
        },
        reason_text: if denied { "deny" } else { "allow" }.into(),
        src_label: n.remote_label,
        dst_id: u32::from(n.hdr.source),
        len_orig: n.len_orig,
        proto: n.proto,
        port: n.dst_port,
        ..with_packet("policy-verdict", &n.hdr, frame)
    })
}

fn decode_drop(bytes: &[u8]) -> Option<MonitorEvent> {
    let n = abi::events::DropNotify::from_bytes(bytes)?;
    let frame = captured::<abi::events::DropNotify>(bytes, n.len_cap);
    Some(MonitorEvent {
        reason: n.hdr.subtype,
        reason_text: abi::metrics::reason_text(n.hdr.subtype),
        src_label: n.src_label,
        dst_label: n.dst_label,
        dst_id: n.dst_id,
        ifindex: n.ifindex,
        file: abi::metrics::source_file_name(n.file).to_owned(),
        line: n.line,
        len_orig: n.len_orig,
        ..with_packet("drop", &n.hdr, frame)
    })
}

fn decode_capture(bytes: &[u8]) -> Option<MonitorEvent> {
    let n = abi::events::DebugCaptureMsg::from_bytes(bytes)?;
    let frame = captured::<abi::events::DebugCaptureMsg>(bytes, n.len_cap);
    Some(MonitorEvent {
        obs_point: abi::events::capture_point_text(n.hdr.subtype).into(),
        ifindex: n.arg1,
        len_orig: n.len_orig,
        ..with_packet("capture", &n.hdr, frame)
    })
}

/// A record of the rings, if it is one this agent knows.
pub fn decode(bytes: &[u8]) -> Option<MonitorEvent> {
    let hdr = abi::events::NotifyCommonHdr::from_bytes(bytes)?;
    match hdr.kind {
        abi::events::NOTIFY_DROP => decode_drop(bytes),
        abi::events::NOTIFY_TRACE => decode_trace(bytes),
        abi::events::NOTIFY_POLICY_VERDICT => decode_verdict(bytes),
        abi::events::NOTIFY_DBG_CAPTURE => decode_capture(bytes),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syn_frame() -> Vec<u8> {
        let mut frame = vec![0u8; 54];
        frame[12] = 0x08;
        frame[14] = 0x45;
        frame[14 + 9] = 6;
        frame[26..30].copy_from_slice(&[10, 0, 1, 5]);
        frame[30..34].copy_from_slice(&[10, 0, 2, 7]);
        frame[34..36].copy_from_slice(&34567u16.to_be_bytes());
        frame[36..38].copy_from_slice(&80u16.to_be_bytes());
        frame[34 + 13] = 0x02;
        frame
    }

    #[test]
    fn drop_records_decode_with_their_packet() {
        let mut rec = vec![0u8; 36];
        rec[0] = abi::events::NOTIFY_DROP;
        rec[1] = 133;
        rec[2..4].copy_from_slice(&7u16.to_ne_bytes());
        rec[12] = 54; // len_cap
        rec[16..20].copy_from_slice(&256u32.to_ne_bytes());
        rec[20..24].copy_from_slice(&257u32.to_ne_bytes());
        rec[30] = 2; // bpf_lxc.c
        rec.extend_from_slice(&syn_frame());
        let ev = decode(&rec).unwrap();
        assert_eq!(ev.reason_text, "Policy denied");
        assert_eq!((ev.src_label, ev.dst_label, ev.source), (256, 257, 7));
        assert_eq!(ev.file, "bpf_lxc.c");
        assert_eq!(ev.summary, "10.0.1.5:34567 -> 10.0.2.7:80 tcp SYN");
        let p = ev.packet.unwrap();
        assert_eq!((p.protocol.as_str(), p.dst_port), ("TCP", 80));
        assert_eq!(ev.data.len(), 108);
    }

    #[test]
    fn policy_verdicts_decode_direction_match_and_action() {
        let mut rec = vec![0u8; 32];
        rec[0] = abi::events::NOTIFY_POLICY_VERDICT;
        rec[2..4].copy_from_slice(&12u16.to_ne_bytes());
        rec[12] = 54;
        rec[16..20].copy_from_slice(&300u32.to_ne_bytes());
        rec[20..24].copy_from_slice(&(-133i32).to_ne_bytes());
        rec[24..26].copy_from_slice(&80u16.to_ne_bytes());
        rec[26] = 6;
        rec[27] = 1 | (2 << 3);
        rec.extend_from_slice(&syn_frame());
        let ev = decode(&rec).unwrap();
        assert_eq!(ev.kind, "policy-verdict");
        assert_eq!(
            (
                ev.obs_point.as_str(),
                ev.state.as_str(),
                ev.reason_text.as_str()
            ),
            ("ingress", "L3-L4", "deny")
        );
        assert_eq!(
            (ev.dst_id, ev.src_label, ev.proto, ev.port, ev.reason),
            (12, 300, 6, 80, 133)
        );
    }
}
