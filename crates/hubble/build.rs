//! Generates the Rust types and the gRPC service traits and clients from
//! proto/ with the system's protoc (Debian's protobuf-compiler; the
//! well-known types from libprotobuf-dev's /usr/include).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = [
        "proto/flow/flow.proto",
        "proto/relay/relay.proto",
        "proto/peer/peer.proto",
        "proto/observer/observer.proto",
        "proto/grpc/health/v1/health.proto",
    ];
    for p in protos {
        println!("cargo:rerun-if-changed={p}");
    }
    // Rarely set, and boxed: the agent keeps its flows boxed in a ring and
    // evicts one for each it writes, and a Flow of 1120 bytes was past
    // glibc's per-thread cache (1032), so every one went the slow way,
    // merging the freed small chunks each time (920 bytes boxed).
    tonic_prost_build::configure()
        .boxed(".flow.Flow.l7")
        .boxed(".flow.Flow.extensions")
        .build_server(true)
        .build_client(true)
        .compile_protos(&protos, &["proto", "/usr/include"])?;
    Ok(())
}
