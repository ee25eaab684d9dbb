//! `cilium observe`: flows from the agent's events, as Hubble lists them —
//! who talked to whom (pod names and identities), ports, and the verdict
//! with its drop reason — filtered by pod, namespace, verdict, port, IP,
//! protocol, identity and type. It shows the last flows the agent kept, and with `--follow` the
//! ones that come after.

use crate::Ctx;
use anyhow::{bail, Context};
use api::monitor::MonitorEvent;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Show flows from or to this pod ([namespace/]name, a name prefix)
    #[arg(long)]
    pod: Vec<String>,
    /// Show flows from this pod
    #[arg(long = "from-pod")]
    from_pod: Vec<String>,
    /// Show flows to this pod
    #[arg(long = "to-pod")]
    to_pod: Vec<String>,
    /// Show flows from or to pods of this namespace
    #[arg(short = 'n', long)]
    namespace: Vec<String>,
    /// Show only flows with this verdict
    #[arg(long, value_parser = ["FORWARDED", "DROPPED"], ignore_case = true)]
    verdict: Vec<String>,
    /// Show flows from or to this port
    #[arg(long)]
    port: Vec<u16>,
    /// Show flows from or to this IP address (or CIDR)
    #[arg(long)]
    ip: Vec<IpFilter>,
    /// Show flows from this IP address (or CIDR)
    #[arg(long = "from-ip")]
    from_ip: Vec<IpFilter>,
    /// Show flows to this IP address (or CIDR)
    #[arg(long = "to-ip")]
    to_ip: Vec<IpFilter>,
    /// Show only flows of this L4 protocol (tcp, udp, icmp)
    #[arg(long, value_parser = ["tcp", "udp", "icmp", "icmpv4"], ignore_case = true)]
    protocol: Vec<String>,
    /// Show flows from or to this security identity
    #[arg(long)]
    identity: Vec<u32>,
    /// Show flows from this security identity
    #[arg(long = "from-identity")]
    from_identity: Vec<u32>,
    /// Show flows to this security identity
    #[arg(long = "to-identity")]
    to_identity: Vec<u32>,
    /// Show only these event types
    #[arg(short = 't', long = "type", value_parser = ["trace", "drop", "policy-verdict"])]
    types: Vec<String>,
    /// How many of the kept flows to show
    #[arg(long, default_value_t = 20)]
    last: usize,
    /// Keep showing flows as they come
    #[arg(short = 'f', long)]
    follow: bool,
    /// compact (one line each) or json
    #[arg(short = 'o', long, default_value = "compact", value_parser = ["compact", "json", "jsonpb"])]
    output: String,
}

/// An address or CIDR, as Hubble's IP filters take them.
#[derive(Clone, Copy, Debug)]
pub struct IpFilter {
    net: std::net::Ipv4Addr,
    len: u8,
}

/// An `--ip`/`--from-ip`/`--to-ip` value that is not an IPv4 address or
/// CIDR; clap prints it after the flag's name.
#[derive(Debug, thiserror::Error)]
pub enum IpFilterError {
    /// The address part, as written.
    #[error("invalid IP address {0:?} (only IPv4 is supported)")]
    Address(String),
    /// The whole value, as written.
    #[error("invalid prefix length in {0:?}")]
    PrefixLength(String),
}

impl std::str::FromStr for IpFilter {
    type Err = IpFilterError;
    fn from_str(s: &str) -> Result<Self, IpFilterError> {
        let (ip, len) = s.split_once('/').unwrap_or((s, "32"));
        let net = ip
            .parse()
            .map_err(|_| IpFilterError::Address(ip.to_owned()))?;
        let len = len
            .parse::<u8>()
            .ok()
            .filter(|l| *l <= 32)
            .ok_or_else(|| IpFilterError::PrefixLength(s.to_owned()))?;
        Ok(Self { net, len })
    }
}

impl IpFilter {
    fn contains(&self, ip: &str) -> bool {
        let Ok(ip) = ip.parse::<std::net::Ipv4Addr>() else {
            return false;
        };
        policy::rule::Cidr::new(self.net, self.len).contains(&policy::rule::Cidr::new(ip, 32))
    }
}

