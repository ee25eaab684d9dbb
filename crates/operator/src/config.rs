//! The operator's configuration with Cilium's key names: defaults, then
//! the config dir (`--config-dir`, the `cilium-config` ConfigMap as the
//! Deployment mounts it; keys the operator does not have are the agent's
//! and are skipped), then flags. A bad value is refused naming the key,
//! the value and where it came from.

use crate::clusterpool::{Cidr, Family};
use crate::leader::Timing;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Every key, its default (Cilium 1.16's flag defaults) and its help;
/// each is also a flag of its name.
const KEYS: &[(&str, &str, &str)] = &[
    (
        "ipam",
        "cluster-pool",
        "IPAM mode (only cluster-pool is run by this operator)",
    ),
    (
        "cluster-pool-ipv4-cidr",
        "",
        "IPv4 CIDR ranges to allocate pod CIDRs from (space or comma separated)",
    ),
    (
        "cluster-pool-ipv4-mask-size",
        "24",
        "Mask size of each node's IPv4 pod CIDR",
    ),
    // Cilium's binary turns IPv6 on by default and Helm off; ours is off,
    // as the agent's
    ("enable-ipv4", "true", "Hand out IPv4 pod CIDRs"),
    ("enable-ipv6", "false", "Hand out IPv6 pod CIDRs"),
    (
        "cluster-pool-ipv6-cidr",
        "",
        "IPv6 CIDR ranges to allocate pod CIDRs from (space or comma separated)",
    ),
    (
        "cluster-pool-ipv6-mask-size",
        "112",
        "Mask size of each node's IPv6 pod CIDR",
    ),
    (
        "operator-api-serve-addr",
        "localhost:9234",
        "Address to serve the health API on",
    ),
    ("enable-metrics", "false", "Enable Prometheus metrics"),
    (
        "operator-prometheus-serve-addr",
        ":9963",
        "Address to serve Prometheus metrics on",
    ),
    (
        "leader-election-lease-duration",
        "15s",
        "Duration that non-leader replicas wait before taking the lease over",
    ),
    (
        "leader-election-renew-deadline",
        "10s",
        "Duration the leader retries renewing the lease before giving up",
    ),
    (
        "leader-election-retry-period",
        "2s",
        "Duration between attempts to acquire or renew the lease",
    ),
    (
        "k8s-kubeconfig-path",
        "",
        "Absolute path of the kubernetes kubeconfig file",
    ),
    ("k8s-api-server", "", "Kubernetes API server URL"),
    (
        "k8s-client-qps",
        "0",
        "Queries per second limit for the Kubernetes client",
    ),
    (
        "k8s-client-burst",
        "0",
        "Burst value allowed for the Kubernetes client",
    ),
    (
        "k8s-namespace",
        "",
        "Namespace of the operator's Lease (env CILIUM_K8S_NAMESPACE)",
    ),
    (
        "remove-cilium-node-taints",
        "true",
        "Remove the agent-not-ready taint from nodes whose agent is ready",
    ),
    (
        "set-cilium-node-taints",
        "false",
        "Taint nodes whose agent pod exists but is not ready",
    ),
    (
        "set-cilium-is-up-condition",
        "true",
        "Set NetworkUnavailable=False on nodes whose agent is ready",
    ),
    (
        "agent-not-ready-taint-key",
        "node.cilium.io/agent-not-ready",
        "The taint key of nodes without a ready agent",
    ),
    (
        "cilium-pod-namespace",
        "",
        "Namespace of the agent pods (default: the operator's)",
    ),
    (
        "cilium-pod-labels",
        "k8s-app=cilium",
        "Labels of the agent pods",
    ),
    (
        "identity-allocation-mode",
        "crd",
        "Where identities are allocated (crd or kvstore)",
    ),
    (
        "identity-gc-interval",
        "15m0s",
        "GC interval for security identities (0 disables)",
    ),
    (
        "identity-heartbeat-timeout",
        "30m0s",
        "Timeout after which an unused identity is marked, and a marked one deleted",
    ),
    (
        "identity-gc-rate-interval",
        "1m0s",
        "Interval over which identity-gc-rate-limit deletions are allowed",
    ),
    (
        "identity-gc-rate-limit",
        "2500",
        "Identities deleted at most per identity-gc-rate-interval",
    ),
    (
        "cilium-endpoint-gc-interval",
        "5m0s",
        "GC interval for CiliumEndpoints whose pod is gone (0: delete every CiliumEndpoint once)",
    ),
    (
        "nodes-gc-interval",
        "5m0s",
        "GC interval for CiliumNodes whose Node is gone (0 disables)",
    ),
    (
        "kvstore",
        "",
        "Key-value store type (etcd), for identity-allocation-mode=kvstore",
    ),
    (
        "kvstore-opt",
        "",
        "Key-value store options (etcd.address=... or etcd.config=...)",
    ),
];

/// The command line: `--config-dir`, `--debug`, and a flag per key.
#[derive(Debug, Default)]
pub struct Flags {
    pub config_dir: Option<PathBuf>,
    pub debug: bool,
    /// The keys given on the command line (or by their environment).
    pub given: BTreeMap<&'static str, String>,
}

impl Flags {
    fn command() -> clap::Command {
        use clap::{Arg, ArgAction};
        let mut cmd = clap::Command::new("cilium-operator")
            .about("Run the cilium-operator")
            .arg(
                Arg::new("config-dir")
                    .long("config-dir")
                    .value_name("DIR")
                    .help("Directory that contains a file for each option"),
            )
            .arg(
                Arg::new("debug")
                    .long("debug")
                    .action(ArgAction::SetTrue)
                    .help("Enable debugging mode"),
            );
        for (key, default, help) in KEYS {
            let mut arg = Arg::new(*key).long(*key).value_name("VALUE").help(*help);
            if !default.is_empty() {
                arg = arg.help(format!("{help} (default {default:?})"));
            }
            if *key == "k8s-namespace" {
                arg = arg.env("CILIUM_K8S_NAMESPACE");
            }
            cmd = cmd.arg(arg);
        }
        cmd
    }

    /// Parses the process's arguments; exits with clap's message on bad ones.
    pub fn parse() -> Self {
        Self::from_matches(&Self::command().get_matches())
    }

    pub fn try_parse_from<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        Ok(Self::from_matches(
            &Self::command().try_get_matches_from(args)?,
        ))
    }

    fn from_matches(m: &clap::ArgMatches) -> Self {
        Self {
            config_dir: m.get_one::<String>("config-dir").map(PathBuf::from),
            debug: m.get_flag("debug"),
            given: KEYS
                .iter()
                .filter_map(|(key, _, _)| Some((*key, m.get_one::<String>(key)?.clone())))
                .collect(),
        }
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

/// Where identities live, and so how they are collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdentityMode {
    /// CiliumIdentities, marked then deleted when no CiliumEndpoint uses them.
    Crd,
    /// The kvstore's master keys, deleted when no node references them.
    Kvstore,
}

/// Identity garbage collection (Cilium's `identitygc` cell).
#[derive(Clone, Debug)]
pub struct IdentityGc {
    pub mode: IdentityMode,
    /// `identity-gc-interval`; None when 0 (collection off).
    pub interval: Option<Duration>,
    pub heartbeat_timeout: Duration,
    pub rate_interval: Duration,
    pub rate_limit: usize,
}

/// One family's cluster pool as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolConfig {
    pub family: Family,
    pub cidrs: Vec<Cidr>,
    pub mask_size: u8,
}

