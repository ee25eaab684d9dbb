//! Services: the REST API's `ServiceSpec`, checked into an `lb` service,
//! applied to the LB maps, and shared through the kvstore so every node
//! balances the same way. In kvstore mode each agent applies what it reads
//! from `cilium/state/services/v1/<cluster>/rest/`; the agent that took the
//! request applies it first, so its answer reflects the datapath.

use crate::events::AgentNotify;
use crate::ports::{Events, LbMaps};
use api::service::{BackendAddress, FrontendAddress, Service, ServiceSpec, ServiceStatus};
use lb::{BackendState, Frontend, LoadBalancer, ServiceType};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use watch::Source;

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("invalid frontend: {0}")]
    Frontend(String),
    #[error("invalid backend: {0}")]
    Backend(String),
    #[error("{0}")]
    Invalid(String),
    #[error("service {0} not found")]
    NotFound(u16),
    #[error("{0}")]
    Failed(String),
}

impl ServiceError {
    /// Cilium's answers: 460 invalid frontend, 461 invalid backend.
    pub fn status(&self) -> u16 {
        match self {
            ServiceError::Frontend(_) => 460,
            ServiceError::Backend(_) => 461,
            ServiceError::Invalid(_) => 400,
            ServiceError::NotFound(_) => 404,
            ServiceError::Failed(_) => 500,
        }
    }
}

/// The service ID of a path or spec: 1..65535.
pub fn parse_id(raw: i64) -> Result<u16, ServiceError> {
    u16::try_from(raw)
        .ok()
        .filter(|id| *id != 0)
        .ok_or_else(|| {
            ServiceError::Invalid(format!("invalid service ID {raw}: expected 1..65535"))
        })
}

/// An address of a spec; the refusal names the field and the value.
fn address(s: &str, what: &str) -> Result<IpAddr, NotAnAddress> {
    s.parse().map_err(|_| NotAnAddress {
        what: what.to_owned(),
        value: s.to_owned(),
    })
}

#[derive(Debug, thiserror::Error)]
#[error("{what} {value:?} is not an IP address")]
pub struct NotAnAddress {
    what: String,
    value: String,
}

/// Checks a spec into what the load balancer takes.
pub fn parse(spec: &ServiceSpec) -> Result<lb::ServiceSpec, ServiceError> {
    let id = parse_id(spec.id)?;
    let f = &spec.frontend_address;
    let ip = address(&f.ip, "address").map_err(|e| ServiceError::Frontend(e.to_string()))?;
    if f.port == 0 {
        return Err(ServiceError::Frontend(format!(
            "{}: port must not be 0",
            f.ip
        )));
    }
    // Each protocol is a frontend of its own (protocol differentiation, as
    // Cilium does from 1.17); one made without a protocol takes every
    // protocol, as all of Cilium 1.16's do.
    let proto = f.protocol.number();
    let scope = match f.scope.as_str() {
        "" | "external" => abi::lb::LB_LOOKUP_SCOPE_EXT,
        "internal" => abi::lb::LB_LOOKUP_SCOPE_INT,
        s => {
            return Err(ServiceError::Frontend(format!(
                "unknown scope {s:?}: expected external or internal"
            )))
        }
    };
    let kind = match spec.flags.as_ref().map(|f| f.kind.as_str()).unwrap_or("") {
        "" => ServiceType::ClusterIP,
        t => ServiceType::parse(t)
            .ok_or_else(|| ServiceError::Invalid(format!("unknown service type {t:?}")))?,
    };
    let ext_local = match &spec.flags {
        Some(flags) => check_policies(flags)?,
        None => false,
    };
    // A HostPort for hostIP 127.0.0.1 is the 0.0.0.0 frontend that only
    // the node's own loopback connections reach (Cilium's surrogate).
    let loopback = kind == ServiceType::HostPort && ip.is_loopback();
    let ip = match ip {
        IpAddr::V4(_) if loopback => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) if loopback => Ipv6Addr::UNSPECIFIED.into(),
        ip => ip,
    };
    let mut backends = Vec::new();
    for b in &spec.backend_addresses {
        let ip =
            address(&b.ip, "backend address").map_err(|e| ServiceError::Backend(e.to_string()))?;
        let state = match b.state.as_str() {
            "" => BackendState::Active,
            s => BackendState::parse(s).ok_or_else(|| {
                ServiceError::Backend(format!(
                    "{}: unknown state {s:?}: expected active, terminating, quarantined or maintenance",
                    b.ip
                ))
            })?,
        };
        backends.push((ip, b.port, state));
    }
    Ok(lb::ServiceSpec {
        id,
        frontend: Frontend {
            ip,
            port: f.port,
            proto,
            scope,
        },
        kind,
        backends,
        affinity_timeout: spec.session_affinity_timeout,
        ext_local,
        loopback,
    })
}

