//! `Map<K, V>`: a pinned map whose key and value types are part of its
//! Rust type. Opening one checks the kernel's map info against what the
//! caller expects (key size, value size, map type, flags), so a map of
//! another layout is refused when it is opened instead of being misread
//! or corrupted later. The named handles in [`crate::maps`] are built on it.

use crate::map::PinnedMap;
use crate::sys::MapMeta;
use crate::Error;
use abi::Plain;
use std::marker::PhantomData;
use std::path::Path;

const BPF_MAP_TYPE_PERCPU_HASH: u32 = 5;
const BPF_MAP_TYPE_PERCPU_ARRAY: u32 = 6;
const BPF_MAP_TYPE_LRU_PERCPU_HASH: u32 = 10;

/// The kernel's name of a map type, for messages.
fn type_name(map_type: u32) -> String {
    const NAMES: [&str; 14] = [
        "unspec",
        "hash",
        "array",
        "prog_array",
        "perf_event_array",
        "percpu_hash",
        "percpu_array",
        "stack_trace",
        "cgroup_array",
        "lru_hash",
        "lru_percpu_hash",
        "lpm_trie",
        "array_of_maps",
        "hash_of_maps",
    ];
    match NAMES.get(map_type as usize) {
        Some(name) => format!("{name} ({map_type})"),
        None => map_type.to_string(),
    }
}

/// True for the map types that hold one value per possible CPU.
pub(crate) fn is_percpu(map_type: u32) -> bool {
    matches!(
        map_type,
        BPF_MAP_TYPE_PERCPU_HASH | BPF_MAP_TYPE_PERCPU_ARRAY | BPF_MAP_TYPE_LRU_PERCPU_HASH
    )
}

/// Compares what the kernel reports of a map with its definition; the
/// first difference is the error. Max entries is not compared: it is a
/// configuration knob (`bpf-ct-global-tcp-max`, ...), not a layout.
pub(crate) fn check_meta(map: &str, want: &MapMeta, have: &MapMeta) -> Result<(), Error> {
    let differs = |property: &'static str, expected: String, found: String| Error::MapMismatch {
        map: map.to_owned(),
        property,
        expected,
        found,
    };
    if have.key_size != want.key_size {
        return Err(differs(
            "key size",
            format!("{}B", want.key_size),
            format!("{}B", have.key_size),
        ));
    }
    if have.value_size != want.value_size {
        return Err(differs(
            "value size",
            format!("{}B", want.value_size),
            format!("{}B", have.value_size),
        ));
    }
    if have.map_type != want.map_type {
        return Err(differs(
            "type",
            type_name(want.map_type),
            type_name(have.map_type),
        ));
    }
    if have.map_flags != want.map_flags {
        return Err(differs(
            "flags",
            format!("{:#x}", want.map_flags),
            format!("{:#x}", have.map_flags),
        ));
    }
    Ok(())
}

/// An open pinned map with keys of type `K` and values of type `V` (per
/// CPU values for per-CPU maps: see [`PerCpuMap`]).
pub struct Map<K, V> {
    raw: PinnedMap,
    _layout: PhantomData<fn() -> (K, V)>,
}

impl<K: Plain, V: Plain> Map<K, V> {
    /// Opens the map pinned at `path` and checks it against `def`, the
    /// map's definition (its type and flags; the sizes it must have are
    /// those of `K` and `V`, and `def`'s must agree with them).
    pub(crate) fn open(path: &Path, name: &str, def: &MapMeta) -> Result<Self, Error> {
        Self::checked(PinnedMap::open(path, name)?, def)
    }

    /// Checks an already open map against `def` and the sizes of K and V.
    pub(crate) fn checked(raw: PinnedMap, def: &MapMeta) -> Result<Self, Error> {
        let want = MapMeta {
            key_size: std::mem::size_of::<K>() as u32,
            value_size: std::mem::size_of::<V>() as u32,
            ..*def
        };
        // A definition at odds with the Rust types is our bug; name it.
        check_meta(&format!("{} (definition)", raw.name()), &want, def)?;
        check_meta(raw.name(), &want, &raw.meta())?;
        Ok(Self {
            raw,
            _layout: PhantomData,
        })
    }

