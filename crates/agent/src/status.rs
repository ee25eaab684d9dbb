//! The status response: what the agent measured, and `Disabled` for what it
//! does not run.

use api::models::*;
use controlplane::controller::Controllers;
use controlplane::ipam::Ipam;
use datapath::{maps, GlobalMap};
use std::sync::{Arc, Mutex};

/// The capacity of a global map, when it opens.
type MapSize = fn(&std::path::Path) -> Option<u32>;

fn size<M: GlobalMap>(bpf_root: &std::path::Path) -> Option<u32> {
    M::open(bpf_root).ok().map(|m| m.max_entries())
}

/// 1.16's names and order (daemon/cmd/status.go), for the maps we pin.
const MAP_TABLE: &[(&str, MapSize)] = &[
    ("Auth", size::<maps::AuthMap>),
    ("Non-TCP connection tracking", size::<maps::CtAny4Global>),
    ("TCP connection tracking", size::<maps::Ct4Global>),
    ("Endpoint policy", size::<maps::Lxc>),
    ("IP cache", size::<maps::Ipcache>),
    ("IPv4 fragmentation", size::<maps::Ipv4FragDatagrams>),
    ("IPv4 service", size::<maps::Lb4Services>),
    ("IPv4 service backend", size::<maps::Lb4Backends>),
    ("IPv4 service reverse NAT", size::<maps::Lb4RevNat>),
    ("Metrics", size::<maps::Metrics>),
    ("NAT", size::<maps::Snat4External>),
    ("Sock reverse NAT", size::<maps::Lb4ReverseSk>),
    ("Tunnel", size::<maps::Tunnel>),
];

/// The controller that checks etcd answers; its failures are the
/// kvstore's status.
pub const KVSTORE_HEALTH: &str = "kvstore-health";

/// What `cilium status` and the health probes report on.
pub struct AgentStatus {
    pub config: Arc<crate::option::DaemonConfig>,
    pub controllers: Controllers,
    pub ipam: Option<Arc<Mutex<Ipam>>>,
    /// IPv6's allocator on a dual-stack node.
    pub ipam6: Option<Arc<Mutex<Ipam<std::net::Ipv6Addr>>>>,
    pub kvstore: Option<kvstore::Kvstore>,
    pub monitor: Arc<crate::monitor::Hub>,
    pub node_name: String,
    pub node_ip: Option<std::net::Ipv4Addr>,
    pub attach_mode: datapath::attach::AttachMode,
    /// The device cil_from_netdev serves NodePorts on, when enabled.
    pub native_device: Option<String>,
    /// The API server connection; None when Kubernetes is not used.
    pub kubernetes: Option<Arc<crate::k8s::connection::Kubernetes>>,
    /// What masquerading was set up (`crate::masquerade`).
    pub masquerading: Masquerading,
    /// cilium-health; None when health checking is off.
    pub cluster_health: Option<Arc<crate::cluster_health::ClusterHealth>>,
}

impl AgentStatus {
    pub fn collect(&self, brief: bool) -> StatusResponse {
        collect(self, brief)
    }

    /// Whether the brief status is Ok or Disabled.
    pub fn healthy(&self) -> bool {
        let s = collect(self, true);
        matches!(s.cilium.map(|c| c.state), Some(State::Ok | State::Disabled))
    }
}

fn bpf_maps(d: &AgentStatus) -> BpfMapStatus {
    let maps = MAP_TABLE
        .iter()
        .filter_map(|(label, size)| {
            Some(BpfMapProperties {
                name: (*label).into(),
                size: u64::from(size(&d.config.bpf_root)?),
            })
        })
        .collect();
    BpfMapStatus {
        dynamic_size_ratio: d.config.bpf_map_dynamic_size_ratio,
        maps,
    }
}

/// `cluster`: this node, and cilium-health's state when it runs.
fn cluster_status(d: &AgentStatus) -> ClusterStatus {
    ClusterStatus {
        cilium_health: d.cluster_health.as_ref().map(|h| h.status()),
        self_: d.node_name.clone(),
    }
}

/// The watched Kubernetes APIs still in their first listing, if any.
fn pending_caches(d: &AgentStatus) -> Option<Vec<String>> {
    let pending = d.kubernetes.as_ref()?.caches_pending();
    (!pending.is_empty()).then_some(pending)
}

