//! The status response: what the agent measured, and `Disabled` for what it
//! does not run.

use crate::daemon::Daemon;
use api::models::*;

const MAP_TABLE: &[(&str, &str)] = &[
    ("Endpoints", abi::maps::LXC),
    ("IP cache", abi::maps::IPCACHE),
    ("Metrics", abi::maps::METRICS),
    ("Non-TCP connection tracking", abi::maps::CT_ANY4_GLOBAL),
    ("TCP connection tracking", abi::maps::CT4_GLOBAL),
    ("Tunnel", abi::maps::TUNNEL),
];

fn bpf_maps(d: &Daemon) -> BpfMapStatus {
    let maps = MAP_TABLE
        .iter()
        .filter_map(|(label, name)| {
            let map = datapath::PinnedMap::open_global(&d.config.bpf_root, name).ok()?;
            Some(BpfMapProperties {
                name: (*label).into(),
                size: u64::from(map.meta().max_entries),
            })
        })
        .collect();
    BpfMapStatus {
        dynamic_size_ratio: d.config.bpf_map_dynamic_size_ratio,
        maps,
    }
}

/// The full status; `brief` keeps only what `cilium status --brief` needs.
pub fn collect(d: &Daemon, brief: bool) -> StatusResponse {
    let controllers = d.controllers.snapshot();
    let cilium = Some(Status::ok(api::version_string()));
    if brief {
        let failing = controllers
            .into_iter()
            .find(|c| c.status.consecutive_failure_count > 0);
        return StatusResponse {
            cilium,
            controllers: failing.into_iter().collect(),
            ..Default::default()
        };
    }
    let disabled = || Some(Status::disabled());
    let off = || Some(EnabledStatus { enabled: false });
    StatusResponse {
        cilium,
        kvstore: Some(kvstore_status(d)),
        kubernetes: Some(K8sStatus {
            state: State::Disabled,
            ..Default::default()
        }),
        kube_proxy_replacement: Some(match &d.native_device {
            Some(dev) => KubeProxyReplacement {
                mode: "True".into(),
                devices: vec![format!(
                    "{dev}   {}",
                    d.node_ip.map(|i| i.to_string()).unwrap_or_default()
                )],
            },
            None => KubeProxyReplacement {
                mode: "False".into(),
                devices: vec![],
            },
        }),
        host_firewall: Some(ModeStatus {
            mode: "Disabled".into(),
        }),
        cni_chaining: Some(ModeStatus {
            mode: d.config.cni_chaining_mode.clone(),
        }),
        cni_file: Some(d.config.cni.status()),
        node_monitor: d.monitor.monitor_status(),
        ipv4_big_tcp: off(),
        ipv6_big_tcp: off(),
        bandwidth_manager: off(),
        routing: Some(if d.config.tunneling() {
            Routing {
                intra_host_routing_mode: "Legacy".into(),
                inter_host_routing_mode: "Tunnel".into(),
                tunnel_protocol: d.config.tunnel_protocol.clone(),
            }
        } else {
            Routing {
                intra_host_routing_mode: "Legacy".into(),
                inter_host_routing_mode: "Native".into(),
                tunnel_protocol: String::new(),
            }
        }),
        datapath_mode: "veth".into(),
        attach_mode: d.attach_mode.as_str().into(),
        ipam: Some(ipam_status(d)),
        masquerading: Some(Masquerading {
            enabled: false,
            mode: String::new(),
        }),
        controllers,
        proxy: disabled(),
        identity_range: Some(IdentityRange {
            min_identity: crate::identity::MIN_GLOBAL,
            max_identity: crate::identity::MAX_GLOBAL,
        }),
        hubble: Some(d.monitor.hubble_status()),
        encryption: Some(ModeStatus {
            mode: "Disabled".into(),
        }),
        cluster: None,
        bpf_maps: Some(bpf_maps(d)),
        clock_source: Some(ModeStatus {
            mode: "ktime".into(),
        }),
        ..Default::default()
    }
}

/// Cilium's line: `etcd: 1/1 connected, leases=1, ...: <endpoint>`, or
/// `etcd: 0/1 connected: <endpoint> - <error>` while the kvstore-health
/// controller cannot reach etcd.
fn kvstore_status(d: &Daemon) -> Status {
    let (Some(kv), Some(kc)) = (&d.kvstore, &d.config.kvstore) else {
        return Status::ok("Disabled");
    };
    let n = kc.endpoints.len();
    let endpoints = kc.endpoints.join(", ");
    let failing = d.controllers.snapshot().into_iter().find(|c| {
        c.name == crate::daemon::KVSTORE_HEALTH && c.status.consecutive_failure_count > 0
    });
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

fn ipam_status(d: &Daemon) -> api::ipam::IpamStatus {
    let ipam = d.ipam.lock().expect("ipam lock");
    api::ipam::IpamStatus {
        allocations: ipam
            .allocations()
            .iter()
            .map(|(ip, a)| (ip.to_string(), a.owner.clone()))
            .collect(),
        ipv4: ipam.allocations().keys().map(|ip| ip.to_string()).collect(),
        status: ipam.status_line(),
    }
}

/// Whether the probe on :9879 should answer 200.
pub fn healthy(d: &Daemon) -> bool {
    let s = collect(d, true);
    matches!(s.cilium.map(|c| c.state), Some(State::Ok | State::Disabled))
}
