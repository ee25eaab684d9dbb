//! The sort buffer of a Relay request: responses from every node held in
//! time order, the oldest let out when the buffer is full or has waited
//! long enough (Cilium's bounded priority queue, so the merged order is
//! exact within the buffer's reach).

use hubble::observer::GetFlowsResponse;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

/// A response's time as (seconds, nanos); none sorts first.
fn time_of(r: &GetFlowsResponse) -> (i64, i32) {
    r.time.map(|t| (t.seconds, t.nanos)).unwrap_or((0, 0))
}

struct Held {
    time: (i64, i32),
    /// arrival order, so equal times leave as they came
    seq: u64,
    response: GetFlowsResponse,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.time, self.seq).cmp(&(other.time, other.seq))
    }
}

#[derive(Default)]
pub struct SortBuffer {
    heap: BinaryHeap<Reverse<Held>>,
    seq: u64,
}

impl SortBuffer {
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub fn push(&mut self, response: GetFlowsResponse) {
        self.seq += 1;
        self.heap.push(Reverse(Held {
            time: time_of(&response),
            seq: self.seq,
            response,
        }));
    }

    /// The oldest response held.
    pub fn pop(&mut self) -> Option<GetFlowsResponse> {
        self.heap.pop().map(|Reverse(h)| h.response)
    }

    /// Every response older than `cutoff`, oldest first.
    pub fn pop_older_than(&mut self, cutoff: std::time::SystemTime) -> Vec<GetFlowsResponse> {
        let cutoff = prost_types::Timestamp::from(cutoff);
        let cutoff = (cutoff.seconds, cutoff.nanos);
        let mut out = Vec::new();
        while self.heap.peek().is_some_and(|Reverse(h)| h.time < cutoff) {
            out.extend(self.pop());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(secs: i64, nanos: i32, node: &str) -> GetFlowsResponse {
        GetFlowsResponse {
            time: Some(prost_types::Timestamp {
                seconds: secs,
                nanos,
            }),
            node_name: node.into(),
            ..Default::default()
        }
    }

    #[test]
    fn responses_leave_oldest_first_and_equal_times_in_arrival_order() {
        let mut b = SortBuffer::default();
        for r in [at(5, 0, "a"), at(3, 9, "b"), at(3, 1, "c"), at(5, 0, "d")] {
            b.push(r);
        }
        let order: Vec<String> = std::iter::from_fn(|| b.pop())
            .map(|r| r.node_name)
            .collect();
        assert_eq!(order, ["c", "b", "a", "d"]);
        assert!(b.is_empty());
    }

    #[test]
    fn draining_takes_only_what_is_older_than_the_cutoff() {
        let mut b = SortBuffer::default();
        for r in [at(10, 0, "new"), at(4, 0, "old"), at(7, 500, "mid")] {
            b.push(r);
        }
        let old = b.pop_older_than(UNIX_EPOCH + Duration::from_secs(8));
        let names: Vec<&str> = old.iter().map(|r| r.node_name.as_str()).collect();
        assert_eq!(names, ["old", "mid"]);
        assert_eq!(b.len(), 1);
    }
}
