//! Flows' ends and services from what the control plane knows: local
//! endpoints (ID, identity, pod, labels), remote pods by the names the
//! ipcache sync gave the monitor, identities' labels, Services' frontends.
//! Lookups run for every flow on the monitor's thread, so each source is
//! read through a snapshot taken again only when the source changed.

use super::parse::Resolve;
use controlplane::endpoint::Endpoints;
use controlplane::identity::Identities;
use controlplane::ipcache::IpCache;
use controlplane::services::Services;
use hubble::flow;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
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

/// A copy of a source, and the version of it the copy is of.
struct Snapshot<K, V> {
    version: u64,
    map: Arc<HashMap<K, V>>,
}

impl<K, V> Snapshot<K, V> {
    /// Older than any version: taken again at the first lookup.
    fn empty() -> Self {
        Self {
            version: u64::MAX,
            map: Arc::new(HashMap::new()),
        }
    }
}

pub struct ControlPlaneResolver {
    endpoints: Arc<Endpoints>,
    endpoints_changed: Mutex<watch::Receiver<u64>>,
    local: RwLock<Snapshot<IpAddr, Arc<LocalEndpoint>>>,
    identities: Arc<Identities>,
    identities_changed: Mutex<watch::Receiver<u64>>,
    labels: RwLock<Snapshot<u32, Arc<Vec<String>>>>,
    ipcache: Arc<IpCache>,
    names: Arc<dyn PodNames>,
    services: Arc<Services>,
    frontends: RwLock<Snapshot<(Ipv4Addr, u16), flow::Service>>,
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
            endpoints_changed: Mutex::new(endpoints.subscribe()),
            endpoints,
            local: RwLock::new(Snapshot::empty()),
            identities_changed: Mutex::new(identities.subscribe()),
            identities,
            labels: RwLock::new(Snapshot::empty()),
            ipcache,
            names,
            services,
            frontends: RwLock::new(Snapshot::empty()),
            cgroup_root,
            cgroups: Mutex::default(),
            workloads: None,
        }
    }

    /// A local endpoint's workload, written over `out`: as its snapshot
    /// has it, or, when the pod watcher had not seen its pod yet then, as
    /// it has it now.
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

    /// Local endpoints by each of their addresses.
    fn local(&self) -> Arc<HashMap<IpAddr, Arc<LocalEndpoint>>> {
        let version = *self
            .endpoints_changed
            .lock()
            .expect("watch lock")
            .borrow_and_update();
        if let Some(map) = fresh(&self.local, version) {
            return map;
        }
        let map: HashMap<_, _> = self
            .endpoints
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
            .collect();
        store(&self.local, version, map)
    }

    /// An identity's labels, sorted as Cilium shows them.
    fn labels(&self, id: u32) -> Arc<Vec<String>> {
        let version = *self
            .identities_changed
            .lock()
            .expect("watch lock")
            .borrow_and_update();
        {
            let snap = self.labels.read().expect("labels lock");
            if snap.version == version {
                if let Some(l) = snap.map.get(&id) {
                    return Arc::clone(l);
                }
            }
        }
        let mut labels = self.identities.get(id).unwrap_or_default();
        labels.sort();
        let labels = Arc::new(labels);
        let mut snap = self.labels.write().expect("labels lock");
        if snap.version != version {
            *snap = Snapshot {
                version,
                map: Arc::default(),
            };
        }
        Arc::make_mut(&mut snap.map).insert(id, Arc::clone(&labels));
        labels
    }

    fn frontends(&self) -> Arc<HashMap<(Ipv4Addr, u16), flow::Service>> {
        // every add, update or delete counts up one of the three
        let (a, u, d) = self.services.events();
        let version = a + u + d;
        if let Some(map) = fresh(&self.frontends, version) {
            return map;
        }
        let map: HashMap<_, _> = self
            .services
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
            .collect();
        store(&self.frontends, version, map)
    }
}

fn fresh<K, V>(snap: &RwLock<Snapshot<K, V>>, version: u64) -> Option<Arc<HashMap<K, V>>> {
    let snap = snap.read().expect("snapshot lock");
    (snap.version == version).then(|| Arc::clone(&snap.map))
}

fn store<K, V>(
    snap: &RwLock<Snapshot<K, V>>,
    version: u64,
    map: HashMap<K, V>,
) -> Arc<HashMap<K, V>> {
    let map = Arc::new(map);
    *snap.write().expect("snapshot lock") = Snapshot {
        version,
        map: Arc::clone(&map),
    };
    map
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
        if let Some(ep) = self.local().get(&ip) {
            let identity = if identity != 0 { identity } else { ep.identity };
            *id = u32::from(ep.id);
            *out_identity = identity;
            cluster_name.clear();
            namespace.clone_from(&ep.namespace);
            pod_name.clone_from(&ep.pod);
            labels.clone_from(&self.labels(identity));
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
        labels.clone_from(&self.labels(identity));
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
        self.frontends().get(&(v4, port)).cloned()
    }

    fn cgroup_pod(&self, id: u64) -> Option<IpAddr> {
        let mut cg = self.cgroups.lock().expect("cgroups lock");
        if let Some(ip) = cg.pods.get(&id) {
            return Some(IpAddr::V4(*ip));
        }
        if cg.scanned.is_some_and(|at| at.elapsed() < CGROUP_RESCAN) {
            return None;
        }
        let local = self.local();
        // a pod's sockets are named by its IPv4 address, as before IPv6
        let by_uid: HashMap<&str, Ipv4Addr> = local
            .iter()
            .filter(|(_, ep)| !ep.uid.is_empty())
            .filter_map(|(ip, ep)| match ip {
                IpAddr::V4(v4) => Some((ep.uid.as_str(), *v4)),
                IpAddr::V6(_) => None,
            })
            .collect();
        let uids: Vec<String> = by_uid.keys().map(|u| (*u).to_owned()).collect();
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
