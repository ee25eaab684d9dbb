//! `cilium build-config`: resolves this node's configuration from its
//! sources, in order, into one file per key under `--dest` (the agent's
//! `--config-dir`), published the way kubelet projects a ConfigMap: the
//! files go into a fresh `..data_<time>` directory that the `..data`
//! symlink is swung to in one rename, so the agent never reads half of it.
//!
//! Sources are Cilium's, read from the API server (`config-map:[<ns>/]<name>`,
//! `cilium-node-config:<ns>[/<name>]`, `node:[<name>]`), or files when the
//! spec is an absolute path (`config-map:<dir or ConfigMap YAML>`,
//! `cilium-node-config:<dir or file of CiliumNodeConfig YAML>`,
//! `node:<Node YAML>`). Both readers turn objects into keys through
//! `objects`. Later sources override earlier ones, filtered by
//! `--allow-config-keys` / `--deny-config-keys`.

mod api;
mod files;
mod objects;
mod publish;
mod source;

use anyhow::Context;
use objects::{Contribution, Pairs};
use source::{Defaults, Source};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Destination directory to write the fully-resolved configuration
    #[arg(long, default_value = "/tmp/cilium/config-map")]
    dest: PathBuf,
    /// The name of the node on which we are running
    #[arg(long = "node-name", env = "K8S_NODE_NAME", default_value = "")]
    node_name: String,
    /// The node's labels (k=v,...), for CiliumNodeConfig node selectors
    /// read from files (the API server's Node has its own)
    #[arg(long = "node-labels", value_delimiter = ',')]
    node_labels: Vec<String>,
    /// Ordered list of configuration sources: config-map:[<namespace>/]<name>,
    /// cilium-node-config:<namespace>[/<name>], node:[<name>]; an absolute
    /// path instead names files [default:
    /// config-map:cilium-config,cilium-node-config:$CILIUM_K8S_NAMESPACE]
    #[arg(long, value_delimiter = ',')]
    source: Vec<String>,
    /// Keys that later sources may override (takes precedence over the deny list)
    #[arg(long = "allow-config-keys", value_delimiter = ',')]
    allow_config_keys: Vec<String>,
    /// Keys that later sources may not override
    #[arg(long = "deny-config-keys", value_delimiter = ',')]
    deny_config_keys: Vec<String>,
    /// Namespace of the ConfigMap and CiliumNodeConfigs when a source names none
    #[arg(
        long = "k8s-namespace",
        env = "CILIUM_K8S_NAMESPACE",
        default_value = "",
        hide = true
    )]
    namespace: String,
    /// Absolute path of the kubernetes kubeconfig file
    #[arg(long = "k8s-kubeconfig-path")]
    kubeconfig: Option<PathBuf>,
    /// Kubernetes API server URL
    #[arg(long = "k8s-api-server")]
    api_server: Option<String>,
}

pub(crate) fn log(level: &str, msg: &str, source: &str, extra: &str) {
    eprintln!(
        "level={level} msg=\"{msg}\" configSource=\"{source}\"{extra} subsys=option-resolver"
    );
}

impl Args {
    /// The node's labels for file sources: `--node-labels` and the
    /// hostname label kubelet sets.
    fn labels(&self) -> Pairs {
        let mut labels: Pairs = self
            .node_labels
            .iter()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        if !self.node_name.is_empty() {
            labels.insert("kubernetes.io/hostname".into(), self.node_name.clone());
        }
        labels
    }

    /// The sources, all checked before anything is read.
    fn sources(&self) -> anyhow::Result<Vec<Source>> {
        let defaults = Defaults {
            namespace: self.namespace.clone(),
            node_name: self.node_name.clone(),
        };
        let texts = if self.source.is_empty() {
            vec![
                "config-map:cilium-config".to_owned(),
                format!("cilium-node-config:{}", self.namespace),
            ]
        } else {
            self.source.clone()
        };
        texts
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map(|t| Ok(Source::parse(t, &defaults)?))
            .collect()
    }

    fn may_override(&self, key: &str) -> bool {
        if !self.allow_config_keys.is_empty() {
            return self.allow_config_keys.iter().any(|k| k == key);
        }
        !self.deny_config_keys.iter().any(|k| k == key)
    }

    /// Every source merged, later ones overriding earlier ones.
    pub fn resolve(&self) -> anyhow::Result<Pairs> {
        let sources = self.sources()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the async runtime")?;
        rt.block_on(self.resolve_sources(&sources))
    }

