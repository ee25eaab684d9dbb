//! Conntrack garbage collection: entries whose lifetime has passed leave
//! `cilium_ct4_global` and `cilium_ct_any4_global`. An entry is re-read
//! just before it is deleted, so a flow whose packet refreshed it meanwhile
//! stays; a live flow's entry is never removed.

use crate::{Error, PinnedMap};
use abi::ct::{CtEntry, Ipv4CtTuple};
use std::path::Path;

/// One pass over one map.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    pub alive: u64,
    pub deleted: u64,
    pub max_entries: u64,
}

/// The datapath's clock: seconds of CLOCK_MONOTONIC (bpf_ktime_get_ns).
pub fn now_secs() -> u32 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u32
}

fn expired(e: &CtEntry, now: u32) -> bool {
    e.lifetime < now
}

/// Removes the expired entries of the CT map `name` under `globals`.
pub fn gc_map(globals: &Path, name: &str, now: u32) -> Result<GcStats, Error> {
    let map = PinnedMap::open(&globals.join(name), name)?;
    let mut stats = GcStats {
        max_entries: u64::from(map.meta().max_entries),
        ..Default::default()
    };
    for (key, entry) in map.entries::<Ipv4CtTuple, CtEntry>()? {
        if !expired(&entry, now) {
            stats.alive += 1;
            continue;
        }
        match map.get::<Ipv4CtTuple, CtEntry>(&key)? {
            Some(fresh) if expired(&fresh, now) => {
                if map.remove(&key)? {
                    stats.deleted += 1;
                }
            }
            Some(_) => stats.alive += 1,
            None => {}
        }
    }
    Ok(stats)
}
