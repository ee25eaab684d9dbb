//! Untyped access to a pinned map by path and name: the raw layer under
//! [`crate::typed::Map`] and the named handles of [`crate::maps`], for
//! tools and tests that look at an arbitrary map. Keys and values are any
//! `Plain` type whose size matches the map's; code that knows which map it
//! reads uses a handle instead, so a wrong key type does not compile.

use crate::sys::{self, MapMeta};
use crate::Error;
use abi::Plain;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Where a global map named `name` is pinned under a bpffs root.
pub fn global_pin_path(bpffs_root: &Path, name: &str) -> PathBuf {
    bpffs_root.join(abi::maps::GLOBALS_DIR).join(name)
}

/// An open pinned map.
pub struct PinnedMap {
    name: String,
    fd: OwnedFd,
    meta: MapMeta,
}

impl PinnedMap {
    /// Opens the global map `name` pinned under `bpffs_root`.
    pub fn open_global(bpffs_root: &Path, name: &str) -> Result<Self, Error> {
        Self::open(&global_pin_path(bpffs_root, name), name)
    }

    pub fn open(path: &Path, name: &str) -> Result<Self, Error> {
        let fd = sys::obj_get(path).map_err(|e| Error::io("opening pinned map", path, e))?;
        let meta =
            sys::map_meta(fd.as_fd()).map_err(|e| Error::io("reading map info of", path, e))?;
        Ok(Self {
            name: name.to_owned(),
            fd,
            meta,
        })
    }

    /// Opens the map pinned at `path`, or creates one of shape `meta` and
    /// pins it there. When another caller pinned one meanwhile, theirs
    /// stands and is opened.
    pub fn open_or_create(path: &Path, name: &str, meta: &MapMeta) -> Result<Self, Error> {
        if let Ok(map) = Self::open(path, name) {
            return Ok(map);
        }
        let fd = sys::map_create(meta, None, name).map_err(|e| Error::io("creating", path, e))?;
        match sys::obj_pin(fd.as_fd(), path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            other => other.map_err(|e| Error::io("pinning", path, e))?,
        }
        Self::open(path, name)
    }

    /// Opens a map by its kernel ID, e.g. an inner map a map-in-map names.
    pub fn from_id(id: u32, name: &str) -> Result<Self, Error> {
        let op = |e| Error::MapOp {
            op: "open by id",
            map: name.to_owned(),
            source: e,
        };
        let fd = sys::map_fd_by_id(id).map_err(op)?;
        let meta = sys::map_meta(fd.as_fd()).map_err(op)?;
        Ok(Self {
            name: name.to_owned(),
            fd,
            meta,
        })
    }

    /// The kernel's ID of the map.
    pub fn id(&self) -> Result<u32, Error> {
        sys::map_id(self.fd.as_fd()).map_err(self.op_err("info"))
    }

