//! `cilium_policy_<EPID>`: per-endpoint policy (LPM trie).

use crate::{assert_layout, Be16, Plain};

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PolicyKey {
    pub prefixlen: u32,
    pub sec_label: u32,
    pub egress: u8,
    pub protocol: u8,
    pub dport: Be16,
}
assert_layout!(
    PolicyKey,
    size = 12,
    prefixlen = 0,
    sec_label = 4,
    egress = 8,
    protocol = 9,
    dport = 10
);
unsafe impl Plain for PolicyKey {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicyEntry {
    pub proxy_port: Be16,
    pub flags: u8,
    pub auth_type: u8,
    pub pad1: u16,
    pub pad2: u16,
    pub packets: u64,
    pub bytes: u64,
}
assert_layout!(
    PolicyEntry,
    size = 24,
    proxy_port = 0,
    flags = 2,
    auth_type = 3,
    packets = 8,
    bytes = 16
);
unsafe impl Plain for PolicyEntry {}

/// `policy_entry.flags`.
pub const POLICY_FLAG_DENY: u8 = 1 << 0;
pub const POLICY_FLAG_WILDCARD_PROTOCOL: u8 = 1 << 1;
pub const POLICY_FLAG_WILDCARD_DPORT: u8 = 1 << 2;