/// Hubble's verdict of an event.
fn verdict(ev: &MonitorEvent) -> &'static str {
    match ev.kind.as_str() {
        "drop" => "DROPPED",
        "policy-verdict" if ev.reason_text == "deny" => "DROPPED",
        _ => "FORWARDED",
    }
}

/// The two ends' identities as far as the event tells.
fn identities(ev: &MonitorEvent) -> (u32, u32) {
    match (ev.kind.as_str(), ev.obs_point.as_str()) {
        ("policy-verdict", "egress") => (0, ev.src_label),
        ("policy-verdict", _) => (ev.src_label, 0),
        _ => (ev.src_label, ev.dst_label),
    }
}

/// `[namespace/]prefix` against `namespace/pod`.
fn pod_matches(filter: &str, pod: &str, namespaces: &[String]) -> bool {
    if pod.is_empty() {
        return false;
    }
    if filter.contains('/') {
        return pod.starts_with(filter);
    }
    let (ns, name) = pod.split_once('/').unwrap_or(("", pod));
    name.starts_with(filter)
        && (namespaces.is_empty() && ns == "default" || namespaces.iter().any(|n| n == ns))
}

impl Args {
    fn check(&self) -> anyhow::Result<()> {
        if self.last == 0 && !self.follow {
            bail!("--last 0 shows nothing; use --follow to wait for new flows");
        }
        Ok(())
    }

    fn wants(&self, ev: &MonitorEvent) -> bool {
        let Some(p) = &ev.packet else { return false };
        let (src, dst) = (ev.src_pod.as_str(), ev.dst_pod.as_str());
        let ns_of = |pod: &str| pod.split_once('/').map(|x| x.0.to_owned());
        let any_pod = |filters: &[String], pods: &[&str]| {
            filters.is_empty()
                || filters
                    .iter()
                    .any(|f| pods.iter().any(|pod| pod_matches(f, pod, &self.namespace)))
        };
        (self.types.is_empty() || self.types.contains(&ev.kind))
            && (self.verdict.is_empty()
                || self
                    .verdict
                    .iter()
                    .any(|v| v.eq_ignore_ascii_case(verdict(ev))))
            && (self.port.is_empty()
                || self.port.contains(&p.src_port)
                || self.port.contains(&p.dst_port))
            && (self.namespace.is_empty()
                || [src, dst]
                    .iter()
                    .any(|pod| ns_of(pod).is_some_and(|ns| self.namespace.contains(&ns))))
            && any_pod(&self.pod, &[src, dst])
            && any_pod(&self.from_pod, &[src])
            && any_pod(&self.to_pod, &[dst])
            && self.wants_ends(ev, p)
    }

    /// The address, protocol and identity filters.
    fn wants_ends(&self, ev: &MonitorEvent, p: &api::monitor::Packet) -> bool {
        let any_ip = |filters: &[IpFilter], ips: &[&str]| {
            filters.is_empty() || filters.iter().any(|f| ips.iter().any(|ip| f.contains(ip)))
        };
        let (src_id, dst_id) = identities(ev);
        let any_id = |filters: &[u32], ids: &[u32]| {
            filters.is_empty() || filters.iter().any(|f| ids.contains(f))
        };
        let proto = p.protocol.to_ascii_lowercase();
        any_ip(&self.ip, &[&p.src_ip, &p.dst_ip])
            && any_ip(&self.from_ip, &[&p.src_ip])
            && any_ip(&self.to_ip, &[&p.dst_ip])
            && (self.protocol.is_empty()
                || self
                    .protocol
                    .iter()
                    .any(|f| proto.starts_with(&f.to_ascii_lowercase())))
            && any_id(&self.identity, &[src_id, dst_id])
            && any_id(&self.from_identity, &[src_id])
            && any_id(&self.to_identity, &[dst_id])
    }
}

