//! Cilium 1.16's tools open our pinned maps as they are.
//!
//! 1.16 decides to re-create a pinned map ("Removing map to allow for
//! property upgrade (expect map data loss)") when its type, key size, value
//! size, max entries or flags differ from what its loader asks for
//! (pkg/bpf/bpf_linux.go `objCheck`, pkg/bpf/map_linux.go
//! `CheckAndUpgrade`, cilium/ebpf `MapSpec.Compatible` under
//! `OpenOrCreate`). The node's datapath is loaded here as the agent loads
//! it, at the default config (whose sizes are 1.16's defaults), and every
//! pin is compared with the properties 1.16 would ask for. A pin of ours
//! that 1.16 does not know must not carry a name 1.16 takes for its own.

use abi::maps;
use datapath::{Datapath, MapSizes, PinnedMap};
use std::path::Path;
use testsupport::Sandbox;

const HASH: u32 = 1;
const ARRAY: u32 = 2;
const PROG_ARRAY: u32 = 3;
const PERF_EVENT_ARRAY: u32 = 4;
const PERCPU_HASH: u32 = 5;
const LRU_HASH: u32 = 9;
const LPM_TRIE: u32 = 11;
const HASH_OF_MAPS: u32 = 13;

/// BPF_F_NO_PREALLOC. 1.16 adds it to HASH, PERCPU_HASH and HASH_OF_MAPS
/// unless preallocate-bpf-maps=true (off in its Helm chart, and always off
/// in its CLI, which never enables preallocation), and always to LPM tries
/// (pkg/bpf/bpf.go `GetPreAllocateMapFlags`, applied by pkg/bpf
/// `openOrCreate`, pkg/ebpf `OpenOrCreate` and `CheckAndUpgrade`).
const NO_PREALLOC: u32 = 1;

/// Max entries standing for "the number of possible CPUs".
const POSSIBLE_CPUS: u32 = 0;

/// A pin 1.16 knows, with what its loader asks for.
struct Row {
    /// The pin's name; a trailing `*` stands for a 5-digit endpoint ID.
    name: &'static str,
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
}

const fn row(
    name: &'static str,
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    flags: u32,
) -> Row {
    Row {
        name,
        map_type,
        key_size,
        value_size,
        max_entries,
        flags,
    }
}

