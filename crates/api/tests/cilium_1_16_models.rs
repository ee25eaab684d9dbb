//! The models as Cilium 1.16's `cilium-dbg` reads them: field names, the
//! objects it dereferences without a nil check, and the spellings it takes.

use api::models::*;
use api::service::{FrontendAddress, L4Protocol, Service, ServiceSpec, ServiceStatus};
use serde_json::json;
use std::time::Duration;

#[test]
fn any_protocol_frontend_is_sent_without_protocol_as_cilium_1_16_does() {
    let fe = FrontendAddress {
        ip: "10.96.0.10".into(),
        port: 80,
        protocol: L4Protocol::Any,
        scope: "external".into(),
    };
    assert_eq!(
        serde_json::to_value(&fe).unwrap(),
        json!({"ip": "10.96.0.10", "port": 80, "scope": "external"})
    );
    let tcp = FrontendAddress {
        protocol: L4Protocol::Tcp,
        ..fe
    };
    assert_eq!(serde_json::to_value(&tcp).unwrap()["protocol"], "tcp");
}

#[test]
fn frontend_protocol_reads_none_any_and_cilium_dbg_tcp() {
    for (raw, want) in [
        (json!("NONE"), L4Protocol::Any),
        (json!("none"), L4Protocol::Any),
        (json!("ANY"), L4Protocol::Any),
        (json!("any"), L4Protocol::Any),
        (json!(""), L4Protocol::Any),
        (json!("tcp"), L4Protocol::Tcp),
        (json!("TCP"), L4Protocol::Tcp),
        (json!("UDP"), L4Protocol::Udp),
        (json!("sctp"), L4Protocol::Sctp),
    ] {
        let fe: FrontendAddress =
            serde_json::from_value(json!({"ip": "10.0.0.1", "port": 80, "protocol": raw})).unwrap();
        assert_eq!(fe.protocol, want, "{raw}");
    }
    let absent: FrontendAddress =
        serde_json::from_value(json!({"ip": "10.0.0.1", "port": 80})).unwrap();
    assert_eq!(absent.protocol, L4Protocol::Any);
    let err = serde_json::from_value::<FrontendAddress>(
        json!({"ip": "10.0.0.1", "port": 80, "protocol": "icmp"}),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("unknown protocol \"icmp\""),
        "{err}"
    );
}

#[test]
fn cilium_dbg_1_16_service_update_body_is_accepted() {
    // what `cilium-dbg service update --id 5 --frontend 10.96.0.5:80
    // --backends 10.1.0.2:8080` sends
    let body = json!({
        "id": 5,
        "frontend-address": {"ip": "10.96.0.5", "port": 80, "protocol": "tcp", "scope": "external"},
        "backend-addresses": [{"ip": "10.1.0.2", "port": 8080, "state": "active", "weight": 100}],
        "flags": {"type": "ClusterIP", "trafficPolicy": "Cluster",
                  "extTrafficPolicy": "Cluster", "intTrafficPolicy": "Cluster"},
        "updateServices": false
    });
    let spec: ServiceSpec = serde_json::from_value(body).unwrap();
    let flags = spec.flags.unwrap();
    assert_eq!(flags.ext_traffic_policy, "Cluster");
    assert_eq!(spec.backend_addresses[0].weight, Some(100));
    // what our older agents wrote into the kvstore still reads
    let old: ServiceSpec = serde_json::from_value(json!({
        "id": 5, "frontend-address": {"ip": "10.96.0.5", "port": 80, "protocol": "ANY"},
        "update-services": false
    }))
    .unwrap();
    assert_eq!(old.frontend_address.protocol, L4Protocol::Any);
    assert_eq!(serde_json::to_value(&old).unwrap()["updateServices"], false);
}

