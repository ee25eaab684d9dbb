//! Cilium's custom resources as the API server serves them
//! (`cilium.io/v2`), for dynamic clients: one place spells each kind.

use kube::api::ApiResource;

fn v2(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "cilium.io".into(),
        version: "v2".into(),
        api_version: "cilium.io/v2".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// `CiliumIdentity` (cluster-scoped, named after the numeric identity).
pub fn identities() -> ApiResource {
    v2("CiliumIdentity", "ciliumidentities")
}

/// `CiliumEndpoint` (namespaced, named after its pod).
pub fn endpoints() -> ApiResource {
    v2("CiliumEndpoint", "ciliumendpoints")
}

/// `CiliumNode` (cluster-scoped, named after its Node).
pub fn nodes() -> ApiResource {
    v2("CiliumNode", "ciliumnodes")
}

/// The annotation with which the operator marks an identity no endpoint
/// uses; an agent that takes the identity up again removes it.
pub const HEARTBEAT_ANNOTATION: &str = "io.cilium.heartbeat";
