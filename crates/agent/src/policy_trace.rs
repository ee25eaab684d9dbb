//! `cilium policy trace`: the verdict the datapath would give a flow from
//! one set of labels (or pod, or identity) to another on a port, computed
//! from the same map state the endpoints' policy maps hold, and explained.

use controlplane::policies::Policies;
use policy::mapstate::{MatchType, Verdict};
use policy::{Enforcement, Identity, Labels};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One side of a traced flow: labels, an identity, or a pod
/// (`namespace:name`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Peer {
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(default)]
    pub identity: Option<u32>,
    #[serde(default, rename = "k8s-pod")]
    pub k8s_pod: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Port {
    pub port: u16,
    #[serde(default)]
    pub protocol: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TraceRequest {
    pub from: Peer,
    pub to: Peer,
    #[serde(default)]
    pub dports: Vec<Port>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TraceResponse {
    pub log: String,
    /// `allowed` or `denied`
    pub verdict: String,
}

/// Why a trace request cannot be answered: what the caller asked is wrong.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TraceError {
    #[error("identity {0} is not known")]
    UnknownIdentity(u32),
    #[error("each side needs labels, an identity or a pod")]
    NoPeer,
    #[error("unknown protocol {0:?}: expected TCP, UDP, SCTP or ANY")]
    UnknownProtocol(String),
}

/// An identity number no real identity has, for label sets nobody holds.
const TRACE_IDENTITY: u32 = u32::MAX - 1;

/// Finds the identity of a peer: the one the labels have, else a
/// stand-in added to `universe`.
fn resolve_peer(
    peer: &Peer,
    pod: Option<(u32, Vec<String>)>,
    universe: &mut Vec<Identity>,
) -> Result<(u32, Labels), TraceError> {
    if let Some((id, labels)) = pod {
        return Ok((id, Labels::parse(labels.iter().map(String::as_str))));
    }
    if let Some(id) = peer.identity {
        let found = universe
            .iter()
            .find(|i| i.id == id)
            .ok_or(TraceError::UnknownIdentity(id))?;
        return Ok((id, found.labels.clone()));
    }
    if peer.labels.is_empty() {
        return Err(TraceError::NoPeer);
    }
    let labels = Labels::parse(peer.labels.iter().map(String::as_str));
    if let Some(i) = universe.iter().find(|i| i.labels == labels) {
        return Ok((i.id, labels));
    }
    let id = TRACE_IDENTITY
        - universe
            .iter()
            .filter(|i| i.id >= TRACE_IDENTITY - 2)
            .count() as u32;
    universe.push(Identity {
        id,
        labels: labels.clone(),
    });
    Ok((id, labels))
}

fn labels_text(l: &Labels) -> String {
    format!(
        "[{}]",
        l.iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn match_name(m: MatchType) -> &'static str {
    match m {
        MatchType::L3Only => "L3-only",
        MatchType::L3L4 => "L3/L4",
        MatchType::L4Only => "L4-only",
        MatchType::All => "allow-all",
        MatchType::L3Proto => "L3/proto",
        MatchType::ProtoOnly => "proto-only",
    }
}

fn protocol_number(p: &str) -> Result<u8, TraceError> {
    policy::Protocol::parse(p)
        .map(|p| p.number())
        .ok_or_else(|| TraceError::UnknownProtocol(p.to_owned()))
}

/// Traces `req` against the rules in force; `pods` are the peers' pod
/// identities and labels when they were given as pods.
pub fn trace(
    policies: &Policies,
    req: &TraceRequest,
    from_pod: Option<(u32, Vec<String>)>,
    to_pod: Option<(u32, Vec<String>)>,
) -> Result<TraceResponse, TraceError> {
    let (rules, revision) = policies.rules();
    let mut universe = policies.identities();
    let (src_id, src) = resolve_peer(&req.from, from_pod, &mut universe)?;
    let (dst_id, dst) = resolve_peer(&req.to, to_pod, &mut universe)?;
    let ports: Vec<(u8, u16, String)> = if req.dports.is_empty() {
        vec![(0, 0, "any".into())]
    } else {
        req.dports
            .iter()
            .map(|p| {
                let proto = if p.protocol.is_empty() {
                    "TCP"
                } else {
                    &p.protocol
                };
                Ok((
                    protocol_number(proto)?,
                    p.port,
                    format!("{}/{}", p.port, proto.to_uppercase()),
                ))
            })
            .collect::<Result<_, TraceError>>()?
    };
    let mode = policies.mode();
    let mut log = String::new();
    let _ = writeln!(
        log,
        "----------------------------------------------------------------"
    );
    let _ = writeln!(
        log,
        "Tracing From: {} => To: {} Ports: [{}]",
        labels_text(&src),
        labels_text(&dst),
        ports
            .iter()
            .map(|p| p.2.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(log, "Policy revision: {revision}, enforcement: {mode:?}");
    let mut allowed = true;
    for (egress, subject, peer, peer_id) in
        [(true, &src, &dst, dst_id), (false, &dst, &src, src_id)]
    {
        let dir = if egress { "egress" } else { "ingress" };
        let _ = writeln!(log, "\nResolving {dir} policy for {}", labels_text(subject));
        let selecting: Vec<&policy::Rule> = rules
            .iter()
            .filter(|r| {
                r.subject.matches(subject)
                    && if egress {
                        r.sets_egress()
                    } else {
                        r.sets_ingress()
                    }
            })
            .collect();
        for r in &selecting {
            let _ = writeln!(log, "* Rule {}: selected", labels_text(&r.labels));
        }
        if selecting.is_empty() && mode == Enforcement::Default {
            let _ = writeln!(log, "  No rules select it for {dir}");
        }
        let resolved = policy::resolve(&rules, subject, &universe, mode);
        for (proto, port, name) in &ports {
            let verdict = resolved.state.lookup(peer_id, egress, *proto, *port);
            let text = match verdict {
                Verdict::Allowed(m, k) => format!(
                    "allowed ({} match, entry identity {} proto {} port {}/{})",
                    match_name(m),
                    k.identity,
                    k.proto,
                    k.port,
                    k.port_prefix
                ),
                Verdict::Denied(m, _) => {
                    allowed = false;
                    format!(
                        "denied by a deny rule ({} match): Policy denied by denylist",
                        match_name(m)
                    )
                }
                Verdict::NoMatch => {
                    allowed = false;
                    "denied: no rule allows it: Policy denied".to_owned()
                }
            };
            let _ = writeln!(log, "  {name} to/from {}: {text}", labels_text(peer));
        }
    }
    let verdict = if allowed { "allowed" } else { "denied" };
    let _ = writeln!(log, "\nFinal verdict: {}", verdict.to_uppercase());
    Ok(TraceResponse {
        log,
        verdict: verdict.into(),
    })
}
