//! `cilium explain <src> <dst>`: the maps the datapath would consult for a
//! new flow, read as the datapath reads them (ipcache, LB, policy maps,
//! tunnel), each decision on a line, and the verdict with the drop reason
//! where it would drop. What happens on another node is derived from the
//! same policy rules that node holds.

use abi::lb::{Lb4Key, Lb4Service, LB_LOOKUP_SCOPE_EXT};
use controlplane::endpoint::Endpoints;
use controlplane::identity::Identities;
use controlplane::ipcache::IpCache;
use controlplane::policies::Policies;
use policy::mapstate::{Key, MapState, Verdict};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ExplainRequest {
    pub src: String,
    pub dst: String,
    #[serde(default)]
    pub port: u16,
    #[serde(default)]
    pub protocol: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ExplainResponse {
    pub steps: Vec<String>,
    /// `forwarded`, `dropped`, or `depends on the backend picked`
    pub verdict: String,
    /// Cilium's text of the drop reason, when dropped
    #[serde(default)]
    pub reason: String,
}

/// What explain reads: the agent's view of the ipcache, endpoints,
/// identities and policy, and the pinned maps under `bpf_root`.
pub struct Sources<'a> {
    pub bpf_root: &'a std::path::Path,
    pub endpoints: &'a Endpoints,
    pub identities: &'a Identities,
    pub ipcache: &'a IpCache,
    pub policies: &'a Policies,
}

/// An end of the flow: its address, what it is called, and its endpoint
/// when it lives on this node.
struct End {
    ip: Ipv4Addr,
    name: String,
    local: Option<controlplane::endpoint::Endpoint>,
}

/// Why an explain request cannot be answered: what the caller asked is wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ExplainError {
    #[error("{0}: no such pod, and not an IPv4 address")]
    NoSuchEnd(String),
    #[error("unknown protocol {0:?}: expected TCP, UDP or ICMP")]
    UnknownProtocol(String),
}

fn end_of(
    d: &Sources<'_>,
    s: &str,
    pods: &[(String, String, Ipv4Addr)],
) -> Result<End, ExplainError> {
    let eps = d.endpoints.list();
    let ip = match s.parse::<Ipv4Addr>() {
        Ok(ip) => ip,
        Err(_) => {
            let (ns, name) = s
                .split_once(':')
                .or_else(|| s.split_once('/'))
                .unwrap_or(("default", s));
            eps.iter()
                .find(|e| e.k8s_namespace == ns && e.k8s_pod_name == name)
                .and_then(|e| e.ipv4)
                .or_else(|| {
                    pods.iter()
                        .find(|(n, p, _)| n == ns && p == name)
                        .map(|x| x.2)
                })
                .ok_or_else(|| ExplainError::NoSuchEnd(s.to_owned()))?
        }
    };
    let local = eps.into_iter().find(|e| e.ipv4 == Some(ip));
    let name = match &local {
        Some(e) if !e.k8s_pod_name.is_empty() => {
            format!("{}/{} ({ip})", e.k8s_namespace, e.k8s_pod_name)
        }
        _ => ip.to_string(),
    };
    Ok(End { ip, name, local })
}

/// The ipcache's identity and tunnel endpoint for an address (longest
/// prefix), world when it has none.
fn ipcache(d: &Sources<'_>, ip: Ipv4Addr) -> (u32, Option<Ipv4Addr>) {
    d.ipcache
        .list()
        .into_iter()
        .filter(|((net, len), _)| {
            let std::net::IpAddr::V4(net) = net else {
                return false;
            };
            let mask = u32::MAX.checked_shl(32 - u32::from(*len)).unwrap_or(0);
            u32::from(ip) & mask == u32::from(*net)
        })
        .max_by_key(|((_, len), _)| *len)
        .map(|(_, e)| (e.identity, e.tunnel_endpoint))
        .unwrap_or((abi::identity::WORLD, None))
}