    pub fn name(&self) -> &str {
        self.raw.name()
    }

    /// Capacity the map was created with.
    pub fn max_entries(&self) -> u32 {
        self.raw.meta().max_entries
    }

    /// The kernel's ID of the map.
    pub fn id(&self) -> Result<u32, Error> {
        self.raw.id()
    }

    /// The map's descriptor number (what a map-in-map or prog array
    /// stores on update).
    pub(crate) fn raw_fd(&self) -> i32 {
        self.raw.raw_fd()
    }

    pub fn get(&self, key: &K) -> Result<Option<V>, Error> {
        self.raw.get(key)
    }

    pub fn put(&self, key: &K, value: &V) -> Result<(), Error> {
        self.raw.put(key, value)
    }

    /// Removes a key; Ok(false) when it was not there.
    pub fn remove(&self, key: &K) -> Result<bool, Error> {
        self.raw.remove(key)
    }

    /// All keys, in the kernel's iteration order.
    pub fn keys(&self) -> Result<Vec<K>, Error> {
        self.raw.keys()
    }

    /// All entries; entries that vanish between listing and lookup are
    /// skipped.
    pub fn entries(&self) -> Result<Vec<(K, V)>, Error> {
        self.raw.entries()
    }

    /// Number of entries currently in the map.
    pub fn count(&self) -> Result<usize, Error> {
        self.raw.count()
    }

    /// Deletes every entry of a hash-type map; returns how many it deleted.
    pub fn clear(&self) -> Result<usize, Error> {
        self.raw.clear()
    }
}

/// A per-CPU map: one `V` per possible CPU under each key. Reading is by
/// all CPUs at once; the agent never writes these maps.
pub struct PerCpuMap<K, V>(pub(crate) Map<K, V>);

impl<K: Plain, V: Plain> PerCpuMap<K, V> {
    pub(crate) fn open(path: &Path, name: &str, def: &MapMeta) -> Result<Self, Error> {
        if !is_percpu(def.map_type) {
            return Err(Error::Map {
                map: name.to_owned(),
                message: format!("defined as {}, not per-CPU", type_name(def.map_type)),
            });
        }
        Map::open(path, name, def).map(Self)
    }

    pub fn name(&self) -> &str {
        self.0.name()
    }

    pub fn max_entries(&self) -> u32 {
        self.0.max_entries()
    }

    /// All entries, each with its value on every possible CPU.
    pub fn entries(&self) -> Result<Vec<(K, Vec<V>)>, Error> {
        self.0.raw.percpu_entries()
    }

    pub fn keys(&self) -> Result<Vec<K>, Error> {
        self.0.keys()
    }

    pub fn count(&self) -> Result<usize, Error> {
        self.0.count()
    }

    pub fn clear(&self) -> Result<usize, Error> {
        self.0.clear()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(map_type: u32, key_size: u32, value_size: u32, map_flags: u32) -> MapMeta {
        MapMeta {
            map_type,
            key_size,
            value_size,
            max_entries: 16,
            map_flags,
        }
    }

    #[test]
    fn each_property_is_named_with_expected_and_found() {
        let want = meta(1, 8, 16, 1);
        assert!(check_meta("cilium_test", &want, &want).is_ok());
        let bigger = MapMeta {
            max_entries: 9,
            ..want
        };
        assert!(
            check_meta("cilium_test", &want, &bigger).is_ok(),
            "capacity is configuration, not layout"
        );
        for (have, message) in [
            (meta(1, 4, 16, 1), "key size is 4B, expected 8B"),
            (meta(1, 8, 12, 1), "value size is 12B, expected 16B"),
            (meta(9, 8, 16, 1), "type is lru_hash (9), expected hash (1)"),
            (meta(1, 8, 16, 0), "flags is 0x0, expected 0x1"),
        ] {
            let e = check_meta("cilium_test", &want, &have).expect_err(message);
            assert_eq!(e.to_string(), format!("map cilium_test: {message}"));
        }
    }
}
