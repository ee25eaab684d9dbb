//! The composition root: the agent's startup sequence (seed 003's
//! runDaemon, for the parts that exist), building each subsystem from the
//! handles it uses and the REST API from each subsystem's routes. This is
//! the only module that sees all of the agent.

use crate::monitor::Hub;
use crate::option::runtime::RuntimeOptions;
use crate::option::DaemonConfig;
use crate::pidfile::PidFile;
use anyhow::Context;
use controlplane::controller::Controllers;
use controlplane::ipam::Ipam;
use controlplane::ipcache::IpCache;
use controlplane::ports::NodeRoutes;
use controlplane::tasks::Tasks;
use controlplane::{ControlPlane, Ports, Settings};
use datapath::maps::RuntimeConfig;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What `main` serves and stops; everything else lives in the subsystems
/// and the tasks they started.
pub struct Agent {
    pub config: Arc<DaemonConfig>,
    /// Events for `cilium monitor` and Hubble.
    pub monitor: Arc<Hub>,
    /// What Hubble's servers serve; None unless `enable-hubble`.
    pub hubble: Option<crate::hubble::Services>,
    pub status: Arc<crate::status::AgentStatus>,
    pub metrics: Arc<crate::metrics::Sources>,
    pub controllers: Controllers,
    /// cilium-health, served on `health.sock`; None when off.
    pub cluster_health: Option<Arc<crate::cluster_health::ClusterHealth>>,
    /// The REST API, from every subsystem's routes.
    pub api: axum::Router,
    _pid: PidFile,
}

const KVSTORE_HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Loopback and Cilium's own devices, which never carry the node's address.
fn not_a_node_device(name: &str) -> bool {
    name == "lo" || name.starts_with("cilium_") || name.starts_with("lxc")
}

/// First global IPv4 address on a device that is not ours or loopback.
async fn detect_node_ip(nl: &netdev::Netlink) -> Result<Option<Ipv4Addr>, netdev::Error> {
    let links = nl.links().await?;
    for (index, ip, _) in nl.ipv4_addrs(None).await? {
        let name = links
            .iter()
            .find(|l| l.index == index)
            .map(|l| l.name.as_str())
            .unwrap_or("");
        if !not_a_node_device(name) && !ip.is_loopback() && !ip.is_link_local() {
            return Ok(Some(ip));
        }
    }
    Ok(None)
}

/// The device that carries the node's IPv4 address (the native device),
/// if there is one.
async fn device_of(
    nl: &netdev::Netlink,
    node_ip: Option<Ipv4Addr>,
) -> Result<Option<u32>, netdev::Error> {
    let Some(ip) = node_ip else { return Ok(None) };
    Ok(nl
        .ipv4_addrs(None)
        .await?
        .into_iter()
        .find(|(_, a, _)| *a == ip)
        .map(|(i, _, _)| i))
}

/// The node's IPv6 address: the first global one on the native device,
/// or on any device not Cilium's when there is no native device yet (an
/// IPv6-only node); link-local and loopback ones do not count.
async fn detect_node_ipv6(
    nl: &netdev::Netlink,
    native: Option<u32>,
) -> Result<Option<std::net::Ipv6Addr>, netdev::Error> {
    let links = nl.links().await?;
    let ours = |index: u32| {
        links
            .iter()
            .find(|l| l.index == index)
            .is_some_and(|l| not_a_node_device(&l.name))
    };
    Ok(nl
        .ipv6_addrs(native)
        .await?
        .into_iter()
        .filter(|(index, _, _)| !ours(*index))
        .map(|(_, a, _)| a)
        .find(|a| !a.is_loopback() && !a.is_unicast_link_local()))
}

/// The device that carries the node's IPv6 address.
async fn device_of6(
    nl: &netdev::Netlink,
    ip: std::net::Ipv6Addr,
) -> Result<Option<u32>, netdev::Error> {
    Ok(nl
        .ipv6_addrs(None)
        .await?
        .into_iter()
        .find(|(_, a, _)| *a == ip)
        .map(|(i, _, _)| i))
}

