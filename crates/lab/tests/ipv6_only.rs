//! `cilium-lab up --set enable-ipv4=false --set enable-ipv6=true`: an
//! IPv6-only cluster on real nodes. The API server listens on the
//! underlay's IPv6 address with an IPv6 service range, kubelets register
//! their nodes by IPv6, the operator hands out IPv6 pod CIDRs alone, and
//! the lab routes natively (1.16's overlay needs an IPv4 underlay). Pods
//! get one address, an IPv6 one, and reach each other across nodes under
//! the demo's policy (TCP from app=demo in; ICMPv6 and the outsider out);
//! a Service answers on its IPv6 ClusterIP and, as a NodePort, on each
//! node's IPv6 address from the outside host; pods reach the outside host
//! masqueraded, and a CIDR policy on its IPv6 prefix allows TCP and
//! refuses ICMPv6. Cilium 1.16's cilium-dbg reads the maps without
//! changing them, and cilium-health probes over IPv6.

mod common;

use common::ipv6::{curl, ping6};
use common::{eventually, text, Lab};

/// The pod's addresses as its status lists them: exactly one, IPv6.
fn pod_ip6(lab: &Lab, pod: &str) -> String {
    let ips = lab.kubectl(&["get", "pod", pod, "-o", "jsonpath={.status.podIPs[*].ip}"]);
    let ips: Vec<&str> = ips.split_whitespace().collect();
    assert!(
        ips.len() == 1 && ips[0].starts_with("fd00::"),
        "{pod}: {ips:?}"
    );
    ips[0].to_owned()
}