fn end(pod: &str, ip: &str, port: u16, id: u32) -> String {
    let who = if pod.is_empty() { ip } else { pod };
    let at = if port == 0 {
        String::new()
    } else {
        format!(":{port}")
    };
    let id = if id == 0 {
        String::new()
    } else {
        format!(" (ID:{id})")
    };
    format!("{who}{at}{id}")
}

/// Hubble's summary of a packet: `TCP Flags: SYN`, `ICMPv4 EchoRequest`.
fn summary(p: &api::monitor::Packet) -> String {
    match p.protocol.as_str() {
        "TCP" => format!("TCP Flags: {}", p.flags.join(", ")),
        "ICMPv4" => format!("ICMPv4 {}", p.flags.join(", ")),
        other => other.to_owned(),
    }
}

/// Hubble's compact line.
pub fn compact(ev: &MonitorEvent) -> String {
    let p = ev.packet.clone().unwrap_or_default();
    let (sid, did) = identities(ev);
    let what = match ev.kind.as_str() {
        "drop" => format!("{} DROPPED", ev.reason_text),
        "policy-verdict" => format!(
            "policy-verdict:{} {} {}",
            ev.state,
            ev.obs_point.to_uppercase(),
            if ev.reason_text == "deny" {
                "DENIED"
            } else {
                "ALLOWED"
            }
        ),
        _ => format!("{} FORWARDED", ev.obs_point),
    };
    format!(
        "{}: {} -> {} {what} ({})",
        ev.time,
        end(&ev.src_pod, &p.src_ip, p.src_port, sid),
        end(&ev.dst_pod, &p.dst_ip, p.dst_port, did),
        summary(&p),
    )
}

fn json_end(pod: &str, id: u32) -> serde_json::Value {
    let (ns, name) = pod.split_once('/').unwrap_or(("", ""));
    json!({ "identity": id, "namespace": ns, "pod_name": name })
}

/// Hubble's flow object (the fields this agent knows).
pub fn flow_json(ev: &MonitorEvent) -> serde_json::Value {
    let p = ev.packet.clone().unwrap_or_default();
    let (sid, did) = identities(ev);
    let l4 = match p.protocol.as_str() {
        "TCP" => json!({ "TCP": {
            "source_port": p.src_port,
            "destination_port": p.dst_port,
            "flags": p.flags.iter().map(|f| (f.clone(), json!(true))).collect::<serde_json::Map<_, _>>(),
        }}),
        "UDP" => json!({ "UDP": { "source_port": p.src_port, "destination_port": p.dst_port } }),
        _ => json!({ "ICMPv4": { "type": p.flags.first() } }),
    };
    let mut flow = json!({
        "time": ev.time,
        "verdict": verdict(ev),
        "IP": { "source": p.src_ip, "destination": p.dst_ip, "ipVersion": "IPv4" },
        "l4": l4,
        "source": json_end(&ev.src_pod, sid),
        "destination": json_end(&ev.dst_pod, did),
        "Type": "L3_L4",
        "event_type": { "type": ev.kind },
        "Summary": summary(&p),
    });
    if ev.kind == "drop" {
        flow["drop_reason"] = json!(ev.reason);
        flow["drop_reason_desc"] = json!(ev.reason_text);
    }
    if ev.kind == "policy-verdict" {
        flow["traffic_direction"] = json!(ev.obs_point.to_uppercase());
        flow["policy_match_type"] = json!(ev.state);
    }
    if ev.kind == "trace" {
        flow["trace_observation_point"] = json!(ev.obs_point.to_uppercase().replace('-', "_"));
    }
    flow
}