/// The full status; `brief` keeps only what `cilium status --brief` needs
/// (Cilium's brief answer: `cilium`, `cluster`, a failing controller).
fn collect(d: &AgentStatus, brief: bool) -> StatusResponse {
    let controllers = d.controllers.snapshot();
    let kubernetes = d.kubernetes.as_ref().map_or_else(
        || K8sStatus {
            state: State::Disabled,
            ..Default::default()
        },
        |k| k.status(),
    );
    // an agent that cannot reach the API server is not healthy (Cilium's
    // message, the API server's error after it)
    let cilium = Some(match kubernetes.state {
        State::Failure => Status {
            state: State::Failure,
            msg: format!(
                "{}    Kubernetes service is not ready: {}",
                api::version_string(),
                kubernetes.msg
            ),
        },
        _ => match pending_caches(d) {
            // not up until the cluster is seen as it is, as Cilium's daemon
            // waits for its caches before it serves at all: a pod scheduled
            // meanwhile would find no Service and no policy yet
            Some(apis) => Status {
                state: State::Warning,
                msg: format!(
                    "{}    Waiting until all pre-existing resources have been received: {}",
                    api::version_string(),
                    apis.join(", ")
                ),
            },
            None => Status::ok(api::version_string()),
        },
    });
    if brief {
        let failing = controllers
            .into_iter()
            .find(|c| c.status.consecutive_failure_count > 0);
        return StatusResponse {
            cilium,
            cluster: Some(cluster_status(d)),
            controllers: failing.into_iter().collect(),
            ..Default::default()
        };
    }
    let off = || Some(BigTcp::default());
    StatusResponse {
        cilium,
        kvstore: Some(kvstore_status(d)),
        kubernetes: Some(kubernetes),
        kube_proxy_replacement: Some(kube_proxy_replacement(d)),
        host_firewall: Some(HostFirewall {
            mode: "Disabled".into(),
            devices: d.native_device.iter().cloned().collect(),
        }),
        srv6: Some(Srv6::default()),
        cni_chaining: Some(CniChainingStatus {
            mode: match d.config.cni_chaining_mode.as_str() {
                "" => "none".into(),
                m => m.into(),
            },
        }),
        cni_file: Some(d.config.cni.status()),
        node_monitor: d.monitor.monitor_status(),
        ipv4_big_tcp: off(),
        ipv6_big_tcp: off(),
        bandwidth_manager: Some(BandwidthManager::default()),
        routing: Some(Routing {
            intra_host_routing_mode: d.config.host_routing.as_str().into(),
            inter_host_routing_mode: if d.config.tunneling() {
                "Tunnel".into()
            } else {
                "Native".into()
            },
            tunnel_protocol: if d.config.tunneling() {
                d.config.tunnel_protocol.as_str().into()
            } else {
                String::new()
            },
        }),
        datapath_mode: "veth".into(),
        attach_mode: d.attach_mode.as_str().into(),
        ipam: Some(ipam_status(d)),
        masquerading: Some(d.masquerading.clone()),
        controllers,
        // no L7 proxy: Cilium sends no proxy object then
        proxy: None,
        identity_range: Some(IdentityRange {
            min_identity: controlplane::identity::MIN_GLOBAL,
            max_identity: controlplane::identity::MAX_GLOBAL,
        }),
        hubble: Some(crate::hubble::status(d.monitor.observer())),
        encryption: Some(EncryptionStatus {
            mode: "Disabled".into(),
            msg: String::new(),
        }),
        cluster: Some(cluster_status(d)),
        bpf_maps: Some(bpf_maps(d)),
        clock_source: Some(ClockSource {
            mode: "ktime".into(),
            hertz: None,
        }),
        auth_certificate_provider: Some(Status::disabled()),
        ..Default::default()
    }
}

