//! Security identities: label sets to numbers that mean the same on every
//! node.
//!
//! With a kvstore, identities are allocated cluster-wide as Cilium's
//! allocator does: `identities/v1/id/<ID>` names the label key (created once,
//! not leased) and each node using it holds a leased reference
//! `identities/v1/value/<labels>/<node suffix>`. A new ID is claimed in one
//! transaction with the reference, so two nodes can never give the same
//! labels two numbers. With Kubernetes (`identity-allocation-mode=crd`),
//! each identity is a CiliumIdentity object, created once through
//! [`objects::IdentityObjects`] (see [`objects`] for how nodes agree).
//! Without either, numbers are node-local.
//!
//! Whatever the backend, the cluster's identities come in through one
//! watch ([`Identities::follow_source`]): they make the list `cilium
//! identity list` shows, wake policy regeneration when they change, and
//! tell when the initial list is in.

pub mod objects;

use crate::kvwriter::KvWriter;
use objects::IdentityObjects;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use watch::Source as _;

/// First identity of the cluster-wide range (Cilium's MinimalAllocationIdentity).
pub const MIN_GLOBAL: u32 = 256;
/// Last identity of that range (without clustermesh).
pub const MAX_GLOBAL: u32 = 65535;
/// How long an endpoint waits for the kvstore to give it an identity.
const ALLOCATE_TIMEOUT: Duration = Duration::from_secs(10);
/// Claims lost to other nodes before giving up.
const MAX_CLAIMS: usize = 16;

/// The fixed identity of exactly a reserved label set (the health
/// endpoint's `reserved:health`): never allocated, shared or released.
fn reserved_id(labels: &[String]) -> Option<u32> {
    RESERVED
        .iter()
        .find(|(_, set)| set.len() == labels.len() && set.iter().zip(labels).all(|(a, b)| a == b))
        .map(|(id, _)| *id)
}

/// The fixed identities and their labels (`pkg/identity/numericidentity.go`).
pub const RESERVED: &[(u32, &[&str])] = &[
    (1, &["reserved:host"]),
    (2, &["reserved:world"]),
    (3, &["reserved:unmanaged"]),
    (4, &["reserved:health"]),
    (5, &["reserved:init"]),
    (6, &["reserved:remote-node"]),
    (7, &["reserved:kube-apiserver", "reserved:remote-node"]),
    (8, &["reserved:ingress"]),
    (9, &["reserved:world-ipv4"]),
    (10, &["reserved:world-ipv6"]),
    (11, &["reserved:overlay-to-encrypt"]),
];

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("no free identity left in {MIN_GLOBAL}..{MAX_GLOBAL}")]
    Exhausted,
    #[error("allocating an identity: {0}")]
    Kvstore(#[from] kvstore::Error),
    #[error("allocating an identity: the cluster's identities did not answer within {ALLOCATE_TIMEOUT:?}")]
    Timeout,
    #[error("allocating an identity: other nodes kept claiming the same IDs")]
    Contended,
}

/// A label as Cilium keys it: `source:key=value` (`=` even for no value).
fn key_form(label: &str) -> String {
    if label.contains('=') {
        label.to_owned()
    } else {
        format!("{label}=")
    }
}

/// Cilium's identity key: the sorted labels, each followed by `;`.
pub fn labels_key(labels: &[String]) -> String {
    let mut sorted: Vec<String> = labels.iter().map(|l| key_form(l)).collect();
    sorted.sort();
    sorted.dedup();
    sorted.iter().map(|l| format!("{l};")).collect()
}

/// The labels of an identity key, as `source:key=value` strings.
pub fn key_labels(key: &str) -> Vec<String> {
    key.split(';')
        .filter(|l| !l.is_empty())
        .map(|l| l.strip_suffix('=').unwrap_or(l).to_owned())
        .collect()
}

struct Held {
    id: u32,
    refs: usize,
}

#[derive(Default)]
struct State {
    /// Identities this node's endpoints use, by label key.
    held: BTreeMap<String, Held>,
    /// Every identity in the kvstore, by number (from the watch).
    cluster: BTreeMap<u32, String>,
}

