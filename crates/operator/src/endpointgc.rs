//! Garbage collection of CiliumEndpoints whose pod is gone, as Cilium's
//! operator runs it (`cilium-endpoint-gc-interval`). An agent deletes the
//! CEPs of its pods itself, and Kubernetes collects those whose owner Pod
//! was deleted; this catches the rest: a node that went down with its
//! pods' CEPs, a pod that finished, a CEP written without an owner.
//!
//! A CEP is kept when one of its owners is still there: a Pod that has
//! not finished, a CiliumNode that exists, or an owner of another kind
//! (not ours to judge). Without a Pod owner, the pod of the CEP's own
//! namespace and name counts the same way. With an interval of 0 the
//! operator makes one pass that deletes every CEP, as Cilium's does when
//! endpoint CRDs are turned off.

use crate::metrics::Metrics;
use k8s::k8s_openapi::api::core::v1::Pod;
use k8s::kube::api::DynamicObject;
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use watch::Mirror;
use watch::Source;

/// What the collector keeps of a CEP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    uid: String,
    /// Owner references: kind and name.
    owners: Vec<(String, String)>,
}

fn endpoint(obj: &DynamicObject) -> Endpoint {
    Endpoint {
        uid: obj.uid().unwrap_or_default(),
        owners: obj
            .owner_references()
            .iter()
            .map(|o| (o.kind.clone(), o.name.clone()))
            .collect(),
    }
}

/// A pod counts while it has not finished.
fn running(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// What is known of the cluster: pods (`namespace/name` → not finished)
/// and CiliumNodes by name.
pub struct World<'a> {
    pub pods: &'a Mirror<bool>,
    pub nodes: &'a Mirror<()>,
}

/// Whether CEP `namespace/name` stays.
pub fn keep(world: &World, namespace: &str, name: &str, ep: &Endpoint) -> bool {
    let pod = |pod_name: &str| world.pods.get(&format!("{namespace}/{pod_name}")).copied();
    let mut pod_checked = false;
    for (kind, owner) in &ep.owners {
        match kind.as_str() {
            "Pod" => {
                pod_checked = true;
                match pod(owner) {
                    Some(true) => return true,
                    // finished: its CEP goes, whatever else owns it
                    Some(false) => return false,
                    None => {}
                }
            }
            "CiliumNode" => {
                if world.nodes.contains(owner) {
                    return true;
                }
            }
            _ => return true,
        }
    }
    !pod_checked && pod(name) == Some(true)
}

fn split(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

struct Collector {
    client: k8s::kube::Client,
    metrics: Arc<Metrics>,
}

impl Collector {
    async fn delete(&self, key: &str, ep: &Endpoint) {
        let (namespace, name) = split(key);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &k8s::cilium::endpoints());
        match crate::judged::delete(&api, name, Some(ep.uid.clone()), None).await {
            Ok(true) => {
                tracing::info!(
                    subsys = "endpoint-gc",
                    k8sNamespace = namespace,
                    ciliumEndpointName = name,
                    "Orphaned CiliumEndpoint is being garbage collected"
                );
                self.metrics.endpoint_gc(true);
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(subsys = "endpoint-gc", k8sNamespace = namespace, ciliumEndpointName = name, error = %e, "Unable to delete orphaned CiliumEndpoint");
                self.metrics.endpoint_gc(false);
            }
        }
    }
}

/// Collects orphaned CiliumEndpoints every `interval` until the operator
/// stops; with a zero interval, deletes every CiliumEndpoint once.
pub async fn run(client: k8s::kube::Client, interval: Duration, metrics: Arc<Metrics>) {
    let mut endpoint_events = ResourceSource::new(
        "CiliumEndpoints",
        Api::<DynamicObject>::all_with(client.clone(), &k8s::cilium::endpoints()),
        watcher::Config::default(),
    )
    .decode(|_, obj: &DynamicObject| Ok::<_, Infallible>(endpoint(obj)));
    let mut pod_events = ResourceSource::new(
        "Pods",
        Api::<Pod>::all(client.clone()),
        watcher::Config::default(),
    )
    .decode(|_, pod: &Pod| Ok::<_, Infallible>(running(pod)));
    let mut node_events = ResourceSource::new(
        "CiliumNodes",
        Api::<DynamicObject>::all_with(client.clone(), &k8s::cilium::nodes()),
        watcher::Config::default(),
    )
    .decode(|_, _: &DynamicObject| Ok::<_, Infallible>(()));
    let mut endpoints = Mirror::default();
    let mut pods = Mirror::default();
    let mut nodes = Mirror::default();
    let collector = Collector { client, metrics };
    let once = interval.is_zero();
    let mut tick = tokio::time::interval(if once {
        Duration::from_secs(1)
    } else {
        interval
    });
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            more = endpoints.follow(&mut endpoint_events) => if !more { return },
            more = pods.follow(&mut pod_events) => if !more { return },
            more = nodes.follow(&mut node_events) => if !more { return },
            _ = tick.tick(), if endpoints.listed() && pods.listed() && nodes.listed() => {
                let world = World { pods: &pods, nodes: &nodes };
                let orphans: Vec<(String, Endpoint)> = endpoints
                    .iter()
                    .filter(|(key, ep)| {
                        let (namespace, name) = split(key);
                        once || !keep(&world, namespace, name, ep)
                    })
                    .map(|(k, ep)| (k.clone(), ep.clone()))
                    .collect();
                for (key, ep) in &orphans {
                    collector.delete(key, ep).await;
                }
                if once {
                    tracing::info!(subsys = "endpoint-gc", deleted = orphans.len(), "cilium-endpoint-gc-interval is 0: deleted every CiliumEndpoint once");
                    return std::future::pending().await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(owners: &[(&str, &str)]) -> Endpoint {
        Endpoint {
            uid: "u".into(),
            owners: owners
                .iter()
                .map(|(k, n)| (k.to_string(), n.to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_cep_stays_while_an_owner_is_there_and_goes_with_its_pod() {
        let pods = Mirror::from_iter([("default/web", true), ("default/job", false)]);
        let nodes = Mirror::from_iter([("node1", ())]);
        let w = World {
            pods: &pods,
            nodes: &nodes,
        };
        assert!(keep(&w, "default", "web", &ep(&[("Pod", "web")])));
        assert!(!keep(&w, "default", "gone", &ep(&[("Pod", "gone")])));
        assert!(
            !keep(&w, "default", "job", &ep(&[("Pod", "job")])),
            "finished"
        );
        assert!(
            !keep(&w, "other", "web", &ep(&[("Pod", "web")])),
            "another namespace's pod"
        );
        // no owner: the pod of the same name
        assert!(keep(&w, "default", "web", &ep(&[])));
        assert!(!keep(&w, "default", "gone", &ep(&[])));
        assert!(!keep(&w, "default", "job", &ep(&[])));
        // a Pod owner that is gone is not saved by the same-named pod
        assert!(!keep(&w, "default", "web", &ep(&[("Pod", "old")])));
        assert!(keep(
            &w,
            "kube-system",
            "cilium-health",
            &ep(&[("CiliumNode", "node1")])
        ));
        assert!(!keep(
            &w,
            "kube-system",
            "h",
            &ep(&[("CiliumNode", "node9")])
        ));
        assert!(keep(
            &w,
            "default",
            "x",
            &ep(&[("Pod", "gone"), ("Deployment", "d")])
        ));
    }
}
