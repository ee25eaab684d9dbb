//! The network configuration on stdin.

use crate::error::{CniError, DECODE_FAILURE, INCOMPATIBLE_VERSION, INVALID_CONFIG};
use serde::Deserialize;

pub const SUPPORTED_VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

#[derive(Debug, Deserialize)]
pub struct NetConf {
    #[serde(rename = "cniVersion", default)]
    pub cni_version: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub mtu: Option<u32>,
    #[serde(rename = "chaining-mode", default)]
    pub chaining_mode: String,
    #[serde(rename = "prevResult", default)]
    pub prev_result: Option<serde_json::Value>,
    /// CNI 1.1 GC: the attachments the runtime still knows.
    #[serde(rename = "cni.dev/valid-attachments", default)]
    pub valid_attachments: Option<Vec<Attachment>>,
}

#[derive(Debug, Deserialize)]
pub struct Attachment {
    #[serde(rename = "containerID")]
    pub container_id: String,
    #[serde(default)]
    pub ifname: String,
}

pub fn parse(stdin: &[u8]) -> Result<NetConf, CniError> {
    if stdin.iter().all(u8::is_ascii_whitespace) {
        return Err(CniError::new(
            DECODE_FAILURE,
            "no network configuration on stdin",
        ));
    }
    let conf: NetConf = serde_json::from_slice(stdin).map_err(|e| {
        CniError::new(
            DECODE_FAILURE,
            format!("failed to parse network configuration: {e}"),
        )
    })?;
    if conf.cni_version.is_empty() {
        return Err(CniError::new(
            INVALID_CONFIG,
            "network configuration has no cniVersion",
        ));
    }
    if !SUPPORTED_VERSIONS.contains(&conf.cni_version.as_str()) {
        return Err(CniError::new(
            INCOMPATIBLE_VERSION,
            format!(
                "incompatible CNI versions: config is {:?}, plugin supports {:?}",
                conf.cni_version, SUPPORTED_VERSIONS
            ),
        ));
    }
    if conf.name.is_empty() {
        return Err(CniError::new(
            INVALID_CONFIG,
            "network configuration has no name",
        ));
    }
    if !conf.chaining_mode.is_empty() && conf.chaining_mode != "none" {
        return Err(CniError::new(
            INVALID_CONFIG,
            format!("chaining-mode {:?} is not supported", conf.chaining_mode),
        ));
    }
    Ok(conf)
}
