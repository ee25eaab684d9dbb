//! The kernel as the control plane sees it. The control plane decides what
//! the datapath should hold; these traits are how it says so. The agent
//! implements them over BPF maps, programs and netlink; `testsupport::fakes`
//! implements them in memory, so every decision can be tested without root.

use crate::events::AgentNotify;
use abi::endpoint::EndpointInfo;
use abi::ipcache::RemoteEndpointInfo;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::pin::Pin;

/// A kernel operation that failed, with the implementation's own error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct KernelError(Box<dyn std::error::Error + Send + Sync>);

impl KernelError {
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(e.into())
    }
}

/// A future a port returns (trait objects cannot have async methods).
pub type PortFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// cilium_ipcache: prefix to identity and tunnel endpoint.
pub trait IpcacheMap: Send + Sync {
    fn write(&self, ip: IpAddr, len: u8, value: &RemoteEndpointInfo) -> Result<(), KernelError>;
    fn delete(&self, ip: IpAddr, len: u8) -> Result<(), KernelError>;
}

/// What makes a local endpoint real: programs on its interface, its
/// cilium_lxc entry, its policy map.
pub trait EndpointDatapath: Send + Sync {
    /// The index of a host-side interface; None when there is none.
    fn ifindex(&self, ifname: &str) -> Option<u32>;
    /// Whether a new endpoint is attached in two steps: a quick legacy tc
    /// filter first, its final (tcx) link after the API answered.
    fn attaches_in_two_steps(&self) -> bool;
    /// Attaches the endpoint's programs; `quick` asks for the first step.
    fn attach(&self, id: u16, ifname: &str, quick: bool) -> Result<(), KernelError>;
    fn detach(&self, id: u16);
    /// Makes endpoint `id`'s ingress policy program reachable by the datapath.
    fn install_policy_program(&self, id: u16) -> Result<(), KernelError>;
    /// Removes endpoint `id`'s policy map and program.
    fn remove_policy(&self, id: u16);
    /// Brings endpoint `id`'s policy map to `state`.
    fn write_policy(&self, id: u16, state: &policy::MapState) -> Result<(), KernelError>;
    /// Creates the policy map of an ID ahead of its endpoint (best effort).
    fn prepare_policy(&self, id: u16);
    fn write_endpoint(&self, ip: IpAddr, info: &EndpointInfo) -> Result<(), KernelError>;
    fn remove_endpoint(&self, ip: IpAddr);
    /// The program template endpoints run (Cilium's datapath SHA), named
    /// in each endpoint's state directory; None when there is none.
    fn template_id(&self) -> Option<String> {
        None
    }
}

/// The load balancer's maps.
pub trait LbMaps: Send + Sync {
    /// The backends a previous run left: (ID, address, port).
    fn backends(&self) -> Vec<(u32, std::net::IpAddr, u16)>;
    /// Whether the node has the IPv6 maps (a dual-stack node).
    fn ipv6(&self) -> bool;
    fn apply(&self, update: &lb::Update) -> Result<(), KernelError>;
    /// Every key the maps hold, to sweep what no service occupies.
    fn keys(&self) -> Result<lb::MapKeys, KernelError>;
}

/// How another node's pods are reached: through the overlay (its pod CIDR
/// in the tunnel map and routed into cilium_host), or in native routing
/// by a route to its pod CIDR via its node address. `withdraw` is given
/// the same node address `install` was, so the route can be named without
/// remembering it (a restarted agent never installed it).
pub trait NodeRoutes: Send + Sync {
    fn install(
        &self,
        cidr: (Ipv4Addr, u8),
        node_ip: Ipv4Addr,
    ) -> PortFuture<'_, Result<(), KernelError>>;
    fn withdraw(&self, cidr: (Ipv4Addr, u8), node_ip: Ipv4Addr) -> PortFuture<'_, ()>;
    /// A dual-stack node's IPv6 pod CIDR; `node_ip6` is the node's IPv6
    /// underlay address, the next hop of native routing (the overlay
    /// reaches the node by its IPv4 address instead).
    fn install6(
        &self,
        _cidr: (std::net::Ipv6Addr, u8),
        _node_ip6: Option<std::net::Ipv6Addr>,
    ) -> PortFuture<'_, Result<(), KernelError>> {
        Box::pin(async { Ok(()) })
    }
    fn withdraw6(&self, _cidr: (std::net::Ipv6Addr, u8)) -> PortFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// cilium_node_map_v2 and its v1 mirror: other nodes' addresses to the
/// IDs this agent gave them.
pub trait NodeIdMap: Send + Sync {
    fn write(&self, ip: IpAddr, id: u16) -> Result<(), KernelError>;
    fn delete(&self, ip: IpAddr) -> Result<(), KernelError>;
    /// What the map holds (a previous run's IDs, kept across a restart).
    fn entries(&self) -> Result<Vec<(IpAddr, u16)>, KernelError>;
}

/// What `cilium monitor` learns from the control plane.
pub trait Events: Send + Sync {
    fn agent(&self, what: AgentNotify, body: serde_json::Value);
    /// Names an address after its pod, for the monitor's output.
    fn name_pod(&self, ip: IpAddr, namespace: &str, pod: &str);
    fn forget_pod(&self, ip: IpAddr);
}
