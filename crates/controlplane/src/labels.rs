//! A pod's identity labels as Cilium derives them from its Pod and
//! Namespace objects, and Cilium's default filter of which labels count
//! for identity (pkg/labelsfilter): `pod-template-hash` and friends would
//! give every ReplicaSet generation an identity of its own.

use std::collections::BTreeMap;

/// Labels Cilium keeps for itself: a pod cannot set them.
const CILIUM_OWNED: &str = "io.cilium.k8s";
const NAMESPACE_LABEL: &str = "io.kubernetes.pod.namespace";
const NAMESPACE_LABELS_PREFIX: &str = "io.cilium.k8s.namespace.labels";
const SERVICE_ACCOUNT_LABEL: &str = "io.cilium.k8s.policy.serviceaccount";
const CLUSTER_LABEL: &str = "io.cilium.k8s.policy.cluster";

/// Keys the default filter keeps although an ignore rule matches them
/// (a longer include wins).
const INCLUDE: &[&str] = &[
    NAMESPACE_LABEL,
    NAMESPACE_LABELS_PREFIX,
    "app.kubernetes.io",
    CLUSTER_LABEL,
];

/// Key prefixes the default filter leaves out of identities.
const IGNORE: &[&str] = &[
    "io.kubernetes",
    "kubernetes.io",
    "statefulset.kubernetes.io/pod-name",
    "apps.kubernetes.io/pod-index",
    "batch.kubernetes.io/job-completion-index",
    "batch.kubernetes.io/controller-uid",
    "k8s.io",
    "pod-template-generation",
    "pod-template-hash",
    "controller-revision-hash",
    "controller-uid",
    "annotation",
    "etcd_node",
];

/// Cilium's `.*beta.kubernetes.io` rule: anywhere in the key.
const IGNORE_ANYWHERE: &str = "beta.kubernetes.io";

/// Whether the default filter keeps `source:key=value` for identity: the
/// longest matching include must be longer than the shortest matching
/// ignore; what nothing ignores is kept.
pub fn relevant(label: &str) -> bool {
    let (source, rest) = label.split_once(':').unwrap_or(("", label));
    if source == "reserved" {
        return true;
    }
    let key = rest.split_once('=').map_or(rest, |(k, _)| k);
    let include = INCLUDE
        .iter()
        .filter(|p| key.starts_with(*p))
        .map(|p| p.len())
        .max()
        .unwrap_or(0);
    let ignore = IGNORE
        .iter()
        .filter(|p| key.starts_with(*p))
        .map(|p| p.len())
        .chain(
            key.contains(IGNORE_ANYWHERE)
                .then_some(IGNORE_ANYWHERE.len() + 2),
        )
        .min();
    match ignore {
        None => true,
        Some(ignore) => include > ignore,
    }
}

/// What identity derivation reads of a Pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodMeta {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub service_account: String,
}

/// The identity labels of `pod` in a namespace labeled `namespace_labels`
/// in cluster `cluster`, sorted, all of source `k8s`.
pub fn pod_identity_labels(
    pod: &PodMeta,
    namespace_labels: &BTreeMap<String, String>,
    cluster: &str,
) -> Vec<String> {
    let mut raw: BTreeMap<String, String> = pod
        .labels
        .iter()
        .filter(|(k, _)| !k.starts_with(CILIUM_OWNED))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in namespace_labels {
        raw.insert(format!("{NAMESPACE_LABELS_PREFIX}.{k}"), v.clone());
    }
    raw.insert(NAMESPACE_LABEL.into(), pod.namespace.clone());
    if !pod.service_account.is_empty() {
        raw.insert(SERVICE_ACCOUNT_LABEL.into(), pod.service_account.clone());
    }
    raw.insert(CLUSTER_LABEL.into(), cluster.into());
    raw.into_iter()
        .map(|(k, v)| format!("k8s:{k}={v}"))
        .filter(|l| relevant(l))
        .collect()
}

/// The host endpoint's labels for a node labeled `node_labels`: those the
/// default filter keeps, as `k8s:key[=value]`, and reserved:host, sorted.
pub fn host_endpoint_labels(node_labels: &BTreeMap<String, String>) -> Vec<String> {
    let mut out: Vec<String> = node_labels
        .iter()
        .map(|(k, v)| {
            if v.is_empty() {
                format!("k8s:{k}")
            } else {
                format!("k8s:{k}={v}")
            }
        })
        .filter(|l| relevant(l))
        .chain(std::iter::once(crate::endpoint::HOST_LABEL.to_owned()))
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_node_gives_the_host_endpoint_its_role_labels_not_its_name() {
        let node = map(&[
            ("kubernetes.io/hostname", "node1"),
            ("beta.kubernetes.io/arch", "amd64"),
            ("node-role.kubernetes.io/control-plane", ""),
            ("topology.kubernetes.io/zone", "a"),
            ("rack", "r1"),
        ]);
        assert_eq!(
            host_endpoint_labels(&node),
            [
                "k8s:node-role.kubernetes.io/control-plane",
                "k8s:rack=r1",
                "k8s:topology.kubernetes.io/zone=a",
                "reserved:host"
            ]
        );
    }

    #[test]
    fn the_default_filter_drops_generation_labels_and_keeps_the_rest() {
        for keep in [
            "k8s:app=web",
            "k8s:io.kubernetes.pod.namespace=prod",
            "k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name=prod",
            "k8s:app.kubernetes.io/name=web",
            "k8s:io.cilium.k8s.policy.serviceaccount=default",
            "reserved:host",
        ] {
            assert!(relevant(keep), "{keep}");
        }
        for drop in [
            "k8s:pod-template-hash=5d8f",
            "k8s:io.kubernetes.pod.name=web-1",
            "k8s:kubernetes.io/hostname=node1",
            "k8s:statefulset.kubernetes.io/pod-name=db-0",
            "k8s:failure-domain.beta.kubernetes.io/zone=a",
            "k8s:controller-revision-hash=7",
        ] {
            assert!(!relevant(drop), "{drop}");
        }
    }

    #[test]
    fn a_pod_gets_its_namespace_service_account_and_cluster() {
        let pod = PodMeta {
            namespace: "prod".into(),
            name: "web-5d8f-x".into(),
            uid: "u".into(),
            labels: map(&[
                ("app", "web"),
                ("pod-template-hash", "5d8f"),
                ("io.cilium.k8s.policy.cluster", "forged"),
            ]),
            service_account: "web".into(),
        };
        let ns = map(&[("kubernetes.io/metadata.name", "prod"), ("team", "a")]);
        assert_eq!(
            pod_identity_labels(&pod, &ns, "default"),
            [
                "k8s:app=web",
                "k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name=prod",
                "k8s:io.cilium.k8s.namespace.labels.team=a",
                "k8s:io.cilium.k8s.policy.cluster=default",
                "k8s:io.cilium.k8s.policy.serviceaccount=web",
                "k8s:io.kubernetes.pod.namespace=prod",
            ]
        );
    }
}
