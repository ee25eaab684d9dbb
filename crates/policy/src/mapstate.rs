//! The entries of an endpoint's policy map and how the datapath reads
//! them. Keys are Cilium's LPM keys (identity, direction, protocol, port
//! prefix); a lookup is the two-lookup, six-rank walk of Cilium's
//! `policy.h`, so `lookup` here says what the datapath will say.

use std::collections::BTreeMap;

/// Policy-map key. Identity 0 is any peer; protocol 0 is any protocol
/// (and then any port); `port_prefix` is how many leading bits of `port`
/// must match (16 = one port, 0 = every port).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub identity: u32,
    pub egress: bool,
    pub proto: u8,
    pub port: u16,
    pub port_prefix: u8,
}

fn port_mask(prefix: u8) -> u16 {
    u16::MAX.checked_shl(16 - u32::from(prefix)).unwrap_or(0)
}

impl Key {
    pub fn new(identity: u32, egress: bool, proto: u8, port: u16, port_prefix: u8) -> Self {
        let (port, port_prefix) = if proto == 0 {
            (0, 0)
        } else {
            (port & port_mask(port_prefix), port_prefix)
        };
        Self {
            identity,
            egress,
            proto,
            port,
            port_prefix,
        }
    }

    /// The LPM prefix length: identity and direction always, then the
    /// protocol and the port bits when they are given.
    pub fn prefixlen(&self) -> u32 {
        if self.proto == 0 {
            40
        } else {
            48 + u32::from(self.port_prefix)
        }
    }

    fn port_covers(&self, other: &Key) -> bool {
        self.port_prefix <= other.port_prefix
            && other.port & port_mask(self.port_prefix) == self.port
    }

    /// Whether all traffic `other` matches is matched by `self`.
    pub fn covers(&self, other: &Key) -> bool {
        self.egress == other.egress
            && (self.identity == 0 || self.identity == other.identity)
            && (self.proto == 0 || self.proto == other.proto)
            && self.port_covers(other)
    }

    /// The traffic both match, if any.
    pub fn intersect(&self, other: &Key) -> Option<Key> {
        if self.egress != other.egress {
            return None;
        }
        let identity = match (self.identity, other.identity) {
            (0, id) | (id, 0) => id,
            (a, b) if a == b => a,
            _ => return None,
        };
        let proto = match (self.proto, other.proto) {
            (0, p) | (p, 0) => p,
            (a, b) if a == b => a,
            _ => return None,
        };
        let (narrow, wide) = if self.port_prefix >= other.port_prefix {
            (self, other)
        } else {
            (other, self)
        };
        if proto != 0 && !wide.port_covers(narrow) {
            return None;
        }
        let narrow = if narrow.proto == 0 { wide } else { narrow };
        Some(Key::new(
            identity,
            self.egress,
            proto,
            narrow.port,
            narrow.port_prefix,
        ))
    }

    /// Whether a packet matches this key.
    fn matches(&self, identity: u32, egress: bool, proto: u8, port: u16) -> bool {
        self.identity == identity
            && self.egress == egress
            && (self.proto == 0
                || (self.proto == proto && port & port_mask(self.port_prefix) == self.port))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub deny: bool,
}

/// Cilium's match types, as policy verdict events name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchType {
    L3Only = 1,
    L3L4 = 2,
    L4Only = 3,
    All = 4,
    L3Proto = 5,
    ProtoOnly = 6,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed(MatchType, Key),
    /// A deny entry matched (`DROP_POLICY_DENY`).
    Denied(MatchType, Key),
    /// Nothing matched (`DROP_POLICY`).
    NoMatch,
}

