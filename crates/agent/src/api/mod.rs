//! The REST API on the agent's unix socket (base path /v1): `server`
//! serves it; every other module here is one group of its paths
//! (`/config`, `/endpoint`, `/policy`, ...) with the state its handlers
//! read, whose `routes` the daemon merges with those that live beside
//! what they report (`status`, `metrics`, `statedb`).

pub mod config;
pub mod debuginfo;
pub mod endpoint;
pub mod features_off;
pub mod identity;
pub mod ipam;
pub mod map;
pub mod nodes;
pub mod policy;
pub mod server;
pub mod service;
