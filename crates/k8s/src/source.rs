//! A resource's list+watch (kube-runtime's watcher: pages, bookmarks,
//! resume, a relist when the server says 410 Gone) as a `watch::Source`:
//! the first listing opens the store's initial list, each later one is a
//! `Relist`, so what vanished while the watch was down is deleted when the
//! new list is done. Errors back off as client-go's reflector does (0.8 s
//! doubling to 30 s), except that a server seen back after an outage is
//! retried at once: a watch must not sit out the rest of a 30 s wait, and
//! status report it failing, while the server answers.

use futures::{Stream, StreamExt};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, DefaultBackoff, Event};
use kube::{Api, Resource, ResourceExt};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

type Events<K> = Pin<Box<dyn Stream<Item = Result<Event<K>, watcher::Error>> + Send>>;

/// Where a watch is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchState {
    /// Its first listing is under way.
    Listing,
    /// Listed, and watching.
    Synced,
    /// The last attempt failed (a verb missing from the RBAC role, say).
    Failing(String),
}

impl std::fmt::Display for WatchState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WatchState::Listing => f.write_str("listing"),
            WatchState::Synced => f.write_str("synced"),
            WatchState::Failing(e) => write!(f, "failing: {e}"),
        }
    }
}

/// How each watched resource fares, by its API name, so status can say
/// what has synced and name what cannot be watched; and how many times the
/// API server was seen back after an outage, which wakes watches waiting
/// out an error.
#[derive(Debug)]
pub struct WatchHealth {
    states: Mutex<BTreeMap<String, WatchState>>,
    /// The APIs whose first listing has ended (synced or refused): a
    /// later relisting does not put them back.
    settled: Mutex<std::collections::BTreeSet<String>>,
    server_back: tokio::sync::watch::Sender<u64>,
}

impl Default for WatchHealth {
    fn default() -> Self {
        Self {
            states: Mutex::default(),
            settled: Mutex::default(),
            server_back: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl WatchHealth {
    /// The API server answers again after it did not: watches waiting out
    /// an error retry now.
    pub fn server_back(&self) {
        self.server_back.send_modify(|n| *n += 1);
    }

    fn set(&self, api: &str, state: WatchState) {
        if state != WatchState::Listing {
            let mut settled = self.settled.lock().expect("watch health lock");
            if !settled.contains(api) {
                settled.insert(api.to_owned());
            }
        }
        let mut all = self.states.lock().expect("watch health lock");
        if all.get(api) != Some(&state) {
            all.insert(api.to_owned(), state);
        }
    }

    /// Whether some watch's last attempt failed.
    pub fn any_failing(&self) -> bool {
        let all = self.states.lock().expect("watch health lock");
        all.values().any(|s| matches!(s, WatchState::Failing(_)))
    }

    /// The APIs still in their first listing: until there are none, the
    /// agent has not seen the cluster as it is (Cilium's daemon waits for
    /// its caches to sync before it calls itself up). A watch the server
    /// refuses does not hold this up; status names it instead.
    pub fn first_lists_pending(&self) -> Vec<String> {
        let settled = self.settled.lock().expect("watch health lock");
        let all = self.states.lock().expect("watch health lock");
        all.keys()
            .filter(|api| !settled.contains(*api))
            .cloned()
            .collect()
    }

    /// Every watch and where it is.
    pub fn all(&self) -> Vec<(String, WatchState)> {
        let all = self.states.lock().expect("watch health lock");
        all.iter()
            .map(|(api, s)| (api.clone(), s.clone()))
            .collect()
    }
}

/// What a watch the API server refused says in status: the server's own
/// message (`pods is forbidden: ...`), and for a resource it does not
/// serve, that its CRD is missing. None when the server was not reached
/// or failed on its side (the connection probe reports an unreachable
/// server; the watch keeps its state until it is back).
fn refusal(e: &watcher::Error) -> Option<String> {
    let api_error = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => Some(s),
        watcher::Error::WatchError(s) => Some(s),
        _ => None,
    };
    // a server starting up, overloaded, or asking for a relist answers
    // 5xx, 429 or 410: passing, not a refusal
    let refused =
        api_error.filter(|s| (400..500).contains(&s.code) && ![410, 429].contains(&s.code))?;
    Some(match refused.code {
        404 => {
            "the API server does not serve it (is its CustomResourceDefinition installed?)".into()
        }
        code => format!("{} ({code})", refused.message),
    })
}

/// The object without what no subscriber reads and every object of a
/// busy cluster carries (often larger than the rest): the field managers'
/// bookkeeping and kubectl's copy of the last applied object, as
/// Cilium's informers drop them.
fn slimmed<K: Resource>(mut obj: K) -> K {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = &mut meta.annotations {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    obj
}

/// One resource kind, listed then watched.
pub struct ResourceSource<K> {
    events: Events<K>,
    /// To start over after a refusal.
    api: Api<K>,
    config: watcher::Config,
    /// What the source says in logs (`Pods`, `CiliumNodes`).
    what: &'static str,
    listed: bool,
    health: Option<(Arc<WatchHealth>, String)>,
    backoff: DefaultBackoff,
    /// Wakes a wait after an error when the server is seen back.
    server_back: Option<tokio::sync::watch::Receiver<u64>>,
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
            events: watcher::watcher(api.clone(), config.clone()).boxed(),
            api,
            config,
            what,
            listed: false,
            health: None,
            backoff: DefaultBackoff::default(),
            server_back: None,
        }
    }

    /// Reports how the watch fares to `health` under `api`, and retries at
    /// once when `health` hears the server is back.
    pub fn reporting(mut self, health: Arc<WatchHealth>, api: &str) -> Self {
        health.set(api, WatchState::Listing);
        self.server_back = Some(health.server_back.subscribe());
        self.health = Some((health, api.to_owned()));
        self
    }
}

impl<K> ResourceSource<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + Debug + Send + 'static,
{
    /// Waits out an error: the backoff's delay, or until the server is
    /// seen back.
    async fn back_off(&mut self) {
        let delay = self.backoff.next().unwrap_or(MAX_BACKOFF);
        let Some(back) = &mut self.server_back else {
            return tokio::time::sleep(delay).await;
        };
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            changed = back.changed() => match changed {
                Ok(()) => self.backoff.reset(),
                // the health is gone with the agent
                Err(_) => tokio::time::sleep(delay).await,
            },
        }
    }
}

