//! Models of `api/v1/openapi.yaml`, with the field names Cilium's clients use.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

// The status models have a module of their own; they stay reachable here.
pub use crate::debuginfo::*;
pub use crate::status::*;

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
    /// Always sent, empty without a kvstore (clients read it unchecked).
    #[serde(rename = "kvstoreConfiguration", default)]
    pub kvstore_configuration: KvstoreConfiguration,
}

/// `KVstoreConfiguration`: the kvstore's type (`etcd`) and its options.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct KvstoreConfiguration {
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

/// `GET /v1/config`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct DaemonConfiguration {
    pub spec: DaemonConfigurationSpec,
    pub status: DaemonConfigurationStatus,
}

/// `NodeAddressing` as a node element's primary address (IPv6 only for a
/// node that has some).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct NodeAddressingSummary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<NodeAddressingElement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<NodeAddressingElement>,
}

/// `NodeElement` of `GET /cluster/nodes`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct NodeElement {
    pub name: String,
    #[serde(rename = "primary-address", default)]
    pub primary_address: NodeAddressingSummary,
    #[serde(
        rename = "health-endpoint-address",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub health_endpoint_address: Option<NodeAddressingSummary>,
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

/// `NodeID` of `GET /node/ids`: an ID and the node addresses mapped to it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct NodeId {
    pub id: i64,
    #[serde(default)]
    pub ips: Vec<String>,
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
    /// The agent's userspace view of the map; null when it keeps none
    /// ("Cache is disabled").
    #[serde(default)]
    pub cache: Option<Vec<BpfMapEntry>>,
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
