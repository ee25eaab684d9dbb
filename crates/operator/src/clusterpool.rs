//! Cluster-pool IPAM's allocator, as Cilium's operator keeps it, one per
//! address family: each pool CIDR (`cluster-pool-ipv4-cidr`,
//! `cluster-pool-ipv6-cidr`) is cut into blocks of the family's mask size,
//! one per node. A free block is
//! searched for from just after the last one handed out, wrapping around,
//! so a block a deleted node gave back is not handed out again soon.
//! Pure bookkeeping: what is written to CiliumNodes is the caller's.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address family, with the keys its pool is configured by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn cidr_key(self) -> &'static str {
        match self {
            Family::V4 => "cluster-pool-ipv4-cidr",
            Family::V6 => "cluster-pool-ipv6-cidr",
        }
    }

    pub fn mask_key(self) -> &'static str {
        match self {
            Family::V4 => "cluster-pool-ipv4-mask-size",
            Family::V6 => "cluster-pool-ipv6-mask-size",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }

    fn bits(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    /// The family a pod CIDR as written belongs to, parsed or not.
    pub fn of_text(s: &str) -> Self {
        if s.contains(':') {
            Family::V6
        } else {
            Family::V4
        }
    }
}

/// A CIDR of either family, its host bits clear.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    pub net: IpAddr,
    pub len: u8,
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.len)
    }
}

impl Cidr {
    /// `a.b.c.d/n` or `x::/n` whose host bits are zero.
    pub fn parse(s: &str) -> Option<Self> {
        use agent::option::validate::{parse_cidr4, parse_cidr6};
        let s = s.trim();
        parse_cidr4(s)
            .map(|(net, len)| (IpAddr::V4(net), len))
            .or_else(|| parse_cidr6(s).map(|(net, len)| (IpAddr::V6(net), len)))
            .map(|(net, len)| Cidr { net, len })
    }

    pub fn family(&self) -> Family {
        match self.net {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// The address as a number, left-aligned in the family's width.
    fn value(&self) -> u128 {
        match self.net {
            IpAddr::V4(a) => u128::from(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        }
    }

    fn contains(&self, other: &Cidr) -> bool {
        let bits = self.family().bits();
        other.family() == self.family()
            && other.len >= self.len
            && mask(other.value(), self.len, bits) == self.value()
    }

    fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other) || other.contains(self)
    }
}

fn mask(addr: u128, len: u8, bits: u8) -> u128 {
    let host = u128::MAX
        .checked_shr(u32::from(128 - bits + len))
        .unwrap_or(0);
    addr & !host
}

fn address(family: Family, value: u128) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::from(value as u32)),
        Family::V6 => IpAddr::V6(Ipv6Addr::from(value)),
    }
}

/// The most blocks one pool may have (a /8 cut into /32s): the bitmap of
/// a larger one would cost more than any cluster needs.
const MAX_BLOCK_BITS: u8 = 24;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{} is empty: cluster-pool IPAM needs at least one CIDR", .0.cidr_key())]
    NoPool(Family),
    #[error("{pool} is not an {} CIDR ({})", family.name(), family.cidr_key())]
    Family { pool: Cidr, family: Family },
    #[error("{} {mask} is not within {pool} (it must be between {} and {})", pool.family().mask_key(), pool.len, pool.family().bits())]
    Mask { mask: u8, pool: Cidr },
    #[error("{} {pool} cut into /{mask} blocks gives more than 2^{MAX_BLOCK_BITS} of them", pool.family().cidr_key())]
    TooManyBlocks { pool: Cidr, mask: u8 },
    #[error("{} {a} overlaps {b}", a.family().cidr_key())]
    Overlap { a: Cidr, b: Cidr },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocError {
    #[error("all {} pod CIDRs of the cluster pool are allocated", .0.name())]
    Full(Family),
    #[error("pod CIDR {} is not in any {}", .0, .0.family().cidr_key())]
    NotInPool(Cidr),
    #[error("pod CIDR {cidr} is not a /{mask} block of the cluster pool")]
    NotABlock { cidr: Cidr, mask: u8 },
    #[error("pod CIDR {cidr} is already allocated to node {owner}")]
    Taken { cidr: Cidr, owner: String },
}

struct Pool {
    cidr: Cidr,
    used: Vec<bool>,
    free: usize,
    /// Where the next search starts.
    cursor: usize,
}

impl Pool {
    fn block(&self, mask: u8, i: usize) -> Cidr {
        let shift = u32::from(self.cidr.family().bits() - mask);
        let net = self.cidr.value() + ((i as u128) << shift);
        Cidr {
            net: address(self.cidr.family(), net),
            len: mask,
        }
    }

