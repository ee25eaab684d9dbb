//! What the dual-stack and the IPv6-only lab tests both check over IPv6.

use super::{cilium_tools, eventually, pins, text, Lab};

/// `GET /hostname` from `pod` to `host`: an address, or `[IPv6]:port`.
pub fn curl(lab: &Lab, pod: &str, host: &str) -> Result<String, String> {
    let url = match host.parse::<std::net::Ipv6Addr>() {
        Ok(_) => format!("http://[{host}]/hostname"),
        Err(_) => format!("http://{host}/hostname"),
    };
    let out = lab.run(&[
        "exec",
        pod,
        "--",
        "curl",
        "-sS",
        "-g",
        "--max-time",
        "3",
        &url,
    ]);
    let body = text(&out);
    if out.status.success() {
        Ok(body.trim().to_owned())
    } else {
        Err(body)
    }
}

pub fn ping6(lab: &Lab, pod: &str, ip: &str) -> bool {
    lab.run(&["exec", pod, "--", "ping", "-6", "-c", "1", "-W", "2", ip])
        .status
        .success()
}

/// The underlay's IPv6 (fd00:198:18::/64): pod-a (at `a6`) reaches the
/// outside host as its node, masqueraded; then a CIDR policy on the
/// outside host's /128 lets pod-a (the app=demo pod that is no server)
/// reach it on TCP 80 and nothing else, so its ping is refused.
pub fn outside_host_over_ipv6(lab: &Lab, a6: &str) {
    let outside6 = topology::underlay_ipv6(topology::OUTSIDE_IP).to_string();
    let seen = eventually("pod-a to the outside host over IPv6", 30, || {
        curl(lab, "pod-a", &outside6)
    });
    assert!(
        seen.starts_with("[fd00:198:18::1") && !seen.contains(a6),
        "the outside host saw pod-a as {seen}"
    );
    let cidr_policy = lab.dir.path().join("outside-v6.json");
    std::fs::write(
        &cidr_policy,
        format!(
            r#"{{"apiVersion":"cilium.io/v2","kind":"CiliumNetworkPolicy",
  "metadata":{{"name":"outside-v6","namespace":"default"}},
  "spec":{{"endpointSelector":{{"matchLabels":{{"app":"demo"}},
             "matchExpressions":[{{"key":"role","operator":"DoesNotExist"}}]}},
          "egress":[{{"toCIDR":["{outside6}/128"],
                      "toPorts":[{{"ports":[{{"port":"80","protocol":"TCP"}}]}}]}}]}}}}"#
        ),
    )
    .unwrap();
    lab.kubectl(&["apply", "-f", &cidr_policy.display().to_string()]);
    eventually(
        "pod-a's ICMPv6 to the outside refused",
        30,
        || match ping6(lab, "pod-a", &outside6) {
            true => Err("answered".to_owned()),
            false => Ok(()),
        },
    );
    curl(lab, "pod-a", &outside6).expect("TCP 80 to the outside's /128 is allowed");
    lab.kubectl(&["delete", "cnp", "outside-v6"]);
}

/// Service `service` (selecting pod-b) as a NodePort, from the outside
/// host through each node's IPv6 address: pod-b is elsewhere for one,
/// local for the other. pod-b lets in what `entities` name.
pub fn node_port_over_ipv6(lab: &Lab, service: &str, entities: &[&str]) {
    let policy = lab.dir.path().join("web-from-world.json");
    std::fs::write(
        &policy,
        serde_json::json!({
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNetworkPolicy",
            "metadata": {"name": "web-from-world", "namespace": "default"},
            "spec": {
                "endpointSelector": {"matchLabels": {"role": "server"}},
                "ingress": [{"fromEntities": entities}],
            },
        })
        .to_string(),
    )
    .unwrap();
    lab.kubectl(&["apply", "-f", &policy.display().to_string()]);
    lab.kubectl(&[
        "patch",
        "service",
        service,
        "-p",
        r#"{"spec":{"type":"NodePort"}}"#,
    ]);
    let node_port = lab.kubectl(&[
        "get",
        "service",
        service,
        "-o",
        "jsonpath={.spec.ports[0].nodePort}",
    ]);
    for node in 1..=2 {
        let target = format!(
            "[{}]:{}",
            topology::underlay_ipv6(topology::node_ip(node)),
            node_port.trim()
        );
        let answer = eventually(&format!("the outside host to {target}"), 30, || {
            curl(lab, "outside", &target)
        });
        assert_eq!(answer, "pod-b", "through {target}");
    }
}

/// Cilium 1.16's own cilium-dbg reads the IPv6 entries of node1's maps
/// (the conntrack entry of pod-a's connection to pod-b, pod-b in the
/// ipcache, the ClusterIP `vip6`) and leaves every pin as it was.
pub fn cilium_dbg_reads_ipv6(lab: &Lab, a6: &str, b6: &str, vip6: &str) {
    let dbg = cilium_tools().join("cilium-dbg").display().to_string();
    let before = pins(lab, "node1");
    let ct = lab.ok(&["exec", "node1", "--", &dbg, "bpf", "ct", "list", "global"]);
    assert!(ct.lines().any(|l| l.contains(b6) && l.contains(a6)), "{ct}");
    let ipcache = lab.ok(&["exec", "node1", "--", &dbg, "bpf", "ipcache", "list"]);
    assert!(
        ipcache
            .lines()
            .any(|l| l.starts_with(&format!("{b6}/128 "))),
        "{ipcache}"
    );
    let lb = lab.ok(&["exec", "node1", "--", &dbg, "bpf", "lb", "list"]);
    assert!(lb.contains(&format!("[{vip6}]:80")), "{lb}");
    assert_eq!(pins(lab, "node1"), before, "cilium-dbg changed the pins");
}
