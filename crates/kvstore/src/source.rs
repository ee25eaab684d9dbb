//! A kvstore prefix as a source of the watch layer: the backend's
//! list-and-watch (which relists after any break and reports the
//! differences itself) mapped onto `watch::Event`s.

use crate::{Event, Kvstore};
use tokio::sync::mpsc;

/// The keys under one prefix, listed then watched; see [`Kvstore::source`].
pub struct PrefixSource(mpsc::Receiver<Event>);

impl Kvstore {
    /// Lists and watches `prefix` for a `watch::Store`; ends when dropped.
    pub fn source(&self, prefix: &str) -> PrefixSource {
        PrefixSource(self.watch_prefix(prefix))
    }
}

impl watch::Source for PrefixSource {
    type Key = String;
    type Value = Vec<u8>;

    async fn next(&mut self) -> Option<watch::Event<String, Vec<u8>>> {
        Some(match self.0.recv().await? {
            Event::Upsert { key, value } => watch::Event::Upsert { key, value },
            Event::Delete { key } => watch::Event::Delete { key },
            Event::ListDone => watch::Event::ListDone,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::{Kvstore, Memory};
    use watch::{Change, Store};

    #[tokio::test(flavor = "current_thread")]
    async fn a_prefix_feeds_a_store() {
        let kv = Kvstore::new(Memory::new().session());
        kv.put("cilium/x/a", b"1").await.unwrap();
        kv.put("cilium/y/b", b"2").await.unwrap();
        let store = Store::new("test");
        let mut synced = store.synced();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(store.run(kv.source("cilium/x/"), move |c| {
            let _ = tx.send(c);
            std::future::ready(Ok::<(), String>(()))
        }));
        assert!(synced.wait().await);
        kv.delete("cilium/x/a").await.unwrap();
        let mut seen = Vec::new();
        while seen.len() < 3 {
            seen.push(rx.recv().await.unwrap());
        }
        let a = || "cilium/x/a".to_string();
        assert_eq!(
            seen,
            [
                Change::Upsert {
                    key: a(),
                    old: None,
                    new: b"1".to_vec()
                },
                Change::Synced,
                Change::Delete {
                    key: a(),
                    old: b"1".to_vec()
                },
            ]
        );
    }
}
