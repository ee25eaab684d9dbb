//! A resource's list+watch (kube-runtime's watcher: pages, bookmarks,
//! resume, a relist when the server says 410 Gone, backoff on errors) as
//! a `watch::Source`: the first listing opens the store's initial list,
//! each later one is a `Relist`, so what vanished while the watch was
//! down is deleted when the new list is done.

use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Resource, ResourceExt};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

type Events<K> = Pin<Box<dyn Stream<Item = Result<Event<K>, watcher::Error>> + Send>>;

/// How each watched resource fares, by its API name: None while it
/// works, the last error while it fails (a verb missing from the RBAC
/// role, say), so status can name what cannot be watched.
#[derive(Debug, Default)]
pub struct WatchHealth(Mutex<BTreeMap<String, Option<String>>>);

impl WatchHealth {
    fn set(&self, api: &str, error: Option<String>) {
        let mut all = self.0.lock().expect("watch health lock");
        if all.get(api) != Some(&error) {
            all.insert(api.to_owned(), error);
        }
    }

    /// The failing watches and their errors.
    pub fn failing(&self) -> Vec<(String, String)> {
        let all = self.0.lock().expect("watch health lock");
        all.iter()
            .filter_map(|(api, e)| Some((api.clone(), e.clone()?)))
            .collect()
    }
}

/// What a failed watch says in status: the API server's own message
/// (`pods is forbidden: ...`), and for a resource it does not serve, that
/// its CRD is missing.
fn failure(e: &watcher::Error) -> String {
    let api_error = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s),
        watcher::Error::WatchError(s) => Some(s),
        _ => None,
    };
    match api_error {
        Some(s) if s.code == 404 => {
            "the API server does not serve it (is its CustomResourceDefinition installed?)".into()
        }
        Some(s) => format!("{} ({})", s.message, s.code),
        None => e.to_string(),
    }
}

/// One resource kind, listed then watched.
pub struct ResourceSource<K> {
    events: Events<K>,
    /// What the source says in logs (`Pods`, `CiliumNodes`).
    what: &'static str,
    listed: bool,
    health: Option<(Arc<WatchHealth>, String)>,
}

/// The store key of an object: `namespace/name`, or `name` when
/// cluster-scoped.
pub fn key_of<K: Resource>(obj: &K) -> String {
    match obj.namespace() {
        Some(ns) => format!("{ns}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

impl<K> ResourceSource<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + Debug + Send + 'static,
{
    pub fn new(what: &'static str, api: Api<K>, config: watcher::Config) -> Self {
        Self {
            events: watcher::watcher(api, config).default_backoff().boxed(),
            what,
            listed: false,
            health: None,
        }
    }

    /// Reports how the watch fares to `health` under `api`.
    pub fn reporting(mut self, health: Arc<WatchHealth>, api: &str) -> Self {
        health.set(api, None);
        self.health = Some((health, api.to_owned()));
        self
    }
}

impl<K> watch::Source for ResourceSource<K>
where
    K: Resource + Clone + Send + 'static,
{
    type Key = String;
    type Value = K;

    async fn next(&mut self) -> Option<watch::Event<String, K>> {
        loop {
            let next = self.events.next().await?;
            if let Some((health, api)) = &self.health {
                health.set(api, next.as_ref().err().map(failure));
            }
            let ev = match next {
                Ok(Event::Init) if !self.listed => {
                    // the store opens with a listing of its own
                    self.listed = true;
                    continue;
                }
                Ok(Event::Init) => watch::Event::Relist,
                Ok(Event::InitApply(obj)) | Ok(Event::Apply(obj)) => watch::Event::Upsert {
                    key: key_of(&obj),
                    value: obj,
                },
                Ok(Event::InitDone) => watch::Event::ListDone,
                Ok(Event::Delete(obj)) => watch::Event::Delete { key: key_of(&obj) },
                Err(e) => {
                    tracing::warn!(subsys = "k8s-watcher", resource = self.what, error = %e, "Watch failed, retrying");
                    continue;
                }
            };
            return Some(ev);
        }
    }
}
