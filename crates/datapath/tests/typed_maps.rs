//! Typed map handles refuse a pinned map of another layout, naming the map
//! and what differs; on the datapath's own pins every handle opens.

use abi::endpoint::{EndpointInfo, EndpointKey};
use datapath::maps::{
    AuthMap, CallPolicy, Ct4Global, CtAny4Global, Events, Ipcache, Ipv4FragDatagrams, Lb4Backends,
    Lb4Maglev, Lb4RevNat, Lb4ReverseSk, Lb4Services, LbAffinityMatch, Lxc, Metrics, NodeMap,
    NodeMapV2, PolicyMaps, Ratelimit, RatelimitMetrics, RuntimeConfig, Snat4External, Tunnel,
};
use datapath::{Datapath, Error, GlobalMap, MapMeta, MapSizes, PinnedMap};
use std::net::Ipv4Addr;
use std::path::Path;
use testsupport::Sandbox;

const BPF_MAP_TYPE_HASH: u32 = 1;

/// In a fresh sandbox, pins where `M` belongs a map shaped like `M`'s
/// definition after `change`, and returns the error opening `M` gives, as
/// (map, property, expected, found, message).
fn refusal<M: GlobalMap>(change: impl FnOnce(&mut MapMeta)) -> [String; 5] {
    let sb = Sandbox::enter();
    let mut meta = M::definition().unwrap();
    change(&mut meta);
    let path = M::pin_path(&sb.bpffs());
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    PinnedMap::open_or_create(&path, M::NAME, &meta).expect("creating the map");
    match M::open(&sb.bpffs()) {
        Err(e @ Error::MapMismatch { .. }) => {
            let message = e.to_string();
            let Error::MapMismatch {
                map,
                property,
                expected,
                found,
            } = e
            else {
                unreachable!()
            };
            [map, property.into(), expected, found, message]
        }
        Err(e) => panic!("{}: another error: {e}", M::NAME),
        Ok(_) => panic!("{} opened on a map of another layout", M::NAME),
    }
}

#[test]
fn wrong_key_size_is_refused_naming_the_map() {
    let [map, property, expected, found, message] = refusal::<Lxc>(|m| m.key_size = 4);
    let key_size = std::mem::size_of::<EndpointKey>();
    assert_eq!(
        [map, property, expected, found],
        [
            "cilium_lxc",
            "key size",
            format!("{key_size}B").as_str(),
            "4B"
        ]
    );
    assert_eq!(
        message,
        format!("map cilium_lxc: key size is 4B, expected {key_size}B")
    );
}

#[test]
fn wrong_value_size_is_refused() {
    let size = std::mem::size_of::<abi::tunnel::TunnelValue>();
    let [map, property, expected, found, _] = refusal::<Tunnel>(|m| m.value_size = size as u32 + 4);
    assert_eq!(
        [map, property, expected, found],
        [
            "cilium_tunnel_map",
            "value size",
            format!("{size}B").as_str(),
            format!("{}B", size + 4).as_str()
        ]
    );
}

#[test]
fn wrong_type_is_refused() {
    // cilium_ipcache is an LPM trie; a hash of the same sizes is not it
    let [map, property, expected, found, _] =
        refusal::<Ipcache>(|m| m.map_type = BPF_MAP_TYPE_HASH);
    assert_eq!(
        [map, property, expected, found],
        ["cilium_ipcache", "type", "lpm_trie (11)", "hash (1)"]
    );
}

#[test]
fn a_per_cpu_map_that_is_not_per_cpu_is_refused() {
    let [map, property, expected, found, _] =
        refusal::<Metrics>(|m| m.map_type = BPF_MAP_TYPE_HASH);
    assert_eq!(
        [map, property, expected, found],
        ["cilium_metrics", "type", "percpu_hash (5)", "hash (1)"]
    );
}

#[test]
fn wrong_flags_are_refused() {
    // cilium_lxc is BPF_F_NO_PREALLOC; a preallocated hash is another map
    assert_eq!(Lxc::definition().unwrap().map_flags, 1);
    let [map, property, expected, found, _] = refusal::<Lxc>(|m| m.map_flags = 0);
    assert_eq!(
        [map, property, expected, found],
        ["cilium_lxc", "flags", "0x1", "0x0"]
    );
}

#[test]
fn every_handle_opens_on_the_datapaths_pins() {
    let sb = Sandbox::enter();
    let sizes = MapSizes {
        ct_tcp: 1024,
        ct_any: 1024,
        ..Default::default()
    };
    let _dp = Datapath::init(&sb.bpffs(), &sizes).expect("datapath");
    let globals = sb.bpffs().join(abi::maps::GLOBALS_DIR);
    // bpf_sock's own maps
    datapath::socketlb::SocketLb::load(&globals, &sizes).expect("bpf_sock");
    let root = sb.bpffs();
    fn opens<M: GlobalMap>(root: &Path) {
        if let Err(e) = M::open(root) {
            panic!("{}: {e}", M::NAME);
        }
    }
    opens::<Lxc>(&root);
    opens::<Ipcache>(&root);
    opens::<Tunnel>(&root);
    opens::<Ct4Global>(&root);
    opens::<CtAny4Global>(&root);
    opens::<Snat4External>(&root);
    opens::<Metrics>(&root);
    opens::<Lb4Services>(&root);
    opens::<Lb4Backends>(&root);
    opens::<Lb4RevNat>(&root);
    opens::<LbAffinityMatch>(&root);
    opens::<Lb4Maglev>(&root);
    opens::<Lb4ReverseSk>(&root);
    opens::<Ipv4FragDatagrams>(&root);
    opens::<Ratelimit>(&root);
    opens::<RatelimitMetrics>(&root);
    opens::<CallPolicy>(&root);
    opens::<PolicyMaps>(&root);
    opens::<Events>(&root);
    opens::<RuntimeConfig>(&root);
    opens::<NodeMap>(&root);
    opens::<NodeMapV2>(&root);
    opens::<AuthMap>(&root);
    assert_eq!(Ct4Global::open(&root).unwrap().max_entries(), 1024);

    // typed access round-trips; the setters write what the datapath reads
    let lxc = Lxc::open(&root).unwrap();
    let key = EndpointKey::v4(Ipv4Addr::new(10, 0, 0, 9));
    lxc.put(&key, &EndpointInfo::host()).unwrap();
    assert!(lxc.get(&key).unwrap().is_some());
    assert_eq!(lxc.keys().unwrap(), vec![key]);
    assert!(lxc.remove(&key).unwrap());
    let config = RuntimeConfig::open(&root).unwrap();
    config.set_nodeport_range(30000, 32767).unwrap();
    config.set_ipv4_mask(24).unwrap();
    config.set_agent_liveness(42).unwrap();
    assert_eq!(config.agent_liveness().unwrap(), 42);
    let raw = PinnedMap::open_global(&root, abi::maps::RUNTIME_CONFIG).unwrap();
    let value = |index: u32| raw.get::<u32, u64>(&index).unwrap().unwrap();
    assert_eq!(
        value(abi::runtime_config::NODEPORT_RANGE),
        30000 << 16 | 32767
    );
    assert_eq!(
        value(abi::runtime_config::IPV4_MASK),
        u64::from(0xffff_ff00u32.to_be())
    );
}