/// The status an agent without k8s, proxy or cilium-health sends, each
/// object Cilium 1.16's agent always sends filled in.
fn full_status() -> StatusResponse {
    StatusResponse {
        cilium: Some(Status::ok("0.1.0 (v0.1.0-abcdef12)")),
        kvstore: Some(Status::ok("Disabled")),
        kubernetes: Some(K8sStatus {
            state: State::Disabled,
            ..Default::default()
        }),
        kube_proxy_replacement: Some(KubeProxyReplacement {
            mode: "True".into(),
            devices: vec!["eth0".into()],
            device_list: vec![KubeProxyReplacementDevice {
                name: "eth0".into(),
                ip: vec!["198.18.0.11".into()],
            }],
            direct_routing_device: "eth0".into(),
            features: KubeProxyReplacementFeatures {
                node_port: NodePortFeature {
                    enabled: true,
                    mode: "SNAT".into(),
                    algorithm: "Random".into(),
                    acceleration: "None".into(),
                    port_min: Some(30000),
                    port_max: Some(32767),
                    ..Default::default()
                },
                ..Default::default()
            },
        }),
        host_firewall: Some(HostFirewall {
            mode: "Disabled".into(),
            devices: vec!["eth0".into()],
        }),
        srv6: Some(Srv6::default()),
        cni_chaining: Some(CniChainingStatus {
            mode: "none".into(),
        }),
        cni_file: Some(Status::disabled()),
        node_monitor: Some(MonitorStatus {
            cpus: 2,
            npages: 64,
            pagesize: 4096,
            lost: 0,
            unknown: None,
        }),
        ipv4_big_tcp: Some(BigTcp::default()),
        ipv6_big_tcp: Some(BigTcp::default()),
        bandwidth_manager: Some(BandwidthManager::default()),
        routing: Some(Routing {
            intra_host_routing_mode: "Legacy".into(),
            inter_host_routing_mode: "Tunnel".into(),
            tunnel_protocol: "vxlan".into(),
        }),
        attach_mode: "tc".into(),
        datapath_mode: "veth".into(),
        masquerading: Some(Masquerading {
            enabled_protocols: Some(MasqueradingProtocols::default()),
            ..Default::default()
        }),
        controllers: vec![],
        ipam: Some(api::ipam::IpamStatus::default()),
        proxy: None,
        identity_range: Some(IdentityRange {
            min_identity: 256,
            max_identity: 65535,
        }),
        hubble: Some(HubbleStatus {
            state: State::Ok,
            observer: Some(HubbleObserver {
                max_flows: 4095,
                current_flows: 3,
                seen_flows: 7,
                uptime: "1m0.5s".into(),
            }),
            metrics: Some(HubbleMetrics {
                state: State::Disabled,
            }),
            ..Default::default()
        }),
        encryption: Some(EncryptionStatus {
            mode: "Disabled".into(),
            msg: String::new(),
        }),
        cluster: Some(ClusterStatus {
            cilium_health: None,
            self_: "node1".into(),
        }),
        bpf_maps: Some(BpfMapStatus::default()),
        clock_source: Some(ClockSource {
            mode: "ktime".into(),
            hertz: None,
        }),
        auth_certificate_provider: Some(Status::disabled()),
        ..Default::default()
    }
}

