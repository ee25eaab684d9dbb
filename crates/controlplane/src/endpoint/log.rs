//! An endpoint's status log: what happened to it and when, for `cilium
//! endpoint log` (Cilium's EndpointStatusLog). Not persisted: a restarted
//! agent's log starts with the restore.

use api::endpoint::{EndpointState, EndpointStatusChange};
use std::collections::VecDeque;
use std::time::SystemTime;

/// How many entries an endpoint keeps; older ones go. Fewer than
/// Cilium's 256 (memory: every endpoint has one), and a repeat of the
/// newest entry only moves its time, so a run of identical
/// regenerations takes one entry.
pub const MAX_ENTRIES: usize = 32;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusLog(VecDeque<EndpointStatusChange>);

impl StatusLog {
    pub fn ok(&mut self, state: EndpointState, message: impl Into<String>) {
        self.push("OK", state, message.into());
    }

    pub fn failed(&mut self, state: EndpointState, message: impl Into<String>) {
        self.push("Failed", state, message.into());
    }

    fn push(&mut self, code: &str, state: EndpointState, message: String) {
        let now = api::timefmt::rfc3339(SystemTime::now());
        if let Some(last) = self.0.back_mut() {
            if last.code == code && last.state == state.as_str() && last.message == message {
                last.timestamp = now;
                return;
            }
        }
        if self.0.len() == MAX_ENTRIES {
            self.0.pop_front();
        }
        self.0.push_back(EndpointStatusChange {
            code: code.into(),
            message,
            state: state.as_str().into(),
            timestamp: now,
        });
    }

    /// Newest first, as the API returns it.
    pub fn to_api(&self) -> Vec<EndpointStatusChange> {
        self.0.iter().rev().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_entries_newest_first() {
        let mut log = StatusLog::default();
        for i in 0..MAX_ENTRIES + 3 {
            log.ok(EndpointState::Ready, format!("entry {i}"));
            // a repeat takes no room of its own
            log.ok(EndpointState::Ready, format!("entry {i}"));
        }
        log.failed(EndpointState::NotReady, "last");
        let api = log.to_api();
        assert_eq!(api.len(), MAX_ENTRIES);
        assert_eq!(api[0].message, "last");
        assert_eq!(api[0].code, "Failed");
        assert_eq!(api[0].state, "not-ready");
        assert_eq!(api[MAX_ENTRIES - 1].message, "entry 4");
    }
}
