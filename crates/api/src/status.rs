//! `StatusResponse` (`GET /v1/healthz`) and its parts, with the field names
//! and types of Cilium 1.16's `api/v1/openapi.yaml`.
//!
//! Cilium 1.16's `cilium-dbg status --verbose` reads the kube-proxy
//! replacement features and each of their sub-objects without a nil check,
//! so those are plain fields here, not options: an agent cannot leave one
//! out. Other parts are options because Cilium's agent leaves them out too
//! when it does not run the component (`proxy`, `nodeMonitor` without
//! rings, `ciliumHealth`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `Ok`, `Warning`, `Failure` or `Disabled`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub enum State {
    #[default]
    Ok,
    Warning,
    Failure,
    Disabled,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            State::Ok => "Ok",
            State::Warning => "Warning",
            State::Failure => "Failure",
            State::Disabled => "Disabled",
        })
    }
}

/// `Status`: the state of one component.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Status {
    pub state: State,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub msg: String,
}

impl Status {
    pub fn ok(msg: impl Into<String>) -> Self {
        Self {
            state: State::Ok,
            msg: msg.into(),
        }
    }
    pub fn disabled() -> Self {
        Self {
            state: State::Disabled,
            msg: String::new(),
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct K8sStatus {
    pub state: State,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub msg: String,
    #[serde(
        rename = "k8s-api-versions",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub k8s_api_versions: Vec<String>,
    /// Ours, not Cilium's: each watched API's state (`listing`, `synced`,
    /// `failing: <why>`), which `cilium status --verbose` shows.
    #[serde(
        rename = "k8s-api-sync",
        default,
        skip_serializing_if = "std::collections::BTreeMap::is_empty"
    )]
    pub k8s_api_sync: std::collections::BTreeMap<String, String>,
}

/// `{"enabled": bool}`, the shape of most kube-proxy replacement features.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct EnabledStatus {
    #[serde(default)]
    pub enabled: bool,
}

impl EnabledStatus {
    pub fn new(enabled: bool) -> Self {
        Self { enabled }
    }
}

/// One device of `KubeProxyReplacement.deviceList`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct KubeProxyReplacementDevice {
    pub name: String,
    #[serde(default)]
    pub ip: Vec<String>,
}

/// `features.nodePort`. Everything but `enabled` is only sent when it is.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct NodePortFeature {
    #[serde(default)]
    pub enabled: bool,
    /// `SNAT`, `DSR` or `Hybrid`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dsr_mode: String,
    /// `Random` or `Maglev`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub algorithm: String,
    /// `None`, `Native`, `Generic` or `Best-Effort` (XDP).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub acceleration: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_min: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_max: Option<u16>,
    /// Maglev table size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lut_size: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct HostReachableServices {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocols: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Nat46X64Gateway {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefixes: Vec<String>,
}

/// `features.nat46X64`; Cilium reads `service` and `gateway` only when
/// `enabled`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Nat46X64 {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<EnabledStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<Nat46X64Gateway>,
}

/// `KubeProxyReplacement.features`: every sub-object Cilium 1.16's agent
/// sends (and its CLI dereferences).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct KubeProxyReplacementFeatures {
    #[serde(default)]
    pub node_port: NodePortFeature,
    #[serde(default)]
    pub host_port: EnabledStatus,
    #[serde(rename = "externalIPs", default)]
    pub external_ips: EnabledStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_reachable_services: Option<HostReachableServices>,
    #[serde(rename = "socketLB", default)]
    pub socket_lb: EnabledStatus,
    #[serde(rename = "socketLBTracing", default)]
    pub socket_lb_tracing: EnabledStatus,
    #[serde(default)]
    pub session_affinity: EnabledStatus,
    #[serde(default)]
    pub graceful_termination: EnabledStatus,
    #[serde(rename = "nat46X64", default)]
    pub nat46_x64: Nat46X64,
    #[serde(rename = "bpfSocketLBHostnsOnly", default)]
    pub bpf_socket_lb_hostns_only: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct KubeProxyReplacement {
    /// `True` or `False`.
    pub mode: String,
    /// Device names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// Devices with their addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_list: Vec<KubeProxyReplacementDevice>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub direct_routing_device: String,
    #[serde(default)]
    pub features: KubeProxyReplacementFeatures,
}

/// `HostFirewall`: `Disabled` or `Enabled` on `devices`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct HostFirewall {
    pub mode: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

/// `Srv6`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct Srv6 {
    #[serde(default)]
    pub enabled: bool,
    /// `SRH` or `Reduced`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub srv6_encap_mode: String,
}

/// `CNIChainingStatus`: `none`, `aws-cni`, `flannel`, `generic-veth`, `portmap`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct CniChainingStatus {
    pub mode: String,
}

/// `MonitorStatus`: the perf rings the monitor reads.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct MonitorStatus {
    /// CPUs whose rings are read.
    #[serde(default)]
    pub cpus: u64,
    /// Pages per ring.
    #[serde(default)]
    pub npages: u64,
    #[serde(default)]
    pub pagesize: u64,
    /// Samples the kernel could not write into a full ring.
    #[serde(default)]
    pub lost: u64,
    /// Records of a type the reader does not know; absent when not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<u64>,
}

