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
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_protos(&protos, &["proto", "/usr/include"])?;
    Ok(())
}
