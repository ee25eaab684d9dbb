//! The control plane's ports over the real kernel: BPF maps and programs
//! through `datapath`, devices and routes through `netdev`. Each type does
//! exactly what its trait says and decides nothing.

use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::ipcache::{IpcacheKey, RemoteEndpointInfo};
use abi::node::{NodeKey, NodeValueV2};
use abi::tunnel::{TunnelKey, TunnelValue};
use controlplane::ports::{
    EndpointDatapath, IpcacheMap, KernelError, LbMaps, NodeIdMap, NodeRoutes, PortFuture,
};
use datapath::attach::AttachMode;
use datapath::maps::{Ipcache, Lb4Backends, Lxc, NodeMap, NodeMapV2, Tunnel};
use datapath::policymap;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn kernel(e: datapath::Error) -> KernelError {
    KernelError::new(e)
}

/// cilium_ipcache.
pub struct IpcacheWriter {
    pub bpf_root: PathBuf,
}

impl IpcacheMap for IpcacheWriter {
    fn write(&self, ip: IpAddr, len: u8, value: &RemoteEndpointInfo) -> Result<(), KernelError> {
        Ipcache::open(&self.bpf_root)
            .and_then(|m| m.put(&IpcacheKey::new(ip, len), value))
            .map_err(kernel)
    }

    fn delete(&self, ip: IpAddr, len: u8) -> Result<(), KernelError> {
        Ipcache::open(&self.bpf_root)
            .and_then(|m| m.remove(&IpcacheKey::new(ip, len)))
            .map(drop)
            .map_err(kernel)
    }
}

/// cilium_node_map_v2, mirrored into cilium_node_map as 1.16 does.
pub struct NodeIdWriter {
    pub bpf_root: PathBuf,
}

impl NodeIdMap for NodeIdWriter {
    fn write(&self, ip: IpAddr, id: u16) -> Result<(), KernelError> {
        let key = NodeKey::new(ip);
        let value = NodeValueV2 {
            id,
            ..Default::default()
        };
        NodeMapV2::open(&self.bpf_root)
            .and_then(|m| m.put(&key, &value))
            .and_then(|()| NodeMap::open(&self.bpf_root))
            .and_then(|m| m.put(&key, &id))
            .map_err(kernel)
    }

    fn delete(&self, ip: IpAddr) -> Result<(), KernelError> {
        let key = NodeKey::new(ip);
        NodeMap::open(&self.bpf_root)
            .and_then(|m| m.remove(&key))
            .and_then(|_| NodeMapV2::open(&self.bpf_root))
            .and_then(|m| m.remove(&key))
            .map(drop)
            .map_err(kernel)
    }

    fn entries(&self) -> Result<Vec<(IpAddr, u16)>, KernelError> {
        let entries = NodeMapV2::open(&self.bpf_root)
            .and_then(|m| m.entries())
            .map_err(kernel)?;
        Ok(entries
            .into_iter()
            .filter_map(|(k, v)| Some((k.addr()?, v.id)))
            .collect())
    }
}

/// Endpoint programs (the loader), cilium_lxc and the policy maps.
pub struct Endpoints {
    bpf_root: PathBuf,
    datapath: Arc<Mutex<datapath::Datapath>>,
    mode: AttachMode,
    /// The installed program template (`datapath::templates::install`).
    template: String,
    /// What each endpoint's policy map was last made to hold, and when it
    /// was last read back (the agent is its only writer).
    realized: Mutex<HashMap<u16, (policymap::Written, Instant)>>,
}

/// How long a policy map's last writing stands for what it holds before
/// the next regeneration reads it back, undoing whatever was written by
/// hand (`cilium bpf policy add`): Cilium's
/// `policy-map-full-reconciliation-interval`.
const POLICY_MAP_FULL_RECONCILIATION: Duration = Duration::from_secs(15 * 60);

impl Endpoints {
    pub fn new(
        bpf_root: PathBuf,
        datapath: Arc<Mutex<datapath::Datapath>>,
        mode: AttachMode,
        template: String,
    ) -> Self {
        Self {
            bpf_root,
            datapath,
            mode,
            template,
            realized: Mutex::default(),
        }
    }

    fn loader(&self) -> std::sync::MutexGuard<'_, datapath::Datapath> {
        self.datapath.lock().expect("datapath lock")
    }

    fn globals(&self) -> PathBuf {
        self.bpf_root.join(abi::maps::GLOBALS_DIR)
    }
}

impl EndpointDatapath for Endpoints {
    fn template_id(&self) -> Option<String> {
        Some(self.template.clone())
    }

    fn ifindex(&self, ifname: &str) -> Option<u32> {
        let c = std::ffi::CString::new(ifname).ok()?;
        // SAFETY: a valid C string; returns 0 when there is no such interface.
        let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
        (index != 0).then_some(index)
    }

    fn attaches_in_two_steps(&self) -> bool {
        self.mode == AttachMode::Tcx
    }

    fn attach(&self, id: u16, ifname: &str, quick: bool) -> Result<(), KernelError> {
        let mut dp = self.loader();
        let attached = if quick {
            dp.attach_endpoint_as(id, ifname, AttachMode::Tc)
        } else {
            dp.attach_endpoint(id, ifname)
        };
        attached.map(drop).map_err(kernel)
    }

