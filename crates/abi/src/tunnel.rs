//! `cilium_tunnel_map`: remote pod CIDR to the node that hosts it.

use crate::{assert_layout, Plain};

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TunnelKey {
    pub ip: [u8; 16],
    pub family: u8,
    pub pad: u8,
    pub cluster_id: u16,
}
assert_layout!(TunnelKey, size = 20, ip = 0, family = 16, cluster_id = 18);
unsafe impl Plain for TunnelKey {}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TunnelValue {
    pub ip: [u8; 16],
    pub family: u8,
    pub key: u8,
    pub pad: u16,
}
assert_layout!(TunnelValue, size = 20, ip = 0, family = 16, key = 17);
unsafe impl Plain for TunnelValue {}

fn v4_bytes(ip: std::net::Ipv4Addr) -> [u8; 16] {
    let mut bytes = [0u8; 16];
    bytes[..4].copy_from_slice(&ip.octets());
    bytes
}

impl TunnelKey {
    /// Key of a remote node's IPv4 pod CIDR (its network address).
    pub fn v4(net: std::net::Ipv4Addr) -> Self {
        Self {
            ip: v4_bytes(net),
            family: crate::endpoint::ENDPOINT_KEY_IPV4,
            ..Default::default()
        }
    }
}

impl TunnelValue {
    /// The underlay address of the node that hosts the CIDR.
    pub fn v4(node: std::net::Ipv4Addr) -> Self {
        Self {
            ip: v4_bytes(node),
            family: crate::endpoint::ENDPOINT_KEY_IPV4,
            ..Default::default()
        }
    }
}