#[test]
fn status_sends_every_object_cilium_1_16_sends_with_its_names() {
    let v = serde_json::to_value(full_status()).unwrap();
    for key in [
        "cilium",
        "kvstore",
        "kubernetes",
        "kube-proxy-replacement",
        "host-firewall",
        "srv6",
        "cni-chaining",
        "cni-file",
        "nodeMonitor",
        "ipv4-big-tcp",
        "ipv6-big-tcp",
        "bandwidth-manager",
        "routing",
        "attach-mode",
        "datapath-mode",
        "masquerading",
        "ipam",
        "identity-range",
        "hubble",
        "encryption",
        "cluster",
        "bpf-maps",
        "clock-source",
        "auth-certificate-provider",
    ] {
        assert!(v.get(key).is_some(), "{key} missing from {v:#}");
    }
    // `cilium-dbg status --verbose` dereferences each feature
    let features = &v["kube-proxy-replacement"]["features"];
    for key in [
        "nodePort",
        "hostPort",
        "externalIPs",
        "socketLB",
        "socketLBTracing",
        "sessionAffinity",
        "gracefulTermination",
        "nat46X64",
    ] {
        assert!(features[key].is_object(), "features.{key} in {features:#}");
    }
    assert_eq!(features["nodePort"]["portMin"], 30000);
    assert_eq!(features["bpfSocketLBHostnsOnly"], false);
    let kpr = &v["kube-proxy-replacement"];
    assert_eq!(
        kpr["deviceList"],
        json!([{"name": "eth0", "ip": ["198.18.0.11"]}])
    );
    assert_eq!(kpr["directRoutingDevice"], "eth0");
    assert_eq!(
        v["nodeMonitor"],
        json!({"cpus": 2, "npages": 64, "pagesize": 4096, "lost": 0})
    );
    assert_eq!(
        v["masquerading"],
        json!({"enabled": false, "enabledProtocols": {"ipv4": false, "ipv6": false}})
    );
    assert_eq!(v["hubble"]["observer"]["max-flows"], 4095);
    assert_eq!(v["hubble"]["metrics"]["state"], "Disabled");
    assert_eq!(v["cluster"], json!({"self": "node1"}));
    // absent, as from an agent without an L7 proxy
    assert!(v.get("proxy").is_none());
    let back: StatusResponse = serde_json::from_value(v).unwrap();
    assert_eq!(back, full_status());
}

