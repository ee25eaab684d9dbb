//! `cilium_ipv4_frag_datagrams` (and our IPv6 twin,
//! `cilium_rs_ipv6_frag_datagrams`): the ports of a fragmented datagram,
//! noted from its first fragment for the fragments after it.

use crate::{assert_layout, Be16, Be32, Plain, V6Addr};

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ipv4FragId {
    pub daddr: Be32,
    pub saddr: Be32,
    /// The IP header's identification field.
    pub id: Be16,
    pub proto: u8,
    pub pad: u8,
}
assert_layout!(
    Ipv4FragId,
    size = 12,
    daddr = 0,
    saddr = 4,
    id = 8,
    proto = 10
);
unsafe impl Plain for Ipv4FragId {}

/// The datagram's source and destination ports (for ICMP echo, the ID),
/// as its first fragment carried them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv4FragL4Ports {
    pub sport: Be16,
    pub dport: Be16,
}
assert_layout!(Ipv4FragL4Ports, size = 4, sport = 0, dport = 2);
unsafe impl Plain for Ipv4FragL4Ports {}

/// An IPv6 datagram, by its fragment header's identification; its value
/// is an [`Ipv4FragL4Ports`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ipv6FragId {
    pub daddr: V6Addr,
    pub saddr: V6Addr,
    pub id: Be32,
    /// The datagram's L4 protocol.
    pub proto: u8,
    pub pad: [u8; 3],
}
assert_layout!(
    Ipv6FragId,
    size = 40,
    daddr = 0,
    saddr = 16,
    id = 32,
    proto = 36
);
unsafe impl Plain for Ipv6FragId {}
