//! `FlowFilter`s compiled once per request: a flow passes a filter when
//! every field set in it matches (each field matching when any of its
//! values does), and passes a request when it matches any whitelist
//! filter (or there are none) and no blacklist filter. Field semantics
//! are Cilium 1.16's; fields about L7 never match, as our flows have none.

use hubble::flow::{self, Flow, FlowFilter};
use std::net::IpAddr;

type Pred = Box<dyn Fn(&Flow) -> bool + Send + Sync>;

/// A request's filters, ready to run.
#[derive(Default)]
pub struct Filters {
    whitelist: Vec<Vec<Pred>>,
    blacklist: Vec<Vec<Pred>>,
}

/// A filter value that cannot be read, named with its field.
#[derive(Debug, thiserror::Error)]
#[error("invalid {field} filter {value:?}: {why}")]
pub struct FilterError {
    pub field: &'static str,
    pub value: String,
    pub why: String,
}

fn bad(field: &'static str, value: &str, why: impl Into<String>) -> FilterError {
    FilterError {
        field,
        value: value.to_owned(),
        why: why.into(),
    }
}

impl Filters {
    pub fn new(whitelist: &[FlowFilter], blacklist: &[FlowFilter]) -> Result<Self, FilterError> {
        Ok(Self {
            whitelist: whitelist.iter().map(compile).collect::<Result<_, _>>()?,
            blacklist: blacklist.iter().map(compile).collect::<Result<_, _>>()?,
        })
    }

    pub fn pass(&self, f: &Flow) -> bool {
        let all = |preds: &Vec<Pred>| preds.iter().all(|p| p(f));
        (self.whitelist.is_empty() || self.whitelist.iter().any(all))
            && !self.blacklist.iter().any(all)
    }
}

/// The end a flow without one is matched as.
static NO_ENDPOINT: flow::Endpoint = flow::Endpoint {
    id: 0,
    identity: 0,
    cluster_name: String::new(),
    namespace: String::new(),
    labels: Vec::new(),
    pod_name: String::new(),
    workloads: Vec::new(),
};

fn src(f: &Flow) -> &flow::Endpoint {
    f.source.as_ref().unwrap_or(&NO_ENDPOINT)
}

fn dst(f: &Flow) -> &flow::Endpoint {
    f.destination.as_ref().unwrap_or(&NO_ENDPOINT)
}

