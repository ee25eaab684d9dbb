//! The typed configuration the agent runs with, checked as a whole.

use super::modes::{
    HostRouting, IdentityAllocationMode, IpamMode, MonitorAggregation, RoutingMode, TunnelProtocol,
};
use super::sources::{Loaded, Source};
use super::validate::{parse_bool, parse_cidr4, parse_cidr6};
use super::ConfigError;
pub use controlplane::ipam::Families;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

/// What the datapath writes into cilium_events (bpf-events-*).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventsConfig {
    /// Events a second, 0 for no limit
    pub rate_limit: u64,
    /// The bucket, 0 for the rate
    pub burst_limit: u64,
    pub drop: bool,
    pub trace: bool,
    pub policy_verdict: bool,
    /// Debug captures of every packet (debug with debug-verbose=datapath)
    pub debug_datapath: bool,
}

impl EventsConfig {
    /// The runtime-config bit set of notification types turned off.
    pub fn disabled_mask(&self) -> u64 {
        use abi::events::{NOTIFY_DROP, NOTIFY_POLICY_VERDICT, NOTIFY_TRACE};
        [
            (self.drop, NOTIFY_DROP),
            (self.trace, NOTIFY_TRACE),
            (self.policy_verdict, NOTIFY_POLICY_VERDICT),
        ]
        .iter()
        .filter(|(on, _)| !on)
        .fold(0, |m, (_, t)| m | 1u64 << t)
    }
}

/// What cilium-health runs on this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthConfig {
    pub checking: bool,
    /// A health endpoint (only with checking, as in Cilium).
    pub endpoint: bool,
    pub port: u16,
}

#[derive(Clone, Debug)]
pub struct DaemonConfig {
    pub bpf_root: PathBuf,
    /// The procfs sysctls are written through (`/host/proc` in the
    /// DaemonSet's container, whose own /proc/sys is read-only).
    pub procfs: PathBuf,
    pub state_dir: PathBuf,
    /// Parent of the state dir; holds cilium.pid.
    pub run_dir: PathBuf,
    pub socket_path: PathBuf,
    pub health_port: u16,
    pub debug: bool,
    /// `enable-ipv4`: this node's IPv4 pod CIDR and router address
    /// (cilium_host's, the pods' gateway); None on an IPv6-only node.
    pub ipv4: Option<controlplane::plane::Ipv4Pool>,
    /// `enable-ipv6`: this node's IPv6 pod CIDR and router address.
    pub ipv6: Option<controlplane::plane::Ipv6Pool>,
    /// None = detect from the node's devices.
    pub node_ip: Option<Ipv4Addr>,
    pub mtu: u32,
    pub ct_tcp_max: u32,
    pub ct_any_max: u32,
    /// bpf-fragments-map-max: datagrams whose later fragments can be tracked.
    pub frag_max: u32,
    /// enable-ipv4-fragment-tracking.
    pub fragment_tracking: bool,
    pub cluster_name: String,
    /// `K8S_NODE_NAME`, else the hostname.
    pub node_name: String,
    pub kvstore: Option<super::kvstore::KvstoreConfig>,
    /// How to reach the API server; None when there is none to reach
    /// (no `k8s-kubeconfig-path` or `k8s-api-server`, and not in a pod).
    pub kubernetes: Option<k8s::ClientOptions>,
    pub cluster_id: u32,
    pub policy_enforcement: policy::Enforcement,
    pub monitor_aggregation: MonitorAggregation,
    /// None unless `enable-hubble`.
    pub hubble: Option<HubbleConfig>,
    pub events: EventsConfig,
    pub cni: crate::cni_config::CniConfig,
    /// conntrack-gc-interval (0: dynamic) and conntrack-gc-max-interval
    /// How often identities in use are taken back from garbage
    /// collection (`kvstore-periodic-sync`).
    pub kvstore_periodic_sync: std::time::Duration,
    pub ct_gc_interval: std::time::Duration,
    pub ct_gc_max_interval: std::time::Duration,
    pub routing_mode: RoutingMode,
    /// Native routing: route other nodes' pod CIDRs via their node
    /// addresses on the shared L2 segment (`auto-direct-node-routes`).
    pub auto_direct_node_routes: bool,
    pub tunnel_protocol: TunnelProtocol,
    /// UDP port of the overlay (`tunnel-port`, 0 = the protocol's default).
    pub tunnel_port: u16,
    pub ipam_mode: IpamMode,
    pub identity_allocation_mode: IdentityAllocationMode,
    pub cni_chaining_mode: String,
    /// Attach with tcx links (else legacy tc clsact filters).
    pub enable_tcx: bool,
    /// NodePort on the native device (`enable-node-port`, or
    /// `kube-proxy-replacement=true`).
    pub enable_node_port: bool,
    /// Pods' `hostPort`s as HostPort services (`enable-host-port`, or
    /// `kube-proxy-replacement=true`).
    pub enable_host_port: bool,
    /// Masquerade pods' traffic leaving the cluster
    /// (`enable-ipv4-masquerade`), in BPF (`enable-bpf-masquerade`) or
    /// with iptables.
    pub ipv4_masquerade: bool,
    /// `enable-ipv6-masquerade`, in effect only with IPv6 on.
    pub ipv6_masquerade: bool,
    pub bpf_masquerade: bool,
    /// BPF host routing or legacy (`enable-host-legacy-routing`, and what
    /// BPF host routing needs).
    pub host_routing: HostRouting,
    /// Destinations never masqueraded to (`ipv4-native-routing-cidr`).
    pub ipv4_native_routing_cidr: Option<(Ipv4Addr, u8)>,
    /// IPv6 destinations never masqueraded to (`ipv6-native-routing-cidr`).
    pub ipv6_native_routing_cidr: Option<(Ipv6Addr, u8)>,
    /// First and last port of `node-port-range`.
    pub node_port_range: (u16, u16),
    /// Socket LB on `cgroup_root` (`bpf-lb-sock`, or
    /// `kube-proxy-replacement=true`).
    pub socket_lb: bool,
    /// The cgroup v2 directory socket LB attaches to (`cgroup-root`).
    pub cgroup_root: PathBuf,
    /// `bpf-lb-algorithm=maglev`: NodePort backends by Maglev table.
    pub maglev: Option<lb::MaglevConfig>,
    /// Seeds from `bpf-lb-maglev-hash-seed`.
    pub maglev_seeds: lb::maglev::Seeds,
    pub bpf_map_dynamic_size_ratio: f64,
    /// Where Prometheus metrics are served (`prometheus-serve-addr`).
    pub prometheus_addr: Option<std::net::SocketAddr>,
    /// cilium-health: probing other nodes (`enable-health-checking`), a
    /// health endpoint to be probed at (`enable-endpoint-health-checking`)
    /// and the port both answer HTTP on (`cluster-health-port`).
    pub health: HealthConfig,
    /// Every key with its effective value (`daemonConfigurationMap`).
    pub all: BTreeMap<String, String>,
}

