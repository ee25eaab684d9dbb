//! The agent's startup sequence (seed 003's runDaemon, for the parts that
//! exist) and the shared state the API serves.

use crate::controller::Controllers;
use crate::option::runtime::RuntimeOptions;
use crate::option::DaemonConfig;
use crate::pidfile::PidFile;
use anyhow::Context;
use datapath::maps::RuntimeConfig;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the API handlers and the status collector read.
pub struct Daemon {
    pub config: DaemonConfig,
    pub runtime: Mutex<RuntimeOptions>,
    pub controllers: Controllers,
    pub datapath: Mutex<datapath::Datapath>,
    pub host: netdev::HostDevices,
    pub attach_mode: datapath::attach::AttachMode,
    pub ipam: Mutex<crate::ipam::Ipam>,
    pub identities: Arc<crate::identity::Identities>,
    pub ipcache: crate::ipcache::IpCache,
    pub endpoints: Mutex<crate::endpoint::Endpoints>,
    /// This node as published to the cluster.
    pub node: crate::nodes::Node,
    pub nodes: Arc<crate::nodes::Nodes>,
    pub kvstore: Option<kvstore::Kvstore>,
    /// Writes this node's leased keys in order (None without a kvstore).
    pub kvwriter: Option<crate::kvwriter::KvWriter>,
    pub node_ip: Option<Ipv4Addr>,
    pub netlink: netdev::Netlink,
    pub services: crate::services::Services,
    pub policies: crate::policies::Policies,
    /// The device cil_from_netdev serves NodePorts on, when enabled.
    pub native_device: Option<String>,
    pub started: Instant,
    /// Events for `cilium monitor` and `cilium observe`.
    pub monitor: Arc<crate::monitor::Hub>,
    pub ct_gc: crate::ct_gc::GcCounters,
    /// The background tasks, stopped and waited for at shutdown.
    pub tasks: crate::tasks::Tasks,
    /// Asks for endpoint policy regeneration (one task serves them).
    pub regeneration: crate::regeneration::Regeneration,
}

/// Everything that must live until shutdown.
pub struct Running {
    pub daemon: Arc<Daemon>,
    _pid: PidFile,
}

/// The controller that checks etcd answers; `status` reports its failures.
pub const KVSTORE_HEALTH: &str = "kvstore-health";
const KVSTORE_HEALTH_TIMEOUT: Duration = Duration::from_secs(2);

/// Services of an agent without kvstore, relative to the state dir.
const SERVICES_STATE: &str = "services.json";

/// Policies of an agent without kvstore, relative to the state dir.
const POLICIES_STATE: &str = "policies.json";

/// IPAM allocations, relative to the state dir.
const IPAM_STATE: &str = "ipam-ipv4.json";

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// First global IPv4 address on a device that is not ours or loopback.
async fn detect_node_ip(nl: &netdev::Netlink) -> Result<Option<Ipv4Addr>, netdev::Error> {
    let links = nl.links().await?;
    let ours = |name: &str| name == "lo" || name.starts_with("cilium_") || name.starts_with("lxc");
    for (index, ip, _) in nl.ipv4_addrs(None).await? {
        let name = links
            .iter()
            .find(|l| l.index == index)
            .map(|l| l.name.as_str())
            .unwrap_or("");
        if !ours(name) && !ip.is_loopback() && !ip.is_link_local() {
            return Ok(Some(ip));
        }
    }
    Ok(None)
}

