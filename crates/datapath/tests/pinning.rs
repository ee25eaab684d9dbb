//! Global maps survive a reload; incompatible pins are migrated, not reused.

use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::maps;
use datapath::{Datapath, MapSizes, PinnedMap};
use std::net::Ipv4Addr;
use testsupport::Sandbox;

fn small() -> MapSizes {
    MapSizes {
        ct_tcp: 1024,
        ct_any: 1024,
        ..Default::default()
    }
}

#[test]
fn reopening_keeps_map_contents() {
    let sb = Sandbox::enter();
    let dp = Datapath::init(&sb.bpffs(), &small()).expect("first init");
    for name in [
        maps::LXC,
        maps::IPCACHE,
        maps::CT4_GLOBAL,
        maps::CT_ANY4_GLOBAL,
        maps::METRICS,
        maps::RUNTIME_CONFIG,
        maps::EVENTS,
    ] {
        assert!(
            sb.bpffs().join("tc/globals").join(name).exists(),
            "{name} pinned"
        );
    }
    let lxc = PinnedMap::open_global(&sb.bpffs(), maps::LXC).unwrap();
    let key = EndpointKey::v4(Ipv4Addr::new(10, 0, 0, 1));
    lxc.put(&key, &EndpointInfo::host()).unwrap();
    drop(dp);

    let _dp = Datapath::init(&sb.bpffs(), &small()).expect("second init");
    let lxc = PinnedMap::open_global(&sb.bpffs(), maps::LXC).unwrap();
    assert_eq!(
        lxc.get::<_, EndpointInfo>(&key).unwrap(),
        Some(EndpointInfo::host())
    );
}

#[test]
fn resized_map_is_migrated_and_others_keep_state() {
    let sb = Sandbox::enter();
    Datapath::init(&sb.bpffs(), &small()).expect("first init");
    let key = EndpointKey::v4(Ipv4Addr::new(10, 0, 0, 2));
    PinnedMap::open_global(&sb.bpffs(), maps::LXC)
        .unwrap()
        .put(&key, &EndpointInfo::host())
        .unwrap();
    let ct_key = abi::ct::Ipv4CtTuple {
        nexthdr: 6,
        ..Default::default()
    };
    let ct = PinnedMap::open_global(&sb.bpffs(), maps::CT4_GLOBAL).unwrap();
    ct.put(&ct_key, &abi::ct::CtEntry::default()).unwrap();
    drop(ct);

    Datapath::init(
        &sb.bpffs(),
        &MapSizes {
            ct_tcp: 2048,
            ct_any: 1024,
            ..Default::default()
        },
    )
    .expect("init with a bigger CT map");
    let ct = PinnedMap::open_global(&sb.bpffs(), maps::CT4_GLOBAL).unwrap();
    assert_eq!(ct.meta().max_entries, 2048, "new pin has the new size");
    assert_eq!(ct.count().unwrap(), 0, "incompatible map was replaced");
    let lxc = PinnedMap::open_global(&sb.bpffs(), maps::LXC).unwrap();
    assert!(
        lxc.get::<_, EndpointInfo>(&key).unwrap().is_some(),
        "compatible map kept"
    );
    let leftovers: Vec<_> = std::fs::read_dir(sb.bpffs().join("tc/globals"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(":migrating"))
        .collect();
    assert!(leftovers.is_empty(), "migrated pins are removed");
}
