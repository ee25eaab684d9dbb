//! Service load balancing without I/O: the services the agent was told
//! about, the backend IDs it gave out, and the exact map entries they become
//! in `cilium_lb4_services_v2`, `cilium_lb4_backends_v3` and
//! `cilium_lb4_reverse_nat` (their `lb6` twins for IPv6 frontends); plus
//! Maglev tables. The agent applies the
//! [`Update`]s this crate computes.

pub mod maglev;
mod murmur3;
mod service;
mod table;

pub use service::{
    flags_string, host_port, proto_name, Backend, BackendState, Frontend, Service, ServiceType,
};
pub use table::{
    BackendEntry, Family, LbError, LoadBalancer, MaglevConfig, MapKeys, RevNatEntry, ServiceKey,
    ServiceSpec, Update,
};
