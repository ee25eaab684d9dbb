//! From Kubernetes objects (as JSON, whether the API server served them or
//! a file held them) to configuration keys: a ConfigMap's data, the
//! CiliumNodeConfigs that apply to a node, a Node's `config.cilium.io/`
//! labels and annotations. Both readers end here, so a file and an API
//! server with the same objects give the same keys.

use super::log;
use anyhow::{bail, Context};
use serde_json::Value;
use std::collections::BTreeMap;

pub type Pairs = BTreeMap<String, String>;

/// What one source gave: its keys, and what `config-sources` lists for
/// it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Contribution {
    pub pairs: Pairs,
    pub descriptions: Vec<String>,
}

/// Whether `key` may name a ConfigMap key (Kubernetes' IsConfigMapKey).
pub fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        && key != "."
        && !key.starts_with("..")
}

/// The string map at `path` in `obj` (absent or null: empty). Scalars
/// that are not strings (YAML files hold them unquoted) are taken as
/// written.
pub fn string_map(obj: &Value, path: &[&str]) -> anyhow::Result<Pairs> {
    let mut v = obj;
    for p in path {
        match v.get(p) {
            Some(next) => v = next,
            None => return Ok(Pairs::new()),
        }
    }
    if v.is_null() {
        return Ok(Pairs::new());
    }
    let map = v
        .as_object()
        .with_context(|| format!("{} is not a map", path.join(".")))?;
    map.iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                other => bail!("{}.{k}: {other} is not a scalar", path.join(".")),
            };
            Ok((k.clone(), v))
        })
        .collect()
}

fn metadata<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Whether a CiliumNodeConfig's `spec.nodeSelector` (a Kubernetes
/// LabelSelector: `matchLabels` and every `matchExpressions` requirement
/// must hold, `{}` selects every node) selects a Node with `labels`.
pub fn selects(
    selector: &Value,
    labels: &Pairs,
) -> Result<bool, policy::selector::LabelSelectorError> {
    let selector = policy::Selector::from_label_selector(selector)?;
    let labels = policy::Labels(
        labels
            .iter()
            .map(|(k, v)| policy::Label::new(policy::labels::SOURCE_K8S, k, v))
            .collect(),
    );
    Ok(selector.matches(&labels))
}

/// One CiliumNodeConfig, as far as `build-config` reads it.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub namespace: String,
    pub name: String,
    /// `spec.nodeSelector`, checked only when it is to select.
    pub selector: Option<Value>,
    pub defaults: Pairs,
}

impl NodeConfig {
    pub fn from_object(obj: &Value) -> anyhow::Result<NodeConfig> {
        let name = metadata(obj, "name");
        if name.is_empty() {
            bail!("a CiliumNodeConfig without metadata.name");
        }
        let namespace = metadata(obj, "namespace");
        let defaults = string_map(obj, &["spec", "defaults"])
            .with_context(|| format!("CiliumNodeConfig {namespace}/{name}"))?;
        let selector = obj
            .get("spec")
            .and_then(|s| s.get("nodeSelector"))
            .filter(|s| !s.is_null())
            .cloned();
        Ok(NodeConfig {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            selector,
            defaults,
        })
    }

    fn describe(&self) -> String {
        format!("cilium-node-config:{}/{}", self.namespace, self.name)
    }
}

/// Whether choosing among `configs` needs the Node's labels (not when
/// they are asked for by name, nor when none could select).
pub fn needs_labels(configs: &[NodeConfig], by_name: bool) -> bool {
    !by_name
        && configs
            .iter()
            .any(|c| !c.defaults.is_empty() && c.selector.is_some())
}

/// The CiliumNodeConfigs that apply, in ascending name order (later names
/// override earlier ones): with `by_name`, every one given (the one asked
/// for); otherwise those with defaults whose nodeSelector is set and
/// matches `labels` (a missing selector selects no node, `{}` every
/// node). Keys that cannot be ConfigMap keys are skipped.
pub fn apply_node_configs(
    configs: &[NodeConfig],
    by_name: bool,
    labels: &Pairs,
) -> anyhow::Result<Contribution> {
    let mut chosen: Vec<&NodeConfig> = Vec::new();
    for c in configs.iter().filter(|c| !c.defaults.is_empty()) {
        let selected = match (&c.selector, by_name) {
            (_, true) => true,
            (None, false) => false,
            (Some(s), false) => selects(s, labels).with_context(|| {
                format!(
                    "CiliumNodeConfig {}/{}: invalid spec.nodeSelector",
                    c.namespace, c.name
                )
            })?,
        };
        if selected {
            chosen.push(c);
        }
    }
    chosen.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = Contribution::default();
    for c in chosen {
        let what = c.describe();
        for (k, v) in &c.defaults {
            if !valid_key(k) {
                log(
                    "error",
                    "Invalid key in CiliumNodeConfig",
                    &what,
                    &format!(" key={k:?}"),
                );
                continue;
            }
            if out.pairs.insert(k.clone(), v.clone()).is_some() {
                log(
                    "warning",
                    "Key set in multiple CiliumNodeConfigs",
                    &what,
                    &format!(" key={k}"),
                );
            }
        }
        out.descriptions.push(what);
    }
    Ok(out)
}

/// A Node's labels.
pub fn node_labels(node: &Value) -> anyhow::Result<Pairs> {
    string_map(node, &["metadata", "labels"]).context("Node metadata.labels")
}

