//! Keys whose values are a closed set, as types: read once at load, so the
//! agent matches on variants instead of comparing strings. `as_str` gives
//! back Cilium's spelling, for the API and logs.

/// The variant whose spelling is `s`, compared regardless of case as the
/// key check compares it.
fn find<T: Copy>(all: &[T], as_str: fn(T) -> &'static str, s: &str) -> Option<T> {
    all.iter()
        .copied()
        .find(|v| as_str(*v).eq_ignore_ascii_case(s))
}

/// `routing-mode`: how pods on other nodes are reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoutingMode {
    /// Through the overlay (VXLAN).
    Tunnel,
    /// Through the node's own routes.
    Native,
}

impl RoutingMode {
    const ALL: [Self; 2] = [Self::Tunnel, Self::Native];

    pub fn parse(s: &str) -> Option<Self> {
        find(&Self::ALL, Self::as_str, s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tunnel => "tunnel",
            Self::Native => "native",
        }
    }
}

/// `tunnel-protocol`. Cilium also takes geneve; this datapath has only
/// VXLAN, so geneve is refused at load rather than being a variant that
/// nothing could act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TunnelProtocol {
    Vxlan,
}

impl TunnelProtocol {
    pub fn parse(s: &str) -> Option<Self> {
        find(&[Self::Vxlan], Self::as_str, s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vxlan => "vxlan",
        }
    }
}

/// `ipam`: which allocator Cilium would run. This agent allocates from its
/// node's pod CIDR whatever the mode; the mode is reported (`ipam-mode` in
/// the config API) as Cilium's agent reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpamMode {
    ClusterPool,
    Kubernetes,
    Crd,
    Eni,
    Azure,
    MultiPool,
    ClusterPoolV2Beta,
    AlibabaCloud,
    DelegatedPlugin,
}

impl IpamMode {
    const ALL: [Self; 9] = [
        Self::ClusterPool,
        Self::Kubernetes,
        Self::Crd,
        Self::Eni,
        Self::Azure,
        Self::MultiPool,
        Self::ClusterPoolV2Beta,
        Self::AlibabaCloud,
        Self::DelegatedPlugin,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        find(&Self::ALL, Self::as_str, s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClusterPool => "cluster-pool",
            Self::Kubernetes => "kubernetes",
            Self::Crd => "crd",
            Self::Eni => "eni",
            Self::Azure => "azure",
            Self::MultiPool => "multi-pool",
            Self::ClusterPoolV2Beta => "cluster-pool-v2beta",
            Self::AlibabaCloud => "alibabacloud",
            Self::DelegatedPlugin => "delegated-plugin",
        }
    }
}

/// `identity-allocation-mode`: where cluster-wide identities live. The
/// double-write migration modes are refused at load: this agent writes
/// one backend only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdentityAllocationMode {
    /// CiliumIdentity objects, when the agent has Kubernetes; else as
    /// `kvstore`.
    Crd,
    /// The kvstore's allocator keys (node-local without a kvstore).
    Kvstore,
}

impl IdentityAllocationMode {
    const ALL: [Self; 2] = [Self::Crd, Self::Kvstore];

    pub fn parse(s: &str) -> Option<Self> {
        find(&Self::ALL, Self::as_str, s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Crd => "crd",
            Self::Kvstore => "kvstore",
        }
    }
}

/// How much of a connection the datapath traces (`monitor-aggregation`,
/// the runtime option `MonitorAggregationLevel`): Cilium's levels, in
/// order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MonitorAggregation {
    None,
    Lowest,
    Low,
    Medium,
    Max,
}

impl MonitorAggregation {
    /// Cilium's names, in the order of the levels.
    pub const NAMES: [&'static str; 5] = ["None", "Lowest", "Low", "Medium", "Max"];

    /// A level by name (any case), by Cilium's other spellings (disabled,
    /// maximum) or by number (0-4).
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().as_str() {
            "none" | "disabled" | "0" => Self::None,
            "lowest" | "1" => Self::Lowest,
            "low" | "2" => Self::Low,
            "medium" | "3" => Self::Medium,
            "max" | "maximum" | "4" => Self::Max,
            _ => return None,
        })
    }

    /// Cilium's name of the level (`None` ... `Max`).
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_read_back_as_written() {
        for m in RoutingMode::ALL {
            assert_eq!(RoutingMode::parse(m.as_str()), Some(m));
        }
        for m in IpamMode::ALL {
            assert_eq!(IpamMode::parse(m.as_str()), Some(m));
        }
        for m in IdentityAllocationMode::ALL {
            assert_eq!(IdentityAllocationMode::parse(m.as_str()), Some(m));
        }
        assert_eq!(IdentityAllocationMode::parse("doublewrite-readcrd"), None);
        for name in MonitorAggregation::NAMES {
            assert_eq!(MonitorAggregation::parse(name).unwrap().as_str(), name);
        }
        assert_eq!(RoutingMode::parse("Tunnel"), Some(RoutingMode::Tunnel));
        assert_eq!(TunnelProtocol::parse("geneve"), None);
        assert_eq!(
            MonitorAggregation::parse("maximum"),
            Some(MonitorAggregation::Max)
        );
        assert_eq!(MonitorAggregation::parse("sometimes"), None);
    }
}

/// How pods' traffic crosses the node's edge (Cilium's intra-host routing
/// mode): through the host's stack, or by the datapath itself (FIB lookup
/// and redirect out, peer redirect in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostRouting {
    Bpf,
    /// `enable-host-legacy-routing=true`, or BPF host routing is not
    /// possible with the rest of the configuration: why, as Cilium logs it.
    Legacy {
        why: Option<String>,
    },
}

impl HostRouting {
    /// Cilium 1.16's choice: BPF unless asked for legacy or something
    /// that needs the stack is on. IPsec and kernels without
    /// bpf_redirect_neigh/peer, Cilium's other reasons, cannot occur here.
    pub fn choose(legacy: bool, iptables_masquerade: bool, kube_proxy_replacement: bool) -> Self {
        let why = if legacy {
            return Self::Legacy { why: None };
        } else if iptables_masquerade {
            "BPF host routing requires enable-bpf-masquerade."
        } else if !kube_proxy_replacement {
            "BPF host routing requires kube-proxy-replacement=true."
        } else {
            return Self::Bpf;
        };
        Self::Legacy {
            why: Some(why.into()),
        }
    }

    pub fn is_bpf(&self) -> bool {
        *self == Self::Bpf
    }

    /// Status's `Routing: ... Host:` word.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Bpf => "BPF",
            Self::Legacy { .. } => "Legacy",
        }
    }
}
