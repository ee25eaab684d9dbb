//! IPAM models: `POST /ipam` responses and the `ipam` part of `/healthz`.

use crate::models::NodeAddressing;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The IPAM owner of a pod's address, as the CNI plugin asks for it and the
/// agent records it: `<namespace>/<pod>`, or the container ID without a pod.
pub fn owner(namespace: &str, pod: &str, container_id: &str) -> String {
    if pod.is_empty() {
        return container_id.to_owned();
    }
    format!("{namespace}/{pod}")
}

/// `AddressPair`: bare addresses, no prefix length.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct AddressPair {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ipv4: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ipv4_expiration_uuid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ipv4_pool_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ipv6: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ipv6_expiration_uuid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ipv6_pool_name: String,
}

/// `IPAMAddressResponse`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct IpamAddressResponse {
    pub ip: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub gateway: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cidrs: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub master_mac: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expiration_uuid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub interface_number: String,
}

/// `IPAMResponse`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct IpamResponse {
    pub address: AddressPair,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<IpamAddressResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<IpamAddressResponse>,
    pub host_addressing: NodeAddressing,
}

/// `IPAMStatus` in `StatusResponse.ipam`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct IpamStatus {
    /// address -> owner
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipv4: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipv6: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
}

/// `IPListEntry` of `GET /ip` (the userspace ipcache).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct IpListEntry {
    pub cidr: String,
    pub identity: u32,
    #[serde(rename = "hostIP", default, skip_serializing_if = "String::is_empty")]
    pub host_ip: String,
    #[serde(rename = "encryptKey", default)]
    pub encrypt_key: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<IpListEntryMetadata>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub struct IpListEntryMetadata {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}
