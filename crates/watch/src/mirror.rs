//! A plain copy of what a source says, for a caller that decides on the
//! whole list at once (a garbage collector) rather than on each change:
//! every value by key, and whether the first full list is in, so nothing
//! is judged missing before it could have been seen.

use crate::{Event, Source};
use std::collections::{BTreeMap, BTreeSet};

pub struct Mirror<V> {
    items: BTreeMap<String, V>,
    listed: bool,
    /// Keys a relisting brought so far, to drop the rest at its end.
    relisting: Option<BTreeSet<String>>,
}

impl<V> Default for Mirror<V> {
    fn default() -> Self {
        Self {
            items: BTreeMap::new(),
            listed: false,
            relisting: None,
        }
    }
}

/// A mirror of a complete list of these items (as if listed).
impl<K: Into<String>, V> FromIterator<(K, V)> for Mirror<V> {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(items: I) -> Self {
        Self {
            items: items.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            listed: true,
            relisting: None,
        }
    }
}

impl<V> Mirror<V> {
    pub fn apply(&mut self, event: Event<String, V>) {
        match event {
            Event::Upsert { key, value } => {
                if let Some(seen) = &mut self.relisting {
                    seen.insert(key.clone());
                }
                self.items.insert(key, value);
            }
            Event::Delete { key } => {
                self.items.remove(&key);
            }
            Event::Relist => self.relisting = Some(BTreeSet::new()),
            Event::ListDone => {
                if let Some(seen) = self.relisting.take() {
                    self.items.retain(|k, _| seen.contains(k));
                }
                self.listed = true;
            }
        }
    }

    /// Takes `source`'s next event; false once the source has ended.
    /// Cancel-safe as the source is, so it can wait beside a timer.
    pub async fn follow<S>(&mut self, source: &mut S) -> bool
    where
        S: Source<Key = String, Value = V>,
    {
        match source.next().await {
            Some(ev) => {
                self.apply(ev);
                true
            }
            None => false,
        }
    }

    /// The first full list is in (a relisting does not take it back: what
    /// was known stays until the relisting ends).
    pub fn listed(&self) -> bool {
        self.listed
    }

    pub fn get(&self, key: &str) -> Option<&V> {
        self.items.get(key)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.items.contains_key(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &V)> {
        self.items.iter()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert(key: &str) -> Event<String, u8> {
        Event::Upsert {
            key: key.into(),
            value: 0,
        }
    }

    #[test]
    fn a_relisting_drops_what_it_did_not_bring_and_listed_waits_for_the_first_list() {
        let mut m = Mirror::default();
        m.apply(upsert("a"));
        m.apply(upsert("b"));
        assert!(!m.listed());
        m.apply(Event::ListDone);
        assert!(m.listed());
        m.apply(Event::Relist);
        m.apply(upsert("b"));
        assert!(m.contains("a"), "kept until the relisting ends");
        m.apply(Event::ListDone);
        assert!(!m.contains("a") && m.contains("b") && m.len() == 1);
        m.apply(Event::Delete { key: "b".into() });
        assert!(m.is_empty());
    }
}
