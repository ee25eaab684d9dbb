//! CiliumEndpoints both ways. Out: one per local pod endpoint (Cilium's
//! `sync-to-k8s-ciliumendpoint`), so `kubectl get cep` shows what `cilium
//! endpoint list` does: created with the endpoint, its status replaced
//! when it changes, deleted with it; one task mirrors the whole table,
//! woken by every endpoint that comes or goes, and every 10 s to retry
//! what failed. In: every node's CEPs, whose addresses, identities and
//! nodes the ipcache learns (this node's own are skipped).

use crate::k8s::connection::Kubernetes;
use api::endpoint::EndpointState;
use controlplane::endpoint::{Endpoint, Endpoints};
use controlplane::ipsync::{IpIdentityPair, RemoteEndpoints};
use controlplane::tasks::Tasks;
use k8s::k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s::kube::api::{
    ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions,
};
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use watch::Source;

/// How often a failed write is tried again (Cilium's controller interval).
const RETRY: Duration = Duration::from_secs(10);

fn resource() -> ApiResource {
    k8s::cilium::endpoints()
}

/// What Cilium 1.16 reports as a CEP's state: the transitional states of
/// a working endpoint are all `ready`.
fn cep_state(s: EndpointState) -> &'static str {
    match s {
        EndpointState::WaitingForIdentity | EndpointState::NotReady | EndpointState::Invalid => {
            s.as_str()
        }
        _ => "ready",
    }
}

/// The status Cilium writes for an endpoint (1.16 writes no policy,
/// visibility, controllers, health or log).
pub fn status(ep: &Endpoint, node_ip: Option<IpAddr>) -> serde_json::Value {
    let api = ep.to_api();
    let ids = &api.status.external_identifiers;
    serde_json::json!({
        "id": ep.id,
        "external-identifiers": {
            "cni-attachment-id": ids.cni_attachment_id,
            "container-id": ids.container_id,
            "k8s-namespace": ep.k8s_namespace,
            "k8s-pod-name": ep.k8s_pod_name,
            "pod-name": ep.pod_name(),
        },
        "identity": { "id": ep.identity, "labels": ep.identity_labels() },
        "networking": {
            "addressing": [addressing(ep)],
            "node": node_ip.map(|ip| ip.to_string()).unwrap_or_default(),
        },
        "encryption": {},
        "state": cep_state(ep.state),
    })
}

/// The endpoint's address pair (Cilium's `AddressPair`: one entry with
/// both families).
fn addressing(ep: &Endpoint) -> serde_json::Value {
    let mut pair = serde_json::json!({});
    if let Some(v4) = ep.ipv4 {
        pair["ipv4"] = v4.to_string().into();
    }
    if let Some(v6) = ep.ipv6 {
        pair["ipv6"] = v6.to_string().into();
    }
    pair
}

