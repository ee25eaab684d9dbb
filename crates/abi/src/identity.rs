//! Reserved numeric identities.

pub const UNKNOWN: u32 = 0;
pub const HOST: u32 = 1;
pub const WORLD: u32 = 2;
pub const UNMANAGED: u32 = 3;
pub const HEALTH: u32 = 4;
pub const INIT: u32 = 5;
pub const REMOTE_NODE: u32 = 6;
pub const KUBE_APISERVER: u32 = 7;
pub const INGRESS: u32 = 8;
pub const WORLD_IPV4: u32 = 9;
pub const WORLD_IPV6: u32 = 10;

/// The `reserved:` label of a reserved identity.
pub fn reserved_name(id: u32) -> Option<&'static str> {
    Some(match id {
        HOST => "host",
        WORLD => "world",
        UNMANAGED => "unmanaged",
        HEALTH => "health",
        INIT => "init",
        REMOTE_NODE => "remote-node",
        KUBE_APISERVER => "kube-apiserver",
        INGRESS => "ingress",
        WORLD_IPV4 => "world-ipv4",
        WORLD_IPV6 => "world-ipv6",
        _ => return None,
    })
}
