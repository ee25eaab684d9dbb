//! Per-endpoint policy maps: `cilium_policy_<EPID>` (Cilium's LPM layout),
//! each reachable by the datapath through `cilium_rs_policy_maps`, the
//! map-in-map keyed by endpoint ID that the objects define (a map of our
//! own, named so Cilium's `cilium_policy_*` glob does not match it).

use crate::map::PinnedMap;
use crate::sys::{self, MapMeta};
use crate::Error;
use abi::policy::{PolicyEntry, PolicyKey};
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::path::Path;

pub const OUTER: &str = abi::maps::POLICY_MAPS;
const BPF_MAP_TYPE_LPM_TRIE: u32 = 11;
const BPF_F_NO_PREALLOC: u32 = 1;

fn inner_meta() -> MapMeta {
    MapMeta {
        map_type: BPF_MAP_TYPE_LPM_TRIE,
        key_size: std::mem::size_of::<PolicyKey>() as u32,
        value_size: std::mem::size_of::<PolicyEntry>() as u32,
        max_entries: abi::maps::POLICY_MAP_SIZE,
        map_flags: BPF_F_NO_PREALLOC,
    }
}

/// `cilium_policy_00123`: Cilium's pin name of endpoint 123's policy map.
pub fn name(endpoint_id: u16) -> String {
    format!("cilium_policy_{endpoint_id:05}")
}

/// One endpoint's policy map, registered with the datapath.
pub struct PolicyMap {
    map: PinnedMap,
}

impl PolicyMap {
    /// Opens the endpoint's pinned map under `globals`, or creates and
    /// pins it, and makes sure the datapath finds it (the objects, once
    /// loaded, have made the map-in-map).
    pub fn open(globals: &Path, endpoint_id: u16) -> Result<Self, Error> {
        let name = name(endpoint_id);
        let pin = globals.join(&name);
        let map = match PinnedMap::open(&pin, &name) {
            Ok(m) => m,
            Err(_) => {
                let fd = sys::map_create(&inner_meta(), None, &name)
                    .map_err(|e| Error::io("creating", &pin, e))?;
                match sys::obj_pin(fd.as_fd(), &pin) {
                    // made meanwhile by another caller: theirs stands
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    other => other.map_err(|e| Error::io("pinning", &pin, e))?,
                }
                PinnedMap::open(&pin, &name)?
            }
        };
        // An update of a map-in-map waits for running programs (an RCU
        // grace period, milliseconds): only when the entry is not this map.
        let outer = PinnedMap::open(&globals.join(OUTER), OUTER)?;
        let key = u32::from(endpoint_id);
        if outer.get::<u32, u32>(&key)? != Some(map.id()?) {
            outer.put(&key, &(map.raw_fd() as u32))?;
        }
        Ok(Self { map })
    }

    /// Makes the map hold exactly `entries`: new and changed entries are
    /// written before stale ones go, so traffic the old and the new policy
    /// both allow never meets a gap. Unchanged entries keep their counters.
    pub fn sync(&self, entries: &[(PolicyKey, PolicyEntry)]) -> Result<(), Error> {
        let have: BTreeMap<[u8; 12], (PolicyKey, PolicyEntry)> = self
            .map
            .entries::<PolicyKey, PolicyEntry>()?
            .into_iter()
            .map(|(k, v)| (key_bytes(&k), (k, v)))
            .collect();
        let mut want = BTreeMap::new();
        for (k, v) in entries {
            want.insert(key_bytes(k), ());
            if have
                .get(&key_bytes(k))
                .is_none_or(|(_, old)| old.flags != v.flags)
            {
                self.map.put(k, v)?;
            }
        }
        // Only this agent writes the map, so what it held before is all
        // that can be stale.
        for (bytes, (k, _)) in &have {
            if !want.contains_key(bytes) {
                self.map.remove(k)?;
            }
        }
        Ok(())
    }

    pub fn entries(&self) -> Result<Vec<(PolicyKey, PolicyEntry)>, Error> {
        self.map.entries()
    }
}

fn key_bytes(k: &PolicyKey) -> [u8; 12] {
    let mut out = [0u8; 12];
    out.copy_from_slice(abi::Plain::as_bytes(k));
    out
}

/// Forgets an endpoint's policy map: the datapath stops finding it (its
/// traffic drops as unconfigured) and the pin goes.
pub fn remove(globals: &Path, endpoint_id: u16) {
    if let Ok(outer) = PinnedMap::open(&globals.join(OUTER), OUTER) {
        let _ = outer.remove(&u32::from(endpoint_id));
    }
    let _ = std::fs::remove_file(globals.join(name(endpoint_id)));
}
