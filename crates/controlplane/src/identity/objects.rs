//! Identities as objects of a cluster-wide store that creates each name
//! at most once and never changes what it names (Kubernetes'
//! CiliumIdentities, `identity-allocation-mode=crd`): the object named
//! `<ID>` holds the labels of identity ID.
//!
//! Such a store has no transactions and no locks, so two nodes that want
//! a number for the same new labels at once could each create one. They
//! do not, because every node tries the same IDs in the same order:
//! [`candidates`] is a sequence derived from the labels alone. Walking it,
//! a node skips the IDs it knows to hold other labels and tries to create
//! the first one it does not; the store lets exactly one creation of a
//! name succeed, and everyone else reads back what the name holds. The
//! first candidate not held by other labels is therefore won by one node
//! and found by all the others, whatever their caches knew: an ID that
//! holds other labels holds them for good, so every node skips the same
//! ones, some from their cache and the rest after a failed create. Only a
//! deletion (the operator's garbage collection of an unused identity)
//! between two nodes' walks can make them stop at different candidates;
//! Cilium tolerates such duplicates as well, and every node's lookup then
//! settles on the lowest ID that carries the labels.

use super::{IdentityError, MAX_GLOBAL, MIN_GLOBAL};
use crate::ports::PortFuture;
use std::time::Duration;

/// A store answer that did not come (unreachable, refused, ...).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(Box<dyn std::error::Error + Send + Sync>);

impl StoreError {
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(e.into())
    }
}

/// The cluster's identity objects, as the control plane writes them.
pub trait IdentityObjects: Send + Sync {
    /// Creates identity `id` with `labels` (`source:key=value` strings)
    /// unless it exists, then says which labels `id` has: `labels` when it
    /// was created or already had them, others when another label set
    /// holds it, None when it was gone again by the time it was read.
    fn create<'a>(
        &'a self,
        id: u32,
        labels: &'a [String],
    ) -> PortFuture<'a, Result<Option<Vec<String>>, StoreError>>;

    /// Takes identity `id` back from garbage collection: a store whose
    /// collector marks unused objects before deleting them (the operator's
    /// `io.cilium.heartbeat`) has the mark removed, so the object stays.
    /// Cheap when `id` is not marked; stores without marks do nothing.
    fn keep(&self, _id: u32) -> PortFuture<'_, Result<(), StoreError>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Creates that failed because another label set held the ID, before
/// giving up (Cilium's allocator tries 16 times).
const MAX_TAKEN: usize = 16;
/// Wait before asking an unreachable store again.
const RETRY: Duration = Duration::from_millis(500);

/// The IDs a label key tries, in order, the same on every node: all of
/// the range, starting at a place given by the key's SHA-256.
pub fn candidates(key: &str) -> impl Iterator<Item = u32> {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(key.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let range = u64::from(MAX_GLOBAL - MIN_GLOBAL + 1);
    let start = u64::from_be_bytes(first) % range;
    (0..range).map(move |i| MIN_GLOBAL + ((start + i) % range) as u32)
}

/// The cluster's ID for `key`: the first of its [`candidates`] that is
/// not another label set's, created when nobody has yet. `known` gives
/// the label key of an ID as this node's cache last saw it.
pub(super) async fn claim(
    objects: &dyn IdentityObjects,
    key: &str,
    known: impl Fn(u32) -> Option<String>,
) -> Result<u32, IdentityError> {
    let labels = super::key_labels(key);
    let mut taken = 0;
    for id in candidates(key) {
        match known(id) {
            Some(k) if k == key => return Ok(id),
            Some(_) => continue,
            None => {}
        }
        loop {
            match objects.create(id, &labels).await {
                Ok(Some(now)) if super::labels_key(&now) == key => {
                    tracing::info!(subsys = "allocator", identity = id, labels = %key, "Using global identity");
                    return Ok(id);
                }
                Ok(Some(_)) => {
                    taken += 1;
                    if taken == MAX_TAKEN {
                        return Err(IdentityError::Contended);
                    }
                    break;
                }
                // deleted between the create and the read: try it again
                Ok(None) => continue,
                // the caller's timeout bounds the wait
                Err(e) => {
                    tracing::debug!(subsys = "allocator", identity = id, error = %e, "Identity store unavailable, retrying");
                    tokio::time::sleep(RETRY).await;
                }
            }
        }
    }
    Err(IdentityError::Exhausted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_cover_the_range_once_from_a_place_given_by_the_labels() {
        let a: Vec<u32> = candidates("k8s:app=a;").collect();
        assert_eq!(a.len(), (MAX_GLOBAL - MIN_GLOBAL + 1) as usize);
        let mut sorted = a.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), a.len());
        assert_eq!(
            (sorted[0], *sorted.last().unwrap()),
            (MIN_GLOBAL, MAX_GLOBAL)
        );
        assert_eq!(a, candidates("k8s:app=a;").collect::<Vec<_>>());
        assert_ne!(a[0], candidates("k8s:app=b;").next().unwrap());
    }
}
