//! Hubble on a real node after the demo's traffic: our generated client
//! reads the node's `hubble.sock` (a policy drop with its reason and both
//! pods, a reply flagged by conntrack, filters, the other RPCs), and
//! Cilium v1.16.0's own Hubble CLI (built from the `hubble/` folder of the
//! cilium module by scripts/build-cilium-tools.sh) reads it too, and
//! reads the whole cluster through Hubble Relay, which follows a node's
//! agent going away and coming back; a node's Hubble port takes only
//! clients with a certificate of the Hubble CA.

use crate::common::{self, Lab};
use hubble::flow::{self, Flow, FlowFilter};
use hubble::observer::GetFlowsRequest;
use hubble::observer::{get_flows_response::ResponseTypes, observer_client::ObserverClient};
use std::path::PathBuf;

const SOCKET: &str = "/var/run/cilium/hubble.sock";

/// The demo Service's ClusterIP (the lab's `layout::DEMO_SERVICE_IP`).
const DEMO_SERVICE_IP: &str = "10.96.0.20";

/// The node's Hubble socket as this process reaches it: through the root
/// of a process in the node's mount namespace (its holder), and without
/// the /var/run symlink, which would be read from this process's root.
fn socket_of(lab: &Lab, node: &str) -> PathBuf {
    let pid = common::pid_in(&lab.dir.path().join(node).join("holder.pid"))
        .unwrap_or_else(|| panic!("{node} is not up"));
    let path = SOCKET.strip_prefix("/var").expect("under /var/run");
    PathBuf::from(format!("/proc/{pid}/root{path}"))
}

fn flows_of(rt: &tokio::runtime::Runtime, socket: &PathBuf, req: GetFlowsRequest) -> Vec<Flow> {
    rt.block_on(async {
        let mut client = ObserverClient::new(hubble::client::unix_channel(socket));
        let mut stream = client.get_flows(req).await.expect("GetFlows").into_inner();
        let mut out = Vec::new();
        while let Some(r) = stream.message().await.expect("flows") {
            if let Some(ResponseTypes::Flow(f)) = r.response_types {
                out.push(f);
            }
        }
        out
    })
}

fn pod(e: &Option<flow::Endpoint>) -> String {
    e.as_ref()
        .map(|e| format!("{}/{}", e.namespace, e.pod_name))
        .unwrap_or_default()
}

/// The demo sent pod-a (node1) to pod-b (node2) directly and through the
/// Service, then `outsider` to pod-b under the policy that drops it.
/// The demo's traffic again: by the time these checks run, the kubelets'
/// probes and the health checks may have pushed the lab's own demo out of
/// a node's ring of 4095 flows.
fn replay_demo(lab: &Lab) {
    let pod_b = lab.kubectl(&["get", "pod", "pod-b", "-o", "jsonpath={.status.podIP}"]);
    for (from, to) in [("pod-a", DEMO_SERVICE_IP), ("pod-a", pod_b.trim())] {
        let url = format!("http://{to}/hostname");
        let said = lab.ok(&["exec", from, "--", "curl", "-sS", "--max-time", "5", &url]);
        assert_eq!(said.trim(), "pod-b", "{from} to {url}");
    }
    let url = format!("http://{}/hostname", pod_b.trim());
    let denied = lab.run(&[
        "exec",
        "outsider",
        "--",
        "curl",
        "-sS",
        "--max-time",
        "2",
        &url,
    ]);
    assert!(!denied.status.success(), "outsider reached {url}");
}

