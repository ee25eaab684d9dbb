//! Global maps survive a reload; incompatible pins are migrated, not reused;
//! pins of ours under a former name move to the new one.

use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::maps;
use datapath::attach::AttachMode;
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

#[test]
fn maps_pinned_under_a_former_name_of_ours_move_to_the_new_one() {
    use abi::ratelimit::{RatelimitMetricsKey, RatelimitMetricsValue};
    let sb = Sandbox::enter();
    let globals = sb.bpffs().join(maps::GLOBALS_DIR);
    let dp = Datapath::init(&sb.bpffs(), &small()).expect("first init");
    datapath::policymap::PolicyMap::open(&globals, 7).expect("policy map");
    let policy_id = PinnedMap::open_global(&sb.bpffs(), &datapath::policymap::name(7))
        .unwrap()
        .id()
        .unwrap();
    let refused = RatelimitMetricsKey { usage: 2 };
    PinnedMap::open_global(&sb.bpffs(), maps::RATELIMIT_METRICS)
        .unwrap()
        .put(&refused, &RatelimitMetricsValue { dropped: 5 })
        .unwrap();
    let other_id = PinnedMap::open_global(&sb.bpffs(), maps::LB_AFFINITY_MATCH)
        .unwrap()
        .id()
        .unwrap();
    drop(dp);
    // An earlier version's pins, cilium_policy_maps and
    // cilium_ratelimit_metrics; and under cilium_ratelimit a map of another
    // shape (as Cilium 1.16's own would be), which is not ours to take.
    let rename =
        |from: &str, to: &str| std::fs::rename(globals.join(from), globals.join(to)).unwrap();
    rename(maps::POLICY_MAPS, "cilium_policy_maps");
    rename(maps::RATELIMIT_METRICS, "cilium_ratelimit_metrics");
    std::fs::remove_file(globals.join(maps::RATELIMIT)).unwrap();
    rename(maps::LB_AFFINITY_MATCH, "cilium_ratelimit");

    let _dp = Datapath::init(&sb.bpffs(), &small()).expect("second init");
    for old in ["cilium_policy_maps", "cilium_ratelimit_metrics"] {
        assert!(!globals.join(old).exists(), "{old} moved");
    }
    let outer = PinnedMap::open_global(&sb.bpffs(), maps::POLICY_MAPS).unwrap();
    assert_eq!(
        outer.get::<u32, u32>(&7).unwrap(),
        Some(policy_id),
        "the endpoint's policy map is still registered"
    );
    let counted = PinnedMap::open_global(&sb.bpffs(), maps::RATELIMIT_METRICS)
        .unwrap()
        .get::<_, RatelimitMetricsValue>(&refused)
        .unwrap();
    assert_eq!(counted.map(|v| v.dropped), Some(5), "refusals kept");
    let other = PinnedMap::open_global(&sb.bpffs(), "cilium_ratelimit").unwrap();
    assert_eq!(other.id().unwrap(), other_id, "another shape is left alone");
    assert!(globals.join(maps::RATELIMIT).exists(), "a fresh bucket map");
}

/// The pinned program of each object's key directory, by program name.
fn pinned_programs(sb: &Sandbox) -> Vec<(String, u32)> {
    let mut found = Vec::new();
    let root = sb.bpffs().join("cilium/programs");
    for dir in std::fs::read_dir(&root).expect("programs pinned").flatten() {
        for pin in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let prog =
                aya::programs::SchedClassifier::from_pin(pin.path()).expect("pinned program");
            let name = format!(
                "{}/{}",
                dir.file_name().to_string_lossy(),
                pin.file_name().to_string_lossy()
            );
            found.push((name, prog.info().expect("program info").id()));
        }
    }
    found.sort();
    found
}

/// What an interface's tcx ingress runs.
fn tcx_ingress(ifname: &str) -> Vec<u32> {
    let (_, progs) =
        aya::programs::SchedClassifier::query_tcx(ifname, aya::programs::TcAttachType::Ingress)
            .expect("query tcx");
    progs.iter().map(|p| p.id()).collect()
}

#[test]
fn verified_programs_are_reused_only_against_the_same_maps() {
    let sb = Sandbox::enter();
    drop(Datapath::init(&sb.bpffs(), &small()).expect("first init"));
    let first = pinned_programs(&sb);
    assert_eq!(first.len(), 6, "{first:?}");

    // a restart runs the very programs the first start verified
    let mut dp = Datapath::init(&sb.bpffs(), &small()).expect("second init");
    assert_eq!(pinned_programs(&sb), first);
    let status = std::process::Command::new("ip")
        .args([
            "link",
            "add",
            "lxcreuse",
            "type",
            "veth",
            "peer",
            "name",
            "reusepeer",
        ])
        .status()
        .unwrap();
    assert!(status.success());
    dp.attach_endpoint(7, "lxcreuse").expect("attach");
    let (_, lxc_id) = first
        .iter()
        .find(|(n, _)| n.starts_with("bpf_lxc-") && n.ends_with("/cil_from_container"))
        .expect("cil_from_container pinned");
    assert_eq!(tcx_ingress("lxcreuse"), vec![*lxc_id]);
    drop(dp);

    // a resized conntrack map is made again: programs holding the old
    // one are verified anew, under a new key, and the old pins go
    let bigger = MapSizes {
        ct_tcp: 2048,
        ..small()
    };
    drop(Datapath::init(&sb.bpffs(), &bigger).expect("init with a resized map"));
    let third = pinned_programs(&sb);
    assert_eq!(third.len(), 6, "{third:?}");
    let lxc = |list: &[(String, u32)]| {
        list.iter()
            .find(|(n, _)| n.ends_with("/cil_from_container"))
            .cloned()
            .expect("cil_from_container pinned")
    };
    let (old_name, old_id) = lxc(&first);
    let (new_name, new_id) = lxc(&third);
    assert_ne!(old_name, new_name, "a new key");
    assert_ne!(old_id, new_id, "verified again");
}

/// The tc filter `ifname`'s ingress has at Cilium's priority 1, if any.
fn tc_ingress_filter(ifname: &str) -> bool {
    aya::programs::tc::SchedClassifierLink::attached(
        ifname,
        aya::programs::TcAttachType::Ingress,
        1,
        aya::programs::tc::TcHandle::new(0, 1),
        None,
    )
    .is_ok()
}

#[test]
fn tc_attach_adds_the_clsact_qdisc_only_where_there_is_none_and_replaces_a_filter() {
    let sb = Sandbox::enter();
    let mut dp = Datapath::init(&sb.bpffs(), &small()).expect("init");
    for (dev, peer) in [("lxcbare", "barepeer"), ("lxcqdisc", "qdiscpeer")] {
        let status = std::process::Command::new("ip")
            .args(["link", "add", dev, "type", "veth", "peer", "name", peer])
            .status()
            .unwrap();
        assert!(status.success());
    }
    let status = std::process::Command::new("tc")
        .args(["qdisc", "add", "dev", "lxcqdisc", "clsact"])
        .status()
        .unwrap();
    assert!(status.success());
    for dev in ["lxcbare", "lxcqdisc"] {
        let mode = dp
            .attach_endpoint_as(8, dev, AttachMode::Tc)
            .expect("tc attach");
        assert_eq!(mode, AttachMode::Tc);
        assert!(tc_ingress_filter(dev), "{dev} has its filter");
        // a second attach (a restart) replaces the program in place
        dp.attach_endpoint_as(8, dev, AttachMode::Tc)
            .expect("tc attach again");
        assert!(tc_ingress_filter(dev), "{dev} keeps its filter");
    }
}
