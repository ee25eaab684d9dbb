//! A three-node lab in Kubernetes mode used as a platform engineer would:
//! a Deployment of three behind a ClusterIP and a NodePort, reached from
//! a client pod on every node; a NodePort with externalTrafficPolicy
//! Local that shows a client outside the cluster its own address; scaled
//! to one while established
//! connections talk; a NetworkPolicy by pod and namespace labels that
//! denies, then lets in a pod once it is relabeled; and kubectl's
//! CiliumEndpoints and CiliumIdentities agreeing with every agent.

mod common;

use common::{create_web, eventually, expose_web, text, web_pods, Lab};
use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::process::{Child, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

const CLIENTS: [&str; 3] = ["client-1", "client-2", "client-3"];

/// The underlay address of node `i` (1-based).
fn node_ip(i: usize) -> String {
    format!("198.18.0.{}", 10 + i)
}

/// One exchange from `pod`; the web pod that answered.
fn answer(lab: &Lab, pod: &str, target: &str) -> Result<String, String> {
    let out = lab.run(&["connect", pod, target, "--message", "hi"]);
    let said = text(&out);
    match said.trim().strip_suffix(": hi") {
        Some(backend) if out.status.success() && backend.starts_with("web-") => {
            Ok(backend.to_owned())
        }
        _ => Err(format!("{pod} -> {target}: {said}")),
    }
}

fn jsonpath(lab: &Lab, args: &[&str], path: &str) -> String {
    let path = format!("jsonpath={path}");
    let mut all = vec!["kubectl", "get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", &path]);
    lab.ok(&all).trim().to_owned()
}

/// A held connection: `connect --count` from `pod`, its replies as lines.
struct Stream {
    child: Child,
    lines: Receiver<String>,
}