pub fn api_on_a_node(lab: &Lab) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    replay_demo(lab);
    let node2 = socket_of(lab, "node2");
    let all = |whitelist: Vec<FlowFilter>| {
        flows_of(
            &rt,
            &node2,
            GetFlowsRequest {
                whitelist,
                ..Default::default()
            },
        )
    };

    let drops = all(vec![FlowFilter {
        verdict: vec![flow::Verdict::Dropped as i32],
        destination_pod: vec!["default/pod-b".into()],
        ..Default::default()
    }]);
    let denied = drops
        .iter()
        .find(|f| f.drop_reason_desc == flow::DropReason::PolicyDenied as i32)
        .unwrap_or_else(|| panic!("the policy drop on node2: {drops:#?}"));
    assert_eq!(pod(&denied.source), "default/outsider", "{denied:#?}");
    assert_eq!(pod(&denied.destination), "default/pod-b", "{denied:#?}");
    assert_eq!(denied.node_name, "node2");
    assert!(
        denied.source.as_ref().unwrap().identity > 255,
        "{denied:#?}"
    );

    // pod-b's answers to pod-a leave node2 as replies
    let replies = all(vec![FlowFilter {
        source_pod: vec!["default/pod-b".into()],
        reply: vec![true],
        ..Default::default()
    }]);
    assert!(
        replies
            .iter()
            .any(|f| f.is_reply == Some(true) && pod(&f.destination) == "default/pod-a"),
        "a reply from pod-b to pod-a: {replies:#?}"
    );
    // and what went to pod-b was not
    let requests = all(vec![FlowFilter {
        destination_pod: vec!["default/pod-b".into()],
        verdict: vec![flow::Verdict::Forwarded as i32],
        reply: vec![false],
        ..Default::default()
    }]);
    assert!(!requests.is_empty(), "forwarded requests to pod-b");

    // pod-a's connection to the demo Service, as socket LB translated it
    // on node1: the ClusterIP, then the backend
    let node1 = socket_of(lab, "node1");
    let traced = common::eventually("pod-a to the demo Service on node1", 10, || {
        let to_service = flows_of(
            &rt,
            &node1,
            GetFlowsRequest {
                whitelist: vec![FlowFilter {
                    destination_service: vec!["default/demo".into()],
                    ..Default::default()
                }],
                ..Default::default()
            },
        );
        to_service
            .iter()
            .find(|f| f.verdict == flow::Verdict::Traced as i32)
            .cloned()
            .ok_or_else(|| format!("{to_service:#?}"))
    });
    assert_eq!(traced.r#type, flow::FlowType::Sock as i32);
    assert_eq!(pod(&traced.source), "default/pod-a", "{traced:#?}");
    assert_eq!(
        traced.ip.as_ref().map(|i| i.destination.as_str()),
        Some(DEMO_SERVICE_IP),
        "{traced:#?}"
    );

    // Hubble's metrics on node2 (deploy/kubernetes turns them on): the
    // policy drop counted with both pods as its context
    let metrics = lab.ok(&[
        "exec",
        "node2",
        "--",
        "curl",
        "-sS",
        "--max-time",
        "5",
        "http://127.0.0.1:9965/metrics",
    ]);
    assert!(
        metrics.lines().any(|l| l.starts_with(
            "hubble_drop_total{source=\"default/outsider\",destination=\"default/pod-b\",reason=\"POLICY_DENIED\",protocol=\"TCP\"} "
        )),
        "{metrics}"
    );
    for family in [
        "hubble_flows_processed_total{",
        "hubble_tcp_flags_total{flag=\"SYN\",family=\"IPv4\"",
        "hubble_port_distribution_total{protocol=\"TCP\",port=\"80\"",
        "hubble_lost_events_total{source=\"perf_event_ring_buffer\"}",
    ] {
        assert!(metrics.contains(family), "{family}: {metrics}");
    }
    let status = lab.ok(&["exec", "node2", "--", "cilium", "status"]);
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Hubble:") && l.contains("Metrics: Ok")),
        "{status}"
    );

    // the rest of the service answers
    rt.block_on(async {
        let mut c = ObserverClient::new(hubble::client::unix_channel(&node2));
        let st = c
            .server_status(hubble::observer::ServerStatusRequest {})
            .await
            .unwrap()
            .into_inner();
        assert_eq!(st.max_flows, 4095);
        // the ring holds agent events too; seen_flows counts flows only
        assert!(st.num_flows > 0 && st.seen_flows > 0, "{st:?}");
        assert!(st.version.starts_with("cilium v"), "{st:?}");
        let nodes = c
            .get_nodes(hubble::observer::GetNodesRequest {})
            .await
            .unwrap()
            .into_inner()
            .nodes;
        assert_eq!(nodes[0].name, "node2");
        let ns = c
            .get_namespaces(hubble::observer::GetNamespacesRequest {})
            .await
            .unwrap()
            .into_inner()
            .namespaces;
        assert!(ns.iter().any(|n| n.namespace == "default"), "{ns:?}");
        let mut agent = c
            .get_agent_events(hubble::observer::GetAgentEventsRequest {
                number: 5,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(agent.message().await.unwrap().is_some(), "agent events");
    });
}

fn hubble_cli() -> String {
    common::cilium_tools().join("hubble").display().to_string()
}

/// `hubble <args> --server unix://…` on `node`.
fn hubble(lab: &Lab, node: &str, args: &[&str]) -> (i32, String) {
    hubble_at(lab, node, &format!("unix://{SOCKET}"), args)
}

/// `hubble <args> --server <server>` on `node`.
fn hubble_at(lab: &Lab, node: &str, server: &str, args: &[&str]) -> (i32, String) {
    let bin = hubble_cli();
    let mut all = vec!["exec", node, "--", "timeout", "20", bin.as_str()];
    all.extend(args);
    all.extend(["--server", server]);
    let out = lab.run(&all);
    (out.status.code().unwrap_or(-1), common::text(&out))
}

/// `hubble observe --follow --to-pod default/pod-b` run on a node against
/// `server` shows the request `from` sends to pod-b meanwhile; the CLI
/// runs until stopped.
fn follow_sees_a_new_request(lab: &Lab, (node, server): (&str, &str), from: &str) {
    let bin = hubble_cli();
    let ip = lab.kubectl(&["get", "pod", "pod-b", "-o", "jsonpath={.status.podIP}"]);
    let (follow, sent) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            lab.run(&[
                "exec",
                node,
                "--",
                "timeout",
                "8",
                bin.as_str(),
                "observe",
                "--follow",
                "--to-pod",
                "default/pod-b",
                "--server",
                server,
            ])
        });
        std::thread::sleep(std::time::Duration::from_secs(4));
        let sent = lab.run(&[
            "exec",
            from,
            "--",
            "curl",
            "-sS",
            "--max-time",
            "2",
            &format!("http://{ip}/hostname"),
        ]);
        (watcher.join().unwrap(), common::text(&sent))
    });
    let text = common::text(&follow);
    assert_eq!(
        follow.status.code(),
        Some(124),
        "stopped by timeout: {text}"
    );
    assert!(
        text.contains(" default/pod-b:80 "),
        "curl said {sent}; hubble: {text}"
    );
}