/// An endpoint's policy map as the kernel holds it.
fn policy_map(d: &Sources<'_>, ep: u16) -> Option<MapState> {
    let map = datapath::policymap::PolicyMap::pinned(d.bpf_root, ep).ok()?;
    let entries = map.entries().ok()?;
    Some(MapState(
        entries
            .into_iter()
            .map(|(k, v)| {
                let prefix = if k.protocol == 0 {
                    0
                } else {
                    k.prefixlen.saturating_sub(48) as u8
                };
                (
                    Key::new(
                        k.sec_label,
                        k.egress != 0,
                        k.protocol,
                        k.dport.get(),
                        prefix,
                    ),
                    policy::mapstate::Entry {
                        deny: v.flags & abi::policy::POLICY_FLAG_DENY != 0,
                    },
                )
            })
            .collect(),
    ))
}

/// The backends a new connection to ip:port over proto may get, when it
/// is a service: the protocol's own frontend, else one for any protocol,
/// as the datapath looks them up.
fn service(
    d: &Sources<'_>,
    ip: Ipv4Addr,
    port: u16,
    proto: u8,
) -> Option<(u16, Vec<(Ipv4Addr, u16)>)> {
    let services = datapath::maps::Lb4Services::open(d.bpf_root).ok()?;
    let backends = datapath::maps::Lb4Backends::open(d.bpf_root).ok()?;
    let (proto, svc): (u8, Lb4Service) = [proto, abi::lb::PROTO_ANY].into_iter().find_map(|p| {
        let key = Lb4Key::new(ip, port, p, 0, LB_LOOKUP_SCOPE_EXT);
        Some((p, services.get(&key).ok()??))
    })?;
    let mut out = Vec::new();
    for slot in 1..=svc.count {
        let key = Lb4Key::new(ip, port, proto, slot, LB_LOOKUP_SCOPE_EXT);
        let Ok(Some(s)) = services.get(&key) else {
            continue;
        };
        if let Ok(Some(b)) = backends.get(&s.backend_id) {
            out.push((b.address.ip(), b.port.get()));
        }
    }
    Some((svc.rev_nat_index.get(), out))
}

fn verdict_text(v: &Verdict) -> (bool, String, &'static str) {
    match v {
        Verdict::Allowed(m, k) => (
            true,
            format!(
                "allowed ({m:?} entry: identity {} proto {} port {}/{})",
                k.identity, k.proto, k.port, k.port_prefix
            ),
            "",
        ),
        Verdict::Denied(m, _) => (
            false,
            format!("denied by a deny entry ({m:?})"),
            "Policy denied by denylist",
        ),
        Verdict::NoMatch => (false, "no entry allows it".into(), "Policy denied"),
    }
}

/// Explains one path to one destination address; Err(reason) when it drops.
fn explain_path(
    d: &Sources<'_>,
    src: &End,
    src_id: u32,
    dst_ip: Ipv4Addr,
    proto: u8,
    port: u16,
    steps: &mut Vec<String>,
) -> Result<(), &'static str> {
    let (dst_id, tunnel) = ipcache(d, dst_ip);
    let dst_local = d
        .endpoints
        .list()
        .into_iter()
        .find(|e| e.ipv4 == Some(dst_ip));
    steps.push(format!(
        "ipcache: {dst_ip} has identity {dst_id}{}",
        match (&dst_local, tunnel) {
            (Some(e), _) => format!(", local endpoint {}", e.id),
            (None, Some(t)) => format!(", behind node {t} (tunnel endpoint)"),
            (None, None) => String::new(),
        }
    ));
    if let Some(ep) = &src.local {
        let Some(map) = policy_map(d, ep.id) else {
            steps.push(format!("egress: endpoint {} has no policy map", ep.id));
            return Err("No configuration available to perform policy decision");
        };
        let (ok, text, reason) = verdict_text(&map.lookup(dst_id, true, proto, port));
        steps.push(format!(
            "egress policy of endpoint {} (cilium_policy_{:05}) to identity {dst_id}: {text}",
            ep.id, ep.id
        ));
        if !ok {
            return Err(reason);
        }
    } else {
        steps.push(format!(
            "egress: {} is not on this node; its own node checks its egress",
            src.name
        ));
    }
    match (dst_local, tunnel) {
        (Some(ep), _) => {
            let Some(map) = policy_map(d, ep.id) else {
                return Err("No configuration available to perform policy decision");
            };
            let (ok, text, reason) = verdict_text(&map.lookup(src_id, false, proto, port));
            steps.push(format!("ingress policy of endpoint {} (cilium_policy_{:05}) from identity {src_id}: {text}", ep.id, ep.id));
            if !ok {
                return Err(reason);
            }
            steps.push(format!(
                "delivered into endpoint {} through cilium_call_policy[{}] (bpf_redirect_peer)",
                ep.id, ep.id
            ));
        }
        (None, Some(node)) => {
            steps.push(format!(
                "encapsulated to {node} over cilium_vxlan, VNI = source identity {src_id}"
            ));
            let labels = d.identities.get(dst_id).unwrap_or_default();
            let (rules, _) = d.policies.rules();
            let resolved = policy::resolve(
                &rules,
                &policy::Labels::parse(labels.iter().map(String::as_str)),
                &d.policies.identities(),
                d.policies.mode(),
            );
            let (ok, text, reason) =
                verdict_text(&resolved.state.lookup(src_id, false, proto, port));
            steps.push(format!(
                "ingress policy on {node} (the same rules) from identity {src_id}: {text}"
            ));
            if !ok {
                return Err(reason);
            }
        }
        (None, None) => steps.push(format!("{dst_ip} is not a pod: the node's stack routes it")),
    }
    Ok(())
}

