//! From rules to one endpoint's policy: which rules select it, whether each
//! direction is enforced, and the map entries its peers and ports become.

use crate::labels::{Labels, SOURCE_RESERVED};
use crate::mapstate::{range_prefixes, Key, MapState};
use crate::rule::{Cidr, Entity, Peer, PeerRule, PortProtocol, Protocol, Rule};

/// A security identity as policy sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub id: u32,
    pub labels: Labels,
}

impl Identity {
    /// The prefix of a CIDR identity (its longest `cidr:` label).
    pub fn cidr(&self) -> Option<Cidr> {
        self.labels
            .iter()
            .filter(|l| l.source == crate::labels::SOURCE_CIDR)
            .filter_map(|l| Cidr::parse(&l.key.replace('-', ":")).ok())
            .max_by_key(|c| c.len)
    }

    fn reserved(&self, name: &str) -> bool {
        self.labels.get(SOURCE_RESERVED, name).is_some()
    }

    /// One of the world identities: outside the cluster, of either family.
    fn outside(&self) -> bool {
        ["world", "world-ipv4", "world-ipv6"]
            .iter()
            .any(|name| self.reserved(name))
    }
}

/// `enable-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    Default,
    Always,
    Never,
}

impl Enforcement {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "default" => Self::Default,
            "always" => Self::Always,
            "never" => Self::Never,
            _ => return None,
        })
    }

    /// Cilium's name of the mode (`enable-policy`, the config API).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Always => "always",
            Self::Never => "never",
        }
    }
}

/// An endpoint's resolved policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointPolicy {
    pub ingress_enforced: bool,
    pub egress_enforced: bool,
    pub state: MapState,
}

const FIRST_ENDPOINT_IDENTITY: u32 = 256;

/// The identities a peer stands for; 0 is every identity.
pub fn peer_identities(peer: &Peer, identities: &[Identity]) -> Vec<u32> {
    let select = |f: &dyn Fn(&Identity) -> bool| -> Vec<u32> {
        identities.iter().filter(|i| f(i)).map(|i| i.id).collect()
    };
    match peer {
        Peer::Any | Peer::Entity(Entity::All) => vec![0],
        Peer::Endpoints(sel) if sel.is_wildcard() => {
            select(&|i| i.id >= FIRST_ENDPOINT_IDENTITY && i.cidr().is_none())
        }
        Peer::Endpoints(sel) => select(&|i| sel.matches(&i.labels)),
        Peer::Cidr { cidr, except } => {
            let mut ids = select(&|i| {
                i.cidr()
                    .is_some_and(|p| cidr.contains(&p) && !except.iter().any(|e| e.contains(&p)))
            });
            // the whole family is its world identity too; what an
            // exception names has a CIDR identity of its own, not that.
            // IPv6's is the identity labelled world-ipv6 (the plain world
            // on an IPv6-only node, world-ipv6 on a dual-stack one).
            if cidr.len == 0 && !cidr.is_ipv6() {
                ids.push(abi::identity::WORLD);
            } else if cidr.len == 0 {
                match select(&|i| i.cidr().is_none() && i.reserved("world-ipv6")) {
                    worlds if worlds.is_empty() => ids.push(abi::identity::WORLD_IPV6),
                    worlds => ids.extend(worlds),
                }
            }
            ids
        }
        Peer::Entity(Entity::World) => select(&|i| i.outside()),
        Peer::Entity(Entity::WorldIpv4) => {
            select(&|i| i.reserved("world") || i.reserved("world-ipv4"))
        }
        Peer::Entity(Entity::WorldIpv6) => select(&|i| i.reserved("world-ipv6")),
        Peer::Entity(Entity::Cluster) => select(&|i| !i.outside()),
        Peer::Entity(e) => {
            let name = match e {
                Entity::Host => "host",
                Entity::RemoteNode => "remote-node",
                Entity::KubeApiserver => "kube-apiserver",
                Entity::Init => "init",
                Entity::Health => "health",
                Entity::Unmanaged => "unmanaged",
                Entity::Ingress => "ingress",
                Entity::All
                | Entity::World
                | Entity::WorldIpv4
                | Entity::WorldIpv6
                | Entity::Cluster => unreachable!("handled above"),
            };
            select(&|i| i.reserved(name))
        }
    }
}

/// The (protocol, port, prefix) triples of a port rule. A port with
/// protocol ANY stands for TCP, UDP and SCTP, as in Cilium (a key with
/// protocol 0 cannot carry a port).
fn port_keys(p: &PortProtocol) -> Vec<(u8, u16, u8)> {
    let protos: Vec<u8> = match (p.protocol, p.port) {
        // an ICMP type is exact, and type 0 (echo reply) is not "any"
        (Protocol::Icmp | Protocol::Icmpv6, port) => return vec![(p.protocol.number(), port, 16)],
        (Protocol::Any, 0) => return vec![(0, 0, 0)],
        (Protocol::Any, _) => vec![6, 17, 132],
        (proto, _) => vec![proto.number()],
    };
    let ports: Vec<(u16, u8)> = if p.port == 0 {
        vec![(0, 0)]
    } else if p.end_port == 0 {
        vec![(p.port, 16)]
    } else {
        range_prefixes(p.port, p.end_port)
    };
    protos
        .iter()
        .flat_map(|proto| {
            ports
                .iter()
                .map(move |(port, prefix)| (*proto, *port, *prefix))
        })
        .collect()
}

