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
    /// `[fd00::5]:34567 -> [fd00::7]:80 tcp SYN`. Written piece by piece
    /// into one string: one for every event a monitor client reads.
    pub fn summary(&self) -> String {
        let mut out = String::with_capacity(64);
        let host_port = |out: &mut String, ip: &str, port: u16| {
            if ip.contains(':') {
                out.push('[');
                out.push_str(ip);
                out.push(']');
            } else {
                out.push_str(ip);
            }
            out.push(':');
            out.push_str(crate::decimal::decimal(port.into(), 1, &mut [0; 20]));
        };
        match self.protocol.as_str() {
            "TCP" | "UDP" => {
                host_port(&mut out, &self.src_ip, self.src_port);
                out.push_str(" -> ");
                host_port(&mut out, &self.dst_ip, self.dst_port);
                if self.protocol == "UDP" {
                    out.push_str(" udp");
                } else {
                    out.push_str(" tcp ");
                    for (i, flag) in self.flags.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        out.push_str(flag);
                    }
                }
            }
            other => {
                out.push_str(&self.src_ip);
                out.push_str(" -> ");
                out.push_str(&self.dst_ip);
                out.push(' ');
                match other {
                    "ICMPv4" | "ICMPv6" => {
                        out.push_str(self.flags.first().map_or("other", String::as_str))
                    }
                    _ => out.push_str(&other.to_lowercase()),
                }
            }
        }
        out
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
    use super::Packet;

    /// The summary as it was once written, with the formatting machinery.
    fn formatted(p: &Packet) -> String {
        let host_port = |ip: &str, port: u16| {
            if ip.contains(':') {
                format!("[{ip}]:{port}")
            } else {
                format!("{ip}:{port}")
            }
        };
        let (src, dst) = (
            host_port(&p.src_ip, p.src_port),
            host_port(&p.dst_ip, p.dst_port),
        );
        match p.protocol.as_str() {
            "TCP" => format!("{src} -> {dst} tcp {}", p.flags.join(", ")),
            "UDP" => format!("{src} -> {dst} udp"),
            "ICMPv4" | "ICMPv6" => format!(
                "{} -> {} {}",
                p.src_ip,
                p.dst_ip,
                p.flags.first().map_or("other", String::as_str)
            ),
            other => format!("{} -> {} {}", p.src_ip, p.dst_ip, other.to_lowercase()),
        }
    }

    #[test]
    fn summaries_read_as_formatted_ones() {
        let flag_sets: [&[&str]; 3] = [&[], &["SYN"], &["SYN", "ACK", "FIN"]];
        for (src, dst) in [("10.0.1.5", "10.0.2.7"), ("fd00::5", "fd00::7")] {
            for protocol in ["TCP", "UDP", "ICMPv4", "ICMPv6", "proto 132", "Weird"] {
                for flags in flag_sets {
                    for (sport, dport) in [(0, 0), (34567, 80), (65535, 9)] {
                        let p = Packet {
                            src_ip: src.into(),
                            dst_ip: dst.into(),
                            src_port: sport,
                            dst_port: dport,
                            protocol: protocol.into(),
                            flags: flags.iter().map(|f| f.to_string()).collect(),
                        };
                        assert_eq!(p.summary(), formatted(&p));
                    }
                }
            }
        }
    }

    #[test]
    fn the_hello_line_is_json_that_begins_with_the_prefix() {
        let line = super::hello_line(2);
        assert!(line.starts_with(super::HELLO_PREFIX));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v, serde_json::json!({"type": "hello", "cpus": 2}));
    }
}
