//! `cilium_node_map` and `cilium_node_map_v2`: another node's IP to the ID
//! this agent gave that node.

use crate::{assert_layout, Plain};
use std::net::{IpAddr, Ipv4Addr};

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeKey {
    pub pad1: u16,
    pub pad2: u8,
    pub family: u8,
    /// IPv4 in the first four bytes, or IPv6.
    pub ip: [u8; 16],
}
assert_layout!(NodeKey, size = 20, family = 3, ip = 4);
unsafe impl Plain for NodeKey {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeValueV2 {
    pub id: u16,
    pub spi: u8,
    pub pad: u8,
}
assert_layout!(NodeValueV2, size = 4, id = 0, spi = 2);
unsafe impl Plain for NodeValueV2 {}

impl NodeKey {
    pub fn new(ip: IpAddr) -> Self {
        let mut key = Self::default();
        match ip {
            IpAddr::V4(v4) => {
                key.family = crate::endpoint::ENDPOINT_KEY_IPV4;
                key.ip[..4].copy_from_slice(&v4.octets());
            }
            IpAddr::V6(v6) => {
                key.family = crate::endpoint::ENDPOINT_KEY_IPV6;
                key.ip = v6.octets();
            }
        }
        key
    }

    /// The address the key holds; None for a family no node address has.
    pub fn addr(&self) -> Option<IpAddr> {
        let ip = self.ip;
        match self.family {
            crate::endpoint::ENDPOINT_KEY_IPV4 => {
                Some(Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3]).into())
            }
            crate::endpoint::ENDPOINT_KEY_IPV6 => Some(std::net::Ipv6Addr::from(ip).into()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_both_families() {
        for ip in ["198.18.0.11", "fd00::b"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(NodeKey::new(ip).addr(), Some(ip));
        }
        assert_eq!(NodeKey::default().addr(), None);
    }
}
