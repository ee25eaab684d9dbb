//! Cilium's kvstore: one [`Backend`] trait with the operations the agent
//! needs, the etcd v3 backend ([`Etcd`]) the agent runs with, and an
//! in-process one ([`Memory`]) for tests that are not about the kvstore.
//! [`Kvstore`] is a handle to either; [`keys`] is Cilium's key layout;
//! [`Kvstore::source`] feeds a prefix to the watch layer.

mod etcd;
pub mod keys;
mod memory;
mod source;

pub use etcd::{Entry, Etcd};
pub use memory::{Memory, MemorySession};
pub use source::PrefixSource;

use futures::future::BoxFuture;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// Cilium's default session lease TTL is 15 min; agents here use less so a
/// dead node disappears quickly (the `kvstore-lease-ttl` knob).
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15 * 60);
pub(crate) const RETRY: Duration = Duration::from_millis(500);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kvstore {op} {key}: {source}")]
    Etcd {
        op: &'static str,
        key: String,
        source: etcd_client::Error,
    },
    #[error("connecting to etcd at {endpoints:?}: {source}")]
    Connect {
        endpoints: Vec<String>,
        source: etcd_client::Error,
    },
    /// The in-process store was told to act unreachable.
    #[error("kvstore {op} {key}: unavailable")]
    Unavailable { op: &'static str, key: String },
}

/// What a watcher sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Upsert {
        key: String,
        value: Vec<u8>,
    },
    Delete {
        key: String,
    },
    /// The initial listing has been delivered (Cilium's "ListDone").
    ListDone,
}

pub(crate) type Listing = (Vec<(String, Vec<u8>)>, i64);

/// What the agent does with a kvstore. Leased keys live as long as the
/// backend's session; watches list first, then report changes, and after
/// any break list again so no deletion is missed.
pub trait Backend: Send + Sync {
    fn lease_id(&self) -> i64;
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, Error>>;
    /// All keys under `prefix` and the revision they were read at.
    fn list_prefix<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, Error>>;
    fn put<'a>(&'a self, key: &'a str, value: &'a [u8]) -> BoxFuture<'a, Result<(), Error>>;
    fn put_leased<'a>(&'a self, key: &'a str, value: &'a [u8]) -> BoxFuture<'a, Result<(), Error>>;
    /// Creates `key` only if it does not exist; false when it did.
    fn create_only<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        leased: bool,
    ) -> BoxFuture<'a, Result<bool, Error>>;
    /// Creates `key` (not leased) and the leased `leased_key` together, only
    /// if `key` does not exist and nothing lives under `absent_prefix`.
    fn create_with_leased<'a>(
        &'a self,
        key: &'a str,
        value: &'a [u8],
        absent_prefix: &'a str,
        leased_key: &'a str,
        leased_value: &'a [u8],
    ) -> BoxFuture<'a, Result<bool, Error>>;
    fn delete<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<(), Error>>;
    /// Deletes `key` only if nothing lives under `absent_prefix`; whether
    /// it did (an identity's master key, unless a node references it).
    fn delete_if_absent<'a>(
        &'a self,
        key: &'a str,
        absent_prefix: &'a str,
    ) -> BoxFuture<'a, Result<bool, Error>>;
    /// Lists and watches `prefix` until the receiver is dropped.
    fn watch_prefix(&self, prefix: &str) -> mpsc::Receiver<Event>;
}

/// A handle to a kvstore backend, cheap to clone.
#[derive(Clone)]
pub struct Kvstore(Arc<dyn Backend>);

impl Kvstore {
    /// Connects to etcd (see [`Etcd::connect`]).
    pub async fn connect(endpoints: &[String], lease_ttl: Duration) -> Result<Self, Error> {
        Ok(Self(Arc::new(Etcd::connect(endpoints, lease_ttl).await?)))
    }

    pub fn new(backend: impl Backend + 'static) -> Self {
        Self(Arc::new(backend))
    }
}

/// The backend's operations, called on the handle.
impl std::ops::Deref for Kvstore {
    type Target = dyn Backend;

    fn deref(&self) -> &Self::Target {
        self.0.as_ref()
    }
}
