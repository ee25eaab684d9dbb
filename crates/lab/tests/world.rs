//! Pods reach the lab's outside host (198.18.0.254, a machine on the
//! underlay that is no node) by ICMP, TCP and UDP, with iptables
//! masquerading (Cilium's default) and with BPF masquerading, in tunnel
//! mode and in native routing: the outside
//! host sees the node's address, never the pod's; two pods of one node
//! using one source port at once each get their own replies; an egress
//! policy that allows only `toCIDR` of the outside host's /32 on TCP 80
//! lets that through and drops the rest as `Policy denied`. `toCIDRSet`
//! with an `except` of the host denies it, `toEntities: [world]` allows it.
//! With BPF masquerading the lab (kube-proxy replacement on) runs BPF host
//! routing: status says so, and pods across nodes, the demo's Service and
//! policy (`up` checks them), the outside host and cluster health all work
//! through it.

mod common;

use common::{text, Lab};
use std::process::Stdio;

const OUTSIDE: &str = "198.18.0.254";
const URL: &str = "http://198.18.0.254/";

/// A lab of three pods, two on node1 (pod-a, pod-c) and one on node2, with
/// `settings` (`key=value`).
fn lab_with(settings: &[&str]) -> Lab {
    let lab = Lab::new();
    let mut args = vec!["up", "--without-kubernetes"];
    for s in settings {
        args.extend(["--set", s]);
    }
    args.extend(["--pod", "pod-a", "--pod", "pod-b", "--pod", "pod-c"]);
    let up = lab.run(&args);
    assert!(up.status.success(), "{}", text(&up));
    lab
}

/// One ping from `pod` to the outside host: its output when answered.
fn ping_outside(lab: &Lab, pod: &str) -> Option<String> {
    let ping = lab.run(&["exec", pod, "--", "ping", "-c", "1", "-W", "1", OUTSIDE]);
    ping.status.success().then(|| text(&ping))
}

/// The `address:port` the outside host saw `pod` at over HTTP.
fn seen_over_tcp(lab: &Lab, pod: &str) -> String {
    let out = lab.ok(&["exec", pod, "--", "curl", "-s", "--max-time", "5", URL]);
    out.trim().to_owned()
}

/// A UDP exchange with the outside host from `port`, up to `tries` times:
/// what it saw, or nothing.
const UDP_CLIENT: &str = r#"
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.settimeout(0.5)
for _ in range(int(sys.argv[2])):
    s.sendto(b"hello", ("198.18.0.254", 80))
    try:
        print(s.recv(100).decode().strip())
        break
    except socket.timeout:
        pass
"#;

fn udp_from(lab: &Lab, pod: &str, port: u16, tries: u32) -> std::process::Command {
    let (port, tries) = (port.to_string(), tries.to_string());
    lab.cmd(&[
        "exec", pod, "--", "python3", "-c", UDP_CLIENT, &port, &tries,
    ])
}

fn seen_over_udp(lab: &Lab, pod: &str) -> String {
    let out = udp_from(lab, pod, 0, 4)
        .output()
        .expect("run the UDP client");
    text(&out).trim().to_owned()
}

/// A datagram to a closed port of the outside host: what the pod's socket
/// learns (`refused` once the ICMP error came back to it).
const CLOSED_PORT: &str = r#"
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect(("198.18.0.254", 9))
s.settimeout(2)
s.send(b"hello")
try:
    s.recv(100)
    print("answered")
except ConnectionRefusedError:
    print("refused")
except socket.timeout:
    print("timeout")
"#;

/// The host part of `address:port`.
fn host(seen: &str) -> &str {
    seen.rsplit_once(':').map_or(seen, |(h, _)| h)
}

