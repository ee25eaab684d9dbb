//! Events of `cilium monitor` and `cilium observe`, as the agent streams
//! them (one JSON object per line).

use serde::{Deserialize, Serialize};

/// How the agent's JSON stream begins: `{"type":"hello","cpus":N}`, N
/// the CPUs whose rings it reads. Clients match lines by this prefix.
pub const HELLO_PREFIX: &str = r#"{"type":"hello""#;

/// The stream's first line.
pub fn hello_line(cpus: usize) -> String {
    format!(r#"{HELLO_PREFIX},"cpus":{cpus}}}"#)
}

/// The packet a record captured, as far as its first bytes tell.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Packet {
    pub src_ip: String,
    pub dst_ip: String,
    #[serde(default)]
    pub src_port: u16,
    #[serde(default)]
    pub dst_port: u16,
    /// `TCP`, `UDP`, `ICMPv4`, `ICMPv6` or `proto N`
    pub protocol: String,
    /// TCP flags set (`SYN`, `ACK`, ...), or the ICMP message
    #[serde(default)]
    pub flags: Vec<String>,
}

impl Packet {
    /// Cilium's summary: `10.0.1.5:34567 -> 10.0.2.7:80 tcp SYN`.
    /// IPv6 addresses are bracketed before a port:
    /// `[fd00::5]:34567 -> [fd00::7]:80 tcp SYN`.
    pub fn summary(&self) -> String {
        let host_port = |ip: &str, port: u16| {
            if ip.contains(':') {
                format!("[{ip}]:{port}")
            } else {
                format!("{ip}:{port}")
            }
        };
        let (src, dst) = (
            host_port(&self.src_ip, self.src_port),
            host_port(&self.dst_ip, self.dst_port),
        );
        match self.protocol.as_str() {
            "TCP" => format!("{src} -> {dst} tcp {}", self.flags.join(", ")),
            "UDP" => format!("{src} -> {dst} udp"),
            "ICMPv4" | "ICMPv6" => format!(
                "{} -> {} {}",
                self.src_ip,
                self.dst_ip,
                self.flags.first().map_or("other", String::as_str)
            ),
            other => format!(
                "{} -> {} {}",
                self.src_ip,
                self.dst_ip,
                other.to_lowercase()
            ),
        }
    }
}

/// One event as clients get it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MonitorEvent {
    /// `drop`, `trace`, `policy-verdict` or `agent`
    #[serde(rename = "type")]
    pub kind: String,
    /// When the agent read it (RFC 3339, milliseconds)
    #[serde(default)]
    pub time: String,
    #[serde(default)]
    pub cpu: u32,
    /// The endpoint whose program reported it (0: the host's or unknown)
    #[serde(default)]
    pub source: u32,
    /// Trace: the observation point (`to-endpoint`, `to-stack`, ...);
    /// policy verdict: the direction (`ingress`, `egress`)
    #[serde(default)]
    pub obs_point: String,
    /// Trace: the connection's state (`new`, `established`, `reply`, ...);
    /// policy verdict: the match type (`L3-L4`, `none`, ...)
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub reason: u8,
    /// Drop: Cilium's reason text; policy verdict: `allow` or `deny`;
    /// agent: the notification's name (`Policy updated`, ...)
    #[serde(default)]
    pub reason_text: String,
    #[serde(default)]
    pub hash: u32,
    /// The source identity (policy verdict: the peer's)
    #[serde(default)]
    pub src_label: u32,
    #[serde(default)]
    pub dst_label: u32,
    /// The destination endpoint (policy verdict: the local one)
    #[serde(default)]
    pub dst_id: u32,
    #[serde(default)]
    pub ifindex: u32,
    #[serde(default)]
    pub file: String,
    #[serde(default)]
    pub line: u16,
    #[serde(default)]
    pub len_orig: u32,
    /// Policy verdict: the protocol and destination port decided on
    #[serde(default)]
    pub proto: u8,
    #[serde(default)]
    pub port: u16,
    #[serde(default)]
    pub packet: Option<Packet>,
    /// `10.0.1.5:34567 -> 10.0.2.7:80 tcp SYN`, from the captured bytes
    #[serde(default)]
    pub summary: String,
    /// `namespace/pod` of each end, where the agent knows it
    #[serde(default)]
    pub src_pod: String,
    #[serde(default)]
    pub dst_pod: String,
    /// The captured bytes in hex (for `-vv`)
    #[serde(default)]
    pub data: String,
    /// Agent notifications: the JSON text Cilium prints after the name
    #[serde(default)]
    pub message: String,
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_hello_line_is_json_that_begins_with_the_prefix() {
        let line = super::hello_line(2);
        assert!(line.starts_with(super::HELLO_PREFIX));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v, serde_json::json!({"type": "hello", "cpus": 2}));
    }
}
