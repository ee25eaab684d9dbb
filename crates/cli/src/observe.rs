//! `cilium observe`: a client of the agent's Hubble API (`hubble.sock`),
//! flows as Hubble lists them — who talked to whom (pod names and
//! identities), ports, and the verdict with its drop reason — filtered by
//! pod, namespace, verdict, port, IP, protocol, identity and type, which
//! the agent applies (Hubble's `FlowFilter`s). It shows the last flows the
//! agent kept, and with `--follow` the ones that come after.

use crate::Ctx;
use anyhow::{bail, Context};
use hubble::flow::{self, Flow, FlowFilter};
use hubble::observer::{get_flows_response::ResponseTypes, GetFlowsRequest};
use serde_json::json;
use std::io::Write;
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
    #[arg(short = 't', long = "type", value_parser = ["trace", "drop", "policy-verdict", "capture"])]
    types: Vec<String>,
    /// How many of the kept flows to show (20 unless following)
    #[arg(long)]
    last: Option<u64>,
    /// Keep showing flows as they come
    #[arg(short = 'f', long)]
    follow: bool,
    /// compact (one line each), json (a flow a line) or jsonpb (a
    /// GetFlows response a line)
    #[arg(short = 'o', long, default_value = "compact", value_parser = ["compact", "json", "jsonpb"])]
    output: String,
    /// The Hubble server: a Unix socket (unix:///path or /path); the
    /// agent's hubble.sock by default
    #[arg(long)]
    server: Option<String>,
}

/// An address or CIDR, as Hubble's IP filters take them.
#[derive(Clone, Copy, Debug)]
pub struct IpFilter {
    net: std::net::Ipv4Addr,
    len: u8,
}

impl std::fmt::Display for IpFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.net, self.len)
    }
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

/// Hubble's numbers for `--type` names.
fn event_type(name: &str) -> i32 {
    match name {
        "drop" => 1,
        "capture" => 3,
        "trace" => 4,
        _ => 5,
    }
}

/// `name` alone means the pod in the namespace `-n` gives (else
/// `default`); `namespace/name` is taken as written.
fn pod_filters(pods: &[String], namespaces: &[String]) -> Vec<String> {
    pods.iter()
        .flat_map(|p| {
            if p.contains('/') || namespaces.is_empty() {
                vec![p.clone()]
            } else {
                namespaces.iter().map(|ns| format!("{ns}/{p}")).collect()
            }
        })
        .collect()
}

impl Args {
    fn check(&self) -> anyhow::Result<()> {
        if self.last == Some(0) && !self.follow {
            bail!("--last 0 shows nothing; use --follow to wait for new flows");
        }
        Ok(())
    }

    /// Hubble's reading of the flags: what applies to one end goes to that
    /// end; `--pod`, `--ip`, `--port`, `--identity` and `-n` match either
    /// end, so they make two filters, one for each, which a flow passes
    /// by matching either.
    pub fn filters(&self) -> Vec<FlowFilter> {
        let mut common = FlowFilter {
            verdict: self
                .verdict
                .iter()
                .map(|v| {
                    if v.eq_ignore_ascii_case("dropped") {
                        flow::Verdict::Dropped as i32
                    } else {
                        flow::Verdict::Forwarded as i32
                    }
                })
                .collect(),
            protocol: self.protocol.iter().map(|p| p.to_lowercase()).collect(),
            event_type: self
                .types
                .iter()
                .map(|t| flow::EventTypeFilter {
                    r#type: event_type(t),
                    ..Default::default()
                })
                .collect(),
            source_pod: pod_filters(&self.from_pod, &self.namespace),
            destination_pod: pod_filters(&self.to_pod, &self.namespace),
            source_ip: self.from_ip.iter().map(ToString::to_string).collect(),
            destination_ip: self.to_ip.iter().map(ToString::to_string).collect(),
            source_identity: self.from_identity.clone(),
            destination_identity: self.to_identity.clone(),
            ..Default::default()
        };
        let mut either_pods = pod_filters(&self.pod, &self.namespace);
        if self.pod.is_empty() && self.from_pod.is_empty() && self.to_pod.is_empty() {
            either_pods.extend(self.namespace.iter().map(|ns| format!("{ns}/")));
        }
        let either = !either_pods.is_empty()
            || !self.ip.is_empty()
            || !self.port.is_empty()
            || !self.identity.is_empty();
        if !either {
            return vec![common];
        }
        let mut to_dst = common.clone();
        let ips: Vec<String> = self.ip.iter().map(ToString::to_string).collect();
        let ports: Vec<String> = self.port.iter().map(ToString::to_string).collect();
        common.source_pod.extend(either_pods.iter().cloned());
        common.source_ip.extend(ips.iter().cloned());
        common.source_port.extend(ports.iter().cloned());
        common.source_identity.extend(&self.identity);
        to_dst.destination_pod.extend(either_pods);
        to_dst.destination_ip.extend(ips);
        to_dst.destination_port.extend(ports);
        to_dst.destination_identity.extend(&self.identity);
        vec![common, to_dst]
    }

