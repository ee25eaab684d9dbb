//! `--source` entries, `kind[:spec]`, as Cilium's `build-config` reads
//! them, plus ours for files: a spec that is an absolute path names a
//! file or directory instead of an object.

use std::path::PathBuf;

/// The three kinds of source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ConfigMap,
    NodeConfig,
    Node,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::ConfigMap => "config-map",
            Kind::NodeConfig => "cilium-node-config",
            Kind::Node => "node",
        }
    }
}

/// Where a source's keys come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// `<kind>:/absolute/path`: a mounted ConfigMap directory or YAML
    /// files.
    File { kind: Kind, path: PathBuf },
    /// `config-map:[<ns>/]<name>`: every `data` key.
    ConfigMap { namespace: String, name: String },
    /// `cilium-node-config:<ns>[/<name>]`: the CiliumNodeConfigs that
    /// select the node, or the one named.
    NodeConfig {
        namespace: String,
        name: Option<String>,
    },
    /// `node:[<name>]`: the Node's `config.cilium.io/` labels and
    /// annotations.
    Node { name: String },
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("source {0:?}: unknown kind (config-map, cilium-node-config, node)")]
    UnknownKind(String),
    #[error("source {text:?}: {reason}")]
    Syntax { text: String, reason: &'static str },
}

/// What a spec's defaults come from: `CILIUM_K8S_NAMESPACE` and the node's
/// name.
#[derive(Clone, Debug, Default)]
pub struct Defaults {
    pub namespace: String,
    pub node_name: String,
}

impl Source {
    /// One `--source` entry.
    pub fn parse(text: &str, defaults: &Defaults) -> Result<Source, SourceError> {
        let (kind, spec) = text.split_once(':').unwrap_or((text, ""));
        let kind = match kind {
            "config-map" => Kind::ConfigMap,
            "cilium-node-config" => Kind::NodeConfig,
            "node" => Kind::Node,
            _ => return Err(SourceError::UnknownKind(text.to_owned())),
        };
        if spec.starts_with('/') {
            return Ok(Source::File {
                kind,
                path: PathBuf::from(spec),
            });
        }
        let bad = |reason| SourceError::Syntax {
            text: text.to_owned(),
            reason,
        };
        let (first, second) = match spec.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (spec, None),
        };
        if second.is_some_and(|s| s.contains('/')) {
            return Err(bad("expected at most one '/' (<namespace>/<name>)"));
        }
        if spec.contains('/') && (first.is_empty() || second == Some("")) {
            return Err(bad("empty namespace or name around '/'"));
        }
        let ns = || defaults.namespace.clone();
        Ok(match (kind, second) {
            (Kind::ConfigMap, None) if first.is_empty() => Source::ConfigMap {
                namespace: ns(),
                name: "cilium-config".into(),
            },
            (Kind::ConfigMap, None) => Source::ConfigMap {
                namespace: ns(),
                name: first.into(),
            },
            (Kind::ConfigMap, Some(name)) => Source::ConfigMap {
                namespace: first.into(),
                name: name.into(),
            },
            (Kind::NodeConfig, name) => Source::NodeConfig {
                namespace: if first.is_empty() { ns() } else { first.into() },
                name: name.map(str::to_owned),
            },
            (Kind::Node, None) if first.is_empty() => Source::Node {
                name: defaults.node_name.clone(),
            },
            (Kind::Node, None) => Source::Node { name: first.into() },
            (Kind::Node, Some(_)) => {
                return Err(bad("a Node has no namespace: node:[<name>]"));
            }
        })
    }

    pub fn kind(&self) -> Kind {
        match self {
            Source::File { kind, .. } => *kind,
            Source::ConfigMap { .. } => Kind::ConfigMap,
            Source::NodeConfig { .. } => Kind::NodeConfig,
            Source::Node { .. } => Kind::Node,
        }
    }

    /// As Cilium names a source in its logs and in `config-sources`.
    pub fn describe(&self) -> String {
        let kind = self.kind().name();
        match self {
            Source::File { path, .. } => format!("{kind}:{}", path.display()),
            Source::ConfigMap { namespace, name } => format!("{kind}:{namespace}/{name}"),
            Source::NodeConfig { namespace, name } => {
                format!("{kind}:{namespace}/{}", name.as_deref().unwrap_or(""))
            }
            Source::Node { name } => format!("{kind}:{name}"),
        }
    }

    pub fn needs_api_server(&self) -> bool {
        !matches!(self, Source::File { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Source, SourceError> {
        let d = Defaults {
            namespace: "kube-system".into(),
            node_name: "node1".into(),
        };
        Source::parse(text, &d)
    }

    fn cm(ns: &str, name: &str) -> Source {
        Source::ConfigMap {
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn specs_fill_in_cilium_defaults() {
        assert_eq!(parse("config-map"), Ok(cm("kube-system", "cilium-config")));
        assert_eq!(parse("config-map:"), Ok(cm("kube-system", "cilium-config")));
        assert_eq!(parse("config-map:other"), Ok(cm("kube-system", "other")));
        assert_eq!(parse("config-map:ns/other"), Ok(cm("ns", "other")));
        assert_eq!(
            parse("cilium-node-config:"),
            Ok(Source::NodeConfig {
                namespace: "kube-system".into(),
                name: None
            })
        );
        assert_eq!(
            parse("cilium-node-config:ns/lab-node1"),
            Ok(Source::NodeConfig {
                namespace: "ns".into(),
                name: Some("lab-node1".into())
            })
        );
        assert_eq!(
            parse("node"),
            Ok(Source::Node {
                name: "node1".into()
            })
        );
        assert_eq!(
            parse("node:node2"),
            Ok(Source::Node {
                name: "node2".into()
            })
        );
        assert_eq!(
            parse("config-map:ns/other").unwrap().describe(),
            "config-map:ns/other"
        );
    }

    #[test]
    fn absolute_paths_are_files() {
        assert_eq!(
            parse("cilium-node-config:/etc/cilium/node-config"),
            Ok(Source::File {
                kind: Kind::NodeConfig,
                path: "/etc/cilium/node-config".into()
            })
        );
        assert!(!parse("node:/n.yaml").unwrap().needs_api_server());
        assert!(parse("node:n").unwrap().needs_api_server());
    }

    #[test]
    fn bad_specs_name_the_source() {
        assert_eq!(
            parse("secret:x"),
            Err(SourceError::UnknownKind("secret:x".into()))
        );
        for bad in ["config-map:a/b/c", "config-map:ns/", "node:ns/n"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }
}
