//! `cilium-lab up` on real nodes: containerd and kubelet on each node run
//! Cilium from deploy/kubernetes (the DaemonSet's init containers and agent,
//! the operator's Deployment) and the cluster's pods from the images we
//! build; pods on two nodes talk, through a Service too, a policy holds,
//! `kubectl exec` and `kubectl logs` work, and `down` leaves nothing.

mod common;

use common::{eventually, Lab};

/// Mounts, cgroups and network namespaces of the lab: what must be gone
/// after `down`.
fn leftovers(lab: &Lab) -> Vec<String> {
    let dir = lab.dir.path().display().to_string();
    let mut found: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&dir))
        .map(str::to_owned)
        .collect();
    // the node cgroups' names, as the lab makes them for its dir
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    lab.dir.path().to_path_buf().hash(&mut h);
    let name = format!("cilium-lab-{:08x}-", h.finish() as u32);
    let cgroups = std::process::Command::new("find")
        .args(["/sys/fs/cgroup", "-maxdepth", "5", "-type", "d", "-name"])
        .arg(format!("{name}*"))
        .output()
        .unwrap();
    found.extend(
        String::from_utf8_lossy(&cgroups.stdout)
            .lines()
            .map(str::to_owned),
    );
    found
}

fn kubectl(lab: &Lab, args: &[&str]) -> String {
    let mut all = vec!["kubectl"];
    all.extend_from_slice(args);
    lab.ok(&all)
}

const AGNHOST: &str = "registry.k8s.io/e2e-test-images/agnhost:2.56";

/// An agnhost netexec pod pinned to `node`, labelled `app=<app>`.
fn netexec_pod(name: &str, node: &str, app: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","labels":{{"app":"{app}"}}}},
"spec":{{"nodeName":"{node}","containers":[{{"name":"netexec","image":"{AGNHOST}","args":["netexec","--http-port=8080"],"ports":[{{"containerPort":8080}}]}}]}}}}"#
    )
}

fn apply(lab: &Lab, doc: &str) {
    let file = lab.dir.path().join("doc.json");
    std::fs::write(&file, doc).unwrap();
    kubectl(lab, &["apply", "-f", &file.display().to_string()]);
}

fn pod_ip(lab: &Lab, name: &str) -> String {
    eventually(&format!("pod {name} Running"), 120, || {
        let out = kubectl(
            lab,
            &[
                "get",
                "pod",
                name,
                "-o",
                "jsonpath={.status.phase} {.status.podIP}",
            ],
        );
        match out.split_whitespace().collect::<Vec<_>>()[..] {
            ["Running", ip] => Ok(ip.to_owned()),
            _ => Err(out),
        }
    })
}