/// Brings the node up: dirs, pid file, bpffs, sysctls, maps, devices, host
/// entries. Returns once the agent is ready to serve.
pub async fn start(mut config: DaemonConfig, tasks: Tasks) -> anyhow::Result<Agent> {
    let t0 = Instant::now();
    // the BPF loader's one-time set-up overlaps with what comes before the
    // first load (Kubernetes, IPAM, devices)
    std::thread::spawn(datapath::loader::prepare);
    for dir in [&config.run_dir, &config.state_dir] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let pid = PidFile::write(&config.pid_file())
        .with_context(|| format!("writing pid file {}", config.pid_file().display()))?;

    let kubernetes = match &config.kubernetes {
        Some(opts) => {
            let k = crate::k8s::connection::Kubernetes::connect(opts)
                .await
                .context("connecting to Kubernetes")?;
            k.probe(&tasks);
            Some(k)
        }
        None => None,
    };
    use crate::option::modes::IpamMode;
    let families = config.families();
    let pod_cidr = match (config.ipam_mode, &kubernetes) {
        (IpamMode::Kubernetes, None) => {
            anyhow::bail!("ipam=kubernetes needs the Kubernetes API server")
        }
        (IpamMode::Kubernetes, Some(k)) => Some(
            crate::k8s::nodes::wait_pod_cidr(k, &config.node_name, families)
                .await
                .context("waiting for the node's pod CIDR (ipam=kubernetes)")?,
        ),
        // Without an API server there is no operator: the pool is the
        // node's own ipv4-range, as in kvstore mode.
        (IpamMode::ClusterPool, Some(k)) => Some(
            crate::k8s::nodes::wait_cluster_pool_cidr(k, &config.node_name, families)
                .await
                .context("waiting for the node's pod CIDR (ipam=cluster-pool)")?,
        ),
        _ => None,
    };
    if let Some(cidrs) = pod_cidr {
        use controlplane::plane::Pool;
        if let Some((net, len)) = cidrs.v4 {
            tracing::info!(subsys = "ipam", ipam = config.ipam_mode.as_str(), podCIDR = %format!("{net}/{len}"), "Pod CIDR of this node");
            config.ipv4 = Some(Pool::first_router((net, len)));
        }
        if let Some((net, len)) = cidrs.v6 {
            tracing::info!(subsys = "ipam", ipam = config.ipam_mode.as_str(), podCIDR = %format!("{net}/{len}"), "IPv6 pod CIDR of this node");
            config.ipv6 = Some(Pool::first_router((net, len)));
        }
    }

    if datapath::bpffs::ensure_mounted(&config.bpf_root).context("preparing bpffs")? {
        tracing::info!(subsys = "daemon", path = %config.bpf_root.display(), "Mounted bpffs");
    }
    netdev::sysctl::use_procfs(&config.procfs);
    // the node forwards IPv4 whatever its pods run: the overlay's
    // underlay is IPv4 (as in 1.16)
    netdev::sysctl::enable_ipv4_forwarding().context("enabling IP forwarding")?;
    if config.ipv6.is_some() {
        netdev::sysctl::enable_ipv6_forwarding().context("enabling IPv6 forwarding")?;
    }

    let sizes = datapath::MapSizes {
        ct_tcp: config.ct_tcp_max,
        ct_any: config.ct_any_max,
        frag: config.frag_max,
        ipv6: config.ipv6.is_some(),
    };
    let mut dp = datapath::Datapath::init(&config.bpf_root, &sizes)
        .context("initialising BPF maps and programs")?;
    tracing::info!(
        subsys = "datapath",
        maps = dp.map_names().len(),
        "BPF maps ready"
    );
    let template = datapath::templates::install(&config.state_dir).with_context(|| {
        format!(
            "writing the datapath template under {}",
            config.state_dir.display()
        )
    })?;
    tracing::debug!(subsys = "datapath", template = %template, "Datapath template ready");

    let nl = netdev::Netlink::connect().context("opening netlink")?;
    let host = netdev::host::ensure_host_devices(&nl, config.mtu)
        .await
        .context("setting up cilium_host")?;
    if let Some(v4) = config.ipv4 {
        netdev::host::ensure_host_ipv4(
            &nl,
            host.host.index,
            v4.router_ip,
            v4.pod_cidr,
            config.route_mtu(),
        )
        .await
        .context("setting up cilium_host for IPv4")?;
    }
    if let Some(v6) = config.ipv6 {
        netdev::host::ensure_host_ipv6(
            &nl,
            host.host.index,
            v6.router_ip,
            v6.pod_cidr,
            config.route_mtu(),
        )
        .await
        .context("setting up cilium_host for IPv6")?;
    }
    RuntimeConfig::open(&config.bpf_root)?.set_router_ipv6(config.ipv6.map(|p| p.router_ip))?;
    if !config.enable_tcx {
        dp.set_attach_mode(datapath::attach::AttachMode::Tc);
    }
    let attach_mode = dp
        .attach_host_device(netdev::CILIUM_HOST)
        .context("attaching cil_from_host to cilium_host")?;
    if config.tunneling() {
        setup_overlay(&nl, &mut dp, &config).await?;
    } else {
        setup_native_routing(&nl, &config).await?;
    }
    // an IPv6-only node in native routing names itself by IPv6 alone (the
    // overlay's underlay is IPv4, so a tunnelling one still needs IPv4)
    let node_ip = match config.node_ip {
        Some(ip) => Some(ip),
        None if config.ipv4.is_none() && !config.tunneling() => None,
        None => detect_node_ip(&nl).await.context("detecting the node IP")?,
    };
    tracing::info!(
        subsys = "daemon",
        routerIPv4 = %config.ipv4.map(|p| p.router_ip.to_string()).unwrap_or_default(),
        podCIDR = %config.pod_cidr().unwrap_or_default(),
        nodeIPv4 = %node_ip.map(|i| i.to_string()).unwrap_or_else(|| "none".into()),
        "Node addressing"
    );

    // what NodePort attaches to and the node's IPv6 address is read from
    let native = if config.enable_node_port || config.ipv6.is_some() {
        device_of(&nl, node_ip)
            .await
            .context("finding the native device")?
    } else {
        None
    };
    let node_ipv6 = match config.ipv6 {
        Some(_) => detect_node_ipv6(&nl, native)
            .await
            .context("detecting the node's IPv6 address")?,
        None => None,
    };
    // without an IPv4 address, the device of the IPv6 one
    let native = match (native, node_ipv6) {
        (None, Some(ip)) => device_of6(&nl, ip)
            .await
            .context("finding the native device")?,
        (native, _) => native,
    };
    let native_device = if config.enable_node_port {
        Some(setup_node_port(&nl, &mut dp, &config, native).await?)
    } else {
        None
    };
    // NodePort replies of this node's IPv6 backends leave from it
    RuntimeConfig::open(&config.bpf_root)?.set_node_ipv6(node_ipv6)?;
    if node_ipv6.is_some() {
        tracing::info!(subsys = "daemon", nodeIPv6 = %node_ipv6.map(|i| i.to_string()).unwrap_or_default(), "Node IPv6 address");
    }
    let host_ips: Vec<std::net::IpAddr> = (config.ipv4.map(|p| p.router_ip))
        .into_iter()
        .chain(node_ip)
        .map(std::net::IpAddr::from)
        .chain(config.ipv6.map(|p| p.router_ip.into()))
        .chain(node_ipv6.map(std::net::IpAddr::from))
        .collect();
    set_host_routing(&config)?;
    write_utime_offset(&config.bpf_root)?;
    write_lb_config(&config)?;
    setup_socket_lb(&config, &sizes)?;

    let node = local_node(&config, node_ip, node_ipv6);
    let kv = match &config.kvstore {
        Some(kc) => Some(connect_kvstore(kc).await?),
        None => None,
    };

    let runtime = RuntimeOptions::new(
        config.debug,
        config.monitor_aggregation,
        config.policy_enforcement,
    );
    crate::kernel::set_monitor_aggregation(&config.bpf_root, config.monitor_aggregation)?;
    write_events_config(&config.bpf_root, &config.events)?;
    RuntimeConfig::open(&config.bpf_root)?.set_fragments_disabled(!config.fragment_tracking)?;
    let monitor = Arc::new(Hub::default());
    let config = Arc::new(config);

    let node_routes: Option<Arc<dyn NodeRoutes>> = if config.tunneling() {
        Some(Arc::new(crate::kernel::OverlayRoutes {
            bpf_root: config.bpf_root.clone(),
            netlink: nl.clone(),
            host_index: host.host.index,
            router_ip: config.ipv4.map(|p| p.router_ip),
            router_ip6: config.ipv6.map(|p| p.router_ip),
            route_mtu: config.route_mtu(),
        }))
    } else if config.auto_direct_node_routes {
        Some(Arc::new(crate::kernel::DirectRoutes {
            netlink: nl.clone(),
        }))
    } else {
        None
    };
    let ports = Ports {
        ipcache: Arc::new(crate::kernel::IpcacheWriter {
            bpf_root: config.bpf_root.clone(),
        }),
        endpoints: Arc::new(crate::kernel::Endpoints::new(
            config.bpf_root.clone(),
            Arc::new(Mutex::new(dp)),
            attach_mode,
            template,
        )),
        lb: Arc::new(crate::kernel::LoadBalancer {
            bpf_root: config.bpf_root.clone(),
        }),
        node_routes,
        node_ids: Arc::new(crate::kernel::NodeIdWriter {
            bpf_root: config.bpf_root.clone(),
        }),
        events: monitor.clone(),
    };
    let pod_cache = kubernetes
        .as_ref()
        .map(|k| crate::k8s::pods::PodCache::new(k, &config.cluster_name));
    let cilium_identities =
        crate::k8s::identities::backend(config.identity_allocation_mode, kubernetes.as_ref());
    let settings = Settings {
        state_dir: config.state_dir.clone(),
        ipv4: config.ipv4,
        ipv6: config.ipv6,
        node,
        health: config.health.endpoint,
        node_ip: node_ip
            .map(std::net::IpAddr::from)
            .or(node_ipv6.map(Into::into)),
        kvstore: kv.clone(),
        cluster: config.cluster_name.clone(),
        maglev: config.maglev,
        enforcement: config.policy_enforcement,
        kubernetes: kubernetes.is_some(),
        identity_objects: cilium_identities
            .clone()
            .map(|o| o as Arc<dyn controlplane::identity::objects::IdentityObjects>),
        pod_labels: pod_cache
            .clone()
            .map(|c| c as Arc<dyn controlplane::endpoint::PodLabels>),
    };
    let cp = ControlPlane::new(ports, settings, &tasks)?;
    let hubble = config.hubble.as_ref().map(|h| {
        let resolver = crate::hubble::ControlPlaneResolver::new(
            Arc::clone(&cp.endpoints),
            Arc::clone(&cp.identities),
            Arc::clone(&cp.ipcache),
            Arc::clone(&cp.services),
            monitor.clone(),
            config.cgroup_root.clone(),
        )
        .with_workloads(
            pod_cache
                .clone()
                .map(|c| c as Arc<dyn crate::hubble::PodWorkloads>),
        );
        let observer = Arc::new(
            crate::hubble::Observer::new(
                h.capacity,
                &config.cluster_name,
                &config.node_name,
                Arc::new(resolver),
            )
            .with_metrics(h.metrics.as_ref().map(|(_, m)| Arc::clone(m))),
        );
        if let Err(e) = monitor.attach_observer(Arc::clone(&observer), h.queue_size) {
            tracing::warn!(subsys = "hubble", error = %e, "Unable to start the observer's thread; Hubble gets no events");
        }
        let reach = crate::hubble::Reach {
            port: h.listen.map(|a| a.port()),
            tls: !h.disable_tls,
        };
        crate::hubble::Services {
            observer,
            peer: crate::hubble::PeerService::new(cp.nodes.clone(), reach, tasks.clone()),
        }
    });
    let host_endpoint = cp
        .endpoints
        .ensure_host(&host.host.name, &abi::endpoint::format_mac(&host.host.mac))
        .context("creating the host endpoint")?;
    tracing::debug!(
        subsys = "daemon",
        endpointID = host_endpoint,
        "Host endpoint ready"
    );
    if let Some(kv) = &kv {
        // registered once the control plane has given it a health address
        let node = cp.nodes.local();
        let key = kvstore::keys::node(&config.cluster_name, &node.name);
        let body = serde_json::to_vec(node).expect("node serializes");
        kv.put_leased(&key, &body)
            .await
            .context("registering the node in the kvstore")?;
        tracing::info!(subsys = "nodediscovery", node = %node.name, key = %key, "Node registered in kvstore");
    }
    crate::hostips::sync(&config.bpf_root, &cp.ipcache, &host_ips, config.families())
        .context("syncing host IPs into BPF maps")?;
    let ct_gc = Arc::new(crate::ct_gc::GcCounters::default());
    crate::ct_gc::start(
        &tasks,
        config.bpf_root.clone(),
        Arc::clone(&ct_gc),
        config.ct_gc_interval,
        config.ct_gc_max_interval,
    );
    cp.start(&tasks);
    if let Some(k) = &kubernetes {
        if let Some(store) = &cilium_identities {
            crate::k8s::identities::follow(
                &cp.identities,
                store,
                config.kvstore_periodic_sync,
                k,
                &tasks,
            );
        }
        crate::k8s::policies::follow(&cp.policies, k, &tasks);
        if let Some(cache) = &pod_cache {
            let endpoints = Arc::clone(&cp.endpoints);
            crate::k8s::pods::follow(cache, endpoints, k, &config.node_name, &tasks);
        }
        crate::k8s::nodes::follow_own_labels(
            Arc::clone(&cp.endpoints),
            k,
            &config.node_name,
            &tasks,
        );
        // a CEP names its node by the address of the node's first family
        let cep_node_ip = match config.ipv4 {
            Some(_) => node_ip.map(std::net::IpAddr::from),
            None => node_ipv6.map(std::net::IpAddr::from),
        };
        crate::k8s::endpoints::mirror(Arc::clone(&cp.endpoints), k, cep_node_ip, &tasks);
        let learner = cp.remote_endpoints(controlplane::ipcache::Source::CustomResource);
        crate::k8s::endpoints::follow_remote(learner, k, &tasks);
        crate::k8s::nodes::register(k, cp.nodes.local().clone(), &tasks);
        crate::k8s::nodes::follow(Arc::clone(&cp.nodes), k, &tasks);
        let scope = crate::k8s::services::Scope {
            node_name: config.node_name.clone(),
            node_port: config.enable_node_port,
            ipv4: config.ipv4.is_some(),
            ipv6: config.ipv6.is_some(),
        };
        crate::k8s::services::follow(Arc::clone(&cp.services), scope, k, &tasks);
        if let Some(node_ip) = node_ip.filter(|_| config.enable_host_port) {
            let scope = crate::k8s::hostports::Scope {
                node_name: config.node_name.clone(),
                node_ip,
                node_port_range: config.node_port_range,
            };
            crate::k8s::hostports::follow(Arc::clone(&cp.services), scope, k, &tasks);
        }
    }
    let controllers = Controllers::new(tasks.clone());
    start_controllers(
        &controllers,
        &config,
        &cp.ipcache,
        cp.ipam.as_ref(),
        cp.ipam6.as_ref(),
        kv.clone(),
        host_ips,
    );

    let cluster_health = crate::cluster_health::start(
        crate::cluster_health::Deps {
            config: &config,
            nodes: Arc::clone(&cp.nodes),
            endpoints: Arc::clone(&cp.endpoints),
            ipam: cp.ipam.clone(),
            ipam6: cp.ipam6.clone(),
            node_ip,
            node_ipv6,
        },
        &tasks,
        &controllers,
    )
    .await;
    let masquerading = crate::masquerade::setup(&config, node_ip, node_ipv6);
    let status = Arc::new(crate::status::AgentStatus {
        config: Arc::clone(&config),
        controllers: controllers.clone(),
        ipam: cp.ipam.clone(),
        ipam6: cp.ipam6.clone(),
        kvstore: kv.clone(),
        monitor: Arc::clone(&monitor),
        node_name: config.node_name.clone(),
        node_ip,
        attach_mode,
        native_device,
        kubernetes,
        masquerading,
        cluster_health: cluster_health.clone(),
    });
    let metrics = Arc::new(crate::metrics::Sources {
        bpf_root: config.bpf_root.clone(),
        ct_gc,
        endpoints: Arc::clone(&cp.endpoints),
        monitor: Arc::clone(&monitor),
        policies: Arc::clone(&cp.policies),
        services: Arc::clone(&cp.services),
        health: cluster_health.as_ref().map(|h| Arc::clone(&h.prober)),
    });
    let api = crate::api::server::router([
        crate::status::routes(Arc::clone(&status)),
        crate::api::config::routes(Arc::new(crate::api::config::ConfigApi {
            config: Arc::clone(&config),
            runtime: Mutex::new(runtime),
            policies: Arc::clone(&cp.policies),
            endpoints: Arc::clone(&cp.endpoints),
        })),
        crate::api::debuginfo::routes(Arc::new(crate::api::debuginfo::Sources {
            status: Arc::clone(&status),
            endpoints: Arc::clone(&cp.endpoints),
            ipam: cp.ipam.clone(),
            ipam6: cp.ipam6.clone(),
            policies: Arc::clone(&cp.policies),
            services: Arc::clone(&cp.services),
        })),
        crate::api::ipam::routes(Arc::new(crate::api::ipam::IpamApi {
            config: Arc::clone(&config),
            ipam: cp.ipam.clone(),
            ipam6: cp.ipam6.clone(),
        })),
        crate::api::map::routes(Arc::new(crate::api::map::MapApi {
            bpf_root: config.bpf_root.clone(),
            ipcache: Arc::clone(&cp.ipcache),
            endpoints: Arc::clone(&cp.endpoints),
        })),
        crate::api::nodes::routes(Arc::clone(&cp.nodes), Arc::clone(&cp.node_ids)),
        crate::api::identity::routes(Arc::new(crate::api::identity::IdentityApi {
            identities: Arc::clone(&cp.identities),
            endpoints: Arc::clone(&cp.endpoints),
        })),
        crate::api::features_off::routes(),
        crate::api::service::routes(Arc::clone(&cp.services)),
        crate::api::policy::routes(Arc::new(crate::api::policy::PolicyApi {
            bpf_root: config.bpf_root.clone(),
            policies: Arc::clone(&cp.policies),
            endpoints: Arc::clone(&cp.endpoints),
            identities: Arc::clone(&cp.identities),
            ipcache: Arc::clone(&cp.ipcache),
            kvstore: kv,
        })),
        crate::metrics::routes(Arc::clone(&metrics)),
        crate::api::endpoint::routes(Arc::clone(&cp.endpoints)),
        crate::statedb::routes(Arc::new(crate::statedb::StateDb::new(
            crate::statedb::Sources {
                status: Arc::clone(&status),
                endpoints: Arc::clone(&cp.endpoints),
                netlink: nl.clone(),
                started: std::time::SystemTime::now(),
            },
        ))),
    ]);
    tracing::info!(subsys = "daemon", bootstrapTime = ?t0.elapsed(), "Daemon initialization completed");
    monitor.agent(
        crate::monitor::AgentNotify::Start,
        serde_json::json!({ "version": env!("CARGO_PKG_VERSION") }),
    );
    Ok(Agent {
        config,
        monitor,
        hubble,
        status,
        metrics,
        controllers,
        cluster_health,
        api,
        _pid: pid,
    })
}

