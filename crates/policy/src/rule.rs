//! Rules in the form the resolver works with, whatever manifest they came
//! from (CiliumNetworkPolicy, CiliumClusterwideNetworkPolicy, Kubernetes
//! NetworkPolicy, or Cilium's bare JSON rules).

use crate::labels::Labels;
use crate::selector::Selector;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An IPv4 or IPv6 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    pub addr: IpAddr,
    pub len: u8,
}

/// Why a CIDR did not parse; each carries the text as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CidrError {
    #[error("invalid CIDR {0:?}")]
    PrefixLength(String),
    #[error("invalid CIDR {0:?}: not an IPv4 or IPv6 prefix")]
    NotAnAddress(String),
    #[error("invalid CIDR {0:?}: prefix length above {1}")]
    PrefixTooLong(String, u8),
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Self, CidrError> {
        let (addr, len) = s.split_once('/').unwrap_or((s, ""));
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| CidrError::NotAnAddress(s.to_owned()))?;
        let bits = Self::bits(addr);
        let len = match len {
            "" if !s.contains('/') => bits,
            l => l
                .parse::<u8>()
                .map_err(|_| CidrError::PrefixLength(s.to_owned()))?,
        };
        if len > bits {
            return Err(CidrError::PrefixTooLong(s.to_owned(), bits));
        }
        Ok(Self::new(addr, len))
    }

    /// The prefix of `len` bits (at most the family's) that holds `addr`.
    pub fn new(addr: impl Into<IpAddr>, len: u8) -> Self {
        let addr = addr.into();
        let len = len.min(Self::bits(addr));
        let net = Self::wide(addr) & Self::mask(len);
        let addr = match addr {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from((net >> 96) as u32)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(net)),
        };
        Self { addr, len }
    }

    fn bits(addr: IpAddr) -> u8 {
        if addr.is_ipv4() {
            32
        } else {
            128
        }
    }

    /// The first `len` bits set, of 128 (an IPv4 prefix left-aligned).
    fn mask(len: u8) -> u128 {
        u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
    }

    /// The address as 128 bits, an IPv4 one left-aligned.
    fn wide(addr: IpAddr) -> u128 {
        match addr {
            IpAddr::V4(a) => u128::from(u32::from(a)) << 96,
            IpAddr::V6(a) => u128::from(a),
        }
    }

    pub fn is_ipv6(&self) -> bool {
        self.addr.is_ipv6()
    }

    /// Whether `other` (of the same family) lies inside this prefix.
    pub fn contains(&self, other: &Cidr) -> bool {
        self.addr.is_ipv4() == other.addr.is_ipv4()
            && other.len >= self.len
            && Self::wide(other.addr) & Self::mask(self.len) == Self::wide(self.addr)
    }

    /// The key of its `cidr:` label, as Cilium writes it: an IPv6
    /// address's colons become dashes (a label key cannot hold them), with
    /// a zero where a key would start or end with one.
    pub fn label_key(&self) -> String {
        let text = self.addr.to_string();
        let mut key = String::with_capacity(text.len() + 6);
        for (i, c) in text.char_indices() {
            match c {
                ':' if i == 0 => key.push_str("0-"),
                ':' if i == text.len() - 1 => key.push_str("-0"),
                ':' => key.push('-'),
                c => key.push(c),
            }
        }
        format!("{key}/{}", self.len)
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
    /// `cilium policy get` and `delete` go by. Shared: the rules of one
    /// policy carry the same set, which a thousand copies would each
    /// allocate and free.
    pub labels: std::sync::Arc<Labels>,
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
