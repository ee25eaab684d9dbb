//! The operator's configuration with Cilium's key names: defaults, then
//! the config dir (`--config-dir`, the `cilium-config` ConfigMap as the
//! Deployment mounts it; keys the operator does not have are the agent's
//! and are skipped), then flags. A bad value is refused naming the key,
//! the value and where it came from.

use crate::clusterpool::Cidr;
use crate::leader::Timing;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Every key and its default (Cilium 1.16's flag defaults).
const KEYS: &[(&str, &str)] = &[
    ("ipam", "cluster-pool"),
    ("cluster-pool-ipv4-cidr", ""),
    ("cluster-pool-ipv4-mask-size", "24"),
    ("operator-api-serve-addr", "localhost:9234"),
    ("enable-metrics", "false"),
    ("operator-prometheus-serve-addr", ":9963"),
    ("leader-election-lease-duration", "15s"),
    ("leader-election-renew-deadline", "10s"),
    ("leader-election-retry-period", "2s"),
    ("k8s-kubeconfig-path", ""),
    ("k8s-api-server", ""),
    ("k8s-client-qps", "0"),
    ("k8s-client-burst", "0"),
    ("k8s-namespace", ""),
    ("remove-cilium-node-taints", "true"),
    ("set-cilium-node-taints", "false"),
    ("set-cilium-is-up-condition", "true"),
    (
        "agent-not-ready-taint-key",
        "node.cilium.io/agent-not-ready",
    ),
    ("cilium-pod-namespace", ""),
    ("cilium-pod-labels", "k8s-app=cilium"),
];

/// The command line; each key also has a flag of its name.
#[derive(clap::Parser, Debug, Default)]
#[command(name = "cilium-operator", about = "Run the cilium-operator")]
pub struct Flags {
    /// Directory that contains a file for each option
    #[arg(long)]
    pub config_dir: Option<PathBuf>,
    /// Enable debugging mode
    #[arg(long)]
    pub debug: bool,
    /// IPAM mode (only cluster-pool is run by this operator)
    #[arg(long)]
    pub ipam: Option<String>,
    /// IPv4 CIDR ranges to allocate pod CIDRs from (space or comma separated)
    #[arg(long)]
    pub cluster_pool_ipv4_cidr: Option<String>,
    /// Mask size of each node's IPv4 pod CIDR
    #[arg(long)]
    pub cluster_pool_ipv4_mask_size: Option<String>,
    /// Address to serve the health API on
    #[arg(long)]
    pub operator_api_serve_addr: Option<String>,
    /// Enable Prometheus metrics
    #[arg(long)]
    pub enable_metrics: Option<String>,
    /// Address to serve Prometheus metrics on
    #[arg(long)]
    pub operator_prometheus_serve_addr: Option<String>,
    /// Duration that non-leader replicas wait before taking the lease over
    #[arg(long)]
    pub leader_election_lease_duration: Option<String>,
    /// Duration the leader retries renewing the lease before giving up
    #[arg(long)]
    pub leader_election_renew_deadline: Option<String>,
    /// Duration between attempts to acquire or renew the lease
    #[arg(long)]
    pub leader_election_retry_period: Option<String>,
    /// Absolute path of the kubernetes kubeconfig file
    #[arg(long)]
    pub k8s_kubeconfig_path: Option<String>,
    /// Kubernetes API server URL
    #[arg(long)]
    pub k8s_api_server: Option<String>,
    /// Queries per second limit for the Kubernetes client
    #[arg(long)]
    pub k8s_client_qps: Option<String>,
    /// Burst value allowed for the Kubernetes client
    #[arg(long)]
    pub k8s_client_burst: Option<String>,
    /// Namespace of the operator's Lease (env CILIUM_K8S_NAMESPACE)
    #[arg(long, env = "CILIUM_K8S_NAMESPACE")]
    pub k8s_namespace: Option<String>,
    /// Remove the agent-not-ready taint from nodes whose agent is ready
    #[arg(long)]
    pub remove_cilium_node_taints: Option<String>,
    /// Taint nodes whose agent pod exists but is not ready
    #[arg(long)]
    pub set_cilium_node_taints: Option<String>,
    /// Set NetworkUnavailable=False on nodes whose agent is ready
    #[arg(long)]
    pub set_cilium_is_up_condition: Option<String>,
    /// The taint key of nodes without a ready agent
    #[arg(long)]
    pub agent_not_ready_taint_key: Option<String>,
    /// Namespace of the agent pods (default: the operator's)
    #[arg(long)]
    pub cilium_pod_namespace: Option<String>,
    /// Labels of the agent pods
    #[arg(long)]
    pub cilium_pod_labels: Option<String>,
}

impl Flags {
    fn given(&self) -> [(&'static str, &Option<String>); 20] {
        [
            ("ipam", &self.ipam),
            ("cluster-pool-ipv4-cidr", &self.cluster_pool_ipv4_cidr),
            (
                "cluster-pool-ipv4-mask-size",
                &self.cluster_pool_ipv4_mask_size,
            ),
            ("operator-api-serve-addr", &self.operator_api_serve_addr),
            ("enable-metrics", &self.enable_metrics),
            (
                "operator-prometheus-serve-addr",
                &self.operator_prometheus_serve_addr,
            ),
            (
                "leader-election-lease-duration",
                &self.leader_election_lease_duration,
            ),
            (
                "leader-election-renew-deadline",
                &self.leader_election_renew_deadline,
            ),
            (
                "leader-election-retry-period",
                &self.leader_election_retry_period,
            ),
            ("k8s-kubeconfig-path", &self.k8s_kubeconfig_path),
            ("k8s-api-server", &self.k8s_api_server),
            ("k8s-client-qps", &self.k8s_client_qps),
            ("k8s-client-burst", &self.k8s_client_burst),
            ("k8s-namespace", &self.k8s_namespace),
            ("remove-cilium-node-taints", &self.remove_cilium_node_taints),
            ("set-cilium-node-taints", &self.set_cilium_node_taints),
            (
                "set-cilium-is-up-condition",
                &self.set_cilium_is_up_condition,
            ),
            ("agent-not-ready-taint-key", &self.agent_not_ready_taint_key),
            ("cilium-pod-namespace", &self.cilium_pod_namespace),
            ("cilium-pod-labels", &self.cilium_pod_labels),
        ]
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config dir {}: {source}", dir.display())]
    Dir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("{key}={value:?} (from {from}): {why}")]
    Invalid {
        key: &'static str,
        value: String,
        from: &'static str,
        why: String,
    },
}

#[derive(Clone, Debug)]
pub struct Config {
    pub debug: bool,
    pub ipam: String,
    /// The cluster pool, for `ipam=cluster-pool`.
    pub cluster_pool: Vec<Cidr>,
    pub mask_size: u8,
    pub api_addr: SocketAddr,
    /// Where metrics are served, when they are on.
    pub metrics_addr: Option<SocketAddr>,
    pub timing: Timing,
    pub k8s: k8s::ClientOptions,
    /// Where the Lease is (`default` when unset, as Cilium falls back).
    pub namespace: String,
    pub taints: crate::taints::TaintConfig,
}

/// Reads the files of a ConfigMap directory: one per key, dotfiles (the
/// projection's `..data`) skipped.
fn read_dir(dir: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let err = |source| ConfigError::Dir {
        dir: dir.to_owned(),
        source,
    };
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(err)? {
        let entry = entry.map_err(err)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_file() {
            continue;
        }
        let value = std::fs::read_to_string(entry.path()).map_err(err)?;
        out.insert(name, value.trim().to_owned());
    }
    Ok(out)
}

impl Config {
    pub fn load(flags: &Flags) -> Result<Self, ConfigError> {
        let mut raw: BTreeMap<&'static str, (String, &'static str)> = KEYS
            .iter()
            .map(|(k, v)| (*k, (v.to_string(), "default")))
            .collect();
        if let Some(dir) = &flags.config_dir {
            for (k, v) in read_dir(dir)? {
                if let Some((key, _)) = KEYS.iter().find(|(key, _)| *key == k) {
                    raw.insert(key, (v, "config dir"));
                }
            }
        }
        for (key, value) in flags.given() {
            if let Some(v) = value {
                raw.insert(key, (v.clone(), "command line"));
            }
        }
        let get = |key: &'static str| raw[key].0.as_str();
        let invalid = |key: &'static str, why: &str| ConfigError::Invalid {
            key,
            value: raw[key].0.clone(),
            from: raw[key].1,
            why: why.to_owned(),
        };
        let duration = |key| {
            agent::option::validate::parse_duration(get(key))
                .filter(|d| !d.is_zero())
                .ok_or_else(|| invalid(key, "not a positive duration (like 15s)"))
        };
        let addr = |key| listen_addr(get(key)).ok_or_else(|| invalid(key, "not [host]:port"));

        let ipam = get("ipam").to_owned();
        let cluster_pool = get("cluster-pool-ipv4-cidr")
            .split([' ', ','])
            .filter(|s| !s.is_empty())
            .map(|s| {
                Cidr::parse(s).ok_or_else(|| {
                    invalid(
                        "cluster-pool-ipv4-cidr",
                        &format!("{s:?} is not an IPv4 CIDR"),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mask_size = get("cluster-pool-ipv4-mask-size")
            .parse::<u8>()
            .ok()
            .filter(|m| *m <= 32)
            .ok_or_else(|| invalid("cluster-pool-ipv4-mask-size", "not a prefix length (0-32)"))?;
        let metrics_on = agent::option::validate::parse_bool(get("enable-metrics"))
            .ok_or_else(|| invalid("enable-metrics", "not a boolean"))?;

        let timing = Timing {
            lease_duration: duration("leader-election-lease-duration")?,
            renew_deadline: duration("leader-election-renew-deadline")?,
            retry_period: duration("leader-election-retry-period")?,
        };
        if timing.renew_deadline >= timing.lease_duration {
            return Err(invalid(
                "leader-election-renew-deadline",
                "must be shorter than leader-election-lease-duration",
            ));
        }
        let some = |key| Some(get(key).to_owned()).filter(|s| !s.is_empty());
        let boolean = |key| {
            agent::option::validate::parse_bool(get(key))
                .ok_or_else(|| invalid(key, "not a boolean"))
        };
        let namespace = some("k8s-namespace").unwrap_or_else(|| "default".into());
        let taints = crate::taints::TaintConfig {
            remove: boolean("remove-cilium-node-taints")?,
            set: boolean("set-cilium-node-taints")?,
            condition: boolean("set-cilium-is-up-condition")?,
            key: some("agent-not-ready-taint-key")
                .ok_or_else(|| invalid("agent-not-ready-taint-key", "must not be empty"))?,
            namespace: some("cilium-pod-namespace").unwrap_or_else(|| namespace.clone()),
            labels: get("cilium-pod-labels").to_owned(),
        };
        let k8s = k8s::ClientOptions {
            kubeconfig: some("k8s-kubeconfig-path").map(PathBuf::from),
            api_server: some("k8s-api-server"),
            qps: get("k8s-client-qps")
                .parse()
                .map_err(|_| invalid("k8s-client-qps", "not a number"))?,
            burst: get("k8s-client-burst")
                .parse()
                .map_err(|_| invalid("k8s-client-burst", "not a whole number"))?,
        };
        Ok(Config {
            debug: flags.debug,
            ipam,
            cluster_pool,
            mask_size,
            api_addr: addr("operator-api-serve-addr")?,
            metrics_addr: if metrics_on {
                Some(addr("operator-prometheus-serve-addr")?)
            } else {
                None
            },
            timing,
            k8s,
            namespace,
            taints,
        })
    }
}

/// `[host]:port` as Cilium's operator takes it: no host is every address,
/// `localhost` the loopback.
fn listen_addr(s: &str) -> Option<SocketAddr> {
    let s = s.replace("localhost:", "127.0.0.1:");
    agent::option::validate::listen_addr(&s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn flags_override_the_config_dir_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cluster-pool-ipv4-cidr"), "10.0.0.0/8").unwrap();
        std::fs::write(dir.path().join("cluster-pool-ipv4-mask-size"), "26\n").unwrap();
        std::fs::write(dir.path().join("enable-metrics"), "true").unwrap();
        // an agent key of the shared ConfigMap
        std::fs::write(dir.path().join("routing-mode"), "tunnel").unwrap();
        let flags = Flags {
            config_dir: Some(dir.path().to_owned()),
            cluster_pool_ipv4_mask_size: Some("24".into()),
            ..Default::default()
        };
        let c = Config::load(&flags).unwrap();
        assert_eq!(c.cluster_pool, [Cidr::parse("10.0.0.0/8").unwrap()]);
        assert_eq!(c.mask_size, 24);
        assert_eq!(c.metrics_addr, Some("0.0.0.0:9963".parse().unwrap()));
        assert_eq!(c.api_addr, "127.0.0.1:9234".parse().unwrap());
        assert_eq!(c.timing.lease_duration, Duration::from_secs(15));
    }

    #[test]
    fn a_bad_value_names_its_key_value_and_source() {
        let flags = Flags {
            cluster_pool_ipv4_cidr: Some("10.0.0.0/8,10.300.0.0/16".into()),
            ..Default::default()
        };
        let e = Config::load(&flags).unwrap_err().to_string();
        assert!(
            e.contains("cluster-pool-ipv4-cidr")
                && e.contains("10.300.0.0/16")
                && e.contains("command line"),
            "{e}"
        );
        let flags = Flags {
            leader_election_renew_deadline: Some("20s".into()),
            ..Default::default()
        };
        let e = Config::load(&flags).unwrap_err().to_string();
        assert!(
            e.contains("shorter than leader-election-lease-duration"),
            "{e}"
        );
    }
}
