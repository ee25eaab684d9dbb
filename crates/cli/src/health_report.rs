//! cilium-health's report as Cilium's clients print it: the long form of
//! `cilium-health status` and the succinct `Cluster health:` form that
//! `cilium status` shows. Both return tab-separated text for
//! [`crate::table::tabwrite`].

use api::health::{ConnectivityStatus, HealthStatusResponse, HostStatus, NodeStatus, PathStatus};
use std::fmt::Write;

/// How much to print.
#[derive(Clone, Copy, Debug, Default)]
pub struct Detail {
    /// Every node, not only the unhealthy ones.
    pub all: bool,
    /// One line per node.
    pub succinct: bool,
    /// Secondary addresses and missing paths too.
    pub verbose: bool,
    /// At most this many node rows (0: no limit).
    pub max_lines: usize,
}

/// This node first, then the others by name.
fn ordered(r: &HealthStatusResponse) -> Vec<&NodeStatus> {
    let local = r.local_name();
    let mut others: Vec<&NodeStatus> = r.nodes.iter().filter(|n| n.name != local).collect();
    others.sort_by(|a, b| a.name.cmp(&b.name));
    r.nodes
        .iter()
        .filter(|n| n.name == local)
        .chain(others)
        .collect()
}

fn localhost(r: &HealthStatusResponse, n: &NodeStatus) -> &'static str {
    if n.name == r.local_name() {
        " (localhost)"
    } else {
        ""
    }
}

fn probe(c: &ConnectivityStatus) -> String {
    if c.status.is_empty() {
        let rtt = std::time::Duration::from_nanos(u64::try_from(c.latency).unwrap_or(0));
        format!("OK, RTT={}", api::duration::go_duration(rtt))
    } else {
        c.status.clone()
    }
}

fn path_lines(out: &mut String, indent: &str, p: &PathStatus) {
    if let Some(c) = &p.icmp {
        let _ = writeln!(out, "{indent}ICMP to stack:\t{}", probe(c));
    }
    if let Some(c) = &p.http {
        let _ = writeln!(out, "{indent}HTTP to agent:\t{}", probe(c));
    }
}

fn status_lines(out: &mut String, what: &str, s: Option<&HostStatus>, verbose: bool) {
    let Some(s) = s else {
        if verbose {
            let _ = writeln!(out, "    {what} connectivity:\tnil");
        }
        return;
    };
    if let Some(p) = &s.primary_address {
        let _ = writeln!(out, "    {what} connectivity to {}:", p.ip);
        path_lines(out, "      ", p);
    }
    let unhealthy = s
        .secondary_addresses
        .iter()
        .any(|p| api::health::path_reach(Some(p)) == api::health::Reach::Unreachable);
    if verbose || unhealthy {
        for p in &s.secondary_addresses {
            let _ = writeln!(out, "      Secondary connectivity to {}:", p.ip);
            path_lines(out, "        ", p);
        }
    }
}