/// BPF host routing on or off in the datapath (set either way: the pinned
/// runtime config outlives an agent started before with the other).
fn set_host_routing(config: &DaemonConfig) -> anyhow::Result<()> {
    if let crate::option::HostRouting::Legacy { why: Some(why) } = &config.host_routing {
        tracing::info!(
            subsys = "daemon",
            "{why} Falling back to legacy host routing (enable-host-legacy-routing=true)."
        );
    }
    RuntimeConfig::open(&config.bpf_root)?
        .set_host_routing(config.host_routing.is_bpf())
        .context("writing the host routing mode")
}

/// cil_from_netdev on the device that carries the node's address, which
/// NodePort replies leave through.
async fn setup_node_port(
    nl: &netdev::Netlink,
    dp: &mut datapath::Datapath,
    config: &DaemonConfig,
    native: Option<u32>,
) -> anyhow::Result<String> {
    let index = native
        .context("NodePort needs the node's address on a device (none found; set ipv4-node)")?;
    let link = nl
        .links()
        .await?
        .into_iter()
        .find(|l| l.index == index)
        .with_context(|| format!("device {index} vanished"))?;
    dp.attach_native_device(&link.name)
        .with_context(|| format!("attaching cil_from_netdev to {}", link.name))?;
    RuntimeConfig::open(&config.bpf_root)?.set_native_ifindex(index)?;
    tracing::info!(subsys = "datapath", device = %link.name, "NodePort enabled on native device");
    Ok(link.name)
}

