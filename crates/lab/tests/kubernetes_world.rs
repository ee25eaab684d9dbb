//! The world through Kubernetes objects, in a two-node lab with its API
//! server: a NetworkPolicy whose egress allows only an `ipBlock` (with an
//! `except`) on TCP 80 lets pods reach the outside host there and nothing
//! else; a CiliumNetworkPolicy `fromEntities: [world]` lets the outside
//! host reach web pods through a NodePort on either node, and no pod.

mod common;

use common::{create_web, eventually, expose_web, text, web_pods, Lab};

const OUTSIDE_URL: &str = "http://198.18.0.254/";

fn apply(lab: &Lab, name: &str, yaml: &str) {
    let file = lab.dir.path().join(name);
    std::fs::write(&file, yaml).expect("write the manifest");
    lab.ok(&["kubectl", "apply", "-f", &file.display().to_string()]);
}

fn curl_outside(lab: &Lab, pod: &str) -> Result<String, String> {
    let out = lab.run(&[
        "exec",
        pod,
        "--",
        "curl",
        "-s",
        "--max-time",
        "2",
        OUTSIDE_URL,
    ]);
    if out.status.success() {
        Ok(text(&out).trim().to_owned())
    } else {
        Err(text(&out))
    }
}

fn pings_outside(lab: &Lab, pod: &str) -> bool {
    let args = [
        "exec",
        pod,
        "--",
        "ping",
        "-c",
        "1",
        "-W",
        "1",
        "198.18.0.254",
    ];
    lab.run(&args).status.success()
}

/// The web pod's answer to `GET /clientip` from `client` at `target`.
fn client_ip_seen(lab: &Lab, client: &str, target: &str) -> Result<String, String> {
    let out = lab.run(&["connect", client, target, "--message", "GET /clientip"]);
    let said = text(&out);
    match said.lines().rev().find(|l| !l.trim().is_empty()) {
        Some(seen) if out.status.success() => Ok(seen.trim().to_owned()),
        _ => Err(said),
    }
}

const EGRESS_IPBLOCK: &str = r#"apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: outside-web-only
spec:
  podSelector:
    matchLabels: {app: demo}
  policyTypes: [Egress]
  egress:
  - to:
    - ipBlock:
        cidr: 198.18.0.0/24
        except: [198.18.0.1/32]
    ports: [{port: 80, protocol: TCP}]
"#;

const WEB_FROM_WORLD: &str = r#"apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: web-from-world
spec:
  endpointSelector:
    matchLabels: {app: web}
  ingress:
  - fromEntities: [world]
"#;

#[test]
fn network_policy_ip_blocks_and_the_world_entity_hold() {
    let lab = Lab::new();
    let up = lab.run(&["up", "--hollow-nodes", "--nodes", "2"]);
    assert!(up.status.success(), "{}", text(&up));

    eventually("pod-a reaches the outside as node1", 30, || {
        curl_outside(&lab, "pod-a")
            .and_then(|seen| seen.starts_with("198.18.0.11:").then_some(()).ok_or(seen))
    });
    assert!(pings_outside(&lab, "pod-a"));

    apply(&lab, "egress.yaml", EGRESS_IPBLOCK);
    eventually("ping to the outside denied", 30, || {
        (!pings_outside(&lab, "pod-a"))
            .then_some(())
            .ok_or("answered".to_owned())
    });
    curl_outside(&lab, "pod-a").expect("TCP 80 to the ipBlock is allowed");
    // another port of the block's hosts is not
    let other_port = lab.run(&[
        "exec",
        "pod-a",
        "--",
        "curl",
        "-s",
        "--max-time",
        "2",
        "http://198.18.0.1:2379/version",
    ]);
    assert!(!other_port.status.success(), "{}", text(&other_port));
    // the outside host carved out of the block
    apply(
        &lab,
        "egress-except.yaml",
        &EGRESS_IPBLOCK.replace("198.18.0.1/32", "198.18.0.254/32"),
    );
    eventually(
        "the excepted outside host denied",
        30,
        || match curl_outside(&lab, "pod-a") {
            Ok(seen) => Err(seen),
            Err(_) => Ok(()),
        },
    );
    lab.ok(&["kubectl", "delete", "networkpolicy", "outside-web-only"]);

    create_web(&lab, 1);
    expose_web(&lab, &["--type=NodePort"]);
    apply(&lab, "web-from-world.yaml", WEB_FROM_WORLD);
    let web = eventually("a web pod Running", 90, || {
        web_pods(&lab).pop().ok_or("none yet".to_owned())
    });
    let node_port = lab
        .ok(&[
            "kubectl",
            "get",
            "service",
            "web",
            "-o",
            "jsonpath={.spec.ports[0].nodePort}",
        ])
        .trim()
        .to_owned();
    // the NodePort on the web pod's own node and on the other
    for node_ip in ["198.18.0.11", "198.18.0.12"] {
        let target = format!("{node_ip}:{node_port}");
        eventually(&format!("outside -> {target}"), 30, || {
            client_ip_seen(&lab, "outside", &target)
        });
    }
    // a pod is no part of the world
    let direct = format!("{}:8080", web.1);
    let from_pod = lab.run(&["connect", "pod-a", &direct, "--message", "hi"]);
    assert!(!from_pod.status.success(), "{}", text(&from_pod));
}
