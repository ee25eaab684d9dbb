//! Cilium's custom resources as the API server serves them
//! (`cilium.io/v2`), for dynamic clients: one place spells each kind, and
//! CiliumIdentity objects as Cilium 1.16 writes and reads them.

use kube::api::{ApiResource, DynamicObject};
use std::collections::BTreeMap;

fn v2(kind: &str, plural: &str) -> ApiResource {
    ApiResource {
        group: "cilium.io".into(),
        version: "v2".into(),
        api_version: "cilium.io/v2".into(),
        kind: kind.into(),
        plural: plural.into(),
    }
}

/// `CiliumIdentity` (cluster-scoped, named after the numeric identity).
pub fn identities() -> ApiResource {
    v2("CiliumIdentity", "ciliumidentities")
}

/// `CiliumEndpoint` (namespaced, named after its pod).
pub fn endpoints() -> ApiResource {
    v2("CiliumEndpoint", "ciliumendpoints")
}

/// `CiliumNetworkPolicy` (namespaced).
pub fn network_policies() -> ApiResource {
    v2("CiliumNetworkPolicy", "ciliumnetworkpolicies")
}

/// `CiliumClusterwideNetworkPolicy` (cluster-scoped).
pub fn clusterwide_network_policies() -> ApiResource {
    v2(
        "CiliumClusterwideNetworkPolicy",
        "ciliumclusterwidenetworkpolicies",
    )
}

/// `CiliumNode` (cluster-scoped, named after its Node).
pub fn nodes() -> ApiResource {
    v2("CiliumNode", "ciliumnodes")
}

/// The annotation with which the operator marks an identity no endpoint
/// uses; an agent that takes the identity up again removes it.
pub const HEARTBEAT_ANNOTATION: &str = "io.cilium.heartbeat";

/// The key of the labels map (`security-labels`).
const SECURITY_LABELS: &str = "security-labels";
/// Label keys under this prefix are not copied to metadata labels: their
/// values are users' and may not be valid there (Cilium skips them too).
const NAMESPACE_LABELS: &str = "io.cilium.k8s.namespace.labels.";
/// The longest metadata label value (and name part of a key) Kubernetes takes.
const MAX_LABEL: usize = 63;

/// `source:key=value` labels as `security-labels`: `source:key` → value.
fn security_labels(labels: &[String]) -> BTreeMap<String, String> {
    labels
        .iter()
        .map(|l| match l.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (l.clone(), String::new()),
        })
        .collect()
}

fn valid_label_value(v: &str) -> bool {
    v.len() <= MAX_LABEL
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && v.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && v.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
}

/// The metadata labels Cilium 1.16 sets: the `k8s:` labels without that
/// prefix, except the namespace's own labels; ones Kubernetes would
/// refuse are left out rather than failing the identity.
fn metadata_labels(labels: &[String]) -> BTreeMap<String, String> {
    security_labels(labels)
        .into_iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("k8s:")?.to_owned(), v)))
        .filter(|(k, v)| {
            let name = k.rsplit('/').next().unwrap_or(k);
            !k.starts_with(NAMESPACE_LABELS)
                && !name.is_empty()
                && valid_label_value(name)
                && valid_label_value(v)
        })
        .collect()
}

/// Identity `id` with `labels` as a CiliumIdentity.
pub fn identity_object(id: u32, labels: &[String]) -> DynamicObject {
    let mut obj = DynamicObject::new(&id.to_string(), &identities());
    obj.metadata.labels = Some(metadata_labels(labels));
    obj.data = serde_json::json!({ SECURITY_LABELS: security_labels(labels) });
    obj
}

#[derive(Debug, thiserror::Error)]
#[error("CiliumIdentity has no security-labels map")]
pub struct NoLabels;

/// The labels of a CiliumIdentity, as `source:key=value` strings.
pub fn identity_labels(obj: &DynamicObject) -> Result<Vec<String>, NoLabels> {
    let map = obj.data[SECURITY_LABELS].as_object().ok_or(NoLabels)?;
    Ok(map
        .iter()
        .map(|(k, v)| match v.as_str().unwrap_or_default() {
            "" => k.clone(),
            v => format!("{k}={v}"),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_written_as_cilium_writes_it_and_read_back() {
        let labels: Vec<String> = [
            "k8s:app=web",
            "k8s:io.kubernetes.pod.namespace=default",
            "k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name=default",
            "k8s:io.cilium.k8s.policy.cluster=default",
            "unspec:flag",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let obj = identity_object(300, &labels);
        assert_eq!(obj.metadata.name.as_deref(), Some("300"));
        let meta = obj.metadata.labels.clone().unwrap();
        assert_eq!(meta["io.kubernetes.pod.namespace"], "default");
        assert_eq!(meta["app"], "web");
        assert_eq!(
            meta.len(),
            3,
            "no namespace labels, no other sources: {meta:?}"
        );
        assert_eq!(obj.data["security-labels"]["k8s:app"], "web");
        assert_eq!(obj.data["security-labels"]["unspec:flag"], "");
        let mut back = identity_labels(&obj).unwrap();
        back.sort();
        let mut labels = labels;
        labels.sort();
        assert_eq!(back, labels);
    }
}
