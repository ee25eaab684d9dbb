//! The load balancer's state and the map changes each request makes.

use crate::service::{Backend, BackendState, Frontend, Service, ServiceType};
use abi::lb::{
    Lb4Backend, Lb4Key, Lb4ReverseNat, Lb4Service, Lb6Backend, Lb6Key, Lb6ReverseNat,
    LbAffinityMatch,
};
use abi::Be16;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Retired backends kept per service for connections still using them.
const MAX_RETIRED: usize = 64;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LbError {
    #[error("invalid service ID 0")]
    InvalidId,
    #[error("invalid frontend {0}: port must not be 0")]
    InvalidFrontend(String),
    #[error("frontend {frontend} already belongs to service {owner}")]
    FrontendTaken { frontend: String, owner: u16 },
    #[error("service {0} not found")]
    NotFound(u16),
    #[error("backend {backend} is not of frontend {frontend}'s address family")]
    FamilyMismatch { frontend: String, backend: String },
}

/// An address family: which of the family's maps an entry goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }
}

/// A key of `cilium_lb4_services_v2` or `cilium_lb6_services_v2` (whose
/// values have one layout, `Lb4Service`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ServiceKey {
    V4(Lb4Key),
    V6(Lb6Key),
}

impl ServiceKey {
    fn new(f: &Frontend, slot: u16) -> Self {
        match f.ip {
            IpAddr::V4(ip) => ServiceKey::V4(Lb4Key::new(ip, f.port, f.proto, slot, f.scope)),
            IpAddr::V6(ip) => ServiceKey::V6(Lb6Key::new(ip, f.port, f.proto, slot, f.scope)),
        }
    }

    pub fn backend_slot(&self) -> u16 {
        match self {
            ServiceKey::V4(k) => k.backend_slot,
            ServiceKey::V6(k) => k.backend_slot,
        }
    }

    /// The frontend's address and port.
    pub fn frontend(&self) -> (IpAddr, u16) {
        match self {
            ServiceKey::V4(k) => (k.address.ip().into(), k.dport.get()),
            ServiceKey::V6(k) => (k.address.ip().into(), k.dport.get()),
        }
    }

    pub fn family(&self) -> Family {
        Family::of(self.frontend().0)
    }
}

/// A value of `cilium_lb4_backends_v3` or `cilium_lb6_backends_v3`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendEntry {
    V4(Lb4Backend),
    V6(Lb6Backend),
}

impl BackendEntry {
    /// The backend's address and port.
    pub fn address(&self) -> (IpAddr, u16) {
        match self {
            BackendEntry::V4(b) => (b.address.ip().into(), b.port.get()),
            BackendEntry::V6(b) => (b.address.ip().into(), b.port.get()),
        }
    }

    pub fn family(&self) -> Family {
        Family::of(self.address().0)
    }
}

/// A value of `cilium_lb4_reverse_nat` or `cilium_lb6_reverse_nat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RevNatEntry {
    V4(Lb4ReverseNat),
    V6(Lb6ReverseNat),
}

impl RevNatEntry {
    pub fn family(&self) -> Family {
        match self {
            RevNatEntry::V4(_) => Family::V4,
            RevNatEntry::V6(_) => Family::V6,
        }
    }
}

/// A service as a caller asks for it (Cilium's REST `ServiceSpec`, parsed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceSpec {
    pub id: u16,
    pub frontend: Frontend,
    pub kind: ServiceType,
    pub backends: Vec<(IpAddr, u16, BackendState)>,
    pub affinity_timeout: u32,
    /// externalTrafficPolicy Local: clients from outside the cluster get
    /// only this node's backends (which the caller gives) and keep their
    /// address.
    pub ext_local: bool,
    /// A HostPort for a loopback hostIP (its frontend is 0.0.0.0): only
    /// the node's own connections to loopback reach it.
    pub loopback: bool,
}

