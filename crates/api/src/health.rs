//! The cilium-health API (base path `/v1beta` on `health.sock`): what the
//! prober found on the way to every node and its health endpoint, in
//! Cilium's models, and how Cilium's clients judge it.

use serde::{Deserialize, Deserializer, Serialize};

/// cilium-health's socket (env `CILIUM_HEALTH_SOCK`).
pub const DEFAULT_SOCKET: &str = "/var/run/cilium/health.sock";
/// The agent's controller that keeps the health endpoint; `cilium status`
/// reads its presence as endpoint health checking being on.
pub const ENDPOINT_CONTROLLER: &str = "cilium-health-ep";

/// cilium-health's socket beside the agent's: `health.sock` in the
/// directory of `agent_socket`.
pub fn socket_beside(agent_socket: &std::path::Path) -> std::path::PathBuf {
    agent_socket
        .parent()
        .unwrap_or(std::path::Path::new("/"))
        .join("health.sock")
}

/// Base path of the health API.
pub const BASE_PATH: &str = "/v1beta";
/// What a probe with no ICMP answer within its deadline reports.
pub const ICMP_TIMEOUT: &str = "Connection timed out";

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// One probe's outcome: latency in nanoseconds, and an empty status when
/// it succeeded (else the error).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ConnectivityStatus {
    #[serde(default, skip_serializing_if = "is_zero")]
    pub latency: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
}

impl ConnectivityStatus {
    pub fn ok(latency: std::time::Duration) -> Self {
        Self {
            latency: i64::try_from(latency.as_nanos()).unwrap_or(i64::MAX),
            status: String::new(),
        }
    }

    pub fn failed(why: impl Into<String>) -> Self {
        Self {
            latency: 0,
            status: why.into(),
        }
    }
}

/// ICMP and HTTP to one address.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct PathStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ip: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icmp: Option<ConnectivityStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<ConnectivityStatus>,
}

/// The paths to a node's stack (`HostStatus`) or to its health endpoint
/// (`EndpointStatus`, the same shape).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub struct HostStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_address: Option<PathStatus>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub secondary_addresses: Vec<PathStatus>,
}

pub type EndpointStatus = HostStatus;

impl HostStatus {
    /// The primary path first (a missing one counts as unreachable), then
    /// the secondaries.
    fn paths(&self) -> impl Iterator<Item = Option<&PathStatus>> {
        std::iter::once(self.primary_address.as_ref())
            .chain(self.secondary_addresses.iter().map(Some))
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub struct NodeStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_endpoint: Option<EndpointStatus>,
    /// Deprecated in Cilium: the health endpoint's primary path again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<PathStatus>,
}

impl NodeStatus {
    /// Whether every path to the node and its endpoint is reachable or not
    /// yet known (what `N/M reachable` counts).
    pub fn healthy(&self) -> bool {
        let ok = |s: Option<&HostStatus>| {
            s.is_none_or(|s| s.paths().all(|p| path_reach(p) != Reach::Unreachable))
        };
        ok(self.host.as_ref()) && ok(self.health_endpoint.as_ref())
    }

    /// The node path's summary (the `Node` column).
    pub fn host_reach(&self) -> Reach {
        summary(self.host.as_ref())
    }

    /// The endpoint path's summary (the `Endpoints` column).
    pub fn endpoint_reach(&self) -> Reach {
        summary(self.health_endpoint.as_ref())
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct SelfStatus {
    pub name: String,
}

/// `GET /status` and `PUT /status/probe`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct HealthStatusResponse {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub timestamp: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<SelfStatus>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub nodes: Vec<NodeStatus>,
}

impl HealthStatusResponse {
    /// How many nodes are healthy, of how many.
    pub fn reachable(&self) -> (usize, usize) {
        let healthy = self.nodes.iter().filter(|n| n.healthy()).count();
        (healthy, self.nodes.len())
    }

    pub fn local_name(&self) -> &str {
        self.local.as_ref().map_or("", |l| l.name.as_str())
    }
}

/// `system-load`: the load averages as text.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct LoadResponse {
    #[serde(default)]
    pub last1min: String,
    #[serde(default)]
    pub last5min: String,
    #[serde(default)]
    pub last15min: String,
}

/// `GET /healthz`: the agent's status, and cilium-health's own.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "kebab-case")]
pub struct HealthResponse {
    #[serde(default)]
    pub cilium: crate::status::StatusResponse,
    #[serde(default)]
    pub uptime: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_load: Option<LoadResponse>,
}

fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// How Cilium's clients read a probe, a path or a set of paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    Reachable,
    Unreachable,
    Unknown,
}