/// Each pod reaches the outside host by ICMP, TCP and UDP, seen as its
/// node; pod-a and pod-c (both on node1) use one source port at once, over
/// TCP and over UDP, and each gets its own answers from its own node port.
fn pods_reach_the_outside_as_their_node(lab: &Lab) {
    for (pod, node_ip) in [
        ("pod-a", "198.18.0.11"),
        ("pod-b", "198.18.0.12"),
        ("pod-c", "198.18.0.11"),
    ] {
        // the first packets wait for ARP on the way
        common::eventually(&format!("{pod} pings the outside"), 20, || {
            ping_outside(lab, pod).ok_or_else(|| "no answer".to_owned())
        });
        assert_eq!(host(&seen_over_tcp(lab, pod)), node_ip, "{pod} over TCP");
        assert_eq!(host(&seen_over_udp(lab, pod)), node_ip, "{pod} over UDP");
    }

    let at_once = |make: &dyn Fn(&str) -> std::process::Command| {
        let children: Vec<_> = ["pod-a", "pod-c"]
            .iter()
            .map(|pod| {
                make(pod)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("start a client")
            })
            .collect();
        let seen: Vec<String> = children
            .into_iter()
            .map(|c| {
                text(&c.wait_with_output().expect("a client's output"))
                    .trim()
                    .to_owned()
            })
            .collect();
        for s in &seen {
            assert_eq!(host(s), "198.18.0.11", "{seen:?}");
        }
        assert_ne!(seen[0], seen[1], "each pod its own node port");
    };
    // an ICMP error about a masqueraded datagram finds the pod's socket
    let closed = lab.ok(&["exec", "pod-a", "--", "python3", "-c", CLOSED_PORT]);
    assert_eq!(closed.trim(), "refused");

    // the UDP clients keep their sockets open for their whole exchange
    at_once(&|pod| udp_from(lab, pod, 40000, 4));
    at_once(&|pod| {
        lab.cmd(&[
            "exec",
            pod,
            "--",
            "curl",
            "-s",
            "--max-time",
            "5",
            "--local-port",
            "40001",
            URL,
        ])
    });
}

/// Only `toCIDR` of the outside host on TCP 80: that answers, ping and UDP
/// are dropped as EGRESS `Policy denied`.
fn only_web_to_the_outside(lab: &Lab) {
    lab.import_policy(
        "node1",
        "to-outside.yaml",
        r#"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: to-outside-web-only
spec:
  endpointSelector:
    matchLabels: {app: demo}
  egress:
  - toCIDR: [198.18.0.254/32]
    toPorts:
    - ports: [{port: "80", protocol: TCP}]
"#,
    );
    common::eventually("ping to the outside denied", 30, || {
        ping_outside(lab, "pod-a").map_or(Ok(()), |out| Err(format!("answered: {out}")))
    });
    assert_eq!(seen_over_udp(lab, "pod-a"), "", "UDP is denied");
    assert_eq!(
        host(&seen_over_tcp(lab, "pod-a")),
        "198.18.0.11",
        "TCP 80 is allowed"
    );
    lab.assert_policy_denied("node1", "EGRESS");
    lab.ok(&["exec", "node1", "--", "cilium", "policy", "delete", "--all"]);
}

/// node1's `cilium status` line starting with `key`.
fn status_line(lab: &Lab, key: &str) -> String {
    let status = lab.ok(&["exec", "node1", "--", "cilium", "status"]);
    status
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_default()
        .to_owned()
}

fn masquerading_line(lab: &Lab) -> String {
    status_line(lab, "Masquerading:")
}

/// Status names the host routing mode: BPF where BPF masquerading lets
/// Cilium choose it (the lab replaces kube-proxy), else Legacy.
fn assert_host_routing(lab: &Lab, network: &str, host: &str) {
    let line = status_line(lab, "Routing:");
    assert!(
        line.ends_with(&format!("Network: {network}   Host: {host}")),
        "{line}"
    );
}

/// The health checks still reach both nodes and both health endpoints
/// (their probes cross the node's edge as pods' traffic does).
fn cluster_health_reachable(lab: &Lab) {
    common::eventually("cluster health 2/2 reachable", 90, || {
        let line = status_line(lab, "Cluster health:");
        line.contains(" 2/2 reachable").then_some(()).ok_or(line)
    });
}

#[test]
fn with_iptables_masquerading() {
    let lab = lab_with(&[]);
    pods_reach_the_outside_as_their_node(&lab);
    only_web_to_the_outside(&lab);
    assert_host_routing(&lab, "Tunnel [vxlan]", "Legacy");
    assert!(
        masquerading_line(&lab).ends_with(" IPTables [IPv4: Enabled, IPv6: Disabled]"),
        "{}",
        masquerading_line(&lab)
    );

    // the outside host carved out of an allowed range: denied
    lab.import_policy(
        "node1",
        "except-outside.yaml",
        r#"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: underlay-but-outside
spec:
  endpointSelector:
    matchLabels: {app: demo}
  egress:
  - toCIDRSet:
    - cidr: 198.18.0.0/24
      except: [198.18.0.254/32]
"#,
    );
    common::eventually("the excepted host denied", 30, || {
        let out = lab.run(&["exec", "pod-a", "--", "curl", "-s", "--max-time", "2", URL]);
        if out.status.success() {
            Err(text(&out))
        } else {
            Ok(())
        }
    });

    // the world entity: every host outside the cluster
    lab.ok(&["exec", "node1", "--", "cilium", "policy", "delete", "--all"]);
    lab.import_policy(
        "node1",
        "to-world.yaml",
        r#"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: to-world
spec:
  endpointSelector:
    matchLabels: {app: demo}
  egress:
  - toEntities: [world]
"#,
    );
    common::eventually("the world allowed", 30, || {
        ping_outside(&lab, "pod-a")
            .map(|_| ())
            .ok_or_else(|| "no answer".to_owned())
    });
    assert_eq!(host(&seen_over_tcp(&lab, "pod-a")), "198.18.0.11");
}

