//! What another node's existence means for this node's datapath (Cilium's
//! linuxNodeHandler in tunnel mode): its addresses in the ipcache as
//! remote-node, its pod CIDR in the tunnel map and routed into cilium_host,
//! where cil_from_host sends the node's own traffic through the overlay.

use crate::daemon::Daemon;
use crate::ipcache::{Entry, SOURCE_KVSTORE};
use crate::nodes::Node;
use abi::tunnel::{TunnelKey, TunnelValue};
use datapath::maps::Tunnel;
use std::net::Ipv4Addr;

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

fn pod_route(d: &Daemon, (net, len): (Ipv4Addr, u8)) -> netdev::link::Route {
    netdev::link::Route::new(d.host.host.index, net, len)
        .via(d.config.router_ip)
        .src(d.config.router_ip)
        .mtu(d.config.route_mtu())
}

/// A node appeared or changed; `old` is what was known before.
pub async fn upsert(d: &Daemon, old: Option<&Node>, new: &Node) {
    let want = facts(new);
    if let Some(old) = old {
        let had = facts(old);
        if had == want {
            return;
        }
        withdraw(d, &had).await;
    }
    if let Err(e) = install(d, &want).await {
        tracing::warn!(subsys = "linux-datapath", node = %new.name, error = %e, "Unable to install routes to node");
    }
}

pub async fn remove(d: &Daemon, node: &Node) {
    withdraw(d, &facts(node)).await;
}

async fn install(d: &Daemon, f: &Facts) -> anyhow::Result<()> {
    if let Some(ip) = f.node_ip {
        d.ipcache.upsert(
            ip,
            32,
            Entry::new(abi::identity::REMOTE_NODE, SOURCE_KVSTORE),
        )?;
    }
    let Some(node_ip) = f.node_ip else {
        return Ok(());
    };
    if !d.config.tunneling() {
        return Ok(());
    }
    if let Some(router) = f.router_ip {
        let entry = Entry::new(abi::identity::REMOTE_NODE, SOURCE_KVSTORE).behind(node_ip);
        d.ipcache.upsert(router, 32, entry)?;
    }
    if let Some((net, len)) = f.pod_cidr {
        Tunnel::open(&d.config.bpf_root)?.put(&TunnelKey::v4(net), &TunnelValue::v4(node_ip))?;
        d.netlink.replace_route(&pod_route(d, (net, len))).await?;
    }
    Ok(())
}

async fn withdraw(d: &Daemon, f: &Facts) {
    for ip in [f.node_ip, f.router_ip].into_iter().flatten() {
        let _ = d.ipcache.remove(ip, 32, SOURCE_KVSTORE);
    }
    if let Some((net, len)) = f.pod_cidr {
        if let Ok(map) = Tunnel::open(&d.config.bpf_root) {
            let _ = map.remove(&TunnelKey::v4(net));
        }
        if let Err(e) = d.netlink.delete_route(&pod_route(d, (net, len))).await {
            tracing::warn!(subsys = "linux-datapath", cidr = %format!("{net}/{len}"), error = %e, "Unable to remove route to node");
        }
    }
}
