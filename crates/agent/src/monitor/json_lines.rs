//! Our `cilium monitor`'s stream: events as
//! JSON objects, one a line.

use super::MonitorEvent;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::sync::broadcast;

/// Streams `first`, then the live events, to one client; a client too slow
/// for them gets a `lost` line with the count it missed.
pub async fn stream(
    mut conn: tokio::net::UnixStream,
    first: Vec<String>,
    mut rx: broadcast::Receiver<Arc<MonitorEvent>>,
) {
    for line in first {
        if conn
            .write_all(format!("{line}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
    loop {
        let line = match rx.recv().await {
            Ok(ev) => serde_json::to_string(&*ev).expect("event serializes"),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                format!("{{\"type\":\"lost\",\"len_orig\":{n}}}")
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if conn
            .write_all(format!("{line}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}
