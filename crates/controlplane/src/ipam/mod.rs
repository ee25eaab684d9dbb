//! Host-scope allocation from this node's pod CIDR (cluster-pool mode), one
//! allocator per address family (`Ipam` is IPv4's, `Ipam<Ipv6Addr>` IPv6's).
//!
//! Every change is written to disk before it is acknowledged, so a restarted
//! agent never hands out an address that is still in use, even one whose
//! endpoint was never created (a CNI ADD cut short by the restart).

mod store;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use store::StoreError;

/// Owner of the cilium_host address.
pub const OWNER_ROUTER: &str = "router";
/// Owner of the health endpoint's address.
pub const OWNER_HEALTH: &str = "health";
/// How long an allocation made with `expiration: true` lives without an endpoint.
pub const EXPIRATION: Duration = Duration::from_secs(600);

#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    #[error("range is full: all {0} addresses of {1} are allocated")]
    Full(u128, String),
    #[error("IP {0} is not in this node's pod CIDR {1}")]
    OutOfRange(IpAddr, String),
    #[error("IP {0} is already allocated to {1}")]
    InUse(IpAddr, String),
    #[error("IP {0} is not allocated")]
    NotAllocated(IpAddr),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Allocation {
    pub owner: String,
    /// Seconds since the epoch after which an unclaimed allocation is freed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub expiration_uuid: String,
}

/// An address of one family, as a number the allocator counts with.
pub trait PoolAddr:
    Copy + Ord + std::fmt::Display + Into<IpAddr> + serde::Serialize + serde::de::DeserializeOwned
{
    const BITS: u32;
    /// The family as Cilium's status names it.
    const FAMILY: &'static str;
    fn to_bits(self) -> u128;
    fn from_bits(bits: u128) -> Self;
}

impl PoolAddr for Ipv4Addr {
    const BITS: u32 = 32;
    const FAMILY: &'static str = "IPv4";
    fn to_bits(self) -> u128 {
        u128::from(u32::from(self))
    }
    fn from_bits(bits: u128) -> Self {
        Ipv4Addr::from(bits as u32)
    }
}

impl PoolAddr for Ipv6Addr {
    const BITS: u32 = 128;
    const FAMILY: &'static str = "IPv6";
    fn to_bits(self) -> u128 {
        u128::from(self)
    }
    fn from_bits(bits: u128) -> Self {
        Ipv6Addr::from(bits)
    }
}

/// The address families a node runs (`enable-ipv4`, `enable-ipv6`), one
/// allocator each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Families {
    pub ipv4: bool,
    pub ipv6: bool,
}