    async fn resolve_sources(&self, sources: &[Source]) -> anyhow::Result<Pairs> {
        let mut reader = None;
        if sources.iter().any(Source::needs_api_server) {
            let opts = k8s::ClientOptions {
                kubeconfig: self.kubeconfig.clone(),
                api_server: self.api_server.clone(),
                ..Default::default()
            };
            reader = Some(api::ApiReader::connect(&opts).await?);
        }
        let mut config = Pairs::new();
        let mut used = Vec::new();
        for (i, source) in sources.iter().enumerate() {
            let what = source.describe();
            log(
                "info",
                &format!("Reading configuration from {what}"),
                &what,
                "",
            );
            let got = match source {
                Source::File { kind, path } => files::read(*kind, path, &self.labels())?,
                _ => {
                    let api = reader.as_mut().context("not connected to the API server")?;
                    Some(api.read(source, &self.node_name).await?)
                }
            };
            let Some(Contribution {
                pairs,
                descriptions,
            }) = got
            else {
                log("info", "Source not found, skipping", &what, "");
                continue;
            };
            log(
                "info",
                &format!("Got {} config pairs from source", pairs.len()),
                &what,
                "",
            );
            let mut contributed = false;
            for (k, v) in pairs {
                if k.contains('/') {
                    continue;
                }
                if i > 0 {
                    if !self.may_override(&k) {
                        log(
                            "warning",
                            "Source has non-overridable key",
                            &what,
                            &format!(" key={k}"),
                        );
                        continue;
                    }
                    if config.get(&k).is_some_and(|old| old != &v) {
                        log("info", "Source overrides key", &what, &format!(" key={k}"));
                    }
                }
                config.insert(k, v);
                contributed = true;
            }
            if contributed {
                used.extend(descriptions);
            }
        }
        config.insert("config-sources".into(), used.join(","));
        Ok(config)
    }
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let config = args.resolve()?;
    publish::publish(&args.dest, &config)?;
    eprintln!(
        "level=info msg=\"Wrote {} configuration keys\" dest={} subsys=build-config",
        config.len(),
        args.dest.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> Args {
        crate::parse_args(extra)
    }

    #[test]
    fn later_sources_override_within_the_allowed_keys() {
        let dir = tempfile::tempdir().unwrap();
        let cm = dir.path().join("cm.yaml");
        std::fs::write(
            &cm,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cilium-config}\ndata:\n  debug: \"false\"\n  cluster-name: lab\n  tunnel-port: 8472\n",
        )
        .unwrap();
        let ncd = dir.path().join("ncd");
        std::fs::create_dir(&ncd).unwrap();
        std::fs::write(
            ncd.join("b.yaml"),
            "apiVersion: cilium.io/v2\nkind: CiliumNodeConfig\nmetadata: {name: b}\nspec:\n  nodeSelector: {matchLabels: {kubernetes.io/hostname: node1}}\n  defaults: {debug: \"true\", cluster-name: other}\n---\napiVersion: cilium.io/v2\nkind: CiliumNodeConfig\nmetadata: {name: a}\nspec:\n  nodeSelector: {matchLabels: {role: edge}}\n  defaults: {debug: \"maybe\"}\n",
        )
        .unwrap();
        let sources = format!(
            "config-map:{},cilium-node-config:{}",
            cm.display(),
            ncd.display()
        );
        let resolved = args(&[
            "--source",
            &sources,
            "--node-name",
            "node1",
            "--deny-config-keys",
            "cluster-name",
        ])
        .resolve()
        .unwrap();
        assert_eq!(resolved["debug"], "true");
        assert_eq!(resolved["cluster-name"], "lab", "denied key kept");
        assert_eq!(resolved["tunnel-port"], "8472");
        assert_eq!(resolved["config-sources"], sources);
        let with_edge = args(&[
            "--source",
            &sources,
            "--node-name",
            "node1",
            "--node-labels",
            "role=edge",
        ])
        .resolve()
        .unwrap();
        assert_eq!(with_edge["debug"], "true", "b is applied after a");
    }

    #[test]
    fn sources_that_give_nothing_are_not_listed() {
        let dir = tempfile::tempdir().unwrap();
        let cm = dir.path().join("cm");
        std::fs::create_dir(&cm).unwrap();
        std::fs::write(cm.join("debug"), "false\n").unwrap();
        let sources = format!(
            "config-map:{},cilium-node-config:{}/none,node:{}/node.yaml",
            cm.display(),
            dir.path().display(),
            dir.path().display()
        );
        let resolved = args(&["--source", &sources]).resolve().unwrap();
        assert_eq!(resolved["debug"], "false");
        assert_eq!(
            resolved["config-sources"],
            format!("config-map:{}", cm.display())
        );
    }

    #[test]
    fn errors_name_the_source_or_the_server() {
        let err = |argv: &[&str]| format!("{:#}", args(argv).resolve().unwrap_err());
        let e = err(&["--source", "config-map:/x,secret:y"]);
        assert!(e.contains("\"secret:y\": unknown kind"), "{e}");
        let e = err(&["--source", "config-map:a/b/c"]);
        assert!(e.contains("\"config-map:a/b/c\""), "{e}");
        let e = err(&[
            "--k8s-api-server",
            "http://127.0.0.1:1",
            "--k8s-namespace",
            "kube-system",
        ]);
        assert!(
            e.contains("reading ConfigMap kube-system/cilium-config from the API server (http://127.0.0.1:1)"),
            "{e}"
        );
    }
}
