//! Security identities of local endpoints, allocated from their label sets.
//!
//! Until the kvstore allocator exists (multi-node), identities are numbered
//! locally from the start of the global range; restored endpoints bring
//! theirs back, so numbers are stable across restarts of one node.

use std::collections::BTreeMap;

/// First identity of the cluster-wide range (Cilium's MinimalAllocationIdentity).
pub const MIN_GLOBAL: u32 = 256;
/// Last identity of that range (without clustermesh).
pub const MAX_GLOBAL: u32 = 65535;

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error("no free identity left in {MIN_GLOBAL}..{MAX_GLOBAL}")]
    Exhausted,
}

#[derive(Default)]
pub struct Identities {
    by_labels: BTreeMap<Vec<String>, (u32, usize)>,
}

impl Identities {
    /// The identity of a label set, allocating one on first use. An empty
    /// set is `reserved:init`, as for endpoints whose labels are unknown.
    pub fn acquire(
        &mut self,
        labels: &[String],
        wanted: Option<u32>,
    ) -> Result<u32, IdentityError> {
        if labels.is_empty() {
            return Ok(abi::identity::INIT);
        }
        let mut key = labels.to_vec();
        key.sort();
        if let Some((id, refs)) = self.by_labels.get_mut(&key) {
            *refs += 1;
            return Ok(*id);
        }
        let used = |id: u32| self.by_labels.values().any(|(i, _)| *i == id);
        let id = match wanted {
            Some(id) if id >= MIN_GLOBAL && !used(id) => id,
            _ => (MIN_GLOBAL..=MAX_GLOBAL)
                .find(|id| !used(*id))
                .ok_or(IdentityError::Exhausted)?,
        };
        self.by_labels.insert(key, (id, 1));
        Ok(id)
    }

    pub fn release(&mut self, labels: &[String]) {
        let mut key = labels.to_vec();
        key.sort();
        if let Some((_, refs)) = self.by_labels.get_mut(&key) {
            *refs -= 1;
            if *refs == 0 {
                self.by_labels.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_labels_share_an_identity_and_restored_numbers_are_kept() {
        let mut ids = Identities::default();
        let a = vec!["k8s:app=a".to_string()];
        let b = vec!["k8s:app=b".to_string()];
        assert_eq!(ids.acquire(&b, Some(300)).unwrap(), 300);
        assert_eq!(ids.acquire(&a, None).unwrap(), 256);
        assert_eq!(ids.acquire(&a, None).unwrap(), 256);
        assert_eq!(ids.acquire(&[], None).unwrap(), abi::identity::INIT);
        ids.release(&a);
        ids.release(&a);
        assert_eq!(ids.acquire(&["k8s:app=c".to_string()], None).unwrap(), 256);
    }
}
