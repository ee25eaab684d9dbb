//! The etcd v3 backend.
//!
//! One session lease per agent (Cilium's `KVstoreLeaseTTL`): keys written
//! with [`Etcd::put_leased`] vanish when the agent stops renewing it, and
//! are written again if the lease was lost while etcd was unreachable.
//! [`Etcd::watch_prefix`] lists then watches, and after any break lists
//! again and reports what changed meanwhile, so a watcher never misses a
//! deletion.

use crate::{Error, Event, RETRY};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, PutOptions, Txn, TxnOp,
    WatchOptions,
};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

fn etcd(op: &'static str, key: &str) -> impl FnOnce(etcd_client::Error) -> Error {
    let key = key.to_owned();
    move |source| Error::Etcd { op, key, source }
}

async fn dial(endpoints: &[String], opts: ConnectOptions) -> Result<Client, Error> {
    Client::connect(endpoints, Some(opts))
        .await
        .map_err(|source| Error::Connect {
            endpoints: endpoints.to_vec(),
            source,
        })
}

#[derive(Default)]
struct Session {
    lease: i64,
    /// Leased keys with their values, re-written after a lease loss.
    leased: BTreeMap<String, Vec<u8>>,
}

/// One key as etcd holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub value: Vec<u8>,
    pub mod_revision: i64,
    pub lease: i64,
}

#[derive(Clone)]
pub struct Etcd {
    client: Client,
    session: Arc<Mutex<Session>>,
}

