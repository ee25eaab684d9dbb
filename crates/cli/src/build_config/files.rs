//! Sources that are files: a ConfigMap as mounted (one file per key) or as
//! YAML, CiliumNodeConfig YAML (a file or a directory of them), a Node's
//! YAML. The objects are read into the JSON the API server would serve,
//! then go through the same code as the API server's.

use super::objects::{self, Contribution, NodeConfig, Pairs};
use super::source::Kind;
use anyhow::{bail, Context};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The objects in a YAML file, as JSON.
fn yaml_docs(file: &Path) -> anyhow::Result<Vec<Value>> {
    use serde::Deserialize;
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    serde_yaml::Deserializer::from_str(&text)
        .map(serde_yaml::Value::deserialize)
        .filter(|d| !matches!(d, Ok(serde_yaml::Value::Null)))
        .map(|d| Ok(serde_json::to_value(d?)?))
        .collect::<anyhow::Result<_>>()
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

fn kind_is(doc: &Value, kind: &str, file: &Path) -> anyhow::Result<()> {
    if doc.get("kind").and_then(Value::as_str) != Some(kind) {
        bail!("{}: kind is not {kind}", file.display());
    }
    Ok(())
}

/// A ConfigMap: a directory of one file per key (as mounted), or its YAML.
fn config_map(path: &Path) -> anyhow::Result<Pairs> {
    if path.is_dir() {
        let mut out = Pairs::new();
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
    kind_is(doc, "ConfigMap", path)?;
    objects::string_map(doc, &["data"]).with_context(|| format!("{}", path.display()))
}

fn node_configs(path: &Path) -> anyhow::Result<Vec<NodeConfig>> {
    let mut out = Vec::new();
    for file in yaml_files(path)? {
        for doc in yaml_docs(&file)? {
            kind_is(&doc, "CiliumNodeConfig", &file)?;
            out.push(NodeConfig::from_object(&doc).with_context(|| format!("{}", file.display()))?);
        }
    }
    Ok(out)
}

fn node(path: &Path) -> anyhow::Result<Value> {
    let docs = yaml_docs(path)?;
    docs.into_iter()
        .next()
        .with_context(|| format!("{}: no Node in it", path.display()))
}

/// What a file source gives (`None`: the path does not exist). The node's
/// labels select CiliumNodeConfigs; `config-sources` lists the source as
/// given.
pub fn read(kind: Kind, path: &Path, labels: &Pairs) -> anyhow::Result<Option<Contribution>> {
    if !path.exists() {
        return Ok(None);
    }
    let pairs = match kind {
        Kind::ConfigMap => config_map(path)?,
        Kind::NodeConfig => objects::apply_node_configs(&node_configs(path)?, false, labels)?.pairs,
        Kind::Node => {
            objects::node_overrides(&node(path)?).with_context(|| format!("{}", path.display()))?
        }
    };
    Ok(Some(Contribution {
        pairs,
        descriptions: vec![format!("{}:{}", kind.name(), path.display())],
    }))
}
