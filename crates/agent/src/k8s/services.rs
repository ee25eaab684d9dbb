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
use k8s::k8s_openapi::api::core::v1::Service;
use k8s::k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
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
fn cluster_ips(spec: &k8s::k8s_openapi::api::core::v1::ServiceSpec, scope: &Scope) -> Vec<IpAddr> {
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
    svc_ns: &str,
    svc_name: &str,
    port_name: &str,
    slices: &BTreeMap<String, EndpointSlice>,
    local: Option<&str>,
    address_type: &str,
) -> Vec<BackendAddress> {
    let mut out: BTreeSet<(String, u16, &'static str)> = BTreeSet::new();
    for slice in slices.values() {
        if slice.namespace().as_deref() != Some(svc_ns)
            || slice.labels().get(SERVICE_NAME).map(String::as_str) != Some(svc_name)
            || slice.address_type != address_type
        {
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
        for ep in &slice.endpoints {
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

/// Every frontend the Services and slices make, with its spec (no ID yet).
fn desired(
    services: &BTreeMap<String, Service>,
    slices: &BTreeMap<String, EndpointSlice>,
    scope: &Scope,
) -> BTreeMap<Frontend, ServiceSpec> {
    let mut out = BTreeMap::new();
    for svc in services.values() {
        let Some(spec) = &svc.spec else { continue };
        let ips = cluster_ips(spec, scope);
        if ips.is_empty() {
            continue;
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
            let spec_of = |(ip, port, _, internal): &Frontend,
                           family: &str,
                           kind: &str,
                           local: Option<&str>| {
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
                    backend_addresses: backends(&ns, &name, &port_name, slices, local, family),
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
    out
}

/// The join of Services and slices, and what it last brought about.
struct Join {
    services: BTreeMap<String, Service>,
    slices: BTreeMap<String, EndpointSlice>,
    listed: [bool; 2],
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

/// Brings the services `owned` picks (those of one source) to `want`: an
/// unchanged frontend keeps its ID (conntrack's reverse NAT entries name
/// it); every other service is left alone. Returns whether every change
/// went in.
pub(crate) fn reconcile(
    services: &Services,
    want: BTreeMap<Frontend, ServiceSpec>,
    owned: impl Fn(&ServiceSpec) -> bool,
) -> bool {
    let all = services.list();
    let mut used: BTreeSet<i64> = all.iter().map(|s| s.spec.id).collect();
    let have: BTreeMap<Frontend, ServiceSpec> = all
        .into_iter()
        .filter(|s| owned(&s.spec))
        .map(|s| (frontend_of(&s.spec), s.spec))
        .collect();
    let mut ok = true;
    for (frontend, old) in &have {
        if !want.contains_key(frontend) {
            if let Err(e) = services.remove(old.id as u16) {
                tracing::warn!(subsys = "k8s-watcher", serviceID = old.id, error = %e, "Unable to remove service");
                ok = false;
            }
        }
    }
    for (frontend, mut spec) in want {
        spec.id = match have.get(&frontend) {
            Some(old) => old.id,
            None => match (1..=i64::from(u16::MAX)).find(|id| !used.contains(id)) {
                Some(id) => id,
                None => {
                    tracing::warn!(subsys = "k8s-watcher", "No free service ID");
                    ok = false;
                    continue;
                }
            },
        };
        used.insert(spec.id);
        if have.get(&frontend) == Some(&spec) {
            continue;
        }
        if let Err(e) = services.apply(&spec) {
            tracing::warn!(subsys = "k8s-watcher", frontend = %frontend_name(&frontend), error = %e, "Unable to apply service");
            ok = false;
        }
    }
    ok
}

impl Join {
    /// One event of Services (`which` 0) or slices (1).
    fn apply<T: Clone>(map: &mut BTreeMap<String, T>, listed: &mut bool, ev: Event<String, T>) {
        match ev {
            Event::Upsert { key, value } => {
                map.insert(key, value);
            }
            Event::Delete { key } => {
                map.remove(&key);
            }
            // a new listing brings everything again
            Event::Relist => {
                map.clear();
                *listed = false;
            }
            Event::ListDone => *listed = true,
        }
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
        let mut join = Join {
            services: BTreeMap::new(),
            slices: BTreeMap::new(),
            listed: [false, false],
        };
        let mut failed = false;
        loop {
            tokio::select! {
                ev = svc_source.next() => match ev {
                    Some(ev) => Join::apply(&mut join.services, &mut join.listed[0], ev),
                    None => return,
                },
                ev = slice_source.next() => match ev {
                    Some(ev) => Join::apply(&mut join.slices, &mut join.listed[1], ev),
                    None => return,
                },
                () = tokio::time::sleep(Duration::from_secs(10)), if failed => {}
            }
            if join.listed == [true, true] {
                let want = desired(&join.services, &join.slices, &scope);
                failed = !reconcile(&services, want, from_kubernetes);
            }
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
