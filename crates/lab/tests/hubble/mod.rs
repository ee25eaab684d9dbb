//! Hubble on a real node after the demo's traffic: our generated client
//! reads the node's `hubble.sock` (a policy drop with its reason and both
//! pods, a reply flagged by conntrack, filters, the other RPCs), and
//! Cilium v1.16.0's own Hubble CLI (built from the `hubble/` folder of the
//! cilium module by scripts/build-cilium-tools.sh) reads it too.

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
pub fn api_on_a_node(lab: &Lab) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
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
    let traced = to_service
        .iter()
        .find(|f| f.verdict == flow::Verdict::Traced as i32)
        .unwrap_or_else(|| panic!("pod-a to the demo Service on node1: {to_service:#?}"));
    assert_eq!(traced.r#type, flow::FlowType::Sock as i32);
    assert_eq!(pod(&traced.source), "default/pod-a", "{traced:#?}");
    assert_eq!(
        traced.ip.as_ref().map(|i| i.destination.as_str()),
        Some(DEMO_SERVICE_IP),
        "{traced:#?}"
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
    crate::upstream::tools()
        .join("hubble")
        .display()
        .to_string()
}

/// `hubble <args> --server unix://…` on `node`.
fn hubble(lab: &Lab, node: &str, args: &[&str]) -> (i32, String) {
    let bin = hubble_cli();
    let server = format!("unix://{SOCKET}");
    let mut all = vec!["exec", node, "--", "timeout", "20", bin.as_str()];
    all.extend(args);
    all.extend(["--server", server.as_str()]);
    let out = lab.run(&all);
    (out.status.code().unwrap_or(-1), common::text(&out))
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

    let (code, drops) = hubble(
        lab,
        "node2",
        &[
            "observe",
            "--verdict",
            "DROPPED",
            "--to-pod",
            "default/pod-b",
        ],
    );
    assert_eq!(code, 0, "{drops}");
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

    // --follow: new flows as they come, until the CLI is stopped
    let bin = hubble_cli();
    let server = format!("unix://{SOCKET}");
    let ip = lab.kubectl(&["get", "pod", "pod-b", "-o", "jsonpath={.status.podIP}"]);
    let (follow, sent) = std::thread::scope(|s| {
        let watcher = s.spawn(|| {
            lab.run(&[
                "exec",
                "node2",
                "--",
                "timeout",
                "8",
                bin.as_str(),
                "observe",
                "--follow",
                "--to-pod",
                "default/pod-b",
                "--server",
                &server,
            ])
        });
        std::thread::sleep(std::time::Duration::from_secs(3));
        // from node1: forwarded or dropped by the demo's policy, seen either way
        let sent = lab.run(&[
            "exec",
            "node1",
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

    let (code, nodes) = hubble(lab, "node2", &["list", "nodes"]);
    assert_eq!(code, 0, "{nodes}");
    assert!(
        nodes.contains("node2") && nodes.contains("Connected"),
        "{nodes}"
    );
}
