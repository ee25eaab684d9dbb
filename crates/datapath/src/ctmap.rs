//! Conntrack and NAT garbage collection: entries whose lifetime has passed
//! leave `cilium_ct4_global` and `cilium_ct_any4_global` (and their IPv6
//! twins); NAT pairs
//! (NodePort and masquerading) in `cilium_snat_v4_external` go once neither
//! direction has seen a packet for a connection's lifetime. An entry is re-read just before it
//! is deleted, so a flow whose packet refreshed it meanwhile stays; a live
//! flow's entry is never removed.

use crate::maps::Snat4External;
use crate::{Error, Map};
use abi::ct::{CtEntry, Ipv4CtTuple};
use abi::lb::{Ipv4NatEntry, NAT_DIR_EGRESS, NAT_DIR_INGRESS};
use abi::Plain;

/// One pass over one map.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    pub alive: u64,
    pub deleted: u64,
    pub max_entries: u64,
}

impl GcStats {
    /// The share of the map's capacity the pass deleted.
    pub fn deleted_ratio(&self) -> f64 {
        self.deleted as f64 / self.max_entries.max(1) as f64
    }
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

fn nat_stale(key: &Ipv4CtTuple, e: &Ipv4NatEntry, now: u32) -> bool {
    // NAT entries live as long as the connections they translate
    let life = if key.nexthdr == 6 {
        abi::ct::CT_CONNECTION_LIFETIME_TCP
    } else {
        abi::ct::CT_CONNECTION_LIFETIME_NONTCP
    };
    e.last_used.max(e.created) + u64::from(life) < u64::from(now)
}

/// The key of the entry that translates the replies of the flow `fwd`
/// describes: a NodePort flow's (client to NodePort, `from_addr` set)
/// come from the backend, a masqueraded flow's from its peer to the
/// address and port it got.
fn reply_key(key: &Ipv4CtTuple, fwd: &Ipv4NatEntry) -> Ipv4CtTuple {
    let masqueraded = fwd.from_addr.ip().is_unspecified();
    let (saddr, daddr, sport, dport) = if masqueraded {
        (key.daddr, fwd.to_addr, key.dport, fwd.to_port)
    } else {
        (fwd.to_addr, key.daddr, fwd.to_port, fwd.rev_port)
    };
    Ipv4CtTuple {
        saddr,
        daddr,
        sport,
        dport,
        nexthdr: key.nexthdr,
        flags: NAT_DIR_INGRESS,
    }
}

/// Removes the NAT pairs neither of whose directions carried a
/// packet for a connection's lifetime, and stale halves without a pair.
pub fn gc_nat(map: &Snat4External, now: u32) -> Result<GcStats, Error> {
    let mut stats = GcStats {
        max_entries: u64::from(map.max_entries()),
        ..Default::default()
    };
    let entries = map.entries()?;
    let mut paired = std::collections::HashSet::new();
    for (key, fwd) in entries.iter().filter(|(k, _)| k.flags == NAT_DIR_EGRESS) {
        let rkey = reply_key(key, fwd);
        paired.insert(rkey.as_bytes().to_vec());
        // both directions as they are now, each read once
        let (now_fwd, now_rev) = (map.get(key)?, map.get(&rkey)?);
        let stale = |k: &Ipv4CtTuple, e: &Option<Ipv4NatEntry>| {
            e.as_ref().is_none_or(|e| nat_stale(k, e, now))
        };
        if stale(key, &now_fwd) && stale(&rkey, &now_rev) {
            stats.deleted += u64::from(map.remove(key)?) + u64::from(map.remove(&rkey)?);
        } else {
            stats.alive += u64::from(now_fwd.is_some()) + u64::from(now_rev.is_some());
        }
    }
    for (key, rev) in entries.iter().filter(|(k, _)| k.flags == NAT_DIR_INGRESS) {
        if paired.contains(key.as_bytes()) {
            continue;
        }
        if nat_stale(key, rev, now) {
            stats.deleted += u64::from(map.remove(key)?);
        } else {
            stats.alive += 1;
        }
    }
    Ok(stats)
}

/// Removes the expired entries of a CT map of either family
/// (`Ct4Global`, `CtAny4Global`, `Ct6Global`, `CtAny6Global`).
pub fn gc_map<K: Plain>(map: &Map<K, CtEntry>, now: u32) -> Result<GcStats, Error> {
    let mut stats = GcStats {
        max_entries: u64::from(map.max_entries()),
        ..Default::default()
    };
    for (key, entry) in map.entries()? {
        if !expired(&entry, now) {
            stats.alive += 1;
            continue;
        }
        match map.get(&key)? {
            // another GC pass may have removed it meanwhile
            Some(fresh) if expired(&fresh, now) => stats.deleted += u64::from(map.remove(&key)?),
            Some(_) => stats.alive += 1,
            None => {}
        }
    }
    Ok(stats)
}
