//! Hubble's gRPC API, wire-compatible with Cilium 1.16's: the `flow`
//! model, the `observer.Observer` service every agent and Hubble Relay
//! serve, the `peer.Peer` service Relay finds the nodes by, and `relay`'s
//! node states. Generated at build time from `proto/` (ours, with
//! Cilium's package, message, field and enum names and numbers).

/// `package flow`: flows, filters, lost, agent and debug events.
pub mod flow {
    tonic::include_proto!("flow");
}

/// `package relay`: node states as Relay reports them.
pub mod relay {
    tonic::include_proto!("relay");
}

/// `package peer`: the `Peer` service.
pub mod peer {
    tonic::include_proto!("peer");
}

/// `package observer`: the `Observer` service.
pub mod observer {
    tonic::include_proto!("observer");
}

/// `package grpc.health.v1`: gRPC's health service, which Hubble's
/// clients check before their first call.
pub mod health {
    tonic::include_proto!("grpc.health.v1");
}

/// The service name Hubble's health checks ask about.
pub const OBSERVER_HEALTH_NAME: &str = "hubble.server.Observer";

/// Whether a health check asks about a service Hubble's servers answer
/// for: the server as a whole (`""`) or its observer.
pub fn health_service_known(service: &str) -> Result<(), tonic::Status> {
    if service.is_empty() || service == OBSERVER_HEALTH_NAME {
        Ok(())
    } else {
        Err(tonic::Status::not_found(format!(
            "unknown service {service:?}"
        )))
    }
}

pub mod listen;

pub mod tls;

pub mod client;