const DEFAULT_MTU: u32 = 1500;

/// Hubble's server on this agent.
#[derive(Clone, Debug)]
pub struct HubbleConfig {
    /// `hubble-socket-path`; beside the API socket unless set.
    pub socket_path: PathBuf,
    pub capacity: crate::hubble::Capacity,
    /// `hubble-event-queue-size`: events waiting for the observer (0 in
    /// the config: Cilium's default for the machine's CPUs)
    pub queue_size: usize,
    /// `hubble-listen-address`: the TCP server Relay connects to.
    pub listen: Option<std::net::SocketAddr>,
    /// The TCP server's certificate; None with `hubble-disable-tls`.
    pub tls: Option<crate::hubble::TlsFiles>,
    /// `hubble-disable-tls`: peers are announced without server names.
    pub disable_tls: bool,
    /// `hubble-metrics-server` with the handlers of `hubble-metrics`.
    pub metrics: Option<(
        std::net::SocketAddr,
        std::sync::Arc<crate::hubble::metrics::Metrics>,
    )>,
}

fn hubble_config(l: &Loaded) -> Result<Option<HubbleConfig>, ConfigError> {
    if !parse_bool(l.get("enable-hubble")).expect("validated bool") {
        return Ok(None);
    }
    let socket_path = match l.source("hubble-socket-path") {
        Some(Source::Default) | None => {
            crate::hubble::default_socket_path(Path::new(l.get("socket-path")))
        }
        Some(_) => PathBuf::from(l.get("hubble-socket-path")),
    };
    let raw = l.get("hubble-event-buffer-capacity");
    let capacity = raw
        .parse::<i64>()
        .map_err(|e| e.to_string())
        .and_then(|n| crate::hubble::Capacity::new(n).map_err(|e| e.to_string()))
        .map_err(|why| ConfigError::BadValue {
            key: "hubble-event-buffer-capacity".into(),
            value: raw.into(),
            why,
        })?;
    let listen = match l.get("hubble-listen-address") {
        "" => None,
        s => Some(
            super::validate::listen_addr(s).map_err(|e| ConfigError::BadValue {
                key: "hubble-listen-address".into(),
                value: s.into(),
                why: e.to_string(),
            })?,
        ),
    };
    let disable_tls = parse_bool(l.get("hubble-disable-tls")).expect("validated bool");
    let tls = match (listen, disable_tls) {
        (Some(_), false) => {
            let (cert, key) = (l.get("hubble-tls-cert-file"), l.get("hubble-tls-key-file"));
            if cert.is_empty() || key.is_empty() {
                return Err(ConfigError::Unsupported(
                    "hubble-listen-address needs hubble-tls-cert-file and hubble-tls-key-file (or hubble-disable-tls=true)".into(),
                ));
            }
            Some(crate::hubble::TlsFiles {
                cert: cert.into(),
                key: key.into(),
                client_cas: l
                    .get("hubble-tls-client-ca-files")
                    .split([',', ' '])
                    .filter(|f| !f.is_empty())
                    .map(PathBuf::from)
                    .collect(),
            })
        }
        _ => None,
    };
    let metrics = match l.get("hubble-metrics-server") {
        "" => None,
        server => {
            let bad = |key: &str, value: &str, why: String| ConfigError::BadValue {
                key: key.into(),
                value: value.into(),
                why,
            };
            let addr = super::validate::listen_addr(server)
                .map_err(|e| bad("hubble-metrics-server", server, e.to_string()))?;
            let spec = l.get("hubble-metrics");
            let handlers = crate::hubble::metrics::Metrics::parse(spec)
                .map_err(|e| bad("hubble-metrics", spec, e.to_string()))?;
            Some((addr, std::sync::Arc::new(handlers)))
        }
    };
    let queue_size = match l.get("hubble-event-queue-size").parse::<usize>() {
        Ok(0) | Err(_) => crate::monitor::default_queue_size(),
        Ok(n) => n,
    };
    Ok(Some(HubbleConfig {
        socket_path,
        capacity,
        queue_size,
        listen,
        tls,
        disable_tls,
        metrics,
    }))
}

