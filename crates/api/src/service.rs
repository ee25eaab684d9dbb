//! The `/service` models (Cilium's `ServiceSpec`, `Service`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A frontend's layer 4 protocol. Cilium 1.16 ignores it ("all services
/// will behave as if protocol any is specified") and never sends it; its
/// `cilium-dbg` refuses any value but tcp, udp and sctp. So `Any` is sent
/// as no `protocol` at all, and read from no field, `""`, `any` or `NONE`
/// (Cilium's name for it) or `ANY` (what our older agents sent), in any
/// case. Our services from Kubernetes carry their port's protocol, each a
/// frontend of its own (protocol differentiation, Cilium 1.17's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum L4Protocol {
    #[default]
    Any,
    Tcp,
    Udp,
    Sctp,
}

impl L4Protocol {
    pub fn is_any(&self) -> bool {
        *self == L4Protocol::Any
    }

    /// The swagger enum's spelling (`any`, `tcp`, `udp`; `sctp` as Cilium reads it).
    pub fn as_str(self) -> &'static str {
        match self {
            L4Protocol::Any => "any",
            L4Protocol::Tcp => "tcp",
            L4Protocol::Udp => "udp",
            L4Protocol::Sctp => "sctp",
        }
    }

    /// The IANA protocol number the LB maps key a frontend by (0: any).
    pub fn number(self) -> u8 {
        match self {
            L4Protocol::Any => 0,
            L4Protocol::Tcp => 6,
            L4Protocol::Udp => 17,
            L4Protocol::Sctp => 132,
        }
    }

    /// The protocol of an LB map key's number; any other is `Any`.
    pub fn from_number(n: u8) -> Self {
        match n {
            6 => L4Protocol::Tcp,
            17 => L4Protocol::Udp,
            132 => L4Protocol::Sctp,
            _ => L4Protocol::Any,
        }
    }

    /// Kubernetes' name of a port's protocol (`TCP`, `UDP`, `SCTP`;
    /// unset is TCP).
    pub fn from_kubernetes(s: Option<&str>) -> Option<Self> {
        match s.unwrap_or("TCP") {
            "TCP" => Some(L4Protocol::Tcp),
            "UDP" => Some(L4Protocol::Udp),
            "SCTP" => Some(L4Protocol::Sctp),
            _ => None,
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "" | "any" | "none" => Some(L4Protocol::Any),
            "tcp" => Some(L4Protocol::Tcp),
            "udp" => Some(L4Protocol::Udp),
            "sctp" => Some(L4Protocol::Sctp),
            _ => None,
        }
    }
}

impl Serialize for L4Protocol {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for L4Protocol {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        L4Protocol::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown protocol {s:?}: expected tcp, udp, sctp or any"
            ))
        })
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FrontendAddress {
    pub ip: String,
    #[serde(default)]
    pub port: u16,
    #[serde(default, skip_serializing_if = "L4Protocol::is_any")]
    pub protocol: L4Protocol,
    /// `external` (default) or `internal`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackendAddress {
    pub ip: String,
    #[serde(default)]
    pub port: u16,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
    /// `active` (default), `terminating`, `quarantined`, `maintenance`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    #[serde(default)]
    pub preferred: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u16>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub zone: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceSpecFlags {
    /// `ClusterIP`, `NodePort`, `ExternalIPs`, `HostPort`, `LoadBalancer`, `LocalRedirect`.
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// `Cluster` or `Local` (deprecated for `extTrafficPolicy`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub traffic_policy: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ext_traffic_policy: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub int_traffic_policy: String,
    /// `None`, `Nat46` or `Nat64`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub nat_policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check_node_port: Option<u16>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ServiceSpec {
    #[serde(default)]
    pub id: i64,
    pub frontend_address: FrontendAddress,
    #[serde(default)]
    pub backend_addresses: Vec<BackendAddress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<ServiceSpecFlags>,
    /// Swagger's `updateServices`; older agents of ours wrote
    /// `update-services` into the kvstore.
    #[serde(rename = "updateServices", alias = "update-services", default)]
    pub update_services: bool,
    /// Session affinity timeout in seconds (0 = none); ours, Cilium keeps it
    /// in the service's k8s object.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub session_affinity_timeout: u32,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ServiceStatus {
    pub realized: ServiceSpec,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Service {
    pub spec: ServiceSpec,
    pub status: ServiceStatus,
}
