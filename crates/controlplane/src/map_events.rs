//! The recent changes a subsystem made to a BPF map, for `cilium map events
//! <map>` (Cilium's map event buffers): what was written or deleted, when,
//! and whether the kernel took it.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::SystemTime;

/// How many changes a map keeps; older ones go (Cilium's default buffer
/// for a map with events on is 1024 entries).
pub const CAPACITY: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Update,
    Delete,
}

impl Action {
    /// Cilium's names for the change and for the state it asks for.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Update => "update",
            Action::Delete => "delete",
        }
    }

    pub fn desired_action(self) -> &'static str {
        match self {
            Action::Update => "sync",
            Action::Delete => "to-be-deleted",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapEvent {
    pub timestamp: SystemTime,
    pub action: Action,
    pub key: String,
    pub value: String,
    /// The kernel's refusal, if it refused.
    pub error: Option<String>,
}

#[derive(Default)]
pub struct MapEvents(Mutex<VecDeque<MapEvent>>);

impl MapEvents {
    pub fn record(&self, action: Action, key: String, value: String, error: Option<String>) {
        let mut ring = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if ring.len() == CAPACITY {
            ring.pop_front();
        }
        ring.push_back(MapEvent {
            timestamp: SystemTime::now(),
            action,
            key,
            value,
            error,
        });
    }

    /// Oldest first.
    pub fn list(&self) -> Vec<MapEvent> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_latest_changes_in_order() {
        let events = MapEvents::default();
        for i in 0..CAPACITY + 2 {
            events.record(Action::Update, i.to_string(), String::new(), None);
        }
        events.record(
            Action::Delete,
            "last".into(),
            String::new(),
            Some("E2BIG".into()),
        );
        let list = events.list();
        assert_eq!(list.len(), CAPACITY);
        assert_eq!(list[0].key, "3");
        assert_eq!(list.last().unwrap().action, Action::Delete);
    }
}
