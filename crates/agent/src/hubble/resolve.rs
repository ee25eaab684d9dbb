//! Flows' ends and services from what the control plane knows: local
//! endpoints (ID, identity, pod, labels), remote pods by the names the
//! ipcache sync gave the monitor, identities' labels, Services' frontends.
//! Lookups run for every flow on the observer's thread, so each source is
//! read through a copy taken again only when the source changed.

use super::parse::Resolve;
use controlplane::endpoint::Endpoints;
use controlplane::identity::Identities;
use controlplane::ipcache::IpCache;
use controlplane::services::Services;
use hubble::flow;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Names of remote pods by address, as the ipcache sync learns them.
pub trait PodNames: Send + Sync {
    fn pod(&self, ip: IpAddr) -> Option<(String, String)>;
}

/// The workload controlling a local pod (the pod watcher's).
pub trait PodWorkloads: Send + Sync {
    fn workload(&self, namespace: &str, pod: &str) -> Option<flow::Workload>;
}

struct LocalEndpoint {
    id: u16,
    identity: u32,
    namespace: String,
    pod: String,
    uid: String,
    workloads: Vec<flow::Workload>,
}

/// Pods' cgroups by ID, from the last walk of the cgroup tree.
#[derive(Default)]
struct Cgroups {
    pods: HashMap<u64, Ipv4Addr>,
    scanned: Option<Instant>,
}

/// A cgroup ID no walk found is looked for again at most this often: a
/// process outside every pod (the node's own) would otherwise walk the
/// tree at each of its connections.
const CGROUP_RESCAN: Duration = Duration::from_secs(2);

/// A hasher for the lookups of every flow: the keys (addresses, identity
/// numbers, frontends) come from this node's own tables, and SipHash was
/// a tenth of the observer thread's time.
type Fast = foldhash::fast::RandomState;

/// Copies of the sources the lookups read, each taken again only once
/// its source changed; behind one lock, taken once for a flow's end.
struct Cache {
    endpoints_changed: watch::Receiver<u64>,
    /// Local endpoints by each of their addresses; None until first read.
    local: Option<HashMap<IpAddr, Arc<LocalEndpoint>, Fast>>,
    identities_changed: watch::Receiver<u64>,
    /// Identities' labels, sorted as Cilium shows them, as they are asked
    /// for; emptied when the identities change.
    labels: HashMap<u32, Vec<String>, Fast>,
    /// The Services' count of changes the frontends are of.
    services_version: Option<u64>,
    frontends: HashMap<(Ipv4Addr, u16), flow::Service, Fast>,
}

/// Whether a copy must be taken (again): never taken, or its source
/// changed. `has_changed` reads an atomic, where reading the value takes
/// the channel's lock.
fn stale(taken: bool, changed: &watch::Receiver<u64>) -> bool {
    !taken || changed.has_changed().unwrap_or(false)
}

pub struct ControlPlaneResolver {
    endpoints: Arc<Endpoints>,
    identities: Arc<Identities>,
    ipcache: Arc<IpCache>,
    names: Arc<dyn PodNames>,
    services: Arc<Services>,
    cache: Mutex<Cache>,
    cgroup_root: PathBuf,
    cgroups: Mutex<Cgroups>,
    workloads: Option<Arc<dyn PodWorkloads>>,
}

impl ControlPlaneResolver {
    pub fn new(
        endpoints: Arc<Endpoints>,
        identities: Arc<Identities>,
        ipcache: Arc<IpCache>,
        services: Arc<Services>,
        names: Arc<dyn PodNames>,
        cgroup_root: PathBuf,
    ) -> Self {
        Self {
            cache: Mutex::new(Cache {
                endpoints_changed: endpoints.subscribe(),
                local: None,
                identities_changed: identities.subscribe(),
                labels: HashMap::default(),
                services_version: None,
                frontends: HashMap::default(),
            }),
            endpoints,
            identities,
            ipcache,
            names,
            services,
            cgroup_root,
            cgroups: Mutex::default(),
            workloads: None,
        }
    }

    /// A local endpoint's workload, written over `out`: as its copy has
    /// it, or, when the pod watcher had not seen its pod yet then, as it
    /// has it now.
    fn workloads_into(&self, ep: &LocalEndpoint, out: &mut Vec<flow::Workload>) {
        if !ep.workloads.is_empty() || ep.pod.is_empty() {
            out.clone_from(&ep.workloads);
            return;
        }
        out.clear();
        out.extend(
            self.workloads
                .as_ref()
                .and_then(|w| w.workload(&ep.namespace, &ep.pod)),
        );
    }

    /// Names local pods' workloads from `workloads`.
    pub fn with_workloads(mut self, workloads: Option<Arc<dyn PodWorkloads>>) -> Self {
        self.workloads = workloads;
        self
    }