#[test]
fn an_ipv6_only_lab_runs_pods_services_and_policy_on_ipv6_alone() {
    let lab = Lab::new();
    let up = lab.run(&[
        "up",
        "--nodes",
        "2",
        "--set",
        "enable-ipv4=false",
        "--set",
        "enable-ipv6=true",
    ]);
    assert!(up.status.success(), "{}", text(&up));
    let shown = text(&up);
    assert!(
        shown.contains("kube-apiserver at https://[fd00:198:18::1]:6443")
            && shown.contains("-- curl -g http://[fd00::")
            && shown.contains("-- curl -g http://[fd00:96::")
            && shown.matches("\npod-b\n").count() == 3,
        "{shown}"
    );

    // Nodes and CiliumNodes: IPv6 addresses and one IPv6 pod CIDR
    let internal = lab.kubectl(&[
        "get",
        "nodes",
        "-o",
        "jsonpath={.items[*].status.addresses[?(@.type==\"InternalIP\")].address}",
    ]);
    assert_eq!(internal.trim(), "fd00:198:18::11 fd00:198:18::12");
    for node in ["node1", "node2"] {
        let spec = lab.kubectl(&[
            "get",
            "ciliumnode",
            node,
            "-o",
            "jsonpath={.spec.ipam.podCIDRs} {.spec.addresses[*].ip}",
        ]);
        let (cidrs, addresses) = spec.split_once(' ').unwrap();
        let cidrs: Vec<String> = serde_json::from_str(cidrs).unwrap();
        assert!(
            cidrs.len() == 1 && cidrs[0].starts_with("fd00::") && cidrs[0].ends_with("/120"),
            "{node}: {spec}"
        );
        assert!(
            !addresses.contains('.'),
            "{node} has an IPv4 address: {spec}"
        );
    }

    let a6 = pod_ip6(&lab, "pod-a");
    let b6 = pod_ip6(&lab, "pod-b");
    let outsider6 = pod_ip6(&lab, "outsider");
    let cep = lab.kubectl(&[
        "get",
        "ciliumendpoint",
        "pod-b",
        "-o",
        "jsonpath={.status.networking.addressing[0].ipv6} {.status.networking.addressing[0].ipv4} {.status.networking.node}",
    ]);
    assert_eq!(
        cep.split_whitespace().collect::<Vec<_>>(),
        [b6.as_str(), "fd00:198:18::12"]
    );
    let inside = lab.ok(&["exec", "pod-a", "--", "ip", "-o", "addr", "show", "eth0"]);
    assert!(inside.contains(&format!("inet6 {a6}/128")), "{inside}");
    assert!(
        !inside.contains("inet "),
        "an IPv4 address in pod-a: {inside}"
    );

    let ipcache = lab.ok(&["exec", "node1", "--", "cilium", "bpf", "ipcache", "list"]);
    assert!(
        ipcache
            .lines()
            .any(|l| l.starts_with(&format!("{b6}/128 "))),
        "{ipcache}"
    );
    let status = lab.ok(&["exec", "node1", "--", "cilium", "status"]);
    let line = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        line("IPAM:").contains("IPv6: ") && !line("IPAM:").contains("IPv4: "),
        "{status}"
    );
    assert!(line("Routing:").contains("Network: Native"), "{status}");
    assert!(line("Masquerading:").contains("IPv6: Enabled"), "{status}");

    // across nodes: TCP 80 from app=demo passes the demo's policy; its
    // ICMPv6 and the outsider's TCP do not
    let answer = eventually("pod-a to pod-b", 30, || curl(&lab, "pod-a", &b6));
    assert_eq!(answer, "pod-b");
    assert!(
        !ping6(&lab, "pod-a", &b6),
        "the policy allows no ICMPv6 to pod-b"
    );
    assert!(
        curl(&lab, "outsider", &b6).is_err(),
        "the outsider reached pod-b"
    );
    lab.assert_policy_denied("node2", "INGRESS");
    assert!(ping6(&lab, "pod-a", &outsider6));

    // a Service of the cluster's one family: an IPv6 ClusterIP, a
    // frontend on both nodes with pod-b behind it
    let svc = lab.dir.path().join("web-service.json");
    std::fs::write(
        &svc,
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default"},
  "spec":{"selector":{"role":"server"},"ports":[{"name":"http","port":80,"targetPort":80}]}}"#,
    )
    .unwrap();
    lab.kubectl(&["apply", "-f", &svc.display().to_string()]);
    let vip = lab.kubectl(&[
        "get",
        "service",
        "web",
        "-o",
        "jsonpath={.spec.clusterIPs[*]}",
    ]);
    let vip = vip.trim().to_owned();
    assert!(vip.starts_with("fd00:96::") && !vip.contains(' '), "{vip}");
    let (frontend, backend) = (
        format!("[{vip}]:80/TCP"),
        format!("1 => [{b6}]:80 (active)"),
    );
    for node in ["node1", "node2"] {
        eventually(&format!("the ClusterIP on {node}"), 30, || {
            let list = lab.ok(&["exec", node, "--", "cilium", "service", "list"]);
            match list.lines().any(|l| {
                l.split_whitespace().nth(1) == Some(frontend.as_str())
                    && l.contains("ClusterIP")
                    && l.contains(backend.as_str())
            }) {
                true => Ok(()),
                false => Err(list),
            }
        });
    }
    let answer = eventually("pod-a to pod-b through the ClusterIP", 30, || {
        curl(&lab, "pod-a", &vip)
    });
    assert_eq!(answer, "pod-b");

    common::ipv6::outside_host_over_ipv6(&lab, &a6);

    // in native routing a node that forwards to a backend elsewhere
    // masquerades the client to its own address, which the backend's node
    // knows as a remote node (as in Cilium)
    common::ipv6::node_port_over_ipv6(&lab, "web", &["world", "remote-node"]);

    common::ipv6::cilium_dbg_reads_ipv6(&lab, &a6, &b6, &vip);

    // cilium-health probes the other node and its health endpoint by IPv6
    let report = eventually("node1 to reach node2 over IPv6", 60, || {
        let out = lab.ok(&[
            "exec",
            "node1",
            "--",
            "cilium-health",
            "status",
            "--probe",
            "--verbose",
        ]);
        let node2 = out.split("  node2").nth(1).unwrap_or_default().to_owned();
        match node2.contains("Host connectivity to fd00:198:18::12:")
            && node2.contains("Endpoint connectivity to fd00::")
            && !node2.contains("Error")
        {
            true => Ok(out),
            false => Err(out),
        }
    });
    assert!(!report.contains("198.18.0."), "{report}");

    for node in ["node1", "node2"] {
        let metrics = lab.ok(&["exec", node, "--", "cilium", "bpf", "metrics", "list"]);
        assert!(
            !metrics.contains("Unsupported L3 protocol"),
            "{node}: {metrics}"
        );
    }
}
