//! Services from Kubernetes: each Service's ClusterIPs (one of each
//! family on a dual-stack Service) and ports, with the addresses of its
//! EndpointSlices of the same family as backends, realized by the service
//! subsystem. Services and slices are joined here, so a change of either
//! re-derives the services it touches; the whole desired set is then
//! brought about by adding, changing and removing services, after both
//! initial lists are in (a restarted agent changes no LB entry before).

use crate::k8s::connection::Kubernetes;
use api::service::{BackendAddress, FrontendAddress, L4Protocol, ServiceSpec, ServiceSpecFlags};
use controlplane::services::Services;
use controlplane::tasks::Tasks;
use k8s::k8s_openapi::api::discovery::v1::{EndpointConditions, EndpointPort};
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;
use watch::{Event, Source};

/// The label naming a slice's Service.
const SERVICE_NAME: &str = "kubernetes.io/service-name";
/// Cilium 1.16's selectors: no headless Services, none for another proxy,
/// no slices of Cilium's cluster mesh.
const SERVICE_SELECTOR: &str =
    "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";
const SLICE_SELECTOR: &str = "endpointslice.kubernetes.io/managed-by!=endpointslice-mesh-controller.cilium.io,!service.kubernetes.io/headless";
/// Session affinity's timeout when the Service names none (Kubernetes' default).
const DEFAULT_AFFINITY_SECS: u32 = 10800;

/// A Service as this follower keeps it (see `k8s::slim`): what makes its
/// frontends, none of its status, annotations or managed fields.
#[derive(Clone, Debug, Deserialize)]
struct Service {
    #[serde(deserialize_with = "k8s::slim::meta")]
    metadata: ObjectMeta,
    spec: Option<KubeServiceSpec>,
}
k8s::slim_resource!(Service, k8s::k8s_openapi::api::core::v1::Service);

/// The fields of a Service's spec that make its frontends.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KubeServiceSpec {
    #[serde(rename = "clusterIP")]
    cluster_ip: Option<String>,
    #[serde(rename = "clusterIPs")]
    cluster_ips: Option<Vec<String>>,
    #[serde(rename = "type")]
    type_: Option<String>,
    external_traffic_policy: Option<String>,
    internal_traffic_policy: Option<String>,
    session_affinity: Option<String>,
    session_affinity_config: Option<k8s::k8s_openapi::api::core::v1::SessionAffinityConfig>,
    ports: Option<Vec<KubeServicePort>>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KubeServicePort {
    name: Option<String>,
    protocol: Option<String>,
    port: i32,
    node_port: Option<i32>,
}

/// An EndpointSlice as this follower keeps it: its endpoints' addresses,
/// conditions and nodes, without their hints, zones and target objects.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndpointSlice {
    #[serde(deserialize_with = "k8s::slim::meta")]
    metadata: ObjectMeta,
    address_type: String,
    // `null` when the slice has none
    endpoints: Option<Vec<Endpoint>>,
    ports: Option<Vec<EndpointPort>>,
}
k8s::slim_resource!(
    EndpointSlice,
    k8s::k8s_openapi::api::discovery::v1::EndpointSlice
);

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Endpoint {
    #[serde(default)]
    addresses: Vec<String>,
    conditions: Option<EndpointConditions>,
    node_name: Option<String>,
}

/// The name of the Service a slice belongs to.
fn service_of(slice: &EndpointSlice) -> Option<&String> {
    slice.labels().get(SERVICE_NAME)
}

/// A frontend: ClusterIP (or 0.0.0.0 / :: for a NodePort), port, protocol
/// number, and whether it is the internal scope's. A Service's TCP and UDP
/// ports of one number are two frontends.
pub(crate) type Frontend = (String, u16, u8, bool);

/// What of a Service this node realizes: the ClusterIPs of the families
/// the agent runs (`enable-ipv4`, `enable-ipv6`; Cilium skips a family it
/// has no datapath for), NodePorts only with kube-proxy replacement
/// (`enable-node-port`), and for `externalTrafficPolicy: Local` only the
/// backends on this node behind them.
#[derive(Clone, Debug)]
pub struct Scope {
    pub node_name: String,
    pub node_port: bool,
    pub ipv4: bool,
    pub ipv6: bool,
}

impl Scope {
    fn serves(&self, ip: &IpAddr) -> bool {
        match ip {
            IpAddr::V4(_) => self.ipv4,
            IpAddr::V6(_) => self.ipv6,
        }
    }
}

/// The `addressType` of the slices whose endpoints back a frontend at `ip`.
fn address_type(ip: &IpAddr) -> &'static str {
    match ip {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(_) => "IPv6",
    }
}