/// Traffic and NAT policies this load balancer has: every backend for every
/// client (`Cluster`), or for clients from outside the cluster only this
/// node's (`extTrafficPolicy` `Local`, or the deprecated `trafficPolicy`);
/// no NAT46/64. Cilium 1.16's `service update` sends `Cluster` for both
/// traffic policies. Returns whether external traffic is local.
fn check_policies(flags: &api::service::ServiceSpecFlags) -> Result<bool, ServiceError> {
    let mut ext_local = false;
    for (name, value, local_allowed) in [
        ("trafficPolicy", &flags.traffic_policy, true),
        ("extTrafficPolicy", &flags.ext_traffic_policy, true),
        ("intTrafficPolicy", &flags.int_traffic_policy, false),
    ] {
        match value.as_str() {
            "" | "Cluster" => {}
            "Local" if local_allowed => ext_local = true,
            _ => {
                return Err(ServiceError::Invalid(format!(
                    "{name} {value:?} is not supported: only {}",
                    if local_allowed {
                        "Cluster or Local"
                    } else {
                        "Cluster"
                    }
                )))
            }
        }
    }
    if !matches!(flags.nat_policy.as_str(), "" | "None") {
        return Err(ServiceError::Invalid(format!(
            "natPolicy {:?} is not supported: only None",
            flags.nat_policy
        )));
    }
    Ok(ext_local)
}

/// The spec the datapath realizes for a service, as the API shows it.
fn realized(svc: &lb::Service) -> ServiceSpec {
    let ext_policy = if svc.ext_local { "Local" } else { "Cluster" };
    ServiceSpec {
        id: i64::from(svc.id),
        frontend_address: FrontendAddress {
            ip: svc.frontend.ip.to_string(),
            port: svc.frontend.port,
            protocol: api::service::L4Protocol::from_number(svc.frontend.proto),
            scope: if svc.frontend.scope == abi::lb::LB_LOOKUP_SCOPE_INT {
                "internal".into()
            } else {
                "external".into()
            },
        },
        backend_addresses: svc
            .backends
            .iter()
            .map(|b| BackendAddress {
                ip: b.ip.to_string(),
                port: b.port,
                state: b.state.as_str().into(),
                preferred: b.preferred,
                ..Default::default()
            })
            .collect(),
        flags: Some(api::service::ServiceSpecFlags {
            kind: svc.kind.as_str().into(),
            traffic_policy: ext_policy.into(),
            ext_traffic_policy: ext_policy.into(),
            int_traffic_policy: "Cluster".into(),
            ..Default::default()
        }),
        session_affinity_timeout: svc.affinity_timeout,
        ..Default::default()
    }
}

/// What a change did to a service (`cilium_services_events_total`'s
/// `action`).
#[derive(Clone, Copy)]
enum Action {
    Add,
    Update,
    Delete,
}

/// Where services are shared with the other nodes.
pub struct Shared {
    pub kv: kvstore::Kvstore,
    pub cluster: String,
}

