//! `cilium build-config`: resolves this node's configuration from its
//! sources, in order, into one file per key under `--dest` (the agent's
//! `--config-dir`), published the way kubelet projects a ConfigMap: the
//! files go into a fresh `..data_<time>` directory that the `..data`
//! symlink is swung to in one rename, so the agent never reads half of it.
//!
//! Without an API server, sources name files instead of objects:
//! `config-map:<dir or ConfigMap YAML>`, `cilium-node-config:<dir or file
//! of CiliumNodeConfig YAML>` (those whose nodeSelector matches the node,
//! in name order) and `node:<Node YAML>` (`config.cilium.io/<key>` labels,
//! then annotations). Later sources override earlier ones, filtered by
//! `--allow-config-keys` / `--deny-config-keys`.

use anyhow::{bail, Context};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
    #[arg(long = "node-labels", value_delimiter = ',')]
    node_labels: Vec<String>,
    /// Ordered list of configuration sources: config-map:<path>,
    /// cilium-node-config:<path>, node:<path>
    #[arg(long, value_delimiter = ',', default_values_t = [
        "config-map:/etc/cilium/cilium-config".to_owned(),
        "cilium-node-config:/etc/cilium/node-config".to_owned(),
    ])]
    source: Vec<String>,
    /// Keys that later sources may override (takes precedence over the deny list)
    #[arg(long = "allow-config-keys", value_delimiter = ',')]
    allow_config_keys: Vec<String>,
    /// Keys that later sources may not override
    #[arg(long = "deny-config-keys", value_delimiter = ',')]
    deny_config_keys: Vec<String>,
}

fn log(level: &str, msg: &str, source: &str, extra: &str) {
    eprintln!(
        "level={level} msg=\"{msg}\" configSource=\"{source}\"{extra} subsys=option-resolver"
    );
}

/// A YAML string map at `path` under `value` (absent: empty).
fn string_map(
    value: &serde_yaml::Value,
    path: &[&str],
) -> anyhow::Result<BTreeMap<String, String>> {
    let mut v = value;
    for p in path {
        match v.get(p) {
            Some(next) => v = next,
            None => return Ok(BTreeMap::new()),
        }
    }
    let map = v
        .as_mapping()
        .with_context(|| format!("{} is not a map", path.join(".")))?;
    map.iter()
        .map(|(k, v)| {
            let k = k.as_str().context("a key that is not a string")?.to_owned();
            let v = match v {
                serde_yaml::Value::String(s) => s.clone(),
                serde_yaml::Value::Bool(b) => b.to_string(),
                serde_yaml::Value::Number(n) => n.to_string(),
                other => bail!("{}.{k}: {other:?} is not a scalar", path.join(".")),
            };
            Ok((k, v))
        })
        .collect()
}

fn yaml_docs(file: &Path) -> anyhow::Result<Vec<serde_yaml::Value>> {
    use serde::Deserialize;
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    serde_yaml::Deserializer::from_str(&text)
        .map(serde_yaml::Value::deserialize)
        .filter(|d| !matches!(d, Ok(serde_yaml::Value::Null)))
        .collect::<Result<_, _>>()
        .with_context(|| format!("parsing {}", file.display()))
}

/// The YAML files of a directory (sorted), or the file itself.
fn yaml_files(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("reading {}", path.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        })
        .collect();
    files.sort();
    Ok(files)
}

/// A ConfigMap: a directory of one file per key (as mounted), or its YAML.
fn config_map(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    if path.is_dir() {
        let mut out = BTreeMap::new();
        for e in std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || e.path().is_dir() {
                continue;
            }
            let value = std::fs::read_to_string(e.path())
                .with_context(|| format!("reading {}", e.path().display()))?;
            out.insert(name, value.trim().to_owned());
        }
        return Ok(out);
    }
    let docs = yaml_docs(path)?;
    let doc = docs
        .first()
        .with_context(|| format!("{}: no ConfigMap in it", path.display()))?;
    if doc.get("kind").and_then(|k| k.as_str()) != Some("ConfigMap") {
        bail!("{}: kind is not ConfigMap", path.display());
    }
    string_map(doc, &["data"]).with_context(|| format!("{}", path.display()))
}

impl Args {
    fn labels(&self) -> BTreeMap<String, String> {
        let mut labels: BTreeMap<String, String> = self
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

    /// CiliumNodeConfigs selecting this node, in name order.
    fn node_configs(&self, path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
        let labels = self.labels();
        let mut selected: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for file in yaml_files(path)? {
            for doc in yaml_docs(&file)? {
                let what = file.display();
                if doc.get("kind").and_then(|k| k.as_str()) != Some("CiliumNodeConfig") {
                    bail!("{what}: kind is not CiliumNodeConfig");
                }
                let name = doc
                    .get("metadata")
                    .and_then(|m| m.get("name"))
                    .and_then(|n| n.as_str())
                    .with_context(|| format!("{what}: metadata.name missing"))?;
                let want = string_map(&doc, &["spec", "nodeSelector", "matchLabels"])
                    .with_context(|| format!("{what}: {name}"))?;
                if want.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                    let defaults = string_map(&doc, &["spec", "defaults"])
                        .with_context(|| format!("{what}: {name}"))?;
                    selected.insert(name.to_owned(), defaults);
                }
            }
        }
        Ok(selected.into_values().flatten().collect())
    }

