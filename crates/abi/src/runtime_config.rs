//! `cilium_runtime_config`: u32 index to u64 value.

pub const UTIME_OFFSET: u32 = 0;
pub const AGENT_LIVENESS: u32 = 1;
/// ifindex of cilium_vxlan; 0 while there is no overlay.
pub const ENCAP_IFINDEX: u32 = 2;
/// The pod CIDR mask (network order) the tunnel map is keyed by.
pub const IPV4_MASK: u32 = 3;
/// ifindex of the node's native device (NodePort replies leave through it).
pub const NATIVE_IFINDEX: u32 = 4;
/// NodePort backend selection: 0 random, 1 maglev.
pub const LB_ALGORITHM: u32 = 5;
/// The IPv4 flow-hash seed Maglev selects with.
pub const MAGLEV_SEED4: u32 = 6;
/// node-port-range: first port << 16 | last port (0 = 30000-32767).
pub const NODEPORT_RANGE: u32 = 7;
/// monitor-aggregation: 0 none (every packet traced) .. 4 maximum.
pub const MONITOR_AGGREGATION: u32 = 8;
/// bpf-events-default-rate-limit: events a second (0 = unlimited).
pub const EVENTS_RATE_LIMIT: u32 = 9;
/// bpf-events-default-burst-limit: the bucket (0 = the rate).
pub const EVENTS_BURST_LIMIT: u32 = 10;
/// A set bit `1 << notification type` turns that type off.
pub const EVENTS_DISABLED: u32 = 11;
/// 1: write debug captures (debug with debug-verbose=datapath).
pub const DEBUG_DATAPATH: u32 = 12;
/// 1: enable-ipv4-fragment-tracking=false (later fragments are dropped).
pub const FRAGMENTS_DISABLED: u32 = 13;
/// enable-bpf-masquerade: the address pods' traffic leaving through the
/// native device is masqueraded to (network order, low 32 bits); 0 = off.
pub const MASQUERADE_IPV4: u32 = 14;
/// Destinations never masqueraded: address in the low 32 bits, mask in the
/// high (both network order).
pub const SNAT_EXCLUSION_IPV4: u32 = 15;
/// The netns cookie of the node's own network namespace (the agent's),
/// where socket LB lets loopback reach NodePorts and HostPorts; 0 = the
/// initial namespace's.
pub const HOST_NETNS_COOKIE: u32 = 16;
/// 1: BPF host routing; 0: legacy (the host's stack routes pods' traffic
/// beyond the node and to pods from the native device).
pub const HOST_ROUTING: u32 = 17;
/// The node's IPv6 router address, bytes 0-7 and 8-15 as they lie in
/// memory (see [`ipv6_halves`]); both 0 while IPv6 is off.
pub const ROUTER_IPV6_HI: u32 = 18;
pub const ROUTER_IPV6_LO: u32 = 19;
/// BPF masquerading of IPv6: the address pods' IPv6 leaving through the
/// native device gets, as halves (both 0 = off).
pub const MASQUERADE_IPV6_HI: u32 = 20;
pub const MASQUERADE_IPV6_LO: u32 = 21;
/// The IPv6 destinations never masqueraded: the prefix's halves and its
/// length.
pub const SNAT_EXCLUSION_IPV6_HI: u32 = 22;
pub const SNAT_EXCLUSION_IPV6_LO: u32 = 23;
pub const SNAT_EXCLUSION_IPV6_LEN: u32 = 24;
/// The node's IPv6 address on the native device, as halves: NodePort
/// replies of this node's backends leave from it.
pub const NODE_IPV6_HI: u32 = 25;
pub const NODE_IPV6_LO: u32 = 26;
/// The seed of IPv6's Maglev flow hash (1.16's `HASH_INIT6_SEED`).
pub const MAGLEV_SEED6: u32 = 27;
pub const LB_ALGORITHM_RANDOM: u64 = 0;
pub const LB_ALGORITHM_MAGLEV: u64 = 1;

/// Name Cilium's CLI prints for an index.
pub fn index_name(index: u32) -> Option<&'static str> {
    match index {
        UTIME_OFFSET => Some("UTimeOffset"),
        AGENT_LIVENESS => Some("AgentLiveness"),
        ENCAP_IFINDEX => Some("EncapIfindex"),
        IPV4_MASK => Some("IPv4Mask"),
        NATIVE_IFINDEX => Some("NativeIfindex"),
        LB_ALGORITHM => Some("LBAlgorithm"),
        MAGLEV_SEED4 => Some("MaglevSeed4"),
        NODEPORT_RANGE => Some("NodePortRange"),
        MONITOR_AGGREGATION => Some("MonitorAggregation"),
        EVENTS_RATE_LIMIT => Some("EventsRateLimit"),
        EVENTS_BURST_LIMIT => Some("EventsBurstLimit"),
        EVENTS_DISABLED => Some("EventsDisabled"),
        DEBUG_DATAPATH => Some("DebugDatapath"),
        FRAGMENTS_DISABLED => Some("FragmentsDisabled"),
        MASQUERADE_IPV4 => Some("MasqueradeIPv4"),
        SNAT_EXCLUSION_IPV4 => Some("SNATExclusionIPv4"),
        HOST_NETNS_COOKIE => Some("HostNetnsCookie"),
        HOST_ROUTING => Some("HostRouting"),
        ROUTER_IPV6_HI => Some("RouterIPv6Hi"),
        ROUTER_IPV6_LO => Some("RouterIPv6Lo"),
        MASQUERADE_IPV6_HI => Some("MasqueradeIPv6Hi"),
        MASQUERADE_IPV6_LO => Some("MasqueradeIPv6Lo"),
        SNAT_EXCLUSION_IPV6_HI => Some("SNATExclusionIPv6Hi"),
        SNAT_EXCLUSION_IPV6_LO => Some("SNATExclusionIPv6Lo"),
        SNAT_EXCLUSION_IPV6_LEN => Some("SNATExclusionIPv6Len"),
        NODE_IPV6_HI => Some("NodeIPv6Hi"),
        NODE_IPV6_LO => Some("NodeIPv6Lo"),
        MAGLEV_SEED6 => Some("MaglevSeed6"),
        _ => None,
    }
}

/// An IPv6 address as two runtime config values: the datapath reads them
/// back into its 16 bytes as they were.
pub fn ipv6_halves(ip: std::net::Ipv6Addr) -> [u64; 2] {
    let b = ip.octets();
    let half = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    [half(0), half(8)]
}