/// Map changes, to be applied in field order: backends exist before a slot
/// names them, slots before the service entry counts them, and nothing is
/// deleted until its replacement is in place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Update {
    pub put_backends: Vec<(u32, BackendEntry)>,
    pub put_services: Vec<(ServiceKey, Lb4Service)>,
    pub put_rev_nat: Vec<(Be16, RevNatEntry)>,
    pub put_affinity_match: Vec<LbAffinityMatch>,
    /// Maglev tables by rev-NAT index (services reached from outside).
    pub put_maglev: Vec<(Family, Be16, Vec<u32>)>,
    pub del_maglev: Vec<(Family, Be16)>,
    pub del_services: Vec<ServiceKey>,
    pub del_rev_nat: Vec<(Family, Be16)>,
    pub del_affinity_match: Vec<LbAffinityMatch>,
    pub del_backends: Vec<(Family, u32)>,
}

impl Update {
    /// Whether any change is of `family`'s maps (an IPv4-only node has no
    /// IPv6 ones).
    pub fn touches(&self, family: Family) -> bool {
        let tagged = |f: Family| f == family;
        self.put_backends.iter().any(|(_, b)| tagged(b.family()))
            || self.put_services.iter().any(|(k, _)| tagged(k.family()))
            || self.del_services.iter().any(|k| tagged(k.family()))
            || self.put_rev_nat.iter().any(|(_, r)| tagged(r.family()))
            || self.del_rev_nat.iter().any(|(f, _)| tagged(*f))
            || self.put_maglev.iter().any(|(f, _, _)| tagged(*f))
            || self.del_maglev.iter().any(|(f, _)| tagged(*f))
            || self.del_backends.iter().any(|(f, _)| tagged(*f))
    }
}

/// The affinity-match entries of a service with session affinity: one per
/// active backend.
fn affinity_matches(svc: &Service) -> Vec<LbAffinityMatch> {
    if svc.affinity_timeout == 0 {
        return Vec::new();
    }
    svc.active()
        .map(|b| LbAffinityMatch {
            backend_id: b.id,
            rev_nat_id: Be16::new(svc.id),
            pad: 0,
        })
        .collect()
}

/// How Maglev tables are built: their size and murmur3 seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaglevConfig {
    pub table_size: u64,
    pub seed: u32,
}

#[derive(Default)]
pub struct LoadBalancer {
    services: BTreeMap<u16, Service>,
    /// Build Maglev tables for services reached from outside the cluster.
    maglev: Option<MaglevConfig>,
    backend_ids: BTreeMap<(IpAddr, u16), u32>,
    /// Backend IDs only grow, so a conntrack entry never finds its backend
    /// ID given to another address.
    next_backend_id: u32,
}

fn backend_entry(b: &Backend) -> BackendEntry {
    let (port, flags) = (Be16::new(b.port), b.state.map_flags());
    match b.ip {
        IpAddr::V4(ip) => BackendEntry::V4(Lb4Backend {
            address: ip.into(),
            port,
            flags,
            ..Default::default()
        }),
        IpAddr::V6(ip) => BackendEntry::V6(Lb6Backend {
            address: ip.into(),
            port,
            flags,
            ..Default::default()
        }),
    }
}

fn rev_nat_entry(f: &Frontend) -> RevNatEntry {
    let port = Be16::new(f.port);
    match f.ip {
        IpAddr::V4(ip) => RevNatEntry::V4(Lb4ReverseNat {
            address: ip.into(),
            port,
        }),
        IpAddr::V6(ip) => RevNatEntry::V6(Lb6ReverseNat {
            address: ip.into(),
            port,
        }),
    }
}

/// Every key a service occupies: its entry and one per backend slot.
fn keys(svc: &Service) -> Vec<ServiceKey> {
    (0..=svc.backends.len() as u16)
        .map(|slot| ServiceKey::new(&svc.frontend, slot))
        .collect()
}

impl LoadBalancer {
    pub fn new() -> Self {
        Self {
            next_backend_id: 1,
            ..Default::default()
        }
    }

    /// A load balancer that also keeps Maglev tables (`bpf-lb-algorithm=maglev`).
    pub fn with_maglev(maglev: MaglevConfig) -> Self {
        Self {
            maglev: Some(maglev),
            ..Self::new()
        }
    }