/// Every map 1.16 knows that we pin, as Cilium v1.16.0 defines it. Sizes
/// are 1.16's defaults: pkg/option/config.go (CTMapEntriesGlobalTCPDefault
/// 512Ki, CTMapEntriesGlobalAnyDefault 256Ki, NATMapEntriesGlobalDefault
/// 2/3 of their sum, SockRevNATMapEntriesDefault = CT any),
/// pkg/defaults/defaults.go (FragmentsMapEntries 8192), pkg/maps/lbmap
/// `DefaultMaxEntries` (bpf-lb-map-max 65536, also the affinity and Maglev
/// outer maps), bpf-lb-maglev-table-size 16381.
const TABLE: &[Row] = &[
    // pkg/maps/lxcmap/lxcmap.go: Hash, EndpointKey, EndpointInfo, MaxEntries 65535
    row("cilium_lxc", HASH, 20, 48, 65535, NO_PREALLOC),
    // pkg/maps/ipcache/ipcache.go: LPMTrie, Key, RemoteEndpointInfo, 512000, BPF_F_NO_PREALLOC
    row("cilium_ipcache", LPM_TRIE, 24, 12, 512000, NO_PREALLOC),
    // pkg/maps/tunnel/tunnel.go: Hash, TunnelKey, TunnelValue, MaxEntries 65536
    row("cilium_tunnel_map", HASH, 20, 20, 65536, NO_PREALLOC),
    // pkg/maps/ctmap/ctmap.go newMap: LRUHash, CtKey4Global, CtEntry, bpf-ct-global-tcp-max
    row("cilium_ct4_global", LRU_HASH, 14, 56, 524288, 0),
    // pkg/maps/ctmap/ctmap.go newMap: LRUHash, bpf-ct-global-any-max
    row("cilium_ct_any4_global", LRU_HASH, 14, 56, 262144, 0),
    // pkg/maps/nat/nat.go NewMap: LRUHash, NatKey4, NatEntry4, bpf-nat-global-max
    row("cilium_snat_v4_external", LRU_HASH, 14, 40, 524288, 0),
    // pkg/maps/lbmap/ipv4.go: Hash, Service4Key, Service4Value, ServiceMapMaxEntries
    row("cilium_lb4_services_v2", HASH, 12, 12, 65536, NO_PREALLOC),
    // pkg/maps/lbmap/ipv4.go: Hash, Backend4KeyV3, Backend4ValueV3, ServiceBackEndMapMaxEntries
    row("cilium_lb4_backends_v3", HASH, 4, 12, 65536, NO_PREALLOC),
    // pkg/maps/lbmap/ipv4.go: Hash, RevNat4Key, RevNat4Value, RevNatMapMaxEntries
    row("cilium_lb4_reverse_nat", HASH, 2, 6, 65536, NO_PREALLOC),
    // pkg/maps/lbmap/ipv4.go CreateSockRevNat4Map: LRUHash, SockRevNat4Key/Value, bpf-sock-rev-map-max
    row("cilium_lb4_reverse_sk", LRU_HASH, 16, 8, 262144, 0),
    // pkg/maps/lbmap/affinity.go: LRUHash, Affinity4Key, AffinityValue, AffinityMapMaxEntries
    row("cilium_lb4_affinity", LRU_HASH, 16, 16, 65536, 0),
    // pkg/maps/lbmap/affinity.go: Hash, AffinityMatchKey, AffinityMatchValue, AffinityMapMaxEntries
    row("cilium_lb_affinity_match", HASH, 8, 1, 65536, NO_PREALLOC),
    // pkg/maps/lbmap/maglev_outer_map.go NewMaglevOuterMap: HashOfMaps, MaglevOuterKey, MaglevOuterVal
    row("cilium_lb4_maglev", HASH_OF_MAPS, 2, 4, 65536, NO_PREALLOC),
    // pkg/maps/fragmap/fragmap.go InitMap: LRUHash, FragmentKey, FragmentValue, bpf-fragments-map-max
    row("cilium_ipv4_frag_datagrams", LRU_HASH, 12, 4, 8192, 0),
    // pkg/maps/metricsmap/metricsmap.go: PerCPUHash, Key, Value, MaxEntries 1024
    row("cilium_metrics", PERCPU_HASH, 8, 16, 1024, NO_PREALLOC),
    // pkg/maps/configmap/config_map.go: Array, Index, Value, MaxEntries 256
    row("cilium_runtime_config", ARRAY, 4, 8, 256, 0),
    // pkg/maps/eventsmap/eventsmap.go (cell.go: ebpf.PossibleCPU()): PerfEventArray
    row("cilium_events", PERF_EVENT_ARRAY, 4, 4, POSSIBLE_CPUS, 0),
    // pkg/maps/policymap/policymap.go InitCallMaps: ProgramArray, CallKey, CallValue, ^uint16(0)
    row("cilium_call_policy", PROG_ARRAY, 4, 4, 65535, 0),
    // pkg/maps/nodemap/node_map.go newMap: Hash, NodeKey, u16, bpf-node-map-max 16384
    row("cilium_node_map", HASH, 20, 2, 16384, NO_PREALLOC),
    // pkg/maps/nodemap/node_map_v2.go newMapV2: Hash, NodeKey, NodeValueV2, bpf-node-map-max
    row("cilium_node_map_v2", HASH, 20, 4, 16384, NO_PREALLOC),
    // pkg/maps/authmap/auth_map.go newMap: Hash, AuthKey, AuthInfo, bpf-auth-map-max 512Ki
    row("cilium_auth_map", HASH, 12, 8, 524288, NO_PREALLOC),
    // pkg/maps/policymap/policymap.go newMap: LPMTrie, PolicyKey, PolicyEntry, bpf-policy-map-max
    row("cilium_policy_*", LPM_TRIE, 12, 24, 16384, NO_PREALLOC),
];