    fn detach(&self, id: u16) {
        self.loader().detach_endpoint(id);
    }

    fn install_policy_program(&self, id: u16) -> Result<(), KernelError> {
        self.loader().install_policy_program(id).map_err(kernel)
    }

    fn remove_policy(&self, id: u16) {
        self.realized.lock().expect("policy lock").remove(&id);
        datapath::policymap::remove(&self.globals(), id);
        self.loader().remove_policy_program(id);
    }

    fn write_policy(&self, id: u16, state: &policy::MapState) -> Result<(), KernelError> {
        // held through the writing: two writers of one map would each
        // trust a stale idea of what it holds
        let mut realized = self.realized.lock().expect("policy lock");
        let known = realized
            .remove(&id)
            .filter(|(_, read)| read.elapsed() < POLICY_MAP_FULL_RECONCILIATION);
        let map = policymap::PolicyMap::open(&self.globals(), id).map_err(kernel)?;
        let want = state.to_abi();
        // a failed write leaves the map unknown: the next one reads it
        let (written, read) = match known {
            Some((have, read)) => (map.sync_from(&have, &want).map_err(kernel)?, read),
            None => (map.sync(&want).map_err(kernel)?, Instant::now()),
        };
        realized.insert(id, (written, read));
        Ok(())
    }

    fn prepare_policy(&self, id: u16) {
        if let Err(e) = datapath::policymap::PolicyMap::open(&self.globals(), id) {
            tracing::debug!(subsys = "policy", endpointID = id, error = %e, "Unable to prepare a policy map");
        }
    }

    fn write_endpoint(&self, ip: IpAddr, info: &EndpointInfo) -> Result<(), KernelError> {
        Lxc::open(&self.bpf_root)
            .and_then(|m| m.put(&EndpointKey::new(ip), info))
            .map_err(kernel)
    }

    fn remove_endpoint(&self, ip: IpAddr) {
        if let Ok(map) = Lxc::open(&self.bpf_root) {
            let _ = map.remove(&EndpointKey::new(ip));
        }
    }
}

/// The LB maps.
pub struct LoadBalancer {
    pub bpf_root: PathBuf,
}

impl LoadBalancer {
    fn pin_dir(&self) -> PathBuf {
        self.bpf_root.join(abi::maps::GLOBALS_DIR)
    }
}

impl LbMaps for LoadBalancer {
    fn backends(&self) -> Vec<(u32, std::net::IpAddr, u16)> {
        let dir = self.pin_dir();
        let v4 = Lb4Backends::open_in(&dir)
            .and_then(|m| m.entries())
            .unwrap_or_default()
            .into_iter()
            .map(|(id, b)| (id, b.address.ip().into(), b.port.get()));
        let v6 = datapath::maps::Lb6Backends::open_in(&dir)
            .and_then(|m| m.entries())
            .unwrap_or_default()
            .into_iter()
            .map(|(id, b)| (id, b.address.ip().into(), b.port.get()));
        v4.chain(v6).collect()
    }

    fn ipv6(&self) -> bool {
        self.pin_dir().join(abi::maps::LB6_SERVICES).exists()
    }

    fn apply(&self, update: &lb::Update) -> Result<(), KernelError> {
        datapath::lbmap::apply(&self.pin_dir(), update).map_err(kernel)
    }

    fn keys(&self) -> Result<lb::MapKeys, KernelError> {
        datapath::lbmap::keys(&self.pin_dir()).map_err(kernel)
    }
}

/// Other nodes' pod CIDRs in cilium_tunnel_map, routed into cilium_host.
pub struct OverlayRoutes {
    pub bpf_root: PathBuf,
    pub netlink: netdev::Netlink,
    pub host_index: u32,
    /// The IPv4 router, unless the node is IPv6-only: other nodes' IPv4
    /// pod CIDRs are routed into cilium_host from it.
    pub router_ip: Option<Ipv4Addr>,
    /// The IPv6 router with IPv6 on: likewise for IPv6 pod CIDRs.
    pub router_ip6: Option<std::net::Ipv6Addr>,
    pub route_mtu: u32,
}

impl OverlayRoutes {
    /// None on a node without IPv4 pods, which routes no IPv4 pod CIDR.
    fn route(&self, (net, len): (Ipv4Addr, u8)) -> Option<netdev::link::Route> {
        let router = self.router_ip?;
        Some(
            netdev::link::Route::new(self.host_index, net, len)
                .via(router)
                .src(router)
                .mtu(self.route_mtu),
        )
    }
}

