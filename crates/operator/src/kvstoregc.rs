//! Identity garbage collection in kvstore mode, as Cilium's allocator GC
//! runs in the operator: an identity's master key
//! (`identities/v1/id/<ID>`, never leased) outlives the nodes that used
//! it, whose references (`identities/v1/value/<labels>/<node>`) go with
//! their leases. A master key no node references in two rounds in a row
//! is deleted, in one transaction with the check that still no reference
//! exists, so a node that took it up meanwhile keeps it.

use kvstore::keys::{IDENTITY_IDS, IDENTITY_VALUES};
use kvstore::Kvstore;
use std::collections::BTreeSet;
use std::time::Duration;

/// What one round found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Round {
    pub alive: usize,
    pub deleted: usize,
}

/// The label keys the references name: `value/<labels>/<node>` (labels
/// may hold `/`, node suffixes do not).
fn referenced(refs: &[(String, Vec<u8>)]) -> BTreeSet<String> {
    let prefix = format!("{IDENTITY_VALUES}/");
    refs.iter()
        .filter_map(|(k, _)| {
            let rest = k.strip_prefix(&prefix)?;
            Some(rest[..rest.rfind('/')?].to_owned())
        })
        .collect()
}

/// The collector's memory between rounds: master keys unused last round.
#[derive(Default)]
pub struct Collector {
    stale: BTreeSet<String>,
}

impl Collector {
    pub async fn round(&mut self, kv: &Kvstore) -> Result<Round, kvstore::Error> {
        let (masters, _) = kv.list_prefix(&format!("{IDENTITY_IDS}/")).await?;
        let (refs, _) = kv.list_prefix(&format!("{IDENTITY_VALUES}/")).await?;
        let used = referenced(&refs);
        let mut round = Round::default();
        let mut stale = BTreeSet::new();
        for (key, value) in masters {
            let labels = String::from_utf8_lossy(&value).into_owned();
            if used.contains(&labels) {
                round.alive += 1;
                continue;
            }
            if !self.stale.contains(&key) {
                // unused now: deleted only if still unused next round
                stale.insert(key);
                round.alive += 1;
                continue;
            }
            let absent = format!("{IDENTITY_VALUES}/{labels}/");
            if kv.delete_if_absent(&key, &absent).await? {
                tracing::info!(subsys = "identity-gc", key = %key, labels = %labels, "Deleted an identity no node uses");
                round.deleted += 1;
            } else {
                round.alive += 1;
            }
        }
        self.stale = stale;
        Ok(round)
    }
}

/// Runs a round every `interval` until the operator stops; `report` hears
/// each round's outcome.
pub async fn run(
    kv: Kvstore,
    interval: Duration,
    mut report: impl FnMut(Result<&Round, &kvstore::Error>),
) {
    let mut collector = Collector::default();
    let mut tick = tokio::time::interval(interval);
    tick.tick().await;
    loop {
        tick.tick().await;
        match collector.round(&kv).await {
            Ok(r) => report(Ok(&r)),
            Err(e) => {
                tracing::warn!(subsys = "identity-gc", error = %e, "Identity garbage collection failed");
                report(Err(&e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_master_key_unused_two_rounds_in_a_row_goes_and_a_used_one_stays() {
        let store = kvstore::Memory::new();
        let node = Kvstore::new(store.session());
        let operator = Kvstore::new(store.session());
        let web =
            "k8s:app=web;k8s:io.cilium.k8s.namespace.labels.kubernetes.io/metadata.name=default;";
        let db = "k8s:app=db;";
        node.put(&kvstore::keys::identity_id(300), web.as_bytes())
            .await
            .unwrap();
        node.put(&kvstore::keys::identity_id(301), db.as_bytes())
            .await
            .unwrap();
        node.put_leased(&kvstore::keys::identity_value(web, "198.18.0.11"), b"300")
            .await
            .unwrap();
        let mut gc = Collector::default();
        assert_eq!(
            gc.round(&operator).await.unwrap(),
            Round {
                alive: 2,
                deleted: 0
            }
        );
        // db is taken up again between the rounds: it stays
        node.put_leased(&kvstore::keys::identity_value(db, "198.18.0.12"), b"301")
            .await
            .unwrap();
        assert_eq!(
            gc.round(&operator).await.unwrap(),
            Round {
                alive: 2,
                deleted: 0
            }
        );
        // the node that used web goes (its lease with it)
        store.expire(node.lease_id());
        assert_eq!(
            gc.round(&operator).await.unwrap(),
            Round {
                alive: 2,
                deleted: 0
            }
        );
        assert_eq!(
            gc.round(&operator).await.unwrap(),
            Round {
                alive: 0,
                deleted: 2
            }
        );
        let (left, _) = operator.list_prefix(IDENTITY_IDS).await.unwrap();
        assert!(left.is_empty(), "{left:?}");
    }
}
