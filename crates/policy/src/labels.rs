//! Labels as Cilium writes them: `source:key=value`.

use std::collections::BTreeSet;
use std::fmt;

/// Where a label comes from (`k8s`, `reserved`, `cidr`, ...).
pub const SOURCE_ANY: &str = "any";
pub const SOURCE_K8S: &str = "k8s";
pub const SOURCE_RESERVED: &str = "reserved";
pub const SOURCE_CIDR: &str = "cidr";

/// The label every pod carries with its namespace.
pub const NAMESPACE_KEY: &str = "io.kubernetes.pod.namespace";

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Label {
    pub source: String,
    pub key: String,
    pub value: String,
}

impl Label {
    pub fn new(source: &str, key: &str, value: &str) -> Self {
        Self {
            source: source.into(),
            key: key.into(),
            value: value.into(),
        }
    }

    /// `source:key=value`, `source:key`, or `key=value` (source `any`).
    pub fn parse(s: &str) -> Self {
        let (source, rest) = split_source(s);
        let (key, value) = rest.split_once('=').unwrap_or((rest, ""));
        Self::new(source, key, value)
    }
}

/// Splits a leading `source:`; a key whose prefix is not a known source
/// keeps its colon (`any` when there is none).
pub fn split_source(s: &str) -> (&str, &str) {
    match s.split_once(':') {
        Some((src, rest))
            if matches!(
                src,
                SOURCE_ANY | SOURCE_K8S | SOURCE_RESERVED | SOURCE_CIDR | "container" | "unspec"
            ) =>
        {
            (src, rest)
        }
        _ => (SOURCE_ANY, s),
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.source, self.key)
        } else {
            write!(f, "{}:{}={}", self.source, self.key, self.value)
        }
    }
}

/// A set of labels: an endpoint's or an identity's.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Labels(pub BTreeSet<Label>);

impl Labels {
    pub fn parse<'a>(items: impl IntoIterator<Item = &'a str>) -> Self {
        Self(items.into_iter().map(Label::parse).collect())
    }

    /// The value of `key` under `source` (`any` matches every source).
    pub fn get(&self, source: &str, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|l| l.key == key && (source == SOURCE_ANY || l.source == source))
            .map(|l| l.value.as_str())
    }

    pub fn has_source(&self, source: &str) -> bool {
        self.0.iter().any(|l| l.source == source)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Label> {
        self.0.iter()
    }
}