/// A Node's `config.cilium.io/<key>` labels, then annotations (which win).
pub fn node_overrides(node: &Value) -> anyhow::Result<Pairs> {
    let what = format!("node:{}", metadata(node, "name"));
    let mut out = Pairs::new();
    for part in ["labels", "annotations"] {
        let map = string_map(node, &["metadata", part]).with_context(|| format!("Node {part}"))?;
        for (k, v) in map
            .into_iter()
            .filter(|(k, _)| k.starts_with("config.cilium.io"))
        {
            match k.split_once('/') {
                Some((_, key)) if valid_key(key) => {
                    out.insert(key.to_owned(), v);
                }
                _ => log(
                    "error",
                    "Node annotation format invalid: should be of the format config.cilium.io/<KEY>",
                    &what,
                    &format!(" configAnnotation={k:?}"),
                ),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(name: &str, selector: Value, defaults: Value) -> NodeConfig {
        let mut obj = json!({
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNodeConfig",
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"defaults": defaults},
        });
        if !selector.is_null() {
            obj["spec"]["nodeSelector"] = selector;
        }
        NodeConfig::from_object(&obj).unwrap()
    }

    #[test]
    fn node_configs_apply_in_name_order_when_they_select_the_node() {
        let configs = [
            config("b", json!({}), json!({"debug": "b", "only-b": "1"})),
            config(
                "a",
                json!({"matchLabels": {"role": "edge"}}),
                json!({"debug": "a"}),
            ),
            config("c", Value::Null, json!({"debug": "c"})),
            config(
                "d",
                json!({"matchLabels": {"role": "core"}}),
                json!({"debug": "d"}),
            ),
            config("e", json!({}), json!({})),
            config("f", json!({}), json!({"bad/key": "x", "..x": "y"})),
        ];
        let labels = Pairs::from([("role".to_owned(), "edge".to_owned())]);
        assert!(needs_labels(&configs, false));
        let got = apply_node_configs(&configs, false, &labels).unwrap();
        assert_eq!(got.pairs["debug"], "b");
        assert_eq!(got.pairs["only-b"], "1");
        assert_eq!(got.pairs.len(), 2, "{got:?}");
        assert_eq!(
            got.descriptions,
            [
                "cilium-node-config:kube-system/a",
                "cilium-node-config:kube-system/b",
                "cilium-node-config:kube-system/f",
            ]
        );
        let named = apply_node_configs(&configs[2..3], true, &Pairs::new()).unwrap();
        assert_eq!(
            named.pairs["debug"], "c",
            "a name selects without a selector"
        );
    }

    fn labels(labels: &[(&str, &str)]) -> Pairs {
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_empty_selector_selects_every_node() {
        assert_eq!(selects(&json!({}), &labels(&[])), Ok(true));
        assert_eq!(
            selects(&json!({"matchLabels": null}), &labels(&[("a", "b")])),
            Ok(true)
        );
    }

    #[test]
    fn match_labels_and_expressions_must_all_hold() {
        let s = json!({
            "matchLabels": {"role": "edge"},
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a", "b"]},
                {"key": "tier", "operator": "NotIn", "values": ["db"]},
                {"key": "gpu", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []},
            ],
        });
        let good = [("role", "edge"), ("zone", "b"), ("gpu", "")];
        assert_eq!(selects(&s, &labels(&good)), Ok(true));
        let other = [
            ("role", "edge"),
            ("zone", "a"),
            ("gpu", "1"),
            ("tier", "web"),
        ];
        assert_eq!(selects(&s, &labels(&other)), Ok(true));
        for (k, v) in [
            ("role", "core"),
            ("zone", "c"),
            ("tier", "db"),
            ("legacy", "yes"),
        ] {
            let mut l = labels(&good);
            l.insert(k.into(), v.into());
            assert_eq!(selects(&s, &l), Ok(false), "{k}={v}");
        }
        for missing in ["gpu", "zone", "role"] {
            let mut l = labels(&good);
            l.remove(missing);
            assert_eq!(selects(&s, &l), Ok(false), "without {missing}");
        }
    }

    #[test]
    fn invalid_selectors_name_the_field() {
        let err = |v: Value| selects(&v, &labels(&[])).unwrap_err().to_string();
        let e =
            err(json!({"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}));
        assert!(
            e.starts_with("matchExpressions[0].operator: unknown operator \"Near\""),
            "{e}"
        );
        let e = err(json!({"matchExpressions": [{"key": "a", "operator": "In"}]}));
        assert!(e.contains("In and NotIn need values"), "{e}");
        let e =
            err(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}));
        assert!(e.contains("take no values"), "{e}");
        let e = err(json!({"matchLabels": {"a": 1}}));
        assert!(e.starts_with("matchLabels"), "{e}");
    }

    #[test]
    fn node_overrides_take_annotations_over_labels() {
        let node = json!({"metadata": {
            "name": "node1",
            "labels": {"config.cilium.io/debug": "label", "config.cilium.io/a": "1", "role": "x"},
            "annotations": {"config.cilium.io/debug": "annotation", "config.cilium.io": "no key", "config.cilium.io/a/b": "bad"},
        }});
        let got = node_overrides(&node).unwrap();
        assert_eq!(
            got,
            Pairs::from([
                ("a".to_owned(), "1".to_owned()),
                ("debug".to_owned(), "annotation".to_owned()),
            ])
        );
    }

    #[test]
    fn config_map_keys_are_checked_as_kubernetes_does() {
        for good in ["a", "a.b", "-_x.9", "x..y"] {
            assert!(valid_key(good), "{good}");
        }
        for bad in ["", ".", "..", "..data", "a/b", "a b", &"k".repeat(254)] {
            assert!(!valid_key(bad), "{bad}");
        }
    }
}
