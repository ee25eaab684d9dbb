//! `cilium-lab up --set routing-mode=native --set enable-ipv6=true` (the
//! lab adds ipv4-native-routing-cidr=10.0.0.0/8, ipv6-native-routing-cidr
//! as its IPv6 pool and auto-direct-node-routes=true): no cilium_vxlan on
//! the nodes, each node routes the other's pod CIDRs via the other's
//! underlay address of that family; pods on the two nodes ping and curl
//! each other unmasqueraded over both families; the demo's identity-based
//! ingress policy (app=demo only) holds across nodes, where the receiving
//! node learns the sender's identity from its ipcache; pods reach the
//! underlay host over both (masqueraded by iptables and ip6tables); and a
//! restarted agent keeps one route per node.

mod common;

use common::{eventually, text, Lab};

/// The pod's address of each family, from its `podIPs`.
fn pod_ips(lab: &Lab, pod: &str) -> (String, String) {
    let ips = lab.ok(&[
        "kubectl",
        "get",
        "pod",
        pod,
        "-o",
        "jsonpath={.status.podIPs[0].ip} {.status.podIPs[1].ip}",
    ]);
    let (v4, v6) = ips.trim().split_once(' ').unwrap_or_default();
    assert!(v4.starts_with("10.") && v6.contains(':'), "{pod}: {ips}");
    (v4.to_owned(), v6.to_owned())
}

/// `curl http://<ip>:8080/clientip` from `pod`: the address the server saw.
fn client_ip(lab: &Lab, pod: &str, ip: &str) -> Result<String, String> {
    let url = match ip.contains(':') {
        true => format!("http://[{ip}]:8080/clientip"),
        false => format!("http://{ip}:8080/clientip"),
    };
    let out = lab.run(&[
        "exec",
        pod,
        "--",
        "curl",
        "-s",
        "-g",
        "--max-time",
        "3",
        &url,
    ]);
    let body = text(&out);
    match body.trim().rsplit_once(':') {
        Some((addr, _port)) if out.status.success() => Ok(addr
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned()),
        _ => Err(body),
    }
}

fn ping(lab: &Lab, pod: &str, ip: &str) -> Result<(), String> {
    let out = lab.run(&["exec", pod, "--", "ping", "-c", "1", "-W", "2", ip]);
    out.status.success().then_some(()).ok_or(text(&out))
}

/// The routes node `n` has to the pod CIDR holding `ip` (a /24, or a /120
/// of the IPv6 pool), one per line.
fn routes(lab: &Lab, n: usize, ip: &str) -> String {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let node = format!("node{n}");
    let (family, cidr) = match ip.parse().expect("an address") {
        IpAddr::V4(v4) => (
            "-4",
            format!("{}/24", Ipv4Addr::from(u32::from(v4) & !0xff)),
        ),
        IpAddr::V6(v6) => (
            "-6",
            format!("{}/120", Ipv6Addr::from(u128::from(v6) & !0xff)),
        ),
    };
    lab.ok(&["exec", &node, "--", "ip", family, "route", "show", &cidr])
}

#[test]
fn native_routing_reaches_pods_across_nodes_with_identity_policy() {
    let lab = Lab::new();
    let up = lab.run(&[
        "up",
        "--hollow-nodes",
        "--set",
        "routing-mode=native",
        "--set",
        "enable-ipv6=true",
    ]);
    assert!(up.status.success(), "{}", text(&up));

    let status = lab.ok(&["exec", "node1", "--", "cilium", "status"]);
    assert!(
        status.contains("Routing:                 Network: Native   Host: Legacy"),
        "{status}"
    );
    assert!(
        status.contains("IPTables [IPv4: Enabled, IPv6: Enabled]"),
        "{status}"
    );
    for node in ["node1", "node2"] {
        let vxlan = lab.run(&["exec", node, "--", "ip", "link", "show", "cilium_vxlan"]);
        assert!(!vxlan.status.success(), "{node}: {}", text(&vxlan));
    }

    // pod-a on node1 (198.18.0.11, fd00:198:18::11), pod-b on node2
    let ((a, a6), (b, b6)) = (pod_ips(&lab, "pod-a"), pod_ips(&lab, "pod-b"));
    let via = |n: usize, ip: &str, gw: &str| {
        let r = routes(&lab, n, ip);
        assert_eq!(r.lines().count(), 1, "node{n}: {r}");
        assert!(r.contains(&format!("via {gw} dev eth0")), "node{n}: {r}");
    };
    via(1, &b, "198.18.0.12");
    via(2, &a, "198.18.0.11");
    via(1, &b6, "fd00:198:18::12");
    via(2, &a6, "fd00:198:18::11");

    // the demo's policy is in force: app=demo pods take TCP 80 and 8080
    // from app=demo pods only; the server sees the pod's own address
    for (mine, theirs) in [(&a, &b), (&a6, &b6)] {
        let seen = eventually("pod-a curls pod-b", 30, || client_ip(&lab, "pod-a", theirs));
        assert_eq!(&seen, mine, "not masqueraded between pods");
        assert_eq!(client_ip(&lab, "pod-b", mine), Ok(theirs.clone()));
    }

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
    for to in [&b, &b6] {
        assert!(
            client_ip(&lab, "intruder", to).is_err(),
            "app=other is not let in to {to}"
        );
    }
    lab.assert_policy_denied("node2", "INGRESS");
    assert_eq!(client_ip(&lab, "pod-a", &b), Ok(a.clone()));

    // without the policy, everyone talks, ICMP too
    lab.ok(&["kubectl", "delete", "cnp", "demo-tcp-only"]);
    eventually("intruder let in", 30, || client_ip(&lab, "intruder", &b));
    client_ip(&lab, "intruder", &b6).expect("the intruder over IPv6");
    eventually("pod-a pings pod-b", 30, || ping(&lab, "pod-a", &b));
    ping(&lab, "pod-b", &a).unwrap();
    ping(&lab, "pod-a", &b6).unwrap();
    ping(&lab, "pod-b", &a6).unwrap();

    // the underlay host has no route to pods: answers mean masquerading
    for pod in ["pod-a", "pod-b"] {
        for host in ["198.18.0.1", "fd00:198:18::1"] {
            ping(&lab, pod, host).unwrap_or_else(|e| panic!("{pod} to {host}: {e}"));
        }
    }

    // a restarted agent replaces its routes: still one, still working
    let pid = lab.agent_pid(1).expect("node1's agent");
    // SAFETY: the agent of a node this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    lab.wait_agent_back(1, pid);
    via(1, &b, "198.18.0.12");
    via(1, &b6, "fd00:198:18::12");
    assert_eq!(client_ip(&lab, "pod-a", &b), Ok(a.clone()));
    assert_eq!(client_ip(&lab, "pod-a", &b6), Ok(a6.clone()));
}
