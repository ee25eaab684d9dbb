//! The store: what the source says each key is, what the handler last
//! accepted, and the changes between them.

use crate::{Event, Source};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// What a handler is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change<K, V> {
    /// A key appeared (`old` None) or changed.
    Upsert { key: K, old: Option<V>, new: V },
    /// A key went: deleted at the source, or missing from a relisting.
    Delete { key: K, old: V },
    /// The initial listing has been handled; sent once.
    Synced,
}

/// Applies changes. An error means "not applied": the key is tried again
/// later, with its latest value, and other keys go on meanwhile.
pub trait Handler<K, V>: Send {
    type Error: Display;

    fn handle(
        &mut self,
        change: Change<K, V>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

/// Any `FnMut(Change) -> impl Future<Output = Result<(), E>>` handles.
impl<K, V, F, Fut, E> Handler<K, V> for F
where
    F: FnMut(Change<K, V>) -> Fut + Send,
    Fut: Future<Output = Result<(), E>> + Send,
    E: Display,
{
    type Error = E;

    fn handle(&mut self, change: Change<K, V>) -> impl Future<Output = Result<(), E>> + Send {
        self(change)
    }
}

/// Tells whether a store's initial listing has been handled.
#[derive(Clone, Debug)]
pub struct Synced(watch::Receiver<bool>);

impl Synced {
    /// Synced from the start: for state that has no source to wait for.
    pub fn ready() -> Self {
        Self(watch::Sender::new(true).subscribe())
    }

    pub fn is_synced(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until the initial listing has been handled: true then, false
    /// when the store stopped before that.
    pub async fn wait(&mut self) -> bool {
        self.0.wait_for(|s| *s).await.is_ok()
    }
}

/// How long a failed key waits before its next try: `min`, doubling per
/// failure, at most `max`.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    pub min: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            min: Duration::from_millis(100),
            max: Duration::from_secs(30),
        }
    }
}

impl Backoff {
    fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.min.saturating_mul(factor).min(self.max)
    }
}

struct Entry<V> {
    /// What the source says (None: deleted).
    desired: Option<V>,
    /// What the handler last accepted (None: nothing).
    handled: Option<V>,
}

struct Retry {
    attempt: u32,
    due: Instant,
}

/// A typed store of one kind of object (nodes, services, ...), run by
/// [`Store::run`] with a source and a handler.
pub struct Store<K, V> {
    /// For logs: what the store holds ("nodes", "services").
    name: &'static str,
    entries: BTreeMap<K, Entry<V>>,
    /// The keys upserted by the listing in progress, if one is.
    listing: Option<BTreeSet<K>>,
    retries: BTreeMap<K, Retry>,
    backoff: Backoff,
    synced: watch::Sender<bool>,
}

