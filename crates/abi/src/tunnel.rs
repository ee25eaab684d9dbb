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