/// Brings the node up: dirs, pid file, bpffs, sysctls, maps, devices, host
/// entries. Returns once the agent is ready to serve.
pub async fn start(config: DaemonConfig, tasks: crate::tasks::Tasks) -> anyhow::Result<Running> {
    let t0 = Instant::now();
    for dir in [&config.run_dir, &config.state_dir] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let pid = PidFile::write(&config.pid_file())
        .with_context(|| format!("writing pid file {}", config.pid_file().display()))?;

    if datapath::bpffs::ensure_mounted(&config.bpf_root).context("preparing bpffs")? {
        tracing::info!(subsys = "daemon", path = %config.bpf_root.display(), "Mounted bpffs");
    }
    netdev::sysctl::enable_ipv4_forwarding().context("enabling IP forwarding")?;

    let sizes = datapath::MapSizes {
        ct_tcp: config.ct_tcp_max,
        ct_any: config.ct_any_max,
        frag: config.frag_max,
    };
    let mut dp = datapath::Datapath::init(&config.bpf_root, &sizes)
        .context("initialising BPF maps and programs")?;
    tracing::info!(
        subsys = "datapath",
        maps = dp.map_names().len(),
        "BPF maps ready"
    );

    let nl = netdev::Netlink::connect().context("opening netlink")?;
    let host = netdev::host::ensure_host_devices(&nl, config.router_ip, config.mtu)
        .await
        .context("setting up cilium_host")?;
    let (net, len) = config.ipv4_range;
    let local_pods = netdev::link::Route::new(host.host.index, net, len)
        .via(config.router_ip)
        .src(config.router_ip)
        .mtu(config.route_mtu());
    nl.replace_route(&local_pods)
        .await
        .context("installing the local pod CIDR route")?;
    if !config.enable_tcx {
        dp.set_attach_mode(datapath::attach::AttachMode::Tc);
    }
    let attach_mode = dp
        .attach_host_device(netdev::CILIUM_HOST)
        .context("attaching cil_from_host to cilium_host")?;
    if config.tunneling() {
        setup_overlay(&nl, &mut dp, &config).await?;
    }
    let node_ip = match config.node_ip {
        Some(ip) => Some(ip),
        None => detect_node_ip(&nl).await.context("detecting the node IP")?,
    };
    tracing::info!(
        subsys = "daemon",
        routerIPv4 = %config.router_ip,
        podCIDR = %config.pod_cidr(),
        nodeIPv4 = %node_ip.map(|i| i.to_string()).unwrap_or_else(|| "none".into()),
        "Node addressing"
    );

    let native_device = if config.enable_node_port {
        Some(setup_node_port(&nl, &mut dp, &config, node_ip).await?)
    } else {
        None
    };
    let host_ips: Vec<Ipv4Addr> = std::iter::once(config.router_ip).chain(node_ip).collect();
    let ipcache = crate::ipcache::IpCache::new(config.bpf_root.clone());
    crate::hostips::sync(&config.bpf_root, &ipcache, &host_ips)
        .context("syncing host IPs into BPF maps")?;
    let ipam = crate::ipam::Ipam::open(
        net,
        len,
        config.router_ip,
        config.state_dir.join(IPAM_STATE),
    )
    .context("opening IPAM")?;
    write_utime_offset(&config.bpf_root)?;
    write_lb_config(&config)?;
    setup_socket_lb(&config, &sizes)?;

    let node = local_node(&config, node_ip);
    let kv = match &config.kvstore {
        Some(kc) => Some(connect_kvstore(kc).await?),
        None => None,
    };
    if let Some(kv) = &kv {
        let key = kvstore::keys::node(&config.cluster_name, &node.name);
        let body = serde_json::to_vec(&node).expect("node serializes");
        kv.put_leased(&key, &body)
            .await
            .context("registering the node in the kvstore")?;
        tracing::info!(subsys = "nodediscovery", node = %node.name, key = %key, "Node registered in kvstore");
    }
    let kvwriter = kv
        .clone()
        .map(|kv| crate::kvwriter::KvWriter::start(kv, &tasks));
    let node_suffix = node_ip.map_or_else(|| node.name.clone(), |ip| ip.to_string());
    let identities =
        crate::identity::Identities::new(kv.clone().zip(kvwriter.clone()), node_suffix);
    identities.follow(&tasks);

    let runtime = RuntimeOptions::new(
        config.debug,
        &config.monitor_aggregation,
        &config.policy_enforcement,
    );
    write_monitor_aggregation(
        &config.bpf_root,
        runtime
            .options
            .get("MonitorAggregationLevel")
            .map(String::as_str)
            .unwrap_or("None"),
    )?;
    write_events_config(&config.bpf_root, &config.events)?;
    RuntimeConfig::open(&config.bpf_root)?.set_fragments_disabled(!config.fragment_tracking)?;
    let monitor = Arc::new(crate::monitor::Hub::default());
    let daemon = Arc::new(Daemon {
        runtime: Mutex::new(runtime),
        controllers: Controllers::new(tasks.clone()),
        datapath: Mutex::new(dp),
        host,
        attach_mode,
        ipam: Mutex::new(ipam),
        identities,
        ipcache,
        endpoints: Mutex::new(crate::endpoint::Endpoints::new(config.state_dir.clone())),
        node,
        nodes: Arc::default(),
        kvstore: kv,
        kvwriter,
        node_ip,
        netlink: nl,
        services: crate::services::Services::new(
            &config.bpf_root,
            config.maglev,
            config
                .kvstore
                .is_none()
                .then(|| config.state_dir.join(SERVICES_STATE)),
            Arc::clone(&monitor),
        ),
        native_device,
        policies: crate::policies::Policies::new(
            policy::Enforcement::parse(&config.policy_enforcement)
                .unwrap_or(policy::Enforcement::Default),
            // with a kvstore, a cache of the last desired state
            Some(config.state_dir.join(POLICIES_STATE)),
            config.kvstore.is_none(),
        ),
        started: t0,
        monitor,
        ct_gc: Default::default(),
        tasks,
        regeneration: Default::default(),
        config,
    });
    let restored = daemon.policies.restore();
    if restored > 0 {
        tracing::info!(subsys = "policy", restored, "Policies restored");
    }
    daemon
        .policies
        .sync_cidrs(&daemon.ipcache, &daemon.policies.rules().0);
    {
        let mut eps = daemon.endpoints.lock().expect("endpoints lock");
        let (restored, removed) = eps.restore(&daemon);
        tracing::info!(subsys = "daemon", restored, removed, "Endpoints restored");
    }
    let restored = daemon.services.restore();
    if restored > 0 {
        tracing::info!(subsys = "service", restored, "Services restored");
    }
    if daemon.kvstore.is_none() {
        // with a kvstore, the initial list is the desired state
        daemon.services.sweep();
    }
    crate::ct_gc::start(
        &daemon,
        daemon.config.ct_gc_interval,
        daemon.config.ct_gc_max_interval,
    );
    crate::regeneration::start(&daemon);
    crate::nodes::follow(&daemon);
    crate::ipsync::follow(&daemon);
    crate::services::follow(&daemon);
    crate::policies::follow(&daemon);
    let d = Arc::clone(&daemon);
    tokio::task::spawn_blocking(move || crate::policies::prepare_next(&d));
    start_controllers(&daemon, host_ips);
    tracing::info!(subsys = "daemon", bootstrapTime = ?t0.elapsed(), "Daemon initialization completed");
    daemon.monitor.agent(
        crate::monitor::AgentNotify::Start,
        serde_json::json!({ "version": env!("CARGO_PKG_VERSION") }),
    );
    Ok(Running { daemon, _pid: pid })
}

