//! What the namespace's links, addresses and routes are, read whole for
//! reporting (the agent's `statedb devices` and `routes` tables); nothing
//! here changes them.

use crate::Error;
use futures::TryStreamExt;
use netlink_packet_route::address::{AddressAttribute, AddressHeaderFlags};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkInfo, LinkMessage};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage};
use netlink_packet_route::AddressFamily;
use std::net::IpAddr;

/// One address of a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAddr {
    pub addr: IpAddr,
    pub prefix: u8,
    pub secondary: bool,
    /// RT_SCOPE_* (0 universe, 253 link, 254 host).
    pub scope: u8,
}

/// A link as Cilium's devices table describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub index: u32,
    pub name: String,
    pub mac: Vec<u8>,
    pub mtu: u32,
    /// IFF_* flags as the kernel reports them.
    pub raw_flags: u32,
    /// The rtnetlink kind ("veth", "vxlan", ...), or "device" for a link
    /// without one (a physical NIC, loopback), as Cilium names it.
    pub kind: String,
    /// The bridge or bond this link is enslaved to; 0 for none.
    pub master: u32,
    pub addrs: Vec<DeviceAddr>,
}

/// A route of any table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteEntry {
    pub table: u32,
    pub link_index: u32,
    pub scope: u8,
    pub dst: IpAddr,
    pub dst_len: u8,
    pub src: Option<IpAddr>,
    pub gw: Option<IpAddr>,
}

fn device(msg: &LinkMessage) -> Device {
    let mut dev = Device {
        index: msg.header.index,
        name: String::new(),
        mac: Vec::new(),
        mtu: 0,
        raw_flags: msg.header.flags.bits(),
        kind: "device".into(),
        master: 0,
        addrs: Vec::new(),
    };
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::IfName(n) => dev.name = n.clone(),
            LinkAttribute::Address(a) => dev.mac = a.clone(),
            LinkAttribute::Mtu(m) => dev.mtu = *m,
            LinkAttribute::Controller(m) => dev.master = *m,
            LinkAttribute::LinkInfo(infos) => {
                for info in infos {
                    if let LinkInfo::Kind(kind) = info {
                        dev.kind = kind.to_string();
                    }
                }
            }
            _ => {}
        }
    }
    dev
}

/// Every link with its addresses, by index.
pub async fn devices(nl: &crate::Netlink) -> Result<Vec<Device>, Error> {
    let links = nl.link_messages().await?;
    let mut devices: Vec<Device> = links.iter().map(device).collect();
    let addrs: Vec<_> = nl
        .handle()
        .address()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(Error::nl("list", "addresses"))?;
    for msg in addrs {
        let Some(dev) = devices.iter_mut().find(|d| d.index == msg.header.index) else {
            continue;
        };
        // IFA_LOCAL is the address of this end; IFA_ADDRESS is the peer's
        // on a point-to-point link, so it only counts when there is no local
        let local = msg.attributes.iter().find_map(|a| match a {
            AddressAttribute::Local(ip) => Some(*ip),
            _ => None,
        });
        let address = msg.attributes.iter().find_map(|a| match a {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        });
        if let Some(addr) = local.or(address) {
            dev.addrs.push(DeviceAddr {
                addr,
                prefix: msg.header.prefix_len,
                secondary: msg.header.flags.contains(AddressHeaderFlags::Secondary),
                scope: msg.header.scope.into(),
            });
        }
    }
    devices.sort_by_key(|d| d.index);
    Ok(devices)
}

fn ip(addr: &RouteAddress) -> Option<IpAddr> {
    match addr {
        RouteAddress::Inet(a) => Some(IpAddr::V4(*a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

fn route(msg: &RouteMessage) -> Option<RouteEntry> {
    let unspecified = match msg.header.address_family {
        AddressFamily::Inet => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        AddressFamily::Inet6 => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        _ => return None,
    };
    let mut entry = RouteEntry {
        table: u32::from(msg.header.table),
        link_index: 0,
        scope: msg.header.scope.into(),
        dst: unspecified,
        dst_len: msg.header.destination_prefix_length,
        src: None,
        gw: None,
    };
    for attr in &msg.attributes {
        match attr {
            RouteAttribute::Table(t) => entry.table = *t,
            RouteAttribute::Oif(i) => entry.link_index = *i,
            RouteAttribute::Destination(a) => entry.dst = ip(a)?,
            RouteAttribute::PrefSource(a) => entry.src = ip(a),
            RouteAttribute::Gateway(a) => entry.gw = ip(a),
            _ => {}
        }
    }
    Some(entry)
}

/// Every IPv4 and IPv6 route of every table.
pub async fn routes(nl: &crate::Netlink) -> Result<Vec<RouteEntry>, Error> {
    let mut out = Vec::new();
    let requests = [
        rtnetlink::RouteMessageBuilder::<std::net::Ipv4Addr>::new().build(),
        rtnetlink::RouteMessageBuilder::<std::net::Ipv6Addr>::new().build(),
    ];
    for req in requests {
        let msgs: Vec<RouteMessage> = nl
            .handle()
            .route()
            .get(req)
            .execute()
            .try_collect()
            .await
            .map_err(Error::nl("list", "routes"))?;
        out.extend(msgs.iter().filter_map(route));
    }
    Ok(out)
}

/// Go's net.Flags (what Cilium's tables print) from IFF_* flags.
pub fn go_net_flags(raw: u32) -> u32 {
    const MAP: [(LinkFlags, u32); 6] = [
        (LinkFlags::Up, 1),
        (LinkFlags::Broadcast, 2),
        (LinkFlags::Loopback, 4),
        (LinkFlags::Pointopoint, 8),
        (LinkFlags::Multicast, 16),
        (LinkFlags::Running, 32),
    ];
    let raw = LinkFlags::from_bits_retain(raw);
    MAP.iter()
        .filter(|(f, _)| raw.contains(*f))
        .fold(0, |acc, (_, bit)| acc | bit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_flags_follow_the_iff_bits_they_name() {
        // IFF_UP|IFF_BROADCAST|IFF_RUNNING|IFF_MULTICAST
        assert_eq!(go_net_flags(0x1 | 0x2 | 0x40 | 0x1000), 1 | 2 | 16 | 32);
        // IFF_LOOPBACK alone
        assert_eq!(go_net_flags(0x8), 4);
        assert_eq!(go_net_flags(0), 0);
    }
}