fn compile(ff: &FlowFilter) -> Result<Vec<Pred>, FilterError> {
    let mut p: Vec<Pred> = Vec::new();
    if !ff.uuid.is_empty() {
        let ids = ff.uuid.clone();
        p.push(Box::new(move |f| ids.contains(&f.uuid)));
    }
    ip_filter(&mut p, "source_ip", &ff.source_ip, |f| {
        f.ip.as_ref().map(|i| i.source.as_str())
    })?;
    ip_filter(&mut p, "source_ip_xlated", &ff.source_ip_xlated, |f| {
        f.ip.as_ref().map(|i| i.source_xlated.as_str())
    })?;
    ip_filter(&mut p, "destination_ip", &ff.destination_ip, |f| {
        f.ip.as_ref().map(|i| i.destination.as_str())
    })?;
    name_filter(&mut p, "source_pod", &ff.source_pod, |f| {
        Some((src(f).namespace.as_str(), src(f).pod_name.as_str()))
    })?;
    name_filter(&mut p, "destination_pod", &ff.destination_pod, |f| {
        Some((dst(f).namespace.as_str(), dst(f).pod_name.as_str()))
    })?;
    name_filter(&mut p, "source_service", &ff.source_service, |f| {
        f.source_service
            .as_ref()
            .map(|s| (s.namespace.as_str(), s.name.as_str()))
    })?;
    name_filter(
        &mut p,
        "destination_service",
        &ff.destination_service,
        |f| {
            f.destination_service
                .as_ref()
                .map(|s| (s.namespace.as_str(), s.name.as_str()))
        },
    )?;
    fqdn_filter(&mut p, &ff.source_fqdn, |f| &f.source_names);
    fqdn_filter(&mut p, &ff.destination_fqdn, |f| &f.destination_names);
    label_filter(&mut p, "source_label", &ff.source_label, |f| &src(f).labels)?;
    label_filter(&mut p, "destination_label", &ff.destination_label, |f| {
        &dst(f).labels
    })?;
    label_filter(&mut p, "node_labels", &ff.node_labels, |f| &f.node_labels)?;
    workload_filter(&mut p, &ff.source_workload, |f| &src(f).workloads);
    workload_filter(&mut p, &ff.destination_workload, |f| &dst(f).workloads);
    enum_filter(&mut p, &ff.traffic_direction, |f| f.traffic_direction);
    enum_filter(&mut p, &ff.verdict, |f| f.verdict);
    enum_filter(&mut p, &ff.drop_reason_desc, |f| f.drop_reason_desc);
    enum_filter(&mut p, &ff.ip_version, |f| {
        f.ip.as_ref().map_or(0, |i| i.ip_version)
    });
    if !ff.interface.is_empty() {
        let want = ff.interface.clone();
        p.push(Box::new(move |f| {
            let Some(have) = &f.interface else {
                return false;
            };
            want.iter().any(|w| {
                (w.index == 0 || w.index == have.index)
                    && (w.name.is_empty() || w.name == have.name)
            })
        }));
    }
    if !ff.event_type.is_empty() {
        let want = ff.event_type.clone();
        p.push(Box::new(move |f| {
            let Some(ev) = &f.event_type else {
                return false;
            };
            want.iter().any(|w| {
                (w.r#type == 0 || w.r#type == ev.r#type)
                    && (!w.match_sub_type || w.sub_type == ev.sub_type)
            })
        }));
    }
    if !ff.protocol.is_empty() {
        let want = ff
            .protocol
            .iter()
            .map(|s| protocol(s))
            .collect::<Result<Vec<_>, _>>()?;
        p.push(Box::new(move |f| want.iter().any(|w| w(f))));
    }
    port_filter(&mut p, "source_port", &ff.source_port, true)?;
    port_filter(&mut p, "destination_port", &ff.destination_port, false)?;
    if !ff.reply.is_empty() {
        let want = ff.reply.clone();
        p.push(Box::new(move |f| {
            let reply = match f.is_reply {
                Some(r) => r,
                // a drop is taken as a request
                None if f.verdict == flow::Verdict::Dropped as i32 => false,
                None => return false,
            };
            want.contains(&reply)
        }));
    }
    if !ff.source_identity.is_empty() {
        let want = ff.source_identity.clone();
        p.push(Box::new(move |f| want.contains(&src(f).identity)));
    }
    if !ff.destination_identity.is_empty() {
        let want = ff.destination_identity.clone();
        p.push(Box::new(move |f| want.contains(&dst(f).identity)));
    }
    if !ff.tcp_flags.is_empty() {
        let want = ff.tcp_flags.clone();
        p.push(Box::new(move |f| {
            let Some(have) = tcp_flags(f) else {
                return false;
            };
            want.iter().any(|w| flags_within(w, have))
        }));
    }
    if !ff.node_name.is_empty() {
        let want = ff.node_name.clone();
        p.push(Box::new(move |f| {
            want.iter().any(|w| node_matches(w, &f.node_name))
        }));
    }
    for code in &ff.http_status_code {
        if !valid_status_code(code) {
            return Err(bad("http_status_code", code, "want e.g. 404, 4+ or 40+"));
        }
    }
    // L7 fields: our flows carry no L7 record, so these never match
    let l7 = !ff.http_status_code.is_empty()
        || !ff.http_method.is_empty()
        || !ff.http_path.is_empty()
        || !ff.http_url.is_empty()
        || !ff.http_header.is_empty()
        || !ff.dns_query.is_empty();
    if l7 {
        p.push(Box::new(|f| f.l7.is_some()));
    }
    if !ff.trace_id.is_empty() {
        let want = ff.trace_id.clone();
        p.push(Box::new(move |f| {
            f.trace_context
                .as_ref()
                .and_then(|t| t.parent.as_ref())
                .is_some_and(|t| want.contains(&t.trace_id))
        }));
    }
    if let Some(x) = &ff.experimental {
        if let Some(expr) = x.cel_expression.first() {
            return Err(bad(
                "experimental.cel_expression",
                expr,
                "CEL expressions are not supported by this agent",
            ));
        }
    }
    Ok(p)
}

fn ip_filter(
    p: &mut Vec<Pred>,
    field: &'static str,
    values: &[String],
    get: fn(&Flow) -> Option<&str>,
) -> Result<(), FilterError> {
    if values.is_empty() {
        return Ok(());
    }
    let nets = values
        .iter()
        .map(|v| parse_net(v).ok_or_else(|| bad(field, v, "not an IP address or CIDR")))
        .collect::<Result<Vec<_>, _>>()?;
    p.push(Box::new(move |f| {
        let Some(ip) = get(f).and_then(|s| s.parse::<IpAddr>().ok()) else {
            return false;
        };
        nets.iter().any(|n| net_contains(*n, ip))
    }));
    Ok(())
}

fn parse_net(s: &str) -> Option<(IpAddr, u8)> {
    match s.split_once('/') {
        Some((ip, len)) => {
            let ip: IpAddr = ip.parse().ok()?;
            let len: u8 = len.parse().ok()?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            (len <= max).then_some((ip, len))
        }
        None => {
            let ip: IpAddr = s.parse().ok()?;
            Some((ip, if ip.is_ipv4() { 32 } else { 128 }))
        }
    }
}

fn net_contains((net, len): (IpAddr, u8), ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(a)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(n) & mask == u32::from(a) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(a)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(n) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// `namespace/prefix`, `namespace/` (all of it), `/prefix` (any
/// namespace) or `prefix` (in `default`).
fn name_filter(
    p: &mut Vec<Pred>,
    field: &'static str,
    values: &[String],
    get: fn(&Flow) -> Option<(&str, &str)>,
) -> Result<(), FilterError> {
    if values.is_empty() {
        return Ok(());
    }
    let mut want = Vec::new();
    for v in values {
        if v.is_empty() {
            return Err(bad(field, v, "empty"));
        }
        let (ns, prefix) = match v.split_once('/') {
            Some((ns, prefix)) => (ns.to_owned(), prefix.to_owned()),
            None => ("default".to_owned(), v.clone()),
        };
        want.push((ns, prefix));
    }
    p.push(Box::new(move |f| {
        let Some((ns, name)) = get(f) else {
            return false;
        };
        if ns.is_empty() && name.is_empty() {
            return false;
        }
        want.iter()
            .any(|(wns, prefix)| (wns.is_empty() || wns == ns) && name.starts_with(prefix.as_str()))
    }));
    Ok(())
}

/// `*` stands for any run of name characters.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            let Some(tail) = name.strip_prefix(head) else {
                return false;
            };
            (0..=tail.len()).any(|i| {
                tail.is_char_boundary(i)
                    && tail[..i]
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
                    && glob(rest, &tail[i..])
            })
        }
    }
}