    /// The service's Maglev table, when it gets one: with Maglev on, for a
    /// service reached from outside (as in Cilium, ClusterIPs are picked at
    /// random by the pods' datapath) that has active backends.
    fn maglev_table(&self, svc: &Service) -> Option<Vec<u32>> {
        let cfg = self.maglev?;
        if svc.kind == ServiceType::ClusterIP || svc.active().next().is_none() {
            return None;
        }
        let named: Vec<(String, u32)> = svc.active().map(|b| (b.name(), b.id)).collect();
        Some(crate::maglev::lookup_table(
            &named,
            cfg.table_size,
            cfg.seed,
        ))
    }

    /// Takes back a backend ID found in the maps of a previous run, so
    /// flows pinned to it keep their backend.
    pub fn seed_backend(&mut self, id: u32, ip: IpAddr, port: u16) {
        self.backend_ids.entry((ip, port)).or_insert(id);
        self.next_backend_id = self.next_backend_id.max(id + 1);
    }

    pub fn list(&self) -> Vec<&Service> {
        self.services.values().collect()
    }

    pub fn get(&self, id: u16) -> Option<&Service> {
        self.services.get(&id)
    }

    fn referenced(&self, id: u32) -> bool {
        self.services
            .values()
            .any(|s| s.backends.iter().chain(&s.retired).any(|b| b.id == id))
    }

    fn backend_id(&mut self, ip: IpAddr, port: u16) -> u32 {
        if let Some(id) = self.backend_ids.get(&(ip, port)) {
            return *id;
        }
        let id = self.next_backend_id;
        self.next_backend_id += 1;
        self.backend_ids.insert((ip, port), id);
        id
    }

    /// Forgets backends no service references any more; returns them.
    fn collect_backends(&mut self, candidates: &[(Family, u32)]) -> Vec<(Family, u32)> {
        let gone: Vec<(Family, u32)> = candidates
            .iter()
            .copied()
            .filter(|(_, id)| !self.referenced(*id))
            .collect();
        self.backend_ids
            .retain(|_, id| !gone.iter().any(|(_, g)| g == id));
        gone
    }

