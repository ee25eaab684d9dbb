//! Cilium's monitor protocol 1.2, what `cilium-dbg monitor` reads from
//! `monitor1_2.sock` (Cilium 1.16: pkg/monitor/payload/monitor_payload.go,
//! pkg/monitor/agent/listener1_2.go and agent.go, cilium-dbg/cmd/monitor.go).
//!
//! Each connection is one gob stream (one `gob.Encoder` on the agent's
//! side, one `gob.Decoder` on the client's), so the `Payload` type is
//! defined once and then each event is one gob message; no `Meta` header
//! precedes a payload (that was protocol 1.0), and nothing is sent on
//! connecting. A payload is
//! `struct { Data []byte; CPU int; Lost uint64; Type int }`:
//! - a ring's sample: `Type` 9 (`EventSample`), `Data` the sample's bytes
//!   as read from the ring, `CPU` the ring's;
//! - records the kernel lost: `Type` 2 (`RecordLost`), `Lost` the count,
//!   `CPU` the ring's, no `Data`;
//! - an agent notification: `Type` 9, `CPU` 0, `Data` the byte 130
//!   (`MessageTypeAgent`) and then a gob stream of its own holding one
//!   `AgentNotify { Type AgentNotification /* uint32 */; Text string }`,
//!   `Text` the notification as JSON.
//!
//! As in Cilium, a listener too slow for the events loses the ones it could
//! not take, without a lost record.

use super::batch::Next;
use super::gob::{self, Kind, StructType, Value};
use super::AgentNotify;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::sync::broadcast;

/// `payload.EventSample` (PERF_RECORD_SAMPLE)
pub const EVENT_SAMPLE: i64 = 9;
/// `payload.RecordLost` (PERF_RECORD_LOST)
pub const RECORD_LOST: i64 = 2;
/// `api.MessageTypeAgent`: the first byte of an agent notification's data
pub const MESSAGE_TYPE_AGENT: u8 = 130;

static PAYLOAD: StructType = StructType {
    name: "Payload",
    fields: &[
        ("Data", Kind::Bytes),
        ("CPU", Kind::Int),
        ("Lost", Kind::Uint),
        ("Type", Kind::Int),
    ],
};

static AGENT_NOTIFY: StructType = StructType {
    name: "AgentNotify",
    fields: &[("Type", Kind::Uint), ("Text", Kind::String)],
};

/// Cilium's `payload.Payload`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Payload {
    pub data: Vec<u8>,
    pub cpu: i64,
    pub lost: u64,
    pub kind: i64,
}

impl Payload {
    /// A sample as a ring held it.
    pub fn sample(cpu: usize, raw: &[u8]) -> Self {
        Self {
            data: raw.to_vec(),
            cpu: cpu as i64,
            lost: 0,
            kind: EVENT_SAMPLE,
        }
    }

    /// Records a ring could not take.
    pub fn lost(cpu: usize, count: u64) -> Self {
        Self {
            data: Vec::new(),
            cpu: cpu as i64,
            lost: count,
            kind: RECORD_LOST,
        }
    }

    /// An agent notification, `text` its JSON.
    pub fn agent(what: AgentNotify, text: &str) -> Self {
        let mut data = vec![MESSAGE_TYPE_AGENT];
        data.extend(gob::Encoder::new().encode(
            &AGENT_NOTIFY,
            &[Value::Uint(what as u64), Value::String(text)],
        ));
        Self {
            data,
            cpu: 0,
            lost: 0,
            kind: EVENT_SAMPLE,
        }
    }

    /// Its next message on the connection `enc` writes.
    pub fn encode(&self, enc: &mut gob::Encoder) -> Vec<u8> {
        enc.encode(
            &PAYLOAD,
            &[
                Value::Bytes(&self.data),
                Value::Int(self.cpu),
                Value::Uint(self.lost),
                Value::Int(self.kind),
            ],
        )
    }
}

