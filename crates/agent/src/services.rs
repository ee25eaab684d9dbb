//! Services: the REST API's `ServiceSpec`, checked into an `lb` service,
//! applied to the LB maps, and shared through the kvstore so every node
//! balances the same way. In kvstore mode each agent applies what it reads
//! from `cilium/state/services/v1/<cluster>/rest/`; the agent that took the
//! request applies it first, so its answer reflects the datapath.

use crate::daemon::Daemon;
use crate::monitor::AgentNotify;
use api::service::{BackendAddress, FrontendAddress, Service, ServiceSpec, ServiceStatus};
use lb::{BackendState, Frontend, LoadBalancer, ServiceType};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
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

fn ipv4(s: &str, what: &str) -> Result<Ipv4Addr, String> {
    s.parse()
        .map_err(|_| format!("{what} {s:?} is not an IPv4 address"))
}

/// Checks a spec into what the load balancer takes.
pub fn parse(spec: &ServiceSpec) -> Result<lb::ServiceSpec, ServiceError> {
    let id = parse_id(spec.id)?;
    let f = &spec.frontend_address;
    let ip = ipv4(&f.ip, "address").map_err(ServiceError::Frontend)?;
    if f.port == 0 {
        return Err(ServiceError::Frontend(format!(
            "{}: port must not be 0",
            f.ip
        )));
    }
    // f.protocol is ignored, as by Cilium: every service balances every
    // L4 protocol
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
    if let Some(flags) = &spec.flags {
        check_policies(flags)?;
    }
    let mut backends = Vec::new();
    for b in &spec.backend_addresses {
        let ip = ipv4(&b.ip, "backend address").map_err(ServiceError::Backend)?;
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
            scope,
        },
        kind,
        backends,
        affinity_timeout: spec.session_affinity_timeout,
    })
}

/// Traffic and NAT policies this load balancer has: every backend for every
/// client (`Cluster`), no NAT46/64. Cilium 1.16's `service update` sends
/// `Cluster` for both traffic policies.
fn check_policies(flags: &api::service::ServiceSpecFlags) -> Result<(), ServiceError> {
    for (name, value) in [
        ("trafficPolicy", &flags.traffic_policy),
        ("extTrafficPolicy", &flags.ext_traffic_policy),
        ("intTrafficPolicy", &flags.int_traffic_policy),
    ] {
        if !matches!(value.as_str(), "" | "Cluster") {
            return Err(ServiceError::Invalid(format!(
                "{name} {value:?} is not supported: only Cluster"
            )));
        }
    }
    if !matches!(flags.nat_policy.as_str(), "" | "None") {
        return Err(ServiceError::Invalid(format!(
            "natPolicy {:?} is not supported: only None",
            flags.nat_policy
        )));
    }
    Ok(())
}

/// The spec the datapath realizes for a service, as the API shows it.
fn realized(svc: &lb::Service) -> ServiceSpec {
    ServiceSpec {
        id: i64::from(svc.id),
        frontend_address: FrontendAddress {
            ip: svc.frontend.ip.to_string(),
            port: svc.frontend.port,
            protocol: api::service::L4Protocol::Any,
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
            ..Default::default()
        }),
        session_affinity_timeout: svc.affinity_timeout,
        ..Default::default()
    }
}

pub struct Services {
    /// Announces upserts and deletes to `cilium monitor`.
    monitor: Arc<crate::monitor::Hub>,
    pin_dir: PathBuf,
    /// Without a kvstore the agent itself must remember its services:
    /// `<state-dir>/services.json`, rewritten (write, rename) on each change.
    state_file: Option<PathBuf>,
    lb: Mutex<LoadBalancer>,
    /// What each service was asked to be.
    specs: Mutex<BTreeMap<u16, ServiceSpec>>,
    /// Services added, updated and deleted (`cilium_services_events_total`).
    events: [std::sync::atomic::AtomicU64; 3],
}