    /// Creates or replaces a service. Returns the map changes and whether
    /// the service is new.
    pub fn upsert(&mut self, spec: &ServiceSpec) -> Result<(Update, bool), LbError> {
        if spec.id == 0 {
            return Err(LbError::InvalidId);
        }
        if spec.frontend.port == 0 {
            return Err(LbError::InvalidFrontend(spec.frontend.to_string()));
        }
        if let Some(owner) = self
            .services
            .values()
            .find(|s| s.frontend == spec.frontend && s.id != spec.id)
        {
            return Err(LbError::FrontendTaken {
                frontend: spec.frontend.to_string(),
                owner: owner.id,
            });
        }
        let family = Family::of(spec.frontend.ip);
        if let Some((ip, port, _)) = spec
            .backends
            .iter()
            .find(|(ip, ..)| Family::of(*ip) != family)
        {
            return Err(LbError::FamilyMismatch {
                frontend: spec.frontend.to_string(),
                backend: crate::service::host_port(*ip, *port),
            });
        }
        let old = self.services.remove(&spec.id);
        let mut backends: Vec<Backend> = Vec::new();
        for (ip, port, state) in &spec.backends {
            if backends.iter().any(|b| b.ip == *ip && b.port == *port) {
                continue;
            }
            let id = self.backend_id(*ip, *port);
            backends.push(Backend {
                id,
                ip: *ip,
                port: *port,
                state: *state,
                preferred: false,
            });
        }
        backends.sort_by_key(|b| (b.state != BackendState::Active, !b.preferred, b.id));

        let mut retired: Vec<Backend> = Vec::new();
        if let Some(old) = &old {
            for b in old.backends.iter().chain(&old.retired) {
                if !backends.iter().any(|n| n.id == b.id) && !retired.iter().any(|r| r.id == b.id) {
                    retired.push(Backend {
                        state: BackendState::Terminating,
                        ..b.clone()
                    });
                }
            }
        }
        let dropped: Vec<(Family, u32)> = if retired.len() > MAX_RETIRED {
            retired
                .drain(..retired.len() - MAX_RETIRED)
                .map(|b| (Family::of(b.ip), b.id))
                .collect()
        } else {
            Vec::new()
        };
        let svc = Service {
            id: spec.id,
            frontend: spec.frontend,
            kind: spec.kind,
            backends,
            affinity_timeout: spec.affinity_timeout,
            ext_local: spec.ext_local,
            loopback: spec.loopback,
            retired,
        };

        let mut up = Update::default();
        let rev_nat = Be16::new(svc.id);
        for b in svc.backends.iter().chain(&svc.retired) {
            up.put_backends.push((b.id, backend_entry(b)));
        }
        let f = svc.frontend;
        for (i, b) in svc.backends.iter().enumerate() {
            let key = ServiceKey::new(&f, i as u16 + 1);
            let value = Lb4Service {
                backend_id: b.id,
                rev_nat_index: rev_nat,
                ..Default::default()
            };
            up.put_services.push((key, value));
        }
        let (flags, flags2) = svc.map_flags();
        let master = Lb4Service {
            backend_id: svc.affinity_timeout,
            count: svc.active().count() as u16,
            rev_nat_index: rev_nat,
            flags,
            flags2,
            ..Default::default()
        };
        up.put_services.push((ServiceKey::new(&f, 0), master));
        up.put_rev_nat.push((rev_nat, rev_nat_entry(&f)));
        up.put_affinity_match = affinity_matches(&svc);
        match self.maglev_table(&svc) {
            Some(table) => up.put_maglev.push((family, rev_nat, table)),
            None if self.maglev.is_some() => up.del_maglev.push((family, rev_nat)),
            None => {}
        }
        if let Some(old) = &old {
            let now = keys(&svc);
            up.del_services = keys(old).into_iter().filter(|k| !now.contains(k)).collect();
            up.del_affinity_match = affinity_matches(old)
                .into_iter()
                .filter(|m| !up.put_affinity_match.contains(m))
                .collect();
        }
        let created = old.is_none();
        let mut candidates = dropped;
        if let Some(old) = &old {
            candidates.extend(backend_refs(old));
            // a frontend of the other family leaves that family's maps
            let old_family = Family::of(old.frontend.ip);
            if old_family != family {
                up.del_rev_nat.push((old_family, rev_nat));
                if self.maglev.is_some() {
                    up.del_maglev.push((old_family, rev_nat));
                }
            }
        }
        self.services.insert(svc.id, svc);
        up.del_backends = self.collect_backends(&candidates);
        Ok((up, created))
    }

    pub fn delete(&mut self, id: u16) -> Result<Update, LbError> {
        let old = self.services.remove(&id).ok_or(LbError::NotFound(id))?;
        let family = Family::of(old.frontend.ip);
        let candidates = backend_refs(&old);
        Ok(Update {
            del_services: keys(&old),
            del_rev_nat: vec![(family, Be16::new(id))],
            del_affinity_match: affinity_matches(&old),
            del_maglev: if self.maglev.is_some() {
                vec![(family, Be16::new(id))]
            } else {
                Vec::new()
            },
            del_backends: self.collect_backends(&candidates),
            ..Default::default()
        })
    }

