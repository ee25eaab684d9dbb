//! The control plane assembled: every subsystem built from exactly the
//! handles it uses, in the startup order of seed 003 (IPAM, identities,
//! policy, endpoints, services, nodes), over the kernel ports the caller
//! gives. The agent builds it over the real kernel; the control-plane
//! tests over `testsupport::fakes`, so both run the same composition.

use crate::endpoint::Endpoints;
use crate::endpoint::Publisher;
use crate::identity::Identities;
use crate::ipam::{Ipam, IpamError};
use crate::ipcache::IpCache;
use crate::ipsync::RemoteEndpoints;
use crate::kvwriter::KvWriter;
use crate::node_ids::NodeIds;
use crate::nodes::{Node, Nodes};
use crate::policies::Policies;
use crate::ports::{EndpointDatapath, Events, IpcacheMap, LbMaps, NodeIdMap, NodeRoutes};
use crate::regeneration::Regeneration;
use crate::remote_nodes::RemoteNodes;
use crate::services::Services;
use crate::tasks::Tasks;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Services of an agent without kvstore, relative to the state dir.
const SERVICES_STATE: &str = "services.json";
/// Policies, relative to the state dir (with a kvstore, a cache of the
/// last desired state).
const POLICIES_STATE: &str = "policies.json";
/// IPAM allocations, relative to the state dir.
const IPAM_STATE: &str = "ipam-ipv4.json";
/// IPv6's, beside it.
const IPAM6_STATE: &str = "ipam-ipv6.json";

/// The kernel as the control plane reaches it.
pub struct Ports {
    pub ipcache: Arc<dyn IpcacheMap>,
    pub endpoints: Arc<dyn EndpointDatapath>,
    pub lb: Arc<dyn LbMaps>,
    /// Routes to other nodes' pods: the overlay's, or direct routes in
    /// native routing; None when the network routes pods by itself
    /// (native routing without auto-direct-node-routes).
    pub node_routes: Option<Arc<dyn NodeRoutes>>,
    pub node_ids: Arc<dyn NodeIdMap>,
    pub events: Arc<dyn Events>,
}

/// What the control plane is told about this node at start.
pub struct Settings {
    /// Where endpoints, IPAM, policies and services are kept.
    pub state_dir: PathBuf,
    /// The IPv4 pod CIDR and router address; None on an IPv6-only node.
    pub ipv4: Option<Ipv4Pool>,
    /// The IPv6 pod CIDR and router address; None while IPv6 is off.
    pub ipv6: Option<Ipv6Pool>,
    /// This node as published to the cluster (its health address is
    /// filled in here).
    pub node: Node,
    /// Whether this node has a health endpoint, whose address IPAM keeps
    /// under the owner `health`.
    pub health: bool,
    /// The address this node is known by: IPv4's, or IPv6's on an
    /// IPv6-only node that has no IPv4 one.
    pub node_ip: Option<std::net::IpAddr>,
    /// The cluster's shared state; None for a node on its own.
    pub kvstore: Option<kvstore::Kvstore>,
    pub cluster: String,
    pub maglev: Option<lb::MaglevConfig>,
    pub enforcement: policy::Enforcement,
    /// Policies, nodes, other nodes' endpoints and services come from
    /// Kubernetes (the caller follows them there), not from the kvstore.
    pub kubernetes: bool,
    /// Identities as cluster-wide objects (CiliumIdentities, whose watch
    /// the caller feeds to `Identities::follow_source`); None to allocate
    /// through the kvstore, or node-locally without one.
    pub identity_objects: Option<Arc<dyn crate::identity::objects::IdentityObjects>>,
    /// Where pods' labels come from (the API server's Pods and
    /// Namespaces); None to take the endpoint requests' labels.
    pub pod_labels: Option<Arc<dyn crate::endpoint::PodLabels>>,
}

/// This node's pod CIDR of one family and its router address
/// (cilium_host's, never handed to a pod).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool<A> {
    pub pod_cidr: (A, u8),
    pub router_ip: A,
}

pub type Ipv4Pool = Pool<Ipv4Addr>;
pub type Ipv6Pool = Pool<Ipv6Addr>;

