//! `cilium-lab up --kubernetes`: the lab with a Kubernetes control plane
//! built from tools/k8s, the agents its clients as the DaemonSet's
//! ServiceAccount, a kubelet stand-in per node; the demo's pods, Service
//! and policy go through the API server, kubectl shows the CiliumNodes
//! and CiliumEndpoints, and a Deployment behind a Service works as on a
//! real cluster.

mod common;

use common::{create_web, eventually, expose_web, text, web_pods, Lab};

#[test]
fn up_with_kubernetes_runs_the_demo_through_the_api_server() {
    let lab = Lab::new();
    let up = lab.run(&["up", "--hollow-nodes"]);
    let out = text(&up);
    assert!(up.status.success(), "{out}");
    for want in [
        "kube-apiserver at https://198.18.0.1:6443",
        "admin kubeconfig: ",
        "Kubernetes:              Ok   1.34 (v1.34.",
        "\"cilium/v2::CiliumNetworkPolicy\"",
        "service/demo created",
        "TCP pod-a -> 10.96.0.20:80 (pod-b)",
        "ciliumnetworkpolicy.cilium.io/demo-tcp-only created",
        "dropped by the policy (Policy denied)",
        // pod CIDRs from the operator's cluster pool, in boot order
        "node1   10.0.0.1           198.18.0.11",
        "node2   10.0.1.1           198.18.0.12",
        "cilium-operator: 2 replicas electing a leader",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    assert!(
        out.lines().any(|l| l.starts_with("default     pod-b")
            && l.contains("ready")
            && l.contains("10.0.1.2")),
        "{out}"
    );
    let ceps = lab.ok(&["kubectl", "get", "ciliumendpoints", "-A", "-o", "name"]);
    assert!(ceps.contains("ciliumendpoint.cilium.io/pod-a"), "{ceps}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("KVStore:") && l.contains("Disabled")),
        "identities are CiliumIdentities, no kvstore: {out}"
    );

    let down = lab.ok(&["down"]);
    assert!(down.contains("Kubernetes control plane stopped"), "{down}");
    assert!(!lab.dir.path().join("k8s").exists());
}

#[test]
fn identities_in_etcd_beside_the_api_server() {
    let lab = Lab::new();
    let up = lab.run(&[
        "up",
        "--hollow-nodes",
        "--set",
        "identity-allocation-mode=kvstore",
    ]);
    let out = text(&up);
    assert!(up.status.success(), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("KVStore:") && l.contains("Ok")),
        "{out}"
    );
    assert!(
        out.contains("dropped by the policy (Policy denied)"),
        "{out}"
    );
    let objects = lab.ok(&["kubectl", "get", "ciliumidentities", "-o", "name"]);
    assert!(objects.trim().is_empty(), "no CiliumIdentities: {objects}");
    let ids = lab.ok(&["exec", "node1", "--", "cilium", "identity", "list"]);
    assert!(ids.contains("k8s:app=demo"), "{ids}");
}

