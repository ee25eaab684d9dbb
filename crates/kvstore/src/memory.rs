//! An in-process kvstore for tests that are not about the kvstore: several
//! sessions (one per simulated agent) share one store; a session's leased
//! keys go when it is expired, as etcd drops them with a lease.

use crate::{Backend, Error, Event, Listing};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

struct Entry {
    value: Vec<u8>,
    lease: Option<i64>,
}

#[derive(Default)]
struct State {
    kvs: BTreeMap<String, Entry>,
    revision: i64,
    next_lease: i64,
    watchers: Vec<(String, mpsc::UnboundedSender<Event>)>,
}

impl State {
    fn notify(&mut self, key: &str, event: Event) {
        self.watchers.retain(|(prefix, tx)| {
            !key.starts_with(prefix.as_str()) || tx.send(event.clone()).is_ok()
        });
    }

    fn put(&mut self, key: &str, value: &[u8], lease: Option<i64>) {
        self.revision += 1;
        self.kvs.insert(
            key.to_owned(),
            Entry {
                value: value.to_vec(),
                lease,
            },
        );
        let event = Event::Upsert {
            key: key.to_owned(),
            value: value.to_vec(),
        };
        self.notify(key, event);
    }

    fn delete(&mut self, key: &str) {
        if self.kvs.remove(key).is_some() {
            self.revision += 1;
            self.notify(
                key,
                Event::Delete {
                    key: key.to_owned(),
                },
            );
        }
    }
}

/// The shared store.
#[derive(Clone, Default)]
pub struct Memory {
    state: Arc<Mutex<State>>,
}

/// One agent's view of a [`Memory`] store, with its own lease.
pub struct MemorySession {
    store: Memory,
    lease: i64,
}

impl Memory {
    pub fn new() -> Self {
        Self::default()
    }

    /// A new session (lease) on this store.
    pub fn session(&self) -> MemorySession {
        let mut st = self.state.lock().expect("memory kvstore lock");
        st.next_lease += 1;
        MemorySession {
            store: self.clone(),
            lease: st.next_lease,
        }
    }

    /// Drops every key of `lease`, as etcd does when a lease expires.
    pub fn expire(&self, lease: i64) {
        let mut st = self.state.lock().expect("memory kvstore lock");
        let keys: Vec<String> = st
            .kvs
            .iter()
            .filter(|(_, e)| e.lease == Some(lease))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            st.delete(&k);
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().expect("memory kvstore lock"))
    }
}

impl Backend for MemorySession {
    fn lease_id(&self) -> i64 {
        self.lease
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, Error>> {
        let value = self
            .store
            .with(|st| st.kvs.get(key).map(|e| e.value.clone()));
        Box::pin(async move { Ok(value) })
    }

    fn list_prefix<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, Error>> {
        let listing = self.store.with(|st| {
            let kvs = st
                .kvs
                .range(prefix.to_owned()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(k, e)| (k.clone(), e.value.clone()))
                .collect();
            (kvs, st.revision)
        });
        Box::pin(async move { Ok(listing) })
    }

    fn put<'a>(&'a self, key: &'a str, value: &'a [u8]) -> BoxFuture<'a, Result<(), Error>> {
        self.store.with(|st| st.put(key, value, None));
        Box::pin(async { Ok(()) })
    }

    fn put_leased<'a>(&'a self, key: &'a str, value: &'a [u8]) -> BoxFuture<'a, Result<(), Error>> {
        self.store.with(|st| st.put(key, value, Some(self.lease)));
        Box::pin(async { Ok(()) })
    }

    fn create_only<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        leased: bool,
    ) -> BoxFuture<'a, Result<bool, Error>> {
        let created = self.store.with(|st| {
            if st.kvs.contains_key(key) {
                return false;
            }
            st.put(key, value, leased.then_some(self.lease));
            true
        });
        Box::pin(async move { Ok(created) })
    }

    fn create_with_leased<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        absent_prefix: &'a str,
        leased_key: &'a str,
        leased_value: &'a [u8],
    ) -> BoxFuture<'a, Result<bool, Error>> {
        let created = self.store.with(|st| {
            let taken =
                st.kvs.contains_key(key) || st.kvs.keys().any(|k| k.starts_with(absent_prefix));
            if taken {
                return false;
            }
            st.put(key, value, None);
            st.put(leased_key, leased_value, Some(self.lease));
            true
        });
        Box::pin(async move { Ok(created) })
    }

    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        self.store.with(|st| st.delete(key));
        Box::pin(async { Ok(()) })
    }

    fn delete_if_absent<'a>(
        &'a self,
        key: &'a str,
        absent_prefix: &'a str,
    ) -> BoxFuture<'a, Result<bool, Error>> {
        let deleted = self.store.with(|st| {
            if st.kvs.keys().any(|k| k.starts_with(absent_prefix)) {
                return false;
            }
            st.delete(key);
            true
        });
        Box::pin(async move { Ok(deleted) })
    }

    fn watch_prefix(&self, prefix: &str) -> mpsc::Receiver<Event> {
        let (tx, rx) = mpsc::channel(1024);
        let (utx, mut urx) = mpsc::unbounded_channel();
        // The listing and the registration happen under one lock, so no
        // change falls between them.
        self.store.with(|st| {
            for (k, e) in st.kvs.range(prefix.to_owned()..) {
                if !k.starts_with(prefix) {
                    break;
                }
                let _ = utx.send(Event::Upsert {
                    key: k.clone(),
                    value: e.value.clone(),
                });
            }
            let _ = utx.send(Event::ListDone);
            st.watchers.push((prefix.to_owned(), utx));
        });
        tokio::spawn(async move {
            while let Some(ev) = urx.recv().await {
                if tx.send(ev).await.is_err() {
                    return;
                }
            }
        });
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kvstore;

    #[tokio::test(flavor = "current_thread")]
    async fn sessions_share_a_store_and_leased_keys_go_with_their_lease() {
        let store = Memory::new();
        let (a, b) = (store.session(), store.session());
        let lease_a = a.lease_id();
        let (a, b) = (Kvstore::new(a), Kvstore::new(b));
        let mut rx = b.watch_prefix("cilium/x/");
        assert_eq!(rx.recv().await, Some(Event::ListDone));
        a.put_leased("cilium/x/a", b"1").await.unwrap();
        assert!(!b.create_only("cilium/x/a", b"2", false).await.unwrap());
        assert!(matches!(rx.recv().await, Some(Event::Upsert { .. })));
        assert!(!b
            .create_with_leased("cilium/y", b"v", "cilium/x/", "cilium/z", b"w")
            .await
            .unwrap());
        store.expire(lease_a);
        assert_eq!(
            rx.recv().await,
            Some(Event::Delete {
                key: "cilium/x/a".into()
            })
        );
        assert_eq!(b.get("cilium/x/a").await.unwrap(), None);
    }
}
