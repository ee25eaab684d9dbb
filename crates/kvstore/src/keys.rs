//! Cilium's key layout under the `cilium/` base prefix.

pub const BASE: &str = "cilium";
/// `cilium/.heartbeat`: an RFC3339 time the operator updates.
pub const HEARTBEAT: &str = "cilium/.heartbeat";
/// `cilium/state/nodes/v1/<cluster>/<node>`: JSON of the node.
pub const NODES: &str = "cilium/state/nodes/v1";
/// `cilium/state/ip/v1/default/<ip>`: JSON `IPIdentityPair`.
pub const IPS: &str = "cilium/state/ip/v1/default";
/// `cilium/state/identities/v1/id/<id>`: the identity's label key.
pub const IDENTITY_IDS: &str = "cilium/state/identities/v1/id";
/// `cilium/state/identities/v1/value/<labels>/<node suffix>`: the ID, leased.
pub const IDENTITY_VALUES: &str = "cilium/state/identities/v1/value";

/// `cilium/state/services/v1/<cluster>/rest/<id>`: a service made through
/// the REST API, as its `ServiceSpec` JSON (Cilium keeps k8s services of
/// other clusters here under their namespace and name).
pub const SERVICES: &str = "cilium/state/services/v1";

pub fn service(cluster: &str, id: u16) -> String {
    format!("{SERVICES}/{cluster}/rest/{id}")
}

pub fn node(cluster: &str, name: &str) -> String {
    format!("{NODES}/{cluster}/{name}")
}

pub fn ip(addr: &str) -> String {
    format!("{IPS}/{addr}")
}

pub fn identity_id(id: u32) -> String {
    format!("{IDENTITY_IDS}/{id}")
}

pub fn identity_value(labels_key: &str, node_suffix: &str) -> String {
    format!("{IDENTITY_VALUES}/{labels_key}/{node_suffix}")
}