/// Where identities are shared with the rest of the cluster.
pub enum Backend {
    /// Nowhere: numbers are this node's own.
    Local,
    /// The kvstore's allocator keys, written through the writer.
    Kvstore(kvstore::Kvstore, KvWriter),
    /// One object per identity (CiliumIdentities); `tasks` runs the
    /// re-creation of restored identities the store lost.
    Objects(Arc<dyn IdentityObjects>, crate::tasks::Tasks),
}

impl Backend {
    /// The identity objects when there are some, else the kvstore when
    /// there is one, else none.
    pub fn choose(
        objects: Option<Arc<dyn IdentityObjects>>,
        kv: Option<(kvstore::Kvstore, KvWriter)>,
        tasks: &crate::tasks::Tasks,
    ) -> Self {
        match (objects, kv) {
            (Some(objects), _) => Self::Objects(objects, tasks.clone()),
            (None, Some((kv, writer))) => Self::Kvstore(kv, writer),
            (None, None) => Self::Local,
        }
    }
}

pub struct Identities {
    state: Mutex<State>,
    /// Bumped whenever the set of known identities changes (policy
    /// selects among them).
    changes: tokio::sync::watch::Sender<u64>,
    /// Follows the cluster's identities (keys ending in the ID, values
    /// label keys); taken by [`Identities::follow_source`].
    store: Mutex<Option<watch::Store<String, String>>>,
    /// Set once the cluster's initial list of identities is in (at once
    /// when node-local).
    synced: watch::Synced,
    backend: Backend,
    /// This node's part of reference keys: its IPv4 (Cilium's GetNodeSuffix).
    node_suffix: String,
}

impl Identities {
    pub fn new(backend: Backend, node_suffix: String) -> Arc<Self> {
        let store = match backend {
            Backend::Local => None,
            _ => Some(watch::Store::new("identities")),
        };
        Arc::new(Self {
            state: Mutex::default(),
            changes: tokio::sync::watch::Sender::new(0),
            synced: store
                .as_ref()
                .map_or_else(watch::Synced::ready, watch::Store::synced),
            store: Mutex::new(store),
            backend,
            node_suffix,
        })
    }

    fn kv(&self) -> Option<(&kvstore::Kvstore, &KvWriter)> {
        match &self.backend {
            Backend::Kvstore(kv, writer) => Some((kv, writer)),
            _ => None,
        }
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Tells when the cluster's identities are all known.
    pub fn synced(&self) -> watch::Synced {
        self.synced.clone()
    }

    /// Wakes when the known identities change.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn reference_key(&self, key: &str) -> String {
        kvstore::keys::identity_value(key, &self.node_suffix)
    }

    /// Keeps the cluster's identities in step with the kvstore; with
    /// identity objects the caller follows them ([`Self::follow_source`]).
    pub fn follow(self: &Arc<Self>, tasks: &crate::tasks::Tasks) {
        let Some((kv, _)) = self.kv() else { return };
        let source = kv
            .source(&format!("{}/", kvstore::keys::IDENTITY_IDS))
            .decode(|_, v: &Vec<u8>| String::from_utf8(v.clone()));
        self.follow_source(source, tasks);
    }

    /// Keeps the cluster's identities (listing, policy, lookups) in step
    /// with `source`: keys whose last `/` part is the ID, values the
    /// identities' label keys ([`labels_key`]). Once per agent.
    pub fn follow_source<S>(self: &Arc<Self>, source: S, tasks: &crate::tasks::Tasks)
    where
        S: watch::Source<Key = String, Value = String> + 'static,
    {
        let Some(store) = self.store.lock().expect("identities lock").take() else {
            return;
        };
        let this = Arc::clone(self);
        let handler = move |change| {
            this.follow_change(change);
            std::future::ready(Ok::<(), std::convert::Infallible>(()))
        };
        tasks.spawn("identities", store.run(source, handler));
    }

