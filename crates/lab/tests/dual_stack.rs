//! `cilium-lab up --set enable-ipv6=true` on real nodes: the operator gives
//! every CiliumNode an IPv6 pod CIDR beside its IPv4 one (fd00::/104 cut
//! into /120s, as Helm's defaults), each agent waits for both, pods get an
//! address of each family (the Pod's `podIPs`, the CEP's address pair),
//! the other node learns them into its ipcache behind the pod's node, and
//! pods reach each other over IPv6 across the overlay under the demo's
//! policy, which allows TCP 80 from app=demo pods and so drops ICMPv6 and
//! the outsider. A RequireDualStack Service gets a ClusterIP of each
//! family from the API server's dual-stack service range, and the agents
//! make each a frontend with the pod's address of that family behind it;
//! a pod on the other node reaches it through both, and the outside host
//! through each node's IPv6 address once it is a NodePort. Pods reach the
//! outside host over the underlay's IPv6 too, masqueraded, and a CIDR
//! policy on its IPv6 address allows TCP and refuses ICMPv6 to it.
//! cilium-health probes the other node's IPv6 address and its health
//! endpoint's IPv6 address (the CiliumNode's `spec.health.ipv6`) beside the
//! IPv4 ones. Cilium 1.16's cilium-dbg reads the IPv6 entries of our maps
//! without changing them. No drop of the overlay's own IPv6 chatter remains.

mod common;

use common::ipv6::{curl, ping6};
use common::{eventually, text, Lab};

fn pod_ips(lab: &Lab, pod: &str) -> (String, String) {
    let ips = lab.kubectl(&[
        "get",
        "pod",
        pod,
        "-o",
        "jsonpath={.status.podIPs[0].ip} {.status.podIPs[1].ip}",
    ]);
    let (v4, v6) = ips.trim().split_once(' ').unwrap_or_default();
    assert!(
        v4.starts_with("10.") && v6.starts_with("fd00::"),
        "{pod}: {ips}"
    );
    (v4.to_owned(), v6.to_owned())
}

