//! Cluster-pool IPAM's allocator, as Cilium's operator keeps it: each pool
//! CIDR (`cluster-pool-ipv4-cidr`) is cut into blocks of
//! `cluster-pool-ipv4-mask-size` bits, one per node. A free block is
//! searched for from just after the last one handed out, wrapping around,
//! so a block a deleted node gave back is not handed out again soon.
//! Pure bookkeeping: what is written to CiliumNodes is the caller's.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

/// An IPv4 CIDR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    pub net: Ipv4Addr,
    pub len: u8,
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.net, self.len)
    }
}

impl Cidr {
    /// `a.b.c.d/n` whose host bits are zero.
    pub fn parse(s: &str) -> Option<Self> {
        agent::option::validate::parse_cidr4(s.trim()).map(|(net, len)| Cidr { net, len })
    }

    fn contains(&self, other: &Cidr) -> bool {
        other.len >= self.len && mask(u32::from(other.net), self.len) == u32::from(self.net)
    }

    fn overlaps(&self, other: &Cidr) -> bool {
        self.contains(other) || other.contains(self)
    }
}

fn mask(addr: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        addr & (u32::MAX << (32 - len))
    }
}

/// The most blocks one pool may have (a /8 cut into /32s): the bitmap of
/// a larger one would cost more than any cluster needs.
const MAX_BLOCK_BITS: u8 = 24;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("cluster-pool-ipv4-cidr is empty: cluster-pool IPAM needs at least one CIDR")]
    NoPool,
    #[error("cluster-pool-ipv4-mask-size {mask} is not within {pool} (it must be between {} and 32)", pool.len)]
    Mask { mask: u8, pool: Cidr },
    #[error("cluster-pool-ipv4-cidr {pool} cut into /{mask} blocks gives more than 2^{MAX_BLOCK_BITS} of them")]
    TooManyBlocks { pool: Cidr, mask: u8 },
    #[error("cluster-pool-ipv4-cidr {a} overlaps {b}")]
    Overlap { a: Cidr, b: Cidr },
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocError {
    #[error("all pod CIDRs of the cluster pool are allocated")]
    Full,
    #[error("pod CIDR {0} is not in any cluster-pool-ipv4-cidr")]
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
        let size = 1u64 << (32 - mask);
        let net = u32::from(self.cidr.net) as u64 + i as u64 * size;
        Cidr {
            net: Ipv4Addr::from(net as u32),
            len: mask,
        }
    }

    fn index(&self, mask: u8, cidr: &Cidr) -> usize {
        ((u32::from(cidr.net) - u32::from(self.cidr.net)) >> (32 - mask)) as usize
    }
}

/// Every pool, and which node has which block.
pub struct ClusterPool {
    mask: u8,
    pools: Vec<Pool>,
    owners: BTreeMap<String, Cidr>,
}

impl ClusterPool {
    pub fn new(pools: &[Cidr], mask: u8) -> Result<Self, ConfigError> {
        if pools.is_empty() {
            return Err(ConfigError::NoPool);
        }
        for (i, a) in pools.iter().enumerate() {
            if mask < a.len || mask > 32 {
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
            mask,
            pools,
            owners: BTreeMap::new(),
        })
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
            .ok_or(AllocError::Full)?;
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
        let mut p = ClusterPool::new(&[cidr("10.0.0.0/22")], 24).unwrap();
        assert_eq!(p.allocate("a"), Ok(cidr("10.0.0.0/24")));
        assert_eq!(p.allocate("b"), Ok(cidr("10.0.1.0/24")));
        assert_eq!(p.allocate("a"), Ok(cidr("10.0.0.0/24")), "one per node");
        assert_eq!(p.release("a"), Some(cidr("10.0.0.0/24")));
        assert_eq!(p.allocate("c"), Ok(cidr("10.0.2.0/24")));
        assert_eq!(p.allocate("d"), Ok(cidr("10.0.3.0/24")));
        assert_eq!(p.allocate("e"), Ok(cidr("10.0.0.0/24")), "wrapped around");
        assert_eq!(p.allocate("f"), Err(AllocError::Full));
        assert_eq!(p.usage(), (4, 4));
    }

    #[test]
    fn occupied_blocks_are_checked_against_the_pools_and_their_owners() {
        let mut p = ClusterPool::new(&[cidr("10.0.0.0/16"), cidr("10.9.0.0/24")], 24).unwrap();
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
        let mut q = ClusterPool::new(&[cidr("10.0.0.0/24"), cidr("10.9.0.0/24")], 24).unwrap();
        q.allocate("x").unwrap();
        assert_eq!(q.allocate("y"), Ok(cidr("10.9.0.0/24")));
    }

    #[test]
    fn bad_pools_are_refused_with_what_is_wrong() {
        assert_eq!(ClusterPool::new(&[], 24).err(), Some(ConfigError::NoPool));
        assert!(matches!(
            ClusterPool::new(&[cidr("10.0.0.0/24")], 16),
            Err(ConfigError::Mask { mask: 16, .. })
        ));
        assert!(matches!(
            ClusterPool::new(&[cidr("10.0.0.0/8"), cidr("10.1.0.0/16")], 24),
            Err(ConfigError::Overlap { .. })
        ));
        assert!(matches!(
            ClusterPool::new(&[cidr("10.0.0.0/8")], 33),
            Err(ConfigError::Mask { .. })
        ));
    }
}
