//! Endpoint selectors: Kubernetes label selectors over Cilium labels.

use crate::labels::{split_source, Labels};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One requirement: a key (with an optional `source:`), an operator and
/// values.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    pub source: String,
    pub key: String,
    pub op: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    pub fn new(key: &str, op: Operator, values: Vec<String>) -> Self {
        let (source, key) = split_source(key);
        Self {
            source: source.into(),
            key: key.into(),
            op,
            values,
        }
    }

    fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.source, &self.key);
        match self.op {
            Operator::In => value.is_some_and(|v| self.values.iter().any(|w| w == v)),
            Operator::NotIn => value.is_none_or(|v| self.values.iter().all(|w| w != v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// All requirements must hold; none at all selects everything.
///
/// Its requirements are shared: rules often repeat a selector (a thousand
/// rules to one subject), and a copy costs a count, not allocations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    pub requirements: std::sync::Arc<Vec<Requirement>>,
}

/// Why a Kubernetes LabelSelector is not one, and where.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct LabelSelectorError {
    /// The field, e.g. `matchExpressions[0].operator`.
    pub path: String,
    pub message: String,
}

impl Selector {
    /// A Kubernetes LabelSelector (`matchLabels`, `matchExpressions`) as
    /// the API server serves one, checked as a policy's selectors are. Its
    /// keys carry no source, so they match labels of any source.
    pub fn from_label_selector(value: &serde_json::Value) -> Result<Self, LabelSelectorError> {
        let spec: crate::manifest::SelectorSpec =
            serde_path_to_error::deserialize(value).map_err(|e| LabelSelectorError {
                path: e.path().to_string(),
                message: e.inner().to_string(),
            })?;
        Ok(spec.to_selector())
    }

    /// `{}`: selects every endpoint.
    pub fn wildcard() -> Self {
        Self::default()
    }

    pub fn is_wildcard(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// This selector, also requiring `key=value` unless it already says
    /// something about `key`.
    pub fn with_default(mut self, source: &str, key: &str, value: &str) -> Self {
        if !self.requirements.iter().any(|r| r.key == key) {
            std::sync::Arc::make_mut(&mut self.requirements).push(Requirement {
                source: source.into(),
                key: key.into(),
                op: Operator::In,
                values: vec![value.into()],
            });
        }
        self
    }
}

impl std::fmt::Display for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .requirements
            .iter()
            .map(|r| {
                let key = format!("{}:{}", r.source, r.key);
                match r.op {
                    Operator::In if r.values.len() == 1 => format!("{key}={}", r.values[0]),
                    Operator::In => format!("{key} in ({})", r.values.join(",")),
                    Operator::NotIn => format!("{key} notin ({})", r.values.join(",")),
                    Operator::Exists => key,
                    Operator::DoesNotExist => format!("!{key}"),
                }
            })
            .collect();
        write!(f, "&LabelSelector{{{}}}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(l: &[&str]) -> Labels {
        Labels::parse(l.iter().copied())
    }

    #[test]
    fn keys_match_their_source_or_any() {
        let pod = labels(&["k8s:app=web", "k8s:io.kubernetes.pod.namespace=default"]);
        let any = Selector {
            requirements: vec![Requirement::new("app", Operator::In, vec!["web".into()])].into(),
        };
        assert!(any.matches(&pod));
        let k8s = Selector {
            requirements: vec![Requirement::new(
                "k8s:app",
                Operator::In,
                vec!["web".into()],
            )]
            .into(),
        };
        assert!(k8s.matches(&pod));
        let reserved = Selector {
            requirements: vec![Requirement::new("reserved:app", Operator::Exists, vec![])].into(),
        };
        assert!(!reserved.matches(&pod));
        assert!(Selector::wildcard().matches(&pod));
    }

    #[test]
    fn operators() {
        let pod = labels(&["k8s:app=web", "k8s:tier=front"]);
        let sel = |key: &str, op, v: &[&str]| Selector {
            requirements: vec![Requirement::new(
                key,
                op,
                v.iter().map(|s| s.to_string()).collect(),
            )]
            .into(),
        };
        assert!(sel("app", Operator::In, &["db", "web"]).matches(&pod));
        assert!(!sel("app", Operator::NotIn, &["web"]).matches(&pod));
        assert!(sel("role", Operator::NotIn, &["x"]).matches(&pod));
        assert!(sel("tier", Operator::Exists, &[]).matches(&pod));
        assert!(sel("role", Operator::DoesNotExist, &[]).matches(&pod));
        assert!(!sel("tier", Operator::DoesNotExist, &[]).matches(&pod));
    }
}