impl NodeRoutes for OverlayRoutes {
    fn install(
        &self,
        cidr: (Ipv4Addr, u8),
        node_ip: Ipv4Addr,
    ) -> PortFuture<'_, Result<(), KernelError>> {
        Box::pin(async move {
            Tunnel::open(&self.bpf_root)
                .and_then(|m| m.put(&TunnelKey::v4(cidr.0), &TunnelValue::v4(node_ip)))
                .map_err(kernel)?;
            let Some(route) = self.route(cidr) else {
                return Ok(());
            };
            self.netlink
                .replace_route(&route)
                .await
                .map_err(KernelError::new)
        })
    }

    /// IPv6 pods of another node: routed into cilium_host, whose program
    /// finds their node in the ipcache (the tunnel map has no IPv6).
    fn install6(
        &self,
        cidr: (std::net::Ipv6Addr, u8),
        _node_ip6: Option<std::net::Ipv6Addr>,
    ) -> PortFuture<'_, Result<(), KernelError>> {
        Box::pin(async move {
            let Some(router) = self.router_ip6 else {
                return Ok(());
            };
            self.netlink
                .replace_route6(
                    self.host_index,
                    cidr,
                    None,
                    Some(router),
                    Some(self.route_mtu),
                )
                .await
                .map_err(KernelError::new)
        })
    }

    fn withdraw6(&self, (net, len): (std::net::Ipv6Addr, u8)) -> PortFuture<'_, ()> {
        Box::pin(async move {
            if let Err(e) = self
                .netlink
                .delete_route6(self.host_index, (net, len))
                .await
            {
                tracing::warn!(subsys = "linux-datapath", cidr = %format!("{net}/{len}"), error = %e, "Unable to remove route to node");
            }
        })
    }

    fn withdraw(&self, cidr: (Ipv4Addr, u8), _node_ip: Ipv4Addr) -> PortFuture<'_, ()> {
        Box::pin(async move {
            if let Ok(map) = Tunnel::open(&self.bpf_root) {
                let _ = map.remove(&TunnelKey::v4(cidr.0));
            }
            let Some(route) = self.route(cidr) else {
                return;
            };
            if let Err(e) = self.netlink.delete_route(&route).await {
                tracing::warn!(subsys = "linux-datapath", cidr = %format!("{}/{}", cidr.0, cidr.1), error = %e, "Unable to remove route to node");
            }
        })
    }
}

/// Native routing with auto-direct-node-routes: other nodes' pod CIDRs
/// via their node addresses, on the device directly connected to them.
pub struct DirectRoutes {
    pub netlink: netdev::Netlink,
}

impl NodeRoutes for DirectRoutes {
    fn install(
        &self,
        cidr: (Ipv4Addr, u8),
        node_ip: Ipv4Addr,
    ) -> PortFuture<'_, Result<(), KernelError>> {
        Box::pin(async move {
            let installed = netdev::direct::install(&self.netlink, cidr, node_ip)
                .await
                .map_err(KernelError::new)?;
            if installed.is_none() {
                // Cilium's answer too: a next hop that is not on our L2
                // segment cannot be routed to directly; skip, say why.
                tracing::warn!(subsys = "linux-datapath", cidr = %format!("{}/{}", cidr.0, cidr.1), nodeIP = %node_ip, "Unable to install direct node route: node IP is not on a directly connected subnet of any local device");
            }
            Ok(())
        })
    }

    fn withdraw(&self, cidr: (Ipv4Addr, u8), node_ip: Ipv4Addr) -> PortFuture<'_, ()> {
        Box::pin(async move {
            if let Err(e) = netdev::direct::withdraw(&self.netlink, cidr, node_ip).await {
                tracing::warn!(subsys = "linux-datapath", cidr = %format!("{}/{}", cidr.0, cidr.1), error = %e, "Unable to remove direct route to node");
            }
        })
    }

    fn install6(
        &self,
        cidr: (std::net::Ipv6Addr, u8),
        node_ip6: Option<std::net::Ipv6Addr>,
    ) -> PortFuture<'_, Result<(), KernelError>> {
        Box::pin(async move {
            let cidr_text = format!("{}/{}", cidr.0, cidr.1);
            let Some(node_ip6) = node_ip6 else {
                tracing::warn!(subsys = "linux-datapath", cidr = %cidr_text, "Unable to install direct node route: the node has no IPv6 address");
                return Ok(());
            };
            let installed = netdev::direct::install6(&self.netlink, cidr, node_ip6)
                .await
                .map_err(KernelError::new)?;
            if installed.is_none() {
                tracing::warn!(subsys = "linux-datapath", cidr = %cidr_text, nodeIP = %node_ip6, "Unable to install direct node route: node IP is not on a directly connected subnet of any local device");
            }
            Ok(())
        })
    }

    fn withdraw6(&self, cidr: (std::net::Ipv6Addr, u8)) -> PortFuture<'_, ()> {
        Box::pin(async move {
            if let Err(e) = netdev::direct::withdraw6(&self.netlink, cidr).await {
                tracing::warn!(subsys = "linux-datapath", cidr = %format!("{}/{}", cidr.0, cidr.1), error = %e, "Unable to remove direct route to node");
            }
        })
    }
}

/// Tells the datapath how much to trace.
pub fn set_monitor_aggregation(
    bpf_root: &std::path::Path,
    level: crate::option::modes::MonitorAggregation,
) -> Result<(), datapath::Error> {
    datapath::maps::RuntimeConfig::open(bpf_root)?.set_monitor_aggregation(level as u64)
}
