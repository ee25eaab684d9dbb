//! The service load-balancing maps: services (frontend and backend slots),
//! backends and reverse NAT, with Cilium 1.16's layouts.

use crate::{assert_layout, Be16, Be32, Plain, V6Addr};
use std::net::{Ipv4Addr, Ipv6Addr};

pub const LB_LOOKUP_SCOPE_EXT: u8 = 0;
pub const LB_LOOKUP_SCOPE_INT: u8 = 1;

pub const SVC_FLAG_EXTERNAL_IP: u8 = 1 << 0;
pub const SVC_FLAG_NODEPORT: u8 = 1 << 1;
pub const SVC_FLAG_EXT_LOCAL_SCOPE: u8 = 1 << 2;
pub const SVC_FLAG_HOSTPORT: u8 = 1 << 3;
pub const SVC_FLAG_AFFINITY: u8 = 1 << 4;
pub const SVC_FLAG_LOADBALANCER: u8 = 1 << 5;
pub const SVC_FLAG_ROUTABLE: u8 = 1 << 6;
pub const SVC_FLAG_SOURCE_RANGE: u8 = 1 << 7;

// flags2
pub const SVC_FLAG_LOCALREDIRECT: u8 = 1 << 0;
/// A HostPort given a loopback hostIP: its 0.0.0.0 frontend answers only
/// the node's own connections to loopback.
pub const SVC_FLAG_LOOPBACK: u8 = 1 << 3;
/// External clients get the external scope's backends, the cluster's own
/// the internal scope's.
pub const SVC_FLAG_TWO_SCOPES: u8 = 1 << 5;

pub const BE_STATE_ACTIVE: u8 = 0;
pub const BE_STATE_TERMINATING: u8 = 1;
pub const BE_STATE_QUARANTINED: u8 = 2;
pub const BE_STATE_MAINTENANCE: u8 = 3;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lb4Key {
    pub address: Be32,
    pub dport: Be16,
    pub backend_slot: u16,
    pub proto: u8,
    pub scope: u8,
    pub pad: [u8; 2],
}
assert_layout!(
    Lb4Key,
    size = 12,
    address = 0,
    dport = 4,
    backend_slot = 6,
    proto = 8,
    scope = 9
);
unsafe impl Plain for Lb4Key {}

/// `lb4_key.proto` of a frontend for every protocol.
pub const PROTO_ANY: u8 = 0;

