//! Models of `api/v1/openapi.yaml`, with the field names Cilium's clients use.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `Ok`, `Warning`, `Failure` or `Disabled`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub enum State {
    #[default]
    Ok,
    Warning,
    Failure,
    Disabled,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            State::Ok => "Ok",
            State::Warning => "Warning",
            State::Failure => "Failure",
            State::Disabled => "Disabled",
        })
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Status {
    pub state: State,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub msg: String,
}

impl Status {
    pub fn ok(msg: impl Into<String>) -> Self {
        Self {
            state: State::Ok,
            msg: msg.into(),
        }
    }
    pub fn disabled() -> Self {
        Self {
            state: State::Disabled,
            msg: String::new(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct K8sStatus {
    pub state: State,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub msg: String,
    #[serde(
        rename = "k8s-api-versions",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub k8s_api_versions: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ModeStatus {
    pub mode: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct EnabledStatus {
    pub enabled: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct KubeProxyReplacement {
    pub mode: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Routing {
    #[serde(rename = "intra-host-routing-mode")]
    pub intra_host_routing_mode: String,
    #[serde(rename = "inter-host-routing-mode")]
    pub inter_host_routing_mode: String,
    #[serde(
        rename = "tunnel-protocol",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub tunnel_protocol: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Masquerading {
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct IdentityRange {
    #[serde(rename = "min-identity")]
    pub min_identity: u32,
    #[serde(rename = "max-identity")]
    pub max_identity: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ControllerStatus {
    pub name: String,
    pub status: ControllerStatusStatus,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ControllerStatusStatus {
    #[serde(rename = "success-count")]
    pub success_count: u64,
    #[serde(rename = "failure-count")]
    pub failure_count: u64,
    #[serde(rename = "consecutive-failure-count")]
    pub consecutive_failure_count: u64,
    #[serde(
        rename = "last-success-timestamp",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub last_success_timestamp: Option<String>,
    #[serde(
        rename = "last-failure-timestamp",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub last_failure_timestamp: Option<String>,
    #[serde(
        rename = "last-failure-msg",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub last_failure_msg: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct BpfMapProperties {
    pub name: String,
    pub size: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct BpfMapStatus {
    #[serde(rename = "dynamic-size-ratio")]
    pub dynamic_size_ratio: f64,
    #[serde(default)]
    pub maps: Vec<BpfMapProperties>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ClusterStatus {
    #[serde(
        rename = "ciliumHealth",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cilium_health: Option<Status>,
    #[serde(rename = "self", default, skip_serializing_if = "String::is_empty")]
    pub self_: String,
}

/// `GET /v1/healthz`. Absent parts are parts the agent does not run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct StatusResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cilium: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kvstore: Option<Status>,
    #[serde(
        rename = "container-runtime",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub container_runtime: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<K8sStatus>,
    #[serde(
        rename = "kube-proxy-replacement",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kube_proxy_replacement: Option<KubeProxyReplacement>,
    #[serde(
        rename = "host-firewall",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub host_firewall: Option<ModeStatus>,
    #[serde(
        rename = "cni-chaining",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cni_chaining: Option<ModeStatus>,
    #[serde(rename = "cni-file", default, skip_serializing_if = "Option::is_none")]
    pub cni_file: Option<Status>,
    #[serde(
        rename = "nodeMonitor",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub node_monitor: Option<Status>,
    #[serde(
        rename = "ipv4-big-tcp",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub ipv4_big_tcp: Option<EnabledStatus>,
    #[serde(
        rename = "ipv6-big-tcp",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub ipv6_big_tcp: Option<EnabledStatus>,
    #[serde(
        rename = "bandwidth-manager",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub bandwidth_manager: Option<EnabledStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    #[serde(
        rename = "attach-mode",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub attach_mode: String,
    #[serde(
        rename = "datapath-mode",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub datapath_mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masquerading: Option<Masquerading>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controllers: Vec<ControllerStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipam: Option<crate::ipam::IpamStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<Status>,
    #[serde(
        rename = "identity-range",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub identity_range: Option<IdentityRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hubble: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<ModeStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterStatus>,
    #[serde(rename = "bpf-maps", default, skip_serializing_if = "Option::is_none")]
    pub bpf_maps: Option<BpfMapStatus>,
    #[serde(
        rename = "clock-source",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub clock_source: Option<ModeStatus>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stale: BTreeMap<String, String>,
}

/// Node addressing of one family.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct NodeAddressingElement {
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip: String,
    #[serde(
        rename = "alloc-range",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub alloc_range: String,
    #[serde(
        rename = "address-type",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub address_type: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct NodeAddressing {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<NodeAddressingElement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<NodeAddressingElement>,
}

/// The mutable part of the configuration (`PATCH /v1/config` body).
/// Unknown fields are refused so a typo cannot pass as a no-op.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(deny_unknown_fields)]
pub struct DaemonConfigurationSpec {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    #[serde(
        rename = "policy-enforcement",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub policy_enforcement: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct DaemonConfigurationStatus {
    pub addressing: NodeAddressing,
    #[serde(rename = "datapathMode")]
    pub datapath_mode: String,
    #[serde(rename = "deviceMTU")]
    pub device_mtu: u32,
    #[serde(rename = "routeMTU")]
    pub route_mtu: u32,
    #[serde(rename = "ipam-mode")]
    pub ipam_mode: String,
    pub masquerade: bool,
    pub realized: DaemonConfigurationSpec,
    pub immutable: BTreeMap<String, String>,
    #[serde(rename = "daemonConfigurationMap")]
    pub daemon_configuration_map: BTreeMap<String, serde_json::Value>,
}

/// `GET /v1/config`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct DaemonConfiguration {
    pub spec: DaemonConfigurationSpec,
    pub status: DaemonConfigurationStatus,
}

/// `NodeAddressing` without IPv6, as a node element's primary address.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct NodeAddressingSummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<NodeAddressingElement>,
}

/// `NodeElement` of `GET /cluster/nodes`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct NodeElement {
    pub name: String,
    #[serde(rename = "primary-address", default)]
    pub primary_address: NodeAddressingSummary,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}

/// `ClusterNodeStatus`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ClusterNodeStatus {
    #[serde(rename = "self", default)]
    pub self_: String,
    #[serde(rename = "nodes-added", default)]
    pub nodes_added: Vec<NodeElement>,
}

/// One entry of a map's userspace cache (`BPFMapEntry`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub struct BpfMapEntry {
    pub key: String,
    pub value: String,
    /// `ok`, `insert` or `delete`: what the agent still has to do.
    #[serde(default)]
    pub desired_action: String,
    #[serde(default)]
    pub last_error: String,
}

/// A BPF map with the agent's cache of it (`BPFMap`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct BpfMap {
    pub path: String,
    #[serde(default)]
    pub cache: Vec<BpfMapEntry>,
}

/// `GET /map` (`BPFMapList`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct BpfMapList {
    #[serde(default)]
    pub maps: Vec<BpfMap>,
}

/// `GET/PUT/DELETE /v1/policy`: the policy in force (or what a change
/// did) and the repository's revision.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Policy {
    #[serde(default)]
    pub policy: String,
    pub revision: u64,
}
