//! The prober: every probe interval, ICMP and HTTP to each node's address
//! (the node path: its stack and its agent) and to its health endpoint
//! (the endpoint path: through both datapaths), this node included.
//! All probes of a round run at once, so one dead node costs a round no
//! more than one timeout.

use super::{http, icmp};
use api::health::{
    ConnectivityStatus, HealthStatusResponse, HostStatus, NodeStatus, PathStatus, SelfStatus,
};
use controlplane::nodes::{Node, Nodes};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Cilium's probe interval.
pub const INTERVAL: Duration = Duration::from_secs(60);
/// How long a round waits for echo replies. Cilium's synchronous probe
/// waits 1 s; a loaded node answering a little later is not down.
pub const ICMP_DEADLINE: Duration = Duration::from_secs(5);
/// Cilium's HTTP client timeout.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// What the status says before the first round (Go's zero time).
const NEVER: &str = "0001-01-01T00:00:00Z";
/// A node that joined waits this long for its neighbours before a round.
const SETTLE: Duration = Duration::from_secs(1);

/// A node as probed: the name Cilium shows, its address and its health
/// endpoint's (IPv4's, or IPv6's on an IPv6-only node), and between
/// dual-stack nodes the IPv6 ones too (Cilium's secondary addresses).
#[derive(Clone, Debug)]
struct Target {
    name: String,
    node: Addresses,
    health: Addresses,
}

/// A primary address and the secondary one beside it.
#[derive(Clone, Copy, Debug)]
struct Addresses {
    primary: Option<IpAddr>,
    secondary: Option<IpAddr>,
}

impl Addresses {
    /// IPv4 first when there is one; IPv6 beside it only when `dual`.
    fn of(v4: Option<Ipv4Addr>, v6: Option<Ipv6Addr>, dual: bool) -> Self {
        match v4 {
            Some(v4) => Self {
                primary: Some(v4.into()),
                secondary: v6.filter(|_| dual).map(Into::into),
            },
            None => Self {
                primary: v6.map(Into::into),
                secondary: None,
            },
        }
    }
}

struct Report {
    started: SystemTime,
    response: HealthStatusResponse,
}

pub struct Prober {
    nodes: Arc<Nodes>,
    cluster: String,
    port: u16,
    last: Mutex<Report>,
}

impl Prober {
    pub fn new(nodes: Arc<Nodes>, cluster: String, port: u16) -> Self {
        let local = display_name(&cluster, nodes.local());
        Self {
            nodes,
            cluster,
            port,
            last: Mutex::new(Report {
                started: SystemTime::UNIX_EPOCH,
                response: HealthStatusResponse {
                    timestamp: NEVER.into(),
                    local: Some(SelfStatus { name: local }),
                    nodes: Vec::new(),
                },
            }),
        }
    }

    /// The last round's results.
    pub fn last(&self) -> HealthStatusResponse {
        self.last.lock().expect("prober lock").response.clone()
    }

    /// This node first, then the others by name.
    fn targets(&self) -> Vec<Target> {
        // IPv6 paths only between dual-stack nodes
        let dual = self.nodes.local().ipv6_alloc_cidr.is_some();
        let target = |n: &Node| Target {
            name: display_name(&self.cluster, n),
            node: Addresses::of(n.primary_ipv4(), n.primary_ipv6(), dual),
            health: Addresses::of(n.health_ipv4, n.health_ipv6, dual),
        };
        let mut others: Vec<Target> = self.nodes.list().iter().map(target).collect();
        others.sort_by(|a, b| a.name.cmp(&b.name));
        std::iter::once(target(self.nodes.local()))
            .chain(others)
            .collect()
    }