/// What each peer selects, worked out once per resolution: a thousand
/// rules tend to name a handful of peers (Cilium's selector cache).
type Selected<'r> = std::collections::HashMap<&'r Peer, Vec<u32>>;

fn keys<'r>(
    rules: &'r [PeerRule],
    egress: bool,
    identities: &[Identity],
    selected: &mut Selected<'r>,
) -> Vec<Key> {
    let mut out = Vec::new();
    for r in rules {
        let ports: Vec<(u8, u16, u8)> = if r.ports.is_empty() {
            vec![(0, 0, 0)]
        } else {
            r.ports.iter().flat_map(port_keys).collect()
        };
        for peer in &r.peers {
            let ids = selected
                .entry(peer)
                .or_insert_with(|| peer_identities(peer, identities));
            for &id in ids.iter() {
                out.extend(
                    ports
                        .iter()
                        .map(|(proto, port, prefix)| Key::new(id, egress, *proto, *port, *prefix)),
                );
            }
        }
    }
    out
}

/// Resolves `rules` for the endpoint with `labels`. A direction is
/// enforced when a rule selecting the endpoint has a section for it (mode
/// `default`), always (`always`) or never (`never`); an unenforced
/// direction gets one allow-all entry. Traffic from the node itself is
/// always allowed in (Cilium's `allow-localhost=auto`).
pub fn resolve(
    rules: &[Rule],
    labels: &Labels,
    identities: &[Identity],
    mode: Enforcement,
) -> EndpointPolicy {
    let selecting: Vec<&Rule> = rules.iter().filter(|r| r.subject.matches(labels)).collect();
    let enforced = |sets: bool| match mode {
        Enforcement::Never => false,
        Enforcement::Always => true,
        Enforcement::Default => sets,
    };
    let ingress_enforced = enforced(selecting.iter().any(|r| r.sets_ingress()));
    let egress_enforced = enforced(selecting.iter().any(|r| r.sets_egress()));
    let (mut allows, mut denies) = (Vec::new(), Vec::new());
    let mut selected = Selected::new();
    for (egress, on) in [(false, ingress_enforced), (true, egress_enforced)] {
        if !on {
            allows.push(Key::new(0, egress, 0, 0, 0));
            continue;
        }
        if !egress {
            allows.push(Key::new(abi::identity::HOST, false, 0, 0, 0));
        }
        for r in &selecting {
            let (allow, deny) = if egress {
                (&r.egress, &r.egress_deny)
            } else {
                (&r.ingress, &r.ingress_deny)
            };
            allows.extend(keys(
                allow.as_deref().unwrap_or_default(),
                egress,
                identities,
                &mut selected,
            ));
            denies.extend(keys(
                deny.as_deref().unwrap_or_default(),
                egress,
                identities,
                &mut selected,
            ));
        }
    }
    EndpointPolicy {
        ingress_enforced,
        egress_enforced,
        state: MapState::build(&allows, &denies),
    }
}

/// One entry of `cilium policy selectors`: a peer the rules name, the
/// identities it selects, and which policies use it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorUse {
    pub selector: String,
    pub identities: Vec<u32>,
    pub users: usize,
    /// The labels of the first rule that names it (its policy's name,
    /// namespace and kind), as Cilium's selector cache keeps them.
    pub labels: Vec<crate::labels::Label>,
}

fn peer_text(peer: &Peer) -> String {
    match peer {
        Peer::Endpoints(sel) => sel.to_string(),
        Peer::Cidr { cidr, except } if except.is_empty() => {
            format!("&LabelSelector{{cidr:{cidr}}}")
        }
        Peer::Cidr { cidr, except } => format!(
            "&LabelSelector{{cidr:{cidr}, except ({})}}",
            except
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        Peer::Entity(e) => format!(
            "&LabelSelector{{reserved:{}}}",
            format!("{e:?}").to_lowercase()
        ),
        Peer::Any => "&LabelSelector{} (any peer)".into(),
    }
}

/// Every peer the rules name, with what it selects now.
pub fn selectors(rules: &[Rule], identities: &[Identity]) -> Vec<SelectorUse> {
    let mut out: std::collections::BTreeMap<String, SelectorUse> = Default::default();
    for r in rules {
        let lists = [&r.ingress, &r.ingress_deny, &r.egress, &r.egress_deny];
        for pr in lists.into_iter().flatten().flatten() {
            for peer in &pr.peers {
                let text = peer_text(peer);
                let entry = out.entry(text.clone()).or_insert_with(|| SelectorUse {
                    selector: text,
                    identities: peer_identities(peer, identities),
                    users: 0,
                    labels: r.labels.iter().cloned().collect(),
                });
                entry.users += 1;
            }
        }
    }
    out.into_values().collect()
}
