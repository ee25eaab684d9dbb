//! Endpoint models: what the CNI plugin sends (`EndpointChangeRequest`) and
//! what `GET /endpoint` returns (`Endpoint`).

use crate::ipam::AddressPair;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// An endpoint's state, as Cilium names it (`EndpointState` in its API).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndpointState {
    WaitingForIdentity,
    NotReady,
    WaitingToRegenerate,
    Regenerating,
    Restoring,
    Ready,
    Disconnecting,
    Disconnected,
    Invalid,
}

impl EndpointState {
    pub const ALL: [EndpointState; 9] = [
        Self::WaitingForIdentity,
        Self::NotReady,
        Self::WaitingToRegenerate,
        Self::Regenerating,
        Self::Restoring,
        Self::Ready,
        Self::Disconnecting,
        Self::Disconnected,
        Self::Invalid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::WaitingForIdentity => "waiting-for-identity",
            Self::NotReady => "not-ready",
            Self::WaitingToRegenerate => "waiting-to-regenerate",
            Self::Regenerating => "regenerating",
            Self::Restoring => "restoring",
            Self::Ready => "ready",
            Self::Disconnecting => "disconnecting",
            Self::Disconnected => "disconnected",
            Self::Invalid => "invalid",
        }
    }
}

impl std::fmt::Display for EndpointState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name no endpoint has.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid endpoint state {name:?}: expected one of {}", EndpointState::ALL.map(EndpointState::as_str).join(", "))]
pub struct UnknownState {
    pub name: String,
}

impl std::str::FromStr for EndpointState {
    type Err = UnknownState;

    fn from_str(s: &str) -> Result<Self, UnknownState> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState { name: s.to_owned() })
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "kebab-case")]
pub struct DatapathConfiguration {
    #[serde(default)]
    pub require_arp_passthrough: bool,
    #[serde(default)]
    pub require_egress_prog: bool,
    #[serde(default)]
    pub external_ipam: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_routing: Option<bool>,
    #[serde(default)]
    pub install_endpoint_route: bool,
    #[serde(default)]
    pub disable_sip_verification: bool,
}

/// `EndpointChangeRequest` (PUT/PATCH /endpoint/{id}).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "kebab-case")]
pub struct EndpointChangeRequest {
    #[serde(default)]
    pub id: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_interface_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub docker_endpoint_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub docker_network_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub interface_name: String,
    #[serde(default)]
    pub interface_index: i64,
    #[serde(default)]
    pub state: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host_mac: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addressing: Option<AddressPair>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub k8s_pod_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub k8s_namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub k8s_uid: String,
    #[serde(default)]
    pub datapath_map_id: i64,
    #[serde(default)]
    pub policy_enabled: bool,
    #[serde(default)]
    pub pid: i64,
    #[serde(default)]
    pub sync_build_endpoint: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datapath_configuration: Option<DatapathConfiguration>,
    #[serde(default)]
    pub disable_legacy_identifiers: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub netns_cookie: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, serde_json::Value>,
}

/// `EndpointBatchDeleteRequest` (DELETE /endpoint).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[serde(rename_all = "kebab-case")]
pub struct EndpointBatchDeleteRequest {
    pub container_id: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct EndpointIdentifiers {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cni_attachment_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_interface_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub k8s_namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub k8s_pod_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_name: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct Identity {
    pub id: u32,
    #[serde(default)]
    pub labels: Vec<String>,
    #[serde(
        rename = "labelsSHA256",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub labels_sha256: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct LabelConfigurationSpec {
    #[serde(default)]
    pub user: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct LabelConfigurationStatus {
    #[serde(default)]
    pub realized: LabelConfigurationSpec,
    #[serde(default)]
    pub security_relevant: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct EndpointNetworking {
    #[serde(default)]
    pub addressing: Vec<AddressPair>,
    #[serde(default)]
    pub host_mac: String,
    #[serde(default)]
    pub interface_index: i64,
    #[serde(default)]
    pub interface_name: String,
    #[serde(default)]
    pub mac: String,
}

/// `EndpointStatusChange`: one entry of an endpoint's status log.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct EndpointStatusChange {
    /// `OK` or `Failed`
    pub code: String,
    pub message: String,
    pub state: String,
    pub timestamp: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct EndpointHealth {
    pub bpf: String,
    pub policy: String,
    pub connected: bool,
    #[serde(rename = "overallHealth")]
    pub overall_health: String,
}

/// Realized policy enforcement of an endpoint, as `endpoint list` reads it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct EndpointPolicyStatus {
    /// `none`, `ingress`, `egress` or `both`
    #[serde(default)]
    pub policy_enabled: String,
    #[serde(default)]
    pub policy_revision: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct EndpointPolicy {
    #[serde(default)]
    pub realized: EndpointPolicyStatus,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct EndpointStatus {
    #[serde(default)]
    pub external_identifiers: EndpointIdentifiers,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
    #[serde(default)]
    pub labels: LabelConfigurationStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<EndpointNetworking>,
    #[serde(default)]
    pub policy: EndpointPolicy,
    #[serde(default)]
    pub health: EndpointHealth,
    /// Newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log: Vec<EndpointStatusChange>,
    pub state: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct EndpointSpec {
    #[serde(default)]
    pub label_configuration: LabelConfigurationSpec,
}

/// `Endpoint` as `GET /endpoint[/{id}]` returns it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct Endpoint {
    pub id: u16,
    #[serde(default)]
    pub spec: EndpointSpec,
    pub status: EndpointStatus,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_read_and_print_as_cilium_names_them() {
        for st in EndpointState::ALL {
            assert_eq!(st.as_str().parse::<EndpointState>(), Ok(st));
            assert_eq!(
                serde_json::to_string(&st).unwrap(),
                format!("\"{}\"", st.as_str())
            );
        }
        assert_eq!(
            "waiting-for-identity".parse(),
            Ok(EndpointState::WaitingForIdentity)
        );
        let e = "sleeping".parse::<EndpointState>().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid endpoint state \"sleeping\": expected one of waiting-for-identity, not-ready,"),
            "{e}"
        );
    }
}
