//! Policies from Kubernetes: CiliumNetworkPolicy,
//! CiliumClusterwideNetworkPolicy and NetworkPolicy objects, each kind a
//! source the policy subsystem follows. An object the parser refuses is
//! logged with its name and the reason, and changes nothing else.

use crate::k8s::connection::Kubernetes;
use controlplane::policies::{Origin, Policies, PolicyError, Stored};
use controlplane::tasks::Tasks;
use k8s::kube::api::{ApiResource, DynamicObject};
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
use std::sync::Arc;
use watch::Source;

/// A policy kind and where the API server serves it.
#[derive(Clone, Copy)]
struct Kind {
    kind: &'static str,
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    /// Its name in `cilium status`'s `Kubernetes APIs`.
    api_name: &'static str,
}

const KINDS: [Kind; 3] = [
    Kind {
        kind: "CiliumNetworkPolicy",
        group: "cilium.io",
        version: "v2",
        plural: "ciliumnetworkpolicies",
        api_name: "cilium/v2::CiliumNetworkPolicy",
    },
    Kind {
        kind: "CiliumClusterwideNetworkPolicy",
        group: "cilium.io",
        version: "v2",
        plural: "ciliumclusterwidenetworkpolicies",
        api_name: "cilium/v2::CiliumClusterwideNetworkPolicy",
    },
    Kind {
        kind: "NetworkPolicy",
        group: "networking.k8s.io",
        version: "v1",
        plural: "networkpolicies",
        api_name: "networking.k8s.io/v1::NetworkPolicy",
    },
];

impl Kind {
    fn api_version(&self) -> String {
        format!("{}/{}", self.group, self.version)
    }

    fn resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.into(),
            version: self.version.into(),
            api_version: self.api_version(),
            kind: self.kind.into(),
            plural: self.plural.into(),
        }
    }
}

/// The object as the policy parser reads a document: its kind, name,
/// namespace and UID (which the policy's labels are made of) and its
/// rules, without the server's bookkeeping (resource version, managed
/// fields), so an unchanged policy reads the same after a relist.
fn document(obj: &DynamicObject, kind: &Kind) -> serde_json::Value {
    let mut doc = serde_json::json!({
        "apiVersion": kind.api_version(),
        "kind": kind.kind,
        "metadata": {
            "name": obj.name_any(),
            "namespace": obj.namespace(),
            "uid": obj.uid(),
        },
    });
    for field in ["spec", "specs"] {
        if let Some(v) = obj.data.get(field) {
            doc[field] = v.clone();
        }
    }
    doc
}

fn decode(obj: &DynamicObject, kind: &Kind) -> Result<Stored, PolicyError> {
    let text = serde_json::to_string(&document(obj, kind))?;
    let mut docs = policy::parse_documents(&text)?;
    if docs.len() != 1 {
        return Err(PolicyError::NotOne(docs.len()));
    }
    Ok(Stored::of(&docs.remove(0)))
}

/// Follows the three kinds; policy maps change once all are listed.
pub fn follow(policies: &Arc<Policies>, kubernetes: &Kubernetes, tasks: &Tasks) {
    let mut listed = Vec::new();
    for kind in KINDS {
        let api: Api<DynamicObject> = Api::all_with(kubernetes.client(), &kind.resource());
        let source = ResourceSource::new(kind.kind, api, watcher::Config::default());
        let source = kubernetes
            .watched(kind.api_name, source)
            .decode(move |_, obj: &DynamicObject| decode(obj, &kind));
        let origin = Origin::Kubernetes { kind: kind.kind };
        listed.push(policies.follow(kind.kind, origin, source, tasks));
    }
    policies.sync_after(listed, tasks);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: &Kind, json: serde_json::Value) -> DynamicObject {
        let mut obj: DynamicObject = serde_json::from_value(json).unwrap();
        obj.types = Some(k8s::kube::api::TypeMeta {
            api_version: kind.api_version(),
            kind: kind.kind.into(),
        });
        obj
    }

    #[test]
    fn objects_become_documents_named_after_them() {
        let cnp = object(
            &KINDS[0],
            serde_json::json!({
                "metadata": {"name": "db", "namespace": "prod", "uid": "u1", "resourceVersion": "7",
                             "managedFields": [{"manager": "kubectl"}]},
                "spec": {"endpointSelector": {"matchLabels": {"app": "db"}},
                         "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "web"}}]}]},
            }),
        );
        let stored = decode(&cnp, &KINDS[0]).unwrap();
        let origin = Origin::Kubernetes {
            kind: "CiliumNetworkPolicy",
        };
        assert_eq!(origin.key(&stored).as_deref(), Some("prod/db"));
        assert!(!stored.text.contains("resourceVersion"), "{}", stored.text);
        let other = Origin::Kubernetes {
            kind: "NetworkPolicy",
        };
        assert_eq!(
            other.key(&stored),
            None,
            "another kind's store does not own it"
        );

        let bad = object(
            &KINDS[0],
            serde_json::json!({"metadata": {"name": "bad", "namespace": "prod"},
                               "spec": {"ingress": []}}),
        );
        assert!(decode(&bad, &KINDS[0]).is_err(), "no endpointSelector");
    }
}
