//! The APIs the agent serves over HTTP:
//! - the REST API on the agent's unix socket (base path /v1): `server`
//!   serves it, and every other module here but the two below is one
//!   group of its paths (`/config`, `/endpoint`, `/policy`, ...) with the
//!   state its handlers read; the daemon merges their `routes` with those
//!   that live beside what they report (`status`, `metrics`, `statedb`);
//! - `cilium_health`: cilium-health's API (`/v1beta` on `health.sock`),
//!   through the same `server`;
//! - `healthz`: the liveness/readiness endpoint kubelet probes, on
//!   127.0.0.1:<agent-health-port>; its `serve_http` also serves the
//!   Prometheus metrics.

pub mod cilium_health;
pub mod config;
pub mod debuginfo;
pub mod endpoint;
pub mod features_off;
pub mod healthz;
pub mod identity;
pub mod ipam;
mod json_indent;
pub mod map;
pub mod nodes;
pub mod policy;
pub mod server;
pub mod service;
