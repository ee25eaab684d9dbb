//! A resource's list+watch (kube-runtime's watcher: pages, bookmarks,
//! resume, a relist when the server says 410 Gone, backoff on errors) as
//! a `watch::Source`: the first listing opens the store's initial list,
//! each later one is a `Relist`, so what vanished while the watch was
//! down is deleted when the new list is done.

use futures::{Stream, StreamExt};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Resource, ResourceExt};
use std::fmt::Debug;
use std::pin::Pin;

type Events<K> = Pin<Box<dyn Stream<Item = Result<Event<K>, watcher::Error>> + Send>>;

/// One resource kind, listed then watched.
pub struct ResourceSource<K> {
    events: Events<K>,
    /// What the source says in logs (`Pods`, `CiliumNodes`).
    what: &'static str,
    listed: bool,
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
        }
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
            let ev = match self.events.next().await? {
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
