//! What another node's existence means for this node's datapath (Cilium's
//! linuxNodeHandler): a node ID for its addresses, its addresses (of
//! either family) in the ipcache as remote-node (its health endpoint's as health), and its
//! pod CIDR routed, either into cilium_host and the tunnel map (tunnel
//! mode, where cil_from_host sends the node's own traffic through the
//! overlay) or via its node address (native routing with
//! auto-direct-node-routes).

use crate::ipcache::{Entry, IpCache, Source};
use crate::node::Node;
use crate::node_ids::NodeIds;
use crate::ports::{KernelError, NodeRoutes};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// The facts about a node this agent acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Facts {
    node_ip: Option<Ipv4Addr>,
    router_ip: Option<Ipv4Addr>,
    health_ip: Option<Ipv4Addr>,
    pod_cidr: Option<(Ipv4Addr, u8)>,
    /// A dual-stack node's IPv6 address, router, health endpoint and pod
    /// CIDR.
    node_ip6: Option<Ipv6Addr>,
    router_ip6: Option<Ipv6Addr>,
    health_ip6: Option<Ipv6Addr>,
    pod_cidr6: Option<(Ipv6Addr, u8)>,
}

fn facts(node: &Node) -> Facts {
    Facts {
        node_ip: node.address_of("InternalIP"),
        router_ip: node.address_of("CiliumInternalIP"),
        health_ip: node.health_ipv4,
        pod_cidr: node.ipv4_alloc_cidr.as_ref().and_then(|c| c.ipv4_prefix()),
        node_ip6: node.address_of("InternalIP"),
        router_ip6: node.address_of("CiliumInternalIP"),
        health_ip6: node.health_ipv6,
        pod_cidr6: node.ipv6_alloc_cidr.as_ref().and_then(|c| c.ipv6_prefix()),
    }
}

/// Every address a node publishes: each maps to its node ID.
fn addresses(node: &Node) -> Vec<IpAddr> {
    let mut ips: Vec<IpAddr> = node
        .addresses
        .iter()
        .filter_map(|a| a.ip.parse().ok())
        .collect();
    ips.sort();
    ips.dedup();
    ips
}

pub struct RemoteNodes {
    ipcache: Arc<IpCache>,
    ids: Arc<NodeIds>,
    /// Routes to other nodes' pods; None in native routing without
    /// auto-direct-node-routes, where they are the network's business.
    routes: Option<Arc<dyn NodeRoutes>>,
}

impl RemoteNodes {
    pub fn new(
        ipcache: Arc<IpCache>,
        ids: Arc<NodeIds>,
        routes: Option<Arc<dyn NodeRoutes>>,
    ) -> Self {
        Self {
            ipcache,
            ids,
            routes,
        }
    }

    /// A node appeared or changed; `old` is what was known before.
    pub async fn upsert(&self, old: Option<&Node>, new: &Node) {
        let ips = addresses(new);
        if let Some(old) = old {
            let gone: Vec<IpAddr> = addresses(old)
                .into_iter()
                .filter(|ip| !ips.contains(ip))
                .collect();
            self.ids.release(&gone);
        }
        if let Err(e) = self.ids.assign(&ips) {
            tracing::error!(subsys = "linux-datapath", node = %new.name, error = %e, "Failed to allocate ID for node");
        }
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
        self.ids.release(&addresses(node));
    }

    async fn install(&self, f: &Facts) -> Result<(), KernelError> {
        use abi::identity::{HEALTH, REMOTE_NODE};
        use abi::ipcache::host_prefix_len;
        for ip in [f.node_ip.map(IpAddr::from), f.node_ip6.map(IpAddr::from)]
            .into_iter()
            .flatten()
        {
            let entry = Entry::new(REMOTE_NODE, Source::Kvstore);
            self.ipcache.upsert(ip, host_prefix_len(ip), entry)?;
        }
        // Its router addresses are the node's in either mode, and its
        // health endpoint's answer the endpoint path of our probes; each
        // is behind the node's IPv4 address, the overlay's tunnel
        // endpoint (ignored by a datapath without one; 1.16's underlay
        // is IPv4, so an IPv6-only node is behind none).
        let behind = [
            (f.router_ip.map(IpAddr::from), REMOTE_NODE),
            (f.router_ip6.map(IpAddr::from), REMOTE_NODE),
            (f.health_ip.map(IpAddr::from), HEALTH),
            (f.health_ip6.map(IpAddr::from), HEALTH),
        ];
        for (ip, identity) in behind {
            let Some(ip) = ip else { continue };
            let entry = Entry::new(identity, Source::Kvstore);
            let entry = match f.node_ip {
                Some(node_ip) => entry.behind(node_ip),
                None => entry,
            };
            self.ipcache.upsert(ip, host_prefix_len(ip), entry)?;
        }
        if let (Some(cidr), Some(node_ip), Some(routes)) = (f.pod_cidr, f.node_ip, &self.routes) {
            routes.install(cidr, node_ip).await?;
        }
        if let (Some(cidr), Some(routes)) = (f.pod_cidr6, &self.routes) {
            routes.install6(cidr, f.node_ip6).await?;
        }
        Ok(())
    }

    async fn withdraw(&self, f: &Facts) {
        for ip in [f.node_ip, f.router_ip, f.health_ip].into_iter().flatten() {
            let _ = self.ipcache.remove(ip, 32, Source::Kvstore);
        }
        for ip in [f.node_ip6, f.router_ip6, f.health_ip6]
            .into_iter()
            .flatten()
        {
            let _ = self.ipcache.remove(ip, 128, Source::Kvstore);
        }
        if let (Some(cidr), Some(node_ip), Some(routes)) = (f.pod_cidr, f.node_ip, &self.routes) {
            routes.withdraw(cidr, node_ip).await;
        }
        if let (Some(cidr), Some(routes)) = (f.pod_cidr6, &self.routes) {
            routes.withdraw6(cidr).await;
        }
    }
}