/// `BIG TCP` of one family (`IPV4BigTCP`, `IPV6BigTCP`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BigTcp {
    #[serde(default)]
    pub enabled: bool,
    #[serde(rename = "maxGRO", default, skip_serializing_if = "Option::is_none")]
    pub max_gro: Option<u64>,
    #[serde(rename = "maxGSO", default, skip_serializing_if = "Option::is_none")]
    pub max_gso: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BandwidthManager {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// `cubic` or `bbr`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub congestion_control: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Routing {
    /// `BPF` or `Legacy`.
    #[serde(rename = "intra-host-routing-mode")]
    pub intra_host_routing_mode: String,
    /// `Native` or `Tunnel`.
    #[serde(rename = "inter-host-routing-mode")]
    pub inter_host_routing_mode: String,
    #[serde(
        rename = "tunnel-protocol",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub tunnel_protocol: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct MasqueradingProtocols {
    #[serde(default)]
    pub ipv4: bool,
    #[serde(default)]
    pub ipv6: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub struct Masquerading {
    #[serde(default)]
    pub enabled: bool,
    #[serde(
        rename = "enabledProtocols",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub enabled_protocols: Option<MasqueradingProtocols>,
    /// `BPF` or `iptables`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ip_masq_agent: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub snat_exclusion_cidr_v4: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub snat_exclusion_cidr_v6: String,
}

/// `ClockSource`: `ktime`, or `jiffies` at `hertz`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ClockSource {
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hertz: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct IdentityRange {
    #[serde(rename = "min-identity")]
    pub min_identity: u32,
    #[serde(rename = "max-identity")]
    pub max_identity: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ControllerStatus {
    pub name: String,
    pub status: ControllerStatusStatus,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ControllerStatusStatus {
    #[serde(rename = "success-count")]
    pub success_count: u64,
    #[serde(rename = "failure-count")]
    pub failure_count: u64,
    #[serde(rename = "consecutive-failure-count")]
    pub consecutive_failure_count: u64,
    #[serde(
        rename = "last-success-timestamp",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub last_success_timestamp: Option<String>,
    #[serde(
        rename = "last-failure-timestamp",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub last_failure_timestamp: Option<String>,
    #[serde(
        rename = "last-failure-msg",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub last_failure_msg: String,
}

/// `ProxyStatus`: only sent by an agent that runs an L7 proxy.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub struct ProxyStatus {
    #[serde(default)]
    pub ip: String,
    #[serde(default)]
    pub port_range: String,
    #[serde(default)]
    pub total_redirects: u64,
    #[serde(default)]
    pub envoy_deployment_mode: String,
}

/// `HubbleStatus.observer`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub struct HubbleObserver {
    #[serde(default)]
    pub max_flows: u64,
    #[serde(default)]
    pub current_flows: u64,
    #[serde(default)]
    pub seen_flows: u64,
    /// A Go duration (`1h2m3.5s`), as `strfmt.Duration` spells it.
    #[serde(default)]
    pub uptime: String,
}

/// `HubbleStatus.metrics`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct HubbleMetrics {
    pub state: State,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct HubbleStatus {
    pub state: State,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub msg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observer: Option<HubbleObserver>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<HubbleMetrics>,
}

/// `EncryptionStatus`: `Disabled`, `IPsec` or `Wireguard`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct EncryptionStatus {
    pub mode: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub msg: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct BpfMapProperties {
    pub name: String,
    pub size: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct BpfMapStatus {
    #[serde(rename = "dynamic-size-ratio")]
    pub dynamic_size_ratio: f64,
    #[serde(default)]
    pub maps: Vec<BpfMapProperties>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ClusterStatus {
    #[serde(
        rename = "ciliumHealth",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cilium_health: Option<Status>,
    #[serde(rename = "self", default, skip_serializing_if = "String::is_empty")]
    pub self_: String,
}

/// `GET /v1/healthz`. The brief form (header `brief: true`) carries only
/// `cilium`, `cluster` and a failing controller, as Cilium's does.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "kebab-case")]
pub struct StatusResponse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cilium: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kvstore: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_runtime: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<K8sStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_proxy_replacement: Option<KubeProxyReplacement>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_firewall: Option<HostFirewall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srv6: Option<Srv6>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni_chaining: Option<CniChainingStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cni_file: Option<Status>,
    #[serde(
        rename = "nodeMonitor",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub node_monitor: Option<MonitorStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4_big_tcp: Option<BigTcp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_big_tcp: Option<BigTcp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_manager: Option<BandwidthManager>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// `tc` or `tcx`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub attach_mode: String,
    /// `veth`, `netkit` or `netkit-l2`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub datapath_mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub masquerading: Option<Masquerading>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controllers: Vec<ControllerStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipam: Option<crate::ipam::IpamStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_range: Option<IdentityRange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hubble: Option<HubbleStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<EncryptionStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bpf_maps: Option<BpfMapStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_source: Option<ClockSource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_certificate_provider: Option<Status>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stale: BTreeMap<String, String>,
}