    pub fn request(&self) -> GetFlowsRequest {
        let number = self.last.unwrap_or(if self.follow { 0 } else { 20 });
        GetFlowsRequest {
            number,
            follow: self.follow,
            whitelist: self.filters(),
            ..Default::default()
        }
    }
}

fn end(e: Option<&flow::Endpoint>, ip: &str, port: u32) -> String {
    let e = e.cloned().unwrap_or_default();
    let who = if e.pod_name.is_empty() {
        ip.to_owned()
    } else {
        format!("{}/{}", e.namespace, e.pod_name)
    };
    let at = if port == 0 {
        String::new()
    } else {
        format!(":{port}")
    };
    let id = if e.identity == 0 {
        String::new()
    } else {
        format!(" (ID:{})", e.identity)
    };
    format!("{who}{at}{id}")
}

fn ports(f: &Flow) -> (u32, u32) {
    use flow::layer4::Protocol as P;
    match f.l4.as_ref().and_then(|l| l.protocol.as_ref()) {
        Some(P::Tcp(t)) => (t.source_port, t.destination_port),
        Some(P::Udp(u)) => (u.source_port, u.destination_port),
        Some(P::Sctp(s)) => (s.source_port, s.destination_port),
        _ => (0, 0),
    }
}

fn time(t: Option<&prost_types::Timestamp>) -> String {
    t.and_then(|t| std::time::SystemTime::try_from(*t).ok())
        .map(api::timefmt::rfc3339_millis)
        .unwrap_or_default()
}

/// The name Cilium's datapath gives a drop reason.
fn drop_text(f: &Flow) -> String {
    abi::metrics::reason_text(u8::try_from(f.drop_reason_desc).unwrap_or(0))
}

