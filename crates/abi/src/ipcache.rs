//! `cilium_ipcache`: IP prefix to identity and tunnel endpoint (LPM trie).

use crate::{assert_layout, Be32, Plain};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Bits of the key before the address (cluster_id, pad1, family); LPM
/// prefix lengths count them, so an IPv4 /32 is stored as 64.
pub const IPCACHE_STATIC_PREFIX_BITS: u32 = 32;
pub const IPCACHE_F_SKIP_TUNNEL: u8 = 1;

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IpcacheKey {
    pub prefixlen: u32,
    pub cluster_id: u16,
    pub pad1: u8,
    pub family: u8,
    pub ip: [u8; 16],
}
assert_layout!(
    IpcacheKey,
    size = 24,
    prefixlen = 0,
    cluster_id = 4,
    family = 7,
    ip = 8
);
unsafe impl Plain for IpcacheKey {}

/// The prefix length of a single address: /32 or /128.
pub fn host_prefix_len(ip: std::net::IpAddr) -> u8 {
    if ip.is_ipv4() {
        32
    } else {
        128
    }
}

impl IpcacheKey {
    /// Key for an IPv4 prefix; host bits beyond `len` are cleared.
    pub fn v4(ip: Ipv4Addr, len: u8) -> Self {
        let len = len.min(32);
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        let net = u32::from(ip) & mask;
        let mut bytes = [0u8; 16];
        bytes[..4].copy_from_slice(&net.to_be_bytes());
        Self {
            prefixlen: IPCACHE_STATIC_PREFIX_BITS + u32::from(len),
            cluster_id: 0,
            pad1: 0,
            family: crate::endpoint::ENDPOINT_KEY_IPV4,
            ip: bytes,
        }
    }

    /// Key for a prefix of either family.
    pub fn new(ip: std::net::IpAddr, len: u8) -> Self {
        match ip {
            std::net::IpAddr::V4(ip) => Self::v4(ip, len),
            std::net::IpAddr::V6(ip) => Self::v6(ip, len),
        }
    }

    /// Key for an IPv6 prefix; host bits beyond `len` are cleared.
    pub fn v6(ip: Ipv6Addr, len: u8) -> Self {
        let len = len.min(128);
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        Self {
            prefixlen: IPCACHE_STATIC_PREFIX_BITS + u32::from(len),
            cluster_id: 0,
            pad1: 0,
            family: crate::endpoint::ENDPOINT_KEY_IPV6,
            ip: (u128::from(ip) & mask).to_be_bytes(),
        }
    }

    /// The IPv6 prefix this key stands for, if it is an IPv6 key.
    pub fn ipv6_prefix(&self) -> Option<(Ipv6Addr, u8)> {
        if self.family != crate::endpoint::ENDPOINT_KEY_IPV6 {
            return None;
        }
        let plen = self.prefixlen;
        let len = plen.checked_sub(IPCACHE_STATIC_PREFIX_BITS)?;
        Some((Ipv6Addr::from(self.ip), len.min(128) as u8))
    }

    /// The prefix this key stands for, of either family.
    pub fn prefix(&self) -> Option<(std::net::IpAddr, u8)> {
        self.ipv4_prefix()
            .map(|(ip, len)| (ip.into(), len))
            .or_else(|| self.ipv6_prefix().map(|(ip, len)| (ip.into(), len)))
    }

    /// The IPv4 prefix this key stands for, if it is an IPv4 key.
    pub fn ipv4_prefix(&self) -> Option<(Ipv4Addr, u8)> {
        if self.family != crate::endpoint::ENDPOINT_KEY_IPV4 {
            return None;
        }
        let plen = self.prefixlen;
        let len = plen.checked_sub(IPCACHE_STATIC_PREFIX_BITS)?;
        Some((
            Ipv4Addr::new(self.ip[0], self.ip[1], self.ip[2], self.ip[3]),
            len.min(32) as u8,
        ))
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RemoteEndpointInfo {
    pub sec_identity: u32,
    pub tunnel_endpoint: Be32,
    pub pad: u16,
    pub key: u8,
    pub flags: u8,
}
assert_layout!(
    RemoteEndpointInfo,
    size = 12,
    sec_identity = 0,
    tunnel_endpoint = 4,
    key = 10,
    flags = 11
);
unsafe impl Plain for RemoteEndpointInfo {}

/// Cilium's rendering, as `bpf ipcache list` and `map get` print it.
impl std::fmt::Display for RemoteEndpointInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let flags = if self.flags & IPCACHE_F_SKIP_TUNNEL != 0 {
            "skiptunnel"
        } else {
            "<none>"
        };
        let (id, key, tunnel) = (self.sec_identity, self.key, self.tunnel_endpoint);
        write!(
            f,
            "identity={id} encryptkey={key} tunnelendpoint={}, flags={flags}",
            tunnel.ip()
        )
    }
}