/// cilium_vxlan with cil_from_overlay on it, and the facts the datapath
/// needs to encapsulate: the device's ifindex and the pod CIDR mask.
async fn setup_overlay(
    nl: &netdev::Netlink,
    dp: &mut datapath::Datapath,
    config: &DaemonConfig,
) -> anyhow::Result<()> {
    let vxlan = netdev::vxlan::ensure_vxlan_device(
        nl,
        config.tunnel_port,
        config.mtu,
        config.ipv6.is_some(),
    )
    .await
    .context("setting up cilium_vxlan")?;
    dp.attach_overlay_device(netdev::vxlan::CILIUM_VXLAN)
        .context("attaching cil_from_overlay to cilium_vxlan")?;
    let map = RuntimeConfig::open(&config.bpf_root)?;
    map.set_encap_ifindex(vxlan.index)?;
    if let Some(v4) = config.ipv4 {
        map.set_ipv4_mask(v4.pod_cidr.1)?;
    }
    tracing::info!(
        subsys = "datapath",
        device = netdev::vxlan::CILIUM_VXLAN,
        port = config.tunnel_port,
        "Overlay ready"
    );
    Ok(())
}

/// Native routing: nothing is encapsulated. The datapath learns that
/// from an encap ifindex of 0, which also undoes what an earlier
/// tunnel-mode run set in the pinned runtime config, and the overlay
/// device such a run left goes.
async fn setup_native_routing(nl: &netdev::Netlink, config: &DaemonConfig) -> anyhow::Result<()> {
    RuntimeConfig::open(&config.bpf_root)?.set_encap_ifindex(0)?;
    if netdev::vxlan::remove_vxlan_device(nl)
        .await
        .context("removing the overlay device of tunnel mode")?
    {
        tracing::info!(
            subsys = "datapath",
            device = netdev::vxlan::CILIUM_VXLAN,
            "Removed the overlay device: routing-mode is native"
        );
    }
    tracing::info!(
        subsys = "datapath",
        autoDirectNodeRoutes = config.auto_direct_node_routes,
        nativeRoutingCIDR = %config.ipv4_native_routing_cidr.map(|(n, l)| format!("{n}/{l}")).unwrap_or_default(),
        ipv6NativeRoutingCIDR = %config.ipv6_native_routing_cidr.map(|(n, l)| format!("{n}/{l}")).unwrap_or_default(),
        "Native routing: pods on other nodes are reached without encapsulation"
    );
    Ok(())
}

