//! Hubble's metrics as Cilium 1.16 counts them from flows: the handlers
//! `hubble-metrics` names (`flow`, `drop`, `tcp`, `port-distribution`,
//! `icmp`, `policy`, `flows-to-world`; the L7 ones are accepted and stay
//! empty, as this datapath makes no L7 flows), each with its context
//! options, and the lost-events counter; served as Prometheus text on
//! `hubble-metrics-server`.

use hubble::flow::{self, Flow};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MetricsError {
    #[error("unknown metric {0:?}")]
    UnknownHandler(String),
    #[error("metric {metric}: unknown context {value:?}")]
    UnknownContext { metric: String, value: String },
    #[error("metric {metric}: invalid labelsContext value: {value}")]
    UnknownLabel { metric: String, value: String },
    #[error("metric {0} is configured more than once")]
    Twice(String),
}

/// A context identifier: what of an endpoint a `source`/`destination`
/// label holds.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Context {
    Identity,
    Namespace,
    Pod,
    PodName,
    Dns,
    Ip,
    ReservedIdentity,
    Workload,
    WorkloadName,
    App,
}

impl Context {
    fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "identity" => Self::Identity,
            "namespace" => Self::Namespace,
            "pod" => Self::Pod,
            "pod-name" => Self::PodName,
            "dns" => Self::Dns,
            "ip" => Self::Ip,
            "reserved-identity" => Self::ReservedIdentity,
            "workload" => Self::Workload,
            "workload-name" => Self::WorkloadName,
            "app" => Self::App,
            _ => return None,
        })
    }

    fn value(self, f: &Flow, source: bool) -> String {
        let empty = flow::Endpoint::default();
        let ep = if source { &f.source } else { &f.destination };
        let ep = ep.as_ref().unwrap_or(&empty);
        let workload = || {
            ep.workloads
                .first()
                .map(|w| w.name.clone())
                .unwrap_or_default()
        };
        match self {
            Self::Namespace => ep.namespace.clone(),
            Self::Identity => ep.labels.join(","),
            Self::Pod if ep.namespace.is_empty() => ep.pod_name.clone(),
            Self::Pod => format!("{}/{}", ep.namespace, ep.pod_name),
            Self::PodName => ep.pod_name.clone(),
            Self::Dns if source => f.source_names.join(","),
            Self::Dns => f.destination_names.join(","),
            Self::Ip => {
                f.ip.as_ref()
                    .map(|ip| if source { &ip.source } else { &ip.destination })
                    .cloned()
                    .unwrap_or_default()
            }
            Self::ReservedIdentity => reserved_label(&ep.labels),
            Self::Workload => match workload() {
                w if !w.is_empty() && !ep.namespace.is_empty() => format!("{}/{w}", ep.namespace),
                w => w,
            },
            Self::WorkloadName => workload(),
            Self::App => app(&ep.labels),
        }
    }
}

const KUBE_APISERVER: &str = "reserved:kube-apiserver";

/// Cilium's monitor message type of L7 access logs (none come from this
/// datapath, but the labels name them).
const MESSAGE_TYPE_ACCESS_LOG: u8 = 129;

fn reserved_label(labels: &[String]) -> String {
    if labels.iter().any(|l| l == KUBE_APISERVER) {
        return KUBE_APISERVER.into();
    }
    labels
        .iter()
        .find(|l| l.starts_with("reserved:"))
        .cloned()
        .unwrap_or_default()
}

/// The pod's app, from the first of Kubernetes' app labels it carries.
fn app(labels: &[String]) -> String {
    for key in ["k8s:app.kubernetes.io/name=", "k8s:k8s-app=", "k8s:app="] {
        if let Some(v) = labels.iter().find_map(|l| l.strip_prefix(key)) {
            if !v.is_empty() {
                return v.to_owned();
            }
        }
    }
    String::new()
}

/// `labelsContext`'s labels, in the order a series carries them.
const CONTEXT_LABELS: [&str; 13] = [
    "source_ip",
    "source_pod",
    "source_namespace",
    "source_workload",
    "source_workload_kind",
    "source_app",
    "destination_ip",
    "destination_pod",
    "destination_namespace",
    "destination_workload",
    "destination_workload_kind",
    "destination_app",
    "traffic_direction",
];

