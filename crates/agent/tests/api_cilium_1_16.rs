//! `/v1/healthz` and `/v1/debuginfo` of a real agent, read through a mirror
//! of what Cilium 1.16's `cilium-dbg` needs from them: every object its
//! agent always sends and its `status --verbose`, `debuginfo`, `version`
//! and `service list` read without a nil check. The mirror is written from
//! Cilium's api/v1/openapi.yaml, not from our models, so a field our models
//! drop or rename fails here. Most mirror fields are there to be required,
//! not read.
#![allow(dead_code)]

use serde::Deserialize;
use serde_json::{Map, Value};
use testsupport::node::Node;

/// Any JSON object: the object must be there, its fields may be omitted
/// (Go's omitempty drops false and 0).
type Object = Map<String, Value>;

#[derive(Deserialize)]
struct Status {
    state: String,
}

#[derive(Deserialize)]
struct Mode {
    mode: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Features {
    node_port: Object,
    host_port: Object,
    #[serde(rename = "externalIPs")]
    external_ips: Object,
    #[serde(rename = "socketLB")]
    socket_lb: Object,
    #[serde(rename = "socketLBTracing")]
    socket_lb_tracing: Object,
    session_affinity: Object,
    graceful_termination: Object,
    #[serde(rename = "nat46X64")]
    nat46_x64: Object,
}

#[derive(Deserialize)]
struct KubeProxyReplacement {
    mode: String,
    features: Features,
}

#[derive(Deserialize)]
struct MonitorStatus {
    cpus: u64,
    npages: u64,
    pagesize: u64,
}

#[derive(Deserialize)]
struct Hubble {
    state: String,
    observer: Object,
    metrics: Object,
}

#[derive(Deserialize)]
struct Masquerading {
    #[serde(rename = "enabledProtocols")]
    enabled_protocols: Object,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Routing {
    inter_host_routing_mode: String,
    intra_host_routing_mode: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct StatusResponse {
    cilium: Status,
    kvstore: Status,
    kubernetes: Status,
    kube_proxy_replacement: KubeProxyReplacement,
    host_firewall: Mode,
    srv6: Object,
    cni_chaining: Mode,
    cni_file: Status,
    #[serde(rename = "nodeMonitor")]
    node_monitor: MonitorStatus,
    ipv4_big_tcp: Object,
    ipv6_big_tcp: Object,
    bandwidth_manager: Object,
    routing: Routing,
    attach_mode: String,
    datapath_mode: String,
    masquerading: Masquerading,
    ipam: Object,
    identity_range: Object,
    hubble: Hubble,
    encryption: Mode,
    cluster: Object,
    bpf_maps: Object,
    clock_source: Mode,
    auth_certificate_provider: Status,
}

#[derive(Deserialize)]
struct Flags {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct Spec {
    flags: Flags,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Realized {
    frontend_address: Object,
}

#[derive(Deserialize)]
struct ServiceStatus {
    realized: Realized,
}

#[derive(Deserialize)]
struct Service {
    spec: Spec,
    status: ServiceStatus,
}

#[derive(Deserialize)]
struct Policy {
    policy: String,
    revision: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
struct DebugInfo {
    cilium_version: String,
    kernel_version: String,
    cilium_status: StatusResponse,
    endpoint_list: Vec<Value>,
    service_list: Vec<Service>,
    policy: Policy,
    cilium_memory_map: String,
    environment_variables: Vec<String>,
    subsystem: Map<String, Value>,
    encryption: Object,
}

#[derive(Deserialize)]
struct BriefStatus {
    cilium: Status,
    cluster: Object,
}

fn get<T: serde::de::DeserializeOwned>(node: &Node, path: &str, headers: &[(&str, &str)]) -> T {
    let resp = api::Client::new(node.socket())
        .raw("GET", path, headers, None)
        .expect("api call");
    assert_eq!(resp.status, 200, "{path}");
    serde_json::from_slice(&resp.body).unwrap_or_else(|e| {
        panic!(
            "{path} is not Cilium 1.16's: {e}\n{}",
            String::from_utf8_lossy(&resp.body)
        )
    })
}

#[test]
fn healthz_and_debuginfo_carry_everything_cilium_1_16_reads() {
    let mut node = Node::new("10.0.7.0/24");
    node.start_agent();
    // a service asked for without flags or protocol, as an older client would
    let body = r#"{"frontend-address":{"ip":"10.96.0.10","port":80},
                   "backend-addresses":[{"ip":"10.0.7.5","port":8080}]}"#;
    let put = api::Client::new(node.socket())
        .raw("PUT", "/service/1", &[], Some(body.as_bytes()))
        .expect("put service");
    assert_eq!(put.status, 201, "{}", String::from_utf8_lossy(&put.body));

    let s: StatusResponse = get(&node, "/healthz", &[]);
    assert_eq!(s.cilium.state, "Ok");
    assert!(s.node_monitor.cpus > 0, "the rings read");
    assert_eq!(
        (s.node_monitor.npages, s.node_monitor.pagesize > 0),
        (64, true)
    );
    assert_eq!(s.kube_proxy_replacement.mode, "False");
    assert!(
        ["tc", "tcx"].contains(&s.attach_mode.as_str()),
        "{}",
        s.attach_mode
    );
    assert_eq!(s.datapath_mode, "veth");
    let brief: BriefStatus = get(&node, "/healthz", &[("brief", "true")]);
    assert_eq!(brief.cilium.state, "Ok");

    let info: DebugInfo = get(&node, "/debuginfo", &[]);
    // what `cilium-dbg version` prints as the daemon's, in the seven words
    // Cilium's version.FromString splits
    assert_eq!(info.cilium_version, api::full_version());
    assert_eq!(info.cilium_version.split(' ').count(), 7);
    let kernel: Vec<&str> = info.kernel_version.split('.').collect();
    assert!(
        kernel.len() == 3 && kernel.iter().all(|p| p.parse::<u32>().is_ok()),
        "{}",
        info.kernel_version
    );
    assert!(info.cilium_memory_map.contains("cilium-agent"));
    assert!(info
        .environment_variables
        .iter()
        .any(|e| e.starts_with("kube-proxy-replacement:")));
    assert_eq!(info.service_list.len(), 1);
    let svc = &info.service_list[0];
    assert_eq!(svc.spec.flags.kind, "ClusterIP");
    let fe = &svc.status.realized.frontend_address;
    // Cilium 1.16 sends no protocol and always a scope; its cilium-dbg
    // refuses a frontend otherwise
    assert_eq!(fe.get("protocol"), None, "{fe:?}");
    assert_eq!(fe["scope"], "external");
    assert!(info.cilium_status.cluster.contains_key("self"));
    let _ = info.policy.revision;

    // our CLI reads the same answers
    let version = node.cilium(&["version"]);
    let out = String::from_utf8_lossy(&version.stdout);
    assert!(
        out.contains(&format!("Daemon: {}", api::full_version())),
        "{out}"
    );
    let status = node.cilium(&["status", "--verbose"]);
    let out = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{out}");
    assert!(
        out.contains("Proxy Status:            No managed proxy redirect"),
        "{out}"
    );
    let list = node.cilium(&["service", "list"]);
    let out = String::from_utf8_lossy(&list.stdout);
    assert!(
        out.contains("10.96.0.10:80") && out.contains("10.0.7.5:8080"),
        "{out}"
    );
}
