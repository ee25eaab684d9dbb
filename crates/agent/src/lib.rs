//! cilium-agent: wires the datapath, node devices, configuration and the
//! REST API together. It holds no packet or policy logic of its own.

pub mod api_debuginfo;
pub mod api_endpoint;
pub mod api_identity;
pub mod api_ipam;
pub mod api_map;
pub mod api_policy;
pub mod api_server;
pub mod api_service;
pub mod cni_config;
pub mod controller;
pub mod ct_gc;
pub mod daemon;
pub mod endpoint;
pub mod explain;
pub mod health;
pub mod hostips;
pub mod identity;
pub mod ipam;
pub mod ipcache;
pub mod ipsync;
pub mod kvwriter;
pub mod logging;
pub mod metrics;
pub mod monitor;
pub mod nodes;
pub mod option;
pub mod pidfile;
pub mod policies;
pub mod policy_trace;
pub mod regeneration;
pub mod remote_nodes;
pub mod services;
pub mod status;
pub mod tasks;
mod timefmt;