pub struct Services {
    /// Announces upserts and deletes to `cilium monitor`.
    events: Arc<dyn Events>,
    maps: Arc<dyn LbMaps>,
    /// None without a kvstore.
    shared: Option<Shared>,
    /// Without a kvstore the agent itself must remember its services:
    /// `<state-dir>/services.json`, rewritten (write, rename) on each change.
    state_file: Option<PathBuf>,
    lb: Mutex<LoadBalancer>,
    /// What each service was asked to be.
    specs: Mutex<BTreeMap<u16, ServiceSpec>>,
    /// Services added, updated and deleted (`cilium_services_events_total`).
    counts: [std::sync::atomic::AtomicU64; 3],
}

impl Services {
    /// Starts from the backend IDs a previous run left in the maps, so the
    /// flows conntrack pins to them keep their backends.
    pub fn new(
        maps: Arc<dyn LbMaps>,
        maglev: Option<lb::MaglevConfig>,
        shared: Option<Shared>,
        state_file: Option<PathBuf>,
        events: Arc<dyn Events>,
    ) -> Self {
        let mut lb = match maglev {
            Some(m) => LoadBalancer::with_maglev(m),
            None => LoadBalancer::new(),
        };
        for (id, ip, port) in maps.backends() {
            lb.seed_backend(id, ip, port);
        }
        Self {
            events,
            maps,
            shared,
            state_file,
            lb: Mutex::new(lb),
            specs: Mutex::default(),
            counts: Default::default(),
        }
    }