/// `hubble observe --verdict DROPPED --to-pod default/pod-b` on `node`
/// against `server`: what it printed.
fn drops_to_pod_b(lab: &Lab, node: &str, server: &str) -> String {
    let (code, drops) = hubble_at(
        lab,
        node,
        server,
        &[
            "observe",
            "--verdict",
            "DROPPED",
            "--to-pod",
            "default/pod-b",
        ],
    );
    assert_eq!(code, 0, "{drops}");
    drops
}

pub fn cilium_1_16_hubble_cli(lab: &Lab) {
    let (code, status) = hubble(lab, "node2", &["status"]);
    assert_eq!(code, 0, "{status}");
    assert!(
        status.contains("Healthcheck (via unix:///var/run/cilium/hubble.sock): Ok"),
        "{status}"
    );
    assert!(
        status.contains("Current/Max Flows:") && status.contains("/4,095"),
        "{status}"
    );

    let drops = drops_to_pod_b(lab, "node2", &format!("unix://{SOCKET}"));
    assert!(
        // Hubble's arrow for a flow whose direction conntrack did not tell
        drops.lines().any(|l| l.contains("default/outsider:")
            && l.contains(" <> default/pod-b:80 ")
            && l.contains("Policy denied DROPPED")),
        "{drops}"
    );

    let (code, json) = hubble(
        lab,
        "node2",
        &[
            "observe",
            "--last",
            "5",
            "-o",
            "json",
            "--from-pod",
            "default/pod-a",
        ],
    );
    assert_eq!(code, 0, "{json}");
    let flows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(!flows.is_empty() && flows.len() <= 5, "{json}");
    assert!(
        flows
            .iter()
            .all(|f| f["flow"]["source"]["pod_name"] == "pod-a"),
        "{json}"
    );

    // --follow: new flows as they come, until the CLI is stopped; from
    // node1, forwarded or dropped by the demo's policy, seen either way
    follow_sees_a_new_request(lab, ("node2", &format!("unix://{SOCKET}")), "node1");

    let (code, nodes) = hubble(lab, "node2", &["list", "nodes"]);
    assert_eq!(code, 0, "{nodes}");
    assert!(
        nodes.contains("node2") && nodes.contains("Connected"),
        "{nodes}"
    );
}