impl Lb4Key {
    /// `proto`: the frontend's L4 protocol (`PROTO_ANY` for all).
    pub fn new(vip: Ipv4Addr, port: u16, proto: u8, slot: u16, scope: u8) -> Self {
        Self {
            address: vip.into(),
            dport: Be16::new(port),
            backend_slot: slot,
            proto,
            scope,
            ..Default::default()
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lb4Service {
    /// Backend ID of a slot entry; affinity timeout of the service entry.
    pub backend_id: u32,
    /// Service entry: number of active backend slots.
    pub count: u16,
    pub rev_nat_index: Be16,
    pub flags: u8,
    pub flags2: u8,
    pub pad: [u8; 2],
}
assert_layout!(
    Lb4Service,
    size = 12,
    backend_id = 0,
    count = 4,
    rev_nat_index = 6,
    flags = 8,
    flags2 = 9
);
unsafe impl Plain for Lb4Service {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lb4Backend {
    pub address: Be32,
    pub port: Be16,
    pub proto: u8,
    /// `BE_STATE_*`.
    pub flags: u8,
    pub cluster_id: u16,
    pub zone: u8,
    pub pad: u8,
}
assert_layout!(
    Lb4Backend,
    size = 12,
    address = 0,
    port = 4,
    proto = 6,
    flags = 7,
    cluster_id = 8,
    zone = 10
);
unsafe impl Plain for Lb4Backend {}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lb4ReverseNat {
    pub address: Be32,
    pub port: Be16,
}
assert_layout!(Lb4ReverseNat, size = 6, address = 0, port = 4);
unsafe impl Plain for Lb4ReverseNat {}

/// `cilium_lb6_services_v2` key: `Lb4Key` with a 16-byte address.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lb6Key {
    pub address: V6Addr,
    pub dport: Be16,
    pub backend_slot: u16,
    pub proto: u8,
    pub scope: u8,
    pub pad: [u8; 2],
}
assert_layout!(
    Lb6Key,
    size = 24,
    address = 0,
    dport = 16,
    backend_slot = 18,
    proto = 20,
    scope = 21
);
unsafe impl Plain for Lb6Key {}

impl Lb6Key {
    /// As [`Lb4Key::new`].
    pub fn new(vip: Ipv6Addr, port: u16, proto: u8, slot: u16, scope: u8) -> Self {
        Self {
            address: vip.into(),
            dport: Be16::new(port),
            backend_slot: slot,
            proto,
            scope,
            ..Default::default()
        }
    }
}

/// `cilium_lb6_services_v2` value: 1.16 gives it a struct of its own with
/// `lb4_service`'s very layout.
pub type Lb6Service = Lb4Service;

/// `cilium_lb6_backends_v3` value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lb6Backend {
    pub address: V6Addr,
    pub port: Be16,
    pub proto: u8,
    /// `BE_STATE_*`.
    pub flags: u8,
    pub cluster_id: u16,
    pub zone: u8,
    pub pad: u8,
}
assert_layout!(
    Lb6Backend,
    size = 24,
    address = 0,
    port = 16,
    proto = 18,
    flags = 19,
    cluster_id = 20,
    zone = 22
);
unsafe impl Plain for Lb6Backend {}

#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Lb6ReverseNat {
    pub address: V6Addr,
    pub port: Be16,
}
assert_layout!(Lb6ReverseNat, size = 18, address = 0, port = 16);
unsafe impl Plain for Lb6ReverseNat {}

/// `cilium_lb6_affinity` key (value: `lb_affinity_val`).
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Lb6AffinityKey {
    /// The client's IPv6 address, or a netns cookie in the first 8 bytes.
    pub client_id: [u8; 16],
    pub rev_nat_id: Be16,
    /// Bit 0: `client_id` is a netns cookie.
    pub netns_cookie: u8,
    pub pad1: u8,
    pub pad2: u32,
}
assert_layout!(
    Lb6AffinityKey,
    size = 24,
    client_id = 0,
    rev_nat_id = 16,
    netns_cookie = 18
);
unsafe impl Plain for Lb6AffinityKey {}

pub const NAT_DIR_EGRESS: u8 = 0;
pub const NAT_DIR_INGRESS: u8 = 1;

/// `cilium_snat_v4_external` value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv4NatEntry {
    pub created: u64,
    pub needs_ct: u64,
    /// Seconds (the datapath's clock) of the last packet: NAT GC goes by
    /// it (Cilium: padding).
    pub last_used: u64,
    /// NodePort: the source address the translated packet gets; 0 in
    /// entries written before it existed (Cilium: padding).
    pub from_addr: Be32,
    pub pad2: u32,
    /// Egress: the new source; ingress: the new destination.
    pub to_addr: Be32,
    pub to_port: Be16,
    /// NodePort: the other side's port (padding in Cilium).
    pub rev_port: Be16,
}
assert_layout!(
    Ipv4NatEntry,
    size = 40,
    from_addr = 24,
    to_addr = 32,
    to_port = 36,
    rev_port = 38
);
unsafe impl Plain for Ipv4NatEntry {}

/// `cilium_snat_v6_external` value: 1.16's 56 bytes, its padding used as
/// in [`Ipv4NatEntry`] (a NodePort's source address has no room here).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv6NatEntry {
    pub created: u64,
    pub needs_ct: u64,
    pub last_used: u64,
    /// `NAT6_F_*` (Cilium: padding).
    pub flags: u64,
    pub to_addr: V6Addr,
    pub to_port: Be16,
    pub rev_port: Be16,
    pub pad3: u32,
}
assert_layout!(
    Ipv6NatEntry,
    size = 56,
    last_used = 16,
    to_addr = 32,
    to_port = 48,
    rev_port = 50
);
unsafe impl Plain for Ipv6NatEntry {}