/// The IPv6 maps 1.16 creates with enable-ipv6, as it defines them (the
/// same files and sizes as their IPv4 twins above).
const TABLE_V6: &[Row] = &[
    // pkg/maps/ctmap/ctmap.go newMap: LRUHash, CtKey6Global, CtEntry
    row("cilium_ct6_global", LRU_HASH, 38, 56, 524288, 0),
    row("cilium_ct_any6_global", LRU_HASH, 38, 56, 262144, 0),
    // pkg/maps/nat/nat.go NewMap: LRUHash, NatKey6, NatEntry6
    row("cilium_snat_v6_external", LRU_HASH, 38, 56, 524288, 0),
    // pkg/maps/lbmap/ipv6.go: Service6Key, Service6Value; Backend6KeyV3, Backend6ValueV3; RevNat6Key, RevNat6Value
    row("cilium_lb6_services_v2", HASH, 24, 12, 65536, NO_PREALLOC),
    row("cilium_lb6_backends_v3", HASH, 4, 24, 65536, NO_PREALLOC),
    row("cilium_lb6_reverse_nat", HASH, 2, 18, 65536, NO_PREALLOC),
    // pkg/maps/lbmap/ipv6.go CreateSockRevNat6Map: LRUHash, SockRevNat6Key/Value
    row("cilium_lb6_reverse_sk", LRU_HASH, 32, 20, 262144, 0),
    // pkg/maps/lbmap/affinity.go: LRUHash, Affinity6Key, AffinityValue
    row("cilium_lb6_affinity", LRU_HASH, 24, 16, 65536, 0),
    // pkg/maps/lbmap/maglev_outer_map.go: HashOfMaps, MaglevOuterKey, MaglevOuterVal
    row("cilium_lb6_maglev", HASH_OF_MAPS, 2, 4, 65536, NO_PREALLOC),
];

/// pkg/maps/lbmap/maglev_inner_map.go newMaglevInnerMapSpec: the inner
/// array of a Maglev table (its value size is what 1.16's agent reads the
/// table size from, deleteMapIfMNotMatch).
const MAGLEV_INNER: Row = row("cilium_maglev_inner", ARRAY, 4, 4 * 16381, 1, 0);

/// Name families 1.16 takes for its own: `cilium-dbg bpf policy get --all`
/// globs `cilium_policy_*` (cilium-dbg/cmd/bpf_policy_get.go); the agent's
/// map sweeper and the template loader read an endpoint ID after these
/// prefixes (pkg/datapath/maps/map.go, pkg/datapath/loader/template.go);
/// the per-cluster maps and the prefilter's CIDR maps are families too
/// (pkg/maps/ctmap/per_cluster_ctmap.go, pkg/maps/nat/per_cluster_nat.go,
/// pkg/maps/cidrmap/cidrmap.go).
const PREFIXES_1_16: &[&str] = &[
    "cilium_policy_",
    "cilium_calls_",
    "cilium_ct4_",
    "cilium_ct6_",
    "cilium_ct_any4_",
    "cilium_ct_any6_",
    "cilium_per_cluster_ct_",
    "cilium_per_cluster_snat_",
    "cilium_cidr_",
];