pub fn run(ctx: &Ctx, args: &Args) -> anyhow::Result<ExitCode> {
    args.check()?;
    let path = crate::monitor::agent_socket(ctx, "hubble.sock");
    let stream = std::os::unix::net::UnixStream::connect(&path)
        .with_context(|| format!("connecting to the flow observer at {}", path.display()))?;
    let mut out = std::io::stdout().lock();
    let show = |out: &mut std::io::StdoutLock, ev: &MonitorEvent| -> anyhow::Result<()> {
        if args.output == "compact" {
            writeln!(out, "{}", compact(ev))?;
        } else {
            writeln!(out, "{}", flow_json(ev))?;
        }
        Ok(out.flush()?)
    };
    let mut kept = Vec::new();
    let mut replayed = false;
    for text in BufReader::new(stream).lines() {
        let text = text.context("reading from the flow observer")?;
        let raw: serde_json::Value = serde_json::from_str(&text).context("malformed flow")?;
        if raw["type"] == "replay-end" {
            let skip = kept.len().saturating_sub(args.last);
            for ev in kept.drain(..).skip(skip) {
                show(&mut out, &ev)?;
            }
            if !args.follow {
                break;
            }
            replayed = true;
            continue;
        }
        let ev: MonitorEvent = serde_json::from_value(raw).context("malformed flow")?;
        if !args.wants(&ev) {
            continue;
        }
        if replayed {
            show(&mut out, &ev)?;
        } else {
            kept.push(ev);
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::monitor::Packet;

    fn drop_ev() -> MonitorEvent {
        MonitorEvent {
            kind: "drop".into(),
            time: "2026-11-23T07:03:28.123Z".into(),
            reason: 133,
            reason_text: "Policy denied".into(),
            src_label: 300,
            dst_label: 301,
            src_pod: "default/web".into(),
            dst_pod: "prod/db".into(),
            packet: Some(Packet {
                src_ip: "10.1.0.2".into(),
                dst_ip: "10.2.0.2".into(),
                src_port: 40000,
                dst_port: 8080,
                protocol: "TCP".into(),
                flags: vec!["SYN".into()],
            }),
            ..Default::default()
        }
    }

    fn args(extra: &[&str]) -> Args {
        crate::parse_args(extra)
    }

    #[test]
    fn compact_lines_read_as_hubble_s() {
        assert_eq!(
            compact(&drop_ev()),
            "2026-11-23T07:03:28.123Z: default/web:40000 (ID:300) -> prod/db:8080 (ID:301) Policy denied DROPPED (TCP Flags: SYN)"
        );
        let j = flow_json(&drop_ev());
        assert_eq!(j["verdict"], "DROPPED");
        assert_eq!(j["destination"]["namespace"], "prod");
        assert_eq!(j["l4"]["TCP"]["flags"]["SYN"], true);
        assert_eq!(j["Summary"], "TCP Flags: SYN");
    }

    #[test]
    fn filters_select_by_pod_namespace_verdict_and_port() {
        let ev = drop_ev();
        for (flags, expected) in [
            (&["--pod", "web"][..], true),
            (&["--pod", "db"], false),
            (&["--pod", "prod/db"], true),
            (&["--pod", "db", "-n", "prod"], true),
            (&["--from-pod", "prod/db"], false),
            (&["--to-pod", "prod/db"], true),
            (&["-n", "kube-system"], false),
            (&["--verdict", "dropped"], true),
            (&["--verdict", "FORWARDED"], false),
            (&["--port", "8080"], true),
            (&["--port", "80"], false),
            (&["--type", "trace"], false),
            (&["--ip", "10.2.0.2"], true),
            (&["--from-ip", "10.2.0.2"], false),
            (&["--from-ip", "10.1.0.0/16"], true),
            (&["--to-ip", "10.1.0.0/16"], false),
            (&["--protocol", "tcp"], true),
            (&["--protocol", "UDP"], false),
            (&["--identity", "301"], true),
            (&["--from-identity", "301"], false),
            (&["--to-identity", "301"], true),
            (&["--from-identity", "300", "--to-identity", "302"], false),
        ] {
            assert_eq!(args(flags).wants(&ev), expected, "{flags:?}");
        }
    }

    #[test]
    fn bad_ip_filters_are_named() {
        assert!("10.0.0.0/33"
            .parse::<IpFilter>()
            .unwrap_err()
            .to_string()
            .contains("prefix length"));
        assert!("fd00::1"
            .parse::<IpFilter>()
            .unwrap_err()
            .to_string()
            .contains("only IPv4"));
    }
}