/// What the load balancer does, as Cilium's `KubeProxyReplacement`:
/// NodePort (SNAT, Random or Maglev, no XDP) on the native device when
/// enabled; ClusterIP session affinity and terminating backends kept for
/// their flows always; socket LB when attached. ExternalIPs, HostPort and
/// NAT46/64 services are not served from outside, so they are off.
fn kube_proxy_replacement(d: &AgentStatus) -> KubeProxyReplacement {
    let c = &d.config;
    let node_port = match &d.native_device {
        Some(_) => NodePortFeature {
            enabled: true,
            mode: "SNAT".into(),
            algorithm: if c.maglev.is_some() {
                "Maglev".into()
            } else {
                "Random".into()
            },
            lut_size: c.maglev.map(|m| m.table_size),
            acceleration: "None".into(),
            port_min: Some(c.node_port_range.0),
            port_max: Some(c.node_port_range.1),
            dsr_mode: String::new(),
        },
        None => NodePortFeature::default(),
    };
    let devices: Vec<KubeProxyReplacementDevice> = d
        .native_device
        .iter()
        .map(|name| KubeProxyReplacementDevice {
            name: name.clone(),
            ip: d.node_ip.iter().map(|ip| ip.to_string()).collect(),
        })
        .collect();
    KubeProxyReplacement {
        mode: if matches!(
            c.all.get("kube-proxy-replacement").map(String::as_str),
            Some("true" | "strict")
        ) {
            "True".into()
        } else {
            "False".into()
        },
        devices: devices.iter().map(|dev| dev.name.clone()).collect(),
        direct_routing_device: d.native_device.clone().unwrap_or_default(),
        device_list: devices,
        features: KubeProxyReplacementFeatures {
            node_port,
            host_port: EnabledStatus::new(false),
            external_ips: EnabledStatus::new(false),
            host_reachable_services: None,
            socket_lb: EnabledStatus::new(c.socket_lb),
            // bpf_sock emits no trace events
            socket_lb_tracing: EnabledStatus::new(false),
            session_affinity: EnabledStatus::new(true),
            graceful_termination: EnabledStatus::new(true),
            nat46_x64: Nat46X64::default(),
            bpf_socket_lb_hostns_only: false,
        },
    }
}

/// Cilium's line: `etcd: 1/1 connected, leases=1, ...: <endpoint>`, or
/// `etcd: 0/1 connected: <endpoint> - <error>` while the kvstore-health
/// controller cannot reach etcd.
fn kvstore_status(d: &AgentStatus) -> Status {
    let (Some(kv), Some(kc)) = (&d.kvstore, &d.config.kvstore) else {
        return Status::ok("Disabled");
    };
    let n = kc.endpoints.len();
    let endpoints = kc.endpoints.join(", ");
    let failing = d
        .controllers
        .snapshot()
        .into_iter()
        .find(|c| c.name == KVSTORE_HEALTH && c.status.consecutive_failure_count > 0);
    match failing {
        Some(c) => Status {
            state: State::Failure,
            msg: format!(
                "etcd: 0/{n} connected: {endpoints} - {}",
                c.status.last_failure_msg
            ),
        },
        None => Status::ok(format!(
            "etcd: {n}/{n} connected, leases=1, lease-ID={:x}: {endpoints}",
            kv.lease_id()
        )),
    }
}

/// Both families' allocations, and Cilium's status line: the families'
/// summaries joined by ", " (`IPv4: 2/254 allocated from 10.0.0.0/24, `
/// when IPv6 is off).
fn ipam_status(d: &AgentStatus) -> api::ipam::IpamStatus {
    let mut status = api::ipam::IpamStatus::default();
    let v4 = family_status(d.ipam.as_deref(), &mut status, |s| &mut s.ipv4);
    let v6 = family_status(d.ipam6.as_deref(), &mut status, |s| &mut s.ipv6);
    status.status = format!("{v4}, {v6}");
    status
}

/// One family's allocations added to `status`; its summary, empty when
/// the node does not run the family.
fn family_status<A: controlplane::ipam::PoolAddr>(
    ipam: Option<&Mutex<Ipam<A>>>,
    status: &mut api::ipam::IpamStatus,
    list: impl Fn(&mut api::ipam::IpamStatus) -> &mut Vec<String>,
) -> String {
    let Some(ipam) = ipam else {
        return String::new();
    };
    let ipam = ipam.lock().expect("ipam lock");
    for (ip, a) in ipam.allocations() {
        status.allocations.insert(ip.to_string(), a.owner.clone());
        list(status).push(ip.to_string());
    }
    ipam.status_line()
}

async fn healthz(
    axum::extract::State(d): axum::extract::State<Arc<AgentStatus>>,
    headers: axum::http::HeaderMap,
) -> axum::Json<StatusResponse> {
    let brief = headers
        .get("brief")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    axum::Json(d.collect(brief))
}

/// `GET /v1/healthz`: the status `cilium status` shows.
pub fn routes(status: Arc<AgentStatus>) -> axum::Router {
    axum::Router::new()
        .route("/v1/healthz", axum::routing::get(healthz))
        .with_state(status)
}