/// The report in the chosen form.
pub fn format(r: &HealthStatusResponse, d: Detail) -> String {
    let mut out = String::new();
    if d.succinct {
        let (healthy, total) = r.reachable();
        let _ = writeln!(
            out,
            "Cluster health:\t{healthy}/{total} reachable\t({})",
            r.timestamp
        );
        let unhealthy = total - healthy;
        if !d.all && unhealthy == 0 {
            return out;
        }
        out.push_str("  Name\tIP\tNode\tEndpoints\n");
        let mut shown = 0;
        for n in ordered(r) {
            if !d.all && n.healthy() {
                continue;
            }
            if d.max_lines > 0 && shown >= d.max_lines {
                out.push_str("  ...");
                break;
            }
            shown += 1;
            let ips: Vec<String> = n
                .host
                .as_ref()
                .map(|h| {
                    std::iter::once(
                        h.primary_address
                            .as_ref()
                            .map_or("Unavailable".to_owned(), |p| p.ip.clone()),
                    )
                    .chain(h.secondary_addresses.iter().map(|p| p.ip.clone()))
                    .collect()
                })
                .unwrap_or_else(|| vec!["Unavailable".to_owned()]);
            let _ = writeln!(
                out,
                "  {}{}\t{}\t{}\t{}",
                n.name,
                localhost(r, n),
                ips.join(","),
                n.host_reach(),
                n.endpoint_reach()
            );
        }
        return out;
    }
    let _ = writeln!(out, "Probe time:\t{}", r.timestamp);
    out.push_str("Nodes:\n");
    for n in ordered(r) {
        if !d.all && n.healthy() {
            continue;
        }
        let _ = writeln!(out, "  {}{}:", n.name, localhost(r, n));
        status_lines(&mut out, "Host", n.host.as_ref(), d.verbose);
        status_lines(&mut out, "Endpoint", n.health_endpoint.as_ref(), d.verbose);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::health::SelfStatus;

    fn path(ip: &str, icmp: ConnectivityStatus, http: ConnectivityStatus) -> Option<HostStatus> {
        Some(HostStatus {
            primary_address: Some(PathStatus {
                ip: ip.into(),
                icmp: Some(icmp),
                http: Some(http),
            }),
            secondary_addresses: Vec::new(),
        })
    }

    fn report() -> HealthStatusResponse {
        let ok = |us| ConnectivityStatus::ok(std::time::Duration::from_micros(us));
        let node = |name: &str, host, ep| NodeStatus {
            name: name.into(),
            host,
            health_endpoint: ep,
            endpoint: None,
        };
        HealthStatusResponse {
            timestamp: "2026-11-24T10:00:00Z".into(),
            local: Some(SelfStatus {
                name: "node2".into(),
            }),
            nodes: vec![
                node(
                    "node1",
                    path("198.18.0.11", ok(300), ok(650)),
                    path(
                        "10.1.0.9",
                        ConnectivityStatus::failed(api::health::ICMP_TIMEOUT),
                        ConnectivityStatus::failed("Get \"http://10.1.0.9:4240/hello\": refused"),
                    ),
                ),
                node(
                    "node2",
                    path("198.18.0.12", ok(95), ok(301)),
                    path("10.2.0.9", ok(88), ok(412)),
                ),
            ],
        }
    }

    #[test]
    fn the_long_form_lists_this_node_first_with_every_path() {
        let text = crate::table::tabwrite(
            &format(
                &report(),
                Detail {
                    all: true,
                    ..Default::default()
                },
            ),
            2,
            3,
        );
        assert_eq!(
            text,
            "Probe time:   2026-11-24T10:00:00Z
Nodes:
  node2 (localhost):
    Host connectivity to 198.18.0.12:
      ICMP to stack:   OK, RTT=95µs
      HTTP to agent:   OK, RTT=301µs
    Endpoint connectivity to 10.2.0.9:
      ICMP to stack:   OK, RTT=88µs
      HTTP to agent:   OK, RTT=412µs
  node1:
    Host connectivity to 198.18.0.11:
      ICMP to stack:   OK, RTT=300µs
      HTTP to agent:   OK, RTT=650µs
    Endpoint connectivity to 10.1.0.9:
      ICMP to stack:   Connection timed out
      HTTP to agent:   Get \"http://10.1.0.9:4240/hello\": refused
"
        );
    }

    #[test]
    fn the_succinct_form_counts_and_names_the_unhealthy() {
        let d = Detail {
            succinct: true,
            max_lines: 10,
            ..Default::default()
        };
        assert_eq!(
            crate::table::tabwrite(&format(&report(), d), 2, 3),
            "Cluster health:   1/2 reachable   (2026-11-24T10:00:00Z)
  Name            IP              Node        Endpoints
  node1           198.18.0.11     reachable   unreachable
"
        );
    }
}