#[test]
fn kube_proxy_replacement_without_features_set_still_sends_every_sub_object() {
    let v = serde_json::to_value(KubeProxyReplacement {
        mode: "False".into(),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        v,
        json!({"mode": "False", "features": {
            "nodePort": {"enabled": false},
            "hostPort": {"enabled": false},
            "externalIPs": {"enabled": false},
            "socketLB": {"enabled": false},
            "socketLBTracing": {"enabled": false},
            "sessionAffinity": {"enabled": false},
            "gracefulTermination": {"enabled": false},
            "nat46X64": {"enabled": false},
            "bpfSocketLBHostnsOnly": false
        }})
    );
}

#[test]
fn a_cilium_1_16_agent_status_reads() {
    // as Cilium 1.16's agent marshals it: Go's omitempty drops false and 0
    let go = json!({
        "cilium": {"state": "Ok", "msg": "1.16.0 (v1.16.0-82999990)"},
        "kube-proxy-replacement": {
            "mode": "True", "devices": ["eth0"],
            "deviceList": [{"name": "eth0", "ip": ["", "10.0.0.5"]}],
            "directRoutingDevice": "eth0",
            "features": {"nodePort": {"enabled": true, "mode": "SNAT", "algorithm": "Random",
                                      "acceleration": "Disabled", "portMin": 30000, "portMax": 32767},
                         "hostPort": {}, "externalIPs": {"enabled": true}, "socketLB": {},
                         "socketLBTracing": {}, "sessionAffinity": {"enabled": true},
                         "gracefulTermination": {"enabled": true}, "nat46X64": {}}
        },
        "nodeMonitor": {"cpus": 4, "npages": 64, "pagesize": 4096},
        "hubble": {"state": "Ok", "observer": {"max-flows": 4095, "current-flows": 10,
                   "seen-flows": 20, "uptime": "2h3m4.5s"}, "metrics": {"state": "Disabled"}},
        "proxy": {"ip": "10.0.0.1", "port-range": "10000-20000", "total-redirects": 0,
                  "envoy-deployment-mode": "embedded"},
        "masquerading": {"enabled": true, "enabledProtocols": {"ipv4": true}, "mode": "BPF",
                         "snat-exclusion-cidr-v4": "10.0.0.0/8"},
        "clock-source": {"mode": "jiffies", "hertz": 250},
        "srv6": {},
        "cluster-mesh": {"num-global-services": 0}
    });
    let s: StatusResponse = serde_json::from_value(go).unwrap();
    let kpr = s.kube_proxy_replacement.unwrap();
    assert!(kpr.features.external_ips.enabled && !kpr.features.host_port.enabled);
    assert_eq!(kpr.features.node_port.port_max, Some(32767));
    assert_eq!(s.node_monitor.unwrap().lost, 0);
    assert!(!s.masquerading.unwrap().enabled_protocols.unwrap().ipv6);
    assert_eq!(s.clock_source.unwrap().hertz, Some(250));
    assert_eq!(s.proxy.unwrap().envoy_deployment_mode, "embedded");
}

#[test]
fn debuginfo_sends_every_field_cilium_dbg_reads() {
    let svc = Service {
        spec: ServiceSpec::default(),
        status: ServiceStatus::default(),
    };
    let info = DebugInfo {
        cilium_version: api::full_version(),
        kernel_version: "6.8.0".into(),
        cilium_status: full_status(),
        endpoint_list: vec![],
        service_list: vec![svc],
        policy: Policy {
            policy: String::new(),
            revision: 1,
        },
        cilium_memory_map: "00400000-00401000 r-xp".into(),
        cilium_nodemonitor_memory_map: String::new(),
        environment_variables: vec!["debug:false".into()],
        subsystem: [("ipam".to_owned(), "IPv4: 1/254".to_owned())].into(),
        encryption: DebugInfoEncryption::default(),
    };
    let v = serde_json::to_value(&info).unwrap();
    for key in [
        "cilium-version",
        "kernel-version",
        "cilium-status",
        "endpoint-list",
        "service-list",
        "policy",
        "cilium-memory-map",
        "environment-variables",
        "subsystem",
        "encryption",
    ] {
        assert!(v.get(key).is_some(), "{key} missing");
    }
    assert_eq!(v["policy"], json!({"policy": "", "revision": 1}));
    assert_eq!(v["encryption"], json!({}));
    assert!(v.get("cilium-nodemonitor-memory-map").is_none());
    assert!(v["cilium-status"]["kube-proxy-replacement"]["features"]["nodePort"].is_object());
    let back: DebugInfo = serde_json::from_value(v).unwrap();
    assert_eq!(back, info);
}

#[test]
fn full_version_has_the_seven_words_cilium_splits() {
    // Cilium's version.FromString: version, revision, date, _, _, runtime, arch
    let v = api::full_version();
    let words: Vec<&str> = v.split(' ').collect();
    assert_eq!(words.len(), 7, "{v}");
    assert_eq!(words[0], api::VERSION);
    assert_eq!(words[1], api::GIT_REVISION);
    assert_eq!(&words[3..5], ["rustc", "version"]);
    assert!(words[6].contains('/'), "{v}");
}

#[test]
fn durations_are_spelled_and_read_as_go_does() {
    for (d, go) in [
        (Duration::ZERO, "0s"),
        (Duration::from_millis(1500), "1.5s"),
        (Duration::from_millis(250), "250ms"),
        (Duration::from_micros(3), "3µs"),
        (Duration::from_secs(60), "1m0s"),
        (Duration::from_millis(60_500), "1m0.5s"),
        (Duration::from_secs(2 * 3600), "2h0m0s"),
        (Duration::from_secs(72 * 3600 + 3 * 60), "72h3m0s"),
    ] {
        assert_eq!(api::duration::go_duration(d), go);
        assert_eq!(api::duration::parse_go_duration(go), Some(d), "{go}");
    }
    assert_eq!(
        api::duration::parse_go_duration("1h2m3.5s"),
        Some(Duration::from_millis(3_723_500))
    );
    assert_eq!(
        api::duration::parse_go_duration("10ns"),
        Some(Duration::from_nanos(10))
    );
    for bad in ["", "5", "1x", "s"] {
        assert_eq!(api::duration::parse_go_duration(bad), None, "{bad}");
    }
}
