//! What another node's existence means for this node's datapath (Cilium's
//! linuxNodeHandler in tunnel mode): its addresses in the ipcache as
//! remote-node, its pod CIDR in the tunnel map and routed into cilium_host,
//! where cil_from_host sends the node's own traffic through the overlay.

use crate::ipcache::{Entry, IpCache, Source};
use crate::node::Node;
use crate::ports::{KernelError, NodeRoutes};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// The facts about a node this agent acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Facts {
    node_ip: Option<Ipv4Addr>,
    router_ip: Option<Ipv4Addr>,
    pod_cidr: Option<(Ipv4Addr, u8)>,
}

fn facts(node: &Node) -> Facts {
    let ip = |kind| node.address(kind).and_then(|s| s.parse().ok());
    Facts {
        node_ip: ip("InternalIP"),
        router_ip: ip("CiliumInternalIP"),
        pod_cidr: node.ipv4_alloc_cidr.as_ref().and_then(|c| c.ipv4_prefix()),
    }
}

pub struct RemoteNodes {
    ipcache: Arc<IpCache>,
    /// The overlay's routes; None in native routing, where other nodes'
    /// pods are the network's business.
    tunnel: Option<Arc<dyn NodeRoutes>>,
}

impl RemoteNodes {
    pub fn new(ipcache: Arc<IpCache>, tunnel: Option<Arc<dyn NodeRoutes>>) -> Self {
        Self { ipcache, tunnel }
    }

    /// A node appeared or changed; `old` is what was known before.
    pub async fn upsert(&self, old: Option<&Node>, new: &Node) {
        let want = facts(new);
        if let Some(old) = old {
            let had = facts(old);
            if had == want {
                return;
            }
            self.withdraw(&had).await;
        }
        if let Err(e) = self.install(&want).await {
            tracing::warn!(subsys = "linux-datapath", node = %new.name, error = %e, "Unable to install routes to node");
        }
    }

    pub async fn remove(&self, node: &Node) {
        self.withdraw(&facts(node)).await;
    }

    async fn install(&self, f: &Facts) -> Result<(), KernelError> {
        let Some(node_ip) = f.node_ip else {
            return Ok(());
        };
        self.ipcache.upsert(
            node_ip,
            32,
            Entry::new(abi::identity::REMOTE_NODE, Source::Kvstore),
        )?;
        let Some(tunnel) = &self.tunnel else {
            return Ok(());
        };
        if let Some(router) = f.router_ip {
            let entry = Entry::new(abi::identity::REMOTE_NODE, Source::Kvstore).behind(node_ip);
            self.ipcache.upsert(router, 32, entry)?;
        }
        if let Some(cidr) = f.pod_cidr {
            tunnel.install(cidr, node_ip).await?;
        }
        Ok(())
    }

    async fn withdraw(&self, f: &Facts) {
        for ip in [f.node_ip, f.router_ip].into_iter().flatten() {
            let _ = self.ipcache.remove(ip, 32, Source::Kvstore);
        }
        if let (Some(cidr), Some(tunnel)) = (f.pod_cidr, &self.tunnel) {
            tunnel.withdraw(cidr).await;
        }
    }
}