impl std::fmt::Display for Reach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reach::Reachable => "reachable",
            Reach::Unreachable => "unreachable",
            Reach::Unknown => "unknown",
        })
    }
}

/// No probe yet is unknown; an empty status reachable; an error not.
pub fn probe_reach(c: Option<&ConnectivityStatus>) -> Reach {
    match c {
        None => Reach::Unknown,
        Some(c) if c.status.is_empty() => Reach::Reachable,
        Some(_) => Reach::Unreachable,
    }
}

fn worst(reaches: impl Iterator<Item = Reach>) -> Reach {
    let mut unknown = false;
    for r in reaches {
        match r {
            Reach::Unreachable => return Reach::Unreachable,
            Reach::Unknown => unknown = true,
            Reach::Reachable => {}
        }
    }
    if unknown {
        Reach::Unknown
    } else {
        Reach::Reachable
    }
}

/// A path is as good as the worse of its ICMP and HTTP; a missing path
/// is unreachable.
pub fn path_reach(p: Option<&PathStatus>) -> Reach {
    match p {
        None => Reach::Unreachable,
        Some(p) => worst([probe_reach(p.icmp.as_ref()), probe_reach(p.http.as_ref())].into_iter()),
    }
}

/// The worst path of a node's host or endpoint status; none is reachable.
pub fn summary(s: Option<&HostStatus>) -> Reach {
    match s {
        None => Reach::Reachable,
        Some(s) => worst(s.paths().map(path_reach)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(icmp: Option<&str>, http: Option<&str>) -> PathStatus {
        let probe = |s: Option<&str>| {
            s.map(|s| ConnectivityStatus {
                latency: if s.is_empty() { 1000 } else { 0 },
                status: s.into(),
            })
        };
        PathStatus {
            ip: "10.0.0.1".into(),
            icmp: probe(icmp),
            http: probe(http),
        }
    }

    fn node(host: PathStatus, endpoint: Option<PathStatus>) -> NodeStatus {
        NodeStatus {
            name: "n".into(),
            host: Some(HostStatus {
                primary_address: Some(host),
                secondary_addresses: Vec::new(),
            }),
            health_endpoint: endpoint.map(|p| HostStatus {
                primary_address: Some(p),
                secondary_addresses: Vec::new(),
            }),
            endpoint: None,
        }
    }

    #[test]
    fn nodes_are_judged_as_ciliums_clients_judge_them() {
        let ok = node(path(Some(""), Some("")), Some(path(Some(""), Some(""))));
        assert!(ok.healthy());
        assert_eq!(ok.host_reach(), Reach::Reachable);

        let unprobed = node(path(None, Some("")), None);
        assert!(unprobed.healthy(), "unknown counts as healthy");
        assert_eq!(unprobed.host_reach(), Reach::Unknown);
        assert_eq!(unprobed.endpoint_reach(), Reach::Reachable);

        let endpoint_down = node(
            path(Some(""), Some("")),
            Some(path(Some(ICMP_TIMEOUT), Some("refused"))),
        );
        assert!(!endpoint_down.healthy());
        assert_eq!(endpoint_down.host_reach(), Reach::Reachable);
        assert_eq!(endpoint_down.endpoint_reach(), Reach::Unreachable);

        let r = HealthStatusResponse {
            nodes: vec![ok, unprobed, endpoint_down],
            ..Default::default()
        };
        assert_eq!(r.reachable(), (2, 3));
    }

    #[test]
    fn ciliums_json_reads_with_null_lists() {
        let raw = r#"{"local":{"name":"a"},"nodes":[{"name":"a","host":{"primary-address":{"ip":"198.18.0.11","icmp":{"latency":95312},"http":{"status":"Get \"http://198.18.0.11:4240/hello\": refused"}},"secondary-addresses":null}}],"timestamp":"2024-07-29T10:00:00Z"}"#;
        let r: HealthStatusResponse = serde_json::from_str(raw).unwrap();
        assert_eq!(r.local_name(), "a");
        assert_eq!(r.nodes[0].host_reach(), Reach::Unreachable);
        let empty: HealthStatusResponse = serde_json::from_str(r#"{"nodes":null}"#).unwrap();
        assert!(empty.nodes.is_empty());
        let out = serde_json::to_value(&r).unwrap();
        assert_eq!(
            out["nodes"][0]["host"]["secondary-addresses"],
            serde_json::json!([])
        );
    }
}