/// The ClusterIPs of a Service this node serves: each of `clusterIPs`
/// (only `clusterIP` on objects from before dual-stack), none of a headless
/// Service (`None` is no address).
fn cluster_ips(spec: &KubeServiceSpec, scope: &Scope) -> Vec<IpAddr> {
    let listed = spec.cluster_ips.as_deref().unwrap_or_default();
    let ips: Vec<&String> = if listed.is_empty() {
        spec.cluster_ip.iter().collect()
    } else {
        listed.iter().collect()
    };
    ips.into_iter()
        .filter_map(|ip| ip.parse::<IpAddr>().ok())
        .filter(|ip| scope.serves(ip))
        .collect()
}

/// The backends of one Service port, from its slices of `address_type`
/// (the frontend's family; FQDN slices back nothing): ready endpoints are
/// active, serving and terminating ones keep their connections
/// (`terminating`), the others are left out; only those on node `local`
/// when it is given.
fn backends(
    port_name: &str,
    slices: &[&EndpointSlice],
    local: Option<&str>,
    address_type: &str,
) -> Vec<BackendAddress> {
    let mut out: BTreeSet<(String, u16, &'static str)> = BTreeSet::new();
    for slice in slices {
        if slice.address_type != address_type {
            continue;
        }
        let Some(port) = slice
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref().unwrap_or("") == port_name)
            .and_then(|p| p.port)
        else {
            continue;
        };
        for ep in slice.endpoints.iter().flatten() {
            if local.is_some_and(|node| ep.node_name.as_deref() != Some(node)) {
                continue;
            }
            let c = ep.conditions.as_ref();
            let ready = c.and_then(|c| c.ready).unwrap_or(true);
            let serving = c.and_then(|c| c.serving).unwrap_or(ready);
            let terminating = c.and_then(|c| c.terminating).unwrap_or(false);
            let state = match (ready, serving && terminating) {
                (true, _) => "active",
                (false, true) => "terminating",
                (false, false) => continue,
            };
            for addr in &ep.addresses {
                out.insert((addr.clone(), port as u16, state));
            }
        }
    }
    out.into_iter()
        .map(|(ip, port, state)| BackendAddress {
            ip,
            port,
            state: state.into(),
            ..Default::default()
        })
        .collect()
}

/// The frontends Service `svc` makes, each with its spec (no ID yet),
/// backed by `own_slices` (its slices), into `out`.
fn derive(
    svc: &Service,
    own_slices: &[&EndpointSlice],
    scope: &Scope,
    out: &mut BTreeMap<Frontend, ServiceSpec>,
) {
    let Some(spec) = &svc.spec else { return };
    let ips = cluster_ips(spec, scope);
    if ips.is_empty() {
        return;
    }
    // A NodePort has one wildcard frontend per family the Service has
    // a ClusterIP of (Cilium's surrogate frontends); `ipFamilies[i]`
    // is `clusterIPs[i]`'s family, so the addresses say it.
    let mut wildcards: Vec<IpAddr> = ips
        .iter()
        .map(|ip| match ip {
            IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        })
        .collect();
    wildcards.sort();
    wildcards.dedup();
    let affinity = match spec.session_affinity.as_deref() {
        Some("ClientIP") => spec
            .session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .map_or(DEFAULT_AFFINITY_SECS, |t| t as u32),
        _ => 0,
    };
    let (ns, name) = (svc.namespace().unwrap_or_default(), svc.name_any());
    let node_ports =
        scope.node_port && matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer"));
    let local = (spec.external_traffic_policy.as_deref() == Some("Local"))
        .then_some(scope.node_name.as_str());
    // internalTrafficPolicy Local: the ClusterIP leads to this node's
    // backends only (as the hubble-peer Service wants its agent)
    let internal_local = (spec.internal_traffic_policy.as_deref() == Some("Local"))
        .then_some(scope.node_name.as_str());
    for port in spec.ports.iter().flatten() {
        let port_name = port.name.clone().unwrap_or_default();
        let Some(protocol) = L4Protocol::from_kubernetes(port.protocol.as_deref()) else {
            continue;
        };
        let proto = protocol.number();
        // a ClusterIP kept local is internalTrafficPolicy's doing: its
        // backends say it all, the datapath needs no flag for it; a
        // NodePort kept local is externalTrafficPolicy's
        let spec_of =
            |(ip, port, _, internal): &Frontend, family: &str, kind: &str, local: Option<&str>| {
                let ext = if local.is_some() && kind != "ClusterIP" {
                    "Local"
                } else {
                    ""
                };
                ServiceSpec {
                    id: 0,
                    frontend_address: FrontendAddress {
                        ip: ip.clone(),
                        port: *port,
                        protocol,
                        scope: if *internal { "internal" } else { "" }.into(),
                    },
                    backend_addresses: backends(&port_name, own_slices, local, family),
                    flags: Some(ServiceSpecFlags {
                        kind: kind.into(),
                        name: name.clone(),
                        namespace: ns.clone(),
                        ext_traffic_policy: ext.into(),
                        ..Default::default()
                    }),
                    update_services: false,
                    session_affinity_timeout: affinity,
                }
            };
        for ip in &ips {
            let frontend = (ip.to_string(), port.port as u16, proto, false);
            let spec = spec_of(&frontend, address_type(ip), "ClusterIP", internal_local);
            out.insert(frontend, spec);
        }
        // A NodePort is one wildcard frontend per family; the datapath
        // matches it on every node address. With externalTrafficPolicy
        // Local, the cluster's own clients get every backend from its
        // internal scope, as Cilium gives them.
        let Some(node_port) = port.node_port.filter(|_| node_ports) else {
            continue;
        };
        for ip in &wildcards {
            let family = address_type(ip);
            let external = (ip.to_string(), node_port as u16, proto, false);
            out.insert(
                external.clone(),
                spec_of(&external, family, "NodePort", local),
            );
            if local.is_some() {
                let internal = (external.0, external.1, proto, true);
                out.insert(
                    internal.clone(),
                    spec_of(&internal, family, "NodePort", None),
                );
            }
        }
    }
}

