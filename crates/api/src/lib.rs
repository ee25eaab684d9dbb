//! The agent's REST API: models (Cilium's JSON field names) and a blocking
//! HTTP/1.1 client over the unix socket. The client is hand-rolled on
//! purpose: the CLI and the CNI plugin are short-lived processes, and a
//! socket write plus one read keeps their start and pod setup fast.

pub mod client;
pub mod endpoint;
pub mod ipam;
pub mod models;
pub mod monitor;
pub mod service;

pub use client::{Client, ClientError};

/// Default REST API socket.
pub const DEFAULT_SOCKET: &str = "/var/run/cilium/cilium.sock";
/// Base path of every API route.
pub const BASE_PATH: &str = "/v1";

/// This build's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Short git revision this build came from.
pub const GIT_REVISION: &str = env!("CILIUM_GIT_REVISION");

/// `<version> (v<version>-<revision>)`, the form Cilium prints.
pub fn version_string() -> String {
    format!("{VERSION} (v{VERSION}-{GIT_REVISION})")
}
