//! Direct routes to other nodes' pods (native routing with
//! auto-direct-node-routes): `<pod CIDR> via <node IP> dev <device>`, only
//! where the node address is on a subnet a local device is directly
//! connected to. A node behind a router cannot be a next hop on our L2
//! segment, so Cilium refuses such a route instead of installing one the
//! kernel would reject or misroute.

use crate::link::{Netlink, Route};
use crate::Error;
use std::net::Ipv4Addr;

/// The device whose connected subnet holds `ip`, from the `(ifindex,
/// address, prefix)` triples of the node's addresses; the longest prefix
/// wins, as the kernel's connected routes would. The node's own address is
/// not a next hop.
pub fn on_link_device(addrs: &[(u32, Ipv4Addr, u8)], ip: Ipv4Addr) -> Option<u32> {
    addrs
        .iter()
        .filter(|(_, a, len)| *a != ip && *len > 0 && *len <= 32 && same_subnet(*a, ip, *len))
        .max_by_key(|(_, _, len)| *len)
        .map(|(index, _, _)| *index)
}

fn same_subnet(a: Ipv4Addr, b: Ipv4Addr, len: u8) -> bool {
    let mask = u32::MAX << (32 - u32::from(len));
    u32::from(a) & mask == u32::from(b) & mask
}

/// Installs (replaces, so a restarted agent leaves one route) the route to
/// `cidr` via `node_ip`. `Ok(None)` when no device is directly connected to
/// `node_ip`: the caller says so and skips it.
pub async fn install(
    nl: &Netlink,
    cidr: (Ipv4Addr, u8),
    node_ip: Ipv4Addr,
) -> Result<Option<Route>, Error> {
    let addrs = nl.ipv4_addrs(None).await?;
    let Some(index) = on_link_device(&addrs, node_ip) else {
        return Ok(None);
    };
    let route = Route::new(index, cidr.0, cidr.1).via(node_ip);
    nl.replace_route(&route).await?;
    Ok(Some(route))
}

/// Removes the route to `cidr` via `node_ip` on whichever device it is
/// (ifindex 0 matches any); one never installed is no error.
pub async fn withdraw(nl: &Netlink, cidr: (Ipv4Addr, u8), node_ip: Ipv4Addr) -> Result<(), Error> {
    nl.delete_route(&Route::new(0, cidr.0, cidr.1).via(node_ip))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn a_node_on_a_connected_subnet_is_reached_through_that_device() {
        let addrs = [
            (1, ip("127.0.0.1"), 8),
            (2, ip("198.18.0.11"), 24),
            (5, ip("10.1.0.1"), 32),
        ];
        assert_eq!(on_link_device(&addrs, ip("198.18.0.12")), Some(2));
        assert_eq!(on_link_device(&addrs, ip("198.18.0.254")), Some(2));
    }

    #[test]
    fn a_node_behind_a_router_or_ourselves_has_no_direct_route() {
        let addrs = [(2, ip("198.18.0.11"), 24), (3, ip("0.0.0.0"), 0)];
        assert_eq!(on_link_device(&addrs, ip("198.19.0.12")), None);
        assert_eq!(on_link_device(&addrs, ip("198.18.0.11")), None);
    }

    #[test]
    fn the_longest_connected_prefix_wins() {
        let addrs = [(2, ip("198.18.0.11"), 16), (3, ip("198.18.0.129"), 25)];
        assert_eq!(on_link_device(&addrs, ip("198.18.0.200")), Some(3));
        assert_eq!(on_link_device(&addrs, ip("198.18.0.20")), Some(2));
    }
}
