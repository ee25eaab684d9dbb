//! The underlay as the plan lays it out: the bridge in the switch's
//! namespace at [`UNDERLAY_IP`], and machines plugged into it with `eth0`
//! in the underlay's prefix, each with its IPv6 twin too (what IPv4-only
//! clusters leave unused). Callers run it inside namespaces they made.

use crate::plan::{underlay_ipv6, BRIDGE, UNDERLAY_IP, UNDERLAY_IPV6_PREFIX, UNDERLAY_PREFIX};
use netdev::{Link, NetNs, Netlink};
use std::net::Ipv4Addr;

/// Makes (or finds) the bridge on `switch`, the switch's namespace.
pub async fn bridge(switch: &Netlink) -> Result<Link, netdev::Error> {
    let bridge =
        netdev::underlay::ensure_bridge(switch, BRIDGE, UNDERLAY_IP, UNDERLAY_PREFIX).await?;
    switch
        .ensure_ipv6_addr(
            bridge.index,
            underlay_ipv6(UNDERLAY_IP),
            UNDERLAY_IPV6_PREFIX,
        )
        .await?;
    Ok(bridge)
}

/// Plugs the machine whose namespace is `ns` (netlink `nl`) into `bridge`
/// as `eth0` with `ip` and its IPv6 twin; `port` names its end on the bridge (the node's
/// name, so the lab and the tests read alike).
pub async fn plug(
    switch: &Netlink,
    bridge: &Link,
    nl: &Netlink,
    ns: &NetNs,
    port: &str,
    ip: Ipv4Addr,
) -> Result<(), netdev::Error> {
    netdev::underlay::plug_node(switch, bridge, nl, ns, port, ip, UNDERLAY_PREFIX).await?;
    let eth0 = nl.require_link("eth0").await?;
    nl.ensure_ipv6_addr(eth0.index, underlay_ipv6(ip), UNDERLAY_IPV6_PREFIX)
        .await
}
