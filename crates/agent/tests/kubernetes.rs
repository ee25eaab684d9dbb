//! The agent against a real API server (built from tools/k8s), as the
//! DaemonSet's ServiceAccount: `cilium status` names the server's version
//! as Cilium's does, and an API server that goes away makes the agent
//! unhealthy until it is back; policies, other nodes and their pods, and
//! Services come from it, and this node's CiliumNode, each pod's
//! CiliumEndpoint and the pods' CiliumIdentities go to it.

use testsupport::kube;
use testsupport::node::{wait_for, Node};

/// Go's GOARCH of this machine, as the API server reports its platform.
fn goarch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The `Kubernetes:` line of `cilium status` (which exits 1 while the
/// agent is unhealthy, so its output is read either way).
fn kubernetes_line(node: &Node) -> String {
    String::from_utf8_lossy(&node.cilium(&["status"]).stdout)
        .lines()
        .find(|l| l.starts_with("Kubernetes:"))
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn status_names_the_api_server_and_its_loss() {
    let mut node = Node::new("10.1.0.0/24");
    let (cp, apiserver) = testsupport::kube::start(node.sandbox_mut());
    testsupport::kube::apply_crds(&cp);
    testsupport::kube::give_pod_cidr(&cp, &node.name, &node.range);
    let kubeconfig = testsupport::kube::agent_kubeconfig(&cp);
    node.agent_args = vec![format!("--k8s-kubeconfig-path={}", kubeconfig.display())];
    node.start_agent();

    let version = kubeplane::bins::version();
    let minor = version.trim_start_matches("v1.").split('.').next().unwrap();
    let want = format!("Ok   1.{minor} ({version}) [linux/{}]", goarch());
    let status = node.cilium_ok(&["status"]);
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Kubernetes:") && l.ends_with(&want)),
        "{status}"
    );
    assert!(status.contains("Kubernetes APIs:"), "{status}");

    testsupport::kube::stop_apiserver(node.sandbox_mut(), apiserver);
    wait_for("Kubernetes: Failure", 30, || {
        kubernetes_line(&node).contains("Failure")
    });
    let out = node.cilium(&["status", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["cilium"]["state"], "Failure");
    assert!(
        json["cilium"]["msg"]
            .as_str()
            .unwrap()
            .contains("Kubernetes service is not ready"),
        "{json}"
    );

    testsupport::kube::start_apiserver(node.sandbox_mut(), &cp);
    // A restarted API server refuses watches (403) until its RBAC caches
    // fill; the agent retries refused watches at every probe meanwhile.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let out = node.cilium(&["status", "--verbose"]);
        let status = String::from_utf8_lossy(&out.stdout);
        if status
            .lines()
            .any(|l| l.starts_with("Kubernetes:") && l.ends_with(&want))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Kubernetes not Ok again 90 s after the API server came back:\n{status}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

fn verdict(node: &Node, src: &str, dst: &str, port: u16) -> String {
    let out = node.cilium_ok(&["explain", src, dst, "--port", &port.to_string()]);
    out.lines()
        .find(|l| l.starts_with("Verdict: "))
        .unwrap_or_else(|| panic!("no verdict in {out}"))
        .to_owned()
}

/// A policy the API server takes (our CRD schema is permissive) but the
/// agent's parser refuses: no endpointSelector.
const REFUSED: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: no-selector
spec:
  ingress:
  - fromEndpoints:
    - matchLabels: {app: web}
"#;

fn kubectl_json(cp: &kubeplane::ControlPlane, args: &[&str]) -> Option<serde_json::Value> {
    let out = cp
        .kubectl()
        .args(args)
        .args(["-o", "json"])
        .output()
        .expect("kubectl");
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// An API server in `node`'s sandbox with the CRDs and a Node object
/// for node1; the agent's ServiceAccount kubeconfig.
fn cluster_of_one(node: &mut Node) -> (kubeplane::ControlPlane, std::path::PathBuf) {
    let (cp, _) = testsupport::kube::start(node.sandbox_mut());
    testsupport::kube::apply_crds(&cp);
    let kubeconfig = testsupport::kube::agent_kubeconfig(&cp);
    kube::apply(
        &cp,
        r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"node1"}}"#,
    );
    // cluster-pool IPAM without an operator: its CIDR, given by hand
    kube::give_pod_cidr(&cp, &node.name, &node.range);
    (cp, kubeconfig)
}

/// The agent as the DaemonSet's ServiceAccount, on the API server's address.
fn agent_args(kubeconfig: &std::path::Path) -> Vec<String> {
    vec![
        format!("--k8s-kubeconfig-path={}", kubeconfig.display()),
        format!("--ipv4-node={}", testsupport::kube::ADDRESS),
    ]
}

#[test]
fn policies_nodes_services_and_endpoints_follow_the_api_server() {
    let mut node = Node::new("10.1.0.0/24");
    let (cp, kubeconfig) = cluster_of_one(&mut node);
    node.agent_args = agent_args(&kubeconfig);
    node.start_agent();

    // this node's CiliumNode, owned by its Node (the test made it, with
    // only the pod CIDR, as the operator would: the agent completes it)
    wait_for("node1's CiliumNode written by the agent", 30, || {
        kubectl_json(&cp, &["get", "ciliumnode", "node1"])
            .is_some_and(|cn| cn["metadata"]["ownerReferences"][0]["kind"] == "Node")
    });
    let cn = kubectl_json(&cp, &["get", "ciliumnode", "node1"]).unwrap();
    assert_eq!(cn["metadata"]["ownerReferences"][0]["kind"], "Node");
    let addresses = cn["spec"]["addresses"].to_string();
    assert!(
        addresses.contains(r#"{"ip":"10.1.0.1","type":"CiliumInternalIP"}"#)
            && addresses.contains(&format!(
                r#"{{"ip":"{}","type":"InternalIP"}}"#,
                testsupport::kube::ADDRESS
            )),
        "{addresses}"
    );
    assert_eq!(cn["spec"]["ipam"]["podCIDRs"][0], "10.1.0.0/24");
    let table = String::from_utf8_lossy(&cp.kubectl().args(["get", "cn"]).output().unwrap().stdout)
        .into_owned();
    assert!(
        table.contains("CILIUMINTERNALIP") && table.contains("10.1.0.1"),
        "{table}"
    );
    // another node's CiliumNode: routed to through the overlay
    let node2 = r#"{"apiVersion":"cilium.io/v2","kind":"CiliumNode","metadata":{"name":"node2"},
        "spec":{"addresses":[{"type":"InternalIP","ip":"198.18.0.12"},{"type":"CiliumInternalIP","ip":"10.2.0.1"}],
                "ipam":{"podCIDRs":["10.2.0.0/24"]}}}"#;
    kube::apply(&cp, node2);
    wait_for("node2 in the tunnel map", 30, || {
        node.cilium_ok(&["bpf", "tunnel", "list"])
            .contains("198.18.0.12")
    });
    let nodes = node.cilium_ok(&["node", "list"]);
    assert!(
        nodes
            .lines()
            .any(|l| l.starts_with("node2") && l.contains("custom-resource")),
        "{nodes}"
    );
    // and a pod there, from its CiliumEndpoint
    let far = r#"{"apiVersion":"cilium.io/v2","kind":"CiliumEndpoint","metadata":{"name":"far","namespace":"default"},
        "status":{"id":7,"identity":{"id":300},"state":"ready",
                  "networking":{"addressing":[{"ipv4":"10.2.0.7"}],"node":"198.18.0.12"}}}"#;
    kube::apply(&cp, far);
    let learned = || node.cilium_ok(&["ip", "list"]).contains("10.2.0.7/32");
    wait_for("the remote pod in the ipcache", 30, learned);
    let ips = node.cilium_ok(&["ip", "list"]);
    let line = ips.lines().find(|l| l.contains("10.2.0.7/32")).unwrap();
    assert!(
        line.contains("300") && line.contains("custom-resource"),
        "{line}"
    );
    kube::kubectl_ok(&cp, &["delete", "ciliumendpoint", "far"]);
    wait_for("the remote pod gone from the ipcache", 30, || !learned());
    let mut ips = std::collections::BTreeMap::new();
    for (pod, app) in [("db", "db"), ("web", "web"), ("other", "other")] {
        ips.insert(pod, node.add_pod_labeled(pod, &format!("app={app}")));
    }

    // each pod's CiliumEndpoint says what `cilium endpoint list` does
    let endpoints: serde_json::Value =
        serde_json::from_str(&node.cilium_ok(&["endpoint", "list", "-o", "json"])).unwrap();
    let db = endpoints
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["status"]["external-identifiers"]["k8s-pod-name"] == "db")
        .expect("db's endpoint")
        .clone();
    wait_for("db's CiliumEndpoint", 30, || {
        kubectl_json(&cp, &["get", "ciliumendpoint", "-n", "default", "db"]).is_some()
    });
    let cep = kubectl_json(&cp, &["get", "ciliumendpoint", "-n", "default", "db"]).unwrap();
    assert_eq!(cep["status"]["id"], db["id"]);
    assert_eq!(
        cep["status"]["identity"]["id"],
        db["status"]["identity"]["id"]
    );
    assert_eq!(
        cep["status"]["networking"]["addressing"][0]["ipv4"],
        db["status"]["networking"]["addressing"][0]["ipv4"]
    );
    assert_eq!(
        cep["status"]["networking"]["node"],
        testsupport::kube::ADDRESS.to_string()
    );
    assert_eq!(cep["status"]["state"], "ready");
    assert_eq!(cep["metadata"]["labels"]["app"], "db");
    // its identity is a CiliumIdentity the agent made (identity-allocation-mode=crd)
    let id = db["status"]["identity"]["id"].to_string();
    let ci = kubectl_json(&cp, &["get", "ciliumidentity", &id]).expect("db's CiliumIdentity");
    assert_eq!(ci["security-labels"]["k8s:app"], "db", "{ci}");
    assert_eq!(
        ci["metadata"]["labels"]["io.kubernetes.pod.namespace"], "default",
        "{ci}"
    );
    let listed = node.cilium_ok(&["identity", "list"]);
    assert!(listed.lines().any(|l| l.starts_with(&id)), "{listed}");
    let table = String::from_utf8_lossy(
        &cp.kubectl()
            .args(["get", "cep", "-n", "default"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned();
    assert!(
        table.starts_with("NAME")
            && table.contains("SECURITY IDENTITY")
            && table.contains("ENDPOINT STATE"),
        "{table}"
    );
    assert_eq!(verdict(&node, "other", "db", 5432), "Verdict: FORWARDED");

    kube::apply(&cp, testsupport::policies::DB_FROM_WEB);
    wait_for("the CiliumNetworkPolicy to be enforced", 30, || {
        verdict(&node, "other", "db", 5432) == "Verdict: DROPPED (Policy denied)"
    });
    assert_eq!(verdict(&node, "web", "db", 5432), "Verdict: FORWARDED");
    let policy = node.cilium_ok(&["policy", "get"]);
    assert!(policy.contains("db-from-web"), "{policy}");
    let status = String::from_utf8_lossy(&node.cilium(&["status"]).stdout).into_owned();
    assert!(
        status.contains(r#""cilium/v2::CiliumNetworkPolicy""#)
            && status.contains(r#""networking.k8s.io/v1::NetworkPolicy""#),
        "{status}"
    );

    // a policy the parser refuses changes nothing
    kube::apply(&cp, REFUSED);
    std::thread::sleep(std::time::Duration::from_secs(1));
    let policy = node.cilium_ok(&["policy", "get"]);
    assert!(
        !policy.contains("no-selector") && policy.contains("db-from-web"),
        "{policy}"
    );
    assert_eq!(verdict(&node, "web", "db", 5432), "Verdict: FORWARDED");

    kube::kubectl_ok(&cp, &["delete", "ciliumnetworkpolicy", "db-from-web"]);
    wait_for("the deleted policy to be withdrawn", 30, || {
        verdict(&node, "other", "db", 5432) == "Verdict: FORWARDED"
    });

    // Services: the API server's own, and one with a slice of its own
    wait_for("the kubernetes Service", 30, || {
        let list = node.cilium_ok(&["service", "list"]);
        list.contains("10.96.0.1:443") && list.contains("198.18.0.1:6443")
    });
    let db_svc = format!(
        r#"{{"apiVersion":"v1","kind":"List","items":[
        {{"apiVersion":"v1","kind":"Service","metadata":{{"name":"db","namespace":"default"}},
          "spec":{{"clusterIP":"10.96.0.20","ports":[{{"name":"pg","port":80,"targetPort":5432}}]}}}},
        {{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice",
          "metadata":{{"name":"db-1","namespace":"default","labels":{{"kubernetes.io/service-name":"db"}}}},
          "addressType":"IPv4","ports":[{{"name":"pg","port":5432,"protocol":"TCP"}}],
          "endpoints":[{{"addresses":["{}"],"conditions":{{"ready":true}}}}]}}]}}"#,
        ips["db"]
    );
    kube::apply(&cp, &db_svc);
    let db_backend = format!("{}:5432", ips["db"]);
    wait_for("the db Service", 30, || {
        let list = node.cilium_ok(&["service", "list"]);
        list.lines()
            .any(|l| l.contains("10.96.0.20:80") && l.contains(&db_backend))
    });
    kube::kubectl_ok(&cp, &["delete", "service", "db"]);
    wait_for("the db Service gone", 30, || {
        !node
            .cilium_ok(&["service", "list"])
            .contains("10.96.0.20:80")
    });

    // the pod goes: so does its CiliumEndpoint
    let netns = node.netns("other").display().to_string();
    let del = node.cni_pod("DEL", "other", &netns);
    assert_eq!(del.code, 0, "{}", del.json);
    wait_for("other's CiliumEndpoint to go", 30, || {
        kubectl_json(&cp, &["get", "ciliumendpoint", "-n", "default", "other"]).is_none()
    });
    assert!(kubectl_json(&cp, &["get", "ciliumendpoint", "-n", "default", "db"]).is_some());
}

#[test]
fn ipam_kubernetes_takes_the_pod_cidr_the_controller_manager_gave_the_node() {
    let mut node = Node::new("10.1.0.0/24");
    let (cp, kubeconfig) = cluster_of_one(&mut node);
    node.agent_args = vec![
        format!("--k8s-kubeconfig-path={}", kubeconfig.display()),
        "--ipam=kubernetes".into(),
    ];
    node.start_agent();
    let node1 = kubectl_json(&cp, &["get", "node", "node1"]).unwrap();
    let cidr = node1["spec"]["podCIDR"]
        .as_str()
        .expect("node IPAM gave node1 a CIDR")
        .to_owned();
    assert_ne!(cidr, "10.1.0.0/24", "not the --ipv4-range the test passed");
    let status = node.cilium_ok(&["status"]);
    assert!(
        status.contains(&format!("allocated from {cidr}")),
        "{cidr}\n{status}"
    );
    let ip = node.add_pod("pod");
    let net: std::net::Ipv4Addr = cidr.split('/').next().unwrap().parse().unwrap();
    assert_eq!(ip.octets()[..3], net.octets()[..3], "{ip} in {cidr}");
}

/// Two pods on node1 as the API server knows them (no labels passed by
/// the runtime), in a namespace labeled team=a.
const PODS: &str = r#"{"apiVersion":"v1","kind":"List","items":[
  {"apiVersion":"v1","kind":"Pod","metadata":{"name":"db","namespace":"default","labels":{"app":"db","pod-template-hash":"5d8f"}},
   "spec":{"nodeName":"node1","containers":[{"name":"db","image":"db"}]}},
  {"apiVersion":"v1","kind":"Pod","metadata":{"name":"client","namespace":"default","labels":{"app":"other"}},
   "spec":{"nodeName":"node1","containers":[{"name":"client","image":"client"}]}}]}"#;

