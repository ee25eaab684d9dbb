//! Cluster-pool IPAM over CiliumNodes (Cilium's CiliumNode synchroniser
//! with the cluster-pool allocator): every CiliumNode gets a pod CIDR of
//! each family on in `spec.ipam.podCIDRs`; one that names a CIDR keeps it if the pools hold
//! it and no other node has it, else the refusal goes to its
//! `status.ipam.operator-status.error`; a deleted node's CIDR goes back to
//! the pool. No CIDR is handed out before the first full list is in, so a
//! restarted operator first learns every CIDR already given.

use crate::clusterpool::{Cidr, ClusterPool, Family};
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

/// The pod CIDRs a CiliumNode names, each with its family (a malformed
/// one by how it is written).
fn pod_cidrs(obj: &DynamicObject) -> Vec<(Family, Result<Cidr, String>)> {
    obj.data["spec"]["ipam"]["podCIDRs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str())
        .map(|c| match Cidr::parse(c) {
            Some(cidr) => (cidr.family(), Ok(cidr)),
            None => (Family::of_text(c), Err(c.to_owned())),
        })
        .collect()
}

/// The first pod CIDR of `family` a CiliumNode names.
fn first_of(obj: &DynamicObject, family: Family) -> Option<Result<Cidr, String>> {
    pod_cidrs(obj)
        .into_iter()
        .find(|(f, _)| *f == family)
        .map(|(_, c)| c)
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

/// What the synchroniser owns: an allocator per family and the last object
/// seen of each node.
struct Sync {
    api: Api<DynamicObject>,
    pools: Vec<ClusterPool>,
    nodes: BTreeMap<String, DynamicObject>,
    listed: bool,
    /// Nodes seen in a relisting so far, to release the others at its end.
    relisted: Option<BTreeSet<String>>,
    /// Nodes whose last write failed.
    retry: BTreeSet<String>,
    /// Nodes with a write in flight, and whether an event came for them
    /// meanwhile (then they are reconciled again once it ends).
    writing: BTreeMap<String, bool>,
    metrics: Arc<Metrics>,
}

/// One node's write to the API server, run beside the others': the
/// client's rate limit bounds them, not one round trip after another
/// (kube-controller-manager's node IPAM updates Nodes from 30 workers).
type Writes = tokio::task::JoinSet<(String, Result<(), WriteError>)>;

impl Sync {
    fn upsert(&mut self, name: String, obj: DynamicObject) {
        if let Some(seen) = &mut self.relisted {
            seen.insert(name.clone());
        }
        // CIDRs already given are taken before anything is handed out
        for pool in &mut self.pools {
            if let Some(Ok(cidr)) = first_of(&obj, pool.family()) {
                if let Err(e) = pool.occupy(&name, cidr) {
                    tracing::debug!(subsys = "ipam-allocator-clusterpool", node = %name, error = %e, "Pod CIDR refused");
                }
            }
        }
        self.nodes.insert(name.clone(), obj);
    }

    fn delete(&mut self, name: &str) {
        self.nodes.remove(name);
        self.retry.remove(name);
        for cidr in self.pools.iter_mut().filter_map(|p| p.release(name)) {
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

    /// Brings node `name`'s CiliumNode to what the allocator says: the
    /// allocation now, the write among `writes`. A node whose write is in
    /// flight is done again after it, from the object seen last.
    fn reconcile(&mut self, name: &str, writes: &mut Writes) {
        let Some(obj) = self.nodes.get(name).cloned() else {
            return;
        };
        if let Some(again) = self.writing.get_mut(name) {
            *again = true;
            return;
        }
        self.metrics.sync_queued();
        let mut given = Vec::new();
        let mut errors = Vec::new();
        for pool in &mut self.pools {
            let outcome = match first_of(&obj, pool.family()) {
                Some(Ok(cidr)) => pool.occupy(name, cidr).map(|()| None),
                Some(Err(bad)) => {
                    errors.push(format!(
                        "pod CIDR {bad:?} is not an {} CIDR",
                        pool.family().name()
                    ));
                    continue;
                }
                None => pool.allocate(name).map(Some),
            };
            match outcome {
                Ok(Some(cidr)) => {
                    tracing::info!(subsys = "ipam-allocator-clusterpool", node = %name, podCIDR = %cidr, "Allocated a pod CIDR");
                    given.push(cidr);
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(subsys = "ipam-allocator-clusterpool", node = %name, error = %e, "Unable to give the node a pod CIDR");
                    errors.push(e.to_string());
                }
            }
        }
        // a refusal is written once the node's new CIDRs are in: writing
        // them brings the node back here
        let error = errors.join("; ");
        if given.is_empty() && operator_error(&obj) == error {
            self.retry.remove(name);
            return;
        }
        let (api, owned) = (self.api.clone(), name.to_owned());
        self.writing.insert(owned.clone(), false);
        writes.spawn(async move {
            let result = if given.is_empty() {
                write_error(&api, &owned, obj, &error).await
            } else {
                write_cidrs(&api, &owned, obj, &given).await
            };
            (owned, result)
        });
    }

    /// A write ended: a failed one is tried again on the next tick, and a
    /// node that changed meanwhile is reconciled again.
    fn written(&mut self, name: String, result: Result<(), WriteError>, writes: &mut Writes) {
        let again = self.writing.remove(&name).unwrap_or(false);
        match result {
            Ok(()) => {
                self.retry.remove(&name);
            }
            // a node deleted while its write was in flight is not retried
            Err(e) if self.nodes.contains_key(&name) => {
                tracing::warn!(subsys = "ipam-allocator-clusterpool", node = %name, error = %e, "Unable to update the CiliumNode, retrying");
                self.retry.insert(name.clone());
            }
            Err(_) => {}
        }
        if again {
            self.reconcile(&name, writes);
        }
    }
}

/// Adds `given` to the node's pod CIDRs, each where Cilium lists its
/// family (IPv4 first, then IPv6), re-reading the node on a conflict;
/// a family the node meanwhile named a CIDR of is left to the next
/// event.
async fn write_cidrs(
    api: &Api<DynamicObject>,
    name: &str,
    mut obj: DynamicObject,
    given: &[Cidr],
) -> Result<(), WriteError> {
    for _ in 0..5 {
        let named = pod_cidrs(&obj);
        let missing: Vec<&Cidr> = given
            .iter()
            .filter(|c| !named.iter().any(|(f, _)| *f == c.family()))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let text = |c: &Result<Cidr, String>| match c {
            Ok(c) => c.to_string(),
            Err(bad) => bad.clone(),
        };
        let mut cidrs = Vec::new();
        for family in [Family::V4, Family::V6] {
            cidrs.extend(
                missing
                    .iter()
                    .filter(|c| c.family() == family)
                    .map(|c| c.to_string()),
            );
            cidrs.extend(
                named
                    .iter()
                    .filter(|(f, _)| *f == family)
                    .map(|(_, c)| text(c)),
            );
        }
        obj.data["spec"]["ipam"]["podCIDRs"] = serde_json::json!(cidrs);
        match api.replace(name, &PostParams::default(), &obj).await {
            Ok(_) => return Ok(()),
            Err(k8s::kube::Error::Api(e)) if e.code == 409 => {
                obj = api.get(name).await?;
            }
            Err(k8s::kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
    Err(WriteError::KeptChanging(name.to_owned()))
}

/// Sets (or clears, with "") `status.ipam.operator-status.error`.
async fn write_error(
    api: &Api<DynamicObject>,
    name: &str,
    mut obj: DynamicObject,
    error: &str,
) -> Result<(), WriteError> {
    let status = &mut obj.data["status"];
    if !status.is_object() {
        *status = serde_json::json!({});
    }
    status["ipam"]["operator-status"] = if error.is_empty() {
        serde_json::json!({})
    } else {
        serde_json::json!({ "error": error })
    };
    match api.replace_status(name, &PostParams::default(), &obj).await {
        Ok(_) => Ok(()),
        Err(k8s::kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Runs cluster-pool IPAM until the source ends (the operator stops).
pub async fn run(client: k8s::kube::Client, pools: Vec<ClusterPool>, metrics: Arc<Metrics>) {
    let api: Api<DynamicObject> = Api::all_with(client, &resource());
    let mut source = ResourceSource::new("CiliumNodes", api.clone(), watcher::Config::default());
    let mut sync = Sync {
        api,
        pools,
        nodes: BTreeMap::new(),
        listed: false,
        relisted: None,
        retry: BTreeSet::new(),
        writing: BTreeMap::new(),
        metrics,
    };
    let mut writes = Writes::new();
    let mut retry_tick = tokio::time::interval(RETRY);
    loop {
        let event = tokio::select! {
            ev = source.next() => match ev {
                Some(ev) => ev,
                None => return,
            },
            Some(done) = writes.join_next() => {
                match done {
                    Ok((name, result)) => sync.written(name, result, &mut writes),
                    Err(e) => tracing::error!(subsys = "ipam-allocator-clusterpool", error = %e, "A CiliumNode write did not finish"),
                }
                continue;
            }
            _ = retry_tick.tick() => {
                let again: Vec<String> = sync.retry.iter().cloned().collect();
                for name in again {
                    sync.reconcile(&name, &mut writes);
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
                    sync.reconcile(&name, &mut writes);
                }
            }
            Event::Delete { key } => sync.delete(&key),
            Event::Relist => sync.relisted = Some(BTreeSet::new()),
            Event::ListDone => {
                sync.relist_done();
                let first = !sync.listed;
                sync.listed = true;
                if first {
                    let (used, total) = sync
                        .pools
                        .iter()
                        .map(ClusterPool::usage)
                        .fold((0, 0), |(u, t), (pu, pt)| (u + pu, t + pt));
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
                    sync.reconcile(&name, &mut writes);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_cidrs_are_read_with_their_families() {
        let mut obj = DynamicObject::new("n", &resource());
        obj.data = serde_json::json!({"spec": {"ipam": {"podCIDRs": ["10.0.1.5/24", "fd00::/120", "10.0.1.0/24"]}}});
        assert_eq!(
            first_of(&obj, Family::V4),
            Some(Err("10.0.1.5/24".to_owned()))
        );
        assert_eq!(
            first_of(&obj, Family::V6),
            Cidr::parse("fd00::/120").map(Ok)
        );
        obj.data = serde_json::json!({"spec": {"ipam": {"podCIDRs": ["fd00::1/120"]}}});
        assert_eq!(first_of(&obj, Family::V4), None);
        assert_eq!(
            first_of(&obj, Family::V6),
            Some(Err("fd00::1/120".to_owned()))
        );
    }
}
