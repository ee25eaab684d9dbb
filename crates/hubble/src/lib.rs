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
