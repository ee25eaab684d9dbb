//! `hubble-relay serve`'s configuration as Cilium 1.16 reads it: each
//! key from its flag, else `RELAY_<KEY>` in the environment, else
//! `/etc/hubble-relay/config.yaml`, else its default; TLS towards the
//! nodes and towards clients each configured or explicitly disabled.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const CONFIG_FILE: &str = "/etc/hubble-relay/config.yaml";

#[derive(clap::Args, Debug, Default)]
pub struct Flags {
    /// Name of the current cluster
    #[arg(long = "cluster-name")]
    cluster_name: Option<String>,
    /// Address of the gRPC Hubble peer service (unix://, or host:port reached with the client TLS)
    #[arg(long = "peer-service")]
    peer_service: Option<String>,
    /// Address on which to listen
    #[arg(long = "listen-address")]
    listen_address: Option<String>,
    /// Address on which to listen for plaintext gRPC health checks
    #[arg(long = "health-listen-address")]
    health_listen_address: Option<String>,
    /// Address on which to serve metrics (not served by this build)
    #[arg(long = "metrics-listen-address")]
    metrics_listen_address: Option<String>,
    /// Dial timeout when connecting to hubble peers
    #[arg(long = "dial-timeout")]
    dial_timeout: Option<String>,
    /// Time to wait before attempting to reconnect to the peer service
    #[arg(long = "retry-timeout")]
    retry_timeout: Option<String>,
    /// Max number of flows that can be buffered for sorting before being sent to the client (per request)
    #[arg(long = "sort-buffer-len-max")]
    sort_buffer_len_max: Option<String>,
    /// When the per-request flows sort buffer is not full, it is drained every time this timeout is reached
    #[arg(long = "sort-buffer-drain-timeout")]
    sort_buffer_drain_timeout: Option<String>,
    /// Path to the public key file for the client certificate to connect to Hubble server instances
    #[arg(long = "tls-hubble-client-cert-file", alias = "tls-client-cert-file")]
    tls_hubble_client_cert_file: Option<String>,
    /// Path to the private key file for the client certificate to connect to Hubble server instances
    #[arg(long = "tls-hubble-client-key-file", alias = "tls-client-key-file")]
    tls_hubble_client_key_file: Option<String>,
    /// Paths to one or more public key files of the CA which sign certificates for Hubble server instances
    #[arg(long = "tls-hubble-server-ca-files", value_delimiter = ',')]
    tls_hubble_server_ca_files: Vec<String>,
    /// Disable (m)TLS and assume the connection to Hubble server instances is over plaintext
    #[arg(long = "disable-client-tls", num_args = 0..=1, default_missing_value = "true")]
    disable_client_tls: Option<String>,
    /// Path to the public key file for the Hubble Relay server
    #[arg(long = "tls-relay-server-cert-file", alias = "tls-server-cert-file")]
    tls_relay_server_cert_file: Option<String>,
    /// Path to the private key file for the Hubble Relay server
    #[arg(long = "tls-relay-server-key-file", alias = "tls-server-key-file")]
    tls_relay_server_key_file: Option<String>,
    /// Paths to one or more public key files of the CA which sign certificates for Hubble Relay client instances
    #[arg(long = "tls-relay-client-ca-files", value_delimiter = ',')]
    tls_relay_client_ca_files: Vec<String>,
    /// Disable TLS for the server; clients connect over plaintext
    #[arg(long = "disable-server-tls", num_args = 0..=1, default_missing_value = "true")]
    disable_server_tls: Option<String>,
    /// Read the configuration from this file instead of /etc/hubble-relay/config.yaml
    #[arg(long = "config")]
    config: Option<PathBuf>,
}