/// The node's IPv4 pod CIDR (`ipv4-range`, else the first node-sized block
/// of `cluster-pool-ipv4-cidr`) and router address (`local-router-ipv4`,
/// else the CIDR's first address).
fn ipv4_pool(l: &Loaded) -> Result<controlplane::plane::Ipv4Pool, ConfigError> {
    let num = |k: &str| l.get(k).parse::<u64>().expect("validated integer");
    let ipv4_range = match l.get("ipv4-range") {
        "" => {
            // No per-node range given: the first node-sized block of the cluster pool.
            let (pool, pool_len) =
                parse_cidr4(l.get("cluster-pool-ipv4-cidr")).expect("validated cidr");
            let mask = num("cluster-pool-ipv4-mask-size") as u8;
            if mask < pool_len {
                return Err(ConfigError::BadValue {
                    key: "cluster-pool-ipv4-mask-size".into(),
                    value: mask.to_string(),
                    why: format!("must not be shorter than the pool prefix /{pool_len}"),
                });
            }
            (pool, mask)
        }
        s => parse_cidr4(s).expect("validated cidr"),
    };
    let (net, len) = ipv4_range;
    if len > 30 {
        return Err(ConfigError::BadValue {
            key: "ipv4-range".into(),
            value: l.get("ipv4-range").into(),
            why: "needs room for a router and pods (/30 or wider)".into(),
        });
    }
    let router_ip = match l.get("local-router-ipv4") {
        "" => Ipv4Addr::from(u32::from(net) + 1),
        s => {
            let ip: Ipv4Addr = s.parse().expect("validated ip");
            let mask = u32::MAX << (32 - len);
            if u32::from(ip) & mask != u32::from(net) {
                return Err(ConfigError::BadValue {
                    key: "local-router-ipv4".into(),
                    value: s.into(),
                    why: format!("not inside the node's pod CIDR {net}/{len}"),
                });
            }
            ip
        }
    };
    Ok(controlplane::plane::Ipv4Pool {
        pod_cidr: ipv4_range,
        router_ip,
    })
}

impl DaemonConfig {
    /// `routing-mode=tunnel`: other nodes' pods are reached through VXLAN.
    pub fn tunneling(&self) -> bool {
        self.routing_mode == RoutingMode::Tunnel
    }

    /// MTU of the routes pods and the host use: the device MTU minus the
    /// overlay's headers in tunnel mode (Cilium's RouteMTU).
    pub fn route_mtu(&self) -> u32 {
        if self.tunneling() {
            self.mtu - netdev::vxlan::TUNNEL_OVERHEAD
        } else {
            self.mtu
        }
    }
}

/// Cilium refuses native routing with masquerading when it cannot tell
/// which destinations are the cluster's own (`ipv4-native-routing-cidr`,
/// and `ipv6-native-routing-cidr` for IPv6): pod-to-pod traffic across
/// nodes would be masqueraded to the node's address and lose its identity.
/// `key` is the CIDR's key, `because` the flags that need it.
fn check_native_routing_cidr(
    mode: RoutingMode,
    masquerade: bool,
    native_routing_cidr: &str,
    (key, because): (&'static str, &'static str),
) -> Result<(), ConfigError> {
    if mode == RoutingMode::Native && masquerade && native_routing_cidr.is_empty() {
        return Err(ConfigError::Requires {
            needed: "native routing cidr",
            key,
            because,
        });
    }
    Ok(())
}

/// Why a `node-port-range` does not read; ConfigError adds the key and the
/// whole value.
#[derive(Debug, thiserror::Error)]
enum PortRangeError {
    #[error("expected \"<first>,<last>\", e.g. 30000,32767")]
    NotARange,
    #[error("{0:?} is not a port (1-65535)")]
    NotAPort(String),
    #[error("first port {first} is above last port {last}")]
    Reversed { first: u16, last: u16 },
}

/// `node-port-range`: "first,last" (Cilium also takes "first-last").
fn parse_port_range(s: &str) -> Result<(u16, u16), PortRangeError> {
    let (first, last) = s
        .split_once(',')
        .or_else(|| s.split_once('-'))
        .ok_or(PortRangeError::NotARange)?;
    let port = |p: &str| {
        p.trim()
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| PortRangeError::NotAPort(p.to_owned()))
    };
    let (first, last) = (port(first)?, port(last)?);
    if first > last {
        return Err(PortRangeError::Reversed { first, last });
    }
    Ok((first, last))
}

/// The value of `key` as `parse` reads it; one it refuses is an error
/// naming the key, the value and `why`.
fn parsed<T>(
    l: &Loaded,
    key: &str,
    parse: impl FnOnce(&str) -> Option<T>,
    why: &str,
) -> Result<T, ConfigError> {
    let value = l.get(key);
    parse(value).ok_or_else(|| ConfigError::BadValue {
        key: key.into(),
        value: value.into(),
        why: why.into(),
    })
}

/// Whether and how the agent talks to Kubernetes: a kubeconfig, an API
/// server address, or the in-cluster service account when it runs in a
/// pod (`KUBERNETES_SERVICE_HOST` is set there).
fn kubernetes(l: &Loaded, in_pod: bool) -> Option<k8s::ClientOptions> {
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let opts = k8s::ClientOptions {
        kubeconfig: some(l.get("k8s-kubeconfig-path")).map(PathBuf::from),
        api_server: some(l.get("k8s-api-server")),
        qps: l.get("k8s-client-qps").parse().expect("validated float"),
        burst: l.get("k8s-client-burst").parse().expect("validated uint"),
    };
    (opts.kubeconfig.is_some() || opts.api_server.is_some() || in_pod).then_some(opts)
}