    /// The deletions that leave in the maps only what this load balancer's
    /// services occupy: entries a previous run left for services that went
    /// away while no agent was watching. Backend IDs of those are forgotten
    /// too, but never handed out again.
    pub fn stale(&mut self, found: &MapKeys) -> Update {
        use std::collections::HashSet;
        let svcs: Vec<&Service> = self.services.values().collect();
        let owned_keys: HashSet<ServiceKey> = svcs.iter().flat_map(|s| keys(s)).collect();
        let of = |s: &Service| (Family::of(s.frontend.ip), Be16::new(s.id));
        let owned_ids: HashSet<(Family, Be16)> = svcs.iter().map(|s| of(s)).collect();
        let owned_maglev: HashSet<(Family, Be16)> = svcs
            .iter()
            .filter(|s| self.maglev_table(s).is_some())
            .map(|s| of(s))
            .collect();
        let owned_matches: HashSet<LbAffinityMatch> =
            svcs.iter().flat_map(|s| affinity_matches(s)).collect();
        let owned_backends: HashSet<(Family, u32)> =
            svcs.iter().flat_map(|s| backend_refs(s)).collect();
        let mut update = Update {
            del_services: found
                .services
                .iter()
                .filter(|k| !owned_keys.contains(k))
                .copied()
                .collect(),
            del_rev_nat: found
                .rev_nat
                .iter()
                .filter(|k| !owned_ids.contains(k))
                .copied()
                .collect(),
            del_maglev: found
                .maglev
                .iter()
                .filter(|k| !owned_maglev.contains(k))
                .copied()
                .collect(),
            del_affinity_match: found
                .affinity_match
                .iter()
                .filter(|k| !owned_matches.contains(k))
                .copied()
                .collect(),
            del_backends: found
                .backends
                .iter()
                .filter(|id| !owned_backends.contains(id))
                .copied()
                .collect(),
            ..Default::default()
        };
        // a service entry goes before its slots, so the datapath never
        // counts a slot that is gone
        update.del_services.sort_by_key(ServiceKey::backend_slot);
        self.backend_ids
            .retain(|(ip, _), id| owned_backends.contains(&(Family::of(*ip), *id)));
        update
    }
}

/// The keys found in the LB maps, for [`LoadBalancer::stale`].
#[derive(Clone, Debug, Default)]
pub struct MapKeys {
    pub services: Vec<ServiceKey>,
    pub rev_nat: Vec<(Family, Be16)>,
    pub maglev: Vec<(Family, Be16)>,
    pub affinity_match: Vec<LbAffinityMatch>,
    pub backends: Vec<(Family, u32)>,
}