/// Certificate, key and the CAs the other end must be signed by.
#[derive(Clone, Debug, PartialEq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub cas: Vec<PathBuf>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub cluster_name: String,
    pub peer_service: String,
    pub listen_address: String,
    pub health_listen_address: String,
    pub dial_timeout: Duration,
    pub retry_timeout: Duration,
    pub sort_buffer_len_max: usize,
    pub sort_buffer_drain_timeout: Duration,
    /// Towards the nodes: None with `disable-client-tls`; the CAs are the
    /// nodes' servers'.
    pub client_tls: Option<TlsFiles>,
    /// Towards clients: None with `disable-server-tls`; the CAs are the
    /// clients' (mutual TLS when any).
    pub server_tls: Option<TlsFiles>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading {path}: {why}")]
    File { path: PathBuf, why: String },
    #[error("invalid value {value:?} for {key}: {why}")]
    Invalid {
        key: &'static str,
        value: String,
        why: &'static str,
    },
    #[error("no client TLS to the Hubble servers: set tls-hubble-client-cert-file and tls-hubble-client-key-file, or disable-client-tls")]
    NoClientTls,
    #[error("no server TLS: set tls-relay-server-cert-file and tls-relay-server-key-file, or disable-server-tls")]
    NoServerTls,
}

/// Where values come from, by key, in the order they win.
struct Sources<'a> {
    env: &'a dyn Fn(&str) -> Option<String>,
    file: BTreeMap<String, String>,
}

/// Deprecated names still read, as Cilium reads them.
const ALIASES: [(&str, &str); 4] = [
    ("tls-client-cert-file", "tls-hubble-client-cert-file"),
    ("tls-client-key-file", "tls-hubble-client-key-file"),
    ("tls-server-cert-file", "tls-relay-server-cert-file"),
    ("tls-server-key-file", "tls-relay-server-key-file"),
];

