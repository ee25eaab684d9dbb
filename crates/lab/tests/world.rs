//! Pods reach a host outside the cluster (the underlay's own address,
//! 198.18.0.1): ping and TCP from a pod on each node, with the outside
//! host seeing the node's address, never the pod's (iptables
//! masquerading, Cilium's default), and `cilium status` saying so; an
//! egress policy that allows only `toCIDR` of the outside host's /32 on
//! one TCP port lets that through and drops the rest as `Policy denied`;
//! `toCIDRSet` with an `except` of the host denies it, `toEntities: [world]`
//! allows it.

mod common;

use common::{text, Lab};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A TCP server on the underlay that answers each connection with the
/// client's address, as an HTTP body.
struct Outside(Child);

impl Outside {
    fn start(lab: &Lab) -> Self {
        let holder = std::fs::read_to_string(lab.dir.path().join("underlay/holder.pid"))
            .expect("the underlay's holder pid");
        let server = r#"
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.18.0.1", 8081))
s.listen()
print("listening", flush=True)
while True:
    c, a = s.accept()
    c.recv(1024)
    c.sendall(("HTTP/1.0 200 OK\r\n\r\n" + a[0]).encode())
    c.close()
"#;
        let mut child = Command::new("nsenter")
            .arg(format!("--net=/proc/{}/ns/net", holder.trim()))
            .args(["python3", "-c", server])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the outside server");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("its stdout"))
            .read_line(&mut line)
            .expect("the server's first line");
        assert_eq!(line.trim(), "listening");
        Self(child)
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One ping from pod-a to the outside host: its output when answered.
fn ping_outside(lab: &Lab) -> Option<String> {
    let ping = lab.run(&[
        "exec",
        "pod-a",
        "--",
        "ping",
        "-c",
        "1",
        "-W",
        "1",
        "198.18.0.1",
    ]);
    ping.status.success().then(|| text(&ping))
}

/// The address the outside server saw `pod` connect from.
fn seen_by_outside(lab: &Lab, pod: &str) -> String {
    let url = "http://198.18.0.1:8081/";
    let out = lab.ok(&["exec", pod, "--", "curl", "-s", "--max-time", "5", url]);
    out.trim().to_owned()
}

#[test]
fn pods_reach_the_outside_as_their_node() {
    let lab = Lab::new();
    let up = lab.run(&["up", "--without-kubernetes"]);
    assert!(up.status.success(), "{}", text(&up));
    let outside = Outside::start(&lab);

    // pod-a is on node1, pod-b on node2
    for (pod, node_ip) in [("pod-a", "198.18.0.11"), ("pod-b", "198.18.0.12")] {
        let ping = lab.run(&[
            "exec",
            pod,
            "--",
            "ping",
            "-c",
            "1",
            "-W",
            "2",
            "198.18.0.1",
        ]);
        assert!(ping.status.success(), "{pod}: {}", text(&ping));
        assert_eq!(
            seen_by_outside(&lab, pod),
            node_ip,
            "{pod} is seen as its node"
        );
    }

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
  - toCIDR: [198.18.0.1/32]
    toPorts:
    - ports: [{port: "8081", protocol: TCP}]
"#,
    );
    common::eventually("ping to the outside denied", 30, || {
        ping_outside(&lab).map_or(Ok(()), |out| Err(format!("answered: {out}")))
    });
    assert_eq!(
        seen_by_outside(&lab, "pod-a"),
        "198.18.0.11",
        "the allowed port still answers"
    );
    let metrics = lab.ok(&["exec", "node1", "--", "cilium", "bpf", "metrics", "list"]);
    assert!(
        metrics
            .lines()
            .any(|l| l.contains("Policy denied") && l.contains("EGRESS")),
        "{metrics}"
    );

    // the outside host carved out of an allowed range: denied
    lab.ok(&["exec", "node1", "--", "cilium", "policy", "delete", "--all"]);
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
      except: [198.18.0.1/32]
"#,
    );
    let curl = |lab: &Lab| {
        let url = "http://198.18.0.1:8081/";
        lab.run(&["exec", "pod-a", "--", "curl", "-s", "--max-time", "2", url])
    };
    common::eventually("the excepted host denied", 30, || {
        let out = curl(&lab);
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
        ping_outside(&lab)
            .map(|_| ())
            .ok_or_else(|| "no answer".to_owned())
    });
    assert_eq!(seen_by_outside(&lab, "pod-a"), "198.18.0.11");
    drop(outside);

    let status = lab.ok(&["exec", "node1", "--", "cilium", "status"]);
    let line = status
        .lines()
        .find(|l| l.starts_with("Masquerading:"))
        .unwrap_or_default();
    assert!(
        line.ends_with(" IPTables [IPv4: Enabled, IPv6: Disabled]"),
        "{status}"
    );
}
