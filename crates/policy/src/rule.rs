//! Rules in the form the resolver works with, whatever manifest they came
//! from (CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy, Kubernetes
//! NetworkPolicy, or Cilium's bare JSON rules).

use crate::labels::Labels;
use crate::selector::Selector;
use std::net::Ipv4Addr;

/// An IPv4 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    pub addr: Ipv4Addr,
    pub len: u8,
}

/// Why a CIDR did not parse; each carries the text as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error("invalid CIDR {0:?}")]
    PrefixLength(String),
    #[error("invalid CIDR {0:?}: only IPv4 prefixes are supported")]
    NotIpv4(String),
    #[error("invalid CIDR {0:?}: prefix length above 32")]
    PrefixTooLong(String),
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Self, CidrError> {
        let (addr, len) = match s.split_once('/') {
            Some((a, l)) => (
                a,
                l.parse::<u8>()
                    .map_err(|_| CidrError::PrefixLength(s.to_owned()))?,
            ),
            None => (s, 32),
        };
        let addr: Ipv4Addr = addr.parse().map_err(|_| CidrError::NotIpv4(s.to_owned()))?;
        if len > 32 {
            return Err(CidrError::PrefixTooLong(s.to_owned()));
        }
        Ok(Self::new(addr, len))
    }

    /// The prefix of `len` bits (at most 32) that holds `addr`.
    pub fn new(addr: Ipv4Addr, len: u8) -> Self {
        let len = len.min(32);
        Self {
            addr: Ipv4Addr::from(u32::from(addr) & Self::mask(len)),
            len,
        }
    }

    fn mask(len: u8) -> u32 {
        u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
    }

    /// Whether `other` lies inside this prefix.
    pub fn contains(&self, other: &Cidr) -> bool {
        other.len >= self.len
            && u32::from(other.addr) & Self::mask(self.len) == u32::from(self.addr)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// Cilium's entities: peers named by role instead of labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entity {
    All,
    /// Outside the cluster, either family (world, world-ipv4, world-ipv6).
    World,
    /// Outside the cluster over IPv4: `world-ipv4`, and `world` (what
    /// IPv4 destinations outside are here, on a dual-stack node too).
    WorldIpv4,
    /// Outside the cluster over IPv6 (a dual-stack node's `world-ipv6`).
    WorldIpv6,
    Cluster,
    Host,
    RemoteNode,
    KubeApiserver,
    Init,
    Health,
    Unmanaged,
    Ingress,
}

impl Entity {
    pub const NAMES: [&'static str; 12] = [
        "all",
        "world",
        "world-ipv4",
        "world-ipv6",
        "cluster",
        "host",
        "remote-node",
        "kube-apiserver",
        "init",
        "health",
        "unmanaged",
        "ingress",
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "all" => Entity::All,
            "world" => Entity::World,
            "world-ipv4" => Entity::WorldIpv4,
            "world-ipv6" => Entity::WorldIpv6,
            "cluster" => Entity::Cluster,
            "host" => Entity::Host,
            "remote-node" => Entity::RemoteNode,
            "kube-apiserver" => Entity::KubeApiserver,
            "init" => Entity::Init,
            "health" => Entity::Health,
            "unmanaged" => Entity::Unmanaged,
            "ingress" => Entity::Ingress,
            _ => return None,
        })
    }
}

/// IP protocol of a port rule; `Any` matches every protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    Any,
    Tcp,
    Udp,
    Sctp,
    /// An `icmps` rule: the port is the ICMP type << 8, as Cilium keys it.
    Icmp,
    /// An `icmps` rule of family IPv6, keyed the same way.
    Icmpv6,
}

impl Protocol {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_uppercase().as_str() {
            "ANY" | "" => Protocol::Any,
            "TCP" => Protocol::Tcp,
            "UDP" => Protocol::Udp,
            "SCTP" => Protocol::Sctp,
            _ => return None,
        })
    }

    /// The IP protocol number (0 = any).
    pub fn number(self) -> u8 {
        match self {
            Protocol::Any => 0,
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Sctp => 132,
            Protocol::Icmp => 1,
            Protocol::Icmpv6 => 58,
        }
    }
}

/// A port, or a range `port..=end_port`; port 0 is every port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortProtocol {
    pub port: u16,
    pub end_port: u16,
    pub protocol: Protocol,
}

/// Who a rule is about on the other side.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    Endpoints(Selector),
    Cidr {
        cidr: Cidr,
        except: Vec<Cidr>,
    },
    Entity(Entity),
    /// Any peer at all (an L4-only rule, or a NetworkPolicy rule without
    /// `from`/`to`).
    Any,
}

/// Peers and the ports they may use (none: every port and protocol).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerRule {
    pub peers: Vec<Peer>,
    pub ports: Vec<PortProtocol>,
}

/// One rule: the endpoints it applies to and, per direction, what it
/// allows and denies. A direction that is `Some` (even empty) puts the
/// selected endpoints into default deny for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    pub subject: Selector,
    pub ingress: Option<Vec<PeerRule>>,
    pub ingress_deny: Option<Vec<PeerRule>>,
    pub egress: Option<Vec<PeerRule>>,
    pub egress_deny: Option<Vec<PeerRule>>,
    /// The rule's own labels (policy name, namespace, kind): what
    /// `cilium policy get` and `delete` go by.
    pub labels: Labels,
    pub description: String,
}

impl Rule {
    /// Whether the rule makes its endpoints default-deny at ingress/egress.
    pub fn sets_ingress(&self) -> bool {
        self.ingress.is_some() || self.ingress_deny.is_some()
    }

    pub fn sets_egress(&self) -> bool {
        self.egress.is_some() || self.egress_deny.is_some()
    }
}
