//! The agent in Kubernetes: `connection` is its connection to the API
//! server (the client, the server's health as `cilium status` reports it,
//! the watchers started); each other module is one kind of object the
//! agent follows or writes: pods and namespaces, nodes, CiliumEndpoints,
//! CiliumIdentities, policies, services, and pods' hostPorts. The client
//! library under them is the `k8s` crate (crates/k8s).

pub mod connection;
pub mod endpoints;
pub mod hostports;
pub mod identities;
pub mod nodes;
pub mod pods;
pub mod policies;
pub mod services;
