//! Pods on this node and all Namespaces, as Cilium's pod and namespace
//! watchers keep them: what a new endpoint's identity labels are made of
//! (`PodLabels`), and a relabel of the pod's endpoints when the pod's or
//! its namespace's labels change, so its identity and its peers' verdicts
//! follow.

use crate::k8s::connection::Kubernetes;
use controlplane::endpoint::{Endpoints, LabelsUnknown, PodLabels};
use controlplane::labels::{pod_identity_labels, PodMeta};
use controlplane::ports::PortFuture;
use controlplane::tasks::Tasks;
use k8s::k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use watch::{Change, Source};

type Labels = BTreeMap<String, String>;

/// A pod as the caches keep it: its part in its identity, and the
/// workload that controls it (what Hubble's flows name).
#[derive(Clone, Debug, PartialEq)]
struct Cached {
    meta: PodMeta,
    /// (kind, name)
    workload: Option<(String, String)>,
}

#[derive(Default)]
struct Known {
    /// By the watch's key, `namespace/name`.
    pods: BTreeMap<String, Cached>,
    namespaces: BTreeMap<String, Labels>,
}

/// The caches, shared by the watchers that fill them and the endpoint
/// manager that asks them.
pub struct PodCache {
    client: k8s::kube::Client,
    cluster: String,
    known: Mutex<Known>,
}

#[derive(Debug, thiserror::Error)]
enum LookupError {
    #[error("getting {what} {name}: {source}")]
    Get {
        what: &'static str,
        name: String,
        source: k8s::kube::Error,
    },
    #[error("pod {0} has UID {1}, not the {2} the runtime named")]
    OtherPod(String, String, String),
}

/// A pod while it runs: None for a pod that is done (Cilium treats
/// Succeeded and Failed pods as deleted).
fn running(pod: &Pod) -> Option<Cached> {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    (!matches!(phase, Some("Succeeded" | "Failed"))).then(|| Cached {
        meta: meta(pod),
        workload: workload(pod),
    })
}

/// The workload controlling a pod made by one, as Cilium 1.16 derives
/// it: its controller, a ReplicaSet named after the pod template's hash
/// being its Deployment's, a Job named `<name>-<schedule time>` its
/// CronJob's. (kind, name).
fn workload(pod: &Pod) -> Option<(String, String)> {
    if pod
        .metadata
        .generate_name
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        return None;
    }
    let owner = pod
        .owner_references()
        .iter()
        .find(|r| r.controller == Some(true))?;
    let hash = pod
        .labels()
        .get("pod-template-hash")
        .filter(|h| !h.is_empty());
    let (kind, name) = (owner.kind.as_str(), owner.name.as_str());
    Some(match (kind, hash) {
        ("ReplicaSet", Some(h)) if name.ends_with(h.as_str()) => (
            "Deployment".into(),
            name.strip_suffix(&format!("-{h}"))
                .unwrap_or(name)
                .to_owned(),
        ),
        ("ReplicationController", _) if pod.labels().contains_key("deploymentconfig") => (
            "DeploymentConfig".into(),
            pod.labels()["deploymentconfig"].clone(),
        ),
        ("Job", _) => match name.rsplit_once('-') {
            Some((cronjob, stamp))
                if (8..=10).contains(&stamp.len()) && stamp.bytes().all(|b| b.is_ascii_digit()) =>
            {
                ("CronJob".into(), cronjob.to_owned())
            }
            _ => (kind.to_owned(), name.to_owned()),
        },
        _ => (kind.to_owned(), name.to_owned()),
    })
}

/// A pod's part in its identity.
fn meta(pod: &Pod) -> PodMeta {
    PodMeta {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
        labels: pod.labels().clone(),
        service_account: pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
    }
}

impl PodCache {
    pub fn new(kubernetes: &Kubernetes, cluster: &str) -> Arc<Self> {
        Arc::new(Self {
            client: kubernetes.client(),
            cluster: cluster.to_owned(),
            known: Mutex::default(),
        })
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().expect("pod cache lock")
    }

