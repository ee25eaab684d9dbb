//! The allocation file: JSON, replaced atomically (`statefile::replace`).

use super::{Allocation, PoolAddr};
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{op} IPAM state {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("IPAM state {path} is corrupt: {message}")]
    Corrupt { path: PathBuf, message: String },
}

pub(super) struct Store {
    path: PathBuf,
}

impl Store {
    pub(super) fn new(path: PathBuf) -> Self {
        Self { path }
    }

    fn io(&self, op: &'static str) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
        move |source| StoreError::Io {
            op,
            path: self.path.clone(),
            source,
        }
    }

    pub(super) fn load<A: PoolAddr>(&self) -> Result<BTreeMap<A, Allocation>, StoreError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
                path: self.path.clone(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(self.io("reading")(e)),
        }
    }

    pub(super) fn save<A: PoolAddr>(
        &self,
        allocations: &BTreeMap<A, Allocation>,
    ) -> Result<(), StoreError> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(self.io("creating the directory of"))?;
        }
        let body = serde_json::to_vec_pretty(allocations).expect("allocations serialize");
        crate::statefile::replace(&self.path, &body).map_err(self.io("writing"))
    }
}