/// Every frontend the Services and slices make, with its spec (no ID yet).
#[cfg(test)]
fn desired(
    services: &BTreeMap<String, Service>,
    slices: &BTreeMap<String, EndpointSlice>,
    scope: &Scope,
) -> BTreeMap<Frontend, ServiceSpec> {
    let mut out = BTreeMap::new();
    for svc in services.values() {
        let own: Vec<&EndpointSlice> = slices
            .values()
            .filter(|s| s.namespace() == svc.namespace() && service_of(s) == Some(&svc.name_any()))
            .collect();
        derive(svc, &own, scope, &mut out);
    }
    out
}

/// A frontend as the logs name it: `IP:port/PROTO` (`[IP]:port/PROTO` for
/// IPv6), `/i` for the internal scope (`lb::Frontend`'s form).
pub(crate) fn frontend_name((ip, port, proto, internal): &Frontend) -> String {
    let scope = if *internal { "/i" } else { "" };
    let proto = lb::proto_name(*proto);
    if ip.contains(':') {
        format!("[{ip}]:{port}/{proto}{scope}")
    } else {
        format!("{ip}:{port}/{proto}{scope}")
    }
}

pub(crate) fn frontend_of(spec: &ServiceSpec) -> Frontend {
    let f = &spec.frontend_address;
    (
        f.ip.clone(),
        f.port,
        f.protocol.number(),
        f.scope == "internal",
    )
}

/// Whether a service came from a Kubernetes Service (it is named after
/// one), not from the REST API, which keeps its own, nor from a pod's
/// hostPort (`hostports` keeps those).
fn from_kubernetes(spec: &ServiceSpec) -> bool {
    spec.flags
        .as_ref()
        .is_some_and(|f| !f.name.is_empty() && f.kind != "HostPort")
}

/// Brings the services of one source from `have` (the frontends it
/// realized, with their IDs) to `want`, in one batch: an unchanged
/// frontend keeps its ID (conntrack's reverse NAT entries name it); every
/// other service is left alone. Returns the IDs `want`'s frontends have,
/// and whether every change went in.
fn change(
    services: &Services,
    have: &BTreeMap<Frontend, i64>,
    want: BTreeMap<Frontend, ServiceSpec>,
) -> (BTreeMap<Frontend, i64>, bool) {
    let mut used: BTreeSet<i64> = services.ids().into_iter().map(i64::from).collect();
    let mut ok = true;
    let mut batch = services.batch();
    for (frontend, id) in have {
        if !want.contains_key(frontend) {
            if let Err(e) = batch.remove(*id as u16) {
                tracing::warn!(subsys = "k8s-watcher", serviceID = id, error = %e, "Unable to remove service");
                ok = false;
            }
        }
    }
    // IDs are only taken here, so the search for a free one goes on
    // from where the last one ended
    let mut free = 1..=i64::from(u16::MAX);
    let mut ids = BTreeMap::new();
    for (frontend, mut spec) in want {
        spec.id = match have.get(&frontend) {
            Some(id) => *id,
            None => match free.find(|id| !used.contains(id)) {
                Some(id) => id,
                None => {
                    tracing::warn!(subsys = "k8s-watcher", "No free service ID");
                    ok = false;
                    continue;
                }
            },
        };
        used.insert(spec.id);
        // a spec in force already changes nothing
        match batch.apply(&spec) {
            Ok(_) => {
                ids.insert(frontend, spec.id);
            }
            Err(e) => {
                tracing::warn!(subsys = "k8s-watcher", frontend = %frontend_name(&frontend), error = %e, "Unable to apply service");
                ok = false;
            }
        }
    }
    if let Err(e) = batch.finish() {
        tracing::warn!(subsys = "k8s-watcher", error = %e, "Unable to save services");
        ok = false;
    }
    (ids, ok)
}

