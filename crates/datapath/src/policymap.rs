//! Per-endpoint policy maps: `cilium_policy_<EPID>` (Cilium's LPM layout),
//! each reachable by the datapath through `cilium_rs_policy_maps`, the
//! map-in-map keyed by endpoint ID that the objects define (a map of our
//! own, named so Cilium's `cilium_policy_*` glob does not match it).

use crate::map::PinnedMap;
use crate::maps::PolicyMaps;
use crate::sys::MapMeta;
use crate::{Error, Map};
use abi::policy::{PolicyEntry, PolicyKey};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const OUTER: &str = abi::maps::POLICY_MAPS;
const BPF_MAP_TYPE_LPM_TRIE: u32 = 11;
const BPF_F_NO_PREALLOC: u32 = 1;

/// The shape of every endpoint's map (`struct policy_map` in maps.h).
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
    format!("{PREFIX}{endpoint_id:05}")
}

const PREFIX: &str = "cilium_policy_";

/// The endpoint whose policy map is pinned as `pin_name`, if it is one.
pub fn endpoint_of(pin_name: &str) -> Option<u16> {
    pin_name.strip_prefix(PREFIX)?.parse().ok()
}

/// Where endpoint `endpoint_id`'s policy map is pinned under a bpffs root.
pub fn pin_path(bpffs_root: &Path, endpoint_id: u16) -> PathBuf {
    crate::map::global_pin_path(bpffs_root, &name(endpoint_id))
}

/// What a policy map holds, by key: the key and the entry's flags (its
/// counters are the kernel's).
pub type Written = BTreeMap<[u8; 12], (PolicyKey, u8)>;

/// One endpoint's policy map, registered with the datapath.
pub struct PolicyMap {
    map: Map<PolicyKey, PolicyEntry>,
}

impl PolicyMap {
    /// Opens the endpoint's pinned map under `globals`, or creates and
    /// pins it, and makes sure the datapath finds it (the objects, once
    /// loaded, have made the map-in-map).
    pub fn open(globals: &Path, endpoint_id: u16) -> Result<Self, Error> {
        let name = name(endpoint_id);
        let raw = PinnedMap::open_or_create(&globals.join(&name), &name, &inner_meta())?;
        let map = Map::checked(raw, &inner_meta())?;
        // An update of a map-in-map waits for running programs (an RCU
        // grace period, milliseconds): only when the entry is not this map.
        let outer = PolicyMaps::open_in(globals)?;
        if outer.get(endpoint_id)? != Some(map.id()?) {
            outer.set(endpoint_id, map.raw_fd())?;
        }
        Ok(Self { map })
    }

    /// Opens the endpoint's map pinned under `bpffs_root` as it is, to read
    /// it (`cilium bpf policy get`): nothing is created or registered.
    pub fn pinned(bpffs_root: &Path, endpoint_id: u16) -> Result<Self, Error> {
        let map = Map::open(
            &pin_path(bpffs_root, endpoint_id),
            &name(endpoint_id),
            &inner_meta(),
        )?;
        Ok(Self { map })
    }

    /// Makes the map hold exactly `entries`, reading what it holds first;
    /// returns what it holds now.
    pub fn sync(&self, entries: &[(PolicyKey, PolicyEntry)]) -> Result<Written, Error> {
        let have: Written = self
            .map
            .entries()?
            .into_iter()
            .map(|(k, v)| (key_bytes(&k), (k, v.flags)))
            .collect();
        self.sync_from(&have, entries)
    }

    /// Makes the map hold exactly `entries`, given that it holds `have`
    /// (what the last sync returned: reading a map of a thousand entries
    /// back costs two thousand system calls); returns what it holds now.
    /// New and changed entries are written before stale ones go, so
    /// traffic the old and the new policy both allow never meets a gap.
    /// Unchanged entries keep their counters.
    pub fn sync_from(
        &self,
        have: &Written,
        entries: &[(PolicyKey, PolicyEntry)],
    ) -> Result<Written, Error> {
        let mut want = Written::new();
        for (k, v) in entries {
            let bytes = key_bytes(k);
            if have.get(&bytes).is_none_or(|(_, flags)| *flags != v.flags) {
                self.map.put(k, v)?;
            }
            want.insert(bytes, (*k, v.flags));
        }
        // Only this agent writes the map, so what it held before is all
        // that can be stale.
        for (bytes, (k, _)) in have {
            if !want.contains_key(bytes) {
                self.map.remove(k)?;
            }
        }
        Ok(want)
    }

    pub fn entries(&self) -> Result<Vec<(PolicyKey, PolicyEntry)>, Error> {
        self.map.entries()
    }

    /// Writes one entry by hand (`cilium bpf policy add`); the agent's
    /// next regeneration that reads the map back takes it out again (at
    /// most every 15 minutes, as Cilium's full reconciliation).
    pub fn put(&self, key: &PolicyKey, entry: &PolicyEntry) -> Result<(), Error> {
        self.map.put(key, entry)
    }

    /// Removes one entry by hand (`cilium bpf policy delete`); false when
    /// it was not there.
    pub fn remove(&self, key: &PolicyKey) -> Result<bool, Error> {
        self.map.remove(key)
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
    if let Ok(outer) = PolicyMaps::open_in(globals) {
        let _ = outer.remove(endpoint_id);
    }
    let _ = std::fs::remove_file(globals.join(name(endpoint_id)));
}