    fn node_annotations(&self, path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
        let docs = yaml_docs(path)?;
        let doc = docs.first().context("no Node in it")?;
        let mut out = BTreeMap::new();
        for part in ["labels", "annotations"] {
            for (k, v) in string_map(doc, &["metadata", part])? {
                if let Some(key) = k.strip_prefix("config.cilium.io/") {
                    out.insert(key.to_owned(), v);
                }
            }
        }
        Ok(out)
    }

    fn read(&self, source: &str) -> anyhow::Result<Option<BTreeMap<String, String>>> {
        let (kind, arg) = source
            .split_once(':')
            .with_context(|| format!("source {source:?}: expected <kind>:<path>"))?;
        let path = Path::new(arg);
        if !path.is_absolute() {
            bail!("source {source:?}: no Kubernetes API server here; give the absolute path of a mounted ConfigMap directory or a YAML file");
        }
        if !path.exists() {
            log("info", "Source not found, skipping", source, "");
            return Ok(None);
        }
        let pairs = match kind {
            "config-map" => config_map(path)?,
            "cilium-node-config" => self.node_configs(path)?,
            "node" => self.node_annotations(path)?,
            other => bail!(
                "source {source:?}: unknown kind {other:?} (config-map, cilium-node-config, node)"
            ),
        };
        Ok(Some(pairs))
    }

    fn may_override(&self, key: &str) -> bool {
        if !self.allow_config_keys.is_empty() {
            return self.allow_config_keys.iter().any(|k| k == key);
        }
        !self.deny_config_keys.iter().any(|k| k == key)
    }

    /// Every source merged, later ones overriding earlier ones.
    pub fn resolve(&self) -> anyhow::Result<BTreeMap<String, String>> {
        let mut config = BTreeMap::new();
        let mut used = Vec::new();
        for (i, source) in self.source.iter().enumerate() {
            log(
                "info",
                &format!("Reading configuration from {source}"),
                source,
                "",
            );
            let Some(pairs) = self.read(source)? else {
                continue;
            };
            log(
                "info",
                &format!("Got {} config pairs from source", pairs.len()),
                source,
                "",
            );
            for (k, v) in pairs {
                if k.contains('/') {
                    continue;
                }
                if i > 0 {
                    if !self.may_override(&k) {
                        log(
                            "warning",
                            "Source has non-overridable key",
                            source,
                            &format!(" key={k}"),
                        );
                        continue;
                    }
                    if config.get(&k).is_some_and(|old| old != &v) {
                        log("info", "Source overrides key", source, &format!(" key={k}"));
                    }
                }
                config.insert(k, v);
            }
            used.push(source.clone());
        }
        config.insert("config-sources".into(), used.join(","));
        Ok(config)
    }
}

/// Publishes `config` under `dest` as kubelet projects a ConfigMap.
pub fn publish(dest: &Path, config: &BTreeMap<String, String>) -> anyhow::Result<()> {
    use std::os::unix::fs::symlink;
    std::fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let data_name = format!("..data_{stamp}");
    let data = dest.join(&data_name);
    std::fs::create_dir(&data).with_context(|| format!("creating {}", data.display()))?;
    for (k, v) in config {
        std::fs::write(data.join(k), v).with_context(|| format!("writing {k}"))?;
    }
    let old = std::fs::read_link(dest.join("..data")).ok();
    let tmp = dest.join("..data.tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(&data_name, &tmp).context("linking ..data.tmp")?;
    std::fs::rename(&tmp, dest.join("..data")).context("swinging ..data")?;
    for entry in std::fs::read_dir(dest)?.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && !config.contains_key(&name) {
            std::fs::remove_file(entry.path())
                .with_context(|| format!("removing the stale key {name}"))?;
        }
    }
    for k in config.keys() {
        let link = dest.join(k);
        if std::fs::read_link(&link).is_err() {
            let _ = std::fs::remove_file(&link);
            symlink(Path::new("..data").join(k), &link).with_context(|| format!("linking {k}"))?;
        }
    }
    if let Some(old) = old.filter(|o| o != Path::new(&data_name)) {
        let _ = std::fs::remove_dir_all(dest.join(old));
    }
    Ok(())
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let config = args.resolve()?;
    publish(&args.dest, &config)?;
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
        assert!(args(&["--source", "config-map:kube-system/cilium-config"])
            .resolve()
            .unwrap_err()
            .to_string()
            .contains("no Kubernetes API server"));
    }

    #[test]
    fn publishing_swings_the_data_link_and_drops_stale_keys() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("config-map");
        let mut c = BTreeMap::from([
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ]);
        publish(&dest, &c).unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("a")).unwrap(), "1");
        c.remove("b");
        c.insert("a".into(), "3".into());
        publish(&dest, &c).unwrap();
        assert_eq!(std::fs::read_to_string(dest.join("a")).unwrap(), "3");
        assert!(!dest.join("b").exists());
        let data_dirs = std::fs::read_dir(&dest)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("..data_"))
            .count();
        assert_eq!(data_dirs, 1);
    }
}