    fn index(&self, mask: u8, cidr: &Cidr) -> usize {
        let shift = u32::from(self.cidr.family().bits() - mask);
        ((cidr.value() - self.cidr.value()) >> shift) as usize
    }
}

/// Every pool of one family, and which node has which block.
pub struct ClusterPool {
    family: Family,
    mask: u8,
    pools: Vec<Pool>,
    owners: BTreeMap<String, Cidr>,
}

impl ClusterPool {
    pub fn new(family: Family, pools: &[Cidr], mask: u8) -> Result<Self, ConfigError> {
        if pools.is_empty() {
            return Err(ConfigError::NoPool(family));
        }
        for (i, a) in pools.iter().enumerate() {
            if a.family() != family {
                return Err(ConfigError::Family { pool: *a, family });
            }
            if mask < a.len || mask > family.bits() {
                return Err(ConfigError::Mask { mask, pool: *a });
            }
            if mask - a.len > MAX_BLOCK_BITS {
                return Err(ConfigError::TooManyBlocks { pool: *a, mask });
            }
            if let Some(b) = pools[..i].iter().find(|b| a.overlaps(b)) {
                return Err(ConfigError::Overlap { a: *a, b: *b });
            }
        }
        let pools = pools
            .iter()
            .map(|c| {
                let n = 1usize << (mask - c.len);
                Pool {
                    cidr: *c,
                    used: vec![false; n],
                    free: n,
                    cursor: 0,
                }
            })
            .collect();
        Ok(Self {
            family,
            mask,
            pools,
            owners: BTreeMap::new(),
        })
    }

    pub fn family(&self) -> Family {
        self.family
    }

    /// The block `node` has, if any.
    pub fn of(&self, node: &str) -> Option<Cidr> {
        self.owners.get(node).copied()
    }

    /// Gives `node` a free block (or the one it has).
    pub fn allocate(&mut self, node: &str) -> Result<Cidr, AllocError> {
        if let Some(c) = self.of(node) {
            return Ok(c);
        }
        let mask = self.mask;
        let pool = self
            .pools
            .iter_mut()
            .find(|p| p.free > 0)
            .ok_or(AllocError::Full(self.family))?;
        let n = pool.used.len();
        let i = (0..n)
            .map(|k| (pool.cursor + k) % n)
            .find(|i| !pool.used[*i])
            .expect("a pool with free blocks has a free block");
        pool.used[i] = true;
        pool.free -= 1;
        pool.cursor = (i + 1) % n;
        let cidr = pool.block(mask, i);
        self.owners.insert(node.to_owned(), cidr);
        Ok(cidr)
    }

    /// Records that `node` has `cidr` (as its CiliumNode says), refusing a
    /// CIDR outside the pools or another node's.
    pub fn occupy(&mut self, node: &str, cidr: Cidr) -> Result<(), AllocError> {
        if let Some(owner) = self
            .owners
            .iter()
            .find(|(_, c)| **c == cidr)
            .map(|(o, _)| o.clone())
        {
            if owner == node {
                return Ok(());
            }
            return Err(AllocError::Taken { cidr, owner });
        }
        let mask = self.mask;
        let at = self
            .pools
            .iter()
            .position(|p| p.cidr.contains(&cidr))
            .ok_or(AllocError::NotInPool(cidr))?;
        if cidr.len != mask {
            return Err(AllocError::NotABlock { cidr, mask });
        }
        // a node has one block: a different one it had is given back
        self.release(node);
        let pool = &mut self.pools[at];
        let i = pool.index(mask, &cidr);
        pool.used[i] = true;
        pool.free -= 1;
        self.owners.insert(node.to_owned(), cidr);
        Ok(())
    }

    /// Gives back `node`'s block; the block, if it had one.
    pub fn release(&mut self, node: &str) -> Option<Cidr> {
        let cidr = self.owners.remove(node)?;
        let mask = self.mask;
        if let Some(pool) = self.pools.iter_mut().find(|p| p.cidr.contains(&cidr)) {
            let i = pool.index(mask, &cidr);
            if pool.used[i] {
                pool.used[i] = false;
                pool.free += 1;
            }
        }
        Some(cidr)
    }