    /// Takes back the services a previous run saved; returns how many.
    pub fn restore(&self) -> usize {
        let Some(path) = &self.state_file else {
            return 0;
        };
        let specs: Vec<ServiceSpec> = match std::fs::read(path) {
            Ok(raw) => match serde_json::from_slice(&raw) {
                Ok(specs) => specs,
                Err(e) => {
                    tracing::warn!(subsys = "service", path = %path.display(), error = %e, "Ignoring corrupt service state");
                    return 0;
                }
            },
            Err(_) => return 0,
        };
        specs
            .iter()
            .filter(|spec| match self.apply(spec) {
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(subsys = "service", serviceID = spec.id, error = %e, "Unable to restore service");
                    false
                }
            })
            .count()
    }

    /// Saves what the services were asked to be (no-op with a kvstore).
    fn save(&self, specs: &BTreeMap<u16, ServiceSpec>) -> Result<(), ServiceError> {
        let Some(path) = &self.state_file else {
            return Ok(());
        };
        let body = serde_json::to_vec_pretty(&specs.values().collect::<Vec<_>>())
            .expect("specs serialize");
        crate::statefile::replace(path, &body)
            .map_err(|e| ServiceError::Failed(format!("saving {}: {e}", path.display())))
    }

    /// Realizes a spec and saves; true when the service is new.
    pub fn apply(&self, spec: &ServiceSpec) -> Result<bool, ServiceError> {
        let mut batch = self.batch();
        let created = batch.apply(spec)?;
        batch.finish()?;
        Ok(created)
    }

    /// Changes to several services, saved once when the batch finishes.
    pub fn batch(&self) -> Batch<'_> {
        Batch {
            services: self,
            changed: false,
        }
    }

    /// Writes the state file from the specs in force.
    fn save_all(&self) -> Result<(), ServiceError> {
        self.save(&self.specs.lock().expect("specs lock"))
    }

    /// Realizes a spec, unsaved; Some(true) when the service is new, None
    /// when it was in force already.
    fn realize(&self, spec: &ServiceSpec) -> Result<Option<bool>, ServiceError> {
        let parsed = parse(spec)?;
        if parsed.frontend.ip.is_ipv6() && !self.maps.ipv6() {
            return Err(ServiceError::Frontend(format!(
                "{}: an IPv6 frontend needs enable-ipv6 on this node",
                parsed.frontend
            )));
        }
        let mut lb = self.lb.lock().expect("lb lock");
        // The agent that took a request applied it already; the kvstore
        // then hands the same spec back (and again after each relist).
        if self.specs.lock().expect("specs lock").get(&parsed.id) == Some(spec) {
            return Ok(None);
        }
        let (update, created) = lb.upsert(&parsed).map_err(|e| match e {
            lb::LbError::InvalidFrontend(m) => ServiceError::Frontend(m),
            e @ lb::LbError::FamilyMismatch { .. } => ServiceError::Backend(e.to_string()),
            e => ServiceError::Failed(e.to_string()),
        })?;
        self.maps
            .apply(&update)
            .map_err(|e| ServiceError::Failed(format!("writing the LB maps: {e}")))?;
        self.specs
            .lock()
            .expect("specs lock")
            .insert(parsed.id, spec.clone());
        self.count(if created { Action::Add } else { Action::Update });
        tracing::info!(subsys = "service", serviceID = parsed.id, frontend = %parsed.frontend, backends = parsed.backends.len(), created, "Service upserted");
        self.events.agent(
            AgentNotify::ServiceUpserted,
            serde_json::to_value(spec).expect("spec serializes"),
        );
        Ok(Some(created))
    }

    /// Removes from the LB maps what none of the current services occupies:
    /// services deleted while no agent ran. Called once the desired
    /// services are all applied (restore, or the kvstore's initial list).
    pub fn sweep(&self) {
        let mut lb = self.lb.lock().expect("lb lock");
        let swept = self.maps.keys().and_then(|found| {
            let update = lb.stale(&found);
            self.maps.apply(&update).map(|()| update)
        });
        match swept {
            Ok(up) if !up.del_rev_nat.is_empty() || !up.del_services.is_empty() => {
                tracing::info!(
                    subsys = "service",
                    services = up.del_rev_nat.len(),
                    entries = up.del_services.len(),
                    backends = up.del_backends.len(),
                    "Removed stale service entries"
                );
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(subsys = "service", error = %e, "Unable to remove stale service entries")
            }
        }
    }

    fn count(&self, action: Action) {
        self.counts[action as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many services were added, updated and deleted.
    pub fn events(&self) -> (u64, u64, u64) {
        let get = |a: Action| self.counts[a as usize].load(std::sync::atomic::Ordering::Relaxed);
        (get(Action::Add), get(Action::Update), get(Action::Delete))
    }

    /// Removes a service and saves.
    pub fn remove(&self, id: u16) -> Result<(), ServiceError> {
        let mut batch = self.batch();
        batch.remove(id)?;
        batch.finish()
    }

    /// Removes a service, unsaved.
    fn unrealize(&self, id: u16) -> Result<(), ServiceError> {
        let mut lb = self.lb.lock().expect("lb lock");
        let update = lb.delete(id).map_err(|_| ServiceError::NotFound(id))?;
        self.maps
            .apply(&update)
            .map_err(|e| ServiceError::Failed(format!("writing the LB maps: {e}")))?;
        self.specs.lock().expect("specs lock").remove(&id);
        self.count(Action::Delete);
        tracing::info!(subsys = "service", serviceID = id, "Service deleted");
        self.events
            .agent(AgentNotify::ServiceDeleted, serde_json::json!({ "id": id }));
        Ok(())
    }

    pub fn get(&self, id: u16) -> Option<Service> {
        let lb = self.lb.lock().expect("lb lock");
        let svc = lb.get(id)?;
        let spec = self.specs.lock().expect("specs lock").get(&id).cloned();
        let realized = realized(svc);
        let spec = match spec {
            // Cilium's clients read spec.flags.type without a nil check
            Some(mut spec) => {
                let flags = spec.flags.get_or_insert_with(Default::default);
                if flags.kind.is_empty() {
                    flags.kind = svc.kind.as_str().into();
                }
                spec
            }
            None => realized.clone(),
        };
        Some(Service {
            spec,
            status: ServiceStatus { realized },
        })
    }

    /// The IDs of the services in force.
    pub fn ids(&self) -> Vec<u16> {
        let lb = self.lb.lock().expect("lb lock");
        lb.list().iter().map(|s| s.id).collect()
    }

    pub fn list(&self) -> Vec<Service> {
        self.ids()
            .into_iter()
            .filter_map(|id| self.get(id))
            .collect()
    }
}

/// Changes to several services, with one save of the state file when it
/// finishes: a resync of a thousand Kubernetes Services rewrote the whole
/// file (hundreds of KB) once per Service.
pub struct Batch<'a> {
    services: &'a Services,
    changed: bool,
}