pub struct Ipam<A: PoolAddr = Ipv4Addr> {
    network: A,
    prefix_len: u8,
    allocations: BTreeMap<A, Allocation>,
    store: store::Store,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl<A: PoolAddr> Ipam<A> {
    /// Opens the allocator for `network/prefix_len`, loading what a previous
    /// run persisted under `path`, and reserves the router address.
    pub fn open(network: A, prefix_len: u8, router: A, path: PathBuf) -> Result<Self, IpamError> {
        let store = store::Store::new(path);
        let mut ipam = Self {
            network,
            prefix_len,
            allocations: store.load()?,
            store,
        };
        let stale: Vec<A> = ipam
            .allocations
            .keys()
            .copied()
            .filter(|ip| !ipam.contains(*ip))
            .collect();
        for ip in stale {
            tracing::warn!(subsys = "ipam", ip = %ip, "Dropping persisted allocation outside the pod CIDR");
            ipam.allocations.remove(&ip);
        }
        match ipam.allocations.get(&router) {
            Some(a) if a.owner == OWNER_ROUTER => {}
            _ => {
                ipam.allocations.insert(
                    router,
                    Allocation {
                        owner: OWNER_ROUTER.into(),
                        expires: None,
                        expiration_uuid: String::new(),
                    },
                );
            }
        }
        ipam.store.save(&ipam.allocations)?;
        Ok(ipam)
    }

    pub fn cidr(&self) -> String {
        format!("{}/{}", self.network, self.prefix_len)
    }

    fn first_last(&self) -> (u128, u128) {
        let base = self.network.to_bits();
        let host_bits = A::BITS - u32::from(self.prefix_len);
        let last = base | u128::MAX.checked_shr(128 - host_bits).unwrap_or(0);
        if host_bits <= 1 {
            return (base, last);
        }
        (base + 1, last - 1)
    }

    /// Usable addresses: the CIDR without its first and last.
    pub fn capacity(&self) -> u128 {
        let (first, last) = self.first_last();
        last - first + 1
    }

    fn contains(&self, ip: A) -> bool {
        let (first, last) = self.first_last();
        (first..=last).contains(&ip.to_bits())
    }

    /// The lowest free address, or the highest with `from_top`: at most one
    /// more than the allocations are looked at either way.
    fn free_address(&self, from_top: bool) -> Result<A, IpamError> {
        let (first, last) = self.first_last();
        let free = |ip: &u128| !self.allocations.contains_key(&A::from_bits(*ip));
        let found = if from_top {
            (first..=last).rev().find(free)
        } else {
            (first..=last).find(free)
        };
        found
            .map(A::from_bits)
            .ok_or_else(|| IpamError::Full(self.capacity(), self.cidr()))
    }

    /// Allocates the lowest free address for `owner`.
    pub fn allocate_next(
        &mut self,
        owner: &str,
        expiring: bool,
    ) -> Result<(A, Allocation), IpamError> {
        let ip = self.free_address(false)?;
        let alloc = self.insert(ip, owner, expiring)?;
        Ok((ip, alloc))
    }

    /// The address `owner` holds for good, or the highest free one given
    /// to it: how a node-wide owner (the health endpoint) keeps its
    /// address across restarts.
    pub fn reserve(&mut self, owner: &str) -> Result<A, IpamError> {
        let held = self
            .allocations
            .iter()
            .find(|(_, a)| a.owner == owner && a.expires.is_none())
            .map(|(ip, _)| *ip);
        if let Some(ip) = held {
            return Ok(ip);
        }
        // From the top of the range: pods' addresses stay the same
        // whether or not the node has a health endpoint.
        let ip = self.free_address(true)?;
        self.insert(ip, owner, false)?;
        Ok(ip)
    }

    /// Frees every address `owner` holds (a node-wide owner switched off).
    pub fn release_owner(&mut self, owner: &str) -> Result<Vec<A>, IpamError> {
        let held: Vec<A> = self
            .allocations
            .iter()
            .filter(|(_, a)| a.owner == owner)
            .map(|(ip, _)| *ip)
            .collect();
        for ip in &held {
            self.release(*ip)?;
        }
        Ok(held)
    }

    /// Allocates a specific address (`POST /ipam/{ip}`, endpoint restore).
    pub fn allocate_ip(&mut self, ip: A, owner: &str) -> Result<Allocation, IpamError> {
        if !self.contains(ip) {
            return Err(IpamError::OutOfRange(ip.into(), self.cidr()));
        }
        if let Some(a) = self.allocations.get(&ip) {
            if a.owner != owner {
                return Err(IpamError::InUse(ip.into(), a.owner.clone()));
            }
        }
        self.insert(ip, owner, false)
    }

    fn insert(&mut self, ip: A, owner: &str, expiring: bool) -> Result<Allocation, IpamError> {
        let alloc = Allocation {
            owner: owner.to_owned(),
            expires: expiring.then(|| now_secs() + EXPIRATION.as_secs()),
            expiration_uuid: if expiring { uuid_v4() } else { String::new() },
        };
        let previous = self.allocations.insert(ip, alloc.clone());
        if let Err(e) = self.store.save(&self.allocations) {
            match previous {
                Some(p) => self.allocations.insert(ip, p),
                None => self.allocations.remove(&ip),
            };
            return Err(e.into());
        }
        Ok(alloc)
    }

    pub fn release(&mut self, ip: A) -> Result<Allocation, IpamError> {
        let alloc = self
            .allocations
            .remove(&ip)
            .ok_or(IpamError::NotAllocated(ip.into()))?;
        if let Err(e) = self.store.save(&self.allocations) {
            self.allocations.insert(ip, alloc);
            return Err(e.into());
        }
        Ok(alloc)
    }

    /// An endpoint now owns the address: it no longer expires.
    pub fn claim(&mut self, ip: A, owner: &str) -> Result<(), IpamError> {
        match self.allocations.get(&ip) {
            Some(a) if a.expires.is_none() && a.owner == owner => Ok(()),
            Some(a) if a.owner != owner && a.expires.is_none() => {
                Err(IpamError::InUse(ip.into(), a.owner.clone()))
            }
            _ => self.insert(ip, owner, false).map(|_| ()),
        }
    }

    /// Frees allocations whose expiration passed without an endpoint.
    pub fn release_expired(&mut self) -> Result<Vec<A>, IpamError> {
        let now = now_secs();
        let expired: Vec<A> = self
            .allocations
            .iter()
            .filter(|(_, a)| a.expires.is_some_and(|t| t <= now))
            .map(|(ip, _)| *ip)
            .collect();
        for ip in &expired {
            self.release(*ip)?;
        }
        Ok(expired)
    }

    pub fn allocations(&self) -> &BTreeMap<A, Allocation> {
        &self.allocations
    }

    /// This family's part of Cilium's status string: `IPv4: 2/254
    /// allocated from 10.0.0.0/24`.
    pub fn status_line(&self) -> String {
        format!(
            "{}: {}/{} allocated from {}",
            A::FAMILY,
            self.allocations.len(),
            self.capacity(),
            self.cidr()
        )
    }
}

/// A random RFC 4122 version 4 UUID.
fn uuid_v4() -> String {
    let mut b = [0u8; 16];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
        .is_err()
    {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b.copy_from_slice(&t.to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    format!(
        "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
        b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &std::path::Path) -> Ipam {
        Ipam::open(
            Ipv4Addr::new(10, 0, 0, 0),
            29,
            Ipv4Addr::new(10, 0, 0, 1),
            dir.join("ipam.json"),
        )
        .unwrap()
    }

    #[test]
    fn allocations_survive_reopening_and_are_never_handed_out_twice() {
        let dir = tempfile::tempdir().unwrap();
        let mut ipam = open(dir.path());
        assert_eq!(ipam.capacity(), 6);
        let (a, _) = ipam.allocate_next("default/a", false).unwrap();
        assert_eq!(a, Ipv4Addr::new(10, 0, 0, 2));
        drop(ipam);
        let mut ipam = open(dir.path());
        let (b, _) = ipam.allocate_next("default/b", true).unwrap();
        assert_eq!(b, Ipv4Addr::new(10, 0, 0, 3));
        assert_eq!(ipam.status_line(), "IPv4: 3/6 allocated from 10.0.0.0/29");
    }

    #[test]
    fn a_reserved_address_is_kept_across_reopening_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let mut ipam = open(dir.path());
        ipam.allocate_next("default/a", true).unwrap();
        let health = ipam.reserve(OWNER_HEALTH).unwrap();
        assert_eq!(health, Ipv4Addr::new(10, 0, 0, 6));
        drop(ipam);
        let mut ipam = open(dir.path());
        assert_eq!(ipam.reserve(OWNER_HEALTH).unwrap(), health);
        assert_eq!(ipam.release_owner(OWNER_HEALTH).unwrap(), vec![health]);
        assert!(ipam.release_owner(OWNER_HEALTH).unwrap().is_empty());
    }

    #[test]
    fn an_exhausted_pool_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut ipam = open(dir.path());
        for i in 0..5 {
            ipam.allocate_next(&format!("ns/p{i}"), false).unwrap();
        }
        let err = ipam.allocate_next("ns/late", false).unwrap_err();
        assert!(err.to_string().contains("range is full"), "{err}");
        ipam.release(Ipv4Addr::new(10, 0, 0, 4)).unwrap();
        assert_eq!(
            ipam.allocate_next("ns/late", false).unwrap().0,
            Ipv4Addr::new(10, 0, 0, 4)
        );
    }

    #[test]
    fn an_ipv6_pool_counts_the_same_way() {
        let dir = tempfile::tempdir().unwrap();
        let net: Ipv6Addr = "fd00:10:0:1::".parse().unwrap();
        let router: Ipv6Addr = "fd00:10:0:1::1".parse().unwrap();
        let mut ipam = Ipam::open(net, 120, router, dir.path().join("ipam6.json")).unwrap();
        assert_eq!(ipam.capacity(), 254);
        let (a, _) = ipam.allocate_next("default/a", false).unwrap();
        assert_eq!(a, "fd00:10:0:1::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(
            ipam.reserve(OWNER_HEALTH).unwrap(),
            "fd00:10:0:1::fe".parse::<Ipv6Addr>().unwrap()
        );
        drop(ipam);
        let ipam: Ipam<Ipv6Addr> =
            Ipam::open(net, 120, router, dir.path().join("ipam6.json")).unwrap();
        assert_eq!(
            ipam.status_line(),
            "IPv6: 3/254 allocated from fd00:10:0:1::/120"
        );
        let wide = Ipam::open(net, 64, router, dir.path().join("wide.json")).unwrap();
        assert_eq!(wide.capacity(), (1u128 << 64) - 2);
    }

    #[test]
    fn specific_addresses_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let mut ipam = open(dir.path());
        assert!(matches!(
            ipam.allocate_ip(Ipv4Addr::new(10, 0, 1, 2), "x"),
            Err(IpamError::OutOfRange(..))
        ));
        assert!(matches!(
            ipam.allocate_ip(Ipv4Addr::new(10, 0, 0, 1), "x"),
            Err(IpamError::InUse(..))
        ));
        assert!(matches!(
            ipam.release(Ipv4Addr::new(10, 0, 0, 5)),
            Err(IpamError::NotAllocated(..))
        ));
    }
}
