//! `cilium-lab up --set routing-mode=native` (the lab adds
//! ipv4-native-routing-cidr=10.0.0.0/8 and auto-direct-node-routes=true):
//! no cilium_vxlan on the nodes, each node routes the other's pod CIDR via
//! the other's underlay address; pods on the two nodes ping and curl each
//! other unmasqueraded; the demo's identity-based ingress policy (app=demo
//! only) holds across nodes, where the receiving node learns the sender's
//! identity from its ipcache; pods reach the underlay host (masqueraded by
//! iptables); and a restarted agent keeps one route per node.

mod common;

use common::{eventually, text, Lab};

fn pod_ip(lab: &Lab, pod: &str) -> String {
    let ip = lab.ok(&[
        "kubectl",
        "get",
        "pod",
        pod,
        "-o",
        "jsonpath={.status.podIP}",
    ]);
    ip.trim().to_owned()
}

/// `curl http://<ip>:8080/clientip` from `pod`: the address the server saw.
fn client_ip(lab: &Lab, pod: &str, ip: &str) -> Result<String, String> {
    let url = format!("http://{ip}:8080/clientip");
    let out = lab.run(&["exec", pod, "--", "curl", "-s", "--max-time", "3", &url]);
    let body = text(&out);
    match body.trim().split_once(':') {
        Some((addr, _port)) if out.status.success() => Ok(addr.to_owned()),
        _ => Err(body),
    }
}

fn ping(lab: &Lab, pod: &str, ip: &str) -> Result<(), String> {
    let out = lab.run(&["exec", pod, "--", "ping", "-c", "1", "-W", "2", ip]);
    out.status.success().then_some(()).ok_or(text(&out))
}

/// The routes node `n` has to `cidr`, one per line.
fn routes(lab: &Lab, n: usize, ip: &str) -> String {
    let node = format!("node{n}");
    let cidr = format!("{}.0/24", ip.rsplit_once('.').expect("an IPv4 address").0);
    lab.ok(&["exec", &node, "--", "ip", "route", "show", &cidr])
}

#[test]
fn native_routing_reaches_pods_across_nodes_with_identity_policy() {
    let lab = Lab::new();
    let up = lab.run(&["up", "--hollow-nodes", "--set", "routing-mode=native"]);
    assert!(up.status.success(), "{}", text(&up));

    let status = lab.ok(&["exec", "node1", "--", "cilium", "status"]);
    assert!(
        status.contains("Routing:                 Network: Native   Host: Legacy"),
        "{status}"
    );
    for node in ["node1", "node2"] {
        let vxlan = lab.run(&["exec", node, "--", "ip", "link", "show", "cilium_vxlan"]);
        assert!(!vxlan.status.success(), "{node}: {}", text(&vxlan));
    }

    // pod-a on node1 (198.18.0.11), pod-b on node2 (198.18.0.12)
    let (a, b) = (pod_ip(&lab, "pod-a"), pod_ip(&lab, "pod-b"));
    let via = |n: usize, ip: &str, gw: &str| {
        let r = routes(&lab, n, ip);
        assert_eq!(r.lines().count(), 1, "node{n}: {r}");
        assert!(r.contains(&format!("via {gw} dev eth0")), "node{n}: {r}");
    };
    via(1, &b, "198.18.0.12");
    via(2, &a, "198.18.0.11");

    // the demo's policy is in force: app=demo pods take TCP 80 and 8080
    // from app=demo pods only; the server sees the pod's own address
    let seen = eventually("pod-a curls pod-b", 30, || client_ip(&lab, "pod-a", &b));
    assert_eq!(seen, a, "not masqueraded between pods");
    assert_eq!(client_ip(&lab, "pod-b", &a), Ok(b.clone()));

    // another identity on the same node as pod-a is refused by node2
    lab.ok(&[
        "kubectl",
        "run",
        "intruder",
        "--image=cilium-lab/builtin",
        "--labels=app=other",
        r#"--overrides={"spec":{"nodeSelector":{"kubernetes.io/hostname":"node1"}}}"#,
    ]);
    lab.ok(&[
        "kubectl",
        "wait",
        "--for=condition=Ready",
        "pod/intruder",
        "--timeout=60s",
    ]);
    assert!(
        client_ip(&lab, "intruder", &b).is_err(),
        "app=other is not let in"
    );
    lab.assert_policy_denied("node2", "INGRESS");
    assert_eq!(client_ip(&lab, "pod-a", &b), Ok(a.clone()));

    // without the policy, everyone talks, ICMP too
    lab.ok(&["kubectl", "delete", "cnp", "demo-tcp-only"]);
    eventually("intruder let in", 30, || client_ip(&lab, "intruder", &b));
    eventually("pod-a pings pod-b", 30, || ping(&lab, "pod-a", &b));
    ping(&lab, "pod-b", &a).unwrap();

    // the underlay host has no route to pods: answers mean masquerading
    for pod in ["pod-a", "pod-b"] {
        ping(&lab, pod, "198.18.0.1").unwrap_or_else(|e| panic!("{pod}: {e}"));
    }

    // a restarted agent replaces its routes: still one, still working
    let pid = lab.agent_pid(1).expect("node1's agent");
    // SAFETY: the agent of a node this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    lab.wait_agent_back(1, pid);
    via(1, &b, "198.18.0.12");
    assert_eq!(client_ip(&lab, "pod-a", &b), Ok(a.clone()));
}
