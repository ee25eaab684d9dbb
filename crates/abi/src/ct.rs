//! `cilium_ct4_global` / `cilium_ct_any4_global` and their IPv6 twins
//! `cilium_ct6_global` / `cilium_ct_any6_global`: connection tracking.
//!
//! Cilium's tuple names are skewed: addresses are named for the reply
//! direction and ports for the original one. The layout here keeps the C
//! names so stored keys stay byte-identical.

use crate::{assert_layout, Be16, Be32, Plain, V6Addr};

pub const TUPLE_F_OUT: u8 = 0;
pub const TUPLE_F_IN: u8 = 1;
pub const TUPLE_F_RELATED: u8 = 2;
pub const TUPLE_F_SERVICE: u8 = 4;

/// Seconds a flow lives without packets (CT_CONNECTION_LIFETIME_*):
/// Cilium's agent defaults, bpf-ct-timeout-regular-tcp and
/// -service-tcp (8000 s), -regular-any and -service-any (60 s).
pub const CT_CONNECTION_LIFETIME_TCP: u32 = 8000;
pub const CT_CONNECTION_LIFETIME_NONTCP: u32 = 60;

pub const CT_F_RX_CLOSING: u16 = 1 << 0;
pub const CT_F_TX_CLOSING: u16 = 1 << 1;
pub const CT_F_LB_LOOPBACK: u16 = 1 << 3;
pub const CT_F_SEEN_NON_SYN: u16 = 1 << 4;
pub const CT_F_NODE_PORT: u16 = 1 << 5;
pub const CT_F_PROXY_REDIRECT: u16 = 1 << 6;
pub const CT_F_DSR_INTERNAL: u16 = 1 << 7;
pub const CT_F_FROM_L7LB: u16 = 1 << 8;
pub const CT_F_FROM_TUNNEL: u16 = 1 << 10;

/// skb->mark bits for the host stack (MARK_MAGIC_MASK, _SNAT_DONE): a
/// packet carrying SNAT_DONE is not masqueraded.
pub const MARK_MAGIC_MASK: u32 = 0x0F00;
pub const MARK_MAGIC_SNAT_DONE: u32 = 0x0300;
/// An encapsulated packet, which the native device's egress leaves as is.
pub const MARK_MAGIC_OVERLAY: u32 = 0x0400;

/// Names Cilium's CLI prints for the set flag bits, in bit order.
pub const CT_FLAG_NAMES: [(u16, &str); 9] = [
    (CT_F_RX_CLOSING, "RxClosing"),
    (CT_F_TX_CLOSING, "TxClosing"),
    (CT_F_LB_LOOPBACK, "LBLoopback"),
    (CT_F_SEEN_NON_SYN, "SeenNonSyn"),
    (CT_F_NODE_PORT, "NodePort"),
    (CT_F_PROXY_REDIRECT, "ProxyRedirect"),
    (CT_F_DSR_INTERNAL, "DSR"),
    (CT_F_FROM_L7LB, "FromL7LB"),
    (CT_F_FROM_TUNNEL, "FromTunnel"),
];

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ipv4CtTuple {
    pub daddr: Be32,
    pub saddr: Be32,
    pub dport: Be16,
    pub sport: Be16,
    pub nexthdr: u8,
    pub flags: u8,
}
assert_layout!(
    Ipv4CtTuple,
    size = 14,
    daddr = 0,
    saddr = 4,
    dport = 8,
    sport = 10,
    nexthdr = 12,
    flags = 13
);
unsafe impl Plain for Ipv4CtTuple {}

/// `cilium_ct6_global` / `cilium_ct_any6_global` key: the IPv4 tuple's
/// fields and conventions with 16-byte addresses.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ipv6CtTuple {
    pub daddr: V6Addr,
    pub saddr: V6Addr,
    pub dport: Be16,
    pub sport: Be16,
    pub nexthdr: u8,
    pub flags: u8,
}
assert_layout!(
    Ipv6CtTuple,
    size = 38,
    daddr = 0,
    saddr = 16,
    dport = 32,
    sport = 34,
    nexthdr = 36,
    flags = 37
);
unsafe impl Plain for Ipv6CtTuple {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtEntry {
    pub reserved0: u64,
    pub backend_id: u64,
    pub packets: u64,
    pub bytes: u64,
    pub lifetime: u32,
    pub flags: u16,
    pub rev_nat_index: Be16,
    pub ifindex: u16,
    pub tx_flags_seen: u8,
    pub rx_flags_seen: u8,
    pub src_sec_id: u32,
    pub last_tx_report: u32,
    pub last_rx_report: u32,
}
assert_layout!(
    CtEntry,
    size = 56,
    backend_id = 8,
    packets = 16,
    bytes = 24,
    lifetime = 32,
    flags = 36,
    rev_nat_index = 38,
    ifindex = 40,
    tx_flags_seen = 42,
    rx_flags_seen = 43,
    src_sec_id = 44,
    last_tx_report = 48,
    last_rx_report = 52
);
unsafe impl Plain for CtEntry {}