#[test]
fn a_dual_stack_lab_gives_pods_both_families_across_nodes() {
    let lab = Lab::new();
    let up = lab.run(&["up", "--nodes", "2", "--set", "enable-ipv6=true"]);
    assert!(up.status.success(), "{}", text(&up));
    // the demo shows IPv6 too: pod-a to pod-b's IPv6 address and through
    // the demo Service's IPv6 ClusterIP, and the outsider refused there
    let shown = text(&up);
    assert!(
        shown.contains("-- curl -g http://[fd00::")
            && shown.contains("-- curl -g http://[fd00:96::")
            && shown.matches("\npod-b\n").count() == 5,
        "{shown}"
    );

    // every CiliumNode: IPv4 then IPv6 pod CIDR, and an IPv6 router
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
        assert_eq!(cidrs.len(), 2, "{node}: {spec}");
        assert!(
            cidrs[0].starts_with("10.") && cidrs[0].ends_with("/24"),
            "{node}: {spec}"
        );
        assert!(
            cidrs[1].starts_with("fd00::") && cidrs[1].ends_with("/120"),
            "{node}: {spec}"
        );
        assert!(
            addresses.split(' ').any(|a| a.starts_with("fd00::")),
            "{node} has no IPv6 CiliumInternalIP: {spec}"
        );
    }

    // pods: both families, in the Pod's status and the CEP
    let (_, a6) = pod_ips(&lab, "pod-a");
    let (b4, b6) = pod_ips(&lab, "pod-b");
    let (_, outsider6) = pod_ips(&lab, "outsider");
    let cep = lab.kubectl(&[
        "get",
        "ciliumendpoint",
        "pod-b",
        "-o",
        "jsonpath={.status.networking.addressing[0].ipv6}",
    ]);
    assert_eq!(cep.trim(), b6);
    let inside = lab.ok(&[
        "exec", "pod-a", "--", "ip", "-6", "-o", "addr", "show", "eth0",
    ]);
    assert!(inside.contains(&format!("inet6 {a6}/128")), "{inside}");

    // node1 learned pod-b's IPv6 address behind node2, and lists both CIDRs
    let ipcache = lab.ok(&["exec", "node1", "--", "cilium", "bpf", "ipcache", "list"]);
    assert!(
        ipcache
            .lines()
            .any(|l| l.starts_with(&format!("{b6}/128 "))
                && l.contains("tunnelendpoint=198.18.0.12")),
        "{ipcache}"
    );
    let nodes = lab.ok(&["exec", "node1", "--", "cilium", "node", "list"]);
    assert!(
        nodes
            .lines()
            .any(|l| l.starts_with("node2") && l.contains("/120")),
        "{nodes}"
    );
    let status = lab.ok(&["exec", "node1", "--", "cilium", "status"]);
    let ipam = status
        .lines()
        .find(|l| l.starts_with("IPAM:"))
        .unwrap_or_default();
    assert!(
        ipam.contains("IPv4: ")
            && ipam.contains(", IPv6: ")
            && ipam.contains("allocated from fd00::"),
        "{status}"
    );

    // across the overlay over IPv6: TCP 80 from app=demo passes the demo's
    // policy; its ICMPv6 and the outsider's TCP do not
    let answer = eventually("pod-a to pod-b over IPv6", 30, || curl(&lab, "pod-a", &b6));
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
    // without a policy of its own, the outsider answers pings on its node
    assert!(ping6(&lab, "pod-a", &outsider6));

    // a dual-stack Service selecting pod-b: a ClusterIP of each family,
    // each a frontend on the nodes with pod-b's address of its family as
    // backend, and pod-a on the other node reaches pod-b through either
    let svc = lab.dir.path().join("dual-service.json");
    std::fs::write(
        &svc,
        r#"{"apiVersion":"v1","kind":"Service","metadata":{"name":"dual","namespace":"default"},
  "spec":{"ipFamilyPolicy":"RequireDualStack","selector":{"role":"server"},
          "ports":[{"name":"http","port":80,"targetPort":80}]}}"#,
    )
    .unwrap();
    lab.kubectl(&["apply", "-f", &svc.display().to_string()]);
    let ips = lab.kubectl(&[
        "get",
        "service",
        "dual",
        "-o",
        "jsonpath={.spec.clusterIPs[*]}",
    ]);
    let (vip4, vip6) = ips.trim().split_once(' ').unwrap_or_default();
    assert!(
        vip4.starts_with("10.") && vip6.starts_with("fd00:96::"),
        "{ips}"
    );
    let frontends = [
        (format!("{vip4}:80/TCP"), format!("1 => {b4}:80 (active)")),
        (
            format!("[{vip6}]:80/TCP"),
            format!("1 => [{b6}]:80 (active)"),
        ),
    ];
    for node in ["node1", "node2"] {
        eventually(&format!("both ClusterIPs on {node}"), 30, || {
            let list = lab.ok(&["exec", node, "--", "cilium", "service", "list"]);
            let shown = |(frontend, backend): &(String, String)| {
                list.lines().any(|l| {
                    l.split_whitespace().nth(1) == Some(frontend.as_str())
                        && l.contains("ClusterIP")
                        && l.contains(backend.as_str())
                })
            };
            if frontends.iter().all(shown) {
                Ok(())
            } else {
                Err(list)
            }
        });
    }
    for vip in [vip4, vip6] {
        let answer = eventually(&format!("pod-a to pod-b through {vip}"), 30, || {
            curl(&lab, "pod-a", vip)
        });
        assert_eq!(answer, "pod-b");
    }

    common::ipv6::outside_host_over_ipv6(&lab, &a6);

    common::ipv6::node_port_over_ipv6(&lab, "dual", &["world"]);

    common::ipv6::cilium_dbg_reads_ipv6(&lab, &a6, &b6, vip6);

    // cilium-health probes each node's IPv6 address and its health
    // endpoint's (published in the CiliumNode) as secondary addresses
    let health6 = lab.kubectl(&[
        "get",
        "ciliumnode",
        "node2",
        "-o",
        "jsonpath={.spec.health.ipv6}",
    ]);
    assert!(health6.trim().starts_with("fd00::"), "{health6}");
    let report = eventually("node1 to reach node2 over IPv6 too", 60, || {
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
        let ok = |ip: &str| {
            node2
                .split(&format!("Secondary connectivity to {ip}:"))
                .nth(1)
                .is_some_and(|rest| {
                    let mut lines = rest.lines().skip(1);
                    lines
                        .next()
                        .is_some_and(|l| l.contains("ICMP to stack:   OK"))
                        && lines
                            .next()
                            .is_some_and(|l| l.contains("HTTP to agent:   OK"))
                })
        };
        match ok("fd00:198:18::12") && ok(health6.trim()) {
            true => Ok(out),
            false => Err(out),
        }
    });
    assert!(report.contains("Endpoint connectivity to 10."), "{report}");

    // no drop of what the overlay device itself would send (DAD, MLD)
    for node in ["node1", "node2"] {
        let metrics = lab.ok(&["exec", node, "--", "cilium", "bpf", "metrics", "list"]);
        assert!(
            !metrics.contains("Error retrieving tunnel key")
                && !metrics.contains("Unsupported L3 protocol"),
            "{node}: {metrics}"
        );
    }
}
