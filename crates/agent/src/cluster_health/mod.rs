//! cilium-health inside the agent: the responder on the node's cluster
//! health port, the health endpoint and its controller, the prober, and
//! the health API (`/v1beta` on `health.sock`, served from
//! `api/cilium_health.rs`). Cilium runs these in the agent process too,
//! except the endpoint's responder, which is a child process there and a
//! socket in the endpoint's namespace here.

pub mod endpoint;
pub mod http;
pub mod icmp;
pub mod prober;

use controlplane::controller::Controllers;
use controlplane::nodes::Nodes;
use controlplane::tasks::Tasks;
use prober::Prober;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// cilium-health as the rest of the agent sees it.
pub struct ClusterHealth {
    pub prober: Arc<Prober>,
    /// Whether the health API is being served.
    serving: AtomicBool,
    started: Instant,
}

impl ClusterHealth {
    /// `cluster.ciliumHealth` of the agent's status.
    pub fn status(&self) -> api::models::Status {
        if self.serving.load(Ordering::Relaxed) {
            api::models::Status::ok("")
        } else {
            api::models::Status {
                state: api::models::State::Warning,
                msg: "cilium-health daemon unreachable".into(),
            }
        }
    }

    /// Records whether the health API is being served.
    pub fn set_serving(&self, serving: bool) {
        self.serving.store(serving, Ordering::Relaxed);
    }

    /// How long cilium-health has run.
    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }
}

/// What cilium-health is built from.
pub struct Deps<'a> {
    pub config: &'a crate::option::DaemonConfig,
    pub nodes: Arc<Nodes>,
    pub endpoints: Arc<controlplane::endpoint::Endpoints>,
    pub ipam: Option<Arc<std::sync::Mutex<controlplane::ipam::Ipam>>>,
    pub ipam6: Option<Arc<std::sync::Mutex<controlplane::ipam::Ipam<Ipv6Addr>>>>,
    pub node_ip: Option<Ipv4Addr>,
    pub node_ipv6: Option<Ipv6Addr>,
}

/// Starts cilium-health as configured; None when health checking is off.
/// A run without a health endpoint removes one an earlier run left.
pub async fn start(
    d: Deps<'_>,
    tasks: &Tasks,
    controllers: &Controllers,
) -> Option<Arc<ClusterHealth>> {
    let health = d.config.health;
    let netns = endpoint::netns_path(&d.config.run_dir);
    let local = d.nodes.local();
    let ipv4 = local.health_ipv4.zip(d.config.ipv4.map(|p| p.router_ip));
    let ipv6 = local.health_ipv6.zip(d.config.ipv6.map(|p| p.router_ip));
    match (health.endpoint, ipv4.is_some() || ipv6.is_some()) {
        (true, true) => {
            let ep = Arc::new(endpoint::HealthEndpoint::new(
                Arc::clone(&d.endpoints),
                d.ipam.clone(),
                d.ipam6.clone(),
                endpoint::Plan {
                    ipv4,
                    ipv6,
                    mtu: d.config.mtu,
                    route_mtu: d.config.route_mtu(),
                    port: health.port,
                    netns,
                },
            ));
            controllers.spawn(endpoint::CONTROLLER, endpoint::RUN_INTERVAL, move || {
                let ep = Arc::clone(&ep);
                async move { ep.check().await }
            });
        }
        _ => {
            endpoint::remove_leftovers(&d.endpoints, &netns).await;
            // both families are released, whichever fails
            let released = release_health(d.ipam.as_deref());
            if let Err(e) = released.and(release_health(d.ipam6.as_deref())) {
                tracing::warn!(subsys = "cilium-health-launcher", error = %e, "Unable to release the health address");
            }
        }
    }
    if !health.checking {
        return None;
    }
    serve_node_responder(d.node_ip.map(IpAddr::from), health.port, tasks);
    if let Some(ip) = d.node_ipv6 {
        serve_node_responder(Some(ip.into()), health.port, tasks);
    }
    let prober = Arc::new(Prober::new(
        d.nodes,
        d.config.cluster_name.clone(),
        health.port,
    ));
    Arc::clone(&prober).run(tasks);
    Some(Arc::new(ClusterHealth {
        prober,
        serving: AtomicBool::new(false),
        started: Instant::now(),
    }))
}

/// The health endpoint's address of one family's IPAM, given back (the
/// node runs no health endpoint).
fn release_health<A: controlplane::ipam::PoolAddr>(
    ipam: Option<&std::sync::Mutex<controlplane::ipam::Ipam<A>>>,
) -> Result<(), controlplane::ipam::IpamError> {
    let Some(ipam) = ipam else { return Ok(()) };
    let mut ipam = ipam.lock().expect("ipam lock");
    ipam.release_owner(controlplane::ipam::OWNER_HEALTH)
        .map(drop)
}

/// The node path's HTTP answer, on the node's address (all addresses
/// when it has none), as Cilium's agent-side responder.
fn serve_node_responder(node_ip: Option<IpAddr>, port: u16, tasks: &Tasks) {
    let addr = (node_ip.unwrap_or(Ipv4Addr::UNSPECIFIED.into()), port);
    match std::net::TcpListener::bind(addr) {
        Ok(listener) => tasks.spawn("cilium-health-responder", async move {
            if let Err(e) = http::serve(listener).await {
                tracing::warn!(subsys = "health-server", error = %e, "Health responder stopped");
            }
        }),
        Err(e) => {
            tracing::warn!(subsys = "health-server", address = %format!("{}:{}", addr.0, addr.1), error = %e, "Unable to serve the cluster health port; the node path will fail")
        }
    }
}
