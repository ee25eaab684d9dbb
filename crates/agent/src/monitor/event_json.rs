//! A monitor event as the compact JSON serde_json writes for it, written
//! by hand. At 200,000 events a second, serde_json's work for our
//! `cilium monitor` stream (every one of 24 keys and every string
//! scanned for escapes, a value at a time through its traits) cost the
//! agent more than Hubble's observer did. The tests hold the two to the
//! same bytes, a new field included.

use api::monitor::{MonitorEvent, Packet};

/// Appends `ev` as serde_json's compact JSON.
pub fn write(out: &mut Vec<u8>, ev: &MonitorEvent) {
    text(out, b"{\"type\":", &ev.kind);
    text(out, b",\"time\":", &ev.time);
    number(out, b",\"cpu\":", ev.cpu);
    number(out, b",\"source\":", ev.source);
    text(out, b",\"obs_point\":", &ev.obs_point);
    text(out, b",\"state\":", &ev.state);
    number(out, b",\"reason\":", ev.reason);
    text(out, b",\"reason_text\":", &ev.reason_text);
    number(out, b",\"hash\":", ev.hash);
    number(out, b",\"src_label\":", ev.src_label);
    number(out, b",\"dst_label\":", ev.dst_label);
    number(out, b",\"dst_id\":", ev.dst_id);
    number(out, b",\"ifindex\":", ev.ifindex);
    text(out, b",\"file\":", &ev.file);
    number(out, b",\"line\":", ev.line);
    number(out, b",\"len_orig\":", ev.len_orig);
    number(out, b",\"proto\":", ev.proto);
    number(out, b",\"port\":", ev.port);
    out.extend_from_slice(b",\"packet\":");
    match &ev.packet {
        Some(p) => packet(out, p),
        None => out.extend_from_slice(b"null"),
    }
    text(out, b",\"summary\":", &ev.summary);
    text(out, b",\"src_pod\":", &ev.src_pod);
    text(out, b",\"dst_pod\":", &ev.dst_pod);
    text(out, b",\"data\":", &ev.data);
    text(out, b",\"message\":", &ev.message);
    out.push(b'}');
}

fn packet(out: &mut Vec<u8>, p: &Packet) {
    text(out, b"{\"src_ip\":", &p.src_ip);
    text(out, b",\"dst_ip\":", &p.dst_ip);
    number(out, b",\"src_port\":", p.src_port);
    number(out, b",\"dst_port\":", p.dst_port);
    text(out, b",\"protocol\":", &p.protocol);
    out.extend_from_slice(b",\"flags\":[");
    for (i, f) in p.flags.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, f);
    }
    out.extend_from_slice(b"]}");
}

fn text(out: &mut Vec<u8>, key: &[u8], s: &str) {
    out.extend_from_slice(key);
    string(out, s);
}

fn number(out: &mut Vec<u8>, key: &[u8], n: impl Into<u64>) {
    out.extend_from_slice(key);
    out.extend_from_slice(api::decimal::decimal_bytes(n.into(), 1, &mut [0; 20]));
}

/// A JSON string, escaped as serde_json escapes: the short forms where
/// JSON has them, `\u00XX` for the other control characters.
fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    // most strings need no escape (hex, addresses, names): one pass that
    // only looks, without a branch a byte, then one copy
    let plain = bytes.iter().fold(true, |plain, &b| {
        plain & (b >= 0x20) & (b != b'"') & (b != b'\\')
    });
    if plain {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            b'\n' => b'n',
            b'\r' => b'r',
            b'\t' => b't',
            0x08 => b'b',
            0x0c => b'f',
            0x00..=0x1f => 0,
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        start = i + 1;
        if short == 0 {
            out.extend_from_slice(b"\\u00");
            out.extend_from_slice(&abi::hex::pair(b));
        } else {
            out.extend_from_slice(&[b'\\', short]);
        }
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_as_serde(ev: &MonitorEvent) {
        let mut ours = Vec::new();
        write(&mut ours, ev);
        let theirs = serde_json::to_vec(ev).unwrap();
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            String::from_utf8(theirs).unwrap()
        );
    }

    #[test]
    fn every_field_is_written_as_serde_json_writes_it() {
        // every field set, so a field added to MonitorEvent and not here
        // fails this test
        let full = MonitorEvent {
            kind: "drop".into(),
            time: "2026-11-30T04:10:00.123Z".into(),
            cpu: 1,
            source: 2,
            obs_point: "to-endpoint".into(),
            state: "new".into(),
            reason: 133,
            reason_text: "Policy denied".into(),
            hash: u32::MAX,
            src_label: 4,
            dst_label: 5,
            dst_id: 6,
            ifindex: 7,
            file: "bpf_lxc.c".into(),
            line: u16::MAX,
            len_orig: 9,
            proto: u8::MAX,
            port: 11,
            packet: Some(Packet {
                src_ip: "10.0.1.5".into(),
                dst_ip: "fd00::7".into(),
                src_port: 34567,
                dst_port: 0,
                protocol: "TCP".into(),
                flags: vec!["SYN".into(), "ACK".into()],
            }),
            summary: "10.0.1.5:34567 -> [fd00::7]:0 tcp SYN, ACK".into(),
            src_pod: "default/client".into(),
            dst_pod: "kube-system/dns".into(),
            data: "0a0b".into(),
            message: "{\"labels\":[\"k8s:a=\\\"b\\\"\"],\"n\":1}".into(),
        };
        same_as_serde(&full);
        let mut bare = full.clone();
        bare.packet = Some(Packet::default());
        same_as_serde(&bare);
        same_as_serde(&MonitorEvent::default());
    }

    #[test]
    fn strings_escape_as_serde_json_escapes_them() {
        let every_byte: String = (0u8..=0x7f).map(char::from).collect();
        for s in [every_byte.as_str(), "é ☃ 🦀", "\"\\\"", ""] {
            same_as_serde(&MonitorEvent {
                message: s.into(),
                ..Default::default()
            });
        }
    }
}
