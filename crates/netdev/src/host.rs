//! The cilium_host / cilium_net veth pair that carries the router IP.

use crate::link::{Link, Netlink};
use crate::{sysctl, Error};
use std::net::{Ipv4Addr, Ipv6Addr};

pub const CILIUM_HOST: &str = "cilium_host";
pub const CILIUM_NET: &str = "cilium_net";

#[derive(Clone, Debug)]
pub struct HostDevices {
    pub host: Link,
    pub net: Link,
}

/// Creates the pair when missing (an existing pair is reused, so a restarted
/// agent does not disturb traffic), sets NOARP, MTU and up, and the
/// per-device sysctls; the addresses are each family's (below).
pub async fn ensure_host_devices(nl: &Netlink, mtu: u32) -> Result<HostDevices, Error> {
    if nl.link_by_name(CILIUM_HOST).await?.is_none() {
        let msg = rtnetlink::LinkVeth::new(CILIUM_HOST, CILIUM_NET)
            .mtu(mtu)
            .txqueuelen(1000)
            .build();
        nl.add_link(msg, "add veth", CILIUM_HOST).await?;
        tracing::info!(
            subsys = "netdev",
            device = CILIUM_HOST,
            peer = CILIUM_NET,
            "Created host device pair"
        );
    }
    for name in [CILIUM_HOST, CILIUM_NET] {
        let link = nl.require_link(name).await?;
        let msg = rtnetlink::LinkUnspec::new_with_index(link.index)
            .arp(false)
            .mtu(mtu)
            .up()
            .build();
        nl.set_link(msg, "configure", name).await?;
        sysctl::configure_cilium_device(name)?;
    }
    let host = nl.require_link(CILIUM_HOST).await?;
    let net = nl.require_link(CILIUM_NET).await?;
    Ok(HostDevices { host, net })
}

/// The IPv4 side of cilium_host: the router address as /32, the L2 route
/// to it, and the node's pod CIDR routed onto the device from it.
pub async fn ensure_host_ipv4(
    nl: &Netlink,
    host_index: u32,
    router: Ipv4Addr,
    (net, len): (Ipv4Addr, u8),
    mtu: u32,
) -> Result<(), Error> {
    nl.ensure_ipv4_addr(host_index, router, 32).await?;
    nl.replace_route(&crate::link::Route::new(host_index, router, 32))
        .await?;
    let local_pods = crate::link::Route::new(host_index, net, len)
        .via(router)
        .src(router)
        .mtu(mtu);
    nl.replace_route(&local_pods).await
}

/// The IPv6 side of cilium_host: IPv6 on the device, the
/// router address as /128 (no duplicate address detection: the address
/// is the node's alone) and the node's IPv6 pod CIDR routed onto it, as
/// the IPv4 one is. cilium_host is NOARP, so the stack neither solicits
/// pods' neighbours there nor waits for them.
pub async fn ensure_host_ipv6(
    nl: &Netlink,
    host_index: u32,
    router: Ipv6Addr,
    (net, len): (Ipv6Addr, u8),
    mtu: u32,
) -> Result<(), Error> {
    sysctl::write(&format!("net.ipv6.conf.{CILIUM_HOST}.disable_ipv6"), "0")?;
    nl.ensure_ipv6_addr(host_index, router, 128).await?;
    nl.replace_route6(host_index, (net, len), None, Some(router), Some(mtu))
        .await
}