/// client-go's longest wait between attempts.
const MAX_BACKOFF: std::time::Duration = std::time::Duration::from_secs(30);

impl<K> watch::Source for ResourceSource<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + Debug + Send + 'static,
{
    type Key = String;
    type Value = K;

    async fn next(&mut self) -> Option<watch::Event<String, K>> {
        loop {
            let next = self.events.next().await?;
            if next.is_ok() {
                self.backoff.reset();
            }
            let refused = match &next {
                Err(e) => refusal(e),
                Ok(_) => None,
            };
            if let Some((health, api)) = &self.health {
                let state = match &next {
                    Err(_) => refused.clone().map(WatchState::Failing),
                    Ok(Event::Init) => Some(WatchState::Listing),
                    Ok(Event::InitDone) => Some(WatchState::Synced),
                    Ok(_) => None,
                };
                if let Some(state) = state {
                    health.set(api, state);
                }
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
                    value: slimmed(obj),
                },
                Ok(Event::InitDone) => watch::Event::ListDone,
                Ok(Event::Delete(obj)) => watch::Event::Delete { key: key_of(&obj) },
                Err(e) => {
                    tracing::warn!(subsys = "k8s-watcher", resource = self.what, error = %e, "Watch failed, retrying");
                    self.back_off().await;
                    // A watch that starts after a refusal says nothing
                    // until something changes: starting over with a list
                    // shows at once that the server lets it through.
                    if refused.is_some() {
                        self.events =
                            watcher::watcher(self.api.clone(), self.config.clone()).boxed();
                    }
                    continue;
                }
            };
            return Some(ev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_first_listing_holds_the_caches_back() {
        let h = WatchHealth::default();
        h.set("core/v1::Service", WatchState::Listing);
        h.set("cilium/v2::CiliumNode", WatchState::Listing);
        h.set("cilium/v2::CiliumIdentity", WatchState::Listing);
        assert_eq!(h.first_lists_pending().len(), 3);
        h.set("core/v1::Service", WatchState::Synced);
        // refused (RBAC, a missing CRD): status names it, start goes on
        h.set(
            "cilium/v2::CiliumIdentity",
            WatchState::Failing("forbidden".into()),
        );
        assert_eq!(h.first_lists_pending(), ["cilium/v2::CiliumNode"]);
        h.set("cilium/v2::CiliumNode", WatchState::Synced);
        // a relisting later (410 Gone) is no start
        h.set("core/v1::Service", WatchState::Listing);
        assert!(h.first_lists_pending().is_empty());
    }
}