#[test]
fn kubelets_run_a_deployment_its_service_balances_and_replace_a_deleted_pod() {
    let lab = Lab::new();
    let up = lab.run(&["up", "--hollow-nodes", "--pod", "client"]);
    assert!(up.status.success(), "{}", text(&up));

    let nodes = lab.ok(&["kubectl", "get", "nodes", "--no-headers"]);
    for node in ["node1", "node2"] {
        assert!(
            nodes
                .lines()
                .any(|l| l.starts_with(node) && l.split_whitespace().nth(1) == Some("Ready")),
            "{nodes}"
        );
    }
    let leases = lab.ok(&[
        "kubectl",
        "get",
        "leases",
        "-n",
        "kube-node-lease",
        "-o",
        "name",
    ]);
    for node in ["node1", "node2"] {
        assert!(
            leases.contains(&format!("lease.coordination.k8s.io/{node}")),
            "{leases}"
        );
    }

    create_web(&lab, 2);
    lab.ok(&[
        "kubectl",
        "rollout",
        "status",
        "deployment/web",
        "--timeout=90s",
    ]);
    let pods = eventually("two web pods Running", 30, || {
        let pods = web_pods(&lab);
        (pods.len() == 2)
            .then_some(pods.clone())
            .ok_or(format!("{pods:?}"))
    });
    for (name, ip, node) in &pods {
        assert!(ip.starts_with("10."), "{name} has IP {ip}");
        assert!(node == "node1" || node == "node2", "{name} on {node}");
        let netns = lab.dir.path().join(node).join("netns").join(name);
        assert!(netns.exists(), "{} missing", netns.display());
    }

    expose_web(&lab, &[]);
    eventually("the EndpointSlice lists both pods", 30, || {
        let out = lab.ok(&[
            "kubectl",
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "jsonpath={.items[*].endpoints[*].addresses[*]}",
        ]);
        pods.iter()
            .all(|(_, ip, _)| out.split_whitespace().any(|a| a == ip))
            .then_some(())
            .ok_or(out)
    });
    let vip = lab.ok(&[
        "kubectl",
        "get",
        "service",
        "web",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    let target = format!("{}:80", vip.trim());
    let reply = eventually("the client reaches the service", 30, || {
        let out = lab.run(&["connect", "client", &target, "--message", "hi"]);
        let said = text(&out);
        match pods
            .iter()
            .find(|(name, _, _)| said.trim() == format!("{name}: hi"))
        {
            Some(_) if out.status.success() => Ok(said),
            _ => Err(said),
        }
    });
    println!("{reply}");

    let (gone, _, node) = &pods[0];
    lab.ok(&["kubectl", "delete", "pod", gone, "--timeout=60s"]);
    let netns = lab.dir.path().join(node).join("netns").join(gone);
    eventually("the deleted pod's netns goes", 10, || {
        (!netns.exists())
            .then_some(())
            .ok_or(netns.display().to_string())
    });
    let now = eventually("the ReplicaSet replaces the pod", 60, || {
        let now = web_pods(&lab);
        (now.len() == 2 && now.iter().all(|(name, _, _)| name != gone))
            .then_some(now.clone())
            .ok_or(format!("{now:?}"))
    });
    let (name, _, node) = now
        .iter()
        .find(|(n, _, _)| *n != pods[1].0)
        .expect("a new pod");
    assert!(lab.dir.path().join(node).join("netns").join(name).exists());

    let down = lab.ok(&["down"]);
    assert!(
        down.contains(&format!("deleted pod default/{name}")),
        "{down}"
    );
}

/// Each node's taints and NetworkUnavailable reason, a line per node.
fn readiness(lab: &Lab) -> String {
    lab.ok(&[
        "kubectl",
        "get",
        "nodes",
        "-o",
        r#"jsonpath={range .items[*]}{.metadata.name} taints=[{.spec.taints[*].key}] network={.status.conditions[?(@.type=="NetworkUnavailable")].reason}{"\n"}{end}"#,
    ])
}

#[test]
fn nodes_start_tainted_until_the_operator_sees_their_agent_ready() {
    let lab = Lab::new();
    let up = lab.run(&["up", "--hollow-nodes", "--nodes", "2"]);
    assert!(up.status.success(), "{}", text(&up));
    // the kubelets registered the nodes tainted; each runs the DaemonSet's
    // agent pod Ready as its probes say, so the operator took the taint
    // off and said Cilium is up
    eventually("both nodes untainted, Cilium up", 30, || {
        let r = readiness(&lab);
        (r.lines().count() == 2
            && r.lines()
                .all(|l| !l.contains("agent-not-ready") && l.ends_with("network=CiliumIsUp")))
        .then_some(())
        .ok_or(r)
    });
    let agents = lab.ok(&[
        "kubectl", "get", "pods", "-n", "kube-system", "-l", "k8s-app=cilium", "-o",
        r#"jsonpath={range .items[*]}{.spec.nodeName} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
    ]);
    assert!(
        agents.contains("node1 True") && agents.contains("node2 True"),
        "{agents}"
    );
    let log = std::fs::read_to_string(lab.dir.path().join("operator/cilium-operator-1.log"))
        .unwrap_or_default()
        + &std::fs::read_to_string(lab.dir.path().join("operator/cilium-operator-2.log"))
            .unwrap_or_default();
    assert!(log.contains("Removed the agent-not-ready taint"), "{log}");
}