/// db takes 5432 from app=web pods of team=a namespaces.
const DB_FROM_TEAM_A_WEB: &str = r#"
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: db-from-team-a-web, namespace: default}
spec:
  podSelector: {matchLabels: {app: db}}
  policyTypes: [Ingress]
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {team: a}}
      podSelector: {matchLabels: {app: web}}
    ports: [{port: 5432, protocol: TCP}]
"#;

fn endpoint_labels(node: &Node, pod: &str) -> Vec<String> {
    let list: serde_json::Value =
        serde_json::from_str(&node.cilium_ok(&["endpoint", "list", "-o", "json"])).unwrap();
    let ep = list
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["status"]["external-identifiers"]["k8s-pod-name"] == pod)
        .unwrap_or_else(|| panic!("no endpoint of {pod}"));
    serde_json::from_value(ep["status"]["labels"]["security-relevant"].clone()).unwrap()
}

#[test]
fn identities_come_from_pod_and_namespace_labels_and_follow_their_changes() {
    let mut node = Node::new("10.1.0.0/24");
    let (cp, kubeconfig) = cluster_of_one(&mut node);
    node.agent_args = agent_args(&kubeconfig);
    kube::kubectl_ok(&cp, &["label", "namespace", "default", "team=a"]);
    kube::wait_default_service_account(&cp, "default");
    kube::apply(&cp, PODS);
    node.start_agent();
    node.add_pod("db");
    node.add_pod("client");

    let db = endpoint_labels(&node, "db");
    for want in [
        "k8s:app=db",
        "k8s:io.cilium.k8s.namespace.labels.team=a",
        "k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name=default",
        "k8s:io.cilium.k8s.policy.cluster=default",
        "k8s:io.cilium.k8s.policy.serviceaccount=default",
        "k8s:io.kubernetes.pod.namespace=default",
    ] {
        assert!(db.iter().any(|l| l == want), "{want} missing in {db:?}");
    }
    assert!(
        !db.iter().any(|l| l.contains("pod-template-hash")),
        "filtered out: {db:?}"
    );

    kube::apply(&cp, DB_FROM_TEAM_A_WEB);
    wait_for("the NetworkPolicy to drop client -> db", 30, || {
        verdict(&node, "client", "db", 5432) == "Verdict: DROPPED (Policy denied)"
    });

    // relabeling the pod gives it another identity, and the verdict follows
    kube::kubectl_ok(&cp, &["label", "pod", "client", "app=web", "--overwrite"]);
    wait_for("client relabeled to app=web is let in", 30, || {
        verdict(&node, "client", "db", 5432) == "Verdict: FORWARDED"
    });
    wait_for("client's CiliumEndpoint to carry app=web", 30, || {
        kubectl_json(&cp, &["get", "ciliumendpoint", "client"])
            .is_some_and(|cep| cep["metadata"]["labels"]["app"] == "web")
    });
    let id = kubectl_json(&cp, &["get", "ciliumendpoint", "client"]).unwrap()["status"]["identity"]
        ["id"]
        .to_string();
    let ci = kubectl_json(&cp, &["get", "ciliumidentity", &id]).expect("the new identity");
    assert_eq!(ci["security-labels"]["k8s:app"], "web", "{ci}");

    // so does relabeling its namespace
    kube::kubectl_ok(
        &cp,
        &["label", "namespace", "default", "team=b", "--overwrite"],
    );
    wait_for("team=b is no longer let in", 30, || {
        verdict(&node, "client", "db", 5432) == "Verdict: DROPPED (Policy denied)"
    });
    assert!(endpoint_labels(&node, "client")
        .iter()
        .any(|l| l == "k8s:io.cilium.k8s.namespace.labels.team=b"));
}