    /// One change of the kvstore's identity master keys.
    fn follow_change(&self, change: watch::Change<String, String>) {
        let mut st = self.state.lock().expect("identities lock");
        match change {
            watch::Change::Upsert {
                key, new: labels, ..
            } => {
                if let Some(id) = id_of_master(&key) {
                    if st.cluster.insert(id, labels.clone()) != Some(labels) {
                        self.changed();
                    }
                }
            }
            watch::Change::Delete { key, .. } => {
                if let Some(id) = id_of_master(&key) {
                    if st.cluster.remove(&id).is_some() {
                        self.changed();
                    }
                }
            }
            watch::Change::Synced => {
                tracing::info!(
                    subsys = "identity-cache",
                    count = st.cluster.len(),
                    "Initial identity list received"
                );
            }
        }
    }

    /// The identity of a label set, taking a reference to it. No labels
    /// means `reserved:init`, as for endpoints whose labels are unknown.
    pub async fn allocate(&self, labels: &[String]) -> Result<u32, IdentityError> {
        if labels.is_empty() {
            return Ok(abi::identity::INIT);
        }
        if let Some(id) = reserved_id(labels) {
            return Ok(id);
        }
        let key = labels_key(labels);
        if let Some(id) = self.take_held(&key) {
            return Ok(id);
        }
        let id = match &self.backend {
            Backend::Kvstore(kv, writer) => {
                tokio::time::timeout(ALLOCATE_TIMEOUT, self.claim(kv, writer, &key))
                    .await
                    .map_err(|_| IdentityError::Timeout)??
            }
            Backend::Objects(objects, _) => {
                tokio::time::timeout(ALLOCATE_TIMEOUT, self.claim_object(&**objects, &key))
                    .await
                    .map_err(|_| IdentityError::Timeout)??
            }
            Backend::Local => self.local_id()?,
        };
        Ok(self.hold(&key, id))
    }

    /// A reference to an identity known from before (a restored endpoint).
    /// The cluster is told in the background, recreating the ID's master
    /// key or object if it was lost.
    pub fn adopt(&self, labels: &[String], id: u32) -> u32 {
        if labels.is_empty() {
            return abi::identity::INIT;
        }
        if let Some(id) = reserved_id(labels) {
            return id;
        }
        let key = labels_key(labels);
        if let Some(id) = self.take_held(&key) {
            return id;
        }
        match &self.backend {
            Backend::Kvstore(_, writer) => {
                writer.create_only(kvstore::keys::identity_id(id), key.clone().into_bytes());
            }
            Backend::Objects(objects, tasks) => self.recreate(objects, tasks, &key, id),
            Backend::Local => {}
        }
        self.hold(&key, id)
    }

    /// Drops a reference; the last one removes this node's kvstore
    /// reference. Identity objects stay (the operator collects them once
    /// no CiliumEndpoint uses them, as in Cilium).
    pub fn release(&self, labels: &[String]) {
        if labels.is_empty() || reserved_id(labels).is_some() {
            return;
        }
        let key = labels_key(labels);
        let mut st = self.state.lock().expect("identities lock");
        let Some(held) = st.held.get_mut(&key) else {
            return;
        };
        held.refs -= 1;
        if held.refs == 0 {
            st.held.remove(&key);
            if let Some((_, writer)) = self.kv() {
                writer.delete(self.reference_key(&key));
            }
        }
    }

    fn take_held(&self, key: &str) -> Option<u32> {
        let mut st = self.state.lock().expect("identities lock");
        let held = st.held.get_mut(key)?;
        held.refs += 1;
        Some(held.id)
    }

    /// Records a reference to `id`. When a concurrent allocation of the same
    /// labels got there first its number stands (both came from the same
    /// kvstore answer, so they agree).
    fn hold(&self, key: &str, id: u32) -> u32 {
        let mut st = self.state.lock().expect("identities lock");
        if let Some(held) = st.held.get_mut(key) {
            held.refs += 1;
            return held.id;
        }
        st.held.insert(key.to_owned(), Held { id, refs: 1 });
        if let std::collections::btree_map::Entry::Vacant(e) = st.cluster.entry(id) {
            e.insert(key.to_owned());
            self.changed();
        }
        if let Some((_, writer)) = self.kv() {
            writer.put_leased(self.reference_key(key), id.to_string().into_bytes());
        }
        id
    }