/// This node as Cilium publishes it: underlay and router addresses, pod CIDR.
fn local_node(
    config: &DaemonConfig,
    node_ip: Option<Ipv4Addr>,
    node_ipv6: Option<std::net::Ipv6Addr>,
) -> controlplane::nodes::Node {
    use controlplane::nodes::{IpNet, Node, NodeAddress};
    let mut addresses: Vec<NodeAddress> = node_ip
        .map(std::net::IpAddr::from)
        .into_iter()
        .chain(node_ipv6.map(std::net::IpAddr::from))
        .map(|ip| NodeAddress {
            kind: "InternalIP".into(),
            ip: ip.to_string(),
        })
        .collect();
    let routers = (config.ipv4.map(|p| std::net::IpAddr::from(p.router_ip)))
        .into_iter()
        .chain(config.ipv6.map(|p| p.router_ip.into()));
    addresses.extend(routers.map(|ip| NodeAddress {
        kind: "CiliumInternalIP".into(),
        ip: ip.to_string(),
    }));
    Node {
        name: config.node_name.clone(),
        cluster: config.cluster_name.clone(),
        addresses,
        ipv4_alloc_cidr: config.ipv4.map(|p| IpNet::v4(p.pod_cidr.0, p.pod_cidr.1)),
        ipv6_alloc_cidr: config.ipv6.map(|p| IpNet::v6(p.pod_cidr.0, p.pod_cidr.1)),
        health_ipv4: None,
        health_ipv6: None,
        cluster_id: config.cluster_id,
        source: "local".into(),
    }
}

