//! The agent's metrics with Cilium's names: datapath counters from
//! `cilium_metrics` (summed over CPUs) and agent state, as Prometheus text
//! on `prometheus-serve-addr` and as `GET /v1/metrics/` for `cilium
//! metrics list`.

use axum::extract::State;
use axum::routing::get;
use axum::Router;
use controlplane::endpoint::Endpoints;
use controlplane::policies::Policies;
use controlplane::services::Services;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

/// One sample (Cilium's API `Metric`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Metric {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// What the metrics are read from.
pub struct Sources {
    pub bpf_root: std::path::PathBuf,
    pub ct_gc: Arc<crate::ct_gc::GcCounters>,
    pub endpoints: Arc<Endpoints>,
    pub monitor: Arc<crate::monitor::Hub>,
    pub policies: Arc<Policies>,
    pub services: Arc<Services>,
    /// cilium-health's prober, when health checking is on.
    pub health: Option<Arc<crate::cluster_health::prober::Prober>>,
}

struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

fn datapath_families(d: &Sources) -> Vec<Family> {
    let mut drops: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    let mut forwards: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let entries = datapath::maps::Metrics::open(&d.bpf_root)
        .and_then(|m| m.entries())
        .unwrap_or_default();
    for (k, per_cpu) in entries {
        let (count, bytes) = per_cpu
            .iter()
            .fold((0, 0), |(c, b), v| (c + v.count, b + v.bytes));
        let dir = abi::metrics::direction_name(k.dir).to_owned();
        let slot = if k.reason == abi::metrics::REASON_FORWARDED {
            forwards.entry(dir).or_default()
        } else {
            drops
                .entry((abi::metrics::reason_text(k.reason), dir))
                .or_default()
        };
        slot.0 += count;
        slot.1 += bytes;
    }
    let drop_samples = |bytes: bool| {
        drops
            .iter()
            .map(|((reason, dir), (c, b))| {
                (
                    vec![("direction", dir.clone()), ("reason", reason.clone())],
                    if bytes { *b } else { *c } as f64,
                )
            })
            .collect()
    };
    let forward_samples = |bytes: bool| {
        forwards
            .iter()
            .map(|(dir, (c, b))| {
                (
                    vec![("direction", dir.clone())],
                    if bytes { *b } else { *c } as f64,
                )
            })
            .collect()
    };
    vec![
        Family {
            name: "cilium_drop_count_total",
            help: "Total dropped packets, tagged by drop reason and ingress/egress direction",
            kind: "counter",
            samples: drop_samples(false),
        },
        Family {
            name: "cilium_drop_bytes_total",
            help: "Total dropped bytes, tagged by drop reason and ingress/egress direction",
            kind: "counter",
            samples: drop_samples(true),
        },
        Family {
            name: "cilium_forward_count_total",
            help: "Total forwarded packets, tagged by ingress/egress direction",
            kind: "counter",
            samples: forward_samples(false),
        },
        Family {
            name: "cilium_forward_bytes_total",
            help: "Total forwarded bytes, tagged by ingress/egress direction",
            kind: "counter",
            samples: forward_samples(true),
        },
    ]
}

/// Events the datapath did not write (rate limit) and the agent did not
/// get (full rings).
fn event_families(d: &Sources) -> Vec<Family> {
    let refused = datapath::maps::RatelimitMetrics::open(&d.bpf_root)
        .and_then(|m| m.entries())
        .unwrap_or_default();
    vec![
        Family {
            name: "cilium_bpf_ratelimit_dropped_total",
            help: "Total drops resulting from BPF ratelimiter, tagged by source of drop",
            kind: "counter",
            samples: refused
                .iter()
                .map(|(k, v)| {
                    (
                        vec![("usage", abi::ratelimit::usage_name(k.usage).to_owned())],
                        v.dropped as f64,
                    )
                })
                .collect(),
        },
        Family {
            name: "hubble_flows_processed_total",
            help: "Total number of flows processed",
            kind: "counter",
            samples: d
                .monitor
                .received()
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(kind, n)| (vec![("type", kind.to_owned())], n as f64))
                .collect(),
        },
        Family {
            name: "hubble_lost_events_total",
            help: "Number of lost events",
            kind: "counter",
            samples: vec![
                (
                    vec![("source", "observer_events_queue".to_owned())],
                    d.monitor.observer_queue_lost() as f64,
                ),
                (
                    vec![("source", "perf_event_ring_buffer".to_owned())],
                    d.monitor.lost() as f64,
                ),
            ],
        },
    ]
}

