//! This node and the others: the local node is published in the kvstore
//! under the agent's session lease, the others are learned by watching
//! `cilium/state/nodes/v1/`. A node whose agent dies leaves with its lease.

use crate::remote_nodes::RemoteNodes;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use watch::Source;

/// One of a node's addresses (`Type`: InternalIP, ExternalIP, CiliumInternalIP).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddress {
    #[serde(rename = "Type")]
    pub kind: String,
    #[serde(rename = "IP")]
    pub ip: String,
}

/// A CIDR as Go's `net.IPNet` marshals it: IP text, mask as base64 bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpNet {
    #[serde(rename = "IP")]
    pub ip: String,
    #[serde(rename = "Mask")]
    pub mask: String,
}

impl IpNet {
    pub fn v4(net: Ipv4Addr, len: u8) -> Self {
        let mask = u32::MAX
            .checked_shl(32 - u32::from(len))
            .unwrap_or(0)
            .to_be_bytes();
        Self {
            ip: net.to_string(),
            mask: STANDARD.encode(mask),
        }
    }

    /// `10.1.0.0/24`, or empty when the mask does not decode.
    pub fn cidr(&self) -> String {
        if self.ip.is_empty() {
            return String::new();
        }
        format!("{}/{}", self.ip, self.prefix_len())
    }

    fn prefix_len(&self) -> u8 {
        STANDARD
            .decode(&self.mask)
            .unwrap_or_default()
            .iter()
            .map(|b| b.count_ones() as u8)
            .sum()
    }

    pub fn ipv4_prefix(&self) -> Option<(Ipv4Addr, u8)> {
        Some((self.ip.parse().ok()?, self.prefix_len()))
    }
}

/// Cilium's `nodeTypes.Node` JSON (the fields this agent fills).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    #[serde(rename = "Name")]
    pub name: String,
    #[serde(rename = "Cluster", default)]
    pub cluster: String,
    #[serde(rename = "IPAddresses", default)]
    pub addresses: Vec<NodeAddress>,
    #[serde(rename = "IPv4AllocCIDR", default)]
    pub ipv4_alloc_cidr: Option<IpNet>,
    #[serde(rename = "ClusterID", default)]
    pub cluster_id: u32,
    #[serde(rename = "Source", default)]
    pub source: String,
}

impl Node {
    pub fn address(&self, kind: &str) -> Option<&str> {
        self.addresses
            .iter()
            .find(|a| a.kind == kind)
            .map(|a| a.ip.as_str())
    }

    /// The address `node list` shows: InternalIP, else CiliumInternalIP.
    pub fn primary_ipv4(&self) -> &str {
        self.address("InternalIP")
            .or_else(|| self.address("CiliumInternalIP"))
            .unwrap_or("")
    }

    pub fn to_api(&self, source: &str) -> api::models::NodeElement {
        api::models::NodeElement {
            name: self.name.clone(),
            primary_address: api::models::NodeAddressingSummary {
                ipv4: Some(api::models::NodeAddressingElement {
                    enabled: true,
                    ip: self.primary_ipv4().to_owned(),
                    alloc_range: self
                        .ipv4_alloc_cidr
                        .as_ref()
                        .map(IpNet::cidr)
                        .unwrap_or_default(),
                    address_type: String::new(),
                }),
            },
            source: source.to_owned(),
        }
    }
}

/// This node and the others it knows; what another node's coming and
/// going means for the datapath is [`RemoteNodes`]'s.
pub struct Nodes {
    local: Node,
    remote: Mutex<BTreeMap<String, Node>>,
    datapath: RemoteNodes,
}

impl Nodes {
    pub fn new(local: Node, datapath: RemoteNodes) -> Self {
        Self {
            local,
            remote: Mutex::default(),
            datapath,
        }
    }

    /// This node as published to the cluster.
    pub fn local(&self) -> &Node {
        &self.local
    }

    /// The other nodes.
    pub fn list(&self) -> Vec<Node> {
        self.remote
            .lock()
            .expect("nodes lock")
            .values()
            .cloned()
            .collect()
    }

    /// Follows `source` (every node, this one included) until the agent stops.
    pub fn follow(
        self: Arc<Self>,
        source: impl Source<Key = String, Value = Node> + 'static,
        tasks: &crate::tasks::Tasks,
    ) {
        let handler = move |change| {
            let this = Arc::clone(&self);
            async move {
                this.apply(change).await;
                Ok::<(), std::convert::Infallible>(())
            }
        };
        tasks.spawn("nodes", watch::Store::new("nodes").run(source, handler));
    }

    /// One change of the cluster's nodes.
    pub async fn apply(&self, change: watch::Change<String, Node>) {
        match change {
            watch::Change::Upsert { new, .. } if new.name == self.local.name => {}
            watch::Change::Upsert { key, new, .. } => {
                let old = self
                    .remote
                    .lock()
                    .expect("nodes lock")
                    .insert(key, new.clone());
                if old.is_none() {
                    tracing::info!(subsys = "nodemanager", node = %new.name, ip = %new.primary_ipv4(), "Node discovered");
                }
                self.datapath.upsert(old.as_ref(), &new).await;
            }
            watch::Change::Delete { key, .. } => {
                let gone = self.remote.lock().expect("nodes lock").remove(&key);
                if let Some(node) = gone {
                    tracing::info!(subsys = "nodemanager", node = %node.name, "Node deleted");
                    self.datapath.remove(&node).await;
                }
            }
            watch::Change::Synced => {
                tracing::info!(subsys = "nodemanager", "Initial node list received");
            }
        }
    }
}

/// The kvstore's nodes as a source of [`Nodes::follow`].
pub fn kvstore_source(kv: &kvstore::Kvstore) -> impl Source<Key = String, Value = Node> + 'static {
    kv.source(&format!("{}/", kvstore::keys::NODES))
        .decode(|_, raw| serde_json::from_slice::<Node>(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_marshal_as_go_ipnet() {
        let n = IpNet::v4(Ipv4Addr::new(10, 1, 0, 0), 24);
        assert_eq!(n.mask, "////AA==");
        assert_eq!(n.cidr(), "10.1.0.0/24");
        assert_eq!(
            IpNet::v4(Ipv4Addr::new(10, 0, 0, 0), 8).cidr(),
            "10.0.0.0/8"
        );
    }
}
