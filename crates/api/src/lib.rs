//! The agent's REST API: models (Cilium's JSON field names) and a blocking
//! HTTP/1.1 client over the unix socket. The client is hand-rolled on
//! purpose: the CLI and the CNI plugin are short-lived processes, and a
//! socket write plus one read keeps their start and pod setup fast.

pub mod client;
pub mod debuginfo;
pub mod decimal;
pub mod duration;
pub mod endpoint;
pub mod health;
pub mod ipam;
pub mod models;
pub mod monitor;
pub mod service;
pub mod status;
pub mod timefmt;

pub use client::{Client, ClientError};

/// Default REST API socket.
pub const DEFAULT_SOCKET: &str = "/var/run/cilium/cilium.sock";
/// Base path of every API route.
pub const BASE_PATH: &str = "/v1";

/// This build's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Short git revision this build came from.
pub const GIT_REVISION: &str = env!("CILIUM_GIT_REVISION");

/// Author date (ISO 8601) of the commit this build came from.
pub const GIT_AUTHOR_DATE: &str = env!("CILIUM_GIT_AUTHOR_DATE");
/// `rustc <version>` of the compiler that built this.
pub const RUSTC_VERSION: &str = env!("CILIUM_RUSTC_VERSION");
/// `<os>/<arch>` this was built for, in Go's names (`linux/amd64`).
pub const PLATFORM: &str = env!("CILIUM_PLATFORM");

/// `<version> (v<version>-<revision>)`, the form Cilium prints.
pub fn version_string() -> String {
    format!("{VERSION} (v{VERSION}-{GIT_REVISION})")
}

/// The long form `cilium version` prints and `/debuginfo` sends, in the
/// seven words of Cilium's (`1.16.0 82999990 2024-07-25T18:00:08+00:00 go
/// version go1.22.5 linux/amd64`), naming our toolchain instead of Go's:
/// `0.1.0 7ad36907 2026-11-23T13:42:04+00:00 rustc version 1.90.0 linux/amd64`.
pub fn full_version() -> String {
    format!("{VERSION} {GIT_REVISION} {GIT_AUTHOR_DATE} {RUSTC_VERSION} {PLATFORM}")
}