fn ct_gc_families(d: &Sources) -> Vec<Family> {
    use std::sync::atomic::Ordering::Relaxed;
    let g = &d.ct_gc;
    let entries = |proto: &str, slot: &[std::sync::atomic::AtomicU64; 2]| {
        [("alive", 0), ("deleted", 1)].map(|(status, i)| {
            (
                vec![
                    ("family", "ipv4".to_owned()),
                    ("protocol", proto.to_owned()),
                    ("status", status.to_owned()),
                ],
                slot[i].load(Relaxed) as f64,
            )
        })
    };
    vec![
        Family {
            name: "cilium_datapath_conntrack_gc_runs_total",
            help: "Number of times that the conntrack garbage collector process was run",
            kind: "counter",
            samples: vec![(
                vec![("status", "completed".to_owned())],
                g.runs.load(Relaxed) as f64,
            )],
        },
        Family {
            name: "cilium_datapath_nat_gc_entries",
            help: "The number of alive and deleted nat entries at the end of a garbage collector run",
            kind: "gauge",
            samples: [("alive", 0), ("deleted", 1)]
                .map(|(status, i)| {
                    (
                        vec![("family", "ipv4".to_owned()), ("status", status.to_owned())],
                        g.nat[i].load(Relaxed) as f64,
                    )
                })
                .into(),
        },
        Family {
            name: "cilium_datapath_conntrack_gc_entries",
            help: "The number of alive and deleted conntrack entries at the end of a garbage collector run",
            kind: "gauge",
            samples: entries("TCP", &g.tcp)
                .into_iter()
                .chain(entries("non-TCP", &g.any))
                .collect(),
        },
    ]
}

fn agent_families(d: &Sources) -> Vec<Family> {
    let eps = d.endpoints.list();
    let mut states: BTreeMap<String, f64> = BTreeMap::new();
    for ep in &eps {
        *states.entry(ep.state.to_string()).or_default() += 1.0;
    }
    let (rules, revision) = d.policies.rules();
    let (add, update, delete) = d.services.events();
    vec![
        Family {
            name: "cilium_endpoint",
            help: "Number of endpoints managed by this agent",
            kind: "gauge",
            samples: vec![(vec![], eps.len() as f64)],
        },
        Family {
            name: "cilium_endpoint_state",
            help: "Count of all endpoints, tagged by different endpoint states",
            kind: "gauge",
            samples: states
                .into_iter()
                .map(|(s, n)| (vec![("endpoint_state", s)], n))
                .collect(),
        },
        Family {
            name: "cilium_policy",
            help: "Number of policy rules currently loaded",
            kind: "gauge",
            samples: vec![(vec![], rules.len() as f64)],
        },
        Family {
            name: "cilium_policy_max_revision",
            help: "Highest policy revision number in the agent",
            kind: "gauge",
            samples: vec![(vec![], revision as f64)],
        },
        Family {
            name: "cilium_services_events_total",
            help: "Number of services events labeled by action type",
            kind: "counter",
            samples: vec![
                (vec![("action", "add".into())], add as f64),
                (vec![("action", "update".into())], update as f64),
                (vec![("action", "delete".into())], delete as f64),
            ],
        },
    ]
}

