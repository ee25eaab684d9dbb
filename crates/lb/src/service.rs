//! Services as Cilium models them (`pkg/loadbalancer`).

use std::fmt;
use std::net::IpAddr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServiceType {
    ClusterIP,
    NodePort,
    ExternalIPs,
    HostPort,
    LoadBalancer,
    LocalRedirect,
}

impl ServiceType {
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::ClusterIP => "ClusterIP",
            ServiceType::NodePort => "NodePort",
            ServiceType::ExternalIPs => "ExternalIPs",
            ServiceType::HostPort => "HostPort",
            ServiceType::LoadBalancer => "LoadBalancer",
            ServiceType::LocalRedirect => "LocalRedirect",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            ServiceType::ClusterIP,
            ServiceType::NodePort,
            ServiceType::ExternalIPs,
            ServiceType::HostPort,
            ServiceType::LoadBalancer,
            ServiceType::LocalRedirect,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum BackendState {
    #[default]
    Active,
    Terminating,
    Quarantined,
    Maintenance,
}

impl BackendState {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendState::Active => "active",
            BackendState::Terminating => "terminating",
            BackendState::Quarantined => "quarantined",
            BackendState::Maintenance => "maintenance",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            BackendState::Active,
            BackendState::Terminating,
            BackendState::Quarantined,
            BackendState::Maintenance,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }

    /// The `flags` byte of the backend's map entry.
    pub fn map_flags(self) -> u8 {
        match self {
            BackendState::Active => abi::lb::BE_STATE_ACTIVE,
            BackendState::Terminating => abi::lb::BE_STATE_TERMINATING,
            BackendState::Quarantined => abi::lb::BE_STATE_QUARANTINED,
            BackendState::Maintenance => abi::lb::BE_STATE_MAINTENANCE,
        }
    }
}

/// An address, port, L4 protocol and scope clients connect to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frontend {
    pub ip: IpAddr,
    pub port: u16,
    /// IANA protocol number; `abi::lb::PROTO_ANY` (0) for every protocol.
    pub proto: u8,
    /// `abi::lb::LB_LOOKUP_SCOPE_*`.
    pub scope: u8,
}

/// The name Cilium gives an L4 protocol number (`TCP`, `UDP`, `SCTP`);
/// `ANY` for 0.
pub fn proto_name(proto: u8) -> String {
    match proto {
        abi::lb::PROTO_ANY => "ANY".into(),
        6 => "TCP".into(),
        17 => "UDP".into(),
        132 => "SCTP".into(),
        n => n.to_string(),
    }
}

/// `IP:port`, the address bracketed when it is IPv6.
pub fn host_port(ip: IpAddr, port: u16) -> String {
    std::net::SocketAddr::new(ip, port).to_string()
}

