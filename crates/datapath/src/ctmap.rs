//! Conntrack and NAT garbage collection: entries whose lifetime has passed
//! leave `cilium_ct4_global` and `cilium_ct_any4_global` (and their IPv6
//! twins); NAT pairs (NodePort and masquerading) in
//! `cilium_snat_v4_external` and `cilium_snat_v6_external` go once neither
//! direction has seen a packet for a connection's lifetime. An entry is
//! re-read just before it is deleted, so a flow whose packet refreshed it
//! meanwhile stays; a live flow's entry is never removed.

use crate::{Error, Map};
use abi::ct::{CtEntry, Ipv4CtTuple, Ipv6CtTuple};
use abi::lb::{
    Ipv4NatEntry, Ipv6NatEntry, NAT6_F_LOCAL, NAT6_F_NODEPORT, NAT_DIR_EGRESS, NAT_DIR_INGRESS,
};
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

/// A NAT table's key and entry, of either family: what GC asks of them.
pub trait NatPair: Plain {
    type Entry: Plain;
    fn protocol(&self) -> u8;
    fn direction(&self) -> u8;
    /// The key of the entry that translates the replies of the flow this
    /// egress entry describes.
    fn reply_key(&self, fwd: &Self::Entry) -> Self;
    fn last_used(e: &Self::Entry) -> u64;
}

impl NatPair for Ipv4CtTuple {
    type Entry = Ipv4NatEntry;
    fn protocol(&self) -> u8 {
        self.nexthdr
    }
    fn direction(&self) -> u8 {
        self.flags
    }
    /// A NodePort flow's (client to NodePort, `from_addr` set) come from
    /// the backend, a masqueraded flow's from its peer to the address and
    /// port it got.
    fn reply_key(&self, fwd: &Ipv4NatEntry) -> Self {
        let masqueraded = fwd.from_addr.ip().is_unspecified();
        let (saddr, daddr, sport, dport) = if masqueraded {
            (self.daddr, fwd.to_addr, self.dport, fwd.to_port)
        } else {
            (fwd.to_addr, self.daddr, fwd.to_port, fwd.rev_port)
        };
        Ipv4CtTuple {
            saddr,
            daddr,
            sport,
            dport,
            nexthdr: self.nexthdr,
            flags: NAT_DIR_INGRESS,
        }
    }
    fn last_used(e: &Ipv4NatEntry) -> u64 {
        e.last_used.max(e.created)
    }
}

/// Without a source address in the entry, a NodePort pair says by its
/// flags whether its backend saw the client (`NAT6_F_LOCAL`) or the node.
impl NatPair for Ipv6CtTuple {
    type Entry = Ipv6NatEntry;
    fn protocol(&self) -> u8 {
        self.nexthdr
    }
    fn direction(&self) -> u8 {
        self.flags
    }
    fn reply_key(&self, fwd: &Ipv6NatEntry) -> Self {
        let (saddr, daddr, sport, dport) = if fwd.flags & NAT6_F_NODEPORT == 0 {
            (self.daddr, fwd.to_addr, self.dport, fwd.to_port)
        } else if fwd.flags & NAT6_F_LOCAL != 0 {
            (fwd.to_addr, self.saddr, fwd.to_port, fwd.rev_port)
        } else {
            (fwd.to_addr, self.daddr, fwd.to_port, fwd.rev_port)
        };
        Ipv6CtTuple {
            saddr,
            daddr,
            sport,
            dport,
            nexthdr: self.nexthdr,
            flags: NAT_DIR_INGRESS,
        }
    }
    fn last_used(e: &Ipv6NatEntry) -> u64 {
        e.last_used.max(e.created)
    }
}

fn nat_stale<K: NatPair>(key: &K, e: &K::Entry, now: u32) -> bool {
    // NAT entries live as long as the connections they translate
    let life = if key.protocol() == 6 {
        abi::ct::CT_CONNECTION_LIFETIME_TCP
    } else {
        abi::ct::CT_CONNECTION_LIFETIME_NONTCP
    };
    K::last_used(e) + u64::from(life) < u64::from(now)
}

/// Removes the NAT pairs neither of whose directions carried a
/// packet for a connection's lifetime, and stale halves without a pair
/// (`Snat4External`, `Snat6External`).
pub fn gc_nat<K: NatPair>(map: &Map<K, K::Entry>, now: u32) -> Result<GcStats, Error> {
    let mut stats = GcStats {
        max_entries: u64::from(map.max_entries()),
        ..Default::default()
    };
    let entries = map.entries()?;
    let mut paired = std::collections::HashSet::new();
    for (key, fwd) in entries
        .iter()
        .filter(|(k, _)| k.direction() == NAT_DIR_EGRESS)
    {
        let rkey = key.reply_key(fwd);
        paired.insert(rkey.as_bytes().to_vec());
        // both directions as they are now, each read once
        let (now_fwd, now_rev) = (map.get(key)?, map.get(&rkey)?);
        let stale = |k: &K, e: &Option<K::Entry>| e.as_ref().is_none_or(|e| nat_stale(k, e, now));
        if stale(key, &now_fwd) && stale(&rkey, &now_rev) {
            stats.deleted += u64::from(map.remove(key)?) + u64::from(map.remove(&rkey)?);
        } else {
            stats.alive += u64::from(now_fwd.is_some()) + u64::from(now_rev.is_some());
        }
    }
    for (key, rev) in entries
        .iter()
        .filter(|(k, _)| k.direction() == NAT_DIR_INGRESS)
    {
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
