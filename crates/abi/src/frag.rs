//! `cilium_ipv4_frag_datagrams`: the ports of a fragmented datagram, noted
//! from its first fragment for the fragments after it.

use crate::{assert_layout, Be16, Be32, Plain};

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