/// The pod's labels, as the CEP carries them: the endpoint's `k8s:`
/// labels without the namespace one.
fn pod_labels(ep: &Endpoint) -> BTreeMap<String, String> {
    ep.labels
        .iter()
        .filter_map(|l| l.strip_prefix("k8s:"))
        .filter(|l| {
            !l.starts_with("io.kubernetes.pod.namespace=") && !l.starts_with("io.cilium.k8s.")
        })
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A CEP this agent wrote: its UID and the status it last wrote.
struct Written {
    uid: String,
    status: serde_json::Value,
    labels: BTreeMap<String, String>,
}

struct Mirror {
    client: k8s::kube::Client,
    node_ip: Option<IpAddr>,
    written: BTreeMap<(String, String), Written>,
}

impl Mirror {
    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &resource())
    }

    /// The CEPs a previous run of this agent left (their node is ours):
    /// updated or deleted like the ones written in this run.
    async fn adopt(&mut self) -> Result<(), k8s::kube::Error> {
        let Some(node_ip) = self.node_ip else {
            return Ok(());
        };
        let all: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource());
        for cep in all.list(&Default::default()).await? {
            let node = cep.data["status"]["networking"]["node"]
                .as_str()
                .unwrap_or("");
            if node == node_ip.to_string() {
                let key = (cep.namespace().unwrap_or_default(), cep.name_any());
                let uid = cep.uid().unwrap_or_default();
                let status = cep.data["status"].clone();
                let labels = cep.labels().clone();
                self.written.insert(
                    key,
                    Written {
                        uid,
                        status,
                        labels,
                    },
                );
            }
        }
        Ok(())
    }

    /// Brings the CEPs to the table; returns whether everything worked.
    async fn reconcile(&mut self, endpoints: &Endpoints) -> bool {
        let desired: BTreeMap<(String, String), Endpoint> = endpoints
            .list()
            .into_iter()
            .filter(|ep| !ep.k8s_pod_name.is_empty())
            .map(|ep| ((ep.k8s_namespace.clone(), ep.k8s_pod_name.clone()), ep))
            .collect();
        let mut ok = true;
        for (key, ep) in &desired {
            let status = status(ep, self.node_ip);
            if self.written.get(key).is_some_and(|w| w.status == status) {
                continue;
            }
            let had = self.written.get(key).map(|w| &w.labels);
            match self.write(key, ep, &status, had).await {
                Ok(uid) => {
                    let labels = pod_labels(ep);
                    self.written.insert(
                        key.clone(),
                        Written {
                            uid,
                            status,
                            labels,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(subsys = "endpointsynchronizer", namespace = %key.0, name = %key.1, error = %e, "Unable to write CiliumEndpoint");
                    self.written.remove(key);
                    ok = false;
                }
            }
        }
        let gone: Vec<(String, String)> = self
            .written
            .keys()
            .filter(|k| !desired.contains_key(*k))
            .cloned()
            .collect();
        for key in gone {
            let uid = self.written[&key].uid.clone();
            let dp = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match self.api(&key.0).delete(&key.1, &dp).await {
                Ok(_) => {}
                // gone already, or no longer ours
                Err(k8s::kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => {
                    tracing::warn!(subsys = "endpointsynchronizer", namespace = %key.0, name = %key.1, error = %e, "Unable to delete CiliumEndpoint");
                    ok = false;
                    continue;
                }
            }
            self.written.remove(&key);
        }
        ok
    }

    /// Creates the CEP, or replaces the status of the one that is there;
    /// returns its UID.
    async fn write(
        &self,
        (namespace, name): &(String, String),
        ep: &Endpoint,
        status: &serde_json::Value,
        had: Option<&BTreeMap<String, String>>,
    ) -> Result<String, k8s::kube::Error> {
        let api = self.api(namespace);
        let mut obj = DynamicObject::new(name, &resource()).within(namespace);
        obj.metadata.labels = Some(pod_labels(ep));
        if !ep.k8s_uid.is_empty() {
            // collected with its pod, as Cilium's are
            obj.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: ep.k8s_pod_name.clone(),
                uid: ep.k8s_uid.clone(),
                ..Default::default()
            }]);
        }
        obj.data = serde_json::json!({ "status": status });
        match api.create(&PostParams::default(), &obj).await {
            Ok(created) => return Ok(created.uid().unwrap_or_default()),
            Err(k8s::kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
        // CiliumEndpoint has no status subresource: the object is patched,
        // its labels kept the pod's (Cilium's sync-pod-labels); a label the
        // pod lost is removed by a null
        let mut labels = serde_json::Map::new();
        for gone in had.into_iter().flat_map(BTreeMap::keys) {
            labels.insert(gone.clone(), serde_json::Value::Null);
        }
        for (k, v) in pod_labels(ep) {
            labels.insert(k, v.into());
        }
        let patch = serde_json::json!({
            "metadata": { "labels": labels },
            "status": status,
        });
        let patched = api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(patched.uid().unwrap_or_default())
    }
}

/// Starts the task that keeps the CEPs of this node's endpoints.
pub fn mirror(
    endpoints: Arc<Endpoints>,
    kubernetes: &Kubernetes,
    node_ip: Option<IpAddr>,
    tasks: &Tasks,
) {
    let mut mirror = Mirror {
        client: kubernetes.client(),
        node_ip,
        written: BTreeMap::new(),
    };
    let mut changes = endpoints.subscribe();
    tasks.spawn("sync-to-k8s-ciliumendpoint", async move {
        let mut adopted = false;
        loop {
            if !adopted {
                match mirror.adopt().await {
                    Ok(()) => adopted = true,
                    Err(e) => tracing::warn!(subsys = "endpointsynchronizer", error = %e, "Unable to list CiliumEndpoints"),
                }
            }
            // a change while this run goes is seen by the next
            changes.borrow_and_update();
            let ok = adopted && mirror.reconcile(&endpoints).await;
            let wait = if ok { Duration::MAX } else { RETRY };
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(wait.min(Duration::from_secs(3600))) => {}
            }
        }
    });
}

