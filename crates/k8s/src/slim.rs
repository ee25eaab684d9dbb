//! Objects read as a subsystem keeps them: only the fields it uses are
//! ever allocated. The API server sends every object with its managed
//! fields (a JSON tree per writer), annotations (kubectl's whole last
//! applied copy) and status; deserialized whole into k8s-openapi's types
//! and kept, a thousand Services and their slices held ~9 MB that nothing
//! read. Serde skips a field a struct does not name without allocating.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;

/// Deserializes an object's `metadata` keeping its identity and labels:
/// name, namespace, uid, labels, and the resource version a watch resumes
/// from (kube's watcher reads it off each object it passes on).
pub fn meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Kept {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        labels: Option<BTreeMap<String, String>>,
        resource_version: Option<String>,
    }
    let k = Kept::deserialize(d)?;
    Ok(ObjectMeta {
        name: k.name,
        namespace: k.namespace,
        uid: k.uid,
        labels: k.labels,
        resource_version: k.resource_version,
        ..Default::default()
    })
}

/// Makes `$slim`, a struct with a `metadata: ObjectMeta` field read with
/// [`meta`], a `kube::Resource` served at the API of k8s-openapi's `$full`,
/// so that `Api<$slim>` lists and watches it.
#[macro_export]
macro_rules! slim_resource {
    ($slim:ty, $full:ty) => {
        impl $crate::kube::Resource for $slim {
            type DynamicType = ();
            type Scope = <$full as $crate::k8s_openapi::Resource>::Scope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as $crate::k8s_openapi::Resource>::KIND.into()
            }
            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as $crate::k8s_openapi::Resource>::GROUP.into()
            }
            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as $crate::k8s_openapi::Resource>::VERSION.into()
            }
            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                <$full as $crate::k8s_openapi::Resource>::URL_PATH_SEGMENT.into()
            }
            fn meta(&self) -> &$crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(
                &mut self,
            ) -> &mut $crate::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Deserialize)]
    struct Slim {
        #[serde(deserialize_with = "meta")]
        metadata: ObjectMeta,
    }
    slim_resource!(Slim, k8s_openapi::api::core::v1::Service);

    #[test]
    fn keeps_identity_labels_and_version_and_nothing_else() {
        let s: Slim = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "42",
                "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "managedFields": [{"manager": "kubectl", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
            },
            "status": {"loadBalancer": {}},
        }))
        .unwrap();
        use kube::Resource as _;
        assert_eq!(s.meta().name.as_deref(), Some("web"));
        assert_eq!(s.meta().resource_version.as_deref(), Some("42"));
        assert_eq!(s.meta().labels.as_ref().unwrap()["app"], "web");
        assert!(s.meta().annotations.is_none() && s.meta().managed_fields.is_none());
        assert_eq!(
            <Slim as kube::Resource>::url_path(&(), Some("default")),
            "/api/v1/namespaces/default/services"
        );
    }
}