impl<A: crate::ipam::PoolAddr> Pool<A> {
    /// A pod CIDR whose first address is the router's.
    pub fn first_router(pod_cidr: (A, u8)) -> Self {
        Self {
            pod_cidr,
            router_ip: A::from_bits(pod_cidr.0.to_bits() + 1),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("opening IPAM: {0}")]
    Ipam(#[from] IpamError),
}

/// Handles to every subsystem; each owns its state.
pub struct ControlPlane {
    /// IPv4's allocator; None on an IPv6-only node.
    pub ipam: Option<Arc<Mutex<Ipam>>>,
    /// IPv6's allocator; None while IPv6 is off.
    pub ipam6: Option<Arc<Mutex<Ipam<Ipv6Addr>>>>,
    pub identities: Arc<Identities>,
    pub ipcache: Arc<IpCache>,
    pub policies: Arc<Policies>,
    pub endpoints: Arc<Endpoints>,
    pub services: Arc<Services>,
    pub nodes: Arc<Nodes>,
    pub node_ids: Arc<NodeIds>,
    pub regeneration: Regeneration,
    events: Arc<dyn Events>,
    kvstore: Option<kvstore::Kvstore>,
    cluster: String,
    /// This node's own addresses (its InternalIPs).
    own_ips: Vec<std::net::IpAddr>,
    kubernetes: bool,
}

/// IPAM of one family, if the node runs it, with the health endpoint's
/// address reserved when it has one.
#[allow(clippy::type_complexity)]
fn open_ipam<A: crate::ipam::PoolAddr>(
    pool: Option<Pool<A>>,
    path: &std::path::Path,
    health: bool,
) -> Result<(Option<Arc<Mutex<Ipam<A>>>>, Option<A>), IpamError> {
    let Some(pool) = pool else {
        return Ok((None, None));
    };
    let (net, len) = pool.pod_cidr;
    let mut ipam = Ipam::open(net, len, pool.router_ip, path.to_path_buf())?;
    let health = match health {
        true => Some(ipam.reserve(crate::ipam::OWNER_HEALTH)?),
        false => None,
    };
    Ok((Some(Arc::new(Mutex::new(ipam))), health))
}

impl ControlPlane {
    /// Builds the subsystems and takes back what a previous run left in
    /// the state dir (policies, endpoints, services); nothing follows the
    /// cluster yet (see [`Self::start`]). The kvstore writer runs as a
    /// task of `tasks`.
    pub fn new(ports: Ports, s: Settings, tasks: &Tasks) -> Result<Self, StartError> {
        let ipcache = Arc::new(IpCache::new(ports.ipcache));
        let mut node = s.node;
        let own_ips = (s.node_ip)
            .into_iter()
            .chain(
                node.addresses
                    .iter()
                    .filter(|a| a.kind == "InternalIP")
                    .filter_map(|a| a.ip.parse().ok()),
            )
            .collect();
        // the health endpoint has an address of each family
        let (ipam, health_ipv4) = open_ipam(s.ipv4, &s.state_dir.join(IPAM_STATE), s.health)?;
        let (ipam6, health_ipv6) = open_ipam(s.ipv6, &s.state_dir.join(IPAM6_STATE), s.health)?;
        node.health_ipv4 = health_ipv4;
        node.health_ipv6 = health_ipv6;
        let kvwriter = s.kvstore.clone().map(|kv| KvWriter::start(kv, tasks));
        let node_suffix = s
            .node_ip
            .map_or_else(|| node.name.clone(), |ip| ip.to_string());
        let backend = crate::identity::Backend::choose(
            s.identity_objects,
            s.kvstore.clone().zip(kvwriter.clone()),
            tasks,
        );
        let identities = Identities::new(backend, node_suffix);

        let regeneration = Regeneration::default();
        let policies = Arc::new(Policies::new(
            crate::policies::Deps {
                identities: Arc::clone(&identities),
                ipcache: Arc::clone(&ipcache),
                regeneration: regeneration.clone(),
                events: Arc::clone(&ports.events),
                shared: s.kvstore.clone().map(|kv| crate::policies::Shared {
                    kv,
                    cluster: s.cluster.clone(),
                }),
                from_cluster: s.kvstore.is_some() || s.kubernetes,
                ipv6_only: s.ipv4.is_none() && s.ipv6.is_some(),
            },
            s.enforcement,
            Some(s.state_dir.join(POLICIES_STATE)),
        ));
        let restored = policies.restore();
        if restored > 0 {
            tracing::info!(subsys = "policy", restored, "Policies restored");
        }
        policies.sync_cidrs(&policies.rules().0);

        let endpoints = Arc::new(Endpoints::new(
            crate::endpoint::Deps {
                ipam: ipam.clone(),
                ipam6: ipam6.clone(),
                identities: Arc::clone(&identities),
                ipcache: Arc::clone(&ipcache),
                policies: Arc::clone(&policies),
                publisher: Publisher::new(kvwriter, s.node_ip, node.name.clone()),
                datapath: ports.endpoints,
                events: Arc::clone(&ports.events),
                tasks: tasks.clone(),
                pod_labels: s.pod_labels,
            },
            s.state_dir.clone(),
        ));
        let (restored, removed) = endpoints.restore();
        tracing::info!(subsys = "daemon", restored, removed, "Endpoints restored");

        let services = Arc::new(Services::new(
            ports.lb,
            s.maglev,
            s.kvstore.clone().map(|kv| crate::services::Shared {
                kv,
                cluster: s.cluster.clone(),
            }),
            s.kvstore
                .is_none()
                .then(|| s.state_dir.join(SERVICES_STATE)),
            Arc::clone(&ports.events),
        ));
        let restored = services.restore();
        if restored > 0 {
            tracing::info!(subsys = "service", restored, "Services restored");
        }
        if s.kvstore.is_none() {
            // with a kvstore, the initial list is the desired state
            services.sweep();
        }
        let node_ids = Arc::new(NodeIds::new(ports.node_ids));
        node_ids.restore();
        let nodes = Arc::new(Nodes::new(
            node,
            RemoteNodes::new(
                Arc::clone(&ipcache),
                Arc::clone(&node_ids),
                ports.node_routes,
            ),
        ));
        Ok(Self {
            ipam,
            ipam6,
            identities,
            ipcache,
            policies,
            endpoints,
            services,
            nodes,
            node_ids,
            regeneration,
            events: ports.events,
            kvstore: s.kvstore,
            cluster: s.cluster,
            own_ips,
            kubernetes: s.kubernetes,
        })
    }

    /// What learns other nodes' endpoints into the ipcache, marking its
    /// entries as from `source`.
    pub fn remote_endpoints(&self, source: crate::ipcache::Source) -> RemoteEndpoints {
        RemoteEndpoints::new(
            Arc::clone(&self.ipcache),
            Arc::clone(&self.events),
            self.own_ips.clone(),
            source,
        )
    }

    /// Starts the tasks: policy regeneration, and following the cluster's
    /// identities, nodes, endpoint IPs, services and policies.
    pub fn start(&self, tasks: &Tasks) {
        let endpoints = Arc::clone(&self.endpoints);
        self.regeneration.serve(tasks, move |reason| {
            endpoints.regenerate(reason);
        });
        self.identities.follow(tasks);
        if let Some(kv) = &self.kvstore {
            if !self.kubernetes {
                Arc::clone(&self.nodes).follow(crate::nodes::kvstore_source(kv), tasks);
            }
            if !self.kubernetes {
                Arc::new(self.remote_endpoints(crate::ipcache::Source::Kvstore))
                    .follow(crate::ipsync::kvstore_source(kv), tasks);
            }
            if !self.kubernetes {
                Arc::clone(&self.services)
                    .follow(crate::services::kvstore_source(kv, &self.cluster), tasks);
            }
        }
        self.policies.follow_identities(tasks);
        match &self.kvstore {
            Some(kv) if !self.kubernetes => {
                let origin = crate::policies::Origin::Kvstore {
                    cluster: self.cluster.clone(),
                };
                let source = crate::policies::kvstore_source(kv, &self.cluster);
                let listed = self.policies.follow("policies", origin, source, tasks);
                self.policies.sync_after(vec![listed], tasks);
            }
            // the caller follows Kubernetes and calls sync_after
            _ => {}
        }
        let endpoints = Arc::clone(&self.endpoints);
        tasks.spawn_blocking("prepare-policy-map", move || endpoints.prepare_next());
    }
}