/// Node connectivity as the last probe round saw it: 1/0 per node path
/// and endpoint path, and every probe's latency (-1 when not probed).
fn health_families(d: &Sources) -> Vec<Family> {
    use api::health::{summary, HostStatus, Reach};
    let Some(prober) = &d.health else {
        return Vec::new();
    };
    let last = prober.last();
    let local = last.local_name().to_owned();
    let split = |name: &str| match name.split_once('/') {
        Some((c, n)) => (c.to_owned(), n.to_owned()),
        None => ("default".to_owned(), name.to_owned()),
    };
    let (source_cluster, source_node) = split(&local);
    let (mut status, mut latency) = (Vec::new(), Vec::new());
    for node in &last.nodes {
        let (cluster, name) = split(&node.name);
        let kind = if node.name == local {
            "local_node"
        } else {
            "remote_intra_cluster"
        };
        let base = || {
            vec![
                ("source_cluster", source_cluster.clone()),
                ("source_node_name", source_node.clone()),
                ("target_cluster", cluster.clone()),
                ("target_node_name", name.clone()),
            ]
        };
        let paths: [(&str, Option<&HostStatus>); 2] = [
            ("node", node.host.as_ref()),
            ("endpoint", node.health_endpoint.as_ref()),
        ];
        for (ty, paths) in paths {
            let Some(p) = paths.and_then(|p| p.primary_address.as_ref()) else {
                continue;
            };
            let mut labels = base();
            labels.extend([
                ("target_node_type", kind.to_owned()),
                ("type", ty.to_owned()),
            ]);
            let up = summary(paths) == Reach::Reachable;
            status.push((labels, if up { 1.0 } else { 0.0 }));
            for (protocol, probe) in [("http", &p.http), ("icmp", &p.icmp)] {
                let mut labels = base();
                labels.extend([
                    ("target_node_ip", p.ip.clone()),
                    ("target_node_type", kind.to_owned()),
                    ("type", ty.to_owned()),
                    ("protocol", protocol.to_owned()),
                    ("address_type", "primary".to_owned()),
                ]);
                let secs = probe.as_ref().map_or(-1.0, |c| c.latency as f64 / 1e9);
                latency.push((labels, secs));
            }
        }
    }
    vec![
        Family {
            name: "cilium_node_connectivity_status",
            help: "The last observed status of both ICMP and HTTP connectivity between the current Cilium agent and other Cilium nodes",
            kind: "gauge",
            samples: status,
        },
        Family {
            name: "cilium_node_connectivity_latency_seconds",
            help: "The last observed latency between the current Cilium agent and other Cilium nodes in seconds",
            kind: "gauge",
            samples: latency,
        },
    ]
}

fn families(d: &Sources) -> Vec<Family> {
    let mut all = datapath_families(d);
    all.extend(health_families(d));
    all.extend(event_families(d));
    all.extend(ct_gc_families(d));
    all.extend(agent_families(d));
    all
}

/// Prometheus' text exposition format.
pub fn render(d: &Sources) -> String {
    let mut out = String::new();
    for f in families(d) {
        out.push_str(&format!(
            "# HELP {} {}\n# TYPE {} {}\n",
            f.name, f.help, f.name, f.kind
        ));
        for (labels, value) in f.samples {
            let labels: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
                .collect();
            if labels.is_empty() {
                out.push_str(&format!("{} {value}\n", f.name));
            } else {
                out.push_str(&format!("{}{{{}}} {value}\n", f.name, labels.join(",")));
            }
        }
    }
    out
}

/// Every sample, for `GET /v1/metrics/`.
pub fn list(d: &Sources) -> Vec<Metric> {
    families(d)
        .into_iter()
        .flat_map(|f| {
            f.samples.into_iter().map(move |(labels, value)| Metric {
                name: f.name.to_owned(),
                labels: labels.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                value,
            })
        })
        .collect()
}

async fn metrics(State(d): State<Arc<Sources>>) -> String {
    render(&d)
}

async fn metrics_list(State(d): State<Arc<Sources>>) -> axum::Json<Vec<Metric>> {
    axum::Json(list(&d))
}

/// `GET /v1/metrics/`: the samples as `cilium metrics list` shows them.
pub fn routes(sources: Arc<Sources>) -> Router {
    Router::new()
        .route("/v1/metrics/", get(metrics_list))
        .with_state(sources)
}

pub async fn serve(
    sources: Arc<Sources>,
    addr: std::net::SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(sources);
    crate::api::healthz::serve_http(addr, app, shutdown, "prometheus metrics server").await
}
