//! The underlay as the plan lays it out: the bridge in the switch's
//! namespace at [`UNDERLAY_IP`], and machines plugged into it with `eth0`
//! in the underlay's prefix. Callers run it inside namespaces they made.

use crate::plan::{BRIDGE, UNDERLAY_IP, UNDERLAY_PREFIX};
use netdev::{Link, NetNs, Netlink};
use std::net::Ipv4Addr;

/// Makes (or finds) the bridge on `switch`, the switch's namespace.
pub async fn bridge(switch: &Netlink) -> Result<Link, netdev::Error> {
    netdev::underlay::ensure_bridge(switch, BRIDGE, UNDERLAY_IP, UNDERLAY_PREFIX).await
}

/// Plugs the machine whose namespace is `ns` (netlink `nl`) into `bridge`
/// as `eth0` with `ip`; `port` names its end on the bridge (the node's
/// name, so the lab and the tests read alike).
pub async fn plug(
    switch: &Netlink,
    bridge: &Link,
    nl: &Netlink,
    ns: &NetNs,
    port: &str,
    ip: Ipv4Addr,
) -> Result<(), netdev::Error> {
    netdev::underlay::plug_node(switch, bridge, nl, ns, port, ip, UNDERLAY_PREFIX).await
}