/// Hubble Relay in a 3-node lab, through Cilium's Hubble CLI on node1:
/// the cluster's flows from every node in time order, the nodes it
/// reaches, a node's agent killed shown unavailable until its container
/// is back; and a node's Hubble port refusing a client the Hubble CA did
/// not sign.
pub fn relay_in_a_three_node_lab(lab: &Lab) {
    lab.kubectl(&[
        "wait",
        "-n",
        "kube-system",
        "--for=condition=Available",
        "deployment/hubble-relay",
        "--timeout=120s",
    ]);
    // its pod's gRPC port: `cilium-lab exec` runs beside the node's
    // processes, not in the cgroup socket LB translates ClusterIPs for
    let pod = lab.kubectl(&[
        "get",
        "pod",
        "-n",
        "kube-system",
        "-l",
        "k8s-app=hubble-relay",
        "-o",
        "jsonpath={.items[0].metadata.name} {.items[0].status.podIP}",
    ]);
    let (relay_pod, ip) = pod.split_once(' ').expect("name and address");
    let relay = format!("{ip}:4245");
    let status = common::eventually("Relay connected to the 3 nodes", 60, || {
        let (code, out) = hubble_at(lab, "node1", &relay, &["status"]);
        (code == 0 && out.contains("Connected Nodes: 3/3"))
            .then_some(out.clone())
            .ok_or(out)
    });
    assert!(status.contains("/12,285"), "3 x 4,095 flows: {status}");

    // the last 20 flows of each node, merged in time order
    let (code, json) = hubble_at(
        lab,
        "node1",
        &relay,
        &["observe", "--last", "20", "-o", "json"],
    );
    assert_eq!(code, 0, "{json}");
    let flows: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .filter(|v: &serde_json::Value| v.get("flow").is_some())
        .collect();
    let times: Vec<String> = flows
        .iter()
        .map(|f| f["time"].as_str().unwrap_or_default().to_owned())
        .collect();
    let nanos = |t: &str| {
        // RFC 3339 with up to 9 fraction digits, all in UTC
        let (secs, frac) = t.trim_end_matches('Z').split_once('.').unwrap_or((t, "0"));
        (secs.to_owned(), format!("{frac:0<9}"))
    };
    assert!(
        times.windows(2).all(|w| nanos(&w[0]) <= nanos(&w[1])),
        "time order: {times:#?}"
    );
    let nodes: std::collections::BTreeSet<&str> = flows
        .iter()
        .filter_map(|f| f["node_name"].as_str())
        .collect();
    assert_eq!(
        nodes.into_iter().collect::<Vec<_>>(),
        ["node1", "node2", "node3"],
        "{json}"
    );

    // Relay's own pod, of a Deployment: its flows name the workload
    let from_relay = format!("kube-system/{relay_pod}");
    let (code, json) = hubble_at(
        lab,
        "node1",
        &relay,
        &[
            "observe",
            "--last",
            "5",
            "-o",
            "json",
            "--from-pod",
            &from_relay,
        ],
    );
    assert_eq!(code, 0, "{json}");
    // seen on its own node, where it is a local endpoint (with an ID); as
    // a remote pod on the others, Cilium names no workload
    let flows: Vec<serde_json::Value> = json
        .lines()
        .filter(|l| l.contains("\"flow\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|f: &serde_json::Value| f["flow"]["source"]["ID"].as_u64().is_some())
        .collect();
    assert!(
        !flows.is_empty(),
        "flows of {from_relay} on its node: {json}"
    );
    for f in &flows {
        assert_eq!(
            f["flow"]["source"]["workloads"][0],
            serde_json::json!({"name": "hubble-relay", "kind": "Deployment"}),
            "{json}"
        );
    }

    // a filter, and --follow through Relay
    let drops = drops_to_pod_b(lab, "node1", &relay);
    assert!(
        drops
            .lines()
            .any(|l| l.contains("default/outsider:") && l.contains("Policy denied DROPPED")),
        "{drops}"
    );
    follow_sees_a_new_request(lab, ("node1", &relay), "node3");

    let (code, listed) = hubble_at(lab, "node1", &relay, &["list", "nodes"]);
    assert_eq!(code, 0, "{listed}");
    for node in ["node1", "node2", "node3"] {
        assert!(
            listed
                .lines()
                .any(|l| l.starts_with(node) && l.contains("Connected")),
            "{listed}"
        );
    }

    // node3's agent killed: unavailable until kubelet has restarted it.
    // kubelet restarts a container at once after its first exit, an outage
    // of a second or two that a poll on a loaded machine can miss; after
    // the second exit it waits its crash backoff (10 s) first, so the
    // agent is killed, restarted, and killed again
    let agent = common::agent_pod(lab, "node3");
    let pid = common::agent_process(lab, 3);
    // SAFETY: a process of this test's lab.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let pid = common::eventually("node3's agent restarted", 60, || {
        let status = common::pod_field(
            lab,
            "kube-system",
            &agent,
            "{.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].containerID}",
        );
        match status.split_once(' ') {
            Some((count, id)) if count != "0" => {
                common::pids_whose_cgroup_names(id.trim_start_matches("containerd://"))
                    .into_iter()
                    .find(|p| *p != pid)
                    .ok_or(status)
            }
            _ => Err(status),
        }
    });
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let down = common::eventually("node3 unavailable", 60, || {
        let (_, out) = hubble_at(lab, "node1", &relay, &["status"]);
        out.contains("Connected Nodes: 2/3")
            .then_some(out.clone())
            .ok_or(out)
    });
    assert!(down.contains("Unavailable Nodes: 1\n  - node3"), "{down}");
    common::eventually("node3 connected again", 120, || {
        let (_, out) = hubble_at(lab, "node1", &relay, &["status"]);
        out.contains("Connected Nodes: 3/3")
            .then_some(())
            .ok_or(out)
    });

    // a node's Hubble port: the Relay's certificate is let in, none is not
    let node_ip = lab.kubectl(&[
        "get",
        "node",
        "node2",
        "-o",
        r#"jsonpath={.status.addresses[?(@.type=="InternalIP")].address}"#,
    ]);
    let pki = lab.dir.path().join("k8s/hubble");
    let file = |f: &str| pki.join(f).display().to_string();
    let tls = [
        "--tls".to_owned(),
        "--tls-ca-cert-files".into(),
        file("hubble-ca.crt"),
        "--tls-server-name".into(),
        "node2.default.hubble-grpc.cilium.io".into(),
    ];
    let node_server = format!("{node_ip}:4244");
    let mut with_cert: Vec<&str> = vec!["status"];
    with_cert.extend(tls.iter().map(String::as_str));
    let (cert, key) = (
        file("hubble-relay-client.crt"),
        file("hubble-relay-client.key"),
    );
    with_cert.extend([
        "--tls-client-cert-file",
        &cert,
        "--tls-client-key-file",
        &key,
    ]);
    let (code, out) = hubble_at(lab, "node1", &node_server, &with_cert);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Healthcheck (via"), "{out}");
    let mut without: Vec<&str> = vec!["status"];
    without.extend(tls.iter().map(String::as_str));
    let (code, out) = hubble_at(lab, "node1", &node_server, &without);
    assert_ne!(code, 0, "no client certificate: {out}");
}