impl Stream {
    fn open(lab: &Lab, pod: &str, target: &str) -> Self {
        let mut child = lab
            .cmd(&[
                "connect",
                pod,
                target,
                "--message",
                "held",
                "--count",
                "900",
                "--interval-ms",
                "100",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("cilium-lab connect");
        let out = child.stdout.take().expect("piped");
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    fn next(&self) -> Option<String> {
        self.lines.recv_timeout(Duration::from_secs(5)).ok()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const POLICY: &str = r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-from-granted-team-a, namespace: default}
spec:
  podSelector: {matchLabels: {app: web}}
  policyTypes: [Ingress]
  ingress:
  - from:
    - namespaceSelector: {matchLabels: {team: a}}
      podSelector: {matchLabels: {access: granted}}
    ports: [{port: 8080, protocol: TCP}]
"#;

#[test]
fn a_three_node_cluster_balances_scales_and_enforces_network_policy() {
    let lab = Lab::new();
    let mut up = vec!["up", "--hollow-nodes", "--nodes", "3"];
    for c in CLIENTS {
        up.extend_from_slice(&["--pod", c]);
    }
    let out = lab.run(&up);
    assert!(out.status.success(), "{}", text(&out));

    create_web(&lab, 3);
    expose_web(&lab, &["--type=NodePort"]);
    eventually("three web pods Running", 90, || {
        let pods = web_pods(&lab);
        (pods.len() == 3).then_some(()).ok_or(format!("{pods:?}"))
    });
    let vip = format!(
        "{}:80",
        jsonpath(&lab, &["service", "web"], "{.spec.clusterIP}")
    );
    let node_port = jsonpath(&lab, &["service", "web"], "{.spec.ports[0].nodePort}");

    // every client reaches the ClusterIP, and the NodePort on its own
    // node's address and on the next node's
    for (i, client) in CLIENTS.iter().enumerate() {
        let own = format!("{}:{node_port}", node_ip(i + 1));
        let next = format!("{}:{node_port}", node_ip((i + 1) % 3 + 1));
        for target in [&vip, &own, &next] {
            eventually(&format!("{client} -> {target}"), 30, || {
                answer(&lab, client, target)
            });
        }
    }

    // externalTrafficPolicy Local: from outside the cluster (the lab's
    // switch), each node with a web pod answers on the NodePort, and the
    // pod sees the client's own address
    expose_web(&lab, &["--type=NodePort", "--name=web-local"]);
    lab.ok(&[
        "kubectl",
        "patch",
        "service",
        "web-local",
        "-p",
        r#"{"spec":{"externalTrafficPolicy":"Local"}}"#,
    ]);
    let local_port = jsonpath(&lab, &["service", "web-local"], "{.spec.ports[0].nodePort}");
    let nodes_with_web: BTreeSet<String> = web_pods(&lab).into_iter().map(|p| p.2).collect();
    for node in &nodes_with_web {
        let i: usize = node.trim_start_matches("node").parse().unwrap();
        let target = format!("{}:{local_port}", node_ip(i));
        eventually(
            &format!("outside -> {target} keeps its address"),
            30,
            || {
                let out = lab.run(&["connect", "underlay", &target, "--message", "GET /clientip"]);
                let said = text(&out);
                let seen = said
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("");
                (out.status.success() && seen.starts_with("198.18.0.1:"))
                    .then_some(())
                    .ok_or(said)
            },
        );
    }
    let listed = lab.ok(&[
        "exec", "node1", "--", "cilium", "service", "list", "-o", "json",
    ]);
    assert!(
        listed.contains(r#""extTrafficPolicy": "Local""#),
        "the Local NodePort in node1's service list: {listed}"
    );

    // one established connection to each backend, then down to one replica
    let mut streams: BTreeMap<String, Stream> = BTreeMap::new();
    for _ in 0..40 {
        if streams.len() == 3 {
            break;
        }
        let stream = Stream::open(&lab, "client-1", &vip);
        let first = stream.next().expect("a first reply on the held connection");
        let backend = first
            .strip_suffix(": held")
            .unwrap_or_else(|| panic!("{first}"));
        streams.entry(backend.to_owned()).or_insert(stream);
    }
    assert_eq!(streams.len(), 3, "a connection to each of three backends");
    lab.ok(&["kubectl", "scale", "deployment/web", "--replicas=1"]);
    let remaining = eventually("one web pod left", 60, || {
        let all = lab.ok(&["kubectl", "get", "pods", "-l", "app=web", "-o", "name"]);
        let running = web_pods(&lab);
        (all.lines().count() == 1 && running.len() == 1)
            .then(|| running[0].clone())
            .ok_or(all)
    });
    let (kept, kept_ip, _) = &remaining;
    let held = &streams[kept];
    for _ in 0..10 {
        assert_eq!(
            held.next().as_deref(),
            Some(format!("{kept}: held").as_str()),
            "the established connection to {kept} keeps talking"
        );
    }
    eventually("new connections all go to the one left", 30, || {
        let answers: Vec<String> = (0..5)
            .map(|_| answer(&lab, "client-2", &vip).unwrap_or_else(|e| e))
            .collect();
        answers
            .iter()
            .all(|a| a == kept)
            .then_some(())
            .ok_or(format!("{answers:?}"))
    });
    drop(streams);

    // a NetworkPolicy by pod and namespace labels
    let direct = format!("{kept_ip}:8080");
    for client in ["client-1", "client-2"] {
        eventually(
            &format!("{client} reaches {kept} before the policy"),
            30,
            || answer(&lab, client, &direct),
        );
    }
    lab.ok(&["kubectl", "label", "namespace", "default", "team=a"]);
    let file = lab.dir.path().join("policy.yaml");
    std::fs::write(&file, POLICY).unwrap();
    lab.ok(&["kubectl", "apply", "-f", file.to_str().unwrap()]);
    eventually("the policy denies both clients", 30, || {
        let got: Vec<bool> = ["client-1", "client-2"]
            .iter()
            .map(|c| answer(&lab, c, &direct).is_ok())
            .collect();
        (got == [false, false])
            .then_some(())
            .ok_or(format!("{got:?}"))
    });
    let identity = |pod: &str| jsonpath(&lab, &["cep", pod], "{.status.identity.id}");
    let before = identity("client-1");
    lab.ok(&["kubectl", "label", "pod", "client-1", "access=granted"]);
    eventually("client-1, relabeled, is let in", 30, || {
        answer(&lab, "client-1", &direct)
    });
    assert!(
        answer(&lab, "client-2", &direct).is_err(),
        "client-2 is still denied"
    );
    eventually("client-1's CiliumEndpoint has its new identity", 30, || {
        let now = identity("client-1");
        (now != before).then_some(()).ok_or(now)
    });

    // kubectl and every agent agree on endpoints and identities
    for node in ["node1", "node2", "node3"] {
        eventually(&format!("{node} agrees with kubectl"), 30, || {
            agreement(&lab, node)
        });
    }

    // cluster health: each CiliumNode publishes its health endpoint, and
    // every agent reaches every node and health endpoint through them
    for node in ["node1", "node2", "node3"] {
        let health = jsonpath(&lab, &["ciliumnode", node], "{.spec.health.ipv4}");
        let cidr = jsonpath(&lab, &["ciliumnode", node], "{.spec.ipam.podCIDRs[0]}");
        let net = cidr.strip_suffix(".0/24").expect("a /24 pod CIDR");
        assert_eq!(
            health,
            format!("{net}.254"),
            "{node}: its CIDR's highest address"
        );
        eventually(&format!("{node}: 3/3 reachable"), 90, || {
            let status = lab.ok(&["exec", node, "--", "cilium", "status"]);
            status
                .lines()
                .any(|l| l.starts_with("Cluster health:") && l.contains(" 3/3 reachable"))
                .then_some(())
                .ok_or(status)
        });
    }
}

/// Whether `node`'s endpoints are its CEPs (ID and identity) and its
/// identities the CiliumIdentities.
fn agreement(lab: &Lab, node: &str) -> Result<(), String> {
    let json = |args: &[&str]| -> serde_json::Value {
        serde_json::from_str(&lab.ok(args)).unwrap_or_default()
    };
    let endpoints = json(&[
        "exec", node, "--", "cilium", "endpoint", "list", "-o", "json",
    ]);
    for ep in endpoints.as_array().into_iter().flatten() {
        let ids = &ep["status"]["external-identifiers"];
        let Some(pod) = ids["k8s-pod-name"].as_str().filter(|p| !p.is_empty()) else {
            continue;
        };
        let namespace = ids["k8s-namespace"].as_str().unwrap_or("default");
        let cep = json(&["kubectl", "get", "cep", "-n", namespace, pod, "-o", "json"]);
        let (want, got) = (
            (&ep["id"], &ep["status"]["identity"]["id"]),
            (&cep["status"]["id"], &cep["status"]["identity"]["id"]),
        );
        if want != got {
            return Err(format!("{namespace}/{pod}: agent {want:?}, CEP {got:?}"));
        }
    }
    let objects: BTreeSet<u64> = lab
        .ok(&["kubectl", "get", "ciliumidentities", "-o", "name"])
        .lines()
        .filter_map(|l| l.rsplit('/').next()?.parse().ok())
        .collect();
    let known: BTreeSet<u64> = json(&[
        "exec", node, "--", "cilium", "identity", "list", "-o", "json",
    ])
    .as_array()
    .into_iter()
    .flatten()
    .filter_map(|i| i["id"].as_u64())
    .filter(|id| *id >= 256)
    .collect();
    (objects == known).then_some(()).ok_or(format!(
        "CiliumIdentities {objects:?}, {node} knows {known:?}"
    ))
}
