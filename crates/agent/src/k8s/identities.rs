//! Identities in Kubernetes (`identity-allocation-mode=crd`, Cilium's
//! default): every CiliumIdentity followed into the identities' watch
//! (the list `cilium identity list` shows, policy regeneration, the
//! lookups before creating), and new ones created as Cilium 1.16 writes
//! them: named after the ID, the labels in `security-labels`, the `k8s:`
//! ones also as metadata labels (which give `kubectl get ciliumidentities`
//! its Namespace column). How two agents agree on one ID is the control
//! plane's (`controlplane::identity::objects`); this module only creates
//! and reads. The agent may list, watch, create and update them, never
//! delete (the operator collects unused ones). An identity the operator
//! marked for collection (`io.cilium.heartbeat`) that this node uses has
//! the mark removed with an update, as Cilium's agent takes it back.

use crate::k8s::connection::Kubernetes;
use controlplane::identity::objects::{IdentityObjects, StoreError};
use controlplane::identity::Identities;
use controlplane::ports::PortFuture;
use controlplane::tasks::Tasks;
use k8s::cilium::HEARTBEAT_ANNOTATION;
use k8s::kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use k8s::kube::runtime::watcher;
use k8s::kube::Api;
use k8s::kube::ResourceExt;
use k8s::ResourceSource;
use std::sync::{Arc, Mutex};
use watch::{Mirror, Source};

fn resource() -> ApiResource {
    k8s::cilium::identities()
}

/// Each identity object by name, the whole object when the operator
/// marked it (to update it without the mark), else nothing.
type Marks = Arc<Mutex<Mirror<Option<DynamicObject>>>>;

/// The CiliumIdentities of one API server.
pub struct CiliumIdentities {
    client: k8s::kube::Client,
    api: Api<DynamicObject>,
    /// Fed by [`Self::source`].
    marks: Marks,
}

impl CiliumIdentities {
    pub fn new(client: k8s::kube::Client) -> Self {
        Self {
            api: Api::all_with(client.clone(), &resource()),
            client,
            marks: Marks::default(),
        }
    }

    /// Every CiliumIdentity as the identities' watch takes it: keyed by
    /// name (the ID), valued by Cilium's label key; marks are noted on
    /// the way.
    pub fn source(&self) -> impl Source<Key = String, Value = String> {
        self.noted(objects(self.client.clone()))
    }

    fn noted(
        &self,
        objects: ResourceSource<DynamicObject>,
    ) -> impl Source<Key = String, Value = String> {
        let marks = Arc::clone(&self.marks);
        decoded(objects.tap(move |ev| {
            let noted = ev.map_ref(|obj: &DynamicObject| {
                obj.annotations()
                    .contains_key(HEARTBEAT_ANNOTATION)
                    .then(|| obj.clone())
            });
            marks.lock().expect("identity marks lock").apply(noted);
        }))
    }

    /// Removes the operator's mark from identity `id` when it has one.
    async fn unmark(&self, id: u32) -> Result<(), StoreError> {
        let name = id.to_string();
        let marked = {
            let marks = self.marks.lock().expect("identity marks lock");
            marks.get(&name).cloned().flatten()
        };
        let Some(mut obj) = marked else {
            return Ok(());
        };
        obj.annotations_mut().remove(HEARTBEAT_ANNOTATION);
        // an update carrying the resourceVersion: the operator deletes only
        // the version it marked, so this one wins a race with its delete
        match self.api.replace(&name, &PostParams::default(), &obj).await {
            Ok(_) => {
                tracing::info!(
                    subsys = "allocator",
                    identity = id,
                    "Took identity back from garbage collection"
                );
                Ok(())
            }
            // changed or gone meanwhile: the watch brings what is there
            // now, and the next sync looks again
            Err(k8s::kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
            Err(e) => Err(StoreError::new(e)),
        }
    }

    async fn create(&self, id: u32, labels: &[String]) -> Result<Option<Vec<String>>, StoreError> {
        match self
            .api
            .create(
                &PostParams::default(),
                &k8s::cilium::identity_object(id, labels),
            )
            .await
        {
            Ok(_) => {
                tracing::info!(
                    subsys = "allocator",
                    identity = id,
                    "Created CiliumIdentity"
                );
                return Ok(Some(labels.to_vec()));
            }
            Err(k8s::kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(StoreError::new(e)),
        }
        // taken: read what it holds (the agent may list, not get)
        let by_name = ListParams::default().fields(&format!("metadata.name={id}"));
        let found = self.api.list(&by_name).await.map_err(StoreError::new)?;
        Ok(found
            .items
            .first()
            .and_then(|o| k8s::cilium::identity_labels(o).ok()))
    }
}

impl IdentityObjects for CiliumIdentities {
    fn create<'a>(
        &'a self,
        id: u32,
        labels: &'a [String],
    ) -> PortFuture<'a, Result<Option<Vec<String>>, StoreError>> {
        Box::pin(self.create(id, labels))
    }

    fn keep(&self, id: u32) -> PortFuture<'_, Result<(), StoreError>> {
        Box::pin(self.unmark(id))
    }
}

/// The identities' backend when the mode is `crd` and the agent has
/// Kubernetes; None leaves them to the kvstore or the node.
pub fn backend(
    mode: crate::option::IdentityAllocationMode,
    kubernetes: Option<&Arc<Kubernetes>>,
) -> Option<Arc<CiliumIdentities>> {
    match (mode, kubernetes) {
        (crate::option::IdentityAllocationMode::Crd, Some(k)) => {
            Some(Arc::new(CiliumIdentities::new(k.client())))
        }
        _ => None,
    }
}

fn objects(client: k8s::kube::Client) -> ResourceSource<DynamicObject> {
    let api: Api<DynamicObject> = Api::all_with(client, &resource());
    ResourceSource::new("CiliumIdentities", api, watcher::Config::default())
}

fn decoded(
    objects: impl Source<Key = String, Value = DynamicObject>,
) -> impl Source<Key = String, Value = String> {
    objects.decode(|_, obj: &DynamicObject| {
        k8s::cilium::identity_labels(obj).map(|l| controlplane::identity::labels_key(&l))
    })
}

/// Follows every CiliumIdentity into `identities`, noting marks into
/// `store`, and takes the identities this node uses back from garbage
/// collection every `sync` (`kvstore-periodic-sync`).
pub fn follow(
    identities: &Arc<Identities>,
    store: &CiliumIdentities,
    sync: std::time::Duration,
    kubernetes: &Kubernetes,
    tasks: &Tasks,
) {
    let objects = kubernetes.watched("cilium/v2::CiliumIdentity", objects(kubernetes.client()));
    identities.follow_source(store.noted(objects), tasks);
    identities.keep_alive(sync, tasks);
}
