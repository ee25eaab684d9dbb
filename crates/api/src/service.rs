//! The `/service` models (Cilium's `ServiceSpec`, `Service`).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FrontendAddress {
    pub ip: String,
    #[serde(default)]
    pub port: u16,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
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
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceSpecFlags {
    /// `ClusterIP`, `NodePort`, `ExternalIPs`, `HostPort`, `LoadBalancer`, `LocalRedirect`.
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub traffic_policy: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
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
    #[serde(default)]
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
