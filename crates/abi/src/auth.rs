//! `cilium_auth_map`: which identity pairs completed mutual authentication,
//! and until when.

use crate::{assert_layout, Plain};

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AuthKey {
    pub local_identity: u32,
    pub remote_identity: u32,
    pub remote_node_id: u16,
    pub auth_type: u8,
    pub pad: u8,
}
assert_layout!(
    AuthKey,
    size = 12,
    remote_identity = 4,
    remote_node_id = 8,
    auth_type = 10
);
unsafe impl Plain for AuthKey {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AuthInfo {
    /// Wall-clock time in utime units (nanoseconds >> 9, as the
    /// datapath's clock after `runtime_config`'s offset).
    pub expiration: u64,
}
assert_layout!(AuthInfo, size = 8, expiration = 0);
unsafe impl Plain for AuthInfo {}