impl Batch<'_> {
    /// [`Services::apply`], saved when the batch finishes.
    pub fn apply(&mut self, spec: &ServiceSpec) -> Result<bool, ServiceError> {
        let created = self.services.realize(spec)?;
        self.changed |= created.is_some();
        Ok(created == Some(true))
    }

    /// [`Services::remove`], saved when the batch finishes.
    pub fn remove(&mut self, id: u16) -> Result<(), ServiceError> {
        self.services.unrealize(id)?;
        self.changed = true;
        Ok(())
    }

    /// Saves what the batch changed.
    pub fn finish(self) -> Result<(), ServiceError> {
        if self.changed {
            self.services.save_all()
        } else {
            Ok(())
        }
    }
}

impl Services {
    /// `PUT /service/{id}`: realizes the spec here, then shares it with
    /// the cluster; true when the service is new.
    pub async fn put(&self, spec: &ServiceSpec) -> Result<bool, ServiceError> {
        let created = self.apply(spec)?;
        if let Some(shared) = &self.shared {
            let id = parse_id(spec.id)?;
            let key = kvstore::keys::service(&shared.cluster, id);
            let body = serde_json::to_vec(spec).expect("spec serializes");
            shared.kv.put(&key, &body).await.map_err(|e| {
                ServiceError::Failed(format!(
                    "service {id} is realized here but not shared with the cluster: {e}"
                ))
            })?;
        }
        Ok(created)
    }

    /// `DELETE /service/{id}`: removes it here, then from the cluster.
    pub async fn delete(&self, id: u16) -> Result<(), ServiceError> {
        self.remove(id)?;
        if let Some(shared) = &self.shared {
            let key = kvstore::keys::service(&shared.cluster, id);
            shared.kv.delete(&key).await.map_err(|e| {
                ServiceError::Failed(format!(
                    "service {id} is deleted here but not from the cluster: {e}"
                ))
            })?;
        }
        Ok(())
    }

    /// Applies the cluster's services as `source` has them, until the
    /// agent stops.
    pub fn follow(
        self: Arc<Self>,
        source: impl Source<Key = String, Value = ServiceSpec> + 'static,
        tasks: &crate::tasks::Tasks,
    ) {
        let handler = move |change| std::future::ready(self.follow_change(change));
        tasks.spawn(
            "services",
            watch::Store::new("services").run(source, handler),
        );
    }

    /// One change of the cluster's services; a datapath write that failed
    /// is tried again. Once the initial list is in, what no service
    /// occupies any more is swept from the LB maps.
    pub fn follow_change(
        &self,
        change: watch::Change<String, ServiceSpec>,
    ) -> Result<(), ServiceError> {
        match change {
            watch::Change::Upsert { new, .. } => self.apply(&new).map(|_| ()),
            watch::Change::Delete { key, .. } => {
                let Some(id) = key.rsplit('/').next().and_then(|s| s.parse().ok()) else {
                    return Ok(());
                };
                match self.remove(id) {
                    Err(e @ ServiceError::Failed(_)) => Err(e),
                    _ => Ok(()),
                }
            }
            watch::Change::Synced => {
                tracing::info!(subsys = "service", "Initial service list received");
                self.sweep();
                Ok(())
            }
        }
    }
}

/// The cluster's REST services in the kvstore, as a source of
/// [`Services::follow`].
pub fn kvstore_source(
    kv: &kvstore::Kvstore,
    cluster: &str,
) -> impl Source<Key = String, Value = ServiceSpec> + 'static {
    let prefix = format!("{}/{cluster}/rest/", kvstore::keys::SERVICES);
    kv.source(&prefix).decode(|_, raw| decode(raw))
}

/// A spec as the kvstore holds it, checked: one the load balancer would
/// refuse is skipped at once rather than retried.
fn decode(raw: &[u8]) -> Result<ServiceSpec, ServiceError> {
    let spec: ServiceSpec = serde_json::from_slice(raw)
        .map_err(|e| ServiceError::Invalid(format!("malformed service: {e}")))?;
    parse(&spec)?;
    Ok(spec)
}