#[derive(Debug, thiserror::Error)]
#[error("CiliumEndpoint has no {0}")]
pub struct Incomplete(&'static str);

/// Another node's endpoint as the ipcache learns it: an entry per address
/// of its first address pair, with its identity (`reserved:unmanaged`
/// without one, as Cilium does) and node.
fn remote(obj: &DynamicObject) -> Result<Vec<IpIdentityPair>, Incomplete> {
    let status = &obj.data["status"];
    let networking = &status["networking"];
    let pair = networking["addressing"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|p| p["ipv4"].is_string() || p["ipv6"].is_string())
        })
        .ok_or(Incomplete("address"))?;
    let node = networking["node"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or(Incomplete("node"))?;
    let id = status["identity"]["id"]
        .as_u64()
        .map_or(abi::identity::UNMANAGED, |id| id as u32);
    Ok(["ipv4", "ipv6"]
        .into_iter()
        .filter_map(|family| pair[family].as_str())
        .map(|ip| IpIdentityPair {
            ip: ip.to_owned(),
            mask: None,
            host_ip: node.to_owned(),
            id,
            key: 0,
            metadata: String::new(),
            k8s_namespace: obj.namespace().unwrap_or_default(),
            k8s_pod_name: obj.name_any(),
        })
        .collect())
}

/// Follows every CEP into the ipcache through `learner`.
pub fn follow_remote(learner: RemoteEndpoints, kubernetes: &Kubernetes, tasks: &Tasks) {
    let api: Api<DynamicObject> = Api::all_with(kubernetes.client(), &resource());
    let source = ResourceSource::new("CiliumEndpoints", api, watcher::Config::default());
    let source = kubernetes
        .watched("cilium/v2::CiliumEndpoint", source)
        .decode(|_, obj: &DynamicObject| remote(obj));
    Arc::new(learner).follow(source, tasks);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_nodes_endpoint_is_learned_from_its_status() {
        let mut cep = DynamicObject::new("web", &resource()).within("default");
        cep.data = serde_json::json!({"status": {
            "identity": {"id": 300},
            "networking": {"addressing": [{"ipv4": "10.2.0.7"}], "node": "198.18.0.12"},
        }});
        let pairs = remote(&cep).unwrap();
        let pair = &pairs[0];
        assert_eq!(
            (pair.ip.as_str(), pair.host_ip.as_str(), pair.id),
            ("10.2.0.7", "198.18.0.12", 300)
        );
        assert_eq!(
            (pair.k8s_namespace.as_str(), pair.k8s_pod_name.as_str()),
            ("default", "web")
        );
        // dual stack: both addresses, behind the same node
        cep.data["status"]["networking"]["addressing"][0]["ipv6"] = "fd00::207".into();
        let pairs = remote(&cep).unwrap();
        let ips: Vec<&str> = pairs.iter().map(|p| p.ip.as_str()).collect();
        assert_eq!(ips, ["10.2.0.7", "fd00::207"]);
        assert!(pairs
            .iter()
            .all(|p| p.host_ip == "198.18.0.12" && p.id == 300));
        cep.data["status"]["identity"] = serde_json::Value::Null;
        assert_eq!(remote(&cep).unwrap()[0].id, abi::identity::UNMANAGED);
        cep.data["status"]["networking"]["node"] = "".into();
        assert!(remote(&cep).is_err());
    }

    #[test]
    fn the_states_of_a_working_endpoint_read_ready() {
        assert_eq!(cep_state(EndpointState::Regenerating), "ready");
        assert_eq!(cep_state(EndpointState::Restoring), "ready");
        assert_eq!(
            cep_state(EndpointState::WaitingForIdentity),
            "waiting-for-identity"
        );
    }
}