fn fqdn_filter(p: &mut Vec<Pred>, values: &[String], get: fn(&Flow) -> &Vec<String>) {
    if values.is_empty() {
        return;
    }
    let want: Vec<String> = values
        .iter()
        .map(|v| v.trim_end_matches('.').to_lowercase())
        .collect();
    p.push(Box::new(move |f| {
        get(f)
            .iter()
            .any(|n| want.iter().any(|w| glob(w, n.trim_end_matches('.'))))
    }));
}

/// One requirement of a Kubernetes label selector.
enum Requirement {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// Splits at commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn parse_selector(s: &str) -> Option<Vec<Requirement>> {
    let set = |v: &str| -> Option<Vec<String>> {
        let inner = v.trim().strip_prefix('(')?.strip_suffix(')')?;
        Some(inner.split(',').map(|x| x.trim().to_owned()).collect())
    };
    let mut reqs = Vec::new();
    for part in split_top(s) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let req = if let Some(k) = part.strip_prefix('!') {
            Requirement::NotExists(k.trim().to_owned())
        } else if let Some((k, v)) = part.split_once(" notin ") {
            Requirement::NotIn(k.trim().to_owned(), set(v)?)
        } else if let Some((k, v)) = part.split_once(" in ") {
            Requirement::In(k.trim().to_owned(), set(v)?)
        } else if let Some((k, v)) = part.split_once("!=") {
            Requirement::NotIn(k.trim().to_owned(), vec![v.trim().to_owned()])
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            Requirement::In(k.trim().to_owned(), vec![v.trim().to_owned()])
        } else {
            Requirement::Exists(part.to_owned())
        };
        let key = match &req {
            Requirement::Exists(k) | Requirement::NotExists(k) => k,
            Requirement::In(k, _) | Requirement::NotIn(k, _) => k,
        };
        if key.is_empty() || key.contains(' ') {
            return None;
        }
        reqs.push(req);
    }
    Some(reqs)
}

