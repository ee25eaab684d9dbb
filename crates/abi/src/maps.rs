//! Pinned map names and default sizes (bpf/lib/maps.h, bpf/include/abi.h).
//!
//! A map Cilium 1.16 knows keeps its 1.16 name; a map of our own is named
//! `cilium_rs_*`, a prefix no 1.16 tool globs or parses.

pub const LXC: &str = "cilium_lxc";
pub const IPCACHE: &str = "cilium_ipcache";
pub const TUNNEL: &str = "cilium_tunnel_map";
pub const CT4_GLOBAL: &str = "cilium_ct4_global";
pub const CT_ANY4_GLOBAL: &str = "cilium_ct_any4_global";
pub const CT6_GLOBAL: &str = "cilium_ct6_global";
pub const CT_ANY6_GLOBAL: &str = "cilium_ct_any6_global";
pub const METRICS: &str = "cilium_metrics";
pub const RUNTIME_CONFIG: &str = "cilium_runtime_config";
pub const EVENTS: &str = "cilium_events";
pub const LB4_SERVICES: &str = "cilium_lb4_services_v2";
pub const LB4_BACKENDS: &str = "cilium_lb4_backends_v3";
pub const LB4_REVERSE_NAT: &str = "cilium_lb4_reverse_nat";
pub const SNAT4_EXTERNAL: &str = "cilium_snat_v4_external";
pub const LB4_AFFINITY: &str = "cilium_lb4_affinity";
pub const LB4_MAGLEV: &str = "cilium_lb4_maglev";
pub const LB6_SERVICES: &str = "cilium_lb6_services_v2";
pub const LB6_BACKENDS: &str = "cilium_lb6_backends_v3";
pub const LB6_REVERSE_NAT: &str = "cilium_lb6_reverse_nat";
pub const SNAT6_EXTERNAL: &str = "cilium_snat_v6_external";
pub const LB6_AFFINITY: &str = "cilium_lb6_affinity";
pub const LB6_MAGLEV: &str = "cilium_lb6_maglev";
pub const LB6_REVERSE_SK: &str = "cilium_lb6_reverse_sk";
pub const CALL_POLICY: &str = "cilium_call_policy";
pub const LB4_REVERSE_SK: &str = "cilium_lb4_reverse_sk";
pub const LB_AFFINITY_MATCH: &str = "cilium_lb_affinity_match";
/// The events rate limit's token buckets (ours: Cilium 1.17's layout).
pub const RATELIMIT: &str = "cilium_rs_ratelimit";
/// Events the rate limit refused, by usage (ours: Cilium 1.17's layout).
pub const RATELIMIT_METRICS: &str = "cilium_rs_ratelimit_metrics";
/// Each endpoint's `cilium_policy_<EPID>` by endpoint ID (ours).
pub const POLICY_MAPS: &str = "cilium_rs_policy_maps";
pub const IPV4_FRAG_DATAGRAMS: &str = "cilium_ipv4_frag_datagrams";
/// The ports of fragmented IPv6 datagrams (ours: 1.16 drops IPv6 fragments).
pub const IPV6_FRAG_DATAGRAMS: &str = "cilium_rs_ipv6_frag_datagrams";
/// Node IP to node ID, as before 1.16 (value: the ID alone).
pub const NODE: &str = "cilium_node_map";
/// Node IP to node ID and IPsec SPI: what 1.16's programs read.
pub const NODE_V2: &str = "cilium_node_map_v2";
pub const AUTH: &str = "cilium_auth_map";

/// Maps 1.16 creates only for features this agent does not run (the
/// bandwidth manager, egress gateway, VTEP, pcap recorder, multicast,
/// SRv6, ip-masq-agent): never pinned here. Named so the CLI can tell a
/// user they are absent in 1.16's words.
pub const THROTTLE: &str = "cilium_throttle";
pub const EGRESS_GW_POLICY_V4: &str = "cilium_egress_gw_policy_v4";
pub const VTEP: &str = "cilium_vtep_map";
pub const CAPTURE4_RULES: &str = "cilium_capture4_rules";
pub const MCAST_GROUP_OUTER_V4: &str = "cilium_mcast_group_outer_v4_map";
pub const SRV6_POLICY_V4: &str = "cilium_srv6_policy_v4";
pub const SRV6_SID: &str = "cilium_srv6_sid";
pub const SRV6_VRF_V4: &str = "cilium_srv6_vrf_v4";
pub const IPMASQ_V4: &str = "cilium_ipmasq_v4";
pub const IPMASQ_V6: &str = "cilium_ipmasq_v6";

/// Maps of our own pinned under another name by earlier versions, as
/// (old, new): names a 1.16 tool would take for its own. A restarting agent
/// moves such a pin to its new name when the map there has the new map's
/// shape, so its contents survive.
pub const RENAMED: [(&str, &str); 3] = [
    ("cilium_policy_maps", POLICY_MAPS),
    ("cilium_ratelimit", RATELIMIT),
    ("cilium_ratelimit_metrics", RATELIMIT_METRICS),
];

pub const ENDPOINTS_MAP_SIZE: u32 = 65535;
pub const IPCACHE_MAP_SIZE: u32 = 512000;
pub const CT_MAP_SIZE_TCP: u32 = 524288;
pub const CT_MAP_SIZE_ANY: u32 = 262144;
pub const METRICS_MAP_SIZE: u32 = 1024;
pub const RUNTIME_CONFIG_SIZE: u32 = 256;
pub const TUNNEL_MAP_SIZE: u32 = 65536;
pub const POLICY_MAP_SIZE: u32 = 16384;
pub const LB_MAP_SIZE: u32 = 65536;
/// bpf-nat-global-max default: 2/3 of the default CT sizes (TCP + any).
pub const NAT_MAP_SIZE: u32 = 524288;
pub const LB_REVERSE_SK_MAP_SIZE: u32 = 262144;
/// bpf-fragments-map-max default.
pub const FRAG_MAP_SIZE: u32 = 8192;
/// bpf-node-map-max default.
pub const NODE_MAP_SIZE: u32 = 16384;
/// bpf-auth-map-max default.
pub const AUTH_MAP_SIZE: u32 = 524288;

/// Directory below the bpffs root where global maps are pinned.
pub const GLOBALS_DIR: &str = "tc/globals";