pub fn explain(
    d: &Sources<'_>,
    req: &ExplainRequest,
    pods: &[(String, String, Ipv4Addr)],
) -> Result<ExplainResponse, ExplainError> {
    let proto = match req.protocol.to_ascii_uppercase().as_str() {
        "" | "TCP" => 6,
        "UDP" => 17,
        "ICMP" => 1,
        p => return Err(ExplainError::UnknownProtocol(p.to_owned())),
    };
    // ICMP means a ping: an echo request, whose type policy keys carry
    // in the port (type << 8), as the datapath looks it up
    let port = if proto == 1 { 8 << 8 } else { req.port };
    let src = end_of(d, &req.src, pods)?;
    let dst = end_of(d, &req.dst, pods)?;
    let (src_id, _) = ipcache(d, src.ip);
    let mut steps = vec![format!(
        "source {}: identity {src_id}{}",
        src.name,
        src.local
            .as_ref()
            .map(|e| format!(", local endpoint {}", e.id))
            .unwrap_or_default()
    )];
    let targets: Vec<Ipv4Addr> = match service(d, dst.ip, port, proto) {
        Some((id, backends)) if proto != 1 && port != 0 => {
            if backends.is_empty() {
                steps.push(format!(
                    "service {}:{port} (ID {id}) has no backends",
                    dst.ip
                ));
                return Ok(ExplainResponse {
                    steps,
                    verdict: "dropped".into(),
                    reason: "Service backend not found".into(),
                });
            }
            let list: Vec<String> = backends.iter().map(|(ip, p)| format!("{ip}:{p}")).collect();
            steps.push(format!(
                "service {}:{port} (ID {id}): a new connection goes to one of {} (DNAT, or socket LB at connect())",
                dst.ip,
                list.join(", ")
            ));
            backends.into_iter().map(|(ip, _)| ip).collect()
        }
        _ => vec![dst.ip],
    };
    let mut outcomes = Vec::new();
    for target in targets {
        let mut path = Vec::new();
        let r = explain_path(d, &src, src_id, target, proto, port, &mut path);
        steps.extend(path.into_iter().map(|s| format!("[{target}] {s}")));
        outcomes.push(r);
    }
    let (verdict, reason) = if outcomes.iter().all(|r| r.is_ok()) {
        ("forwarded", String::new())
    } else if let Some(Err(reason)) = outcomes
        .iter()
        .find(|r| r.is_err())
        .filter(|_| outcomes.iter().all(|r| r.is_err()))
    {
        ("dropped", (*reason).to_owned())
    } else {
        ("depends on the backend picked", String::new())
    };
    Ok(ExplainResponse {
        steps,
        verdict: verdict.into(),
        reason,
    })
}
