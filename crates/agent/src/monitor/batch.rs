//! What a monitor client's stream writes at once: the next event, waited
//! for, and every one already queued behind it. At tens of thousands of
//! events a second, one write per event costs the agent a syscall and
//! the client a wakeup each; a batch costs one of each.

use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

/// At most this many events go into one write.
const MAX: usize = 256;

pub enum Next<T> {
    Event(T),
    /// Events this client was too slow to take.
    Lagged(u64),
}

/// Fills `out` with the next batch; false once the sender is gone.
pub async fn next<T: Clone>(rx: &mut broadcast::Receiver<T>, out: &mut Vec<Next<T>>) -> bool {
    out.clear();
    match rx.recv().await {
        Ok(t) => out.push(Next::Event(t)),
        Err(RecvError::Lagged(n)) => out.push(Next::Lagged(n)),
        Err(RecvError::Closed) => return false,
    }
    while out.len() < MAX {
        match rx.try_recv() {
            Ok(t) => out.push(Next::Event(t)),
            Err(TryRecvError::Lagged(n)) => out.push(Next::Lagged(n)),
            // a closed channel ends the stream at the next wait
            Err(TryRecvError::Empty | TryRecvError::Closed) => break,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_holds_what_was_queued_and_the_end_comes_after_it() {
        let (tx, mut rx) = broadcast::channel(4);
        for i in 0..6 {
            tx.send(i).unwrap();
        }
        let mut out = Vec::new();
        assert!(next(&mut rx, &mut out).await);
        let got: Vec<String> = out
            .iter()
            .map(|n| match n {
                Next::Event(i) => i.to_string(),
                Next::Lagged(n) => format!("lost {n}"),
            })
            .collect();
        assert_eq!(got, ["lost 2", "2", "3", "4", "5"]);
        drop(tx);
        assert!(!next(&mut rx, &mut out).await);
    }
}