/// The backends a service's entries name, with their family's map.
fn backend_refs(svc: &Service) -> Vec<(Family, u32)> {
    svc.backends
        .iter()
        .chain(&svc.retired)
        .map(|b| (Family::of(b.ip), b.id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi::lb::LB_LOOKUP_SCOPE_EXT;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn spec(id: u16, backends: &[&str]) -> ServiceSpec {
        ServiceSpec {
            id,
            frontend: Frontend {
                ip: ip("172.16.16.87"),
                port: 80,
                proto: abi::lb::PROTO_ANY,
                scope: LB_LOOKUP_SCOPE_EXT,
            },
            kind: ServiceType::ClusterIP,
            backends: backends
                .iter()
                .map(|b| (ip(b), 8080, BackendState::Active))
                .collect(),
            affinity_timeout: 0,
            ext_local: false,
            loopback: false,
        }
    }

    #[test]
    fn a_service_becomes_slots_a_counted_entry_and_rev_nat() {
        let mut lb = LoadBalancer::new();
        let (up, created) = lb.upsert(&spec(5, &["10.2.0.2", "10.3.0.2"])).unwrap();
        assert!(created);
        assert_eq!(up.put_backends.len(), 2);
        assert_eq!(up.put_services.len(), 3);
        let (key, master) = up.put_services.last().unwrap();
        assert_eq!(key.backend_slot(), 0);
        assert_eq!(master.count, 2);
        assert_eq!(master.rev_nat_index, Be16::new(5));
        assert_eq!(up.put_services[0].1.backend_id, 1);
        assert_eq!(up.put_services[1].1.backend_id, 2);
        assert_eq!(
            up.put_rev_nat,
            vec![(
                Be16::new(5),
                RevNatEntry::V4(Lb4ReverseNat {
                    address: std::net::Ipv4Addr::new(172, 16, 16, 87).into(),
                    port: Be16::new(80)
                })
            )]
        );
        assert_eq!(lb.get(5).unwrap().flags_string(), "ClusterIP, non-routable");
    }

    #[test]
    fn removed_backends_retire_as_terminating_and_stale_slots_go() {
        let mut lb = LoadBalancer::new();
        lb.upsert(&spec(5, &["10.2.0.2", "10.3.0.2"])).unwrap();
        let (up, created) = lb.upsert(&spec(5, &["10.3.0.2"])).unwrap();
        assert!(!created);
        let retired = up.put_backends.iter().find(|(id, _)| *id == 1).unwrap();
        assert!(
            matches!(retired.1, BackendEntry::V4(b) if b.flags == abi::lb::BE_STATE_TERMINATING),
            "{retired:?}"
        );
        assert_eq!(up.put_services.last().unwrap().1.count, 1);
        assert_eq!(up.put_services[0].1.backend_id, 2);
        assert_eq!(up.del_services.len(), 1, "slot 2 is gone");
        assert!(
            up.del_backends.is_empty(),
            "kept for established connections"
        );
        let up = lb.delete(5).unwrap();
        assert_eq!(up.del_services.len(), 2);
        assert_eq!(up.del_backends.len(), 2);
        assert_eq!(lb.delete(5), Err(LbError::NotFound(5)));
    }

    #[test]
    fn shared_backends_keep_one_id_and_frontends_are_exclusive() {
        let mut lb = LoadBalancer::new();
        lb.upsert(&spec(1, &["10.2.0.2"])).unwrap();
        let mut other = spec(2, &["10.2.0.2"]);
        assert!(matches!(
            lb.upsert(&other),
            Err(LbError::FrontendTaken { owner: 1, .. })
        ));
        other.frontend.port = 443;
        let (up, _) = lb.upsert(&other).unwrap();
        assert_eq!(up.put_backends[0].0, 1, "same address, same backend ID");
        assert!(
            lb.delete(1).unwrap().del_backends.is_empty(),
            "service 2 still uses it"
        );
        assert_eq!(lb.upsert(&spec(0, &[])), Err(LbError::InvalidId));
    }

    #[test]
    fn session_affinity_matches_follow_the_active_backends() {
        let mut lb = LoadBalancer::new();
        let mut s = spec(4, &["10.2.0.2", "10.3.0.2"]);
        s.affinity_timeout = 30;
        let (up, _) = lb.upsert(&s).unwrap();
        assert_eq!(up.put_affinity_match.len(), 2);
        assert_eq!(
            up.put_services.last().unwrap().1.backend_id,
            30,
            "timeout in the service entry"
        );
        assert_eq!(
            lb.get(4).unwrap().flags_string(),
            "ClusterIP, sessionAffinity, non-routable"
        );
        s.backends.pop();
        let (up, _) = lb.upsert(&s).unwrap();
        assert_eq!(up.del_affinity_match.len(), 1);
        let gone = up.del_affinity_match[0].backend_id;
        assert_eq!(gone, 2);
        assert_eq!(lb.delete(4).unwrap().del_affinity_match.len(), 1);
    }

    #[test]
    fn maglev_tables_are_kept_for_services_reached_from_outside() {
        let mut lb = LoadBalancer::with_maglev(MaglevConfig {
            table_size: 251,
            seed: 7,
        });
        let (up, _) = lb.upsert(&spec(1, &["10.2.0.2"])).unwrap();
        assert!(
            up.put_maglev.is_empty(),
            "ClusterIP: random in the pods' datapath"
        );
        let mut np = spec(2, &["10.2.0.2", "10.3.0.2"]);
        np.kind = ServiceType::NodePort;
        np.frontend.port = 30080;
        let (up, _) = lb.upsert(&np).unwrap();
        let (family, key, table) = &up.put_maglev[0];
        assert_eq!((*family, *key), (Family::V4, Be16::new(2)));
        assert_eq!(table.len(), 251);
        assert!(table.iter().all(|id| [1, 2].contains(id)));
        np.backends.clear();
        let (up, _) = lb.upsert(&np).unwrap();
        let v4 = (Family::V4, Be16::new(2));
        assert_eq!(up.del_maglev, vec![v4], "no backends, no table");
        assert_eq!(lb.delete(2).unwrap().del_maglev, vec![v4]);
    }

    #[test]
    fn inactive_backends_follow_the_active_ones_uncounted() {
        let mut lb = LoadBalancer::new();
        let mut s = spec(3, &["10.2.0.2", "10.3.0.2"]);
        s.backends[0].2 = BackendState::Maintenance;
        let (up, _) = lb.upsert(&s).unwrap();
        assert_eq!(up.put_services[0].1.backend_id, 2, "active first");
        assert_eq!(up.put_services[1].1.backend_id, 1);
        assert_eq!(up.put_services.last().unwrap().1.count, 1);
    }

    #[test]
    fn stale_removes_what_no_service_occupies_and_keeps_ids_growing() {
        // A previous run had services 1 and 2; only 1 came back.
        let mut before = LoadBalancer::new();
        let (a, _) = before.upsert(&spec(1, &["10.0.0.1", "10.0.0.2"])).unwrap();
        let mut other = spec(2, &["10.0.0.3"]);
        other.frontend.ip = ip("172.16.16.88");
        let (b, _) = before.upsert(&other).unwrap();
        let found = MapKeys {
            services: a
                .put_services
                .iter()
                .chain(&b.put_services)
                .map(|(k, _)| *k)
                .collect(),
            rev_nat: a
                .put_rev_nat
                .iter()
                .chain(&b.put_rev_nat)
                .map(|(k, _)| (Family::V4, *k))
                .collect(),
            backends: a
                .put_backends
                .iter()
                .chain(&b.put_backends)
                .map(|(id, _)| (Family::V4, *id))
                .collect(),
            ..Default::default()
        };
        let mut lb = LoadBalancer::new();
        for (&(ip, port), &id) in &before.backend_ids {
            lb.seed_backend(id, ip, port);
        }
        lb.upsert(&spec(1, &["10.0.0.1", "10.0.0.2"])).unwrap();
        let up = lb.stale(&found);
        assert_eq!(up.del_services, keys(before.get(2).unwrap()));
        assert_eq!(up.del_rev_nat, vec![(Family::V4, Be16::new(2))]);
        assert_eq!(up.del_backends, vec![(Family::V4, 3)]);
        assert!(up.put_services.is_empty() && up.put_backends.is_empty());
        // 10.0.0.3 comes back later: a new ID, not the one conntrack may
        // still hold for the deleted service.
        let (again, _) = lb.upsert(&other).unwrap();
        assert_eq!(again.put_backends[0].0, 4);
    }

    #[test]
    fn an_ipv6_service_fills_the_lb6_maps_and_refuses_ipv4_backends() {
        let mut lb = LoadBalancer::new();
        let mut s = spec(7, &[]);
        s.frontend.ip = ip("fd00:96::20");
        s.backends = vec![(ip("fd00::103"), 80, BackendState::Active)];
        let (up, _) = lb.upsert(&s).unwrap();
        assert!(
            matches!(up.put_backends[..], [(1, BackendEntry::V6(b))] if b.address.ip() == ip("fd00::103"))
        );
        assert!(up
            .put_services
            .iter()
            .all(|(k, _)| matches!(k, ServiceKey::V6(_))));
        assert!(
            matches!(up.put_rev_nat[..], [(_, RevNatEntry::V6(r))] if r.address.ip() == ip("fd00:96::20"))
        );
        assert!(up.touches(Family::V6) && !up.touches(Family::V4));
        assert_eq!(lb.get(7).unwrap().frontend.to_string(), "[fd00:96::20]:80");
        // its backend has a place among the IPv4 ones' IDs
        let (up4, _) = lb.upsert(&spec(8, &["10.2.0.2"])).unwrap();
        assert_eq!(up4.put_backends[0].0, 2);

        s.backends.push((ip("10.2.0.9"), 80, BackendState::Active));
        let e = lb.upsert(&s).unwrap_err();
        assert!(matches!(e, LbError::FamilyMismatch { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            "backend 10.2.0.9:80 is not of frontend [fd00:96::20]:80's address family"
        );
        let gone = lb.delete(7).unwrap();
        assert_eq!(gone.del_rev_nat, vec![(Family::V6, Be16::new(7))]);
        assert_eq!(gone.del_backends, vec![(Family::V6, 1)]);
    }
}