    /// The cache, its copies of the local endpoints and the labels up to
    /// date.
    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        let mut cache = self.cache.lock().expect("resolver cache lock");
        if stale(cache.local.is_some(), &cache.endpoints_changed) {
            cache.endpoints_changed.borrow_and_update();
            cache.local = Some(self.local_endpoints());
        }
        if stale(true, &cache.identities_changed) {
            cache.identities_changed.borrow_and_update();
            cache.labels.clear();
        }
        cache
    }

    /// Local endpoints by each of their addresses, as they are now.
    fn local_endpoints(&self) -> HashMap<IpAddr, Arc<LocalEndpoint>, Fast> {
        self.endpoints
            .list()
            .into_iter()
            .flat_map(|ep| {
                let workloads = self
                    .workloads
                    .as_ref()
                    .and_then(|w| w.workload(&ep.k8s_namespace, &ep.k8s_pod_name))
                    .into_iter()
                    .collect();
                let addresses: Vec<IpAddr> = ep.addresses().map(|(ip, _)| ip).collect();
                let local = Arc::new(LocalEndpoint {
                    id: ep.id,
                    identity: ep.identity,
                    namespace: ep.k8s_namespace,
                    pod: ep.k8s_pod_name,
                    uid: ep.k8s_uid,
                    workloads,
                });
                addresses
                    .into_iter()
                    .map(move |ip| (ip, Arc::clone(&local)))
            })
            .collect()
    }

    /// An identity's labels, sorted as Cilium shows them, written over
    /// `out`.
    fn labels_into(
        &self,
        labels: &mut HashMap<u32, Vec<String>, Fast>,
        id: u32,
        out: &mut Vec<String>,
    ) {
        let known = labels.entry(id).or_insert_with(|| {
            let mut l = self.identities.get(id).unwrap_or_default();
            l.sort();
            l
        });
        out.clone_from(known);
    }

    /// The Service whose frontend is `ip:port`, from a copy taken again
    /// once the Services changed.
    fn frontend(&self, ip: Ipv4Addr, port: u16) -> Option<flow::Service> {
        let mut cache = self.cache.lock().expect("resolver cache lock");
        // every add, update or delete counts up one of the three
        let (a, u, d) = self.services.events();
        let version = a + u + d;
        if cache.services_version != Some(version) {
            cache.frontends = self.frontends();
            cache.services_version = Some(version);
        }
        cache.frontends.get(&(ip, port)).cloned()
    }

    fn frontends(&self) -> HashMap<(Ipv4Addr, u16), flow::Service, Fast> {
        self.services
            .list()
            .into_iter()
            .filter_map(|s| {
                let ip: Ipv4Addr = s.spec.frontend_address.ip.parse().ok()?;
                let flags = s.spec.flags?;
                (!flags.name.is_empty()).then(|| {
                    (
                        (ip, s.spec.frontend_address.port),
                        flow::Service {
                            name: flags.name,
                            namespace: flags.namespace,
                        },
                    )
                })
            })
            .collect()
    }
}

impl Resolve for ControlPlaneResolver {
    fn endpoint(&self, ip: IpAddr, identity: u32) -> flow::Endpoint {
        let mut out = flow::Endpoint::default();
        self.endpoint_into(ip, identity, &mut out);
        out
    }

    fn endpoint_into(&self, ip: IpAddr, identity: u32, out: &mut flow::Endpoint) {
        // every field named, so that one added to the proto is not left
        // holding the last flow's value
        let flow::Endpoint {
            id,
            identity: out_identity,
            cluster_name,
            namespace,
            labels,
            pod_name,
            workloads,
        } = out;
        let mut cache = self.cache();
        let Cache {
            local,
            labels: known,
            ..
        } = &mut *cache;
        if let Some(ep) = local.as_ref().and_then(|l| l.get(&ip)) {
            let identity = if identity != 0 { identity } else { ep.identity };
            *id = u32::from(ep.id);
            *out_identity = identity;
            cluster_name.clear();
            namespace.clone_from(&ep.namespace);
            pod_name.clone_from(&ep.pod);
            self.labels_into(known, identity, labels);
            self.workloads_into(ep, workloads);
            return;
        }
        // the datapath's identity wins over the ipcache's
        let identity = match identity {
            0 => self
                .ipcache
                .get(ip, abi::ipcache::host_prefix_len(ip))
                .map_or(0, |e| e.identity),
            id => id,
        };
        *id = 0;
        *out_identity = identity;
        self.labels_into(known, identity, labels);
        drop(cache);
        cluster_name.clear();
        cluster_name.push_str(cluster_of(labels));
        // other nodes' pods are named by their addresses
        let (ns, pod) = self.names.pod(ip).unwrap_or_default();
        (*namespace, *pod_name) = (ns, pod);
        workloads.clear();
    }

    fn service(&self, ip: IpAddr, port: u16) -> Option<flow::Service> {
        let IpAddr::V4(v4) = ip else {
            return None;
        };
        self.frontend(v4, port)
    }

    fn cgroup_pod(&self, id: u64) -> Option<IpAddr> {
        let mut cg = self.cgroups.lock().expect("cgroups lock");
        if let Some(ip) = cg.pods.get(&id) {
            return Some(IpAddr::V4(*ip));
        }
        if cg.scanned.is_some_and(|at| at.elapsed() < CGROUP_RESCAN) {
            return None;
        }
        // a pod's sockets are named by its IPv4 address, as before IPv6;
        // copied out, so the walk below holds no lookup up
        let by_uid: HashMap<String, Ipv4Addr> = self
            .cache()
            .local
            .iter()
            .flatten()
            .filter(|(_, ep)| !ep.uid.is_empty())
            .filter_map(|(ip, ep)| match ip {
                IpAddr::V4(v4) => Some((ep.uid.clone(), *v4)),
                IpAddr::V6(_) => None,
            })
            .collect();
        let uids: Vec<String> = by_uid.keys().cloned().collect();
        cg.pods = super::cgroups::scan(&self.cgroup_root, &uids)
            .into_iter()
            .filter_map(|(ino, uid)| by_uid.get(uid.as_str()).map(|ip| (ino, *ip)))
            .collect();
        cg.scanned = Some(Instant::now());
        cg.pods.get(&id).map(|ip| IpAddr::V4(*ip))
    }
}

/// The cluster a remote identity's labels name.
fn cluster_of(labels: &[String]) -> &str {
    labels
        .iter()
        .find_map(|l| l.strip_prefix("k8s:io.cilium.k8s.policy.cluster="))
        .unwrap_or_default()
}
