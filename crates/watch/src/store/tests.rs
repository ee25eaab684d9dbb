//! The store against an in-memory source (a channel of events).

use super::*;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

type Ev = Event<String, u32>;

fn up(key: &str, value: u32) -> Ev {
    Event::Upsert {
        key: key.into(),
        value,
    }
}

fn del(key: &str) -> Ev {
    Event::Delete { key: key.into() }
}

/// The changes a handler saw, as short strings: `+a=1`, `~a 1->2`,
/// `-a (1)`, `synced`.
#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<String>>>);

impl Seen {
    fn record(&self, c: &Change<String, u32>) {
        let line = match c {
            Change::Upsert {
                key,
                old: None,
                new,
            } => format!("+{key}={new}"),
            Change::Upsert {
                key,
                old: Some(old),
                new,
            } => format!("~{key} {old}->{new}"),
            Change::Delete { key, old } => format!("-{key} ({old})"),
            Change::Synced => "synced".into(),
        };
        self.0.lock().unwrap().push(line);
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }

    /// A handler that records every change and accepts it.
    fn handler(
        &self,
    ) -> impl FnMut(Change<String, u32>) -> std::future::Ready<Result<(), Infallible>> + Send {
        let seen = self.clone();
        move |c| {
            seen.record(&c);
            std::future::ready(Ok(()))
        }
    }
}

/// Runs `store` on a channel source; returns the sender and what the
/// handler saw.
fn start(store: Store<String, u32>) -> (mpsc::Sender<Ev>, Seen, Synced) {
    let (tx, rx) = mpsc::channel(16);
    let seen = Seen::default();
    let synced = store.synced();
    tokio::spawn(store.run(rx, seen.handler()));
    (tx, seen, synced)
}

/// Lets the store's task drain what was sent.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "current_thread")]
async fn lists_then_watches() {
    let (tx, seen, mut synced) = start(Store::new("test"));
    for ev in [up("a", 1), up("b", 2), Event::ListDone] {
        tx.send(ev).await.unwrap();
    }
    assert!(synced.wait().await);
    for ev in [up("a", 3), del("b"), del("unknown"), up("c", 4)] {
        tx.send(ev).await.unwrap();
    }
    settle().await;
    assert_eq!(
        seen.take(),
        ["+a=1", "+b=2", "synced", "~a 1->3", "-b (2)", "+c=4"]
    );
}

#[tokio::test(flavor = "current_thread")]
async fn synced_only_once_the_initial_list_is_handled() {
    let (tx, rx) = mpsc::channel(16);
    let store = Store::new("test");
    let mut synced = store.synced();
    let handled = Seen::default();
    let h = handled.clone();
    // a slow handler: the listing takes a while to apply
    tokio::spawn(store.run(rx, move |c: Change<String, u32>| {
        let h = h.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            h.record(&c);
            Ok::<(), Infallible>(())
        }
    }));
    tx.send(up("a", 1)).await.unwrap();
    tx.send(up("b", 2)).await.unwrap();
    settle().await;
    assert!(!synced.is_synced(), "no ListDone yet");
    tx.send(Event::ListDone).await.unwrap();
    assert!(synced.wait().await);
    assert_eq!(handled.take(), ["+a=1", "+b=2", "synced"]);
    assert!(synced.clone().is_synced());
    assert!(Synced::ready().wait().await);
}

#[tokio::test(flavor = "current_thread")]
async fn a_relist_deletes_what_vanished() {
    let (tx, seen, _) = start(Store::new("test"));
    for ev in [up("a", 1), up("b", 2), Event::ListDone] {
        tx.send(ev).await.unwrap();
    }
    // the watch broke; meanwhile b was deleted, a kept, c created
    for ev in [Event::Relist, up("a", 1), up("c", 3), Event::ListDone] {
        tx.send(ev).await.unwrap();
    }
    settle().await;
    assert_eq!(seen.take(), ["+a=1", "+b=2", "synced", "+c=3", "-b (2)"]);
}

/// A stored value that is not a number written in UTF-8, as stored.
#[derive(Debug, thiserror::Error)]
#[error("{:?} is not a number", String::from_utf8_lossy(.0))]
struct NotANumber(Vec<u8>);

#[tokio::test(flavor = "current_thread")]
async fn values_that_do_not_decode_are_skipped() {
    let (tx, rx) = mpsc::channel::<Event<String, Vec<u8>>>(16);
    let source = rx.decode(|_key: &String, raw: &Vec<u8>| {
        std::str::from_utf8(raw)
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
            .ok_or_else(|| NotANumber(raw.clone()))
    });
    let store = Store::new("test");
    let mut synced = store.synced();
    let seen = Seen::default();
    tokio::spawn(store.run(source, seen.handler()));
    let raw = |k: &str, v: &str| Event::Upsert {
        key: k.to_string(),
        value: v.as_bytes().to_vec(),
    };
    for ev in [raw("a", "1"), raw("b", "not a number"), raw("c", "3")] {
        tx.send(ev).await.unwrap();
    }
    tx.send(Event::ListDone).await.unwrap();
    assert!(synced.wait().await);
    tx.send(raw("a", "garbage")).await.unwrap();
    tx.send(Event::Delete { key: "a".into() }).await.unwrap();
    settle().await;
    assert_eq!(seen.take(), ["+a=1", "+c=3", "synced", "-a (1)"]);
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_handler_is_retried_until_it_succeeds_without_holding_up_others() {
    let (tx, rx) = mpsc::channel(16);
    let backoff = Backoff {
        min: Duration::from_millis(5),
        max: Duration::from_millis(20),
    };
    let store = Store::new("test").with_backoff(backoff);
    let mut synced = store.synced();
    let seen = Seen::default();
    let (s, mut failures) = (seen.clone(), 0);
    // "a" fails three times; everything else goes through
    tokio::spawn(store.run(rx, move |c: Change<String, u32>| {
        let fail = matches!(&c, Change::Upsert { key, .. } if key == "a") && failures < 3;
        if fail {
            failures += 1;
        } else {
            s.record(&c);
        }
        std::future::ready(if fail { Err("map full") } else { Ok(()) })
    }));
    for ev in [up("a", 1), up("b", 2), Event::ListDone] {
        tx.send(ev).await.unwrap();
    }
    assert!(synced.wait().await, "a failing key does not hold up sync");
    tx.send(up("a", 5)).await.unwrap();
    tx.send(up("c", 3)).await.unwrap();
    // retries take 5 + 10 + 20 ms; give a loaded machine ample time
    for _ in 0..500 {
        if seen.0.lock().unwrap().len() == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // a's retries see its latest value, once
    assert_eq!(seen.take(), ["+b=2", "synced", "+c=3", "+a=5"]);
}

#[tokio::test(flavor = "current_thread")]
async fn restored_keys_absent_from_the_first_list_are_deleted() {
    let had = [
        ("a".to_string(), 1),
        ("b".to_string(), 2),
        ("c".to_string(), 3),
    ];
    let (tx, seen, mut synced) = start(Store::restored("test", had));
    for ev in [up("a", 1), up("c", 4), up("d", 5), Event::ListDone] {
        tx.send(ev).await.unwrap();
    }
    assert!(synced.wait().await);
    assert_eq!(seen.take(), ["~c 3->4", "+d=5", "-b (2)", "synced"]);
}
