//! Direct routes to other nodes' pods (native routing with
//! auto-direct-node-routes): `<pod CIDR> via <node IP> dev <device>`, only
//! where the node address is on a subnet a local device is directly
//! connected to. A node behind a router cannot be a next hop on our L2
//! segment, so Cilium refuses such a route instead of installing one the
//! kernel would reject or misroute. IPv6 pod CIDRs go via the node's IPv6
//! address the same way.

use crate::link::{Netlink, Route};
use crate::Error;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The device whose connected subnet holds `ip`, from the `(ifindex,
/// address, prefix)` triples of the node's addresses of `ip`'s family; the
/// longest prefix wins, as the kernel's connected routes would. The node's
/// own address is not a next hop.
pub fn on_link_device<A: Into<IpAddr> + Copy>(addrs: &[(u32, A, u8)], ip: A) -> Option<u32> {
    let ip = ip.into();
    addrs
        .iter()
        .filter(|(_, a, len)| {
            let a = (*a).into();
            a != ip && *len > 0 && same_subnet(a, ip, *len)
        })
        .max_by_key(|(_, _, len)| *len)
        .map(|(index, _, _)| *index)
}

fn same_subnet(a: IpAddr, b: IpAddr, len: u8) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) if len <= 32 => {
            let mask = u32::MAX << (32 - u32::from(len));
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) if len <= 128 => {
            let mask = u128::MAX << (128 - u32::from(len));
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
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

/// [`install`] for an IPv6 pod CIDR via the node's IPv6 address; the
/// device it leaves by, or `None` when no device is on `node_ip`'s subnet.
pub async fn install6(
    nl: &Netlink,
    cidr: (Ipv6Addr, u8),
    node_ip: Ipv6Addr,
) -> Result<Option<u32>, Error> {
    let addrs = nl.ipv6_addrs(None).await?;
    let Some(index) = on_link_device(&addrs, node_ip) else {
        return Ok(None);
    };
    nl.replace_route6(index, cidr, Some(node_ip), None, None)
        .await?;
    Ok(Some(index))
}

/// [`withdraw`] for an IPv6 pod CIDR, on whichever device it is.
pub async fn withdraw6(nl: &Netlink, cidr: (Ipv6Addr, u8)) -> Result<(), Error> {
    nl.delete_route6(0, cidr).await
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

    #[test]
    fn ipv6_nodes_are_matched_on_their_connected_prefix() {
        let ip6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        let addrs = [
            (1, ip6("::1"), 128),
            (2, ip6("fd00:198:18::11"), 64),
            (2, ip6("fe80::1"), 64),
        ];
        assert_eq!(on_link_device(&addrs, ip6("fd00:198:18::12")), Some(2));
        assert_eq!(on_link_device(&addrs, ip6("fd00:198:19::12")), None);
        assert_eq!(on_link_device(&addrs, ip6("fd00:198:18::11")), None);
    }
}