fn context_label(label: &str, f: &Flow) -> String {
    let empty = flow::Endpoint::default();
    let (src, dst) = (
        f.source.as_ref().unwrap_or(&empty),
        f.destination.as_ref().unwrap_or(&empty),
    );
    let ip = |source: bool| Context::Ip.value(f, source);
    let workload = |e: &flow::Endpoint, kind: bool| {
        e.workloads
            .first()
            .map(|w| if kind { w.kind.clone() } else { w.name.clone() })
            .unwrap_or_default()
    };
    match label {
        "source_ip" => ip(true),
        "source_pod" => src.pod_name.clone(),
        "source_namespace" => src.namespace.clone(),
        "source_workload" => workload(src, false),
        "source_workload_kind" => workload(src, true),
        "source_app" => app(&src.labels),
        "destination_ip" => ip(false),
        "destination_pod" => dst.pod_name.clone(),
        "destination_namespace" => dst.namespace.clone(),
        "destination_workload" => workload(dst, false),
        "destination_workload_kind" => workload(dst, true),
        "destination_app" => app(&dst.labels),
        _ => match flow::TrafficDirection::try_from(f.traffic_direction) {
            Ok(flow::TrafficDirection::Ingress) => "ingress".into(),
            Ok(flow::TrafficDirection::Egress) => "egress".into(),
            _ => "unknown".into(),
        },
    }
}

/// A handler's context options (`sourceContext=pod|ip`, ...).
#[derive(Clone, Debug, Default, PartialEq)]
struct ContextOptions {
    source: Vec<Context>,
    source_ingress: Vec<Context>,
    source_egress: Vec<Context>,
    destination: Vec<Context>,
    destination_ingress: Vec<Context>,
    destination_egress: Vec<Context>,
    labels: Vec<&'static str>,
}

