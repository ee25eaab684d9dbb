//! The kvstore against a real etcd (Debian's etcd-server) in the test's own
//! network namespace: reads and writes, create-only, the session lease, and
//! list-and-watch across an etcd restart.

use kvstore::{Event, Kvstore};
use std::time::{Duration, Instant};
use testsupport::Sandbox;

const URL: &str = testsupport::ETCD_URL;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn connect(ttl: Duration) -> Kvstore {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Kvstore::connect(&[URL.to_string()], ttl).await {
            Ok(k) => return k,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("etcd did not come up: {e}"),
        }
    }
}

async fn next(rx: &mut tokio::sync::mpsc::Receiver<Event>) -> Event {
    tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .expect("event in time")
        .expect("watcher alive")
}

#[test]
fn reads_writes_and_create_only() {
    let mut sb = Sandbox::enter();
    let etcd = testsupport::start_etcd(&sb.path().join("etcd"));
    sb.adopt(etcd);
    runtime().block_on(async {
        let kv = connect(Duration::from_secs(30)).await;
        kv.put("cilium/test/a", b"1").await.unwrap();
        assert_eq!(
            kv.get("cilium/test/a").await.unwrap().as_deref(),
            Some(&b"1"[..])
        );
        assert!(kv.create_only("cilium/test/b", b"2", false).await.unwrap());
        assert!(!kv.create_only("cilium/test/b", b"3", false).await.unwrap());
        let (list, rev) = kv.list_prefix("cilium/test/").await.unwrap();
        assert_eq!(list.len(), 2);
        assert!(rev > 0);
        kv.delete("cilium/test/a").await.unwrap();
        assert_eq!(kv.get("cilium/test/a").await.unwrap(), None);
        // a conditional delete: only while nothing lives under the prefix
        kv.put("cilium/test/refs/b/node1", b"2").await.unwrap();
        assert!(!kv
            .delete_if_absent("cilium/test/b", "cilium/test/refs/b/")
            .await
            .unwrap());
        assert!(kv.get("cilium/test/b").await.unwrap().is_some());
        kv.delete("cilium/test/refs/b/node1").await.unwrap();
        assert!(kv
            .delete_if_absent("cilium/test/b", "cilium/test/refs/b/")
            .await
            .unwrap());
        assert_eq!(kv.get("cilium/test/b").await.unwrap(), None);
        assert_eq!(
            kvstore::keys::node("default", "node1"),
            "cilium/state/nodes/v1/default/node1"
        );
    });
}

#[test]
fn leased_keys_die_with_their_agent_and_watchers_resync_across_an_etcd_restart() {
    let mut sb = Sandbox::enter();
    let data = sb.path().join("etcd");
    let first = sb.adopt(testsupport::start_etcd(&data));

    // An "agent" whose runtime ends: its lease stops being renewed.
    {
        let rt = runtime();
        rt.block_on(async {
            let kv = connect(Duration::from_secs(2)).await;
            kv.put_leased("cilium/state/nodes/v1/default/dead", b"{}")
                .await
                .unwrap();
        });
    }

    let rt = runtime();
    let (kv, mut rx) = rt.block_on(async {
        let kv = connect(Duration::from_secs(30)).await;
        kv.put_leased("cilium/state/nodes/v1/default/live", b"{}")
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        while kv
            .get("cilium/state/nodes/v1/default/dead")
            .await
            .unwrap()
            .is_some()
        {
            assert!(
                Instant::now() < deadline,
                "leased key of a dead agent must expire"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        let mut rx = kv.watch_prefix(kvstore::keys::NODES);
        assert!(matches!(next(&mut rx).await, Event::Upsert { key, .. } if key.ends_with("/live")));
        assert_eq!(next(&mut rx).await, Event::ListDone);
        kv.put("cilium/state/nodes/v1/default/other", b"x")
            .await
            .unwrap();
        assert!(
            matches!(next(&mut rx).await, Event::Upsert { key, .. } if key.ends_with("/other"))
        );
        (kv, rx)
    });

    // etcd goes away and comes back with its data.
    let child = sb.child(first);
    child.kill().unwrap();
    child.wait().unwrap();
    sb.adopt(testsupport::start_etcd(&data));

    rt.block_on(async {
        // The watcher from before the restart reconnects and sees the change.
        let writer = connect(Duration::from_secs(30)).await;
        writer
            .delete("cilium/state/nodes/v1/default/other")
            .await
            .unwrap();
        assert_eq!(
            next(&mut rx).await,
            Event::Delete {
                key: "cilium/state/nodes/v1/default/other".into()
            }
        );
        // The session lease survived the restart with its key.
        assert!(kv
            .get("cilium/state/nodes/v1/default/live")
            .await
            .unwrap()
            .is_some());
        let mut fresh = kv.watch_prefix(kvstore::keys::NODES);
        let mut seen = Vec::new();
        loop {
            match next(&mut fresh).await {
                Event::ListDone => break,
                Event::Upsert { key, .. } => seen.push(key),
                Event::Delete { .. } => {}
            }
        }
        assert_eq!(seen, vec!["cilium/state/nodes/v1/default/live".to_string()]);
    });
}