    /// The identity labels of `namespace/name` from the caches, when both
    /// its pod and namespace are in them.
    fn cached(&self, namespace: &str, name: &str) -> Option<(PodMeta, Vec<String>)> {
        let known = self.known();
        let pod = &known.pods.get(&format!("{namespace}/{name}"))?.meta;
        let ns = known.namespaces.get(namespace)?;
        Some((pod.clone(), pod_identity_labels(pod, ns, &self.cluster)))
    }

    /// Asks the API server for what the caches do not have yet (a pod
    /// just bound to this node races its watch event), as Cilium does.
    async fn fetch(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<(PodMeta, Vec<String>), LookupError> {
        let get = |what, name: &str| {
            let name = name.to_owned();
            move |source| LookupError::Get { what, name, source }
        };
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let pod = pods
            .get(name)
            .await
            .map_err(get("pod", &format!("{namespace}/{name}")))?;
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let ns = namespaces
            .get(namespace)
            .await
            .map_err(get("namespace", namespace))?;
        let pod = meta(&pod);
        let labels = pod_identity_labels(&pod, ns.labels(), &self.cluster);
        Ok((pod, labels))
    }

    async fn lookup(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<Vec<String>, LookupError> {
        if let Some((pod, labels)) = self.cached(namespace, name) {
            if uid.is_empty() || pod.uid == uid {
                return Ok(labels);
            }
            tracing::debug!(
                subsys = "k8s-watcher",
                k8sNamespace = namespace,
                k8sPodName = name,
                "Cached pod is an older one, asking the API server"
            );
        }
        let (pod, labels) = self.fetch(namespace, name).await?;
        if !uid.is_empty() && pod.uid != uid {
            return Err(LookupError::OtherPod(
                format!("{namespace}/{name}"),
                pod.uid,
                uid.to_owned(),
            ));
        }
        Ok(labels)
    }
}

impl PodLabels for PodCache {
    fn resolve<'a>(
        &'a self,
        namespace: &'a str,
        pod: &'a str,
        uid: &'a str,
    ) -> PortFuture<'a, Result<Vec<String>, LabelsUnknown>> {
        Box::pin(async move {
            self.lookup(namespace, pod, uid)
                .await
                .map_err(|e| LabelsUnknown(Box::new(e)))
        })
    }
}

impl crate::hubble::PodWorkloads for PodCache {
    fn workload(&self, namespace: &str, pod: &str) -> Option<hubble::flow::Workload> {
        let known = self.known();
        let (kind, name) = known
            .pods
            .get(&format!("{namespace}/{pod}"))?
            .workload
            .clone()?;
        Some(hubble::flow::Workload { name, kind })
    }
}

/// Relabels the local endpoints of pods in `namespace` (of pod `name`
/// only, when given) whose labels are no longer their pod's.
async fn relabel(
    cache: &PodCache,
    endpoints: &Endpoints,
    namespace: &str,
    name: Option<&str>,
) -> Result<(), controlplane::endpoint::EndpointError> {
    for ep in endpoints.list() {
        if ep.k8s_namespace != namespace || name.is_some_and(|n| n != ep.k8s_pod_name) {
            continue;
        }
        let Some((pod, labels)) = cache.cached(namespace, &ep.k8s_pod_name) else {
            continue;
        };
        if !ep.k8s_uid.is_empty() && ep.k8s_uid != pod.uid {
            // a pod of the same name that is not this endpoint's
            continue;
        }
        if ep.labels != labels {
            tracing::info!(subsys = "k8s-watcher", k8sNamespace = namespace, k8sPodName = %ep.k8s_pod_name, endpointID = ep.id, "Labels changed, updating the endpoint's identity");
            endpoints.relabel(ep.id, labels).await?;
        }
    }
    Ok(())
}