    /// The map's descriptor number (what a map-in-map stores on update).
    pub fn raw_fd(&self) -> i32 {
        std::os::fd::AsRawFd::as_raw_fd(&self.fd)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn meta(&self) -> MapMeta {
        self.meta
    }

    fn check<K, V>(&self) -> Result<(), Error> {
        let (k, v) = (
            std::mem::size_of::<K>() as u32,
            std::mem::size_of::<V>() as u32,
        );
        if self.meta.key_size != k || self.meta.value_size != v {
            return Err(Error::Map {
                map: self.name.clone(),
                message: format!(
                    "layout mismatch: map has key {}B value {}B, caller expects key {k}B value {v}B",
                    self.meta.key_size, self.meta.value_size
                ),
            });
        }
        Ok(())
    }

    fn op_err(&self, op: &'static str) -> impl FnOnce(std::io::Error) -> Error + '_ {
        move |source| Error::MapOp {
            op,
            map: self.name.clone(),
            source,
        }
    }

    pub fn get<K: Plain, V: Plain>(&self, key: &K) -> Result<Option<V>, Error> {
        self.check::<K, V>()?;
        let mut value = V::zeroed();
        // SAFETY of the byte view: V is Plain, so any bytes the kernel writes are valid.
        let buf = unsafe {
            std::slice::from_raw_parts_mut(
                &mut value as *mut V as *mut u8,
                std::mem::size_of::<V>(),
            )
        };
        let found =
            sys::lookup(self.fd.as_fd(), key.as_bytes(), buf).map_err(self.op_err("lookup"))?;
        Ok(found.then_some(value))
    }

    pub fn put<K: Plain, V: Plain>(&self, key: &K, value: &V) -> Result<(), Error> {
        self.check::<K, V>()?;
        sys::update(self.fd.as_fd(), key.as_bytes(), value.as_bytes(), 0)
            .map_err(self.op_err("update"))
    }

    /// Removes a key; Ok(false) when it was not there.
    pub fn remove<K: Plain>(&self, key: &K) -> Result<bool, Error> {
        sys::delete(self.fd.as_fd(), key.as_bytes()).map_err(self.op_err("delete"))
    }

    /// Raw keys, in the kernel's iteration order.
    fn raw_keys(&self) -> Result<Vec<Vec<u8>>, Error> {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut next = vec![0u8; self.meta.key_size as usize];
        while sys::next_key(self.fd.as_fd(), keys.last().map(Vec::as_slice), &mut next)
            .map_err(self.op_err("get_next_key"))?
        {
            keys.push(next.clone());
            if keys.len() > self.meta.max_entries as usize {
                // Entries removed while walking can restart iteration; never loop forever.
                break;
            }
        }
        Ok(keys)
    }

    /// All keys, in the kernel's iteration order.
    pub fn keys<K: Plain>(&self) -> Result<Vec<K>, Error> {
        if self.meta.key_size != std::mem::size_of::<K>() as u32 {
            return Err(Error::Map {
                map: self.name.clone(),
                message: "key size mismatch".into(),
            });
        }
        Ok(self
            .raw_keys()?
            .iter()
            .filter_map(|k| K::from_bytes(k))
            .collect())
    }

    /// All entries of a map with one value per key. Entries that vanish
    /// between listing and lookup are skipped.
    pub fn entries<K: Plain, V: Plain>(&self) -> Result<Vec<(K, V)>, Error> {
        self.check::<K, V>()?;
        let mut out = Vec::new();
        for key in self.keys::<K>()? {
            if let Some(value) = self.get::<K, V>(&key)? {
                out.push((key, value));
            }
        }
        Ok(out)
    }

    /// All entries of a per-CPU map, one value per possible CPU.
    pub fn percpu_entries<K: Plain, V: Plain>(&self) -> Result<Vec<(K, Vec<V>)>, Error> {
        if !crate::typed::is_percpu(self.meta.map_type) {
            return Err(Error::Map {
                map: self.name.clone(),
                message: "not a per-CPU map".into(),
            });
        }
        self.check::<K, V>()?;
        let cpus = sys::possible_cpus()
            .map_err(|e| Error::io("reading", "/sys/devices/system/cpu/possible", e))?;
        let stride = std::mem::size_of::<V>().next_multiple_of(8);
        let mut buf = vec![0u8; stride * cpus];
        let mut out = Vec::new();
        for key in self.keys::<K>()? {
            if sys::lookup(self.fd.as_fd(), key.as_bytes(), &mut buf)
                .map_err(self.op_err("lookup"))?
            {
                let values = buf.chunks(stride).filter_map(V::from_bytes).collect();
                out.push((key, values));
            }
        }
        Ok(out)
    }

    /// Number of entries currently in the map.
    pub fn count(&self) -> Result<usize, Error> {
        Ok(self.raw_keys()?.len())
    }

    /// Deletes every entry of a hash-type map; returns how many it deleted
    /// (entries the datapath removed meanwhile are not counted).
    pub fn clear(&self) -> Result<usize, Error> {
        let mut deleted = 0;
        for key in self.raw_keys()? {
            if sys::delete(self.fd.as_fd(), &key).map_err(self.op_err("delete"))? {
                deleted += 1;
            }
        }
        Ok(deleted)
    }
}