/// Replaces the verbs of the ClusterRole's first rule (NetworkPolicies).
fn network_policy_verbs(cp: &kubeplane::ControlPlane, verbs: &str) {
    let patch = format!(r#"[{{"op":"replace","path":"/rules/0/verbs","value":{verbs}}}]"#);
    kube::kubectl_ok(
        cp,
        &[
            "patch",
            "clusterrole",
            "cilium",
            "--type=json",
            "-p",
            &patch,
        ],
    );
}

#[test]
fn a_verb_missing_from_the_cluster_role_is_named_in_status_without_a_crash() {
    let mut node = Node::new("10.1.0.0/24");
    let (cp, kubeconfig) = cluster_of_one(&mut node);
    node.agent_args = agent_args(&kubeconfig);
    let role = kubectl_json(&cp, &["get", "clusterrole", "cilium"]).unwrap();
    assert_eq!(
        role["rules"][0]["resources"],
        serde_json::json!(["networkpolicies"])
    );
    network_policy_verbs(&cp, r#"["get","watch"]"#);
    node.start_agent();
    wait_for("status to name the NetworkPolicy watch", 30, || {
        let line = kubernetes_line(&node);
        line.contains("Warning")
            && line.contains("cannot watch networking.k8s.io/v1::NetworkPolicy")
            && line.contains("forbidden")
    });
    wait_for("status --verbose to say which watches synced", 30, || {
        let verbose =
            String::from_utf8_lossy(&node.cilium(&["status", "--verbose"]).stdout).into_owned();
        verbose.contains("  networking.k8s.io/v1::NetworkPolicy: failing: ")
            && verbose.contains("  cilium/v2::CiliumNetworkPolicy: synced")
            && verbose.contains("  core/v1::Pods: synced")
    });
    // the rest works: a pod gets its endpoint and its CiliumEndpoint
    node.add_pod("web");
    wait_for("web's CiliumEndpoint", 30, || {
        kubectl_json(&cp, &["get", "ciliumendpoint", "web"]).is_some()
    });

    network_policy_verbs(&cp, r#"["get","list","watch"]"#);
    wait_for("status Ok once the verb is back", 60, || {
        kubernetes_line(&node).contains("Ok ")
    });
    assert!(node.cilium(&["status", "--brief"]).status.success());
}
