//! This node and the others: the local node is published in the kvstore
//! under the agent's session lease, the others are learned by watching
//! `cilium/state/nodes/v1/`. A node whose agent dies leaves with its lease.

pub use crate::node::{IpNet, Node, NodeAddress};
use crate::remote_nodes::RemoteNodes;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use watch::Source;

/// This node and the others it knows; what another node's coming and
/// going means for the datapath is [`RemoteNodes`]'s.
pub struct Nodes {
    local: Node,
    remote: Mutex<BTreeMap<String, Node>>,
    datapath: RemoteNodes,
    /// Bumped when a node comes, changes or goes (the health prober
    /// probes new nodes without waiting for its interval).
    changed: tokio::sync::watch::Sender<u64>,
}

impl Nodes {
    pub fn new(local: Node, datapath: RemoteNodes) -> Self {
        Self {
            local,
            remote: Mutex::default(),
            datapath,
            changed: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Wakes when the set of other nodes or what they publish changed.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changed.subscribe()
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
                    tracing::info!(subsys = "nodemanager", node = %new.name, ip = %new.primary_ipv4().map(|ip| ip.to_string()).unwrap_or_default(), "Node discovered");
                }
                self.datapath.upsert(old.as_ref(), &new).await;
                self.changed.send_modify(|n| *n += 1);
            }
            watch::Change::Delete { key, .. } => {
                let gone = self.remote.lock().expect("nodes lock").remove(&key);
                if let Some(node) = gone {
                    tracing::info!(subsys = "nodemanager", node = %node.name, "Node deleted");
                    self.datapath.remove(&node).await;
                    self.changed.send_modify(|n| *n += 1);
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
