//! cilium-agent: the composition root (`daemon`) that builds the control
//! plane's subsystems over the kernel ports of `kernel`, the REST API's
//! routes for each subsystem and the other APIs it serves (`api`), its
//! side of Kubernetes (`k8s`), status, metrics, the monitor and the
//! configuration. The decisions themselves live in `controlplane`.

// The REST handlers' helpers fail with the response to send (axum's
// Response, 128 bytes): it is built once per refused request, so boxing
// it would only add an allocation.
#![allow(clippy::result_large_err)]

pub mod api;
pub mod cluster_health;
pub mod cni_config;
pub mod ct_gc;
pub mod daemon;
pub mod explain;
pub mod hostips;
pub mod hubble;
pub mod k8s;
pub mod kernel;
pub mod logging;
pub mod masquerade;
pub mod metrics;
pub mod monitor;
pub mod option;
pub mod pidfile;
pub mod policy_trace;
pub mod start_pages;
pub mod statedb;
pub mod status;
mod text;
