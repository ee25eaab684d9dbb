//! CNI errors: the spec's codes, printed as the error JSON on stdout.

use serde::Serialize;

/// Error codes of the CNI specification.
pub const INCOMPATIBLE_VERSION: u32 = 1;
pub const UNKNOWN_CONTAINER: u32 = 3;
pub const INVALID_ENV: u32 = 4;
pub const IO_FAILURE: u32 = 5;
pub const DECODE_FAILURE: u32 = 6;
pub const INVALID_CONFIG: u32 = 7;
pub const TRY_AGAIN_LATER: u32 = 11;
pub const PLUGIN_NOT_AVAILABLE: u32 = 50;
/// Codes 100+ belong to the plugin; Cilium's own failures use this one.
pub const PLUGIN_FAILURE: u32 = 100;

#[derive(Debug, Serialize)]
pub struct CniError {
    #[serde(rename = "cniVersion")]
    pub cni_version: String,
    pub code: u32,
    pub msg: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        Self {
            cni_version: crate::LATEST_VERSION.into(),
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    pub fn details(mut self, d: impl Into<String>) -> Self {
        self.details = d.into();
        self
    }
}

impl From<netdev::Error> for CniError {
    fn from(e: netdev::Error) -> Self {
        CniError::new(IO_FAILURE, e.to_string())
    }
}

impl From<api::ClientError> for CniError {
    fn from(e: api::ClientError) -> Self {
        let code = match &e {
            api::ClientError::Unreachable { .. } => TRY_AGAIN_LATER,
            _ => PLUGIN_FAILURE,
        };
        CniError::new(code, e.to_string())
    }
}