/// Streams the payloads to one client until it goes away.
pub async fn stream(mut conn: tokio::net::UnixStream, mut rx: broadcast::Receiver<Arc<Payload>>) {
    let mut enc = gob::Encoder::new();
    let (mut batch, mut bytes) = (Vec::new(), Vec::new());
    while super::batch::next(&mut rx, &mut batch).await {
        bytes.clear();
        for next in &batch {
            match next {
                Next::Event(pl) => bytes.extend(pl.encode(&mut enc)),
                Next::Lagged(n) => tracing::debug!(
                    subsys = "monitor-agent",
                    dropped = n,
                    "Per listener queue is full, dropping message"
                ),
            }
        }
        if let Err(e) = conn.write_all(&bytes).await {
            tracing::debug!(subsys = "monitor-agent", error = %e, "Listener disconnected");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition of `Payload` as id 65 on a fresh stream, by the
    /// specification's rules (see gob.rs): -65, wireType.StructT (delta 3),
    /// CommonType (delta 1) {Name "Payload", Id 65}, Field (delta 1): 4 x
    /// {Name, Id} with []byte = 5, int = 2, uint = 3.
    const PAYLOAD_DEFINITION: &[u8] = &[
        0x38, 0xff, 0x81, 0x03, 0x01, 0x01, 0x07, b'P', b'a', b'y', b'l', b'o', b'a', b'd', 0x01,
        0xff, 0x82, 0x00, 0x01, 0x04, //
        0x01, 0x04, b'D', b'a', b't', b'a', 0x01, 0x0a, 0x00, //
        0x01, 0x03, b'C', b'P', b'U', 0x01, 0x04, 0x00, //
        0x01, 0x04, b'L', b'o', b's', b't', 0x01, 0x06, 0x00, //
        0x01, 0x04, b'T', b'y', b'p', b'e', 0x01, 0x04, 0x00, //
        0x00, 0x00,
    ];

    #[test]
    fn a_connection_defines_payload_once_then_sends_values() {
        let mut enc = gob::Encoder::new();
        let first = Payload::sample(1, &[0xaa, 0xbb]).encode(&mut enc);
        let (definition, value) = first.split_at(PAYLOAD_DEFINITION.len());
        assert_eq!(definition, PAYLOAD_DEFINITION);
        // 11 bytes: id 65; Data (delta 1) = [aa bb]; CPU (delta 1) = 1;
        // Type (delta 2) = 9
        assert_eq!(
            value,
            [0x0b, 0xff, 0x82, 0x01, 0x02, 0xaa, 0xbb, 0x01, 0x02, 0x02, 0x12, 0x00]
        );
        // Lost on CPU 0: CPU and Data are zero and left out; Lost (delta
        // 3) = 300; Type (delta 1) = 2
        assert_eq!(
            Payload::lost(0, 300).encode(&mut enc),
            [0x09, 0xff, 0x82, 0x03, 0xfe, 0x01, 0x2c, 0x01, 0x04, 0x00]
        );
    }

    #[test]
    fn an_agent_notification_is_its_type_byte_and_a_gob_stream_of_its_own() {
        let pl = Payload::agent(AgentNotify::PolicyUpdated, "{}");
        assert_eq!((pl.kind, pl.cpu, pl.lost), (EVENT_SAMPLE, 0, 0));
        let mut expected = vec![MESSAGE_TYPE_AGENT];
        // AgentNotify as id 65: Type uint (3), Text string (6)
        expected.extend([
            0x2b, 0xff, 0x81, 0x03, 0x01, 0x01, 0x0b, b'A', b'g', b'e', b'n', b't', b'N', b'o',
            b't', b'i', b'f', b'y', 0x01, 0xff, 0x82, 0x00, 0x01, 0x02, //
            0x01, 0x04, b'T', b'y', b'p', b'e', 0x01, 0x06, 0x00, //
            0x01, 0x04, b'T', b'e', b'x', b't', 0x01, 0x0c, 0x00, //
            0x00, 0x00,
        ]);
        // Type = 5, Text = "{}"
        expected.extend([0x09, 0xff, 0x82, 0x01, 0x05, 0x01, 0x02, b'{', b'}', 0x00]);
        assert_eq!(pl.data, expected);
    }
}