/// 1.16's other map names (pkg/maps/*, pkg/datapath/maps/map.go
/// RemoveDisabledMaps, pkg/datapath/linux/config/config.go).
const NAMES_1_16: &[&str] = &[
    "cilium_auth_map",
    "cilium_calls_xdp",
    "cilium_capture4_rules",
    "cilium_capture6_rules",
    "cilium_capture_cache",
    "cilium_ct6_global",
    "cilium_ct_any6_global",
    "cilium_egress_gw_policy_v4",
    "cilium_egresscall_policy",
    "cilium_encrypt_state",
    "cilium_ipmasq_v4",
    "cilium_ipmasq_v6",
    "cilium_ktime_cache",
    "cilium_l2_responder_v4",
    "cilium_lb4_backends",
    "cilium_lb4_backends_v2",
    "cilium_lb4_health",
    "cilium_lb4_rr_seq",
    "cilium_lb4_rr_seq_v2",
    "cilium_lb4_services",
    "cilium_lb4_source_range",
    "cilium_lb6_affinity",
    "cilium_lb6_backends",
    "cilium_lb6_backends_v2",
    "cilium_lb6_backends_v3",
    "cilium_lb6_health",
    "cilium_lb6_maglev",
    "cilium_lb6_reverse_nat",
    "cilium_lb6_reverse_sk",
    "cilium_lb6_rr_seq",
    "cilium_lb6_rr_seq_v2",
    "cilium_lb6_services",
    "cilium_lb6_services_v2",
    "cilium_lb6_source_range",
    "cilium_lb_act",
    "cilium_maglev_inner",
    "cilium_mcast_group_outer_v4_map",
    "cilium_mcast_subscriber_v4_inner",
    "cilium_node_map",
    "cilium_node_map_v2",
    "cilium_node_set_v4",
    "cilium_node_set_v6",
    "cilium_nodeport_neigh4",
    "cilium_nodeport_neigh6",
    "cilium_proxy4",
    "cilium_proxy6",
    "cilium_ratelimit",
    "cilium_signals",
    "cilium_skip_lb4",
    "cilium_skip_lb6",
    "cilium_snat_v6_external",
    "cilium_srv6_policy_v4",
    "cilium_srv6_policy_v6",
    "cilium_srv6_sid",
    "cilium_srv6_state_v4",
    "cilium_srv6_state_v6",
    "cilium_srv6_vrf_v4",
    "cilium_srv6_vrf_v6",
    "cilium_tail_call_buffer4",
    "cilium_tail_call_buffer6",
    "cilium_throttle",
    "cilium_vtep_map",
    "cilium_world_cidrs4",
];

fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name
            .strip_prefix(prefix)
            .is_some_and(|id| id.len() == 5 && id.bytes().all(|b| b.is_ascii_digit())),
        None => pattern == name,
    }
}

/// What 1.16 would ask for that the pin does not have, one line each.
fn differences(name: &str, want: &Row, map: &PinnedMap, cpus: u32) -> Vec<String> {
    let have = map.meta();
    let max_entries = if want.max_entries == POSSIBLE_CPUS {
        cpus
    } else {
        want.max_entries
    };
    [
        ("type", have.map_type, want.map_type),
        ("key size", have.key_size, want.key_size),
        ("value size", have.value_size, want.value_size),
        ("max entries", have.max_entries, max_entries),
        ("flags", have.map_flags, want.flags),
    ]
    .into_iter()
    .filter(|(_, have, want)| have != want)
    .map(|(what, have, want)| format!("{name}: {what} is {have}, Cilium 1.16 asks for {want}"))
    .collect()
}

