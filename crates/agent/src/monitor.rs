//! The monitor: the datapath's events from `cilium_events`, decoded and
//! streamed to `cilium monitor` clients on `<run dir>/monitor1_2.sock`,
//! one JSON object per line. The rings are read by a thread of their own so
//! a burst of events never waits for the API.

use abi::Plain;
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt;
use tokio::sync::broadcast;

/// One event as clients get it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MonitorEvent {
    /// `drop`, `trace` or `policy-verdict`
    #[serde(rename = "type")]
    pub kind: String,
    /// Trace: the observation point (`to-endpoint`, `to-stack`, ...);
    /// policy verdict: the direction
    #[serde(default)]
    pub obs_point: String,
    /// Trace: the connection's state (`new`, `established`, `reply`, ...);
    /// policy verdict: the match type
    #[serde(default)]
    pub state: String,
    pub reason: u8,
    pub reason_text: String,
    pub hash: u32,
    pub src_label: u32,
    pub dst_label: u32,
    pub dst_id: u32,
    pub ifindex: u32,
    pub file: String,
    pub line: u16,
    pub len_orig: u32,
    /// `10.0.1.5:34567 -> 10.0.2.7:80 tcp SYN`, from the captured bytes
    pub summary: String,
}

/// The captured packet's addresses, ports and TCP flags, as Cilium prints
/// them.
pub fn summarize(frame: &[u8]) -> String {
    if frame.len() < 34 || frame[12..14] != [0x08, 0x00] {
        return String::new();
    }
    let ip = &frame[14..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let l4 = ip.get(ihl..).unwrap_or_default();
    let ports = |l4: &[u8]| -> Option<(u16, u16)> {
        Some((
            u16::from_be_bytes([*l4.first()?, *l4.get(1)?]),
            u16::from_be_bytes([*l4.get(2)?, *l4.get(3)?]),
        ))
    };
    match (ip[9], ports(l4)) {
        (6, Some((sp, dp))) => {
            let flags = l4.get(13).copied().unwrap_or(0);
            let names: Vec<&str> = [
                (0x02, "SYN"),
                (0x10, "ACK"),
                (0x01, "FIN"),
                (0x04, "RST"),
                (0x08, "PSH"),
            ]
            .iter()
            .filter(|(bit, _)| flags & bit != 0)
            .map(|(_, n)| *n)
            .collect();
            format!("{src}:{sp} -> {dst}:{dp} tcp {}", names.join(", "))
        }
        (17, Some((sp, dp))) => format!("{src}:{sp} -> {dst}:{dp} udp"),
        (1, _) => {
            let kind = match l4.first() {
                Some(8) => "EchoRequest",
                Some(0) => "EchoReply",
                Some(3) => "DestinationUnreachable",
                _ => "other",
            };
            format!("{src} -> {dst} {kind}")
        }
        (p, _) => format!("{src} -> {dst} proto {p}"),
    }
}

fn obs_point_name(p: u8) -> &'static str {
    match p {
        0 => "to-endpoint",
        1 => "to-proxy",
        2 => "to-host",
        3 => "to-stack",
        4 => "to-overlay",
        5 => "from-endpoint",
        7 => "from-host",
        8 => "from-stack",
        9 => "from-overlay",
        11 => "to-network",
        _ => "unknown",
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
    let payload = bytes
        .get(std::mem::size_of::<abi::events::TraceNotify>()..)
        .unwrap_or_default();
    let cap = usize::from(n.len_cap).min(payload.len());
    Some(MonitorEvent {
        kind: "trace".into(),
        obs_point: obs_point_name(n.hdr.subtype).into(),
        state: state_name(n.reason).into(),
        hash: n.hdr.hash,
        src_label: n.src_label,
        dst_label: n.dst_label,
        dst_id: u32::from(n.dst_id),
        ifindex: n.ifindex,
        len_orig: n.len_orig,
        summary: summarize(&payload[..cap]),
        ..Default::default()
    })
}

fn match_name(m: u8) -> &'static str {
    match m {
        1 => "L3-Only",
        2 => "L3-L4",
        3 => "L4-Only",
        4 => "all",
        5 => "L3-Proto",
        6 => "Proto-Only",
        _ => "none",
    }
}

fn decode_verdict(bytes: &[u8]) -> Option<MonitorEvent> {
    let n = abi::events::PolicyVerdictNotify::from_bytes(bytes)?;
    let payload = bytes
        .get(std::mem::size_of::<abi::events::PolicyVerdictNotify>()..)
        .unwrap_or_default();
    let cap = usize::from(n.len_cap).min(payload.len());
    let denied = n.verdict < 0;
    Some(MonitorEvent {
        kind: "policy-verdict".into(),
        obs_point: if n.flags & 0x3 == 2 {
            "egress"
        } else {
            "ingress"
        }
        .into(),
        state: match_name((n.flags >> 3) & 0x7).into(),
        reason: if denied { (-n.verdict) as u8 } else { 0 },
        reason_text: if denied { "deny" } else { "allow" }.into(),
        hash: n.hdr.hash,
        src_label: n.remote_label,
        dst_id: u32::from(n.hdr.source),
        line: n.dst_port,
        len_orig: n.len_orig,
        file: n.proto.to_string(),
        summary: summarize(&payload[..cap]),
        ..Default::default()
    })
}