    /// One round: probes everything now, keeps and returns the results
    /// (`PUT /status/probe` and the interval's rounds alike).
    pub async fn probe(&self) -> HealthStatusResponse {
        let started = SystemTime::now();
        let targets = self.targets();
        let ips: Vec<IpAddr> = targets
            .iter()
            .flat_map(|t| {
                [
                    t.node.primary,
                    t.health.primary,
                    t.node.secondary,
                    t.health.secondary,
                ]
            })
            .flatten()
            .collect();
        let pinged = {
            let ips = ips.clone();
            tokio::task::spawn_blocking(move || icmp::ping_all(&ips, ICMP_DEADLINE))
        };
        let mut http_round = tokio::task::JoinSet::new();
        for ip in ips.iter().copied() {
            let port = self.port;
            http_round.spawn(async move { (ip, http::probe(ip, port, HTTP_TIMEOUT).await) });
        }
        let icmp = match pinged.await {
            Ok(Ok(rtts)) => Ok(rtts),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = &icmp {
            tracing::warn!(subsys = "health-server", error = %e, "Unable to send ICMP probes");
        }
        let mut http: HashMap<IpAddr, Result<Duration, String>> = HashMap::new();
        while let Some(done) = http_round.join_next().await {
            if let Ok((ip, result)) = done {
                http.insert(ip, result);
            }
        }
        let path = |ip: IpAddr| PathStatus {
            ip: ip.to_string(),
            icmp: Some(match &icmp {
                Ok(rtts) => rtts.get(&ip).map_or_else(
                    || ConnectivityStatus::failed(api::health::ICMP_TIMEOUT),
                    |rtt| ConnectivityStatus::ok(*rtt),
                ),
                Err(e) => ConnectivityStatus::failed(e.clone()),
            }),
            http: http.get(&ip).map(|r| match r {
                Ok(rtt) => ConnectivityStatus::ok(*rtt),
                Err(e) => ConnectivityStatus::failed(e.clone()),
            }),
        };
        let status = |a: Addresses| {
            a.primary.map(|ip| HostStatus {
                primary_address: Some(path(ip)),
                secondary_addresses: a.secondary.map(path).into_iter().collect(),
            })
        };
        let nodes = targets
            .iter()
            .map(|t| {
                let health_endpoint = status(t.health);
                NodeStatus {
                    name: t.name.clone(),
                    host: status(t.node),
                    endpoint: health_endpoint
                        .as_ref()
                        .and_then(|h| h.primary_address.clone()),
                    health_endpoint,
                }
            })
            .collect();
        let response = HealthStatusResponse {
            timestamp: api::timefmt::rfc3339(started),
            local: Some(SelfStatus {
                name: targets[0].name.clone(),
            }),
            nodes,
        };
        let mut last = self.last.lock().expect("prober lock");
        // a slow round that began before the one already kept is older news
        if started >= last.started {
            *last = Report {
                started,
                response: response.clone(),
            };
        }
        response
    }

    /// Probes every interval, and soon after nodes come, change or go.
    pub fn run(self: Arc<Self>, tasks: &controlplane::tasks::Tasks) {
        let mut changed = self.nodes.subscribe();
        tasks.spawn("cilium-health-prober", async move {
            loop {
                let r = self.probe().await;
                let (ok, all) = r.reachable();
                tracing::debug!(
                    subsys = "health-server",
                    reachable = ok,
                    nodes = all,
                    "Probe round done"
                );
                tokio::select! {
                    _ = tokio::time::sleep(INTERVAL) => {}
                    seen = changed.changed() => {
                        if seen.is_err() {
                            return;
                        }
                        tokio::time::sleep(SETTLE).await;
                        changed.borrow_and_update();
                    }
                }
            }
        });
    }
}

/// `cluster/node`, or the bare node name in the cluster named `default`.
fn display_name(cluster: &str, node: &Node) -> String {
    let cluster = if node.cluster.is_empty() {
        cluster
    } else {
        &node.cluster
    };
    if cluster.is_empty() || cluster == "default" {
        node.name.clone()
    } else {
        format!("{cluster}/{}", node.name)
    }
}