/// [`Ipv6NatEntry::flags`]: a NodePort's translation, not masquerading's.
pub const NAT6_F_NODEPORT: u64 = 1 << 0;
/// With [`NAT6_F_NODEPORT`]: the backend is this node's and sees the
/// client's own address.
pub const NAT6_F_LOCAL: u64 = 1 << 1;

/// `cilium_lb_affinity_match` key: presence means the backend still
/// belongs to the service (value: u8, unused).
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LbAffinityMatch {
    pub backend_id: u32,
    pub rev_nat_id: Be16,
    pub pad: u16,
}
assert_layout!(LbAffinityMatch, size = 8, backend_id = 0, rev_nat_id = 4);
unsafe impl Plain for LbAffinityMatch {}

/// `cilium_lb4_reverse_sk` key: a socket (by cookie) and the backend
/// socket LB sent it to.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ipv4RevnatTuple {
    pub cookie: u64,
    pub address: Be32,
    pub port: Be16,
    pub pad: u16,
}
assert_layout!(
    Ipv4RevnatTuple,
    size = 16,
    cookie = 0,
    address = 8,
    port = 12
);
unsafe impl Plain for Ipv4RevnatTuple {}

/// `cilium_lb4_reverse_sk` value: the frontend the socket asked for.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv4RevnatEntry {
    pub address: Be32,
    pub port: Be16,
    pub rev_nat_index: Be16,
}
assert_layout!(
    Ipv4RevnatEntry,
    size = 8,
    address = 0,
    port = 4,
    rev_nat_index = 6
);
unsafe impl Plain for Ipv4RevnatEntry {}

/// `cilium_lb6_reverse_sk` key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ipv6RevnatTuple {
    pub cookie: u64,
    pub address: V6Addr,
    pub port: Be16,
    pub pad: u16,
}
assert_layout!(
    Ipv6RevnatTuple,
    size = 32,
    cookie = 0,
    address = 8,
    port = 24
);
unsafe impl Plain for Ipv6RevnatTuple {}

/// `cilium_lb6_reverse_sk` value.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ipv6RevnatEntry {
    pub address: V6Addr,
    pub port: Be16,
    pub rev_nat_index: Be16,
}
assert_layout!(
    Ipv6RevnatEntry,
    size = 20,
    address = 0,
    port = 16,
    rev_nat_index = 18
);
unsafe impl Plain for Ipv6RevnatEntry {}

/// Slots of a Maglev table (`LB_MAGLEV_LUT_SIZE`, compiled into the datapath).
pub const LB_MAGLEV_LUT_SIZE: usize = 16381;

/// `cilium_lb4_maglev` value: a service's Maglev table of backend IDs.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaglevLut {
    pub backend_ids: [u32; LB_MAGLEV_LUT_SIZE],
}
assert_layout!(MaglevLut, size = 65524, backend_ids = 0);
unsafe impl Plain for MaglevLut {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_frontend_key_holds_the_address_and_port_in_network_order() {
        let vip: Ipv6Addr = "fd00:10:96::a".parse().unwrap();
        let key = Lb6Key::new(vip, 80, 6, 2, LB_LOOKUP_SCOPE_INT);
        let bytes = key.as_bytes();
        assert_eq!(&bytes[..16], &vip.octets());
        assert_eq!(&bytes[16..18], &[0, 80]);
        assert_eq!(&bytes[18..22], &[2, 0, 6, LB_LOOKUP_SCOPE_INT]);
        assert_eq!(Lb6Key::from_bytes(bytes), Some(key));
        assert_eq!({ key.address }.ip(), vip);
    }
}
