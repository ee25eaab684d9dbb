//! The health endpoint: a namespace of the node's with an address from
//! the pod CIDR (IPAM owner `health`; on a dual-stack node one from each
//! family's), plugged in like a pod (`lxc_health`
//! here, `cilium` inside), identity `reserved:health`, and the responder
//! on the cluster health port inside. Its namespace is pinned under the
//! run dir, so the endpoint, its ID and its address outlive an agent
//! restart; the restarted agent takes it back and serves the responder
//! again. The `cilium-health-ep` controller launches it and, like
//! Cilium's, relaunches it once it has not answered for three minutes.

use super::http;
use api::endpoint::{DatapathConfiguration, EndpointChangeRequest};
use controlplane::endpoint::{EndpointRef, Endpoints, HEALTH_LABEL};
use netdev::{NetNs, Netlink};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The controller that keeps the health endpoint.
pub use api::health::ENDPOINT_CONTROLLER as CONTROLLER;
pub const RUN_INTERVAL: Duration = Duration::from_secs(60);
/// Without an answer for this long the endpoint is launched again.
const SUCCESSFUL_PING_TIMEOUT: Duration = Duration::from_secs(180);
const PING_TIMEOUT: Duration = Duration::from_secs(5);
pub const HOST_IFNAME: &str = "lxc_health";
pub const PEER_IFNAME: &str = "cilium";
const CONTAINER_NAME: &str = "cilium-health";