/// Connects to etcd, retrying for a while as Cilium does at start.
async fn connect_kvstore(
    kc: &crate::option::kvstore::KvstoreConfig,
) -> anyhow::Result<kvstore::Kvstore> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match kvstore::Kvstore::connect(&kc.endpoints, kc.lease_ttl).await {
            Ok(kv) => {
                tracing::info!(subsys = "kvstore", endpoints = ?kc.endpoints, leaseID = kv.lease_id(), "Connected to etcd");
                return Ok(kv);
            }
            Err(e) if Instant::now() < deadline => {
                tracing::info!(subsys = "kvstore", error = %e, "Waiting for etcd");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(anyhow::anyhow!(e).context("connecting to the kvstore")),
        }
    }
}

/// How NodePort picks backends, for the datapath.
fn write_lb_config(config: &DaemonConfig) -> anyhow::Result<()> {
    use datapath::maps::LbAlgorithm;
    let map = RuntimeConfig::open(&config.bpf_root)?;
    map.set_lb_algorithm(if config.maglev.is_some() {
        LbAlgorithm::Maglev
    } else {
        LbAlgorithm::Random
    })?;
    map.set_maglev_seed4(config.maglev_seeds.hash4)?;
    map.set_maglev_seed6(config.maglev_seeds.hash6)?;
    let (first, last) = config.node_port_range;
    map.set_nodeport_range(first, last)?;
    Ok(())
}

