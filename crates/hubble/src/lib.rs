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

pub mod tls;

/// Clients of these services over a Unix socket (the agent's
/// `hubble.sock`), for our CLI and tests.
pub mod client {
    use std::path::PathBuf;

    /// A channel to the gRPC server on the Unix socket at `path`; it
    /// connects at the first call.
    pub fn unix_channel(path: impl Into<PathBuf>) -> tonic::transport::Channel {
        let path = path.into();
        // the URI is not used to connect; gRPC needs one for :authority
        tonic::transport::Endpoint::from_static("http://localhost").connect_with_connector_lazy(
            tower::service_fn(move |_: tonic::transport::Uri| {
                let path = path.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(&path).await?;
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
                }
            }),
        )
    }
}
