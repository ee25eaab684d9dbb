//! The overlay device: one flow-based VXLAN device whose remote and VNI
//! every packet brings along (set by the datapath with a tunnel key).

use crate::link::{Link, Netlink};
use crate::{sysctl, Error};

pub const CILIUM_VXLAN: &str = "cilium_vxlan";
/// Cilium's default VXLAN port (not IANA's 4789).
pub const VXLAN_PORT: u16 = 8472;
/// Outer IPv4 + UDP + VXLAN + inner Ethernet headers.
pub const TUNNEL_OVERHEAD: u32 = 50;

/// Creates the device when missing (an existing one is kept so a restarted
/// agent does not interrupt the overlay), then sets MTU, up and sysctls.
/// A device of the same name with another port is recreated. With `ipv6`
/// the device takes IPv6 in (other nodes' hosts reach this node's IPv6
/// router through it).
pub async fn ensure_vxlan_device(
    nl: &Netlink,
    port: u16,
    mtu: u32,
    ipv6: bool,
) -> Result<Link, Error> {
    if let Some(link) = nl.link_by_name(CILIUM_VXLAN).await? {
        if vxlan_port(nl, link.index).await? != Some(port) {
            tracing::info!(
                subsys = "netdev",
                device = CILIUM_VXLAN,
                port,
                "Recreating tunnel device with a new port"
            );
            nl.delete_link(link.index).await?;
        }
    }
    if nl.link_by_name(CILIUM_VXLAN).await?.is_none() {
        let msg = rtnetlink::LinkVxlan::new(CILIUM_VXLAN, 0)
            .collect_metadata(true)
            .port(port)
            .learning(false)
            .mtu(mtu)
            .build();
        nl.add_link(msg, "add vxlan", CILIUM_VXLAN).await?;
        tracing::info!(
            subsys = "netdev",
            device = CILIUM_VXLAN,
            port,
            "Created tunnel device"
        );
    }
    let link = nl.require_link(CILIUM_VXLAN).await?;
    // The overlay carries only what the datapath encapsulates; without this
    // the kernel's own IPv6 chatter (router solicitations, MLD) would try to
    // leave through it and be dropped by cil_to_overlay.
    // Nor does it route IPv6 or take multicast: a forwarding device joins
    // all-routers from its creation on and would report it (MLD) once IPv6
    // is on. It leaves the group in MLDv1, where leaving a group never
    // reported sends nothing (MLDv2 queues a state change that goes out
    // later), and without the multicast flag does not join again when the
    // node's forwarding is turned on.
    let conf = format!("net.ipv6.conf.{CILIUM_VXLAN}");
    for (key, value) in [
        ("force_mld_version", "1"),
        ("disable_ipv6", "1"),
        ("forwarding", "0"),
    ] {
        if let Err(e) = sysctl::write(&format!("{conf}.{key}"), value) {
            tracing::debug!(subsys = "netdev", error = %e, "IPv6 unavailable, nothing to disable");
        }
    }
    let msg = rtnetlink::LinkUnspec::new_with_index(link.index)
        .mtu(mtu)
        .multicast(false)
        .up()
        .build();
    nl.set_link(msg, "configure", CILIUM_VXLAN).await?;
    sysctl::configure_cilium_device(CILIUM_VXLAN)?;
    if ipv6 {
        // without an address of its own (addr_gen_mode none) the device
        // sends no DAD or MLD for it either
        sysctl::write(&format!("{conf}.addr_gen_mode"), "1")?;
        sysctl::write(&format!("{conf}.disable_ipv6"), "0")?;
    }
    Ok(link)
}

/// Removes the overlay device an earlier tunnel-mode run left (native
/// routing has none); true when there was one.
pub async fn remove_vxlan_device(nl: &Netlink) -> Result<bool, Error> {
    crate::veth::delete_by_name(nl, CILIUM_VXLAN).await
}

/// The UDP port of an existing VXLAN device.
async fn vxlan_port(nl: &Netlink, index: u32) -> Result<Option<u16>, Error> {
    use futures::TryStreamExt;
    use netlink_packet_route::link::{InfoData, InfoVxlan, LinkAttribute, LinkInfo};
    let mut msgs = nl.handle().link().get().match_index(index).execute();
    while let Some(msg) = msgs
        .try_next()
        .await
        .map_err(Error::nl("get link", CILIUM_VXLAN))?
    {
        for attr in &msg.attributes {
            let LinkAttribute::LinkInfo(infos) = attr else {
                continue;
            };
            for info in infos {
                let LinkInfo::Data(InfoData::Vxlan(data)) = info else {
                    continue;
                };
                for d in data {
                    if let InfoVxlan::Port(p) = d {
                        return Ok(Some(*p));
                    }
                }
            }
        }
    }
    Ok(None)
}