/// bpf_sock on the cgroup root, or no socket LB links left from an
/// earlier run that had it.
fn setup_socket_lb(config: &DaemonConfig, sizes: &datapath::MapSizes) -> anyhow::Result<()> {
    if !config.socket_lb {
        datapath::socketlb::detach(&config.bpf_root);
        return Ok(());
    }
    let globals = config.bpf_root.join(abi::maps::GLOBALS_DIR);
    let cookie = datapath::socketlb::own_netns_cookie().context("reading the netns cookie")?;
    RuntimeConfig::open(&config.bpf_root)?.set_host_netns_cookie(cookie)?;
    let mut sock =
        datapath::socketlb::SocketLb::load(&globals, sizes).context("loading bpf_sock")?;
    sock.attach(&config.bpf_root, &config.cgroup_root)
        .with_context(|| {
            format!(
                "attaching socket LB to cgroup-root {}",
                config.cgroup_root.display()
            )
        })?;
    tracing::info!(subsys = "socketlb", cgroupRoot = %config.cgroup_root.display(), "Socket LB enabled");
    Ok(())
}

/// Tells the datapath which events to write and how many a second.
fn write_events_config(
    bpf_root: &std::path::Path,
    events: &crate::option::EventsConfig,
) -> anyhow::Result<()> {
    let map = RuntimeConfig::open(bpf_root)?;
    map.set_events_rate_limit(events.rate_limit, events.burst_limit)?;
    map.set_events_disabled(events.disabled_mask())?;
    map.set_debug_datapath(events.debug_datapath)?;
    Ok(())
}