impl ContextOptions {
    fn parse(metric: &str, options: &[(String, String)]) -> Result<Self, MetricsError> {
        let mut o = Self::default();
        for (key, value) in options {
            let slot = match key.to_ascii_lowercase().as_str() {
                "sourcecontext" => &mut o.source,
                "sourceingresscontext" => &mut o.source_ingress,
                "sourceegresscontext" => &mut o.source_egress,
                "destinationcontext" => &mut o.destination,
                "destinationingresscontext" => &mut o.destination_ingress,
                "destinationegresscontext" => &mut o.destination_egress,
                "labelscontext" => {
                    for l in value.split(',') {
                        if !CONTEXT_LABELS.contains(&l) {
                            return Err(MetricsError::UnknownLabel {
                                metric: metric.into(),
                                value: l.into(),
                            });
                        }
                    }
                    o.labels = CONTEXT_LABELS
                        .into_iter()
                        .filter(|l| value.split(',').any(|v| v == *l))
                        .collect();
                    continue;
                }
                _ => continue,
            };
            *slot = value
                .split('|')
                .map(|v| {
                    Context::parse(v).ok_or_else(|| MetricsError::UnknownContext {
                        metric: metric.into(),
                        value: v.into(),
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        Ok(o)
    }

    fn has_source(&self) -> bool {
        !(self.source.is_empty() && self.source_ingress.is_empty() && self.source_egress.is_empty())
    }

    fn has_destination(&self) -> bool {
        !(self.destination.is_empty()
            && self.destination_ingress.is_empty()
            && self.destination_egress.is_empty())
    }

    fn names(&self) -> Vec<&'static str> {
        let mut out = self.labels.clone();
        if self.has_source() {
            out.push("source");
        }
        if self.has_destination() {
            out.push("destination");
        }
        out
    }

    /// The first identifier with a value, direction-specific ones first.
    fn pick(
        generic: &[Context],
        ingress: &[Context],
        egress: &[Context],
        f: &Flow,
        source: bool,
    ) -> String {
        let list = match flow::TrafficDirection::try_from(f.traffic_direction) {
            Ok(flow::TrafficDirection::Ingress) if !ingress.is_empty() => ingress,
            Ok(flow::TrafficDirection::Egress) if !egress.is_empty() => egress,
            _ => generic,
        };
        list.iter()
            .map(|c| c.value(f, source))
            .find(|v| !v.is_empty())
            .unwrap_or_default()
    }

    fn values(&self, f: &Flow) -> Vec<String> {
        let mut out: Vec<String> = self.labels.iter().map(|l| context_label(l, f)).collect();
        if self.has_source() {
            out.push(Self::pick(
                &self.source,
                &self.source_ingress,
                &self.source_egress,
                f,
                true,
            ));
        }
        if self.has_destination() {
            out.push(Self::pick(
                &self.destination,
                &self.destination_ingress,
                &self.destination_egress,
                f,
                false,
            ));
        }
        out
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Flow,
    Drop,
    Tcp,
    PortDistribution,
    Icmp,
    Policy,
    FlowsToWorld {
        any_drop: bool,
        port: bool,
        syn_only: bool,
    },
    /// dns, http, httpV2, kafka: no L7 flows here
    L7,
}

/// One series family: its name, help and label names.
struct Family {
    name: &'static str,
    help: &'static str,
    labels: Vec<&'static str>,
}

#[derive(Debug)]
struct Handler {
    kind: Kind,
    context: ContextOptions,
}

/// `name[:key=value;key;...]`, one item of `hubble-metrics`.
fn parse_item(item: &str) -> Result<Handler, MetricsError> {
    let (name, opts) = item.split_once(':').unwrap_or((item, ""));
    let options: Vec<(String, String)> = opts
        .split(';')
        .filter(|o| !o.is_empty())
        .map(|o| {
            let (k, v) = o.split_once('=').unwrap_or((o, ""));
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let has = |k: &str| options.iter().any(|(key, _)| key.eq_ignore_ascii_case(k));
    let kind = match name {
        "flow" => Kind::Flow,
        "drop" => Kind::Drop,
        "tcp" => Kind::Tcp,
        "port-distribution" => Kind::PortDistribution,
        "icmp" => Kind::Icmp,
        "policy" => Kind::Policy,
        "flows-to-world" => Kind::FlowsToWorld {
            any_drop: has("any-drop"),
            port: has("port"),
            syn_only: has("syn-only"),
        },
        "dns" | "http" | "httpV2" | "kafka" => Kind::L7,
        other => return Err(MetricsError::UnknownHandler(other.into())),
    };
    Ok(Handler {
        kind,
        context: ContextOptions::parse(name, &options)?,
    })
}

fn families(h: &Handler, name: &str) -> Vec<Family> {
    let ctx = h.context.names();
    let with = |first: &[&'static str], last: &[&'static str]| {
        let mut l = first.to_vec();
        l.extend(&ctx);
        l.extend(last);
        l
    };
    let family = |name, help, labels| Family { name, help, labels };
    match &h.kind {
        Kind::Flow => vec![family(
            "hubble_flows_processed_total",
            "Total number of flows processed",
            with(&["protocol", "type", "subtype", "verdict"], &[]),
        )],
        Kind::Drop => vec![family(
            "hubble_drop_total",
            "Number of drops",
            with(&[], &["reason", "protocol"]),
        )],
        Kind::Tcp => vec![family(
            "hubble_tcp_flags_total",
            "TCP flag occurrences",
            with(&["flag", "family"], &[]),
        )],
        Kind::PortDistribution => vec![family(
            "hubble_port_distribution_total",
            "Numbers of packets distributed by destination port",
            with(&["protocol", "port"], &[]),
        )],
        Kind::Icmp => vec![family(
            "hubble_icmp_total",
            "Number of ICMP messages",
            with(&["family", "type"], &[]),
        )],
        Kind::Policy => vec![family(
            "hubble_policy_verdicts_total",
            "Total number of Cilium network policy verdicts",
            with(&["direction", "match", "action"], &[]),
        )],
        Kind::FlowsToWorld { port, .. } => vec![family(
            "hubble_flows_to_world_total",
            "Total number of flows to reserved:world",
            with(
                if *port {
                    &["protocol", "verdict", "port"]
                } else {
                    &["protocol", "verdict"]
                },
                &[],
            ),
        )],
        Kind::L7 => match name {
            "dns" => vec![
                family(
                    "hubble_dns_queries_total",
                    "Number of DNS queries observed",
                    with(&[], &["rcode", "qtypes", "ips_returned"]),
                ),
                family(
                    "hubble_dns_responses_total",
                    "Number of DNS responses observed",
                    with(&[], &["rcode", "qtypes", "ips_returned"]),
                ),
                family(
                    "hubble_dns_response_types_total",
                    "Number of DNS response types",
                    with(&[], &["type", "qtypes"]),
                ),
            ],
            "kafka" => vec![family(
                "hubble_kafka_requests_total",
                "Count of Kafka requests",
                with(&[], &["topic", "api_key", "error_code", "reporter"]),
            )],
            _ => vec![family(
                "hubble_http_requests_total",
                "Count of HTTP requests",
                with(&[], &["method", "protocol", "status", "reporter"]),
            )],
        },
    }
}

/// Cilium's `FlowProtocol`: the label flows are counted under.
fn protocol(f: &Flow) -> &'static str {
    use abi::events::{NOTIFY_DBG_CAPTURE, NOTIFY_DROP, NOTIFY_POLICY_VERDICT, NOTIFY_TRACE};
    let t = f.event_type.as_ref().map_or(-1, |e| e.r#type);
    if t == i32::from(MESSAGE_TYPE_ACCESS_LOG) {
        return "Unknown L7";
    }
    let l4_types = [
        NOTIFY_DROP,
        NOTIFY_TRACE,
        NOTIFY_POLICY_VERDICT,
        NOTIFY_DBG_CAPTURE,
    ];
    if !l4_types.iter().any(|n| i32::from(*n) == t) {
        return "Unknown flow";
    }
    use flow::layer4::Protocol;
    match f.l4.as_ref().and_then(|l| l.protocol.as_ref()) {
        Some(Protocol::Tcp(_)) => "TCP",
        Some(Protocol::Udp(_)) => "UDP",
        Some(Protocol::IcmPv4(_)) => "ICMPv4",
        Some(Protocol::IcmPv6(_)) => "ICMPv6",
        Some(Protocol::Sctp(_)) => "SCTP",
        _ => "Unknown L4",
    }
}

fn verdict_name(f: &Flow) -> &'static str {
    flow::Verdict::try_from(f.verdict)
        .unwrap_or(flow::Verdict::Unknown)
        .as_str_name()
}

fn forwarded(f: &Flow) -> bool {
    f.verdict == flow::Verdict::Forwarded as i32 || f.verdict == flow::Verdict::Redirected as i32
}

impl Handler {
    /// The label values of every series `f` counts towards (one each).
    fn count(&self, f: &Flow, out: &mut Vec<Vec<String>>) {
        use flow::layer4::Protocol;
        let l4 = f.l4.as_ref().and_then(|l| l.protocol.as_ref());
        let ctx = || self.context.values(f);
        let series = |first: Vec<String>, last: Vec<String>| {
            let mut v = first;
            v.extend(ctx());
            v.extend(last);
            v
        };
        let s = |v: &str| v.to_owned();
        match &self.kind {
            Kind::Flow => {
                let t = f.event_type.as_ref().map_or(0, |e| e.r#type);
                let (type_name, subtype) = match u8::try_from(t).unwrap_or(0) {
                    abi::events::NOTIFY_DROP => ("Drop", String::new()),
                    abi::events::NOTIFY_DBG_CAPTURE => ("Capture", String::new()),
                    abi::events::NOTIFY_POLICY_VERDICT => ("PolicyVerdict", String::new()),
                    abi::events::NOTIFY_TRACE => {
                        let sub = f.event_type.as_ref().map_or(0, |e| e.sub_type) as usize;
                        (
                            "Trace",
                            abi::events::TRACE_POINTS
                                .get(sub)
                                .copied()
                                .unwrap_or_default()
                                .to_owned(),
                        )
                    }
                    MESSAGE_TYPE_ACCESS_LOG => ("L7", String::new()),
                    _ => ("Unknown", t.to_string()),
                };
                out.push(series(
                    vec![s(protocol(f)), s(type_name), subtype, s(verdict_name(f))],
                    vec![],
                ));
            }
            Kind::Drop if f.verdict == flow::Verdict::Dropped as i32 => {
                let reason = flow::DropReason::try_from(f.drop_reason_desc)
                    .unwrap_or(flow::DropReason::Unknown)
                    .as_str_name();
                out.push(series(vec![], vec![s(reason), s(protocol(f))]));
            }
            Kind::Tcp if forwarded(f) => {
                let (Some(ip), Some(Protocol::Tcp(tcp))) = (&f.ip, l4) else {
                    return;
                };
                let Some(flags) = &tcp.flags else { return };
                let family = flow::IpVersion::try_from(ip.ip_version)
                    .unwrap_or(flow::IpVersion::IpNotUsed)
                    .as_str_name();
                let mut flag = |name: &str| out.push(series(vec![s(name), s(family)], vec![]));
                if flags.fin {
                    flag("FIN");
                }
                if flags.syn {
                    flag(if flags.ack { "SYN-ACK" } else { "SYN" });
                }
                if flags.rst {
                    flag("RST");
                }
            }
            Kind::PortDistribution if forwarded(f) && f.is_reply == Some(false) => {
                let (proto, port) = match l4 {
                    Some(Protocol::Tcp(t)) => ("TCP", t.destination_port),
                    Some(Protocol::Udp(u)) => ("UDP", u.destination_port),
                    Some(Protocol::Sctp(x)) => ("SCTP", x.destination_port),
                    Some(Protocol::IcmPv4(_)) => ("ICMPv4", 0),
                    Some(Protocol::IcmPv6(_)) => ("ICMPv6", 0),
                    _ => return,
                };
                out.push(series(vec![s(proto), port.to_string()], vec![]));
            }
            Kind::Icmp => {
                // Cilium's family label says IPv4 for ICMPv6 too
                let name = match l4 {
                    Some(Protocol::IcmPv4(i)) => {
                        super::packet::icmpv4_name(i.r#type as u8, i.code as u8)
                    }
                    Some(Protocol::IcmPv6(i)) => format!("{}({})", i.r#type, i.code),
                    _ => return,
                };
                out.push(series(vec![s("IPv4"), name], vec![]));
            }
            Kind::Policy => {
                let t = f.event_type.as_ref().map_or(0, |e| e.r#type);
                let from_host = f.source.as_ref().is_some_and(|e| e.identity == 1);
                if t != i32::from(abi::events::NOTIFY_POLICY_VERDICT) || from_host {
                    return;
                }
                let direction = flow::TrafficDirection::try_from(f.traffic_direction)
                    .unwrap_or(flow::TrafficDirection::Unknown)
                    .as_str_name()
                    .to_ascii_lowercase();
                let matched =
                    abi::events::match_type_name(f.policy_match_type as u8).to_ascii_lowercase();
                let action = verdict_name(f).to_ascii_lowercase();
                out.push(series(vec![direction, matched, action], vec![]));
            }
            Kind::FlowsToWorld {
                any_drop,
                port,
                syn_only,
            } => {
                let to_world = f.destination.as_ref().is_some_and(|d| {
                    d.labels.iter().any(|l| {
                        matches!(
                            l.as_str(),
                            "reserved:world" | "reserved:world-ipv4" | "reserved:world-ipv6"
                        )
                    })
                });
                if !to_world || f.event_type.is_none() || l4.is_none() {
                    return;
                }
                let dropped = f.verdict == flow::Verdict::Dropped as i32;
                if dropped
                    && !any_drop
                    && f.drop_reason_desc != flow::DropReason::PolicyDenied as i32
                {
                    return;
                }
                let reply = f.is_reply == Some(true);
                if !dropped && reply {
                    return;
                }
                let syn = matches!(l4, Some(Protocol::Tcp(t)) if t.flags.as_ref().is_some_and(|fl| fl.syn));
                if *syn_only && (!syn || reply) {
                    return;
                }
                let mut first = vec![s(protocol(f)), s(verdict_name(f))];
                if *port {
                    first.push(match l4 {
                        Some(Protocol::Tcp(t)) => t.destination_port.to_string(),
                        Some(Protocol::Udp(u)) => u.destination_port.to_string(),
                        Some(Protocol::Sctp(x)) => x.destination_port.to_string(),
                        _ => String::new(),
                    });
                }
                out.push(series(first, vec![]));
            }
            _ => {}
        }
    }
}

/// The configured handlers and their counts.
pub struct Metrics {
    handlers: Vec<(String, Handler)>,
    /// by handler index: every series' label values and count
    series: Mutex<Vec<BTreeMap<Vec<String>, u64>>>,
    lost: Mutex<BTreeMap<&'static str, u64>>,
}

impl Metrics {
    /// The handlers of `hubble-metrics` (whitespace-separated items).
    pub fn parse(spec: &str) -> Result<Self, MetricsError> {
        let mut handlers: Vec<(String, Handler)> = Vec::new();
        for item in spec.split_whitespace() {
            let name = item.split_once(':').map_or(item, |(n, _)| n).to_owned();
            if handlers.iter().any(|(n, _)| *n == name) {
                return Err(MetricsError::Twice(name));
            }
            handlers.push((name, parse_item(item)?));
        }
        let series = Mutex::new(vec![BTreeMap::new(); handlers.len()]);
        Ok(Self {
            handlers,
            series,
            lost: Mutex::default(),
        })
    }

    /// The handlers' names, as the status reports them.
    pub fn names(&self) -> Vec<&str> {
        self.handlers.iter().map(|(n, _)| n.as_str()).collect()
    }

    pub fn process(&self, f: &Flow) {
        let mut hits = Vec::new();
        let mut series = self.series.lock().expect("metrics lock");
        for (i, (_, h)) in self.handlers.iter().enumerate() {
            h.count(f, &mut hits);
            for labels in hits.drain(..) {
                *series[i].entry(labels).or_default() += 1;
            }
        }
    }

    /// Events lost at `source` (`perf_event_ring_buffer`, ...).
    pub fn lost(&self, source: &'static str, n: u64) {
        *self
            .lost
            .lock()
            .expect("lost lock")
            .entry(source)
            .or_default() += n;
    }

    /// Prometheus' text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let lost = self.lost.lock().expect("lost lock").clone();
        out.push_str("# HELP hubble_lost_events_total Number of lost events\n# TYPE hubble_lost_events_total counter\n");
        for source in [
            "hubble_ring_buffer",
            "observer_events_queue",
            "perf_event_ring_buffer",
        ] {
            let n = lost.get(source).copied().unwrap_or(0);
            let _ = writeln!(out, "hubble_lost_events_total{{source=\"{source}\"}} {n}");
        }
        let series = self.series.lock().expect("metrics lock");
        for (i, (name, h)) in self.handlers.iter().enumerate() {
            for (fi, fam) in families(h, name).into_iter().enumerate() {
                let _ = write!(
                    out,
                    "# HELP {} {}\n# TYPE {} counter\n",
                    fam.name, fam.help, fam.name
                );
                // an L7 handler's families stay empty; the others have one
                if fi > 0 || h.kind == Kind::L7 {
                    continue;
                }
                for (values, n) in &series[i] {
                    let labels: Vec<String> = fam
                        .labels
                        .iter()
                        .zip(values)
                        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                        .collect();
                    let _ = writeln!(out, "{}{{{}}} {n}", fam.name, labels.join(","));
                }
            }
        }
        out
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use flow::layer4::Protocol;

    fn endpoint(ns: &str, pod: &str, identity: u32, labels: &[&str]) -> Option<flow::Endpoint> {
        Some(flow::Endpoint {
            namespace: ns.into(),
            pod_name: pod.into(),
            identity,
            labels: labels.iter().map(|l| l.to_string()).collect(),
            ..Default::default()
        })
    }

    fn tcp_flow(verdict: flow::Verdict, syn: bool, ack: bool, reply: bool) -> Flow {
        Flow {
            verdict: verdict as i32,
            event_type: Some(flow::CiliumEventType {
                r#type: i32::from(if verdict == flow::Verdict::Dropped {
                    abi::events::NOTIFY_DROP
                } else {
                    abi::events::NOTIFY_TRACE
                }),
                sub_type: 0,
            }),
            drop_reason_desc: if verdict == flow::Verdict::Dropped {
                flow::DropReason::PolicyDenied as i32
            } else {
                0
            },
            ip: Some(flow::Ip {
                source: "10.0.1.5".into(),
                destination: "10.0.2.7".into(),
                ip_version: flow::IpVersion::IPv4 as i32,
                ..Default::default()
            }),
            l4: Some(flow::Layer4 {
                protocol: Some(Protocol::Tcp(flow::Tcp {
                    source_port: 40000,
                    destination_port: 80,
                    flags: Some(flow::TcpFlags {
                        syn,
                        ack,
                        ..Default::default()
                    }),
                })),
            }),
            source: endpoint("default", "pod-a", 300, &["k8s:app=web"]),
            destination: endpoint("default", "pod-b", 301, &["k8s:app=db"]),
            is_reply: Some(reply),
            traffic_direction: flow::TrafficDirection::Ingress as i32,
            ..Default::default()
        }
    }

    #[test]
    fn every_handler_counts_what_ciliums_counts() {
        let m = Metrics::parse(
            "flow drop:sourceContext=pod;destinationContext=pod tcp port-distribution icmp dns httpV2:exemplars=true",
        )
        .unwrap();
        m.process(&tcp_flow(flow::Verdict::Forwarded, true, false, false));
        m.process(&tcp_flow(flow::Verdict::Forwarded, true, true, true));
        m.process(&tcp_flow(flow::Verdict::Dropped, true, false, false));
        m.lost("perf_event_ring_buffer", 3);
        let text = m.render();
        for line in [
            "hubble_flows_processed_total{protocol=\"TCP\",type=\"Trace\",subtype=\"to-endpoint\",verdict=\"FORWARDED\"} 2",
            "hubble_flows_processed_total{protocol=\"TCP\",type=\"Drop\",subtype=\"\",verdict=\"DROPPED\"} 1",
            "hubble_drop_total{source=\"default/pod-a\",destination=\"default/pod-b\",reason=\"POLICY_DENIED\",protocol=\"TCP\"} 1",
            "hubble_tcp_flags_total{flag=\"SYN\",family=\"IPv4\"} 1",
            "hubble_tcp_flags_total{flag=\"SYN-ACK\",family=\"IPv4\"} 1",
            "hubble_port_distribution_total{protocol=\"TCP\",port=\"80\"} 1",
            "hubble_lost_events_total{source=\"perf_event_ring_buffer\"} 3",
            "# TYPE hubble_dns_queries_total counter",
            "# TYPE hubble_http_requests_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        assert!(
            !text.contains("hubble_icmp_total{"),
            "no ICMP flows: {text}"
        );
    }

    #[test]
    fn contexts_and_labels_context_fill_series_labels_in_ciliums_order() {
        let m = Metrics::parse(
            "flow:labelsContext=traffic_direction,source_namespace;sourceContext=app|pod;destinationIngressContext=pod-name;destinationContext=ip",
        )
        .unwrap();
        m.process(&tcp_flow(flow::Verdict::Forwarded, true, false, false));
        let text = m.render();
        let want = "hubble_flows_processed_total{protocol=\"TCP\",type=\"Trace\",subtype=\"to-endpoint\",verdict=\"FORWARDED\",source_namespace=\"default\",traffic_direction=\"ingress\",source=\"web\",destination=\"pod-b\"} 1";
        assert!(text.lines().any(|l| l == want), "{text}");
    }

    #[test]
    fn bad_specs_name_what_is_wrong() {
        assert_eq!(
            Metrics::parse("flow nope").err(),
            Some(MetricsError::UnknownHandler("nope".into()))
        );
        assert!(matches!(
            Metrics::parse("drop:sourceContext=planet").err(),
            Some(MetricsError::UnknownContext { .. })
        ));
        assert!(matches!(
            Metrics::parse("drop:labelsContext=source_pod,moon").err(),
            Some(MetricsError::UnknownLabel { .. })
        ));
        assert_eq!(
            Metrics::parse("flow flow").err(),
            Some(MetricsError::Twice("flow".into()))
        );
        assert_eq!(Metrics::parse("").unwrap().names().len(), 0);
    }

    #[test]
    fn policy_verdicts_and_flows_to_world() {
        let m = Metrics::parse("policy flows-to-world:port;syn-only").unwrap();
        let mut verdict = tcp_flow(flow::Verdict::Forwarded, true, false, false);
        verdict.event_type = Some(flow::CiliumEventType {
            r#type: i32::from(abi::events::NOTIFY_POLICY_VERDICT),
            sub_type: 0,
        });
        verdict.policy_match_type = 2;
        m.process(&verdict);
        let mut out = tcp_flow(flow::Verdict::Forwarded, true, false, false);
        out.destination = endpoint("", "", 2, &["reserved:world"]);
        out.traffic_direction = flow::TrafficDirection::Egress as i32;
        m.process(&out);
        let text = m.render();
        assert!(text.contains("hubble_policy_verdicts_total{direction=\"ingress\",match=\"l3-l4\",action=\"forwarded\"} 1"), "{text}");
        assert!(
            text.contains(
                "hubble_flows_to_world_total{protocol=\"TCP\",verdict=\"FORWARDED\",port=\"80\"} 1"
            ),
            "{text}"
        );
    }
}