/// The specs of the services `owned` picks (those of one source).
fn owned_specs(
    services: &Services,
    owned: impl Fn(&ServiceSpec) -> bool,
) -> impl Iterator<Item = ServiceSpec> {
    services
        .list()
        .into_iter()
        .map(|s| s.spec)
        .filter(move |spec| owned(spec))
}

/// Brings the services `owned` picks (those of one source) to `want`;
/// returns whether every change went in.
pub(crate) fn reconcile(
    services: &Services,
    want: BTreeMap<Frontend, ServiceSpec>,
    owned: impl Fn(&ServiceSpec) -> bool,
) -> bool {
    let have = owned_specs(services, owned)
        .map(|spec| (frontend_of(&spec), spec.id))
        .collect();
    change(services, &have, want).1
}

/// The key of the Service a spec of ours was made from (`namespace/name`).
fn service_key(spec: &ServiceSpec) -> String {
    let flags = spec.flags.as_ref();
    let (ns, name) = flags.map_or(("", ""), |f| (f.namespace.as_str(), f.name.as_str()));
    format!("{ns}/{name}")
}

/// The join of Services and slices, and what each Service last brought
/// about. An event re-derives only the Services it touches: derived whole
/// on each of them, a thousand Services and slices coming in meant a
/// million frontends built, compared and dropped.
#[derive(Default)]
struct Join {
    services: BTreeMap<String, Service>,
    slices: BTreeMap<String, EndpointSlice>,
    /// Each Service's slices (both `namespace/name`).
    slices_of: BTreeMap<String, BTreeSet<String>>,
    listed: [bool; 2],
    /// Services to derive again.
    dirty: BTreeSet<String>,
    /// Each Service's frontends and their IDs; None until the first
    /// derivation after a listing, which starts from the services the
    /// node has (a restarted agent's, which keep their IDs).
    realized: Option<BTreeMap<String, BTreeMap<Frontend, i64>>>,
}

impl Join {
    fn slice_service(key: &str, slice: &EndpointSlice) -> Option<String> {
        let ns = key.split_once('/').map_or("", |(ns, _)| ns);
        service_of(slice).map(|svc| format!("{ns}/{svc}"))
    }

    /// Takes slice `key` out of its Service's set, marking that dirty.
    fn unlink(&mut self, key: &str) {
        let Some(old) = self.slices.remove(key) else {
            return;
        };
        if let Some(svc) = Self::slice_service(key, &old) {
            if let Some(set) = self.slices_of.get_mut(&svc) {
                set.remove(key);
                if set.is_empty() {
                    self.slices_of.remove(&svc);
                }
            }
            self.dirty.insert(svc);
        }
    }

    fn service_event(&mut self, ev: Event<String, Service>) {
        match ev {
            Event::Upsert { key, value } => {
                self.services.insert(key.clone(), value);
                self.dirty.insert(key);
            }
            Event::Delete { key } => {
                self.services.remove(&key);
                self.dirty.insert(key);
            }
            // a new listing brings everything again
            Event::Relist => {
                self.services.clear();
                self.listed[0] = false;
                self.realized = None;
            }
            Event::ListDone => self.listed[0] = true,
        }
    }

    fn slice_event(&mut self, ev: Event<String, EndpointSlice>) {
        match ev {
            Event::Upsert { key, value } => {
                self.unlink(&key);
                if let Some(svc) = Self::slice_service(&key, &value) {
                    self.slices_of
                        .entry(svc.clone())
                        .or_default()
                        .insert(key.clone());
                    self.dirty.insert(svc);
                }
                self.slices.insert(key, value);
            }
            Event::Delete { key } => self.unlink(&key),
            Event::Relist => {
                self.slices.clear();
                self.slices_of.clear();
                self.listed[1] = false;
                self.realized = None;
            }
            Event::ListDone => self.listed[1] = true,
        }
    }

