//! The monitor's way to Hubble's observer: what the rings and the agent
//! hand over goes through a bounded queue to a thread of the observer's
//! own (Cilium's `hubble-event-queue-size`), so building flows never
//! holds up the ring reader; what a full queue cannot take is counted
//! and reported to the observer as lost from `observer_events_queue`
//! once the queue has room again.

use crate::hubble::Observer;
use controlplane::AgentNotify;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

/// Per CPU, and at most, as Cilium sizes the queue when it is not set.
const QUEUE_PER_CPU: usize = 1024;
const QUEUE_MAX: usize = 16384;

/// `hubble-event-queue-size` 0: Cilium's default for this machine.
pub fn default_queue_size() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus * QUEUE_PER_CPU).min(QUEUE_MAX)
}

enum Item {
    Sample(Arc<[u8]>),
    RingLost { cpu: usize, count: u64 },
    QueueLost(u64),
    Agent(AgentNotify, serde_json::Value),
}

pub struct ObserverFeed {
    observer: Arc<Observer>,
    tx: SyncSender<Item>,
    /// dropped since the last report, and ever
    pending: AtomicU64,
    dropped: AtomicU64,
}

impl ObserverFeed {
    /// A feed of `queue` items to `observer`, read by a thread that ends
    /// when the feed is dropped.
    pub fn start(observer: Arc<Observer>, queue: usize) -> std::io::Result<Self> {
        let (feed, rx) = Self::unread(observer, queue);
        let o = Arc::clone(&feed.observer);
        std::thread::Builder::new()
            .name("hubble-observer".into())
            .spawn(move || {
                for item in rx {
                    deliver(&o, item);
                }
            })?;
        Ok(feed)
    }

    /// The feed and the queue's end, which no thread reads yet.
    fn unread(observer: Arc<Observer>, queue: usize) -> (Self, Receiver<Item>) {
        let (tx, rx) = sync_channel::<Item>(queue.max(1));
        let feed = Self {
            observer,
            tx,
            pending: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        };
        (feed, rx)
    }

    pub fn observer(&self) -> &Observer {
        &self.observer
    }

    /// Items a full queue could not take, ever.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn send(&self, item: Item) {
        let pending = self.pending.swap(0, Ordering::Relaxed);
        if pending > 0 {
            if let Err(e) = self.tx.try_send(Item::QueueLost(pending)) {
                let Item::QueueLost(n) = unwrap_refused(e) else {
                    unreachable!("the item sent")
                };
                self.pending.fetch_add(n, Ordering::Relaxed);
                self.count_dropped();
                return;
            }
        }
        if self.tx.try_send(item).is_err() {
            self.count_dropped();
        }
    }

    fn count_dropped(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
        self.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// A ring's sample, shared with the monitor's JSON clients.
    pub fn sample(&self, raw: Arc<[u8]>) {
        self.send(Item::Sample(raw));
    }

    pub fn ring_lost(&self, cpu: usize, count: u64) {
        self.send(Item::RingLost { cpu, count });
    }

    pub fn agent(&self, what: AgentNotify, body: &serde_json::Value) {
        self.send(Item::Agent(what, body.clone()));
    }
}

fn deliver(o: &Observer, item: Item) {
    match item {
        Item::Sample(raw) => o.sample(&raw),
        Item::RingLost { cpu, count } => o.lost(cpu, count),
        Item::QueueLost(count) => o.queue_lost(count),
        Item::Agent(what, body) => o.agent(what, &body),
    }
}

fn unwrap_refused<T>(e: TrySendError<T>) -> T {
    match e {
        TrySendError::Full(t) | TrySendError::Disconnected(t) => t,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Nobody;
    impl crate::hubble::Resolve for Nobody {
        fn endpoint(&self, _: std::net::IpAddr, identity: u32) -> hubble::flow::Endpoint {
            hubble::flow::Endpoint {
                identity,
                ..Default::default()
            }
        }
        fn service(&self, _: std::net::IpAddr, _: u16) -> Option<hubble::flow::Service> {
            None
        }
        fn cgroup_pod(&self, _: u64) -> Option<std::net::IpAddr> {
            None
        }
    }

    #[test]
    fn a_full_queue_counts_what_it_drops_and_says_so_once_it_has_room() {
        let observer = Arc::new(Observer::new(
            crate::hubble::Capacity::DEFAULT,
            "default",
            "n1",
            Arc::new(Nobody),
        ));
        let (feed, rx) = ObserverFeed::unread(Arc::clone(&observer), 2);
        let mut drop_record = vec![0u8; 36];
        drop_record[0] = abi::events::NOTIFY_DROP;
        drop_record[1] = 133;
        for _ in 0..5 {
            feed.sample(drop_record.as_slice().into());
        }
        assert_eq!(feed.dropped(), 3, "two queued, three dropped");
        for item in rx.try_iter().take(2) {
            deliver(&observer, item);
        }
        feed.sample(drop_record.as_slice().into());
        let items: Vec<Item> = rx.try_iter().collect();
        assert!(matches!(items[0], Item::QueueLost(3)), "the loss first");
        assert!(matches!(items[1], Item::Sample(_)));
        for item in items {
            deliver(&observer, item);
        }
        let st = observer.status();
        assert_eq!(
            (st.seen_flows, st.num_flows),
            (3, 4),
            "3 flows and the lost event"
        );
        assert!(default_queue_size() >= QUEUE_PER_CPU && default_queue_size() <= QUEUE_MAX);
    }
}
