//! Our `cilium monitor`'s stream: events as JSON objects, one a line,
//! decoded here rather than on the thread that drains the rings.

use super::batch::Next;
use super::Hub;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;

/// Streams `first`, then the live events, to one client; a client too slow
/// for them gets a `lost` line with the count it missed.
pub async fn stream(mut conn: tokio::net::UnixStream, first: Vec<String>, hub: Arc<Hub>) {
    let mut rx = hub.tx.subscribe();
    for line in first {
        if conn
            .write_all(format!("{line}\n").as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
    let mut batch = Vec::new();
    let mut lines: Vec<u8> = Vec::new();
    while super::batch::next(&mut rx, &mut batch).await {
        lines.clear();
        for next in &batch {
            match next {
                Next::Event(live) => match hub.decoded(live) {
                    Some(ev) => super::event_json::write(&mut lines, &ev),
                    None => continue,
                },
                Next::Lagged(n) => {
                    lines.extend(format!("{{\"type\":\"lost\",\"len_orig\":{n}}}").bytes())
                }
            }
            lines.push(b'\n');
        }
        if conn.write_all(&lines).await.is_err() {
            return;
        }
    }
}