    /// Brings the dirty Services about (all of them after a listing);
    /// returns whether every change went in. A failure derives everything
    /// again on the next call.
    fn sync(&mut self, services: &Services, scope: &Scope) -> bool {
        if self.listed != [true, true] {
            return true;
        }
        let mut realized = match self.realized.take() {
            Some(r) => r,
            None => {
                let mut r: BTreeMap<String, BTreeMap<Frontend, i64>> = BTreeMap::new();
                for spec in owned_specs(services, from_kubernetes) {
                    r.entry(service_key(&spec))
                        .or_default()
                        .insert(frontend_of(&spec), spec.id);
                }
                self.dirty.extend(r.keys().cloned());
                self.dirty.extend(self.services.keys().cloned());
                r
            }
        };
        let mut have = BTreeMap::new();
        let mut want = BTreeMap::new();
        let mut owner = BTreeMap::new();
        for key in std::mem::take(&mut self.dirty) {
            have.extend(realized.remove(&key).unwrap_or_default());
            let Some(svc) = self.services.get(&key) else {
                continue;
            };
            let own: Vec<&EndpointSlice> = self
                .slices_of
                .get(&key)
                .into_iter()
                .flatten()
                .filter_map(|k| self.slices.get(k))
                .collect();
            let mut frontends = BTreeMap::new();
            derive(svc, &own, scope, &mut frontends);
            owner.extend(frontends.keys().map(|f| (f.clone(), key.clone())));
            want.extend(frontends);
        }
        if have.is_empty() && want.is_empty() {
            self.realized = Some(realized);
            return true;
        }
        let (ids, ok) = change(services, &have, want);
        if ok {
            for (frontend, id) in ids {
                if let Some(key) = owner.remove(&frontend) {
                    realized.entry(key).or_default().insert(frontend, id);
                }
            }
            self.realized = Some(realized);
        }
        ok
    }
}

