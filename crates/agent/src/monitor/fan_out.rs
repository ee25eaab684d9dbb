//! A broadcast channel made on its first subscriber. tokio's allocates and
//! writes every slot when it is made (4096 slots: 128 KB resident each),
//! and most agents never have a monitor client.

use std::sync::OnceLock;
use tokio::sync::broadcast;

pub struct FanOut<T> {
    capacity: usize,
    tx: OnceLock<broadcast::Sender<T>>,
}

impl<T: Clone> FanOut<T> {
    pub const fn new(capacity: usize) -> Self {
        Self {
            capacity,
            tx: OnceLock::new(),
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<T> {
        self.tx
            .get_or_init(|| broadcast::channel(self.capacity).0)
            .subscribe()
    }

    pub fn receiver_count(&self) -> usize {
        self.tx.get().map_or(0, broadcast::Sender::receiver_count)
    }

    /// Hands `value` to the subscribers there are; dropped without any.
    pub fn send(&self, value: T) {
        if let Some(tx) = self.tx.get() {
            let _ = tx.send(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_reach_subscribers_and_need_none() {
        let fan = FanOut::new(4);
        fan.send(1);
        assert_eq!(fan.receiver_count(), 0);
        let mut rx = fan.subscribe();
        fan.send(2);
        assert_eq!(fan.receiver_count(), 1);
        assert_eq!(rx.try_recv().unwrap(), 2);
        drop(rx);
        assert_eq!(fan.receiver_count(), 0);
    }
}
