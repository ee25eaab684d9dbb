//! `cilium-lab up` on real nodes: containerd and kubelet on each node run
//! Cilium from deploy/kubernetes (the DaemonSet's init containers and agent,
//! the operator's Deployment) and the cluster's pods from the images we
//! build; the demo's pods on two nodes talk, through a Service too, its
//! policy holds, `kubectl exec` and `kubectl logs` work, Cilium 1.16's own
//! cilium-dbg and cilium-health read the node's agent (tests/upstream),
//! Hubble's API and Cilium's Hubble CLI show the demo's flows, on a node
//! and through Hubble Relay for all three (tests/hubble), and `down`
//! leaves nothing.

mod common;
mod hubble;
mod upstream;

use common::Lab;

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

/// `kubectl get -n kube-system <what> -o <output>`.
fn kube_system_get(lab: &Lab, what: &str, output: &str) -> String {
    lab.kubectl(&["get", "-n", "kube-system", what, "-o", output])
}

#[test]
fn real_nodes_run_cilium_from_deploy_kubernetes_and_the_pods() {
    let lab = Lab::new();
    let up = lab.ok(&["up", "--nodes", "3"]);
    assert!(
        up.contains("Cilium installed from deploy/kubernetes"),
        "{up}"
    );

    // every node Ready, without the agent-not-ready taint; ds and deploy available
    let nodes = lab.kubectl(&[
            "get",
            "nodes",
            "-o",
            r#"jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.spec.taints}{"\n"}{end}"#,
        ],
    );
    assert_eq!(nodes.lines().count(), 3, "{nodes}");
    for line in nodes.lines() {
        assert!(line.contains(" True"), "{nodes}");
        assert!(!line.contains("agent-not-ready"), "{nodes}");
    }
    let ds = kube_system_get(
        &lab,
        "ds/cilium",
        "jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}",
    );
    assert_eq!(ds, "3/3");
    let op = kube_system_get(
        &lab,
        "deploy/cilium-operator",
        r#"jsonpath={.status.conditions[?(@.type=="Available")].status}"#,
    );
    assert_eq!(op, "True");
    let runtime = lab.kubectl(&["get", "nodes", "-o", "jsonpath={.items[0].status.nodeInfo.containerRuntimeVersion} {.items[0].status.nodeInfo.kubeletVersion}"]);
    assert!(runtime.starts_with("containerd://2.2."), "{runtime}");
    assert!(runtime.ends_with("v1.34.4"), "{runtime}");

    // the agent as kubelet runs it: init containers in the seeds' order, logs
    let inits = kube_system_get(
        &lab,
        "ds/cilium",
        "jsonpath={.spec.template.spec.initContainers[*].name}",
    );
    assert_eq!(inits, "config mount-cgroup apply-sysctl-overwrites mount-bpf-fs clean-cilium-state install-cni-binaries");
    let agent = common::agent_pod(&lab, "node1");
    let logs = lab.kubectl(&["logs", "-n", "kube-system", &agent, "-c", "cilium-agent"]);
    assert!(logs.contains("subsys="), "{logs}");
    let status = lab.ok(&["exec", "node1", "--", "cilium", "status"]);
    assert!(
        status.contains("Cilium:") && status.contains("Ok"),
        "{status}"
    );

    // the demo: pods on both nodes, across them, through a Service, under a policy
    let answers = up.matches("\npod-b\n").count();
    assert_eq!(
        answers, 3,
        "direct, through the Service, and under the policy: {up}"
    );
    assert!(up.contains("(no answer: dropped by policy)"), "{up}");
    lab.assert_policy_denied("node2", "INGRESS");
    node_to_pod_under_policy(&lab);
    let exec = lab.ok(&[
        "exec", "pod-a", "--", "ip", "-4", "-o", "addr", "show", "eth0",
    ]);
    assert!(exec.contains("inet 10."), "{exec}");
    let logs = lab.kubectl(&["logs", "pod-b"]);
    assert!(logs.contains("GET /hostname"), "{logs}");

    // kubectl cp into a pod, and port-forward to one (kubectl runs in the
    // underlay's namespace, where its forwarded port listens)
    let file = lab.dir.path().join("cp.txt");
    std::fs::write(&file, "copied\n").unwrap();
    lab.kubectl(&["cp", file.to_str().unwrap(), "default/pod-a:/tmp/cp.txt"]);
    let copied = lab.ok(&["exec", "pod-a", "--", "cat", "/tmp/cp.txt"]);
    assert_eq!(copied.trim(), "copied");
    let mut forward = lab
        .cmd(&["kubectl", "port-forward", "pod/pod-b", "18080:80"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // kept open: kubectl writes a line per connection, and dies of a
    // closed pipe
    let mut said = std::io::BufReader::new(forward.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut said, &mut line).unwrap();
    assert!(line.contains("Forwarding from 127.0.0.1:18080"), "{line}");
    let underlay = common::pid_in(&lab.dir.path().join("underlay/holder.pid")).unwrap();
    // as kubectl's own e2e tests do, try again for a moment
    common::eventually("an answer through port-forward", 20, || {
        let out = std::process::Command::new("nsenter")
            .args([
                "-t",
                &underlay.to_string(),
                "-n",
                "curl",
                "-sS",
                "--max-time",
                "5",
            ])
            .arg("http://127.0.0.1:18080/hostname")
            .output()
            .unwrap();
        let text = common::text(&out);
        (text.trim() == "pod-b").then_some(()).ok_or(text)
    });
    let _ = forward.kill();
    let _ = forward.wait();
    drop(said);

    upstream::cilium_1_16_clients_read_everything(&lab);
    hubble::api_on_a_node(&lab);
    hubble::cilium_1_16_hubble_cli(&lab);
    hubble::relay_in_a_three_node_lab(&lab);

    let down = lab.ok(&["down"]);
    assert!(down.contains("node1 stopped"), "{down}");
    let left = leftovers(&lab);
    assert!(left.is_empty(), "left behind: {left:#?}");

    // commands that need real nodes say what is wrong without them
    let stop = lab.run(&["stop-runtime", "node1"]);
    assert!(!stop.status.success());
    assert!(
        common::text(&stop).contains("the lab is not up"),
        "{}",
        common::text(&stop)
    );
    let both = lab.run(&["up", "--hollow-nodes", "--cni", "bridge"]);
    assert!(!both.status.success());
    assert!(
        common::text(&both).contains("--cni"),
        "{}",
        common::text(&both)
    );
}

/// A node reaching pods, as Kubernetes' node-to-pod checks do from
/// hostNetwork pods, with the demo's policy on both pods (it selects
/// app=demo): each node reaches its own pod (traffic from the host is
/// always let in), another node's only once a rule lets `remote-node` in,
/// as in Cilium; then every node reaches every pod, over the overlay too.
fn node_to_pod_under_policy(lab: &Lab) {
    let ip = |pod: &str| lab.kubectl(&["get", "pod", pod, "-o", "jsonpath={.status.podIP}"]);
    // the demo pins pod-a to node1 and pod-b to node2
    let pods = [("pod-a", ip("pod-a")), ("pod-b", ip("pod-b"))];
    let get = |node: &str, ip: &str| {
        lab.run(&[
            "exec",
            node,
            "--",
            "curl",
            "-sS",
            "--max-time",
            "3",
            &format!("http://{ip}/hostname"),
        ])
    };
    for (node, (pod, ip)) in ["node1", "node2"].iter().zip(&pods) {
        let local = get(node, ip);
        assert_eq!(common::text(&local).trim(), *pod, "{node} to its own {pod}");
    }
    let remote = get("node1", &pods[1].1);
    assert!(
        !remote.status.success(),
        "remote-node is not let in by the demo's policy: {}",
        common::text(&remote)
    );
    let file = lab.dir.path().join("remote-node.yaml");
    std::fs::write(
        &file,
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: nodes-probe-pods\nspec:\n  endpointSelector:\n    matchLabels:\n      app: demo\n  ingress:\n  - fromEntities: [remote-node]\n",
    )
    .unwrap();
    lab.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    for node in ["node1", "node2"] {
        for (pod, ip) in &pods {
            common::eventually(&format!("{node} reaching {pod}"), 20, || {
                let out = get(node, ip);
                let text = common::text(&out);
                (text.trim() == *pod).then_some(()).ok_or(text)
            });
        }
    }
    lab.kubectl(&["delete", "-f", file.to_str().unwrap()]);
}
