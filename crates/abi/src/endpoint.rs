//! `cilium_lxc`: local endpoints and host addresses.

use crate::{assert_layout, Plain};
use std::net::{Ipv4Addr, Ipv6Addr};

pub const ENDPOINT_KEY_IPV4: u8 = 1;
pub const ENDPOINT_KEY_IPV6: u8 = 2;
pub const ENDPOINT_F_HOST: u32 = 1;

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EndpointKey {
    pub ip: [u8; 16],
    pub family: u8,
    pub key: u8,
    pub cluster_id: u16,
}
assert_layout!(
    EndpointKey,
    size = 20,
    ip = 0,
    family = 16,
    key = 17,
    cluster_id = 18
);
unsafe impl Plain for EndpointKey {}

impl EndpointKey {
    pub fn v4(ip: Ipv4Addr) -> Self {
        let mut bytes = [0u8; 16];
        bytes[..4].copy_from_slice(&ip.octets());
        Self {
            ip: bytes,
            family: ENDPOINT_KEY_IPV4,
            key: 0,
            cluster_id: 0,
        }
    }

    /// Key for an address of either family.
    pub fn new(ip: std::net::IpAddr) -> Self {
        match ip {
            std::net::IpAddr::V4(ip) => Self::v4(ip),
            std::net::IpAddr::V6(ip) => Self::v6(ip),
        }
    }

    pub fn v6(ip: Ipv6Addr) -> Self {
        Self {
            ip: ip.octets(),
            family: ENDPOINT_KEY_IPV6,
            key: 0,
            cluster_id: 0,
        }
    }

    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        (self.family == ENDPOINT_KEY_IPV4)
            .then(|| Ipv4Addr::new(self.ip[0], self.ip[1], self.ip[2], self.ip[3]))
    }

    pub fn ipv6(&self) -> Option<Ipv6Addr> {
        (self.family == ENDPOINT_KEY_IPV6).then(|| Ipv6Addr::from(self.ip))
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndpointInfo {
    pub ifindex: u32,
    pub unused: u16,
    pub lxc_id: u16,
    pub flags: u32,
    pub pad0: u32,
    pub mac: [u8; 8],
    pub node_mac: [u8; 8],
    pub sec_id: u32,
    pub pad: [u32; 3],
}
assert_layout!(
    EndpointInfo,
    size = 48,
    ifindex = 0,
    lxc_id = 6,
    flags = 8,
    mac = 16,
    node_mac = 24,
    sec_id = 32
);
unsafe impl Plain for EndpointInfo {}

impl EndpointInfo {
    pub fn host() -> Self {
        Self {
            flags: ENDPOINT_F_HOST,
            ..Default::default()
        }
    }
    /// A pod endpoint behind host-side veth `ifindex`.
    pub fn pod(ifindex: u32, lxc_id: u16, mac: [u8; 6], node_mac: [u8; 6], sec_id: u32) -> Self {
        let mut info = Self {
            ifindex,
            lxc_id,
            sec_id,
            ..Default::default()
        };
        info.mac[..6].copy_from_slice(&mac);
        info.node_mac[..6].copy_from_slice(&node_mac);
        info
    }
    pub fn is_host(&self) -> bool {
        self.flags & ENDPOINT_F_HOST != 0
    }
}

/// Formats the first six bytes of a MAC (a 6-byte address or an 8-byte field).
pub fn format_mac(mac: &[u8]) -> String {
    // built on the stack: every monitor and Hubble event carries two
    let mut text = [b':'; 17];
    for (i, &b) in mac[..6].iter().enumerate() {
        text[3 * i..3 * i + 2].copy_from_slice(&crate::hex::pair(b));
    }
    String::from_utf8(text.to_vec()).expect("hex digits and colons")
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mac_is_six_lowercase_hex_pairs_and_reads_back() {
        let mac = [0x0a, 0xff, 0x00, 0x9c, 0x5e, 0x01];
        assert_eq!(format_mac(&mac), "0a:ff:00:9c:5e:01");
        assert_eq!(parse_mac(&format_mac(&mac)), Some(mac));
    }
}