/// The value of `key` (`source:name`, or `name` for any source) among
/// labels written `source:name=value`.
fn label_value<'a>(labels: &'a [String], key: &str) -> Option<&'a str> {
    let (want_source, want_name) = match key.split_once(':') {
        Some((s, n)) if s != "any" => (Some(s), n),
        Some((_, n)) => (None, n),
        None => (None, key),
    };
    labels.iter().find_map(|l| {
        let (source, rest) = l.split_once(':').unwrap_or(("", l));
        let (name, value) = rest.split_once('=').unwrap_or((rest, ""));
        (name == want_name && want_source.is_none_or(|s| s == source)).then_some(value)
    })
}

fn selector_matches(reqs: &[Requirement], labels: &[String]) -> bool {
    reqs.iter().all(|r| match r {
        Requirement::Exists(k) => label_value(labels, k).is_some(),
        Requirement::NotExists(k) => label_value(labels, k).is_none(),
        Requirement::In(k, vs) => label_value(labels, k).is_some_and(|v| vs.iter().any(|x| x == v)),
        Requirement::NotIn(k, vs) => {
            label_value(labels, k).is_none_or(|v| !vs.iter().any(|x| x == v))
        }
    })
}

fn label_filter(
    p: &mut Vec<Pred>,
    field: &'static str,
    values: &[String],
    get: fn(&Flow) -> &Vec<String>,
) -> Result<(), FilterError> {
    if values.is_empty() {
        return Ok(());
    }
    let selectors = values
        .iter()
        .map(|v| parse_selector(v).ok_or_else(|| bad(field, v, "not a label selector")))
        .collect::<Result<Vec<_>, _>>()?;
    p.push(Box::new(move |f| {
        let labels = get(f);
        selectors.iter().any(|s| selector_matches(s, labels))
    }));
    Ok(())
}

fn workload_filter(
    p: &mut Vec<Pred>,
    values: &[flow::Workload],
    get: fn(&Flow) -> &Vec<flow::Workload>,
) {
    if values.is_empty() {
        return;
    }
    let want = values.to_vec();
    p.push(Box::new(move |f| {
        get(f).iter().any(|w| {
            want.iter().any(|x| {
                (x.name.is_empty() || x.name == w.name) && (x.kind.is_empty() || x.kind == w.kind)
            })
        })
    }));
}

fn enum_filter(p: &mut Vec<Pred>, values: &[i32], get: fn(&Flow) -> i32) {
    if values.is_empty() {
        return;
    }
    let want = values.to_vec();
    p.push(Box::new(move |f| want.contains(&get(f))));
}

fn protocol(name: &str) -> Result<Box<dyn Fn(&Flow) -> bool + Send + Sync>, FilterError> {
    use flow::layer4::Protocol as P;
    let l4 = |f: &Flow| f.l4.as_ref().and_then(|l| l.protocol.as_ref()).cloned();
    Ok(match name.to_lowercase().as_str() {
        "tcp" => Box::new(move |f| matches!(l4(f), Some(P::Tcp(_)))),
        "udp" => Box::new(move |f| matches!(l4(f), Some(P::Udp(_)))),
        "sctp" => Box::new(move |f| matches!(l4(f), Some(P::Sctp(_)))),
        "icmp" => Box::new(move |f| matches!(l4(f), Some(P::IcmPv4(_) | P::IcmPv6(_)))),
        "icmpv4" => Box::new(move |f| matches!(l4(f), Some(P::IcmPv4(_)))),
        "icmpv6" => Box::new(move |f| matches!(l4(f), Some(P::IcmPv6(_)))),
        "dns" | "http" | "kafka" => Box::new(|f: &Flow| f.l7.is_some()),
        _ => return Err(bad("protocol", name, "unknown protocol")),
    })
}

fn ports(f: &Flow) -> Option<(u32, u32)> {
    use flow::layer4::Protocol as P;
    match f.l4.as_ref()?.protocol.as_ref()? {
        P::Tcp(t) => Some((t.source_port, t.destination_port)),
        P::Udp(u) => Some((u.source_port, u.destination_port)),
        P::Sctp(s) => Some((s.source_port, s.destination_port)),
        _ => None,
    }
}

