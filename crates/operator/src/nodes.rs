//! Cluster-pool IPAM over CiliumNodes (Cilium's CiliumNode synchroniser
//! with the cluster-pool allocator): every CiliumNode gets a pod CIDR in
//! `spec.ipam.podCIDRs`; one that names a CIDR keeps it if the pools hold
//! it and no other node has it, else the refusal goes to its
//! `status.ipam.operator-status.error`; a deleted node's CIDR goes back to
//! the pool. No CIDR is handed out before the first full list is in, so a
//! restarted operator first learns every CIDR already given.

use crate::clusterpool::{Cidr, ClusterPool};
use crate::metrics::Metrics;
use k8s::kube::api::{ApiResource, DynamicObject, PostParams};
use k8s::kube::runtime::watcher;
use k8s::kube::{Api, ResourceExt};
use k8s::ResourceSource;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use watch::{Event, Source};

/// How often writes that failed are tried again (Cilium's controller
/// retry interval).
const RETRY: Duration = Duration::from_secs(15);

pub fn resource() -> ApiResource {
    k8s::cilium::nodes()
}

/// The IPv4 pod CIDRs a CiliumNode names, and the entries that are not
/// IPv4 CIDRs (kept as they are: IPv6 is not this allocator's).
fn pod_cidrs(obj: &DynamicObject) -> (Vec<Result<Cidr, String>>, Vec<String>) {
    let mut v4 = Vec::new();
    let mut other = Vec::new();
    for c in obj.data["spec"]["ipam"]["podCIDRs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str())
    {
        if c.contains(':') {
            other.push(c.to_owned());
        } else {
            v4.push(Cidr::parse(c).ok_or_else(|| c.to_owned()));
        }
    }
    (v4, other)
}

fn operator_error(obj: &DynamicObject) -> &str {
    obj.data["status"]["ipam"]["operator-status"]["error"]
        .as_str()
        .unwrap_or("")
}

#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error(transparent)]
    Kube(#[from] k8s::kube::Error),
    #[error("CiliumNode {0} kept changing under the update")]
    KeptChanging(String),
}

/// What the synchroniser owns: the allocator and the last object seen of
/// each node.
struct Sync {
    api: Api<DynamicObject>,
    pool: ClusterPool,
    nodes: BTreeMap<String, DynamicObject>,
    listed: bool,
    /// Nodes seen in a relisting so far, to release the others at its end.
    relisted: Option<BTreeSet<String>>,
    /// Nodes whose last write failed.
    retry: BTreeSet<String>,
    metrics: Arc<Metrics>,
}

impl Sync {
    fn upsert(&mut self, name: String, obj: DynamicObject) {
        if let Some(seen) = &mut self.relisted {
            seen.insert(name.clone());
        }
        // CIDRs already given are taken before anything is handed out
        let (v4, _) = pod_cidrs(&obj);
        if let Some(Ok(cidr)) = v4.first() {
            if let Err(e) = self.pool.occupy(&name, *cidr) {
                tracing::debug!(subsys = "ipam-allocator-clusterpool", node = %name, error = %e, "Pod CIDR refused");
            }
        }
        self.nodes.insert(name.clone(), obj);
    }

    fn delete(&mut self, name: &str) {
        self.nodes.remove(name);
        self.retry.remove(name);
        if let Some(cidr) = self.pool.release(name) {
            tracing::info!(subsys = "ipam-allocator-clusterpool", node = %name, podCIDR = %cidr, "Released the pod CIDR of a deleted CiliumNode");
        }
    }

    /// After a relisting: nodes gone meanwhile give their CIDRs back.
    fn relist_done(&mut self) {
        if let Some(seen) = self.relisted.take() {
            let gone: Vec<String> = self
                .nodes
                .keys()
                .filter(|n| !seen.contains(*n))
                .cloned()
                .collect();
            for n in gone {
                self.delete(&n);
            }
        }
    }

    /// Brings node `name`'s CiliumNode to what the allocator says.
    async fn reconcile(&mut self, name: &str) {
        let Some(obj) = self.nodes.get(name).cloned() else {
            return;
        };
        self.metrics.sync_queued();
        let (v4, _) = pod_cidrs(&obj);
        let outcome: Result<Option<Cidr>, String> = match v4.first() {
            Some(Ok(cidr)) => self
                .pool
                .occupy(name, *cidr)
                .map(|()| None)
                .map_err(|e| e.to_string()),
            Some(Err(bad)) => Err(format!("pod CIDR {bad:?} is not an IPv4 CIDR")),
            None => self
                .pool
                .allocate(name)
                .map(Some)
                .map_err(|e| e.to_string()),
        };
        let result = match outcome {
            Ok(Some(cidr)) => {
                tracing::info!(subsys = "ipam-allocator-clusterpool", node = %name, podCIDR = %cidr, "Allocated a pod CIDR");
                self.write_cidr(name, obj, cidr).await
            }
            Ok(None) => self.write_error(name, obj, "").await,
            Err(e) => {
                tracing::warn!(subsys = "ipam-allocator-clusterpool", node = %name, error = %e, "Unable to give the node a pod CIDR");
                self.write_error(name, obj, &e).await
            }
        };
        match result {
            Ok(()) => {
                self.retry.remove(name);
            }
            Err(e) => {
                tracing::warn!(subsys = "ipam-allocator-clusterpool", node = %name, error = %e, "Unable to update the CiliumNode, retrying");
                self.retry.insert(name.to_owned());
            }
        }
    }

    /// Writes `cidr` as the node's IPv4 pod CIDR (keeping IPv6 entries),
    /// re-reading the node on a conflict; a node that meanwhile named a
    /// CIDR of its own is left to the next event.
    async fn write_cidr(
        &mut self,
        name: &str,
        mut obj: DynamicObject,
        cidr: Cidr,
    ) -> Result<(), WriteError> {
        for _ in 0..5 {
            let (v4, other) = pod_cidrs(&obj);
            if !v4.is_empty() {
                return Ok(());
            }
            let mut cidrs = vec![serde_json::Value::from(cidr.to_string())];
            cidrs.extend(other.into_iter().map(serde_json::Value::from));
            obj.data["spec"]["ipam"]["podCIDRs"] = serde_json::Value::Array(cidrs);
            match self.api.replace(name, &PostParams::default(), &obj).await {
                Ok(_) => return Ok(()),
                Err(k8s::kube::Error::Api(e)) if e.code == 409 => {
                    obj = self.api.get(name).await?;
                }
                Err(k8s::kube::Error::Api(e)) if e.code == 404 => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
        Err(WriteError::KeptChanging(name.to_owned()))
    }

    /// Sets (or clears, with "") `status.ipam.operator-status.error`.
    async fn write_error(
        &mut self,
        name: &str,
        mut obj: DynamicObject,
        error: &str,
    ) -> Result<(), WriteError> {
        if operator_error(&obj) == error {
            return Ok(());
        }
        let status = &mut obj.data["status"];
        if !status.is_object() {
            *status = serde_json::json!({});
        }
        status["ipam"]["operator-status"] = if error.is_empty() {
            serde_json::json!({})
        } else {
            serde_json::json!({ "error": error })
        };
        match self
            .api
            .replace_status(name, &PostParams::default(), &obj)
            .await
        {
            Ok(_) => Ok(()),
            Err(k8s::kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Runs cluster-pool IPAM until the source ends (the operator stops).
pub async fn run(client: k8s::kube::Client, pool: ClusterPool, metrics: Arc<Metrics>) {
    let api: Api<DynamicObject> = Api::all_with(client, &resource());
    let mut source = ResourceSource::new("CiliumNodes", api.clone(), watcher::Config::default());
    let mut sync = Sync {
        api,
        pool,
        nodes: BTreeMap::new(),
        listed: false,
        relisted: None,
        retry: BTreeSet::new(),
        metrics,
    };
    let mut retry_tick = tokio::time::interval(RETRY);
    loop {
        let event = tokio::select! {
            ev = source.next() => match ev {
                Some(ev) => ev,
                None => return,
            },
            _ = retry_tick.tick() => {
                let again: Vec<String> = sync.retry.iter().cloned().collect();
                for name in again {
                    sync.reconcile(&name).await;
                }
                continue;
            }
        };
        match event {
            Event::Upsert { key, value } => {
                let name = value.name_any();
                debug_assert_eq!(key, name);
                sync.upsert(name.clone(), value);
                if sync.listed {
                    sync.reconcile(&name).await;
                }
            }
            Event::Delete { key } => sync.delete(&key),
            Event::Relist => sync.relisted = Some(BTreeSet::new()),
            Event::ListDone => {
                sync.relist_done();
                let first = !sync.listed;
                sync.listed = true;
                if first {
                    let (used, total) = sync.pool.usage();
                    tracing::info!(
                        subsys = "ipam-allocator-clusterpool",
                        nodes = sync.nodes.len(),
                        used,
                        total,
                        "Initial CiliumNode list received; allocating"
                    );
                }
                // parked nodes, and any whose CIDR changed while relisting
                let all: Vec<String> = sync.nodes.keys().cloned().collect();
                for name in all {
                    sync.reconcile(&name).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_cidrs_split_ipv4_from_the_rest() {
        let mut obj = DynamicObject::new("n", &resource());
        obj.data = serde_json::json!({"spec": {"ipam": {"podCIDRs": ["10.0.1.0/24", "fd00::/120", "10.0.1.5/24"]}}});
        let (v4, other) = pod_cidrs(&obj);
        assert_eq!(v4[0], Ok(Cidr::parse("10.0.1.0/24").unwrap()));
        assert_eq!(v4[1], Err("10.0.1.5/24".to_owned()));
        assert_eq!(other, ["fd00::/120"]);
    }
}