/// Follows this node's Pods and all Namespaces into `cache`, relabeling
/// `endpoints` as their labels change.
pub fn follow(
    cache: &Arc<PodCache>,
    endpoints: Arc<Endpoints>,
    kubernetes: &Kubernetes,
    node_name: &str,
    tasks: &Tasks,
) {
    let on_node = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let pods = ResourceSource::new("Pods", Api::<Pod>::all(kubernetes.client()), on_node);
    let pods = kubernetes
        .watched("core/v1::Pods", pods)
        .decode(|_, pod: &Pod| Ok::<_, Infallible>(running(pod)));
    let (this, eps) = (Arc::clone(cache), Arc::clone(&endpoints));
    let handler = move |change: Change<String, Option<Cached>>| {
        let (this, eps) = (Arc::clone(&this), Arc::clone(&eps));
        async move {
            let (namespace, name) = match change {
                Change::Upsert {
                    key,
                    new: Some(pod),
                    ..
                } => {
                    let at = (pod.meta.namespace.clone(), pod.meta.name.clone());
                    this.known().pods.insert(key, pod);
                    at
                }
                Change::Upsert { key, new: None, .. } | Change::Delete { key, .. } => {
                    this.known().pods.remove(&key);
                    return Ok(());
                }
                Change::Synced => return Ok(()),
            };
            relabel(&this, &eps, &namespace, Some(&name)).await
        }
    };
    tasks.spawn("k8s-pods", watch::Store::new("pods").run(pods, handler));

    let namespaces = ResourceSource::new(
        "Namespaces",
        Api::<Namespace>::all(kubernetes.client()),
        watcher::Config::default(),
    );
    let namespaces = kubernetes
        .watched("core/v1::Namespace", namespaces)
        .decode(|_, ns: &Namespace| Ok::<_, Infallible>(ns.labels().clone()));
    let this = Arc::clone(cache);
    let handler = move |change: Change<String, Labels>| {
        let (this, eps) = (Arc::clone(&this), Arc::clone(&endpoints));
        async move {
            match change {
                Change::Upsert { key, new, .. } => {
                    this.known().namespaces.insert(key.clone(), new);
                    relabel(&this, &eps, &key, None).await
                }
                Change::Delete { key, .. } => {
                    this.known().namespaces.remove(&key);
                    Ok(())
                }
                Change::Synced => Ok(()),
            }
        }
    };
    tasks.spawn(
        "k8s-namespaces",
        watch::Store::new("namespaces").run(namespaces, handler),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(generate_name: &str, owner: Option<(&str, &str)>, hash: Option<&str>) -> Pod {
        let mut labels = serde_json::json!({});
        if let Some(h) = hash {
            labels["pod-template-hash"] = h.into();
        }
        let owners: Vec<serde_json::Value> = owner
            .into_iter()
            .map(|(kind, name)| {
                serde_json::json!({"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": "u", "controller": true})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default", "generateName": generate_name,
                         "labels": labels, "ownerReferences": owners},
        }))
        .unwrap()
    }

    #[test]
    fn workloads_are_named_as_cilium_names_them() {
        let w = |p: &Pod| workload(p);
        let pair = |k: &str, n: &str| Some((k.to_owned(), n.to_owned()));
        assert_eq!(
            w(&pod(
                "web-5d8f-",
                Some(("ReplicaSet", "web-5d8f")),
                Some("5d8f")
            )),
            pair("Deployment", "web")
        );
        assert_eq!(
            w(&pod("rs-", Some(("ReplicaSet", "rs")), None)),
            pair("ReplicaSet", "rs")
        );
        assert_eq!(
            w(&pod(
                "nightly-28123456-",
                Some(("Job", "nightly-28123456")),
                None
            )),
            pair("CronJob", "nightly")
        );
        assert_eq!(
            w(&pod("cilium-", Some(("DaemonSet", "cilium")), None)),
            pair("DaemonSet", "cilium")
        );
        assert_eq!(
            w(&pod("", Some(("DaemonSet", "cilium")), None)),
            None,
            "not generated"
        );
        assert_eq!(w(&pod("x-", None, None)), None, "no controller");
    }
}