/// Follows Services and EndpointSlices into `services` until the agent stops.
pub fn follow(services: Arc<Services>, scope: Scope, kubernetes: &Kubernetes, tasks: &Tasks) {
    let client = kubernetes.client();
    let mut svc_source = kubernetes.watched(
        "core/v1::Service",
        ResourceSource::new(
            "Services",
            Api::<Service>::all(client.clone()),
            watcher::Config::default().labels(SERVICE_SELECTOR),
        ),
    );
    let mut slice_source = kubernetes.watched(
        "EndpointSliceOrEndpoint",
        ResourceSource::new(
            "EndpointSlices",
            Api::<EndpointSlice>::all(client),
            watcher::Config::default().labels(SLICE_SELECTOR),
        ),
    );
    tasks.spawn("k8s-services", async move {
        let mut join = Join::default();
        let mut failed = false;
        loop {
            tokio::select! {
                ev = svc_source.next() => match ev {
                    Some(ev) => join.service_event(ev),
                    None => return,
                },
                ev = slice_source.next() => match ev {
                    Some(ev) => join.slice_event(ev),
                    None => return,
                },
                () = tokio::time::sleep(Duration::from_secs(10)), if failed => {}
            }
            failed = !join.sync(&services, &scope);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(json: serde_json::Value) -> Service {
        serde_json::from_value(json).unwrap()
    }

    fn slice(json: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn each_port_gets_its_slices_backends_by_port_name_and_condition() {
        let svc = service(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.20", "sessionAffinity": "ClientIP",
                     "ports": [{"name": "http", "port": 80}, {"name": "admin", "port": 9000}]},
        }));
        let headless = service(serde_json::json!({
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"clusterIP": "None", "ports": [{"port": 5432}]},
        }));
        let s = slice(serde_json::json!({
            "metadata": {"name": "web-abc", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}, {"name": "admin", "port": 9090}],
            "endpoints": [
                {"addresses": ["10.1.0.5"], "conditions": {"ready": true}},
                {"addresses": ["10.1.0.6"], "conditions": {"ready": false, "serving": true, "terminating": true}},
                {"addresses": ["10.1.0.7"], "conditions": {"ready": false, "serving": false}},
            ],
        }));
        let services =
            BTreeMap::from([("default/web".into(), svc), ("default/db".into(), headless)]);
        let slices = BTreeMap::from([("default/web-abc".to_string(), s)]);
        let scope = Scope {
            node_name: "node1".into(),
            node_port: true,
            ipv4: true,
            ipv6: false,
        };
        let want = desired(&services, &slices, &scope);
        assert_eq!(want.len(), 2, "the headless Service has no frontend");
        let http = &want[&("10.96.0.20".to_string(), 80, 6, false)];
        let got: Vec<(&str, u16, &str)> = http
            .backend_addresses
            .iter()
            .map(|b| (b.ip.as_str(), b.port, b.state.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("10.1.0.5", 8080, "active"),
                ("10.1.0.6", 8080, "terminating")
            ]
        );
        assert_eq!(http.session_affinity_timeout, DEFAULT_AFFINITY_SECS);
        assert_eq!(
            want[&("10.96.0.20".to_string(), 9000, 6, false)].backend_addresses[0].port,
            9090
        );
    }

    #[test]
    fn node_ports_are_wildcard_frontends_and_local_policy_keeps_this_nodes_backends() {
        let svc = |name: &str, policy: &str| {
            service(serde_json::json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"type": "NodePort", "clusterIP": format!("10.96.0.{}", name.len()),
                         "externalTrafficPolicy": policy,
                         "ports": [{"name": "http", "port": 80, "nodePort": 30000 + name.len()}]},
            }))
        };
        let slice_of = |name: &str| {
            slice(serde_json::json!({
                "metadata": {"name": format!("{name}-1"), "namespace": "default",
                             "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080}],
                "endpoints": [
                    {"addresses": ["10.1.0.5"], "nodeName": "node1", "conditions": {"ready": true}},
                    {"addresses": ["10.2.0.5"], "nodeName": "node2", "conditions": {"ready": true}},
                ],
            }))
        };
        let services = BTreeMap::from([
            ("default/web".into(), svc("web", "Cluster")),
            ("default/local".into(), svc("local", "Local")),
        ]);
        let slices = BTreeMap::from([
            ("default/web-1".to_string(), slice_of("web")),
            ("default/local-1".to_string(), slice_of("local")),
        ]);
        let mut scope = Scope {
            node_name: "node1".into(),
            node_port: true,
            ipv4: true,
            ipv6: false,
        };
        let want = desired(&services, &slices, &scope);
        let ips = |f: (&str, u16, u8, bool)| -> Vec<String> {
            want[&(f.0.to_string(), f.1, f.2, f.3)]
                .backend_addresses
                .iter()
                .map(|b| b.ip.clone())
                .collect()
        };
        assert_eq!(ips(("0.0.0.0", 30003, 6, false)), ["10.1.0.5", "10.2.0.5"]);
        assert_eq!(
            want[&("0.0.0.0".to_string(), 30003, 6, false)]
                .flags
                .as_ref()
                .unwrap()
                .kind,
            "NodePort"
        );
        assert_eq!(
            ips(("0.0.0.0", 30005, 6, false)),
            ["10.1.0.5"],
            "Local: this node's"
        );
        let local = &want[&("0.0.0.0".to_string(), 30005, 6, false)];
        assert_eq!(local.flags.as_ref().unwrap().ext_traffic_policy, "Local");
        assert_eq!(
            ips(("0.0.0.0", 30005, 6, true)),
            ["10.1.0.5", "10.2.0.5"],
            "the cluster's own clients get them all"
        );
        assert!(!want.contains_key(&("0.0.0.0".to_string(), 30003, 6, true)));
        assert_eq!(
            ips(("10.96.0.5", 80, 6, false)),
            ["10.1.0.5", "10.2.0.5"],
            "the ClusterIP keeps them all"
        );
        scope.node_port = false;
        let want = desired(&services, &slices, &scope);
        assert_eq!(want.len(), 2, "no NodePorts without kube-proxy replacement");

        // internalTrafficPolicy Local: the ClusterIP leads to this node's
        let mut peer = svc("peer", "Cluster");
        peer.spec.as_mut().unwrap().internal_traffic_policy = Some("Local".into());
        let services = BTreeMap::from([("default/peer".into(), peer)]);
        let slices = BTreeMap::from([("default/peer-1".to_string(), slice_of("peer"))]);
        let want = desired(&services, &slices, &scope);
        let cluster_ip = &want[&("10.96.0.4".to_string(), 80, 6, false)];
        let ips: Vec<&str> = cluster_ip
            .backend_addresses
            .iter()
            .map(|b| b.ip.as_str())
            .collect();
        assert_eq!(ips, ["10.1.0.5"]);
    }

    #[test]
    fn a_dual_stack_service_has_a_frontend_per_family_backed_by_that_familys_slices() {
        let svc = service(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.30",
                     "clusterIPs": ["10.96.0.30", "fd00:96::30"],
                     "ipFamilies": ["IPv4", "IPv6"], "ipFamilyPolicy": "RequireDualStack",
                     "ports": [{"name": "http", "port": 80, "nodePort": 30080}]},
        }));
        // an IPv4-only Service beside it: no IPv6 NodePort of its own
        let v4_only = service(serde_json::json!({
            "metadata": {"name": "old", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.31", "ipFamilies": ["IPv4"],
                     "ports": [{"name": "http", "port": 80, "nodePort": 30081}]},
        }));
        let slice_of = |name: &str, family: &str, address: &str| {
            slice(serde_json::json!({
                "metadata": {"name": name, "namespace": "default",
                             "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": family,
                "ports": [{"name": "http", "port": 8080}],
                "endpoints": [{"addresses": [address], "conditions": {"ready": true}}],
            }))
        };
        let services =
            BTreeMap::from([("default/web".into(), svc), ("default/old".into(), v4_only)]);
        let slices = BTreeMap::from([
            (
                "default/web-v4".to_string(),
                slice_of("web-v4", "IPv4", "10.1.0.5"),
            ),
            (
                "default/web-v6".to_string(),
                slice_of("web-v6", "IPv6", "fd00::105"),
            ),
            (
                "default/web-fqdn".to_string(),
                slice_of("web-fqdn", "FQDN", "web.example"),
            ),
        ]);
        let mut scope = Scope {
            node_name: "node1".into(),
            node_port: true,
            ipv4: true,
            ipv6: true,
        };
        let want = desired(&services, &slices, &scope);
        let backends = |want: &BTreeMap<Frontend, ServiceSpec>, ip: &str, port: u16| {
            want[&(ip.to_string(), port, 6, false)]
                .backend_addresses
                .iter()
                .map(|b| format!("{}:{}", b.ip, b.port))
                .collect::<Vec<_>>()
        };
        let names: Vec<String> = want.keys().map(frontend_name).collect();
        assert_eq!(
            names,
            [
                "0.0.0.0:30080/TCP",
                "0.0.0.0:30081/TCP",
                "10.96.0.30:80/TCP",
                "10.96.0.31:80/TCP",
                "[::]:30080/TCP",
                "[fd00:96::30]:80/TCP",
            ]
        );
        assert_eq!(backends(&want, "10.96.0.30", 80), ["10.1.0.5:8080"]);
        assert_eq!(backends(&want, "fd00:96::30", 80), ["fd00::105:8080"]);
        assert_eq!(backends(&want, "0.0.0.0", 30080), ["10.1.0.5:8080"]);
        assert_eq!(backends(&want, "::", 30080), ["fd00::105:8080"]);
        let kind = |want: &BTreeMap<Frontend, ServiceSpec>, ip: &str, port: u16| {
            want[&(ip.to_string(), port, 6, false)]
                .flags
                .as_ref()
                .map(|f| f.kind.clone())
        };
        assert_eq!(kind(&want, "::", 30080).as_deref(), Some("NodePort"));
        assert_eq!(kind(&want, "fd00:96::30", 80).as_deref(), Some("ClusterIP"));

        // an agent without IPv6 serves only the IPv4 side
        scope.ipv6 = false;
        let want = desired(&services, &slices, &scope);
        let names: Vec<String> = want.keys().map(frontend_name).collect();
        assert_eq!(
            names,
            [
                "0.0.0.0:30080/TCP",
                "0.0.0.0:30081/TCP",
                "10.96.0.30:80/TCP",
                "10.96.0.31:80/TCP",
            ]
        );
        assert_eq!(backends(&want, "10.96.0.30", 80), ["10.1.0.5:8080"]);
    }

    #[test]
    fn objects_as_the_api_server_sends_them_are_read_without_what_is_not_used() {
        let svc = service(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default", "resourceVersion": "7",
                         "managedFields": [{"manager": "kube-apiserver", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "ipFamilies": ["IPv4"],
                     "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
                     "selector": null, "sessionAffinity": "None", "type": "ClusterIP"},
            "status": {"loadBalancer": {}},
        }));
        // a slice of a Service without endpoints says `null`
        let empty = slice(serde_json::json!({
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4", "endpoints": null, "ports": null,
        }));
        let scope = Scope {
            node_name: "node1".into(),
            node_port: false,
            ipv4: true,
            ipv6: false,
        };
        let want = desired(
            &BTreeMap::from([("default/kubernetes".into(), svc)]),
            &BTreeMap::from([("default/kubernetes".into(), empty)]),
            &scope,
        );
        let https = &want[&("10.96.0.1".to_string(), 443, 6, false)];
        assert!(https.backend_addresses.is_empty());
    }

    /// Services over an in-memory kernel, as a restarted agent would find
    /// them: a Kubernetes-made service `default/old` at ID 7.
    fn services_with_old() -> Services {
        let kernel = Arc::new(testsupport::fakes::FakeKernel::default());
        let services = Services::new(kernel.clone(), None, None, None, kernel);
        let old = ServiceSpec {
            id: 7,
            frontend_address: FrontendAddress {
                ip: "10.96.0.7".into(),
                port: 80,
                protocol: L4Protocol::Tcp,
                scope: String::new(),
            },
            flags: Some(ServiceSpecFlags {
                kind: "ClusterIP".into(),
                name: "old".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        services.apply(&old).unwrap();
        services
    }

    fn upsert<T>(key: &str, value: T) -> Event<String, T> {
        Event::Upsert {
            key: key.into(),
            value,
        }
    }

    #[test]
    fn an_event_changes_only_its_service_and_frontends_keep_their_ids() {
        let svc = |name: &str, ip: &str| {
            service(serde_json::json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80}]},
            }))
        };
        let slice_of = |svc: &str, address: &str| {
            slice(serde_json::json!({
                "metadata": {"labels": {"kubernetes.io/service-name": svc}},
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": 8080}],
                "endpoints": [{"addresses": [address]}],
            }))
        };
        let scope = Scope {
            node_name: "node1".into(),
            node_port: false,
            ipv4: true,
            ipv6: false,
        };
        let services = services_with_old();
        let backends = |ip: &str| -> Option<(i64, Vec<String>)> {
            let s = services
                .list()
                .into_iter()
                .find(|s| s.spec.frontend_address.ip == ip)?;
            let ips = s.spec.backend_addresses.iter().map(|b| b.ip.clone());
            Some((s.spec.id, ips.collect()))
        };
        let mut join = Join::default();
        join.service_event(upsert("default/old", svc("old", "10.96.0.7")));
        join.service_event(upsert("default/web", svc("web", "10.96.0.8")));
        join.slice_event(upsert("default/web-1", slice_of("web", "10.1.0.5")));
        assert!(join.sync(&services, &scope), "nothing before both lists");
        assert_eq!(backends("10.96.0.8"), None);
        join.service_event(Event::ListDone);
        join.slice_event(Event::ListDone);
        assert!(join.sync(&services, &scope));
        assert_eq!(
            backends("10.96.0.7"),
            Some((7, vec![])),
            "the restored ID is kept"
        );
        let (web_id, web) = backends("10.96.0.8").unwrap();
        assert_eq!(web, ["10.1.0.5"]);
        assert_ne!(web_id, 7);

        // a slice moving from one Service to another changes both
        join.slice_event(upsert("default/web-1", slice_of("old", "10.1.0.6")));
        assert_eq!(join.dirty.len(), 2);
        assert!(join.sync(&services, &scope));
        assert_eq!(backends("10.96.0.7"), Some((7, vec!["10.1.0.6".into()])));
        assert_eq!(backends("10.96.0.8"), Some((web_id, vec![])));

        join.service_event(Event::Delete {
            key: "default/web".into(),
        });
        assert!(join.sync(&services, &scope));
        assert_eq!(backends("10.96.0.8"), None);

        // a new listing without `old` removes it, once both lists are in
        join.service_event(Event::Relist);
        join.slice_event(Event::Relist);
        join.service_event(Event::ListDone);
        join.slice_event(Event::ListDone);
        assert!(join.sync(&services, &scope));
        assert!(services.list().is_empty());
    }

    #[test]
    fn an_ipv6_only_service_needs_ipv6_and_clusterip_alone_still_counts() {
        // an object from before dual-stack: clusterIP only, no clusterIPs
        let svc = service(serde_json::json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": "fd00:96::40", "ports": [{"name": "http", "port": 80}]},
        }));
        let services = BTreeMap::from([("default/web".into(), svc)]);
        let mut scope = Scope {
            node_name: "node1".into(),
            node_port: true,
            ipv4: true,
            ipv6: false,
        };
        assert!(desired(&services, &BTreeMap::new(), &scope).is_empty());
        scope.ipv6 = true;
        let want = desired(&services, &BTreeMap::new(), &scope);
        let names: Vec<String> = want.keys().map(frontend_name).collect();
        assert_eq!(names, ["[fd00:96::40]:80/TCP"]);
        assert_eq!(
            frontend_name(&("fd00:96::40".into(), 80, 17, true)),
            "[fd00:96::40]:80/UDP/i"
        );
    }
}