/// `curl` from `pod` to `url`, the body or the failure.
fn curl(lab: &Lab, pod: &str, url: &str) -> Result<String, String> {
    let out = lab.run(&[
        "kubectl",
        "exec",
        pod,
        "--",
        "curl",
        "-sS",
        "--max-time",
        "3",
        url,
    ]);
    let text = common::text(&out);
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

#[test]
fn real_nodes_run_cilium_from_deploy_kubernetes_and_the_pods() {
    let lab = Lab::new();
    let up = lab.ok(&["up", "--nodes", "2"]);
    assert!(
        up.contains("Cilium installed from deploy/kubernetes"),
        "{up}"
    );

    // every node Ready, without the agent-not-ready taint; ds and deploy available
    let nodes = kubectl(
        &lab,
        &[
            "get",
            "nodes",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.spec.taints}{"\n"}{end}"#,
        ],
    );
    assert_eq!(nodes.lines().count(), 2, "{nodes}");
    for line in nodes.lines() {
        assert!(line.contains(" True"), "{nodes}");
        assert!(!line.contains("agent-not-ready"), "{nodes}");
    }
    let ds = kubectl(
        &lab,
        &[
            "get",
            "ds",
            "cilium",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}",
        ],
    );
    assert_eq!(ds, "2/2");
    let op = kubectl(
        &lab,
        &[
            "get",
            "deploy",
            "cilium-operator",
            "-n",
            "kube-system",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Available")].status}"#,
        ],
    );
    assert_eq!(op, "True");
    let runtime = kubectl(&lab, &["get", "nodes", "-o", "jsonpath={.items[0].status.nodeInfo.containerRuntimeVersion} {.items[0].status.nodeInfo.kubeletVersion}"]);
    assert!(runtime.starts_with("containerd://2.2."), "{runtime}");
    assert!(runtime.ends_with("v1.34.4"), "{runtime}");

    // the agent as kubelet runs it: init containers in the seeds' order, logs
    let inits = kubectl(
        &lab,
        &[
            "get",
            "ds",
            "cilium",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.spec.template.spec.initContainers[*].name}",
        ],
    );
    assert_eq!(inits, "config mount-cgroup apply-sysctl-overwrites mount-bpf-fs clean-cilium-state install-cni-binaries");
    let agent = kubectl(
        &lab,
        &[
            "get",
            "pods",
            "-n",
            "kube-system",
            "-l",
            "k8s-app=cilium",
            "--field-selector=spec.nodeName=node1",
            "-o",
            "jsonpath={.items[0].metadata.name}",
        ],
    );
    let logs = kubectl(
        &lab,
        &["logs", "-n", "kube-system", &agent, "-c", "cilium-agent"],
    );
    assert!(logs.contains("subsys="), "{logs}");
    let status = lab.ok(&["exec", "node1", "--", "cilium", "status"]);
    assert!(
        status.contains("Cilium:") && status.contains("Ok"),
        "{status}"
    );

    // pods on both nodes, across them, through a Service, under a policy
    apply(&lab, &netexec_pod("server", "node2", "server"));
    apply(&lab, &netexec_pod("client", "node1", "client"));
    apply(&lab, &netexec_pod("other", "node1", "other"));
    let server = pod_ip(&lab, "server");
    pod_ip(&lab, "client");
    pod_ip(&lab, "other");
    let hostname = eventually("client reaches server across nodes", 60, || {
        curl(&lab, "client", &format!("http://{server}:8080/hostname"))
    });
    assert_eq!(hostname.trim(), "server");
    kubectl(
        &lab,
        &["expose", "pod", "server", "--port=80", "--target-port=8080"],
    );
    let vip = kubectl(
        &lab,
        &["get", "svc", "server", "-o", "jsonpath={.spec.clusterIP}"],
    );
    let via_service = eventually("client reaches the Service", 60, || {
        curl(&lab, "client", &format!("http://{vip}/hostname"))
    });
    assert_eq!(via_service.trim(), "server");
    let exec = lab.ok(&[
        "exec", "client", "--", "ip", "-4", "-o", "addr", "show", "eth0",
    ]);
    assert!(exec.contains("inet 10."), "{exec}");

    apply(
        &lab,
        r#"{"apiVersion":"cilium.io/v2","kind":"CiliumNetworkPolicy","metadata":{"name":"server-from-client"},
"spec":{"endpointSelector":{"matchLabels":{"app":"server"}},"ingress":[{"fromEndpoints":[{"matchLabels":{"app":"client"}}],"toPorts":[{"ports":[{"port":"8080","protocol":"TCP"}]}]}]}}"#,
    );
    eventually("other is refused by the policy", 60, || {
        match curl(&lab, "other", &format!("http://{server}:8080/hostname")) {
            Err(_) => Ok(()),
            Ok(body) => Err(format!("other still got {body}")),
        }
    });
    assert_eq!(
        curl(&lab, "client", &format!("http://{server}:8080/hostname"))
            .unwrap()
            .trim(),
        "server"
    );
    lab.assert_policy_denied("node2", "INGRESS");

    let down = lab.ok(&["down"]);
    assert!(down.contains("node1 stopped"), "{down}");
    let left = leftovers(&lab);
    assert!(left.is_empty(), "left behind: {left:#?}");
}