impl<K, V> Store<K, V>
where
    K: Ord + Clone + Display + Send,
    V: Clone + PartialEq + Send,
{
    /// An empty store; the source's first events are its initial listing.
    pub fn new(name: &'static str) -> Self {
        Self::restored(name, [])
    }

    /// A store that starts from what the subscriber already has (state
    /// restored from a previous run): the initial listing then brings only
    /// the differences, and deletes the keys it does not have.
    pub fn restored(name: &'static str, had: impl IntoIterator<Item = (K, V)>) -> Self {
        let entries = had
            .into_iter()
            .map(|(k, v)| {
                let entry = Entry {
                    desired: Some(v.clone()),
                    handled: Some(v),
                };
                (k, entry)
            })
            .collect();
        Self {
            name,
            entries,
            listing: Some(BTreeSet::new()),
            retries: BTreeMap::new(),
            backoff: Backoff::default(),
            synced: watch::Sender::new(false),
        }
    }

    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Tells when the initial listing has been handled.
    pub fn synced(&self) -> Synced {
        Synced(self.synced.subscribe())
    }

    /// Feeds `handler` from `source` until the source ends.
    pub async fn run<S, H>(mut self, mut source: S, mut handler: H)
    where
        S: Source<Key = K, Value = V>,
        H: Handler<K, V>,
    {
        loop {
            let due = self.retries.values().map(|r| r.due).min();
            tokio::select! {
                ev = source.next() => match ev {
                    Some(ev) => self.apply(ev, &mut handler).await,
                    None => return,
                },
                () = sleep_until(due) => self.retry_due(&mut handler).await,
            }
        }
    }

    async fn apply<H: Handler<K, V>>(&mut self, ev: Event<K, V>, handler: &mut H) {
        match ev {
            Event::Upsert { key, value } => {
                if let Some(seen) = &mut self.listing {
                    seen.insert(key.clone());
                }
                self.entries
                    .entry(key.clone())
                    .or_insert(Entry {
                        desired: None,
                        handled: None,
                    })
                    .desired = Some(value);
                self.reconcile(key, handler).await;
            }
            Event::Delete { key } => {
                if let Some(seen) = &mut self.listing {
                    seen.remove(&key);
                }
                if let Some(e) = self.entries.get_mut(&key) {
                    e.desired = None;
                }
                self.reconcile(key, handler).await;
            }
            Event::Relist => self.listing = Some(BTreeSet::new()),
            Event::ListDone => {
                if let Some(seen) = self.listing.take() {
                    let gone: Vec<K> = self
                        .entries
                        .iter()
                        .filter(|(k, e)| e.desired.is_some() && !seen.contains(*k))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for key in gone {
                        if let Some(e) = self.entries.get_mut(&key) {
                            e.desired = None;
                        }
                        self.reconcile(key, handler).await;
                    }
                }
                if !*self.synced.borrow() {
                    if let Err(e) = handler.handle(Change::Synced).await {
                        tracing::warn!(subsys = "watch", store = self.name, error = %e, "Handler failed on the initial sync");
                    }
                    tracing::debug!(
                        subsys = "watch",
                        store = self.name,
                        keys = self.entries.len(),
                        "Initial list handled"
                    );
                    self.synced.send_replace(true);
                }
            }
        }
    }

    /// Hands the handler the difference between what the source says and
    /// what it accepted for `key`, if any.
    async fn reconcile<H: Handler<K, V>>(&mut self, key: K, handler: &mut H) {
        let change = match self.entries.get(&key) {
            Some(Entry {
                handled: old,
                desired: Some(new),
            }) if old.as_ref() != Some(new) => Change::Upsert {
                key: key.clone(),
                old: old.clone(),
                new: new.clone(),
            },
            Some(Entry {
                handled: Some(old),
                desired: None,
            }) => Change::Delete {
                key: key.clone(),
                old: old.clone(),
            },
            _ => {
                self.settled(key);
                return;
            }
        };
        match handler.handle(change).await {
            Ok(()) => {
                if let Some(e) = self.entries.get_mut(&key) {
                    e.handled = e.desired.clone();
                }
                self.settled(key);
            }
            Err(error) => {
                let attempt = self.retries.get(&key).map_or(1, |r| r.attempt + 1);
                let delay = self.backoff.delay(attempt);
                tracing::warn!(subsys = "watch", store = self.name, key = %key, attempt, retryIn = ?delay, error = %error, "Unable to handle change, retrying");
                let due = Instant::now() + delay;
                self.retries.insert(key, Retry { attempt, due });
            }
        }
    }

    /// `key` is as the source says: nothing left to retry or keep.
    fn settled(&mut self, key: K) {
        self.retries.remove(&key);
        if self.entries.get(&key).is_some_and(|e| e.desired.is_none()) {
            self.entries.remove(&key);
        }
    }

    async fn retry_due<H: Handler<K, V>>(&mut self, handler: &mut H) {
        let now = Instant::now();
        let due: Vec<K> = self
            .retries
            .iter()
            .filter(|(_, r)| r.due <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.reconcile(key, handler).await;
        }
    }
}

async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