/// Lets the datapath turn its monotonic timestamps into wall-clock time.
fn write_utime_offset(bpf_root: &std::path::Path) -> anyhow::Result<()> {
    let wall_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let offset = wall_ns.saturating_sub(monotonic_ns()) >> 9;
    RuntimeConfig::open(bpf_root)?.set_utime_offset(offset)?;
    Ok(())
}

fn start_controllers(
    controllers: &Controllers,
    config: &DaemonConfig,
    ipcache: &Arc<IpCache>,
    ipam: Option<&Arc<Mutex<Ipam>>>,
    ipam6: Option<&Arc<Mutex<Ipam<std::net::Ipv6Addr>>>>,
    kv: Option<kvstore::Kvstore>,
    host_ips: Vec<std::net::IpAddr>,
) {
    let root = config.bpf_root.clone();
    controllers.spawn(
        "agent-liveness-updater",
        Duration::from_secs(1),
        move || {
            let root = root.clone();
            async move {
                RuntimeConfig::open(&root)
                    .and_then(|map| map.set_agent_liveness(monotonic_ns()))
                    .map_err(|e| e.to_string())
            }
        },
    );
    let (root, ipcache) = (config.bpf_root.clone(), Arc::clone(ipcache));
    let stack = config.families();
    controllers.spawn("sync-host-ips", Duration::from_secs(60), move || {
        let result =
            crate::hostips::sync(&root, &ipcache, &host_ips, stack).map_err(|e| e.to_string());
        async move { result }
    });
    if let Some(kv) = kv {
        controllers.spawn(
            crate::status::KVSTORE_HEALTH,
            Duration::from_secs(2),
            move || {
                let kv = kv.clone();
                async move {
                    match tokio::time::timeout(
                        KVSTORE_HEALTH_TIMEOUT,
                        kv.get(kvstore::keys::HEARTBEAT),
                    )
                    .await
                    {
                        Ok(Ok(_)) => Ok(()),
                        Ok(Err(e)) => Err(e.to_string()),
                        Err(_) => Err(format!("no answer within {KVSTORE_HEALTH_TIMEOUT:?}")),
                    }
                }
            },
        );
    }
    let (ipam, ipam6) = (ipam.cloned(), ipam6.cloned());
    controllers.spawn("ipam-expiration", Duration::from_secs(10), move || {
        let expired = released_expired(ipam.as_deref()).and_then(|mut all| {
            all.extend(released_expired(ipam6.as_deref())?);
            Ok(all)
        });
        async move {
            for ip in expired? {
                tracing::info!(subsys = "ipam", ip = %ip, "Released expired allocation without endpoint");
            }
            Ok::<(), controlplane::ipam::IpamError>(())
        }
    });
}

/// The expired allocations of one family's IPAM, released.
fn released_expired<A: controlplane::ipam::PoolAddr>(
    ipam: Option<&Mutex<Ipam<A>>>,
) -> Result<Vec<std::net::IpAddr>, controlplane::ipam::IpamError> {
    let Some(ipam) = ipam else {
        return Ok(Vec::new());
    };
    let ips = ipam.lock().expect("ipam lock").release_expired()?;
    Ok(ips.into_iter().map(Into::into).collect())
}