/// What the compact line says happened.
fn what(f: &Flow) -> String {
    let verdict = flow::Verdict::try_from(f.verdict).unwrap_or_default();
    let event = f.event_type.as_ref().map_or(0, |e| e.r#type);
    let dir = flow::TrafficDirection::try_from(f.traffic_direction)
        .unwrap_or_default()
        .as_str_name();
    match event {
        5 => format!(
            "policy-verdict:{} {dir} {}",
            abi::events::match_type_name(u8::try_from(f.policy_match_type).unwrap_or(0)),
            if verdict == flow::Verdict::Dropped {
                "DENIED"
            } else {
                "ALLOWED"
            }
        ),
        _ if verdict == flow::Verdict::Dropped => format!("{} DROPPED", drop_text(f)),
        _ => {
            let point = flow::TraceObservationPoint::try_from(f.trace_observation_point)
                .unwrap_or_default()
                .as_str_name()
                .to_lowercase()
                .replace('_', "-");
            format!("{point} {}", verdict.as_str_name())
        }
    }
}

/// Hubble's compact line.
#[allow(deprecated)] // Summary: what Hubble's printer shows
pub fn compact(f: &Flow) -> String {
    let ip = f.ip.clone().unwrap_or_default();
    let (sport, dport) = ports(f);
    format!(
        "{}: {} -> {} {} ({})",
        time(f.time.as_ref()),
        end(f.source.as_ref(), &ip.source, sport),
        end(f.destination.as_ref(), &ip.destination, dport),
        what(f),
        f.summary,
    )
}

fn json_end(e: Option<&flow::Endpoint>) -> serde_json::Value {
    let e = e.cloned().unwrap_or_default();
    json!({
        "ID": e.id,
        "identity": e.identity,
        "namespace": e.namespace,
        "labels": e.labels,
        "pod_name": e.pod_name,
    })
}

fn json_l4(f: &Flow) -> serde_json::Value {
    use flow::layer4::Protocol as P;
    match f.l4.as_ref().and_then(|l| l.protocol.as_ref()) {
        Some(P::Tcp(t)) => {
            let fl = t.flags.unwrap_or_default();
            let flags: serde_json::Map<_, _> = [
                ("FIN", fl.fin),
                ("SYN", fl.syn),
                ("RST", fl.rst),
                ("PSH", fl.psh),
                ("ACK", fl.ack),
                ("URG", fl.urg),
                ("ECE", fl.ece),
                ("CWR", fl.cwr),
                ("NS", fl.ns),
            ]
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(n, _)| (n.to_owned(), json!(true)))
            .collect();
            json!({ "TCP": { "source_port": t.source_port, "destination_port": t.destination_port, "flags": flags } })
        }
        Some(P::Udp(u)) => {
            json!({ "UDP": { "source_port": u.source_port, "destination_port": u.destination_port } })
        }
        Some(P::Sctp(s)) => {
            json!({ "SCTP": { "source_port": s.source_port, "destination_port": s.destination_port } })
        }
        Some(P::IcmPv4(i)) => json!({ "ICMPv4": { "type": i.r#type, "code": i.code } }),
        Some(P::IcmPv6(i)) => json!({ "ICMPv6": { "type": i.r#type, "code": i.code } }),
        None => json!({}),
    }
}

/// The flow as Hubble's JSON shows it (proto field names, enums by name),
/// with the fields this agent fills.
#[allow(deprecated)] // Summary and drop_reason: Hubble still prints them
pub fn flow_json(f: &Flow) -> serde_json::Value {
    let ip = f.ip.clone().unwrap_or_default();
    let mut j = json!({
        "time": time(f.time.as_ref()),
        "uuid": f.uuid,
        "verdict": flow::Verdict::try_from(f.verdict).unwrap_or_default().as_str_name(),
        "IP": {
            "source": ip.source,
            "destination": ip.destination,
            "ipVersion": flow::IpVersion::try_from(ip.ip_version).unwrap_or_default().as_str_name(),
        },
        "l4": json_l4(f),
        "source": json_end(f.source.as_ref()),
        "destination": json_end(f.destination.as_ref()),
        "Type": flow::FlowType::try_from(f.r#type).unwrap_or_default().as_str_name(),
        "node_name": f.node_name,
        "event_type": { "type": f.event_type.as_ref().map_or(0, |e| e.r#type), "sub_type": f.event_type.as_ref().map_or(0, |e| e.sub_type) },
        "traffic_direction": flow::TrafficDirection::try_from(f.traffic_direction).unwrap_or_default().as_str_name(),
        "Summary": f.summary,
    });
    if let Some(r) = f.is_reply {
        j["is_reply"] = json!(r);
    }
    if f.drop_reason != 0 {
        j["drop_reason"] = json!(f.drop_reason);
        j["drop_reason_desc"] = json!(flow::DropReason::try_from(f.drop_reason_desc)
            .unwrap_or_default()
            .as_str_name());
    }
    if f.trace_observation_point != 0 {
        j["trace_observation_point"] = json!(flow::TraceObservationPoint::try_from(
            f.trace_observation_point
        )
        .unwrap_or_default()
        .as_str_name());
    }
    if f.policy_match_type != 0 {
        j["policy_match_type"] = json!(f.policy_match_type);
    }
    for (key, svc) in [
        ("source_service", &f.source_service),
        ("destination_service", &f.destination_service),
    ] {
        if let Some(s) = svc {
            j[key] = json!({ "name": s.name, "namespace": s.namespace });
        }
    }
    j
}

/// A Hubble server address as the flags give it: a Unix socket path.
fn socket(ctx: &Ctx, server: Option<&str>) -> std::path::PathBuf {
    match server {
        Some(s) => s.strip_prefix("unix://").unwrap_or(s).into(),
        None => crate::monitor::agent_socket(ctx, "hubble.sock"),
    }
}

pub fn run(ctx: &Ctx, args: &Args) -> anyhow::Result<ExitCode> {
    args.check()?;
    let path = socket(ctx, args.server.as_deref());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(async {
        let channel = hubble::client::unix_channel(&path);
        let mut client = hubble::observer::observer_client::ObserverClient::new(channel);
        let mut stream = client
            .get_flows(args.request())
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "{} (Hubble server at unix://{})",
                    e.message(),
                    path.display()
                )
            })?
            .into_inner();
        let mut out = std::io::stdout().lock();
        while let Some(resp) = stream
            .message()
            .await
            .map_err(|e| anyhow::anyhow!("reading flows: {}", e.message()))?
        {
            let line = match (&resp.response_types, args.output.as_str()) {
                (Some(ResponseTypes::Flow(f)), "compact") => compact(f),
                (Some(ResponseTypes::Flow(f)), "json") => flow_json(f).to_string(),
                (Some(ResponseTypes::Flow(f)), _) => json!({
                    "flow": flow_json(f),
                    "node_name": resp.node_name,
                    "time": time(resp.time.as_ref()),
                })
                .to_string(),
                (Some(ResponseTypes::LostEvents(l)), _) => format!(
                    "EVENTS LOST: {} {}",
                    flow::LostEventSource::try_from(l.source)
                        .unwrap_or_default()
                        .as_str_name(),
                    l.num_events_lost
                ),
                _ => continue,
            };
            writeln!(out, "{line}")?;
            out.flush()?;
        }
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drop_flow() -> Flow {
        #[allow(deprecated)]
        Flow {
            time: Some(prost_types::Timestamp {
                seconds: 1_795_417_408,
                nanos: 123_000_000,
            }),
            verdict: flow::Verdict::Dropped as i32,
            drop_reason: 133,
            drop_reason_desc: flow::DropReason::PolicyDenied as i32,
            ip: Some(flow::Ip {
                source: "10.1.0.2".into(),
                destination: "10.2.0.2".into(),
                ip_version: flow::IpVersion::IPv4 as i32,
                ..Default::default()
            }),
            l4: Some(flow::Layer4 {
                protocol: Some(flow::layer4::Protocol::Tcp(flow::Tcp {
                    source_port: 40000,
                    destination_port: 8080,
                    flags: Some(flow::TcpFlags {
                        syn: true,
                        ..Default::default()
                    }),
                })),
            }),
            source: Some(flow::Endpoint {
                identity: 300,
                namespace: "default".into(),
                pod_name: "web".into(),
                ..Default::default()
            }),
            destination: Some(flow::Endpoint {
                identity: 301,
                namespace: "prod".into(),
                pod_name: "db".into(),
                ..Default::default()
            }),
            event_type: Some(flow::CiliumEventType {
                r#type: 1,
                sub_type: 133,
            }),
            summary: "TCP Flags: SYN".into(),
            ..Default::default()
        }
    }

    fn args(extra: &[&str]) -> Args {
        crate::parse_args(extra)
    }

    #[test]
    fn compact_lines_read_as_hubble_s() {
        assert_eq!(
            compact(&drop_flow()),
            "2026-11-23T07:03:28.123Z: default/web:40000 (ID:300) -> prod/db:8080 (ID:301) Policy denied DROPPED (TCP Flags: SYN)"
        );
        let j = flow_json(&drop_flow());
        assert_eq!(j["verdict"], "DROPPED");
        assert_eq!(j["drop_reason_desc"], "POLICY_DENIED");
        assert_eq!(j["destination"]["namespace"], "prod");
        assert_eq!(j["l4"]["TCP"]["flags"]["SYN"], true);
        assert_eq!(j["Summary"], "TCP Flags: SYN");
    }

    #[test]
    fn either_end_flags_make_a_filter_per_end() {
        let f = args(&["--pod", "web", "-n", "prod", "--verdict", "dropped"]).filters();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].source_pod, ["prod/web"]);
        assert_eq!(f[1].destination_pod, ["prod/web"]);
        assert!(f
            .iter()
            .all(|x| x.verdict == [flow::Verdict::Dropped as i32]));
        let f = args(&["-n", "kube-system"]).filters();
        assert_eq!(
            (f[0].source_pod.as_slice(), f[1].destination_pod.as_slice()),
            (
                &["kube-system/".to_owned()][..],
                &["kube-system/".to_owned()][..]
            )
        );
        let f = args(&[
            "--from-ip",
            "10.1.0.0/16",
            "--to-identity",
            "301",
            "--type",
            "drop",
        ])
        .filters();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].source_ip, ["10.1.0.0/16"]);
        assert_eq!(f[0].destination_identity, [301]);
        assert_eq!(f[0].event_type[0].r#type, 1);
        let f = args(&["--port", "80", "--to-pod", "db"]).filters();
        assert_eq!(
            (f[0].source_port.as_slice(), f[0].destination_pod.as_slice()),
            (&["80".to_owned()][..], &["db".to_owned()][..])
        );
        assert_eq!(f[1].destination_port, ["80"]);
    }

    #[test]
    fn last_defaults_to_20_unless_following() {
        assert_eq!(args(&[]).request().number, 20);
        assert_eq!(args(&["-f"]).request().number, 0);
        assert_eq!(args(&["-f", "--last", "3"]).request().number, 3);
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
