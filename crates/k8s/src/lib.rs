//! The agent's Kubernetes client: a connection made the ways Cilium's
//! agent makes one (`k8s-kubeconfig-path`, `k8s-api-server`, or the
//! in-cluster service account), and any resource's list+watch as a
//! `watch::Source`, so a subsystem follows Kubernetes objects through the
//! same store, with the same relist and retry rules, as it follows the
//! kvstore.

pub mod cilium;
pub mod client;
pub mod slim;
pub mod source;
pub mod throttle;

pub use client::{connect, version_line, ClientOptions, ConnectError};
pub use source::{key_of, ResourceSource, WatchHealth, WatchState};

/// The client library, for callers that name its types.
pub use kube;

/// The Kubernetes API types, for callers that name them.
pub use k8s_openapi;