/// Where the health endpoint's namespace is pinned.
pub fn netns_path(run_dir: &std::path::Path) -> PathBuf {
    run_dir.join("netns").join(CONTAINER_NAME)
}

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{0}")]
    Netdev(#[from] netdev::Error),
    #[error("creating the health endpoint: {0}")]
    Endpoint(#[from] controlplane::endpoint::EndpointError),
    #[error("reserving the health address: {0}")]
    Ipam(String),
    #[error("starting the responder: {0}")]
    Responder(std::io::Error),
}

/// How the endpoint is plugged in.
pub struct Plan {
    /// The endpoint's IPv4 address and the router's, unless the node is
    /// IPv6-only.
    pub ipv4: Option<(Ipv4Addr, Ipv4Addr)>,
    /// Its IPv6 address and the router's, with IPv6 on.
    pub ipv6: Option<(Ipv6Addr, Ipv6Addr)>,
    pub mtu: u32,
    pub route_mtu: u32,
    pub port: u16,
    pub netns: PathBuf,
}

#[derive(Default)]
struct Liveness {
    launched: Option<Instant>,
    answered: Option<Instant>,
}

impl Plan {
    /// The address the endpoint is probed on: IPv4's, else IPv6's.
    fn primary(&self) -> IpAddr {
        match (self.ipv4, self.ipv6) {
            (Some((ip, _)), _) => ip.into(),
            (None, Some((ip, _))) => ip.into(),
            (None, None) => unreachable!("a health endpoint has an address"),
        }
    }
}

pub struct HealthEndpoint {
    endpoints: Arc<Endpoints>,
    /// Keeps the address reserved while the endpoint is launched again.
    ipam: Option<Arc<Mutex<controlplane::ipam::Ipam>>>,
    ipam6: Option<Arc<Mutex<controlplane::ipam::Ipam<Ipv6Addr>>>>,
    plan: Plan,
    responder: Mutex<Option<tokio::task::AbortHandle>>,
    liveness: Mutex<Liveness>,
}

impl HealthEndpoint {
    pub fn new(
        endpoints: Arc<Endpoints>,
        ipam: Option<Arc<Mutex<controlplane::ipam::Ipam>>>,
        ipam6: Option<Arc<Mutex<controlplane::ipam::Ipam<Ipv6Addr>>>>,
        plan: Plan,
    ) -> Self {
        Self {
            endpoints,
            ipam,
            ipam6,
            plan,
            responder: Mutex::default(),
            liveness: Mutex::default(),
        }
    }

    /// One run of the controller: launch when not yet launched, else
    /// check it answers and launch it again after three silent minutes.
    pub async fn check(&self) -> Result<(), String> {
        let launched = self.liveness().launched;
        let Some(launched) = launched else {
            return self.launch().await.map_err(|e| e.to_string());
        };
        match http::probe(self.plan.primary(), self.plan.port, PING_TIMEOUT).await {
            Ok(_) => {
                self.liveness().answered = Some(Instant::now());
                Ok(())
            }
            Err(e) => {
                let since = self.liveness().answered.unwrap_or(launched);
                if since.elapsed() >= SUCCESSFUL_PING_TIMEOUT {
                    tracing::warn!(subsys = "cilium-health-launcher", error = %e, "Health endpoint has not answered for 3m0s, launching it again");
                    self.remove().await;
                    self.launch().await.map_err(|e| e.to_string())?;
                }
                Err(e)
            }
        }
    }

    fn liveness(&self) -> std::sync::MutexGuard<'_, Liveness> {
        self.liveness.lock().expect("health liveness lock")
    }

    async fn launch(&self) -> Result<(), LaunchError> {
        let started = Instant::now();
        let kept = self.restored().await;
        if !kept {
            self.remove().await;
            // deleting the endpoint gave its address back; no pod may take it
            reserve(self.ipam.as_deref(), self.plan.ipv4.map(|a| a.0))?;
            reserve(self.ipam6.as_deref(), self.plan.ipv6.map(|a| a.0))?;
            self.create().await?;
        }
        let ns = NetNs::open(&self.plan.netns)?;
        let listener = bind_in(ns, self.plan.port, self.plan.ipv6.is_some())
            .map_err(LaunchError::Responder)?;
        let task = tokio::spawn(async move {
            if let Err(e) = http::serve(listener).await {
                tracing::warn!(subsys = "cilium-health-launcher", error = %e, "Health endpoint responder stopped");
            }
        });
        if let Some(old) = self
            .responder
            .lock()
            .expect("responder lock")
            .replace(task.abort_handle())
        {
            old.abort();
        }
        *self.liveness() = Liveness {
            launched: Some(Instant::now()),
            answered: None,
        };
        tracing::info!(subsys = "cilium-health-launcher", ipv4 = %self.plan.ipv4.map(|(ip, _)| ip.to_string()).unwrap_or_default(), ipv6 = %self.plan.ipv6.map(|(ip, _)| ip.to_string()).unwrap_or_default(), restored = kept, duration = ?started.elapsed(), "Health endpoint ready");
        Ok(())
    }

    /// The endpoint a previous run left, when it is whole: restored into
    /// the table with this address, and its namespace still holding it.
    async fn restored(&self) -> bool {
        let ours = health_endpoints(&self.endpoints);
        // an endpoint of other addresses (or the other stack) is launched again
        let (v4, v6) = (self.plan.ipv4.map(|a| a.0), self.plan.ipv6.map(|a| a.0));
        if ours.len() != 1 || ours[0].1 != v4 || ours[0].2 != v6 {
            return false;
        }
        let Ok(ns) = NetNs::open(&self.plan.netns) else {
            return false;
        };
        let Ok(nl) = Netlink::connect_in(&ns) else {
            return false;
        };
        let Ok(Some(link)) = nl.link_by_name(PEER_IFNAME).await else {
            return false;
        };
        let has_v4 = match v4 {
            Some(ip4) => nl
                .ipv4_addrs(Some(link.index))
                .await
                .is_ok_and(|a| a.iter().any(|(_, ip, _)| *ip == ip4)),
            None => true,
        };
        let has_v6 = match v6 {
            Some(ip6) => nl
                .ipv6_addrs(Some(link.index))
                .await
                .is_ok_and(|a| a.iter().any(|(_, ip, _)| *ip == ip6)),
            None => true,
        };
        has_v4 && has_v6
    }

    async fn create(&self) -> Result<(), LaunchError> {
        let p = &self.plan;
        if let Some(dir) = p.netns.parent() {
            std::fs::create_dir_all(dir).map_err(|source| netdev::Error::Netns {
                op: "creating the directory of",
                path: p.netns.clone(),
                source,
            })?;
        }
        netdev::netns::create(&p.netns)?;
        let ns = NetNs::open(&p.netns)?;
        // IPv4 only on an IPv4-only node, as Cilium's: no router
        // solicitations for the datapath to drop as an unsupported protocol
        if p.ipv6.is_none() {
            ns.run(|| {
                netdev::sysctl::write_in_pod_netns("net.ipv6.conf.default.disable_ipv6", "1")
            })??;
        }
        let host_nl = Netlink::connect()?;
        let pod_nl = Netlink::connect_in(&ns)?;
        let veth =
            netdev::veth::create_pod_veth(&host_nl, &pod_nl, &ns, HOST_IFNAME, PEER_IFNAME, p.mtu)
                .await?;
        netdev::sysctl::write(&format!("net.ipv4.conf.{HOST_IFNAME}.rp_filter"), "0")?;
        netdev::veth::address_pod(&pod_nl, veth.pod_index, p.ipv4, p.ipv6, p.route_mtu).await?;
        let req = EndpointChangeRequest {
            container_name: CONTAINER_NAME.into(),
            state: "waiting-for-identity".into(),
            labels: vec![HEALTH_LABEL.into()],
            addressing: Some(api::ipam::AddressPair {
                ipv4: p.ipv4.map(|(ip, _)| ip.to_string()).unwrap_or_default(),
                ipv6: p.ipv6.map(|(ip, _)| ip.to_string()).unwrap_or_default(),
                ..Default::default()
            }),
            interface_name: HOST_IFNAME.into(),
            interface_index: i64::from(veth.host_index),
            mac: abi::endpoint::format_mac(&veth.pod_mac),
            host_mac: abi::endpoint::format_mac(&veth.host_mac),
            sync_build_endpoint: true,
            datapath_configuration: Some(DatapathConfiguration::default()),
            ..Default::default()
        };
        self.endpoints.create(&req).await?;
        Ok(())
    }

    /// Takes down whatever health endpoint there is: the responder, the
    /// endpoint, its device and its namespace.
    pub async fn remove(&self) {
        if let Some(task) = self.responder.lock().expect("responder lock").take() {
            task.abort();
        }
        remove_leftovers(&self.endpoints, &self.plan.netns).await;
    }
}