/// A record of the rings, if it is one this agent knows.
pub fn decode(bytes: &[u8]) -> Option<MonitorEvent> {
    let hdr = abi::events::NotifyCommonHdr::from_bytes(bytes)?;
    if hdr.kind == abi::events::NOTIFY_TRACE {
        return decode_trace(bytes);
    }
    if hdr.kind == abi::events::NOTIFY_POLICY_VERDICT {
        return decode_verdict(bytes);
    }
    if hdr.kind != abi::events::NOTIFY_DROP {
        return None;
    }
    let n = abi::events::DropNotify::from_bytes(bytes)?;
    let payload = bytes
        .get(std::mem::size_of::<abi::events::DropNotify>()..)
        .unwrap_or_default();
    let cap = usize::from(n.len_cap).min(payload.len());
    Some(MonitorEvent {
        kind: "drop".into(),
        obs_point: String::new(),
        state: String::new(),
        reason: hdr.subtype,
        reason_text: abi::metrics::reason_text(hdr.subtype),
        hash: hdr.hash,
        src_label: n.src_label,
        dst_label: n.dst_label,
        dst_id: n.dst_id,
        ifindex: n.ifindex,
        file: abi::metrics::source_file_name(n.file).to_owned(),
        line: n.line,
        len_orig: n.len_orig,
        summary: summarize(&payload[..cap]),
    })
}

/// Where clients connect: beside the API socket.
pub fn socket_path(api_socket: &Path) -> PathBuf {
    api_socket.with_file_name("monitor1_2.sock")
}

/// Reads the rings on a thread of their own into `tx`; lost records are
/// counted in the log.
fn read_rings(bpf_root: PathBuf, tx: broadcast::Sender<String>) -> Option<usize> {
    let mut reader = match datapath::events::EventReader::open(&bpf_root) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(subsys = "monitor", error = %e, "Unable to read datapath events; cilium monitor will stay silent");
            return None;
        }
    };
    let cpus = reader.cpus();
    std::thread::Builder::new()
        .name("monitor".into())
        .spawn(move || loop {
            reader.poll(1000, &mut |rec| match rec {
                datapath::events::Record::Sample(bytes) => {
                    if tx.receiver_count() == 0 {
                        return;
                    }
                    if let Some(ev) = decode(bytes) {
                        let _ = tx.send(serde_json::to_string(&ev).expect("event serializes"));
                    }
                }
                datapath::events::Record::Lost(n) => {
                    tracing::warn!(subsys = "monitor", lost = n, "Datapath events lost");
                }
            });
        })
        .ok()?;
    Some(cpus)
}

/// Serves `cilium monitor` clients until `shutdown`.
pub async fn serve(
    bpf_root: PathBuf,
    socket: PathBuf,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (tx, _) = broadcast::channel::<String>(4096);
    let cpus = read_rings(bpf_root, tx.clone()).unwrap_or(0);
    let _ = std::fs::remove_file(&socket);
    let listener = tokio::net::UnixListener::bind(&socket)
        .map_err(|e| anyhow::anyhow!("binding the monitor socket {}: {e}", socket.display()))?;
    tracing::info!(subsys = "monitor", socket = %socket.display(), cpus, "Monitor listening");
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let Ok((mut stream, _)) = accepted else { continue };
                let mut rx = tx.subscribe();
                tokio::spawn(async move {
                    let hello = format!("{{\"type\":\"hello\",\"cpus\":{cpus}}}\n");
                    if stream.write_all(hello.as_bytes()).await.is_err() {
                        return;
                    }
                    loop {
                        let line = match rx.recv().await {
                            Ok(l) => l,
                            Err(broadcast::error::RecvError::Lagged(n)) => {
                                format!("{{\"type\":\"lost\",\"reason\":0,\"len_orig\":{n}}}")
                            }
                            Err(broadcast::error::RecvError::Closed) => return,
                        };
                        if stream.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        }
    }
    let _ = std::fs::remove_file(&socket);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_records_decode_with_their_packet() {
        let mut rec = vec![0u8; 36];
        rec[0] = abi::events::NOTIFY_DROP;
        rec[1] = 133;
        rec[12] = 54; // len_cap
        rec[16..20].copy_from_slice(&256u32.to_ne_bytes());
        rec[20..24].copy_from_slice(&257u32.to_ne_bytes());
        rec[30] = 2; // bpf_lxc.c
        let mut frame = vec![0u8; 54];
        frame[12] = 0x08;
        frame[14] = 0x45;
        frame[14 + 9] = 6;
        frame[26..30].copy_from_slice(&[10, 0, 1, 5]);
        frame[30..34].copy_from_slice(&[10, 0, 2, 7]);
        frame[34..36].copy_from_slice(&34567u16.to_be_bytes());
        frame[36..38].copy_from_slice(&80u16.to_be_bytes());
        frame[34 + 13] = 0x02;
        rec.extend_from_slice(&frame);
        let ev = decode(&rec).unwrap();
        assert_eq!(ev.reason_text, "Policy denied");
        assert_eq!((ev.src_label, ev.dst_label), (256, 257));
        assert_eq!(ev.file, "bpf_lxc.c");
        assert_eq!(ev.summary, "10.0.1.5:34567 -> 10.0.2.7:80 tcp SYN");
    }
}