impl Sources<'_> {
    fn get(&self, key: &'static str, flag: Option<&str>) -> Option<String> {
        let env_name = |k: &str| format!("RELAY_{}", k.to_uppercase().replace('-', "_"));
        let aliases = ALIASES.iter().filter(|(_, k)| *k == key).map(|(a, _)| *a);
        let names: Vec<&str> = std::iter::once(key).chain(aliases).collect();
        flag.map(str::to_owned)
            .or_else(|| names.iter().find_map(|k| (self.env)(&env_name(k))))
            .or_else(|| names.iter().find_map(|k| self.file.get(*k).cloned()))
            .filter(|v| !v.is_empty())
    }

    fn list(&self, key: &'static str, flag: &[String]) -> Vec<PathBuf> {
        if !flag.is_empty() {
            return flag.iter().map(PathBuf::from).collect();
        }
        self.get(key, None)
            .map(|v| {
                v.split([',', ' '])
                    .filter(|s| !s.is_empty())
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn duration(
        &self,
        key: &'static str,
        flag: Option<&str>,
        default: Duration,
    ) -> Result<Duration, ConfigError> {
        match self.get(key, flag) {
            None => Ok(default),
            Some(v) => match api::duration::parse_go_duration(&v) {
                Some(d) if !d.is_zero() => Ok(d),
                _ => Err(ConfigError::Invalid {
                    key,
                    value: v,
                    why: "not a positive duration (e.g. 30s)",
                }),
            },
        }
    }

    fn flag(&self, key: &'static str, flag: Option<&str>) -> Result<bool, ConfigError> {
        match self.get(key, flag).as_deref() {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(v) => Err(ConfigError::Invalid {
                key,
                value: v.to_owned(),
                why: "not true or false",
            }),
        }
    }

    /// Cert and key of `cert_key`, with the CAs of `cas`; None with
    /// `disable`; `missing` when neither.
    fn tls(
        &self,
        (cert_key, cert_flag): (&'static str, Option<&str>),
        (key_key, key_flag): (&'static str, Option<&str>),
        (cas_key, cas_flag): (&'static str, &[String]),
        (disable_key, disable_flag): (&'static str, Option<&str>),
        missing: ConfigError,
    ) -> Result<Option<TlsFiles>, ConfigError> {
        if self.flag(disable_key, disable_flag)? {
            return Ok(None);
        }
        match (self.get(cert_key, cert_flag), self.get(key_key, key_flag)) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles {
                cert: cert.into(),
                key: key.into(),
                cas: self.list(cas_key, cas_flag),
            })),
            _ => Err(missing),
        }
    }
}

/// The YAML file's keys with their values as strings (lists joined by
/// commas); an absent file is no keys.
fn read_file(path: &Path, must_exist: bool) -> Result<BTreeMap<String, String>, ConfigError> {
    let err = |why: String| ConfigError::File {
        path: path.to_owned(),
        why,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !must_exist => {
            return Ok(BTreeMap::new())
        }
        Err(e) => return Err(err(e.to_string())),
    };
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| err(e.to_string()))?;
    let map = match doc {
        serde_yaml::Value::Null => return Ok(BTreeMap::new()),
        serde_yaml::Value::Mapping(m) => m,
        _ => return Err(err("not a map of keys to values".into())),
    };
    let scalar = |v: &serde_yaml::Value| match v {
        serde_yaml::Value::String(s) => Some(s.clone()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Null => Some(String::new()),
        _ => None,
    };
    let mut out = BTreeMap::new();
    for (k, v) in map {
        let key = scalar(&k).ok_or_else(|| err(format!("key {k:?} is not a string")))?;
        let value = match &v {
            serde_yaml::Value::Sequence(items) => items
                .iter()
                .map(|i| scalar(i).ok_or_else(|| err(format!("{key}: {i:?} is not a scalar"))))
                .collect::<Result<Vec<_>, _>>()?
                .join(","),
            other => scalar(other).ok_or_else(|| err(format!("{key}: not a scalar or list")))?,
        };
        out.insert(key, value);
    }
    Ok(out)
}

impl Config {
    /// The configuration of `flags`, the process's environment and the
    /// config file.
    pub fn load(flags: &Flags) -> Result<Self, ConfigError> {
        let env = |k: &str| std::env::var(k).ok();
        Self::from_sources(flags, &env)
    }

    pub fn from_sources(
        f: &Flags,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let file = match &f.config {
            Some(path) => read_file(path, true)?,
            None => read_file(Path::new(CONFIG_FILE), false)?,
        };
        let s = Sources { env, file };
        let text = |key, flag: &Option<String>, default: &str| {
            s.get(key, flag.as_deref())
                .unwrap_or_else(|| default.to_owned())
        };
        let len_key = "sort-buffer-len-max";
        let len = match s.get(len_key, f.sort_buffer_len_max.as_deref()) {
            None => 100,
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(ConfigError::Invalid {
                    key: len_key,
                    value: v,
                    why: "not a positive number",
                })?,
        };
        Ok(Self {
            cluster_name: text("cluster-name", &f.cluster_name, "default"),
            peer_service: text(
                "peer-service",
                &f.peer_service,
                "unix:///var/run/cilium/hubble.sock",
            ),
            listen_address: text("listen-address", &f.listen_address, ":4245"),
            health_listen_address: text("health-listen-address", &f.health_listen_address, ":4222"),
            dial_timeout: s.duration(
                "dial-timeout",
                f.dial_timeout.as_deref(),
                Duration::from_secs(30),
            )?,
            retry_timeout: s.duration(
                "retry-timeout",
                f.retry_timeout.as_deref(),
                Duration::from_secs(30),
            )?,
            sort_buffer_len_max: len,
            sort_buffer_drain_timeout: s.duration(
                "sort-buffer-drain-timeout",
                f.sort_buffer_drain_timeout.as_deref(),
                Duration::from_secs(1),
            )?,
            client_tls: s.tls(
                (
                    "tls-hubble-client-cert-file",
                    f.tls_hubble_client_cert_file.as_deref(),
                ),
                (
                    "tls-hubble-client-key-file",
                    f.tls_hubble_client_key_file.as_deref(),
                ),
                ("tls-hubble-server-ca-files", &f.tls_hubble_server_ca_files),
                ("disable-client-tls", f.disable_client_tls.as_deref()),
                ConfigError::NoClientTls,
            )?,
            server_tls: s.tls(
                (
                    "tls-relay-server-cert-file",
                    f.tls_relay_server_cert_file.as_deref(),
                ),
                (
                    "tls-relay-server-key-file",
                    f.tls_relay_server_key_file.as_deref(),
                ),
                ("tls-relay-client-ca-files", &f.tls_relay_client_ca_files),
                ("disable-server-tls", f.disable_server_tls.as_deref()),
                ConfigError::NoServerTls,
            )?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        flags: Flags,
    }

    fn load(
        args: &[&str],
        env: &[(&str, &str)],
        file: Option<&str>,
    ) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, file.unwrap_or("")).unwrap();
        let mut argv = vec!["hubble-relay".to_owned(), "--config".into()];
        argv.push(path.display().to_string());
        argv.extend(args.iter().map(|a| a.to_string()));
        let cli = Cli::try_parse_from(argv).unwrap();
        let env: BTreeMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_sources(&cli.flags, &|k| env.get(k).cloned())
    }

    #[test]
    fn defaults_are_ciliums_and_tls_must_be_chosen() {
        let c = load(&["--disable-client-tls", "--disable-server-tls"], &[], None).unwrap();
        assert_eq!(c.cluster_name, "default");
        assert_eq!(c.peer_service, "unix:///var/run/cilium/hubble.sock");
        assert_eq!(c.listen_address, ":4245");
        assert_eq!(c.health_listen_address, ":4222");
        assert_eq!(c.dial_timeout, Duration::from_secs(30));
        assert_eq!(c.retry_timeout, Duration::from_secs(30));
        assert_eq!(c.sort_buffer_len_max, 100);
        assert_eq!(c.sort_buffer_drain_timeout, Duration::from_secs(1));
        assert!(matches!(
            load(&["--disable-server-tls"], &[], None),
            Err(ConfigError::NoClientTls)
        ));
        assert!(matches!(
            load(&["--disable-client-tls"], &[], None),
            Err(ConfigError::NoServerTls)
        ));
    }

    #[test]
    fn flags_win_over_the_environment_which_wins_over_the_file() {
        let file = "cluster-name: from-file\nretry-timeout: 5s\ndial-timeout: 7s\n\
                    tls-client-cert-file: /tls/client.crt\ntls-hubble-client-key-file: /tls/client.key\n\
                    tls-hubble-server-ca-files:\n- /tls/ca1.crt\n- /tls/ca2.crt\ndisable-server-tls: true\n";
        let c = load(
            &["--cluster-name", "from-flag"],
            &[("RELAY_RETRY_TIMEOUT", "2s")],
            Some(file),
        )
        .unwrap();
        assert_eq!(c.cluster_name, "from-flag");
        assert_eq!(c.retry_timeout, Duration::from_secs(2));
        assert_eq!(c.dial_timeout, Duration::from_secs(7));
        assert_eq!(
            c.client_tls,
            Some(TlsFiles {
                cert: "/tls/client.crt".into(),
                key: "/tls/client.key".into(),
                cas: vec!["/tls/ca1.crt".into(), "/tls/ca2.crt".into()],
            })
        );
        assert_eq!(c.server_tls, None);
    }

    #[test]
    fn bad_values_are_named() {
        let base = ["--disable-client-tls", "--disable-server-tls"];
        let with = |extra: &[&str]| {
            let mut a = base.to_vec();
            a.extend(extra);
            load(&a, &[], None).unwrap_err().to_string()
        };
        assert!(with(&["--dial-timeout", "soon"]).contains("dial-timeout"));
        assert!(with(&["--sort-buffer-len-max", "0"]).contains("sort-buffer-len-max"));
        let maybe = load(
            &["--disable-client-tls=maybe", "--disable-server-tls"],
            &[],
            None,
        );
        assert!(maybe
            .unwrap_err()
            .to_string()
            .contains("disable-client-tls"));
        let broken = load(&base, &[], Some("[1, 2")).unwrap_err().to_string();
        assert!(broken.contains("config.yaml"), "{broken}");
    }
}
