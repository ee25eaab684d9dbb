//! A node network for the lab and the multi-node tests: a bridge in one
//! namespace (the "switch"), and each node namespace plugged into it with an
//! `eth0` carrying the node's address. Nothing here touches the machine's
//! own network: callers run it inside namespaces they created.

use crate::link::{Link, Netlink};
use crate::{Error, NetNs};
use std::future::Future;
use std::net::Ipv4Addr;

const DEFAULT_ACCEPT_DAD: &str = "net.ipv6.conf.default.accept_dad";

/// Creates `name` (or reuses it), gives it `ip/len` and sets it up.
pub async fn ensure_bridge(nl: &Netlink, name: &str, ip: Ipv4Addr, len: u8) -> Result<Link, Error> {
    if nl.link_by_name(name).await?.is_none() {
        let msg = rtnetlink::LinkBridge::new(name).build();
        nl.add_link(msg, "add bridge", name).await?;
    }
    let bridge = nl.require_link(name).await?;
    nl.ensure_ipv4_addr(bridge.index, ip, len).await?;
    nl.set_up(bridge.index).await?;
    Ok(bridge)
}

/// Plugs a node into the bridge: a veth whose `port` end joins the bridge
/// and whose `eth0` end lives in the node's namespace with `ip/len`.
pub async fn plug_node(
    switch: &Netlink,
    bridge: &Link,
    node: &Netlink,
    node_ns: &NetNs,
    port: &str,
    ip: Ipv4Addr,
    len: u8,
) -> Result<(), Error> {
    // a port left by an earlier plug is replaced by create_pod_veth
    let veth = without_dad(node_ns, || {
        crate::veth::create_pod_veth(switch, node, node_ns, port, "eth0", 1500)
    })
    .await?;
    let msg = rtnetlink::LinkUnspec::new_with_index(veth.host_index)
        .controller(bridge.index)
        .build();
    switch.set_link(msg, "attach to bridge", port).await?;
    node.ensure_ipv4_addr(veth.pod_index, ip, len).await
}

/// Makes the links `make` creates in `ns` skip duplicate address detection.
/// A machine's NIC finished it long before anything runs there, but a
/// fresh veth's link-local address stays tentative for a second or two,
/// and until then the kernel sends no neighbor solicitation for the
/// packets it forwards (it needs a usable link-local source): the first
/// pod packets across the IPv6 underlay were lost. The namespace's
/// default is off only while `make` runs.
async fn without_dad<T, F: Future<Output = Result<T, Error>>>(
    ns: &NetNs,
    make: impl FnOnce() -> F,
) -> Result<T, Error> {
    let was = ns.run(|| {
        let was = crate::sysctl::read(DEFAULT_ACCEPT_DAD)?;
        crate::sysctl::write_in_pod_netns(DEFAULT_ACCEPT_DAD, "0")?;
        Ok::<_, Error>(was)
    })??;
    let made = make().await;
    ns.run(|| crate::sysctl::write_in_pod_netns(DEFAULT_ACCEPT_DAD, &was))??;
    made
}
