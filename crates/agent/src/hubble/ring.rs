//! The observer's ring: the last `capacity` events (flows, agent and lost
//! events), each with its sequence number, and a signal followers wait on.
//! Readers keep a sequence number of their own; one the writer has lapped
//! learns how many events it missed instead of reading newer ones as old.

use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// `hubble-event-buffer-capacity`: 2^k - 1 for k in 1..=16, as Cilium
/// takes it (one slot of the power of two is the one being written).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity(usize);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid hubble-event-buffer-capacity {0}: must be one less than a power of 2 between 1 and 65535 (e.g. 4095)")]
pub struct CapacityError(pub i64);

impl Capacity {
    pub const DEFAULT: Capacity = Capacity(4095);

    pub fn new(n: i64) -> Result<Self, CapacityError> {
        let ok = (1..=65535).contains(&n) && n & (n + 1) == 0;
        ok.then_some(Capacity(n as usize)).ok_or(CapacityError(n))
    }

    pub fn get(self) -> usize {
        self.0
    }
}

/// What a reader finds at a sequence number.
pub enum Slot<T> {
    Event(Arc<T>),
    /// Overwritten before it was read: this many events are gone, and the
    /// oldest one still kept is at the returned sequence number.
    Lost {
        missed: u64,
        next: u64,
    },
    /// Not written yet.
    Empty,
}

struct Inner<T> {
    slots: Vec<Option<Arc<T>>>,
    /// Events written so far; the next one's sequence number.
    written: u64,
}

pub struct Ring<T> {
    capacity: usize,
    inner: Mutex<Inner<T>>,
    written: watch::Sender<u64>,
}

impl<T> Ring<T> {
    pub fn new(capacity: Capacity) -> Self {
        let capacity = capacity.get();
        Self {
            capacity,
            inner: Mutex::new(Inner {
                slots: vec![None; capacity + 1],
                written: 0,
            }),
            written: watch::channel(0).0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Writes `event` over the oldest slot and returns what it held, to
    /// be dropped (or reused) after the lock is let go.
    pub fn push(&self, event: Arc<T>) -> Option<Arc<T>> {
        let (written, evicted) = {
            let mut inner = self.inner.lock().expect("ring lock");
            let at = (inner.written % (self.capacity as u64 + 1)) as usize;
            let evicted = inner.slots[at].replace(event);
            inner.written += 1;
            (inner.written, evicted)
        };
        // Waking followers takes tokio's watch eight locks, at every
        // event; with nobody subscribed the count is only stored. A
        // follower subscribes before it reads the ring, so one that
        // subscribes after this check still reads this event.
        if self.written.receiver_count() > 0 {
            self.written.send_replace(written);
        } else {
            self.written.send_if_modified(|w| {
                *w = written;
                false
            });
        }
        evicted
    }

    /// The sequence numbers readable now: oldest kept, next to be written.
    pub fn bounds(&self) -> (u64, u64) {
        let written = self.inner.lock().expect("ring lock").written;
        (written.saturating_sub(self.capacity as u64), written)
    }

    /// Events kept (saturates at the capacity).
    pub fn len(&self) -> usize {
        let (oldest, next) = self.bounds();
        (next - oldest) as usize
    }

    pub fn get(&self, seq: u64) -> Slot<T> {
        let inner = self.inner.lock().expect("ring lock");
        let oldest = inner.written.saturating_sub(self.capacity as u64);
        if seq >= inner.written {
            Slot::Empty
        } else if seq < oldest {
            Slot::Lost {
                missed: oldest - seq,
                next: oldest,
            }
        } else {
            let at = (seq % (self.capacity as u64 + 1)) as usize;
            Slot::Event(Arc::clone(inner.slots[at].as_ref().expect("written slot")))
        }
    }

    /// Waits on this for events written after the ones seen.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.written.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_are_one_less_than_a_power_of_two() {
        for ok in [1, 3, 4095, 65535] {
            assert_eq!(Capacity::new(ok).unwrap().get(), ok as usize);
        }
        for bad in [0, 2, 4096, 65536, -1] {
            assert_eq!(Capacity::new(bad), Err(CapacityError(bad)));
        }
    }

    #[test]
    fn keeps_the_last_capacity_events_and_reports_the_lapped() {
        let ring = Ring::new(Capacity::new(3).unwrap());
        assert!(matches!(ring.get(0), Slot::Empty));
        for n in 0..5u32 {
            ring.push(Arc::new(n));
        }
        assert_eq!(ring.bounds(), (2, 5));
        assert_eq!(ring.len(), 3);
        match ring.get(0) {
            Slot::Lost { missed, next } => assert_eq!((missed, next), (2, 2)),
            _ => panic!("seq 0 was overwritten"),
        }
        let kept: Vec<u32> = (2..5)
            .map(|s| match ring.get(s) {
                Slot::Event(e) => *e,
                _ => panic!("seq {s} is kept"),
            })
            .collect();
        assert_eq!(kept, [2, 3, 4]);
        assert!(matches!(ring.get(5), Slot::Empty));
    }

    #[test]
    fn followers_learn_of_new_events() {
        let ring = Ring::new(Capacity::DEFAULT);
        // written while nobody follows: counted, nobody woken
        ring.push(Arc::new(()));
        let mut rx = ring.subscribe();
        assert!(!rx.has_changed().unwrap());
        assert_eq!(*rx.borrow(), 1);
        ring.push(Arc::new(()));
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), 2);
    }
}
