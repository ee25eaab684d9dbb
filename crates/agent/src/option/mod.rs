//! The agent's configuration: flags, `CILIUM_*` environment variables and a
//! `--config-dir` with one file per key (what `cilium build-config` writes),
//! merged with flags winning over env over files over defaults, as Cilium's
//! viper setup does.

mod daemon_config;
pub mod keys;
pub mod kvstore;
pub mod modes;
pub mod runtime;
mod sources;
pub mod validate;

pub use daemon_config::{DaemonConfig, EventsConfig, Families};
pub use modes::{
    HostRouting, IdentityAllocationMode, IpamMode, MonitorAggregation, RoutingMode, TunnelProtocol,
};
pub use sources::{load, Loaded, Source};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("unknown configuration key {key:?} (from {origin})")]
    UnknownKey { key: String, origin: String },
    #[error("invalid value {value:?} for {key}: {why}")]
    BadValue {
        key: String,
        value: String,
        why: String,
    },
    #[error("flag --{0} needs a value")]
    MissingValue(String),
    #[error("unexpected argument {0:?}; flags look like --key=value")]
    UnexpectedArg(String),
    #[error("reading config dir {dir}: {why}")]
    ConfigDir { dir: String, why: String },
    #[error("{0}")]
    Unsupported(String),
    /// Cilium's words for a key that another key's value needs.
    #[error("{needed} must be configured with option --{key} in combination with {because}")]
    Requires {
        needed: &'static str,
        key: &'static str,
        because: &'static str,
    },
}
