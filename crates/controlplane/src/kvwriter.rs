//! The keys this node owns in the kvstore (its endpoints' IPs, its
//! references to identities), written in the order they changed.
//!
//! Changes come from synchronous code (endpoint create and delete) and must
//! never overtake each other: a delete applied before the put it follows
//! would leave a pod unreachable. One task applies them in order and retries
//! while etcd is unreachable; the lease keeps what it wrote alive.

use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

enum Op {
    PutLeased { key: String, value: Vec<u8> },
    CreateOnly { key: String, value: Vec<u8> },
    Delete { key: String },
    Flush(oneshot::Sender<()>),
}

#[derive(Clone)]
pub struct KvWriter {
    tx: mpsc::UnboundedSender<Op>,
}

const RETRY: Duration = Duration::from_millis(500);

impl KvWriter {
    /// Starts the writer task (a tokio runtime must be running).
    pub fn start(kv: kvstore::Kvstore, tasks: &crate::tasks::Tasks) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel();
        tasks.spawn("kvstore-writer", async move {
            while let Some(op) = rx.recv().await {
                apply(&kv, op).await;
            }
        });
        Self { tx }
    }

    /// A key that lives as long as this agent's session.
    pub fn put_leased(&self, key: String, value: Vec<u8>) {
        let _ = self.tx.send(Op::PutLeased { key, value });
    }

    /// A key that outlives the agent, written only if it does not exist.
    pub fn create_only(&self, key: String, value: Vec<u8>) {
        let _ = self.tx.send(Op::CreateOnly { key, value });
    }

    pub fn delete(&self, key: String) {
        let _ = self.tx.send(Op::Delete { key });
    }

    /// Waits until everything queued so far is written.
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Op::Flush(done)).is_ok() {
            let _ = wait.await;
        }
    }
}

async fn apply(kv: &kvstore::Kvstore, op: Op) {
    let mut warned = false;
    loop {
        let (key, result) = match &op {
            Op::PutLeased { key, value } => (key, kv.put_leased(key, value).await),
            Op::CreateOnly { key, value } => {
                (key, kv.create_only(key, value, false).await.map(drop))
            }
            Op::Delete { key } => (key, kv.delete(key).await),
            Op::Flush(_) => break,
        };
        match result {
            Ok(()) => break,
            Err(e) => {
                if !warned {
                    tracing::warn!(subsys = "kvstore", key = %key, error = %e, "Unable to write key, retrying until etcd is back");
                    warned = true;
                }
                tokio::time::sleep(RETRY).await;
            }
        }
    }
    if let Op::Flush(done) = op {
        let _ = done.send(());
    }
}