    fn local_id(&self) -> Result<u32, IdentityError> {
        let st = self.state.lock().expect("identities lock");
        let used: BTreeSet<u32> = st.held.values().map(|h| h.id).collect();
        (MIN_GLOBAL..=MAX_GLOBAL)
            .find(|id| !used.contains(id))
            .ok_or(IdentityError::Exhausted)
    }

    /// Finds or claims the cluster-wide number of `key`.
    async fn claim(
        &self,
        kv: &kvstore::Kvstore,
        writer: &KvWriter,
        key: &str,
    ) -> Result<u32, IdentityError> {
        // A delete of our old reference may still be queued; let it land so
        // the listing below sees the kvstore as this node left it.
        writer.flush().await;
        let mut lost = 0;
        loop {
            match self.try_claim(kv, key).await {
                Ok(Some(id)) => return Ok(id),
                Ok(None) => {
                    lost += 1;
                    if lost == MAX_CLAIMS {
                        return Err(IdentityError::Contended);
                    }
                }
                // etcd unreachable: the caller's timeout bounds the wait.
                Err(IdentityError::Kvstore(e)) => {
                    tracing::debug!(subsys = "allocator", error = %e, "Kvstore unavailable, retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One attempt: the ID already given to `key`, or a newly claimed one;
    /// None when another node claimed the chosen ID first.
    async fn try_claim(
        &self,
        kv: &kvstore::Kvstore,
        key: &str,
    ) -> Result<Option<u32>, IdentityError> {
        let refs_prefix = format!("{}/{key}/", kvstore::keys::IDENTITY_VALUES);
        let (refs, _) = kv.list_prefix(&refs_prefix).await?;
        if let Some(id) = refs
            .iter()
            .find_map(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok())
        {
            return Ok(Some(id));
        }
        let (masters, _) = kv
            .list_prefix(&format!("{}/", kvstore::keys::IDENTITY_IDS))
            .await?;
        let mut used = BTreeSet::new();
        for (k, v) in &masters {
            let Some(id) = id_of_master(k) else { continue };
            if v == key.as_bytes() {
                return Ok(Some(id));
            }
            used.insert(id);
        }
        let id = (MIN_GLOBAL..=MAX_GLOBAL)
            .find(|id| !used.contains(id))
            .ok_or(IdentityError::Exhausted)?;
        let claimed = kv
            .create_with_leased(
                &kvstore::keys::identity_id(id),
                key.as_bytes(),
                &refs_prefix,
                &self.reference_key(key),
                id.to_string().as_bytes(),
            )
            .await?;
        if claimed {
            tracing::info!(subsys = "allocator", identity = id, labels = %key, "Allocated new global identity");
        }
        Ok(claimed.then_some(id))
    }

    /// Finds or creates the identity object of `key`, once the cluster's
    /// identities are listed (as Cilium's allocator waits for them).
    async fn claim_object(
        &self,
        objects: &dyn IdentityObjects,
        key: &str,
    ) -> Result<u32, IdentityError> {
        self.synced().wait().await;
        let existing = {
            let st = self.state.lock().expect("identities lock");
            st.cluster
                .iter()
                .find(|(_, k)| k.as_str() == key)
                .map(|(id, _)| *id)
        };
        let id = match existing {
            Some(id) => id,
            None => {
                objects::claim(objects, key, |id| {
                    let st = self.state.lock().expect("identities lock");
                    st.cluster.get(&id).cloned()
                })
                .await?
            }
        };
        // reused (or raced to): it may be marked for collection
        take_back(objects, id).await;
        Ok(id)
    }

    /// Every `every`, takes each identity this node uses back from
    /// garbage collection (Cilium re-acquires its local identities every
    /// `kvstore-periodic-sync`), so a mark the operator set while no
    /// CiliumEndpoint named the identity yet does not get it deleted.
    pub fn keep_alive(self: &Arc<Self>, every: Duration, tasks: &crate::tasks::Tasks) {
        let Backend::Objects(objects, _) = &self.backend else {
            return;
        };
        let objects = Arc::clone(objects);
        let this = Arc::clone(self);
        tasks.spawn("sync-local-identities", async move {
            loop {
                tokio::time::sleep(every).await;
                let held: Vec<u32> = this.held().into_iter().map(|(id, _, _)| id).collect();
                for id in held {
                    take_back(&*objects, id).await;
                }
            }
        });
    }

    /// Makes sure the identity object of a restored reference exists,
    /// trying every 10 s until it does (Cilium's master-key protection);
    /// an ID another label set took meanwhile is logged and left.
    fn recreate(
        &self,
        objects: &Arc<dyn IdentityObjects>,
        tasks: &crate::tasks::Tasks,
        key: &str,
        id: u32,
    ) {
        let objects = Arc::clone(objects);
        let mut synced = self.synced();
        let labels = key_labels(key);
        let key = key.to_owned();
        tasks.spawn("identity-restore", async move {
            synced.wait().await;
            loop {
                match objects.create(id, &labels).await {
                    Ok(Some(now)) if labels_key(&now) == key => {
                        return take_back(&*objects, id).await;
                    }
                    Ok(Some(now)) => {
                        tracing::warn!(subsys = "allocator", identity = id, labels = %key, holder = %labels_key(&now), "Restored identity is held by other labels");
                        return;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(subsys = "allocator", identity = id, error = %e, "Unable to re-create restored identity, retrying");
                    }
                }
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        });
    }

    /// Every identity this node knows: reserved, the cluster's, its own.
    pub fn list(&self) -> Vec<(u32, Vec<String>)> {
        let st = self.state.lock().expect("identities lock");
        let mut all: BTreeMap<u32, Vec<String>> = RESERVED
            .iter()
            .map(|(id, labels)| (*id, labels.iter().map(|l| l.to_string()).collect()))
            .collect();
        for (id, key) in &st.cluster {
            all.insert(*id, key_labels(key));
        }
        for held in st.held.iter() {
            all.entry(held.1.id).or_insert_with(|| key_labels(held.0));
        }
        all.into_iter().collect()
    }

    /// The labels of identity `id`, looked up without listing them all
    /// (Hubble asks for every flow's two ends).
    pub fn get(&self, id: u32) -> Option<Vec<String>> {
        if let Some((_, labels)) = RESERVED.iter().find(|(i, _)| *i == id) {
            return Some(labels.iter().map(|l| l.to_string()).collect());
        }
        let st = self.state.lock().expect("identities lock");
        if let Some(key) = st.cluster.get(&id) {
            return Some(key_labels(key));
        }
        st.held
            .iter()
            .find(|(_, h)| h.id == id)
            .map(|(key, _)| key_labels(key))
    }

    /// Identities held by local endpoints, with their reference counts.
    pub fn held(&self) -> Vec<(u32, Vec<String>, usize)> {
        let st = self.state.lock().expect("identities lock");
        st.held
            .iter()
            .map(|(k, h)| (h.id, key_labels(k), h.refs))
            .collect()
    }
}

/// Removes a garbage-collection mark from `id`; a failure is logged and
/// left to the next periodic sync.
async fn take_back(objects: &dyn IdentityObjects, id: u32) {
    if let Err(e) = objects.keep(id).await {
        tracing::warn!(subsys = "allocator", identity = id, error = %e, "Unable to take identity back from garbage collection");
    }
}

/// An identity as the API shows it; the digest is of Cilium's label key.
pub fn to_api(id: u32, labels: Vec<String>) -> api::endpoint::Identity {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(labels_key(&labels).as_bytes());
    api::endpoint::Identity {
        id,
        labels,
        labels_sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

fn id_of_master(key: &str) -> Option<u32> {
    key.rsplit('/').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn same_labels_share_an_identity_and_restored_numbers_are_kept() {
        let ids = Identities::new(Backend::Local, "198.18.0.11".into());
        let a = vec!["k8s:app=a".to_string()];
        let b = vec!["k8s:app=b".to_string()];
        assert_eq!(ids.adopt(&b, 300), 300);
        assert_eq!(ids.allocate(&a).await.unwrap(), 256);
        assert_eq!(ids.allocate(&a).await.unwrap(), 256);
        assert_eq!(ids.allocate(&[]).await.unwrap(), abi::identity::INIT);
        ids.release(&a);
        ids.release(&a);
        let c = ids.allocate(&["k8s:app=c".to_string()]).await.unwrap();
        assert_eq!(c, 256);
        assert_eq!(ids.get(300), Some(b));
        assert_eq!(ids.get(6), Some(vec!["reserved:remote-node".to_string()]));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_health_endpoint_has_its_reserved_identity() {
        let (_store, a, _b) = two_nodes();
        let health = vec!["reserved:health".to_string()];
        assert_eq!(a.allocate(&health).await.unwrap(), abi::identity::HEALTH);
        assert_eq!(a.adopt(&health, 4), abi::identity::HEALTH);
        a.release(&health);
        let mixed = vec!["k8s:app=x".to_string(), "reserved:health".to_string()];
        assert!(
            a.allocate(&mixed).await.unwrap() >= 256,
            "only the exact set is reserved"
        );
    }

    /// Two nodes' allocators on one (in-process) kvstore.
    fn two_nodes() -> (kvstore::Memory, Arc<Identities>, Arc<Identities>) {
        let store = kvstore::Memory::new();
        let node = |suffix: &str| {
            let kv = kvstore::Kvstore::new(store.session());
            let writer = KvWriter::start(kv.clone(), &crate::tasks::Tasks::default());
            Identities::new(Backend::Kvstore(kv, writer), suffix.into())
        };
        let (a, b) = (node("198.18.0.11"), node("198.18.0.12"));
        (store, a, b)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn nodes_agree_on_identities_even_when_claiming_at_once() {
        let (_store, a, b) = two_nodes();
        let web = vec!["k8s:app=web".to_string()];
        let db = vec!["k8s:app=db".to_string()];
        let (ia, ib) = tokio::join!(a.allocate(&web), b.allocate(&web));
        assert_eq!(ia.unwrap(), ib.unwrap());
        let (da, db_b) = tokio::join!(a.allocate(&db), b.allocate(&db));
        let (da, db_b) = (da.unwrap(), db_b.unwrap());
        assert_eq!(da, db_b);
        assert_ne!(da, b.allocate(&web).await.unwrap());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_identity_outlives_the_references_of_a_node_that_left() {
        let (store, a, b) = two_nodes();
        let web = vec!["k8s:app=web".to_string()];
        let id = a.allocate(&web).await.unwrap();
        a.release(&web);
        if let Some((_, writer)) = a.kv() {
            writer.flush().await;
        }
        store.expire(a.kv().unwrap().0.lease_id());
        assert_eq!(
            b.allocate(&web).await.unwrap(),
            id,
            "the master key still names the labels"
        );
        assert_eq!(b.adopt(&["k8s:app=old".to_string()], 300), 300);
    }

    #[test]
    fn keys_are_ciliums_sorted_label_lists() {
        let labels = vec![
            "k8s:io.kubernetes.pod.namespace=default".to_string(),
            "k8s:app=web".to_string(),
            "unspec:flag".to_string(),
        ];
        let key = labels_key(&labels);
        assert_eq!(
            key,
            "k8s:app=web;k8s:io.kubernetes.pod.namespace=default;unspec:flag=;"
        );
        assert_eq!(
            key_labels(&key),
            vec![
                "k8s:app=web",
                "k8s:io.kubernetes.pod.namespace=default",
                "unspec:flag"
            ]
        );
    }
}