    /// Every node with a block.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, Cidr)> {
        self.owners.iter().map(|(n, c)| (n.as_str(), *c))
    }

    /// Blocks handed out and blocks in all.
    pub fn usage(&self) -> (usize, usize) {
        let total: usize = self.pools.iter().map(|p| p.used.len()).sum();
        let free: usize = self.pools.iter().map(|p| p.free).sum();
        (total - free, total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(s: &str) -> Cidr {
        Cidr::parse(s).unwrap()
    }

    #[test]
    fn blocks_are_handed_out_in_turn_and_a_released_one_comes_last() {
        let mut p = ClusterPool::new(Family::V4, &[cidr("10.0.0.0/22")], 24).unwrap();
        assert_eq!(p.allocate("a"), Ok(cidr("10.0.0.0/24")));
        assert_eq!(p.allocate("b"), Ok(cidr("10.0.1.0/24")));
        assert_eq!(p.allocate("a"), Ok(cidr("10.0.0.0/24")), "one per node");
        assert_eq!(p.release("a"), Some(cidr("10.0.0.0/24")));
        assert_eq!(p.allocate("c"), Ok(cidr("10.0.2.0/24")));
        assert_eq!(p.allocate("d"), Ok(cidr("10.0.3.0/24")));
        assert_eq!(p.allocate("e"), Ok(cidr("10.0.0.0/24")), "wrapped around");
        assert_eq!(p.allocate("f"), Err(AllocError::Full(Family::V4)));
        assert_eq!(p.usage(), (4, 4));
    }

    #[test]
    fn occupied_blocks_are_checked_against_the_pools_and_their_owners() {
        let mut p =
            ClusterPool::new(Family::V4, &[cidr("10.0.0.0/16"), cidr("10.9.0.0/24")], 24).unwrap();
        assert_eq!(p.occupy("a", cidr("10.0.0.0/24")), Ok(()));
        assert_eq!(p.occupy("a", cidr("10.0.0.0/24")), Ok(()));
        assert_eq!(
            p.occupy("b", cidr("10.0.0.0/24")),
            Err(AllocError::Taken {
                cidr: cidr("10.0.0.0/24"),
                owner: "a".into()
            })
        );
        assert_eq!(
            p.occupy("b", cidr("192.168.0.0/24")),
            Err(AllocError::NotInPool(cidr("192.168.0.0/24")))
        );
        assert_eq!(
            p.occupy("b", cidr("10.0.4.0/23")),
            Err(AllocError::NotABlock {
                cidr: cidr("10.0.4.0/23"),
                mask: 24
            })
        );
        assert_eq!(p.allocate("b"), Ok(cidr("10.0.1.0/24")), "skips a's");
        // the first pool full, the second takes over
        let mut q =
            ClusterPool::new(Family::V4, &[cidr("10.0.0.0/24"), cidr("10.9.0.0/24")], 24).unwrap();
        q.allocate("x").unwrap();
        assert_eq!(q.allocate("y"), Ok(cidr("10.9.0.0/24")));
    }

    #[test]
    fn bad_pools_are_refused_with_what_is_wrong() {
        assert_eq!(
            ClusterPool::new(Family::V4, &[], 24).err(),
            Some(ConfigError::NoPool(Family::V4))
        );
        assert!(matches!(
            ClusterPool::new(Family::V4, &[cidr("10.0.0.0/24")], 16),
            Err(ConfigError::Mask { mask: 16, .. })
        ));
        assert!(matches!(
            ClusterPool::new(Family::V4, &[cidr("10.0.0.0/8"), cidr("10.1.0.0/16")], 24),
            Err(ConfigError::Overlap { .. })
        ));
        assert!(matches!(
            ClusterPool::new(Family::V4, &[cidr("10.0.0.0/8")], 33),
            Err(ConfigError::Mask { .. })
        ));
    }

    #[test]
    fn ipv6_pools_are_cut_into_blocks_as_ipv4_ones() {
        let mut p = ClusterPool::new(Family::V6, &[cidr("fd00::/104")], 120).unwrap();
        assert_eq!(p.allocate("a"), Ok(cidr("fd00::/120")));
        assert_eq!(p.allocate("b"), Ok(cidr("fd00::100/120")));
        assert_eq!(p.usage(), (2, 1 << 16));
        assert_eq!(p.occupy("c", cidr("fd00::ff00/120")), Ok(()));
        assert_eq!(
            p.occupy("d", cidr("fd00:1::/120")),
            Err(AllocError::NotInPool(cidr("fd00:1::/120")))
        );
        assert_eq!(p.release("b"), Some(cidr("fd00::100/120")));
        assert!(matches!(
            ClusterPool::new(Family::V6, &[cidr("10.0.0.0/8")], 24),
            Err(ConfigError::Family { .. })
        ));
        let e = ClusterPool::new(Family::V6, &[cidr("fd00::/64")], 112)
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .starts_with("cluster-pool-ipv6-cidr fd00::/64"),
            "{e}"
        );
    }
}