impl Services {
    /// Starts from the backend IDs a previous run left in the maps, so the
    /// flows conntrack pins to them keep their backends.
    pub fn new(
        bpf_root: &std::path::Path,
        maglev: Option<lb::MaglevConfig>,
        state_file: Option<PathBuf>,
        monitor: Arc<crate::monitor::Hub>,
    ) -> Self {
        let pin_dir = bpf_root.join(abi::maps::GLOBALS_DIR);
        let mut lb = match maglev {
            Some(m) => LoadBalancer::with_maglev(m),
            None => LoadBalancer::new(),
        };
        if let Ok(map) = datapath::maps::Lb4Backends::open_in(&pin_dir) {
            for (id, b) in map.entries().unwrap_or_default() {
                lb.seed_backend(id, b.address.ip(), b.port.get());
            }
        }
        Self {
            monitor,
            pin_dir,
            state_file,
            lb: Mutex::new(lb),
            specs: Mutex::default(),
            events: Default::default(),
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
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, body)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| ServiceError::Failed(format!("saving {}: {e}", path.display())))
    }

    /// Realizes a spec; true when the service is new.
    pub fn apply(&self, spec: &ServiceSpec) -> Result<bool, ServiceError> {
        let parsed = parse(spec)?;
        let mut lb = self.lb.lock().expect("lb lock");
        // The agent that took a request applied it already; the kvstore
        // then hands the same spec back (and again after each relist).
        if self.specs.lock().expect("specs lock").get(&parsed.id) == Some(spec) {
            return Ok(false);
        }
        let (update, created) = lb.upsert(&parsed).map_err(|e| match e {
            lb::LbError::InvalidFrontend(m) => ServiceError::Frontend(m),
            e => ServiceError::Failed(e.to_string()),
        })?;
        datapath::lbmap::apply(&self.pin_dir, &update)
            .map_err(|e| ServiceError::Failed(format!("writing the LB maps: {e}")))?;
        let mut specs = self.specs.lock().expect("specs lock");
        specs.insert(parsed.id, spec.clone());
        self.save(&specs)?;
        drop(specs);
        self.count(if created { 0 } else { 1 });
        tracing::info!(subsys = "service", serviceID = parsed.id, frontend = %parsed.frontend, backends = parsed.backends.len(), created, "Service upserted");
        self.monitor.agent(
            AgentNotify::ServiceUpserted,
            serde_json::to_value(spec).expect("spec serializes"),
        );
        Ok(created)
    }

    /// Removes from the LB maps what none of the current services occupies:
    /// services deleted while no agent ran. Called once the desired
    /// services are all applied (restore, or the kvstore's initial list).
    pub fn sweep(&self) {
        let mut lb = self.lb.lock().expect("lb lock");
        let swept = datapath::lbmap::keys(&self.pin_dir).and_then(|found| {
            let update = lb.stale(&found);
            datapath::lbmap::apply(&self.pin_dir, &update).map(|()| update)
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

    fn count(&self, action: usize) {
        self.events[action].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many services were added, updated and deleted.
    pub fn events(&self) -> (u64, u64, u64) {
        let get = |i: usize| self.events[i].load(std::sync::atomic::Ordering::Relaxed);
        (get(0), get(1), get(2))
    }

    pub fn remove(&self, id: u16) -> Result<(), ServiceError> {
        let mut lb = self.lb.lock().expect("lb lock");
        let update = lb.delete(id).map_err(|_| ServiceError::NotFound(id))?;
        datapath::lbmap::apply(&self.pin_dir, &update)
            .map_err(|e| ServiceError::Failed(format!("writing the LB maps: {e}")))?;
        let mut specs = self.specs.lock().expect("specs lock");
        specs.remove(&id);
        self.save(&specs)?;
        drop(specs);
        self.count(2);
        tracing::info!(subsys = "service", serviceID = id, "Service deleted");
        self.monitor
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

    pub fn list(&self) -> Vec<Service> {
        let ids: Vec<u16> = self
            .lb
            .lock()
            .expect("lb lock")
            .list()
            .iter()
            .map(|s| s.id)
            .collect();
        ids.into_iter().filter_map(|id| self.get(id)).collect()
    }
}

/// Applies the cluster's services as the kvstore has them.
pub fn follow(d: &Arc<Daemon>) {
    let Some(kv) = &d.kvstore else { return };
    let prefix = format!(
        "{}/{}/rest/",
        kvstore::keys::SERVICES,
        d.config.cluster_name
    );
    let source = kv.source(&prefix).decode(|_, raw| decode(raw));
    let tasks = d.tasks.clone();
    let d = Arc::clone(d);
    let handler = move |change| std::future::ready(follow_change(&d, change));
    tasks.spawn(
        "services",
        watch::Store::new("services").run(source, handler),
    );
}

/// A spec as the kvstore holds it, checked: one the load balancer would
/// refuse is skipped at once rather than retried.
fn decode(raw: &[u8]) -> Result<ServiceSpec, ServiceError> {
    let spec: ServiceSpec = serde_json::from_slice(raw)
        .map_err(|e| ServiceError::Invalid(format!("malformed service: {e}")))?;
    parse(&spec)?;
    Ok(spec)
}

/// One change of the kvstore's services; a datapath write that failed is
/// tried again. Once the initial list is in, what no service occupies
/// any more is swept from the LB maps.
fn follow_change(
    d: &Daemon,
    change: watch::Change<String, ServiceSpec>,
) -> Result<(), ServiceError> {
    match change {
        watch::Change::Upsert { new, .. } => d.services.apply(&new).map(|_| ()),
        watch::Change::Delete { key, .. } => {
            let Some(id) = key.rsplit('/').next().and_then(|s| s.parse().ok()) else {
                return Ok(());
            };
            match d.services.remove(id) {
                Err(e @ ServiceError::Failed(_)) => Err(e),
                _ => Ok(()),
            }
        }
        watch::Change::Synced => {
            tracing::info!(subsys = "service", "Initial service list received");
            d.services.sweep();
            Ok(())
        }
    }
}
