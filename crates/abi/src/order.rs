//! Byte order is part of the type: a network-order field cannot be written
//! in host order by accident.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A u16 stored in network byte order.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Be16(u16);

impl Be16 {
    pub const fn new(host: u16) -> Self {
        Self(host.to_be())
    }
    pub const fn get(self) -> u16 {
        u16::from_be(self.0)
    }
}

impl fmt::Debug for Be16 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.get())
    }
}

/// A u32 stored in network byte order; used for IPv4 addresses.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Be32(u32);

impl Be32 {
    pub const fn new(host: u32) -> Self {
        Self(host.to_be())
    }
    pub const fn get(self) -> u32 {
        u32::from_be(self.0)
    }
    pub fn ip(self) -> Ipv4Addr {
        Ipv4Addr::from(self.get())
    }
}

impl From<Ipv4Addr> for Be32 {
    fn from(ip: Ipv4Addr) -> Self {
        Self::new(u32::from(ip))
    }
}

impl fmt::Debug for Be32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.ip())
    }
}

/// An IPv6 address as the maps hold it: 16 bytes in network order, byte
/// aligned (1.16's packed `union v6addr`).
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct V6Addr(pub [u8; 16]);

impl V6Addr {
    pub fn ip(self) -> Ipv6Addr {
        Ipv6Addr::from(self.0)
    }
}

impl From<Ipv6Addr> for V6Addr {
    fn from(ip: Ipv6Addr) -> Self {
        Self(ip.octets())
    }
}

impl fmt::Debug for V6Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.ip())
    }
}

unsafe impl crate::Plain for V6Addr {}
unsafe impl crate::Plain for Be16 {}
unsafe impl crate::Plain for Be32 {}