#[derive(Clone, Debug)]
pub struct Config {
    pub debug: bool,
    pub ipam: String,
    /// The cluster pool of each family on, for `ipam=cluster-pool`.
    pub cluster_pools: Vec<PoolConfig>,
    pub api_addr: SocketAddr,
    /// Where metrics are served, when they are on.
    pub metrics_addr: Option<SocketAddr>,
    pub timing: Timing,
    pub k8s: k8s::ClientOptions,
    /// Where the Lease is (`default` when unset, as Cilium falls back).
    pub namespace: String,
    pub taints: crate::taints::TaintConfig,
    pub identity_gc: IdentityGc,
    /// `cilium-endpoint-gc-interval`; zero means one pass that deletes
    /// every CiliumEndpoint, as Cilium's.
    pub endpoint_gc_interval: Duration,
    /// `nodes-gc-interval`; None when 0.
    pub nodes_gc_interval: Option<Duration>,
    /// The kvstore, for `identity-allocation-mode=kvstore`.
    pub kvstore: Option<agent::option::kvstore::KvstoreConfig>,
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

/// The operator's kvstore client keeps no leased keys; the TTL only
/// bounds its session.
const KVSTORE_LEASE_TTL: Duration = Duration::from_secs(15 * 60);

impl Config {
    pub fn load(flags: &Flags) -> Result<Self, ConfigError> {
        let mut raw: BTreeMap<&'static str, (String, &'static str)> = KEYS
            .iter()
            .map(|(k, v, _)| (*k, (v.to_string(), "default")))
            .collect();
        if let Some(dir) = &flags.config_dir {
            for (k, v) in read_dir(dir)? {
                if let Some((key, _, _)) = KEYS.iter().find(|(key, _, _)| *key == k) {
                    raw.insert(key, (v, "config dir"));
                }
            }
        }
        for (key, value) in &flags.given {
            raw.insert(key, (value.clone(), "command line"));
        }
        let get = |key: &'static str| raw[key].0.as_str();
        let invalid = |key: &'static str, why: &str| ConfigError::Invalid {
            key,
            value: raw[key].0.clone(),
            from: raw[key].1,
            why: why.to_owned(),
        };
        let any_duration = |key| {
            agent::option::validate::parse_duration(get(key))
                .ok_or_else(|| invalid(key, "not a duration (like 15s or 5m0s)"))
        };
        let duration = |key| {
            any_duration(key)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| invalid(key, "not a positive duration (like 15s)"))
        };
        let addr = |key| listen_addr(get(key)).ok_or_else(|| invalid(key, "not [host]:port"));

        let ipam = get("ipam").to_owned();
        let boolean = |key| {
            agent::option::validate::parse_bool(get(key))
                .ok_or_else(|| invalid(key, "not a boolean"))
        };
        let mut cluster_pools = Vec::new();
        for (family, on) in [(Family::V4, "enable-ipv4"), (Family::V6, "enable-ipv6")] {
            let (cidr_key, mask_key) = (family.cidr_key(), family.mask_key());
            let cidrs = get(cidr_key)
                .split([' ', ','])
                .filter(|s| !s.is_empty())
                .map(|s| {
                    Cidr::parse(s)
                        .filter(|c| c.family() == family)
                        .ok_or_else(|| {
                            invalid(cidr_key, &format!("{s:?} is not an {} CIDR", family.name()))
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let bits = if family == Family::V4 { 32 } else { 128 };
            let mask_size = get(mask_key)
                .parse::<u8>()
                .ok()
                .filter(|m| *m <= bits)
                .ok_or_else(|| invalid(mask_key, &format!("not a prefix length (0-{bits})")))?;
            if boolean(on)? {
                cluster_pools.push(PoolConfig {
                    family,
                    cidrs,
                    mask_size,
                });
            } else if !cidrs.is_empty() && ipam == "cluster-pool" {
                // as Cilium's allocator refuses it
                return Err(invalid(cidr_key, &format!("set, but {on} is false")));
            }
        }
        if cluster_pools.is_empty() {
            return Err(invalid(
                "enable-ipv4",
                "IPv4 or IPv6 must be enabled (enable-ipv4, enable-ipv6)",
            ));
        }
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

        let mode = match get("identity-allocation-mode") {
            "crd" => IdentityMode::Crd,
            "kvstore" => IdentityMode::Kvstore,
            _ => {
                return Err(invalid(
                    "identity-allocation-mode",
                    "not crd or kvstore (the modes this operator collects)",
                ))
            }
        };
        let identity_gc = IdentityGc {
            mode,
            interval: Some(any_duration("identity-gc-interval")?).filter(|d| !d.is_zero()),
            heartbeat_timeout: duration("identity-heartbeat-timeout")?,
            rate_interval: duration("identity-gc-rate-interval")?,
            rate_limit: get("identity-gc-rate-limit")
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| invalid("identity-gc-rate-limit", "not a positive whole number"))?,
        };
        let endpoint_gc_interval = any_duration("cilium-endpoint-gc-interval")?;
        if endpoint_gc_interval.is_zero() && mode == IdentityMode::Crd {
            // identities are kept alive through CiliumEndpoints
            return Err(invalid(
                "cilium-endpoint-gc-interval",
                "must not be 0 with identity-allocation-mode=crd",
            ));
        }
        let kvstore =
            agent::option::kvstore::parse(get("kvstore"), get("kvstore-opt"), KVSTORE_LEASE_TTL)
                .map_err(|e| invalid("kvstore", &e.to_string()))?;
        if mode == IdentityMode::Kvstore && kvstore.is_none() {
            return Err(invalid(
                "kvstore",
                "identity-allocation-mode=kvstore needs kvstore and kvstore-opt",
            ));
        }
        Ok(Config {
            debug: flags.debug,
            ipam,
            cluster_pools,
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
            identity_gc,
            endpoint_gc_interval,
            nodes_gc_interval: Some(any_duration("nodes-gc-interval")?).filter(|d| !d.is_zero()),
            kvstore,
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

    fn flags(args: &[&str]) -> Flags {
        Flags::try_parse_from(std::iter::once("cilium-operator").chain(args.iter().copied()))
            .unwrap()
    }

    #[test]
    fn flags_override_the_config_dir_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cluster-pool-ipv4-cidr"), "10.0.0.0/8").unwrap();
        std::fs::write(dir.path().join("cluster-pool-ipv4-mask-size"), "26\n").unwrap();
        std::fs::write(dir.path().join("enable-metrics"), "true").unwrap();
        std::fs::write(dir.path().join("identity-gc-interval"), "0s").unwrap();
        // an agent key of the shared ConfigMap
        std::fs::write(dir.path().join("routing-mode"), "tunnel").unwrap();
        let config_dir = format!("--config-dir={}", dir.path().display());
        let c = Config::load(&flags(&[&config_dir, "--cluster-pool-ipv4-mask-size=24"])).unwrap();
        assert_eq!(
            c.cluster_pools,
            [PoolConfig {
                family: Family::V4,
                cidrs: vec![Cidr::parse("10.0.0.0/8").unwrap()],
                mask_size: 24
            }]
        );
        assert_eq!(c.metrics_addr, Some("0.0.0.0:9963".parse().unwrap()));
        assert_eq!(c.api_addr, "127.0.0.1:9234".parse().unwrap());
        assert_eq!(c.timing.lease_duration, Duration::from_secs(15));
        assert_eq!(c.identity_gc.mode, IdentityMode::Crd);
        assert_eq!(c.identity_gc.interval, None, "0 turns identity GC off");
        assert_eq!(
            c.identity_gc.heartbeat_timeout,
            Duration::from_secs(30 * 60)
        );
        assert_eq!(c.endpoint_gc_interval, Duration::from_secs(5 * 60));
        assert_eq!(c.nodes_gc_interval, Some(Duration::from_secs(5 * 60)));
        assert!(c.kvstore.is_none());
    }

    #[test]
    fn dual_stack_adds_an_ipv6_pool_and_refuses_one_without_it() {
        let c = Config::load(&flags(&[
            "--cluster-pool-ipv4-cidr=10.0.0.0/8",
            "--enable-ipv6=true",
            "--cluster-pool-ipv6-cidr=fd00::/104",
            "--cluster-pool-ipv6-mask-size=120",
        ]))
        .unwrap();
        assert_eq!(c.cluster_pools.len(), 2);
        assert_eq!(
            c.cluster_pools[1],
            PoolConfig {
                family: Family::V6,
                cidrs: vec![Cidr::parse("fd00::/104").unwrap()],
                mask_size: 120
            }
        );
        let e = Config::load(&flags(&["--cluster-pool-ipv6-cidr=fd00::/104"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cluster-pool-ipv6-cidr") && e.contains("enable-ipv6 is false"),
            "{e}"
        );
        let e = Config::load(&flags(&[
            "--enable-ipv6",
            "true",
            "--cluster-pool-ipv6-cidr=10.0.0.0/8",
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("is not an IPv6 CIDR"), "{e}");
        let e = Config::load(&flags(&["--enable-ipv4=false"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("IPv4 or IPv6 must be enabled"), "{e}");
    }

    #[test]
    fn a_bad_value_names_its_key_value_and_source() {
        let e = Config::load(&flags(&[
            "--cluster-pool-ipv4-cidr=10.0.0.0/8,10.300.0.0/16",
        ]))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("cluster-pool-ipv4-cidr")
                && e.contains("10.300.0.0/16")
                && e.contains("command line"),
            "{e}"
        );
        let e = Config::load(&flags(&["--leader-election-renew-deadline=20s"]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("shorter than leader-election-lease-duration"),
            "{e}"
        );
        let e = Config::load(&flags(&["--cilium-endpoint-gc-interval=0"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("identity-allocation-mode=crd"), "{e}");
        let e = Config::load(&flags(&["--identity-allocation-mode=kvstore"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs kvstore"), "{e}");
        assert!(Flags::try_parse_from(["cilium-operator", "--no-such-key=1"]).is_err());
    }

    #[test]
    fn kvstore_identities_take_the_kvstore_options() {
        let c = Config::load(&flags(&[
            "--identity-allocation-mode=kvstore",
            "--kvstore=etcd",
            "--kvstore-opt=etcd.address=http://198.18.0.1:2379",
            "--cilium-endpoint-gc-interval=0",
        ]))
        .unwrap();
        assert_eq!(c.identity_gc.mode, IdentityMode::Kvstore);
        assert_eq!(
            c.kvstore.unwrap().endpoints,
            ["http://198.18.0.1:2379".to_owned()]
        );
        assert!(c.endpoint_gc_interval.is_zero());
    }
}