impl Etcd {
    /// Connects, grants the session lease and keeps it alive in the
    /// background (a tokio runtime must be running).
    pub async fn connect(endpoints: &[String], lease_ttl: Duration) -> Result<Self, Error> {
        let opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(10))
            .with_keep_alive(Duration::from_secs(5), Duration::from_secs(5));
        let client = dial(endpoints, opts).await?;
        let ttl = lease_ttl.as_secs().max(2) as i64;
        let lease = client
            .clone()
            .lease_grant(ttl, None)
            .await
            .map_err(etcd("granting lease", "session"))?
            .id();
        let store = Self {
            client,
            session: Arc::new(Mutex::new(Session {
                lease,
                leased: BTreeMap::new(),
            })),
        };
        tokio::spawn(store.clone().keep_session(ttl));
        Ok(store)
    }

    /// Connects without a session: for readers such as `cilium kvstore
    /// get`, which must leave nothing behind in etcd, not even a lease.
    /// Leased writes through it are plain writes.
    pub async fn connect_reader(endpoints: &[String]) -> Result<Self, Error> {
        let opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(30));
        let client = dial(endpoints, opts).await?;
        Ok(Self {
            client,
            session: Arc::new(Mutex::new(Session::default())),
        })
    }

    /// Every key under `prefix` with its revision and lease, as Cilium's
    /// `kvstore get --recursive -o json` shows them.
    pub async fn entries(&self, prefix: &str) -> Result<Vec<Entry>, Error> {
        let resp = self.read(prefix, true).await?;
        Ok(resp
            .kvs()
            .iter()
            .map(|kv| Entry {
                key: String::from_utf8_lossy(kv.key()).into_owned(),
                value: kv.value().to_vec(),
                mod_revision: kv.mod_revision(),
                lease: kv.lease(),
            })
            .collect())
    }

    /// The cluster ID etcd answers a read of `key` with (what `cilium
    /// troubleshoot kvstore` shows once it reaches etcd).
    pub async fn cluster_id(&self, key: &str) -> Result<u64, Error> {
        let resp = self.read(key, false).await?;
        Ok(resp.header().map_or(0, |h| h.cluster_id()))
    }

    pub fn lease_id(&self) -> i64 {
        self.session.lock().expect("session lock").lease
    }

    /// One read: `key` itself, or every key under it.
    async fn read(&self, key: &str, prefix: bool) -> Result<etcd_client::GetResponse, Error> {
        let (op, opts) = match prefix {
            true => ("list", Some(GetOptions::new().with_prefix())),
            false => ("get", None),
        };
        self.client
            .clone()
            .get(key, opts)
            .await
            .map_err(etcd(op, key))
    }

    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        let resp = self.read(key, false).await?;
        Ok(resp.kvs().first().map(|kv| kv.value().to_vec()))
    }

    /// All keys under `prefix` and the revision they were read at.
    pub async fn list_prefix(&self, prefix: &str) -> Result<(Vec<(String, Vec<u8>)>, i64), Error> {
        let resp = self.read(prefix, true).await?;
        let rev = resp.header().map_or(0, |h| h.revision());
        let kvs = resp
            .kvs()
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(kv.key()).into_owned(),
                    kv.value().to_vec(),
                )
            })
            .collect();
        Ok((kvs, rev))
    }

    pub async fn put(&self, key: &str, value: &[u8]) -> Result<(), Error> {
        self.client
            .clone()
            .put(key, value, None)
            .await
            .map_err(etcd("put", key))?;
        Ok(())
    }

    /// Writes a key that lives as long as this agent's session.
    pub async fn put_leased(&self, key: &str, value: &[u8]) -> Result<(), Error> {
        let lease = self.lease_id();
        self.client
            .clone()
            .put(key, value, Some(PutOptions::new().with_lease(lease)))
            .await
            .map_err(etcd("put", key))?;
        self.remember_leased(key, value);
        Ok(())
    }

    /// Records a leased key so it is written again after a lease loss.
    fn remember_leased(&self, key: &str, value: &[u8]) {
        let mut s = self.session.lock().expect("session lock");
        s.leased.insert(key.to_owned(), value.to_vec());
    }

    /// Creates `key` only if it does not exist; false when it did.
    pub async fn create_only(&self, key: &str, value: &[u8], leased: bool) -> Result<bool, Error> {
        let opts = leased.then(|| PutOptions::new().with_lease(self.lease_id()));
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, opts)]);
        let leased = leased.then_some((key, value));
        self.create_txn(txn, key, leased).await
    }

    /// Runs a create transaction; when it succeeded, `leased` is a key it
    /// wrote under the session lease.
    async fn create_txn(
        &self,
        txn: Txn,
        key: &str,
        leased: Option<(&str, &[u8])>,
    ) -> Result<bool, Error> {
        let resp = self
            .client
            .clone()
            .txn(txn)
            .await
            .map_err(etcd("create", key))?;
        if let (true, Some((k, v))) = (resp.succeeded(), leased) {
            self.remember_leased(k, v);
        }
        Ok(resp.succeeded())
    }

    /// Creates `key` (not leased) and the leased `leased_key` in one
    /// transaction, only if `key` does not exist and nothing lives under
    /// `absent_prefix`; false otherwise. This is how a new identity is
    /// claimed: its ID's master key and this node's reference to it, unless
    /// another node claimed the ID or the labels first.
    pub async fn create_with_leased(
        &self,
        key: &str,
        value: &[u8],
        absent_prefix: &str,
        leased_key: &str,
        leased_value: &[u8],
    ) -> Result<bool, Error> {
        let lease = PutOptions::new().with_lease(self.lease_id());
        let txn = Txn::new()
            .when([
                Compare::create_revision(key, CompareOp::Equal, 0),
                Compare::create_revision(absent_prefix, CompareOp::Equal, 0).with_prefix(),
            ])
            .and_then([
                TxnOp::put(key, value, None),
                TxnOp::put(leased_key, leased_value, Some(lease)),
            ]);
        self.create_txn(txn, key, Some((leased_key, leased_value)))
            .await
    }

    /// Deletes `key` in one transaction with the check that nothing lives
    /// under `absent_prefix`.
    pub async fn delete_if_absent(&self, key: &str, absent_prefix: &str) -> Result<bool, Error> {
        let txn = Txn::new()
            .when([Compare::create_revision(absent_prefix, CompareOp::Equal, 0).with_prefix()])
            .and_then([TxnOp::delete(key, None)]);
        let resp = self
            .client
            .clone()
            .txn(txn)
            .await
            .map_err(|source| Error::Etcd {
                op: "delete-if-absent",
                key: key.to_owned(),
                source,
            })?;
        Ok(resp.succeeded())
    }

    /// Deletes every key under `prefix` (`cilium kvstore delete
    /// --recursive`).
    pub async fn delete_prefix(&self, prefix: &str) -> Result<(), Error> {
        self.client
            .clone()
            .delete(
                prefix,
                Some(etcd_client::DeleteOptions::new().with_prefix()),
            )
            .await
            .map_err(etcd("delete", prefix))?;
        self.session
            .lock()
            .expect("session lock")
            .leased
            .retain(|k, _| !k.starts_with(prefix));
        Ok(())
    }

    pub async fn delete(&self, key: &str) -> Result<(), Error> {
        self.client
            .clone()
            .delete(key, None)
            .await
            .map_err(etcd("delete", key))?;
        self.session
            .lock()
            .expect("session lock")
            .leased
            .remove(key);
        Ok(())
    }

    /// Renews the lease; when it was lost (etcd unreachable for longer than
    /// the TTL), grants a new one and writes the leased keys again.
    async fn keep_session(self, ttl: i64) {
        let interval = Duration::from_secs((ttl as u64 / 3).max(1));
        loop {
            let lease = self.lease_id();
            let alive = async {
                let (mut keeper, mut stream) = self.client.clone().lease_keep_alive(lease).await?;
                loop {
                    keeper.keep_alive().await?;
                    match stream.message().await? {
                        Some(r) if r.ttl() > 0 => {}
                        _ => return Ok::<bool, etcd_client::Error>(false),
                    }
                    tokio::time::sleep(interval).await;
                }
            }
            .await;
            match alive {
                Ok(false) => {
                    tracing::warn!(
                        subsys = "kvstore",
                        lease,
                        "Session lease expired, renewing the session"
                    );
                    if let Err(e) = self.renew_session(ttl).await {
                        tracing::warn!(subsys = "kvstore", error = %e, "Unable to renew the session");
                    }
                }
                Ok(true) => {}
                Err(e) => {
                    tracing::debug!(subsys = "kvstore", error = %e, "Lease keepalive interrupted");
                }
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    async fn renew_session(&self, ttl: i64) -> Result<(), Error> {
        let lease = self
            .client
            .clone()
            .lease_grant(ttl, None)
            .await
            .map_err(etcd("granting lease", "session"))?
            .id();
        let keys: Vec<(String, Vec<u8>)> = {
            let mut s = self.session.lock().expect("session lock");
            s.lease = lease;
            s.leased
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        for (k, v) in keys {
            self.client
                .clone()
                .put(k.as_str(), v, Some(PutOptions::new().with_lease(lease)))
                .await
                .map_err(etcd("re-put", &k))?;
        }
        Ok(())
    }

    /// Lists and watches `prefix`. After the first listing `ListDone` is
    /// sent; after a break the prefix is listed again and the differences
    /// are sent as events. Ends when the receiver is dropped.
    pub fn watch_prefix(&self, prefix: &str) -> mpsc::Receiver<Event> {
        let (tx, rx) = mpsc::channel(1024);
        tokio::spawn(self.clone().list_and_watch(prefix.to_owned(), tx));
        rx
    }

    async fn list_and_watch(self, prefix: String, tx: mpsc::Sender<Event>) {
        let mut known: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        let mut listed_once = false;
        loop {
            if tx.is_closed() {
                return;
            }
            let (kvs, rev) = match self.list_prefix(&prefix).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!(subsys = "kvstore", prefix = %prefix, error = %e, "List failed, retrying");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            };
            let fresh: BTreeMap<String, Vec<u8>> = kvs.into_iter().collect();
            for key in known.keys().filter(|k| !fresh.contains_key(*k)) {
                if tx.send(Event::Delete { key: key.clone() }).await.is_err() {
                    return;
                }
            }
            for (key, value) in &fresh {
                if known.get(key) != Some(value) {
                    let ev = Event::Upsert {
                        key: key.clone(),
                        value: value.clone(),
                    };
                    if tx.send(ev).await.is_err() {
                        return;
                    }
                }
            }
            known = fresh;
            if !listed_once {
                listed_once = true;
                if tx.send(Event::ListDone).await.is_err() {
                    return;
                }
            }
            let opts = WatchOptions::new()
                .with_prefix()
                .with_start_revision(rev + 1);
            let mut stream = match self.client.clone().watch(prefix.as_str(), Some(opts)).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(subsys = "kvstore", prefix = %prefix, error = %e, "Watch failed, relisting");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            };
            loop {
                let msg = match stream.message().await {
                    Ok(Some(m)) if !m.canceled() => m,
                    _ => break,
                };
                for ev in msg.events() {
                    let Some(kv) = ev.kv() else { continue };
                    let key = String::from_utf8_lossy(kv.key()).into_owned();
                    let out = match ev.event_type() {
                        EventType::Put => {
                            known.insert(key.clone(), kv.value().to_vec());
                            Event::Upsert {
                                key,
                                value: kv.value().to_vec(),
                            }
                        }
                        EventType::Delete => {
                            known.remove(&key);
                            Event::Delete { key }
                        }
                    };
                    if tx.send(out).await.is_err() {
                        return;
                    }
                }
            }
            tracing::debug!(subsys = "kvstore", prefix = %prefix, "Watch ended, relisting");
            tokio::time::sleep(RETRY).await;
        }
    }
}

impl crate::Backend for Etcd {
    fn lease_id(&self) -> i64 {
        Etcd::lease_id(self)
    }
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, Error>> {
        Box::pin(Etcd::get(self, key))
    }
    fn list_prefix<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<crate::Listing, Error>> {
        Box::pin(Etcd::list_prefix(self, prefix))
    }
    fn put<'a>(&'a self, key: &'a str, value: &'a [u8]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(Etcd::put(self, key, value))
    }
    fn put_leased<'a>(&'a self, key: &'a str, value: &'a [u8]) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(Etcd::put_leased(self, key, value))
    }
    fn create_only<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        leased: bool,
    ) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(Etcd::create_only(self, key, value, leased))
    }
    fn create_with_leased<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        absent_prefix: &'a str,
        leased_key: &'a str,
        leased_value: &'a [u8],
    ) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(Etcd::create_with_leased(
            self,
            key,
            value,
            absent_prefix,
            leased_key,
            leased_value,
        ))
    }
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(Etcd::delete(self, key))
    }
    fn delete_if_absent<'a>(
        &'a self,
        key: &'a str,
        absent_prefix: &'a str,
    ) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(Etcd::delete_if_absent(self, key, absent_prefix))
    }
    fn watch_prefix(&self, prefix: &str) -> mpsc::Receiver<Event> {
        Etcd::watch_prefix(self, prefix)
    }
}