/// Cilium's node name: `K8S_NODE_NAME`, else the hostname.
fn node_name() -> String {
    if let Ok(n) = std::env::var("K8S_NODE_NAME") {
        if !n.is_empty() {
            return n;
        }
    }
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// This node's IPv6 pod CIDR (`ipv6-range`, else the first block of
/// `cluster-pool-ipv6-cidr` by `cluster-pool-ipv6-mask-size`) and its
/// router address (`local-router-ipv6`, else the CIDR's first address).
fn ipv6_pool(l: &Loaded) -> Result<controlplane::plane::Ipv6Pool, ConfigError> {
    let bad = |key: &str, why: String| ConfigError::BadValue {
        key: key.into(),
        value: l.get(key).into(),
        why,
    };
    let cidr = |key: &str| {
        parse_cidr6(l.get(key)).ok_or_else(|| {
            bad(
                key,
                "expected an IPv6 CIDR with its host bits clear, e.g. fd00:10:0:1::/112".into(),
            )
        })
    };
    let (net, len) = match l.get("ipv6-range") {
        "auto" | "" => {
            let (pool, pool_len) = cidr("cluster-pool-ipv6-cidr")?;
            let mask: u8 = l
                .get("cluster-pool-ipv6-mask-size")
                .parse()
                .expect("validated uint");
            if mask < pool_len {
                return Err(bad(
                    "cluster-pool-ipv6-mask-size",
                    format!("must not be shorter than the pool prefix /{pool_len}"),
                ));
            }
            (pool, mask)
        }
        _ => cidr("ipv6-range")?,
    };
    if len > 126 {
        return Err(bad(
            "ipv6-range",
            "needs room for a router and pods (/126 or wider)".into(),
        ));
    }
    let host = u128::MAX.checked_shr(u32::from(len)).unwrap_or(0);
    let router_ip = match l.get("local-router-ipv6") {
        "" => Ipv6Addr::from(u128::from(net) + 1),
        s => {
            let ip: Ipv6Addr = s
                .parse()
                .map_err(|_| bad("local-router-ipv6", "expected an IPv6 address".into()))?;
            if u128::from(ip) & !host != u128::from(net) {
                return Err(bad(
                    "local-router-ipv6",
                    format!("not inside the node's IPv6 pod CIDR {net}/{len}"),
                ));
            }
            ip
        }
    };
    Ok(controlplane::plane::Ipv6Pool {
        pod_cidr: (net, len),
        router_ip,
    })
}

impl DaemonConfig {
    pub fn from_loaded(l: &Loaded) -> Result<Self, ConfigError> {
        let boolean = |k: &str| parse_bool(l.get(k)).expect("validated bool");
        let num = |k: &str| l.get(k).parse::<u64>().expect("validated integer");
        if !boolean("enable-ipv4") && !boolean("enable-ipv6") {
            return Err(ConfigError::BadValue {
                key: "enable-ipv4".into(),
                value: "false".into(),
                why: "Either IPv4 or IPv6 addressing must be enabled".into(),
            });
        }
        // with Kubernetes, the pod CIDRs found here stand in until the
        // CiliumNode's (or Node's) replace them at start
        let ipv4 = match boolean("enable-ipv4") {
            true => Some(ipv4_pool(l)?),
            false => None,
        };
        let ipv6 = match boolean("enable-ipv6") {
            true => Some(ipv6_pool(l)?),
            false => None,
        };
        let kvstore = super::kvstore::parse(
            l.get("kvstore"),
            l.get("kvstore-opt"),
            super::validate::parse_duration(l.get("kvstore-lease-ttl"))
                .expect("validated duration"),
        )?;

        let kubernetes = kubernetes(l, std::env::var_os("KUBERNETES_SERVICE_HOST").is_some());

        let node_ip = match l.get("ipv4-node") {
            "auto" | "" => None,
            s => Some(s.parse().map_err(|_| ConfigError::BadValue {
                key: "ipv4-node".into(),
                value: s.into(),
                why: "expected \"auto\" or an IPv4 address".into(),
            })?),
        };
        let mtu = match num("mtu") as u32 {
            0 => DEFAULT_MTU,
            m if m < 576 => {
                return Err(ConfigError::BadValue {
                    key: "mtu".into(),
                    value: m.to_string(),
                    why: "must be 0 (auto) or at least 576".into(),
                })
            }
            m => m,
        };
        let tunnel_protocol = parsed(
            l,
            "tunnel-protocol",
            TunnelProtocol::parse,
            "only vxlan is supported",
        )?;
        let maglev_seeds =
            lb::maglev::Seeds::parse(l.get("bpf-lb-maglev-hash-seed")).map_err(|e| {
                ConfigError::BadValue {
                    key: "bpf-lb-maglev-hash-seed".into(),
                    value: l.get("bpf-lb-maglev-hash-seed").into(),
                    why: e.to_string(),
                }
            })?;
        let table_size = num("bpf-lb-maglev-table-size");
        let bad_size = |why: String| ConfigError::BadValue {
            key: "bpf-lb-maglev-table-size".into(),
            value: table_size.to_string(),
            why,
        };
        lb::maglev::check_table_size(table_size).map_err(|e| bad_size(e.to_string()))?;
        if table_size as usize != abi::lb::LB_MAGLEV_LUT_SIZE {
            return Err(bad_size(format!(
                "this datapath is built with a table size of {}",
                abi::lb::LB_MAGLEV_LUT_SIZE
            )));
        }
        let maglev = (l.get("bpf-lb-algorithm") == "maglev").then_some(lb::MaglevConfig {
            table_size,
            seed: maglev_seeds.murmur,
        });
        let node_port_range =
            parse_port_range(l.get("node-port-range")).map_err(|e| ConfigError::BadValue {
                key: "node-port-range".into(),
                value: l.get("node-port-range").into(),
                why: e.to_string(),
            })?;
        let kube_proxy_replacement = matches!(l.get("kube-proxy-replacement"), "true" | "strict");
        // a family's masquerading is on only while the family is
        let ipv4_masquerade = boolean("enable-ipv4-masquerade") && ipv4.is_some();
        let ipv6_masquerade = boolean("enable-ipv6-masquerade") && ipv6.is_some();
        // the reverse path is NodePort's, on the native device
        if boolean("enable-bpf-masquerade")
            && (ipv4_masquerade || ipv6_masquerade)
            && !(boolean("enable-node-port") || kube_proxy_replacement)
        {
            return Err(ConfigError::Unsupported(
                "BPF masquerade requires NodePort (--enable-node-port=\"true\" or --kube-proxy-replacement=true)".into(),
            ));
        }
        let prometheus_addr = match l.get("prometheus-serve-addr") {
            "" => None,
            s => Some(
                super::validate::listen_addr(s).map_err(|why| ConfigError::BadValue {
                    key: "prometheus-serve-addr".into(),
                    value: s.into(),
                    why: why.to_string(),
                })?,
            ),
        };
        let tunnel_port = match num("tunnel-port") as u16 {
            0 => netdev::vxlan::VXLAN_PORT,
            p => p,
        };
        let routing_mode = parsed(
            l,
            "routing-mode",
            RoutingMode::parse,
            "must be one of tunnel, native",
        )?;
        let hubble = hubble_config(l)?;
        check_native_routing_cidr(
            routing_mode,
            ipv4_masquerade,
            l.get("ipv4-native-routing-cidr"),
            (
                "ipv4-native-routing-cidr",
                "--enable-ipv4-masquerade=true --routing-mode=native",
            ),
        )?;
        if ipv6.is_some() {
            check_native_routing_cidr(
                routing_mode,
                ipv6_masquerade,
                l.get("ipv6-native-routing-cidr"),
                (
                    "ipv6-native-routing-cidr",
                    "--enable-ipv6=true --enable-ipv6-masquerade=true --routing-mode=native",
                ),
            )?;
            if boolean("auto-direct-node-routes") && l.get("ipv6-native-routing-cidr").is_empty() {
                tracing::warn!(subsys = "config", "ipv6-native-routing-cidr is empty with auto-direct-node-routes: IPv6 traffic to other nodes' pods may be masqueraded");
            }
        }
        Ok(Self {
            bpf_root: PathBuf::from(l.get("bpf-root")),
            procfs: PathBuf::from(l.get("procfs")),
            state_dir: PathBuf::from(l.get("state-dir")),
            run_dir: PathBuf::from(l.get("state-dir"))
                .parent()
                .map(PathBuf::from)
                .unwrap_or_else(|| "/".into()),
            socket_path: PathBuf::from(l.get("socket-path")),
            health_port: num("agent-health-port") as u16,
            debug: boolean("debug"),
            ipv4,
            ipv6,
            node_ip,
            mtu,
            ct_tcp_max: num("bpf-ct-global-tcp-max") as u32,
            ct_any_max: num("bpf-ct-global-any-max") as u32,
            frag_max: num("bpf-fragments-map-max") as u32,
            fragment_tracking: boolean("enable-ipv4-fragment-tracking"),
            cluster_name: l.get("cluster-name").to_owned(),
            node_name: node_name(),
            kvstore,
            kubernetes,
            cluster_id: num("cluster-id") as u32,
            policy_enforcement: parsed(
                l,
                "enable-policy",
                |v| policy::Enforcement::parse(&v.to_ascii_lowercase()),
                "must be one of default, always, never",
            )?,
            monitor_aggregation: parsed(
                l,
                "monitor-aggregation",
                MonitorAggregation::parse,
                "must be one of none, disabled, lowest, low, medium, maximum, max",
            )?,
            hubble,
            kvstore_periodic_sync: super::validate::parse_duration(l.get("kvstore-periodic-sync"))
                .filter(|d| !d.is_zero())
                .ok_or_else(|| ConfigError::BadValue {
                    key: "kvstore-periodic-sync".into(),
                    value: l.get("kvstore-periodic-sync").into(),
                    why: "must be a positive duration".into(),
                })?,
            ct_gc_interval: super::validate::parse_duration(l.get("conntrack-gc-interval"))
                .expect("validated duration"),
            ct_gc_max_interval: super::validate::parse_duration(l.get("conntrack-gc-max-interval"))
                .expect("validated duration"),
            cni: crate::cni_config::CniConfig {
                path: PathBuf::from(l.get("write-cni-conf-when-ready")),
                exclusive: boolean("cni-exclusive"),
                uninstall: boolean("cni-uninstall"),
                debug: boolean("debug"),
                log_file: l.get("cni-log-file").to_owned(),
            },
            events: EventsConfig {
                rate_limit: num("bpf-events-default-rate-limit"),
                burst_limit: num("bpf-events-default-burst-limit"),
                drop: boolean("bpf-events-drop-enabled"),
                trace: boolean("bpf-events-trace-enabled"),
                policy_verdict: boolean("bpf-events-policy-verdict-enabled"),
                debug_datapath: boolean("debug")
                    && l.get("debug-verbose")
                        .split([',', ' '])
                        .any(|w| w.eq_ignore_ascii_case("datapath")),
            },
            routing_mode,
            auto_direct_node_routes: boolean("auto-direct-node-routes"),
            tunnel_protocol,
            tunnel_port,
            ipam_mode: parsed(
                l,
                "ipam",
                IpamMode::parse,
                "must be one of cluster-pool, kubernetes, crd, eni, azure, multi-pool, cluster-pool-v2beta, alibabacloud, delegated-plugin",
            )?,
            identity_allocation_mode: parsed(
                l,
                "identity-allocation-mode",
                IdentityAllocationMode::parse,
                "must be one of crd, kvstore (the doublewrite modes are not supported)",
            )?,
            cni_chaining_mode: l.get("cni-chaining-mode").to_owned(),
            enable_tcx: boolean("enable-tcx"),
            enable_node_port: boolean("enable-node-port") || kube_proxy_replacement,
            enable_host_port: boolean("enable-host-port") || kube_proxy_replacement,
            ipv4_masquerade,
            ipv6_masquerade,
            bpf_masquerade: boolean("enable-bpf-masquerade"),
            host_routing: HostRouting::choose(
                boolean("enable-host-legacy-routing"),
                (ipv4_masquerade || ipv6_masquerade) && !boolean("enable-bpf-masquerade"),
                kube_proxy_replacement,
            ),
            ipv4_native_routing_cidr: match l.get("ipv4-native-routing-cidr") {
                "" => None,
                s => Some(parse_cidr4(s).expect("validated cidr")),
            },
            ipv6_native_routing_cidr: match l.get("ipv6-native-routing-cidr") {
                "" => None,
                s => Some(parse_cidr6(s).expect("validated cidr")),
            },
            node_port_range,
            socket_lb: boolean("bpf-lb-sock") || kube_proxy_replacement,
            cgroup_root: PathBuf::from(l.get("cgroup-root")),
            maglev,
            maglev_seeds,
            prometheus_addr,
            health: HealthConfig {
                checking: boolean("enable-health-checking"),
                endpoint: boolean("enable-health-checking")
                    && boolean("enable-endpoint-health-checking"),
                port: num("cluster-health-port") as u16,
            },
            bpf_map_dynamic_size_ratio: l
                .get("bpf-map-dynamic-size-ratio")
                .parse()
                .expect("validated float"),
            all: l
                .values
                .iter()
                .map(|(k, (v, _))| ((*k).to_owned(), v.clone()))
                .collect(),
        })
    }

    /// cilium-health's API socket: `health.sock` beside the agent's.
    pub fn health_socket(&self) -> PathBuf {
        api::health::socket_beside(&self.socket_path)
    }

    pub fn pid_file(&self) -> PathBuf {
        self.run_dir.join("cilium.pid")
    }

    pub fn families(&self) -> Families {
        Families {
            ipv4: self.ipv4.is_some(),
            ipv6: self.ipv6.is_some(),
        }
    }

    /// The IPv4 pod CIDR as text, unless the node is IPv6-only.
    pub fn pod_cidr(&self) -> Option<String> {
        self.ipv4
            .map(|p| format!("{}/{}", p.pod_cidr.0, p.pod_cidr.1))
    }

    /// The IPv6 pod CIDR as text, on a dual-stack node.
    pub fn pod_cidr6(&self) -> Option<String> {
        self.ipv6
            .map(|p| format!("{}/{}", p.pod_cidr.0, p.pod_cidr.1))
    }
}

#[cfg(test)]
mod tests {
    use super::super::load;
    use super::*;

    fn cfg(a: &[&str]) -> Result<DaemonConfig, ConfigError> {
        let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        DaemonConfig::from_loaded(&load(&args, |_| None)?)
    }

    #[test]
    fn hubble_serves_beside_the_api_socket_and_on_tcp_with_tls_or_without_by_choice() {
        assert!(cfg(&[]).unwrap().hubble.is_none(), "off unless enabled");
        let h = cfg(&["--enable-hubble", "--socket-path=/run/x/cilium.sock"])
            .unwrap()
            .hubble
            .unwrap();
        assert_eq!(h.socket_path, Path::new("/run/x/hubble.sock"));
        assert_eq!((h.capacity.get(), h.listen), (4095, None));
        let no_certs = cfg(&["--enable-hubble", "--hubble-listen-address=:4244"]).unwrap_err();
        assert!(
            no_certs.to_string().contains("hubble-tls-cert-file"),
            "{no_certs}"
        );
        let plain = cfg(&[
            "--enable-hubble",
            "--hubble-listen-address=:4244",
            "--hubble-disable-tls",
        ])
        .unwrap()
        .hubble
        .unwrap();
        assert_eq!(plain.listen.map(|a| a.port()), Some(4244));
        assert!(plain.tls.is_none() && plain.disable_tls);
        let mtls = cfg(&[
            "--enable-hubble",
            "--hubble-listen-address=:4244",
            "--hubble-tls-cert-file=/t/server.crt",
            "--hubble-tls-key-file=/t/server.key",
            "--hubble-tls-client-ca-files=/t/ca.crt",
        ])
        .unwrap()
        .hubble
        .unwrap();
        assert_eq!(mtls.tls.unwrap().client_cas, [PathBuf::from("/t/ca.crt")]);
        for bad in [
            "--hubble-event-buffer-capacity=4096",
            "--hubble-listen-address=4244",
        ] {
            let err = cfg(&["--enable-hubble", bad]).unwrap_err();
            assert!(err.to_string().contains("hubble-"), "{bad}: {err}");
        }
    }

    #[test]
    fn hubble_metrics_are_served_only_with_a_server_and_valid_handlers() {
        let off = cfg(&["--enable-hubble", "--hubble-metrics=flow"]).unwrap();
        assert!(
            off.hubble.unwrap().metrics.is_none(),
            "no server, no metrics"
        );
        let on = cfg(&[
            "--enable-hubble",
            "--hubble-metrics-server=:9965",
            "--hubble-metrics=drop:sourceContext=pod tcp flow",
        ])
        .unwrap();
        let (addr, m) = on.hubble.unwrap().metrics.unwrap();
        assert_eq!(addr.port(), 9965);
        assert_eq!(m.names(), ["drop", "tcp", "flow"]);
        for (bad, key) in [
            ("--hubble-metrics=flow bogus", "hubble-metrics"),
            ("--hubble-metrics=drop:sourceContext=moon", "hubble-metrics"),
        ] {
            let err = cfg(&["--enable-hubble", "--hubble-metrics-server=:9965", bad]).unwrap_err();
            assert!(err.to_string().contains(key), "{bad}: {err}");
        }
        let err = cfg(&["--enable-hubble", "--hubble-metrics-server=9965"]).unwrap_err();
        assert!(err.to_string().contains("hubble-metrics-server"), "{err}");
    }

    #[test]
    fn defaults_give_first_pool_block_and_router() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.pod_cidr().as_deref(), Some("10.0.0.0/24"));
        assert_eq!(c.ipv4.unwrap().router_ip, Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(c.pid_file(), PathBuf::from("/var/run/cilium/cilium.pid"));
        assert_eq!(c.mtu, 1500);
        assert!(c.ipv6.is_none(), "IPv4 only unless enable-ipv6");
    }

    #[test]
    fn dual_stack_takes_the_first_ipv6_block_or_the_given_range() {
        let c = cfg(&["--enable-ipv6"]).unwrap();
        assert_eq!(c.pod_cidr6().as_deref(), Some("fd00::/120"));
        assert_eq!(
            c.ipv6.unwrap().router_ip,
            "fd00::1".parse::<Ipv6Addr>().unwrap()
        );
        let c = cfg(&[
            "--enable-ipv6=true",
            "--ipv6-range=fd00:10:0:1::/112",
            "--local-router-ipv6=fd00:10:0:1::ff",
        ])
        .unwrap();
        assert_eq!(c.pod_cidr6().as_deref(), Some("fd00:10:0:1::/112"));
        assert_eq!(
            c.ipv6.unwrap().router_ip,
            "fd00:10:0:1::ff".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn ipv6_only_runs_without_ipv4_and_one_family_must_be_on() {
        let c = cfg(&["--enable-ipv4=false", "--enable-ipv6"]).unwrap();
        assert!(c.ipv4.is_none() && c.pod_cidr().is_none());
        assert_eq!(c.pod_cidr6().as_deref(), Some("fd00::/120"));
        assert!(!c.ipv4_masquerade, "no IPv4 to masquerade");
        // IPv4's native routing CIDR is not asked for without IPv4
        let c = cfg(&[
            "--enable-ipv4=false",
            "--enable-ipv6",
            "--routing-mode=native",
            "--ipv6-native-routing-cidr=fd00::/104",
        ]);
        assert!(c.is_ok(), "{:?}", c.err());
        let e = cfg(&["--enable-ipv4=false"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("Either IPv4 or IPv6 addressing must be enabled"),
            "{e}"
        );
    }

    #[test]
    fn inconsistent_settings_are_refused_with_the_key() {
        let e = cfg(&["--ipv4-range=10.1.0.0/24", "--local-router-ipv4=10.2.0.1"]).unwrap_err();
        assert!(e.to_string().contains("local-router-ipv4"), "{e}");
        for (args, key) in [
            (
                &["--enable-ipv6", "--ipv6-range=fd00::1/64"][..],
                "ipv6-range",
            ),
            (&["--enable-ipv6", "--ipv6-range=10.0.0.0/24"], "ipv6-range"),
            (&["--enable-ipv6", "--ipv6-range=fd00::/127"], "ipv6-range"),
            (
                &[
                    "--enable-ipv6",
                    "--routing-mode=native",
                    "--ipv4-native-routing-cidr=10.0.0.0/8",
                ],
                "routing-mode=native",
            ),
            (
                &["--enable-ipv6", "--cluster-pool-ipv6-mask-size=96"],
                "cluster-pool-ipv6-mask-size",
            ),
            (
                &[
                    "--enable-ipv6",
                    "--ipv6-range=fd00:1::/112",
                    "--local-router-ipv6=fd00:2::1",
                ],
                "local-router-ipv6",
            ),
        ] {
            let e = cfg(args).unwrap_err();
            assert!(e.to_string().contains(key), "{args:?}: {e}");
        }
        let e = cfg(&["--mtu=100"]).unwrap_err();
        assert!(e.to_string().contains("mtu"), "{e}");
        let e = cfg(&["--bpf-lb-maglev-table-size=1021"]).unwrap_err();
        assert!(e.to_string().contains("16381"), "{e}");
        let e = cfg(&["--bpf-lb-maglev-hash-seed=short"]).unwrap_err();
        assert!(e.to_string().contains("bpf-lb-maglev-hash-seed"), "{e}");
        assert!(cfg(&["--bpf-lb-algorithm=maglev"])
            .unwrap()
            .maglev
            .is_some());
        let e = cfg(&["--ipv4-node=nope"]).unwrap_err();
        assert!(e.to_string().contains("ipv4-node"), "{e}");
        let e = cfg(&["--prometheus-serve-addr=nope"]).unwrap_err();
        assert!(e.to_string().contains("prometheus-serve-addr"), "{e}");
        assert_eq!(
            cfg(&["--prometheus-serve-addr=:9962"])
                .unwrap()
                .prometheus_addr,
            Some("0.0.0.0:9962".parse().unwrap())
        );
        for bad in ["30000", "32767,30000", "0,100", "a,b", "1,70000"] {
            let e = cfg(&[&format!("--node-port-range={bad}")]).unwrap_err();
            assert!(e.to_string().contains("node-port-range"), "{bad}: {e}");
        }
    }

    #[test]
    fn closed_set_keys_are_typed_at_load() {
        let c = cfg(&[]).unwrap();
        assert_eq!(c.policy_enforcement, policy::Enforcement::Default);
        assert_eq!(c.monitor_aggregation, MonitorAggregation::Medium);
        assert_eq!(c.routing_mode, RoutingMode::Tunnel);
        assert_eq!(c.tunnel_protocol, TunnelProtocol::Vxlan);
        assert_eq!(c.ipam_mode, IpamMode::ClusterPool);
        assert_eq!(c.identity_allocation_mode, IdentityAllocationMode::Crd);
        let c = cfg(&[
            "--enable-policy=Always",
            "--monitor-aggregation=maximum",
            "--routing-mode=native",
            "--ipv4-native-routing-cidr=10.0.0.0/8",
            "--ipam=kubernetes",
            "--identity-allocation-mode=kvstore",
        ])
        .unwrap();
        assert_eq!(c.policy_enforcement, policy::Enforcement::Always);
        assert_eq!(c.monitor_aggregation, MonitorAggregation::Max);
        assert!(!c.tunneling());
        assert_eq!(c.ipam_mode.as_str(), "kubernetes");
        assert_eq!(c.identity_allocation_mode, IdentityAllocationMode::Kvstore);
        // the API shows every key as it was given
        assert_eq!(c.all["enable-policy"], "Always");
        let e = cfg(&["--tunnel-protocol=geneve"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid value \"geneve\" for tunnel-protocol: only vxlan is supported"
        );
        let e = cfg(&["--routing-mode=overlay"]).unwrap_err();
        assert!(e.to_string().contains("routing-mode"), "{e}");
        assert!(e.to_string().contains("overlay"), "{e}");
    }

    #[test]
    fn bpf_masquerade_needs_node_port() {
        let e = cfg(&["--enable-bpf-masquerade=true"]).unwrap_err();
        assert!(
            e.to_string().contains("BPF masquerade requires NodePort"),
            "{e}"
        );
        let c = cfg(&[
            "--enable-bpf-masquerade=true",
            "--kube-proxy-replacement=true",
        ])
        .unwrap();
        assert!(c.bpf_masquerade && c.enable_node_port);
        // nothing to masquerade, nothing required
        cfg(&[
            "--enable-bpf-masquerade=true",
            "--enable-ipv4-masquerade=false",
        ])
        .unwrap();
    }

    #[test]
    fn ipv6_native_routing_with_masquerading_needs_the_ipv6_native_routing_cidr() {
        let native = [
            "--routing-mode=native",
            "--ipv4-native-routing-cidr=10.0.0.0/8",
        ];
        let with = |extra: &[&str]| {
            let mut args = native.to_vec();
            args.push("--enable-ipv6=true");
            args.extend_from_slice(extra);
            cfg(&args)
        };
        assert_eq!(
            with(&[]).unwrap_err().to_string(),
            "native routing cidr must be configured with option --ipv6-native-routing-cidr \
             in combination with --enable-ipv6=true --enable-ipv6-masquerade=true --routing-mode=native"
        );
        assert!(with(&["--enable-ipv6-masquerade=false"]).is_ok());
        let c = with(&["--ipv6-native-routing-cidr=fd00::/104"]).unwrap();
        assert_eq!(
            c.ipv6_native_routing_cidr,
            Some(("fd00::".parse().unwrap(), 104))
        );
        let e = with(&["--ipv6-native-routing-cidr=fd00::1/104"]).unwrap_err();
        assert!(e.to_string().contains("ipv6-native-routing-cidr"), "{e}");
        // IPv4-only: the key is not needed
        assert!(cfg(&native).is_ok());
    }

    #[test]
    fn native_routing_with_masquerading_needs_the_native_routing_cidr() {
        let e = cfg(&["--routing-mode=native"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "native routing cidr must be configured with option --ipv4-native-routing-cidr \
             in combination with --enable-ipv4-masquerade=true --routing-mode=native"
        );
        assert!(cfg(&["--routing-mode=native", "--enable-ipv4-masquerade=false"]).is_ok());
        let c = cfg(&[
            "--routing-mode=native",
            "--ipv4-native-routing-cidr=10.0.0.0/8",
            "--auto-direct-node-routes=true",
        ])
        .unwrap();
        assert!(c.auto_direct_node_routes && !c.tunneling());
        assert_eq!(
            c.ipv4_native_routing_cidr,
            Some((Ipv4Addr::new(10, 0, 0, 0), 8))
        );
        assert!(
            !cfg(&[]).unwrap().auto_direct_node_routes,
            "Cilium's default"
        );
    }

    #[test]
    fn host_routing_is_bpf_where_cilium_chooses_it() {
        let kpr = "--kube-proxy-replacement=true";
        let bpf_masq = "--enable-bpf-masquerade=true";
        assert!(cfg(&[kpr, bpf_masq]).unwrap().host_routing.is_bpf());
        assert!(cfg(&[kpr, "--enable-ipv4-masquerade=false"])
            .unwrap()
            .host_routing
            .is_bpf());
        let legacy = |args: &[&str]| match cfg(args).unwrap().host_routing {
            HostRouting::Legacy { why } => why,
            HostRouting::Bpf => panic!("{args:?} chose BPF host routing"),
        };
        assert_eq!(
            legacy(&[kpr]).as_deref(),
            Some("BPF host routing requires enable-bpf-masquerade."),
            "iptables masquerading (the default) needs the stack"
        );
        assert_eq!(
            legacy(&["--enable-ipv4-masquerade=false"]).as_deref(),
            Some("BPF host routing requires kube-proxy-replacement=true.")
        );
        assert_eq!(
            legacy(&[kpr, bpf_masq, "--enable-host-legacy-routing=true"]),
            None,
            "asked for"
        );
        assert_eq!(cfg(&[kpr, bpf_masq]).unwrap().host_routing.as_str(), "BPF");
    }

    #[test]
    fn kube_proxy_replacement_brings_node_port_and_socket_lb() {
        let c = cfg(&[]).unwrap();
        assert!(!c.socket_lb && !c.enable_node_port);
        assert_eq!(c.node_port_range, (30000, 32767));
        assert_eq!(c.cgroup_root, PathBuf::from("/run/cilium/cgroupv2"));
        let c = cfg(&[
            "--kube-proxy-replacement=true",
            "--node-port-range=20000-20100",
        ])
        .unwrap();
        assert!(c.socket_lb && c.enable_node_port && c.enable_host_port);
        assert_eq!(c.node_port_range, (20000, 20100));
        assert!(cfg(&["--bpf-lb-sock=true"]).unwrap().socket_lb);
    }

    #[test]
    fn kubernetes_is_used_when_configured_or_in_a_pod() {
        let k = |a: &[&str], in_pod| {
            let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
            kubernetes(&load(&args, |_| None).unwrap(), in_pod)
        };
        assert!(k(&[], false).is_none());
        let kc = k(
            &[
                "--k8s-kubeconfig-path=/etc/kubeconfig",
                "--k8s-client-qps=10",
                "--k8s-client-burst=20",
            ],
            false,
        )
        .unwrap();
        assert_eq!((kc.qps, kc.burst), (10.0, 20));
        assert_eq!(
            kc.kubeconfig.as_deref(),
            Some(std::path::Path::new("/etc/kubeconfig"))
        );
        let server = k(&["--k8s-api-server=https://198.18.0.1:6443"], false).unwrap();
        assert_eq!(
            server.api_server.as_deref(),
            Some("https://198.18.0.1:6443")
        );
        let pod = k(&[], true).unwrap();
        assert!(
            pod.kubeconfig.is_none() && pod.api_server.is_none(),
            "in-cluster"
        );
        assert_eq!((pod.qps, pod.burst), (0.0, 0), "client-go's defaults");
        assert!(cfg(&["--k8s-client-qps=fast"]).is_err());
    }
}