/// Takes the health endpoint's address `ip` of one family in its IPAM
/// again, if the node has both.
fn reserve<A: controlplane::ipam::PoolAddr>(
    ipam: Option<&Mutex<controlplane::ipam::Ipam<A>>>,
    ip: Option<A>,
) -> Result<(), LaunchError> {
    let (Some(ipam), Some(ip)) = (ipam, ip) else {
        return Ok(());
    };
    let mut ipam = ipam.lock().expect("ipam lock");
    ipam.allocate_ip(ip, controlplane::ipam::OWNER_HEALTH)
        .map(drop)
        .map_err(|e| LaunchError::Ipam(e.to_string()))
}

/// The health endpoints in the table, by ID and addresses.
fn health_endpoints(endpoints: &Endpoints) -> Vec<(u16, Option<Ipv4Addr>, Option<Ipv6Addr>)> {
    endpoints
        .list()
        .iter()
        .filter(|e| e.is_health())
        .map(|e| (e.id, e.ipv4, e.ipv6))
        .collect()
}

/// Removes a health endpoint, its device and namespace (what a run with
/// endpoint health checking off finds left from one with it on).
pub async fn remove_leftovers(endpoints: &Endpoints, netns: &std::path::Path) {
    for (id, ..) in health_endpoints(endpoints) {
        if let Err(e) = endpoints.delete(&EndpointRef::Local(id)) {
            tracing::warn!(subsys = "cilium-health-launcher", endpointID = id, error = %e, "Unable to delete the health endpoint");
        }
    }
    if let Ok(nl) = Netlink::connect() {
        if let Err(e) = netdev::veth::delete_by_name(&nl, HOST_IFNAME).await {
            tracing::warn!(subsys = "cilium-health-launcher", interface = HOST_IFNAME, error = %e, "Unable to delete the health endpoint's device");
        }
    }
    if let Err(e) = netdev::netns::remove(netns) {
        tracing::warn!(subsys = "cilium-health-launcher", error = %e, "Unable to remove the health endpoint's namespace");
    }
}

/// A listening socket inside `ns` (on `[::]` for both families when
/// `dual`): a socket stays in the namespace it was made in, so the agent
/// serves it from its own threads.
fn bind_in(ns: NetNs, port: u16, dual: bool) -> std::io::Result<std::net::TcpListener> {
    let any: IpAddr = match dual {
        true => Ipv6Addr::UNSPECIFIED.into(),
        false => Ipv4Addr::UNSPECIFIED.into(),
    };
    std::thread::spawn(move || {
        ns.enter().map_err(std::io::Error::other)?;
        std::net::TcpListener::bind((any, port))
    })
    .join()
    .map_err(|_| std::io::Error::other("responder bind thread panicked"))?
}