/// /sys/devices/system/cpu/possible ("0-3", "0,2-5"), as 1.16 counts it.
fn possible_cpus() -> u32 {
    let list = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap();
    list.trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<u32>().unwrap() - a.parse::<u32>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// The node's maps as the agent pins them at the default config (with
/// IPv6 on or off): the endpoint, host and overlay objects, bpf_sock
/// (bpf-lb-sock), one endpoint's policy map and one service's Maglev
/// table.
fn agent_pins(sb: &Sandbox, ipv6: bool) -> Datapath {
    let sizes = MapSizes {
        ipv6,
        ..Default::default()
    };
    let globals = sb.bpffs().join(maps::GLOBALS_DIR);
    let dp = Datapath::init(&sb.bpffs(), &sizes).expect("load the datapath");
    datapath::socketlb::SocketLb::load(&globals, &sizes).expect("load bpf_sock");
    datapath::policymap::PolicyMap::open(&globals, 123).expect("endpoint 123's policy map");
    let table = vec![1u32; abi::lb::LB_MAGLEV_LUT_SIZE];
    datapath::lbmap::apply(
        &globals,
        &lb::Update {
            put_maglev: vec![(lb::Family::V4, abi::Be16::new(1), table)],
            ..Default::default()
        },
    )
    .expect("a Maglev table");
    dp
}

fn pins(globals: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(globals)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// What 1.16's tools would re-create or misread among the pins under
/// `globals`, against `table`.
fn problems(globals: &Path, table: &[&Row]) -> Vec<String> {
    let cpus = possible_cpus();
    let mut problems = Vec::new();
    let mut seen = vec![false; table.len()];
    for name in pins(globals) {
        let map = PinnedMap::open(&globals.join(&name), &name).unwrap();
        match table.iter().position(|r| matches(r.name, &name)) {
            Some(i) => {
                seen[i] = true;
                problems.extend(differences(&name, table[i], &map, cpus));
            }
            None => {
                if let Some(p) = PREFIXES_1_16.iter().find(|p| name.starts_with(*p)) {
                    problems.push(format!(
                        "{name}: a map 1.16 does not know, named like its {p}* maps"
                    ));
                }
                if NAMES_1_16.contains(&name.as_str()) {
                    problems.push(format!(
                        "{name}: pinned under a 1.16 map's name, but not in the table"
                    ));
                }
            }
        }
    }
    for (row, seen) in table.iter().zip(&seen) {
        if !seen {
            problems.push(format!("{}: in the table but not pinned", row.name));
        }
    }
    problems
}

#[test]
fn every_pinned_map_is_as_cilium_1_16_asks_for_it() {
    let sb = Sandbox::enter();
    let _dp = agent_pins(&sb, false);
    let globals = sb.bpffs().join(maps::GLOBALS_DIR);
    let cpus = possible_cpus();
    let mut problems = problems(&globals, &TABLE.iter().collect::<Vec<_>>());

    let maglev = PinnedMap::open(&globals.join(maps::LB4_MAGLEV), maps::LB4_MAGLEV).unwrap();
    let entries = maglev.entries::<abi::Be16, u32>().unwrap();
    assert_eq!(entries.len(), 1, "one Maglev table");
    let inner = PinnedMap::from_id(entries[0].1, MAGLEV_INNER.name).unwrap();
    problems.extend(differences(MAGLEV_INNER.name, &MAGLEV_INNER, &inner, cpus));

    assert!(
        problems.is_empty(),
        "1.16's tools would re-create or misread:\n{}",
        problems.join("\n")
    );
}

#[test]
fn with_ipv6_the_v6_maps_are_pinned_as_cilium_1_16_asks_for_them_too() {
    let sb = Sandbox::enter();
    let _dp = agent_pins(&sb, true);
    let globals = sb.bpffs().join(maps::GLOBALS_DIR);
    let table: Vec<&Row> = TABLE.iter().chain(TABLE_V6).collect();
    let problems = problems(&globals, &table);
    assert!(
        problems.is_empty(),
        "1.16's tools would re-create or misread:\n{}",
        problems.join("\n")
    );
}

#[test]
fn maps_of_our_own_carry_names_of_our_own() {
    let sb = Sandbox::enter();
    let _dp = agent_pins(&sb, false);
    let ours: Vec<String> = pins(&sb.bpffs().join(maps::GLOBALS_DIR))
        .into_iter()
        .filter(|n| !TABLE.iter().any(|r| matches(r.name, n)))
        .collect();
    assert_eq!(
        ours,
        [maps::POLICY_MAPS, maps::RATELIMIT, maps::RATELIMIT_METRICS],
        "the maps 1.16 does not know"
    );
    for name in &ours {
        assert!(name.starts_with("cilium_rs_"), "{name}");
    }
}