/// cil_from_netdev on the device that carries the node's address, which
/// NodePort replies leave through.
async fn setup_node_port(
    nl: &netdev::Netlink,
    dp: &mut datapath::Datapath,
    config: &DaemonConfig,
    node_ip: Option<Ipv4Addr>,
) -> anyhow::Result<String> {
    let ip = node_ip.context("NodePort needs a node IPv4 address (none found; set ipv4-node)")?;
    let index = nl
        .ipv4_addrs(None)
        .await?
        .into_iter()
        .find(|(_, a, _)| *a == ip)
        .map(|(i, _, _)| i)
        .with_context(|| format!("no device carries the node address {ip}"))?;
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
    let vxlan = netdev::vxlan::ensure_vxlan_device(nl, config.tunnel_port, config.mtu)
        .await
        .context("setting up cilium_vxlan")?;
    dp.attach_overlay_device(netdev::vxlan::CILIUM_VXLAN)
        .context("attaching cil_from_overlay to cilium_vxlan")?;
    let map = RuntimeConfig::open(&config.bpf_root)?;
    map.set_encap_ifindex(vxlan.index)?;
    map.set_ipv4_mask(config.ipv4_range.1)?;
    tracing::info!(
        subsys = "datapath",
        device = netdev::vxlan::CILIUM_VXLAN,
        port = config.tunnel_port,
        "Overlay ready"
    );
    Ok(())
}

/// This node as Cilium publishes it: underlay and router addresses, pod CIDR.
fn local_node(config: &DaemonConfig, node_ip: Option<Ipv4Addr>) -> crate::nodes::Node {
    use crate::nodes::{IpNet, Node, NodeAddress};
    let mut addresses: Vec<NodeAddress> = node_ip
        .map(|ip| NodeAddress {
            kind: "InternalIP".into(),
            ip: ip.to_string(),
        })
        .into_iter()
        .collect();
    addresses.push(NodeAddress {
        kind: "CiliumInternalIP".into(),
        ip: config.router_ip.to_string(),
    });
    Node {
        name: config.node_name.clone(),
        cluster: config.cluster_name.clone(),
        addresses,
        ipv4_alloc_cidr: Some(IpNet::v4(config.ipv4_range.0, config.ipv4_range.1)),
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

/// Tells the datapath how much to trace (`MonitorAggregationLevel`:
/// None, Lowest, Low, Medium, Max).
pub fn write_monitor_aggregation(bpf_root: &std::path::Path, level: &str) -> anyhow::Result<()> {
    let value: u64 = match level {
        "None" => 0,
        "Lowest" => 1,
        "Low" => 2,
        "Medium" => 3,
        _ => 4,
    };
    RuntimeConfig::open(bpf_root)?.set_monitor_aggregation(value)?;
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

fn start_controllers(daemon: &Arc<Daemon>, host_ips: Vec<Ipv4Addr>) {
    let root = daemon.config.bpf_root.clone();
    daemon.controllers.spawn(
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
    let d = Arc::clone(daemon);
    daemon
        .controllers
        .spawn("sync-host-ips", Duration::from_secs(60), move || {
            let (d, ips) = (Arc::clone(&d), host_ips.clone());
            async move {
                crate::hostips::sync(&d.config.bpf_root, &d.ipcache, &ips)
                    .map_err(|e| e.to_string())
            }
        });
    if let Some(kv) = daemon.kvstore.clone() {
        daemon
            .controllers
            .spawn(KVSTORE_HEALTH, Duration::from_secs(2), move || {
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
            });
    }
    let d = Arc::clone(daemon);
    daemon
        .controllers
        .spawn("ipam-expiration", Duration::from_secs(10), move || {
            let d = Arc::clone(&d);
            async move {
                let expired = d.ipam.lock().expect("ipam lock").release_expired().map_err(|e| e.to_string())?;
                for ip in expired {
                    tracing::info!(subsys = "ipam", ip = %ip, "Released expired allocation without endpoint");
                }
                Ok(())
            }
        });
}