#[test]
fn with_bpf_masquerading() {
    let lab = lab_with(&["enable-bpf-masquerade=true"]);
    pods_reach_the_outside_as_their_node(&lab);
    only_web_to_the_outside(&lab);
    assert_host_routing(&lab, "Tunnel [vxlan]", "BPF");
    pods_see_each_other_unmasqueraded(&lab);
    cluster_health_reachable(&lab);

    let line = masquerading_line(&lab);
    assert!(line.contains(" BPF "), "{line}");
    assert!(
        line.ends_with("   [eth0]   10.1.0.0/24 [IPv4: Enabled, IPv6: Disabled]"),
        "{line}"
    );
    let nat = lab.ok(&["exec", "node1", "--", "cilium", "bpf", "nat", "list"]);
    assert!(
        nat.lines()
            .any(|l| l.starts_with("TCP OUT 10.1.0.") && l.contains(" XLATE_SRC 198.18.0.11:")),
        "{nat}"
    );
    assert!(
        nat.lines()
            .any(|l| l.starts_with("UDP IN 198.18.0.254:80 -> 198.18.0.11:")
                && l.contains(" XLATE_DST 10.1.0.")),
        "{nat}"
    );
    // the datapath does it all: no iptables rule
    let rules = lab.ok(&["exec", "node1", "--", "iptables", "-t", "nat", "-S"]);
    assert!(!rules.contains("MASQUERADE"), "{rules}");
}

/// Native routing leaves the cluster's own traffic alone: pod-b (node2)
/// sees pod-a as itself (on 8080, which the lab's demo policy lets in).
fn pods_see_each_other_unmasqueraded(lab: &Lab) {
    let ip = |pod: &str| {
        let out = lab.ok(&[
            "exec", pod, "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0",
        ]);
        out.split_whitespace()
            .skip_while(|w| *w != "inet")
            .nth(1)
            .and_then(|cidr| cidr.split('/').next())
            .unwrap_or_else(|| panic!("{pod}'s address in {out}"))
            .to_owned()
    };
    let (a, b) = (ip("pod-a"), ip("pod-b"));
    let server = lab
        .cmd(&["exec", "pod-b", "--", "python3", "-c", PEER_SERVER])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start pod-b's server");
    let seen = common::eventually("pod-b's server answers pod-a", 20, || {
        let out = lab.run(&["connect", "pod-a", &format!("{b}:8080"), "--message", "hi"]);
        out.status.success().then(|| text(&out)).ok_or(text(&out))
    });
    drop(server.wait_with_output());
    assert_eq!(seen.trim(), a, "pod-b saw pod-a as itself");
}

/// Answers one TCP connection with the peer's address.
const PEER_SERVER: &str = r#"
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8080))
s.listen()
c, peer = s.accept()
c.recv(100)
c.sendall(peer[0].encode())
c.close()
"#;

#[test]
fn in_native_routing_with_iptables_masquerading() {
    let lab = lab_with(&["routing-mode=native"]);
    pods_reach_the_outside_as_their_node(&lab);
    pods_see_each_other_unmasqueraded(&lab);
    only_web_to_the_outside(&lab);
    assert_host_routing(&lab, "Native", "Legacy");
    let line = masquerading_line(&lab);
    assert!(
        line.ends_with(" IPTables [IPv4: Enabled, IPv6: Disabled]"),
        "{line}"
    );
}

#[test]
fn in_native_routing_with_bpf_masquerading() {
    let lab = lab_with(&["routing-mode=native", "enable-bpf-masquerade=true"]);
    pods_reach_the_outside_as_their_node(&lab);
    pods_see_each_other_unmasqueraded(&lab);
    only_web_to_the_outside(&lab);
    assert_host_routing(&lab, "Native", "BPF");
    cluster_health_reachable(&lab);
    let line = masquerading_line(&lab);
    assert!(
        line.ends_with("   [eth0]   10.0.0.0/8 [IPv4: Enabled, IPv6: Disabled]"),
        "{line}"
    );
}
