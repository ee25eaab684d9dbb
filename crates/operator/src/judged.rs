//! Deleting exactly the object a collector judged: preconditions on its
//! UID, and on its resourceVersion when the verdict read the object's
//! contents, so an object recreated or changed since is left for the next
//! run instead of being deleted on stale grounds.

use k8s::kube::api::{DeleteParams, DynamicObject, Preconditions, PropagationPolicy};
use k8s::kube::Api;

/// Whether an API error means the object changed or went meanwhile.
pub fn moved_on(e: &k8s::kube::Error) -> bool {
    matches!(e, k8s::kube::Error::Api(s) if s.code == 404 || s.code == 409)
}

/// Deletes `name` if it is still `uid` (at `resource_version`, if given);
/// false when it changed or went meanwhile.
pub async fn delete(
    api: &Api<DynamicObject>,
    name: &str,
    uid: Option<String>,
    resource_version: Option<String>,
) -> Result<bool, k8s::kube::Error> {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid,
            resource_version,
        }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(true),
        Err(e) if moved_on(&e) => Ok(false),
        Err(e) => Err(e),
    }
}
