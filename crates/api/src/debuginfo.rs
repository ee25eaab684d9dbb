//! `DebugInfo` (`GET /v1/debuginfo`), as Cilium 1.16's `cilium-dbg
//! debuginfo` and `cilium-dbg version` read it. Cilium's `debuginfo` prints
//! `policy.policy` and the full status without nil checks, so both are
//! plain fields.

use crate::endpoint::Endpoint;
use crate::models::Policy;
use crate::service::Service;
use crate::status::StatusResponse;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `DebugInfo.encryption`: the WireGuard status, which this agent has none
/// of (no WireGuard), so always empty.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct DebugInfoEncryption {}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "kebab-case")]
pub struct DebugInfo {
    /// `<version> <revision> <date> <toolchain> version <toolchain version>
    /// <os>/<arch>`: the seven words Cilium's `version.FromString` splits.
    pub cilium_version: String,
    /// `major.minor.patch` of the running kernel, as Cilium reduces it.
    #[serde(default)]
    pub kernel_version: String,
    pub cilium_status: StatusResponse,
    #[serde(default)]
    pub endpoint_list: Vec<Endpoint>,
    #[serde(default)]
    pub service_list: Vec<Service>,
    pub policy: Policy,
    /// The agent's `/proc/<pid>/maps`.
    #[serde(default)]
    pub cilium_memory_map: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cilium_nodemonitor_memory_map: String,
    /// The agent's settings, `key:value`.
    #[serde(default)]
    pub environment_variables: Vec<String>,
    /// Debug text by subsystem.
    #[serde(default)]
    pub subsystem: BTreeMap<String, String>,
    #[serde(default)]
    pub encryption: DebugInfoEncryption,
}
