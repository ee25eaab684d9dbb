//! The addressing plan. Addresses exist only inside namespaces a lab or a
//! test made: the underlay is in 198.18.0.0/15 and, for dual-stack
//! clusters, the unique-local fd00:198:18::/64 beside it; pod CIDRs are
//! blocks of Cilium's default pool 10.0.0.0/8. Nothing routes out of the
//! machine.

use std::net::{Ipv4Addr, Ipv6Addr};

/// The switch's address on the underlay, where etcd listens.
pub const UNDERLAY_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const UNDERLAY_PREFIX: u8 = 24;
/// The underlay's bridge, in the switch's namespace.
pub const BRIDGE: &str = "br0";
pub const ETCD_PORT: u16 = 2379;
/// A host on the underlay outside the cluster (no node, no pods), which
/// pods reach by address as they would a machine on the Internet.
pub const OUTSIDE_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 254);
/// Cluster size limit: node addresses are 198.18.0.11 to 198.18.0.210.
pub const MAX_NODES: usize = 200;

/// `node3` for 3.
pub fn node_name(index: usize) -> String {
    format!("node{index}")
}

/// The index of a node name (`node3` is 3); None for anything else.
pub fn node_index(name: &str) -> Option<usize> {
    name.strip_prefix("node")?
        .parse()
        .ok()
        .filter(|i| (1..=MAX_NODES).contains(i))
}

/// Node `index`'s address on the underlay (its `eth0`).
pub fn node_ip(index: usize) -> Ipv4Addr {
    assert!(
        (1..=MAX_NODES).contains(&index),
        "node index {index} outside 1..={MAX_NODES}"
    );
    Ipv4Addr::new(198, 18, 0, 10 + index as u8)
}

/// The underlay's IPv6 prefix length.
pub const UNDERLAY_IPV6_PREFIX: u8 = 64;

/// The IPv6 address a machine at `ip` on the underlay also has:
/// fd00:198:18::<last octet>, its digits written as they are (198.18.0.11
/// is fd00:198:18::11), so the two read alike.
pub fn underlay_ipv6(ip: Ipv4Addr) -> Ipv6Addr {
    format!("fd00:198:18::{}", ip.octets()[3])
        .parse()
        .expect("a valid IPv6 address")
}

/// Node `index`'s pod CIDR (`--ipv4-range`), a block of Cilium's default pool.
pub fn pod_cidr(index: usize) -> String {
    format!("10.{index}.0.0/24")
}

/// Where the agents find etcd: on the bridge's address.
pub fn etcd_url() -> String {
    format!("http://{UNDERLAY_IP}:{ETCD_PORT}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_addresses() {
        assert_eq!(node_name(1), "node1");
        assert_eq!(node_ip(1), Ipv4Addr::new(198, 18, 0, 11));
        assert_eq!(node_ip(2), Ipv4Addr::new(198, 18, 0, 12));
        assert_eq!(node_ip(MAX_NODES), Ipv4Addr::new(198, 18, 0, 210));
        assert_eq!(
            underlay_ipv6(node_ip(1)),
            "fd00:198:18::11".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            underlay_ipv6(OUTSIDE_IP),
            "fd00:198:18::254".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(pod_cidr(1), "10.1.0.0/24");
        assert_eq!(pod_cidr(3), "10.3.0.0/24");
        assert_eq!(etcd_url(), "http://198.18.0.1:2379");
    }

    #[test]
    fn every_node_is_on_the_underlay_and_apart() {
        let net = u32::from(UNDERLAY_IP) >> (32 - UNDERLAY_PREFIX);
        let mut seen = std::collections::HashSet::new();
        for i in 1..=MAX_NODES {
            let ip = node_ip(i);
            assert_eq!(u32::from(ip) >> (32 - UNDERLAY_PREFIX), net, "{ip}");
            assert_ne!(ip, UNDERLAY_IP);
            assert!(seen.insert(ip), "{ip} given twice");
        }
        let cidrs: std::collections::HashSet<String> = (1..=MAX_NODES).map(pod_cidr).collect();
        assert_eq!(cidrs.len(), MAX_NODES);
    }

    #[test]
    fn names_and_indexes_round_trip() {
        for i in 1..=MAX_NODES {
            assert_eq!(node_index(&node_name(i)), Some(i));
        }
        for name in [
            "node0", "node201", "node", "nodex", "pod-a", "underlay", "1",
        ] {
            assert_eq!(node_index(name), None, "{name}");
        }
    }

    #[test]
    #[should_panic(expected = "node index 0")]
    fn node_zero_has_no_address() {
        node_ip(0);
    }
}