impl fmt::Display for Frontend {
    /// Cilium's `L3n4Addr` form: `IP:port` (`[IP]:port` for IPv6), then
    /// `/TCP` (`/UDP`, `/SCTP`) for a frontend of one protocol as protocol
    /// differentiation prints it, and `/i` for the internal scope.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&host_port(self.ip, self.port))?;
        if self.proto != abi::lb::PROTO_ANY {
            write!(f, "/{}", proto_name(self.proto))?;
        }
        if self.scope == abi::lb::LB_LOOKUP_SCOPE_INT {
            f.write_str("/i")?;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backend {
    pub id: u32,
    pub ip: IpAddr,
    pub port: u16,
    pub state: BackendState,
    /// Preferred backends take the first slots (Cilium: local cluster).
    pub preferred: bool,
}

impl Backend {
    /// The name Maglev hashes: `IP:port` (`[IP]:port` for IPv6).
    pub fn name(&self) -> String {
        host_port(self.ip, self.port)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Service {
    /// Also the rev-NAT index.
    pub id: u16,
    pub frontend: Frontend,
    pub kind: ServiceType,
    /// In slot order: active ones first (preferred, then by ID), others after.
    pub backends: Vec<Backend>,
    /// Session affinity timeout in seconds; 0 = no affinity.
    pub affinity_timeout: u32,
    /// externalTrafficPolicy Local.
    pub ext_local: bool,
    /// A HostPort for a loopback hostIP, at the 0.0.0.0 frontend.
    pub loopback: bool,
    /// Backends removed from the service while connections may still use
    /// them: kept in the backends map as terminating, never in a slot.
    pub retired: Vec<Backend>,
}

impl Service {
    pub fn active(&self) -> impl Iterator<Item = &Backend> {
        self.backends
            .iter()
            .filter(|b| b.state == BackendState::Active)
    }

    /// `flags` and `flags2` of the service entry.
    pub fn map_flags(&self) -> (u8, u8) {
        use abi::lb::*;
        let mut flags = match self.kind {
            ServiceType::NodePort => SVC_FLAG_NODEPORT,
            ServiceType::ExternalIPs => SVC_FLAG_EXTERNAL_IP,
            ServiceType::HostPort => SVC_FLAG_HOSTPORT,
            ServiceType::LoadBalancer => SVC_FLAG_LOADBALANCER,
            ServiceType::ClusterIP | ServiceType::LocalRedirect => 0,
        };
        if self.affinity_timeout > 0 {
            flags |= SVC_FLAG_AFFINITY;
        }
        // Routable: neither a ClusterIP nor a wildcard (surrogate) frontend.
        if self.kind != ServiceType::ClusterIP && !self.frontend.ip.is_unspecified() {
            flags |= SVC_FLAG_ROUTABLE;
        }
        let mut flags2 = 0;
        if self.kind == ServiceType::LocalRedirect {
            flags2 |= SVC_FLAG_LOCALREDIRECT;
        }
        if self.loopback {
            flags2 |= SVC_FLAG_LOOPBACK;
        }
        if self.ext_local {
            flags |= SVC_FLAG_EXT_LOCAL_SCOPE;
            // The cluster's own clients still get every backend, from the
            // internal frontend of the same address and port (Cilium sets
            // this for the external kinds whose traffic policies differ).
            if matches!(
                self.kind,
                ServiceType::NodePort | ServiceType::LoadBalancer | ServiceType::ExternalIPs
            ) && self.frontend.scope == LB_LOOKUP_SCOPE_EXT
            {
                flags2 |= SVC_FLAG_TWO_SCOPES;
            }
        }
        (flags, flags2)
    }

    pub fn flags_string(&self) -> String {
        let (flags, flags2) = self.map_flags();
        flags_string(flags, flags2)
    }
}

/// Cilium's `ServiceFlags.String()` of a service entry's flag bytes: the
/// type, then qualifiers.
pub fn flags_string(flags: u8, flags2: u8) -> String {
    use abi::lb::*;
    let kind = if flags2 & SVC_FLAG_LOCALREDIRECT != 0 {
        ServiceType::LocalRedirect
    } else if flags & SVC_FLAG_NODEPORT != 0 {
        ServiceType::NodePort
    } else if flags & SVC_FLAG_EXTERNAL_IP != 0 {
        ServiceType::ExternalIPs
    } else if flags & SVC_FLAG_HOSTPORT != 0 {
        ServiceType::HostPort
    } else if flags & SVC_FLAG_LOADBALANCER != 0 {
        ServiceType::LoadBalancer
    } else {
        ServiceType::ClusterIP
    };
    let mut s = kind.as_str().to_owned();
    if flags & SVC_FLAG_EXT_LOCAL_SCOPE != 0 {
        s.push_str(", Local");
    }
    if flags2 & SVC_FLAG_TWO_SCOPES != 0 {
        s.push_str(", two-scopes");
    }
    if flags & SVC_FLAG_AFFINITY != 0 {
        s.push_str(", sessionAffinity");
    }
    if flags & SVC_FLAG_ROUTABLE == 0 {
        s.push_str(", non-routable");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frontend_of_one_protocol_names_it() {
        let mut f = Frontend {
            ip: [10, 96, 0, 10].into(),
            port: 53,
            proto: abi::lb::PROTO_ANY,
            scope: abi::lb::LB_LOOKUP_SCOPE_EXT,
        };
        assert_eq!(f.to_string(), "10.96.0.10:53");
        f.proto = 17;
        f.scope = abi::lb::LB_LOOKUP_SCOPE_INT;
        assert_eq!(f.to_string(), "10.96.0.10:53/UDP/i");
        f.ip = "fd00::a".parse().unwrap();
        assert_eq!(f.to_string(), "[fd00::a]:53/UDP/i");
    }
}
