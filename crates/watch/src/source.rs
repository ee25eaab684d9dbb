//! What feeds a store: raw or typed events from a list-and-watch.

use std::fmt::Display;
use std::future::Future;
use tokio::sync::mpsc;

/// What a source reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event<K, V> {
    Upsert {
        key: K,
        value: V,
    },
    Delete {
        key: K,
    },
    /// A new listing begins: every key it does not upsert before the next
    /// `ListDone` is gone.
    Relist,
    /// The listing is complete (the first one, or one after `Relist`).
    ListDone,
}

impl<K: Clone, V> Event<K, V> {
    /// The same event with its value (if any) seen through `f`.
    pub fn map_ref<W>(&self, f: impl FnOnce(&V) -> W) -> Event<K, W> {
        match self {
            Event::Upsert { key, value } => Event::Upsert {
                key: key.clone(),
                value: f(value),
            },
            Event::Delete { key } => Event::Delete { key: key.clone() },
            Event::Relist => Event::Relist,
            Event::ListDone => Event::ListDone,
        }
    }
}

/// A list-and-watch: the store starts out listing, so a source's first
/// events are the listing, closed by `ListDone`.
pub trait Source: Send {
    type Key: Send;
    type Value: Send;

    /// The next event; None when the source has ended. Must be
    /// cancel-safe: the store waits on it beside its retry timer.
    fn next(&mut self) -> impl Future<Output = Option<Event<Self::Key, Self::Value>>> + Send;

    /// This source with each value decoded by `decode`; values that do not
    /// decode are logged with their key and skipped.
    fn decode<V, E, F>(self, decode: F) -> Decoded<Self, F>
    where
        Self: Sized,
        F: FnMut(&Self::Key, &Self::Value) -> Result<V, E> + Send,
    {
        Decoded {
            inner: self,
            decode,
        }
    }

    /// This source with every event shown to `tap` on its way through
    /// (a side copy of what passes, such as a [`crate::Mirror`]).
    fn tap<F>(self, tap: F) -> Tapped<Self, F>
    where
        Self: Sized,
        F: FnMut(&Event<Self::Key, Self::Value>) + Send,
    {
        Tapped { inner: self, tap }
    }
}

/// A source whose events are shown to a tap (see [`Source::tap`]).
pub struct Tapped<S, F> {
    inner: S,
    tap: F,
}

impl<S, F> Source for Tapped<S, F>
where
    S: Source,
    F: FnMut(&Event<S::Key, S::Value>) + Send,
{
    type Key = S::Key;
    type Value = S::Value;

    async fn next(&mut self) -> Option<Event<S::Key, S::Value>> {
        let ev = self.inner.next().await?;
        (self.tap)(&ev);
        Some(ev)
    }
}

/// A channel of events is a source (in-memory sources, adapters).
impl<K: Send, V: Send> Source for mpsc::Receiver<Event<K, V>> {
    type Key = K;
    type Value = V;

    fn next(&mut self) -> impl Future<Output = Option<Event<K, V>>> + Send {
        self.recv()
    }
}

/// A source whose values pass through a decode step (see [`Source::decode`]).
pub struct Decoded<S, F> {
    inner: S,
    decode: F,
}

impl<S, F, V, E> Source for Decoded<S, F>
where
    S: Source,
    S::Key: Display,
    F: FnMut(&S::Key, &S::Value) -> Result<V, E> + Send,
    V: Send,
    E: Display,
{
    type Key = S::Key;
    type Value = V;

    async fn next(&mut self) -> Option<Event<S::Key, V>> {
        loop {
            let ev = match self.inner.next().await? {
                Event::Upsert { key, value } => match (self.decode)(&key, &value) {
                    Ok(value) => Event::Upsert { key, value },
                    Err(e) => {
                        tracing::warn!(subsys = "watch", key = %key, error = %e, "Ignoring entry that does not decode");
                        continue;
                    }
                },
                Event::Delete { key } => Event::Delete { key },
                Event::Relist => Event::Relist,
                Event::ListDone => Event::ListDone,
            };
            return Some(ev);
        }
    }
}