fn port_filter(
    p: &mut Vec<Pred>,
    field: &'static str,
    values: &[String],
    source: bool,
) -> Result<(), FilterError> {
    if values.is_empty() {
        return Ok(());
    }
    let want = values
        .iter()
        .map(|v| {
            v.parse::<u16>()
                .map(u32::from)
                .map_err(|_| bad(field, v, "not a port (0-65535)"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    p.push(Box::new(move |f| {
        ports(f).is_some_and(|(s, d)| want.contains(if source { &s } else { &d }))
    }));
    Ok(())
}

fn tcp_flags(f: &Flow) -> Option<&flow::TcpFlags> {
    match f.l4.as_ref()?.protocol.as_ref()? {
        flow::layer4::Protocol::Tcp(t) => t.flags.as_ref(),
        _ => None,
    }
}

/// Every flag set in `want` is set in `have`.
fn flags_within(want: &flow::TcpFlags, have: &flow::TcpFlags) -> bool {
    let bits = |f: &flow::TcpFlags| [f.fin, f.syn, f.rst, f.psh, f.ack, f.urg, f.ece, f.cwr, f.ns];
    bits(want).iter().zip(bits(have)).all(|(w, h)| !w || h)
}

/// `node`, `cluster/node` or `cluster/`, with `*` globs; a flow's node
/// without a cluster is in `default`.
fn node_matches(pattern: &str, node: &str) -> bool {
    let (cluster, name) = node.split_once('/').unwrap_or(("default", node));
    match pattern.split_once('/') {
        Some((pc, "")) => glob(pc, cluster),
        Some((pc, pn)) => glob(pc, cluster) && glob(pn, name),
        None => glob(pattern, name),
    }
}

fn valid_status_code(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |x: &[u8]| x.iter().all(u8::is_ascii_digit);
    match b {
        [b'1'..=b'5', rest @ ..] if rest.len() == 2 && digits(rest) => true,
        [b'1'..=b'5', b'+'] => true,
        [b'1'..=b'5', d, b'+'] => d.is_ascii_digit(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow_of(src_pod: &str, dst_pod: &str, dport: u32, verdict: flow::Verdict) -> Flow {
        Flow {
            verdict: verdict as i32,
            node_name: "kind-worker".into(),
            ip: Some(flow::Ip {
                source: "10.0.1.5".into(),
                destination: "10.0.2.7".into(),
                ip_version: flow::IpVersion::IPv4 as i32,
                ..Default::default()
            }),
            l4: Some(flow::Layer4 {
                protocol: Some(flow::layer4::Protocol::Tcp(flow::Tcp {
                    source_port: 40000,
                    destination_port: dport,
                    flags: Some(flow::TcpFlags {
                        syn: true,
                        ..Default::default()
                    }),
                })),
            }),
            source: Some(flow::Endpoint {
                identity: 256,
                namespace: "default".into(),
                pod_name: src_pod.into(),
                labels: vec![
                    "k8s:app=client".into(),
                    "k8s:io.kubernetes.pod.namespace=default".into(),
                ],
                ..Default::default()
            }),
            destination: Some(flow::Endpoint {
                identity: 257,
                namespace: "prod".into(),
                pod_name: dst_pod.into(),
                labels: vec!["k8s:app=server".into()],
                ..Default::default()
            }),
            event_type: Some(flow::CiliumEventType {
                r#type: 1,
                sub_type: 133,
            }),
            ..Default::default()
        }
    }

    fn filters(white: Vec<FlowFilter>, black: Vec<FlowFilter>) -> Filters {
        Filters::new(&white, &black).unwrap()
    }

    #[test]
    fn fields_and_within_a_filter_or_across_filters() {
        let f = flow_of("client-1", "server-1", 80, flow::Verdict::Dropped);
        let both = FlowFilter {
            source_pod: vec!["default/client".into()],
            destination_port: vec!["80".into()],
            ..Default::default()
        };
        assert!(filters(vec![both.clone()], vec![]).pass(&f));
        let wrong_port = FlowFilter {
            destination_port: vec!["81".into()],
            ..both.clone()
        };
        assert!(!filters(vec![wrong_port.clone()], vec![]).pass(&f));
        assert!(filters(vec![wrong_port, both.clone()], vec![]).pass(&f));
        let dropped = FlowFilter {
            verdict: vec![flow::Verdict::Dropped as i32],
            ..Default::default()
        };
        assert!(!filters(vec![both], vec![dropped]).pass(&f));
        assert!(filters(vec![], vec![]).pass(&f));
    }

    #[test]
    fn pod_ip_label_identity_and_node_fields() {
        let f = flow_of("client-1", "server-1", 80, flow::Verdict::Forwarded);
        let ff = FlowFilter::default;
        let syn = flow::TcpFlags {
            syn: true,
            ..Default::default()
        };
        let syn_ack = flow::TcpFlags { ack: true, ..syn };
        let cases = [
            (
                FlowFilter {
                    destination_pod: vec!["prod/".into()],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    destination_pod: vec!["server".into()],
                    ..ff()
                },
                false,
            ),
            (
                FlowFilter {
                    destination_pod: vec!["/server".into()],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    source_ip: vec!["10.0.0.0/16".into()],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    destination_ip: vec!["10.0.1.5".into()],
                    ..ff()
                },
                false,
            ),
            (
                FlowFilter {
                    source_label: vec!["app=client".into()],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    source_label: vec!["k8s:app in (x, client)".into()],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    source_label: vec!["reserved:app=client".into()],
                    ..ff()
                },
                false,
            ),
            (
                FlowFilter {
                    destination_label: vec!["app!=client,!team".into()],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    destination_identity: vec![257],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    node_name: vec!["kind-*".into()],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    node_name: vec!["default/".into()],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    node_name: vec!["other/kind-worker".into()],
                    ..ff()
                },
                false,
            ),
            (
                FlowFilter {
                    protocol: vec!["TCP".into()],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    protocol: vec!["udp".into()],
                    ..ff()
                },
                false,
            ),
            (
                FlowFilter {
                    tcp_flags: vec![syn],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    tcp_flags: vec![syn_ack],
                    ..ff()
                },
                false,
            ),
            (
                FlowFilter {
                    event_type: vec![flow::EventTypeFilter {
                        r#type: 1,
                        match_sub_type: true,
                        sub_type: 133,
                    }],
                    ..ff()
                },
                true,
            ),
            (
                FlowFilter {
                    http_method: vec!["GET".into()],
                    ..ff()
                },
                false,
            ),
        ];
        for (filter, want) in cases {
            assert_eq!(
                filters(vec![filter.clone()], vec![]).pass(&f),
                want,
                "{filter:?}"
            );
        }
    }

    #[test]
    fn replies_are_known_from_conntrack_and_drops_count_as_requests() {
        let mut f = flow_of("c", "s", 80, flow::Verdict::Forwarded);
        let reply = |r: bool| {
            filters(
                vec![FlowFilter {
                    reply: vec![r],
                    ..Default::default()
                }],
                vec![],
            )
        };
        assert!(!reply(false).pass(&f), "unknown is neither");
        f.is_reply = Some(true);
        assert!(reply(true).pass(&f));
        let d = flow_of("c", "s", 80, flow::Verdict::Dropped);
        assert!(reply(false).pass(&d));
    }

    #[test]
    fn unreadable_values_are_refused_with_their_field() {
        for ff in [
            FlowFilter {
                source_ip: vec!["10.0.0.300".into()],
                ..Default::default()
            },
            FlowFilter {
                destination_port: vec!["http".into()],
                ..Default::default()
            },
            FlowFilter {
                protocol: vec!["gre".into()],
                ..Default::default()
            },
            FlowFilter {
                source_pod: vec!["".into()],
                ..Default::default()
            },
            FlowFilter {
                http_status_code: vec!["99".into()],
                ..Default::default()
            },
        ] {
            let err = Filters::new(&[ff], &[]).err().expect("refused");
            assert!(err.to_string().starts_with("invalid "), "{err}");
        }
    }

    #[test]
    fn globs_stay_within_names() {
        assert!(glob("*.cilium.io", "api.cilium.io"));
        assert!(!glob("*.io", "a/b.io"));
        assert!(glob("kind-*", "kind-worker2"));
    }
}
