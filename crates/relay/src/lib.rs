//! Hubble Relay: follows the peer service to every node's Hubble server
//! and serves the cluster's flows, merged in time order, on the same
//! Observer API (Cilium 1.16's `hubble-relay serve`).

pub mod config;
pub mod health;
pub mod observer;
pub mod peers;
pub mod server;
pub mod sort;