impl Verdict {
    pub fn allowed(&self) -> bool {
        matches!(self, Verdict::Allowed(..))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapState(pub BTreeMap<Key, Entry>);

impl MapState {
    /// The entries for `allows` and `denies` such that the datapath's
    /// walk denies whatever any deny matches: an allow a deny covers
    /// becomes a deny, and where they only overlap, the overlap gets a
    /// deny entry of its own (at least as specific as the allow, so the
    /// walk prefers it).
    pub fn build(allows: &[Key], denies: &[Key]) -> Self {
        let mut map = BTreeMap::new();
        for d in denies {
            map.insert(*d, Entry { deny: true });
        }
        for a in allows {
            if denies.iter().any(|d| d.covers(a)) {
                map.insert(*a, Entry { deny: true });
                continue;
            }
            map.entry(*a).or_insert(Entry { deny: false });
            for d in denies {
                if let Some(i) = a.intersect(d) {
                    map.insert(i, Entry { deny: true });
                }
            }
        }
        Self(map)
    }

    /// The most specific entry for this identity (the datapath's LPM).
    fn lpm(&self, identity: u32, egress: bool, proto: u8, port: u16) -> Option<(&Key, &Entry)> {
        self.0
            .iter()
            .filter(|(k, _)| k.matches(identity, egress, proto, port))
            .max_by_key(|(k, _)| k.prefixlen())
    }

    /// What the datapath decides for a packet from/to `identity`.
    pub fn lookup(&self, identity: u32, egress: bool, proto: u8, port: u16) -> Verdict {
        let a = self.lpm(identity, egress, proto, port);
        let b = self.lpm(0, egress, proto, port);
        let exact_port = |k: &Key| k.proto != 0 && k.port_prefix > 0;
        let pick = match (a, b) {
            (Some(a), _) if exact_port(a.0) => Some((MatchType::L3L4, a)),
            (_, Some(b)) if exact_port(b.0) => Some((MatchType::L4Only, b)),
            (Some(a), _) if a.0.proto != 0 => Some((MatchType::L3Proto, a)),
            (_, Some(b)) if b.0.proto != 0 => Some((MatchType::ProtoOnly, b)),
            (Some(a), _) => Some((MatchType::L3Only, a)),
            (_, Some(b)) => Some((MatchType::All, b)),
            (None, None) => None,
        };
        match pick {
            None => Verdict::NoMatch,
            Some((m, (k, e))) if e.deny => Verdict::Denied(m, *k),
            Some((m, (k, _))) => Verdict::Allowed(m, *k),
        }
    }

    /// The entries in the kernel's layout.
    pub fn to_abi(&self) -> Vec<(abi::policy::PolicyKey, abi::policy::PolicyEntry)> {
        self.0
            .iter()
            .map(|(k, e)| {
                let mut flags = 0;
                if e.deny {
                    flags |= abi::policy::POLICY_FLAG_DENY;
                }
                if k.proto == 0 {
                    flags |= abi::policy::POLICY_FLAG_WILDCARD_PROTOCOL;
                }
                if k.port_prefix == 0 {
                    flags |= abi::policy::POLICY_FLAG_WILDCARD_DPORT;
                }
                (
                    abi::policy::PolicyKey {
                        prefixlen: k.prefixlen(),
                        sec_label: k.identity,
                        egress: u8::from(k.egress),
                        protocol: k.proto,
                        dport: abi::Be16::new(k.port),
                    },
                    abi::policy::PolicyEntry {
                        flags,
                        ..Default::default()
                    },
                )
            })
            .collect()
    }
}

/// The port prefixes that exactly cover `first..=last`.
pub fn range_prefixes(first: u16, last: u16) -> Vec<(u16, u8)> {
    let mut out = Vec::new();
    let (mut start, end) = (u32::from(first), u32::from(last));
    while start <= end {
        let mut bits = 0u8;
        // grow the block while it stays aligned and inside the range
        while bits < 16 {
            let size = 1u32 << (bits + 1);
            if start % size != 0 || start + size - 1 > end {
                break;
            }
            bits += 1;
        }
        out.push((start as u16, 16 - bits));
        start += 1u32 << bits;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TCP: u8 = 6;

    #[test]
    fn ranges_become_aligned_prefixes() {
        assert_eq!(range_prefixes(80, 80), vec![(80, 16)]);
        assert_eq!(range_prefixes(8080, 8083), vec![(8080, 14)]);
        assert_eq!(range_prefixes(1, 3), vec![(1, 16), (2, 15)]);
        assert_eq!(range_prefixes(0, 65535), vec![(0, 0)]);
    }

    #[test]
    fn l4_beats_l3_and_deny_beats_allow() {
        let x = 300;
        // allow x on all ports, deny everyone on 80
        let m = MapState::build(
            &[Key::new(x, false, 0, 0, 0)],
            &[Key::new(0, false, TCP, 80, 16)],
        );
        assert!(matches!(m.lookup(x, false, TCP, 80), Verdict::Denied(..)));
        assert!(m.lookup(x, false, TCP, 81).allowed());
        assert_eq!(m.lookup(301, false, TCP, 81), Verdict::NoMatch);
        // allow everyone on 80, deny x entirely
        let m = MapState::build(
            &[Key::new(0, false, TCP, 80, 16)],
            &[Key::new(x, false, 0, 0, 0)],
        );
        assert!(matches!(m.lookup(x, false, TCP, 80), Verdict::Denied(..)));
        assert!(m.lookup(301, false, TCP, 80).allowed());
        // the datapath walk alone would have allowed x on 80: the overlap entry decides
        assert!(m.0.contains_key(&Key::new(x, false, TCP, 80, 16)));
    }
}
