//! A pod's veth pair: the host side stays with the agent, the peer becomes
//! the pod's interface inside its network namespace.

use crate::link::{Netlink, Route};
use crate::{Error, NetNs};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;

/// A random locally administered unicast MAC.
pub fn random_mac() -> [u8; 6] {
    let mut mac = [0u8; 6];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut mac))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        mac.copy_from_slice(&t.to_le_bytes()[..6]);
    }
    mac[0] = (mac[0] & 0xfe) | 0x02;
    mac
}

/// Both ends of a created pair, as the CNI result reports them.
#[derive(Clone, Debug)]
pub struct PodVeth {
    pub host_name: String,
    pub host_index: u32,
    pub host_mac: [u8; 6],
    pub pod_name: String,
    pub pod_index: u32,
    pub pod_mac: [u8; 6],
}

/// Creates `host_name` in the caller's namespace with its peer `pod_name`
/// created directly inside `pod_ns` (no move between namespaces, which
/// costs an RCU grace period). Both ends get random MACs, `mtu`,
/// txqueuelen 1000 and are set up. A link that holds either name already
/// (left by a half-done setup) is removed first. On failure nothing is
/// left behind.
pub async fn create_pod_veth(
    host: &Netlink,
    pod: &Netlink,
    pod_ns: &NetNs,
    host_name: &str,
    pod_name: &str,
    mtu: u32,
) -> Result<PodVeth, Error> {
    let (host_mac, pod_mac) = (random_mac(), random_mac());
    let pair = || pair_message(pod_ns, (host_name, host_mac), (pod_name, pod_mac), mtu);
    // Names are rarely taken: try first, clean up and retry on EEXIST,
    // rather than look both names up before every creation.
    let echoed = match host.add_link_echoed(pair(), "add veth", host_name).await {
        Err(e) if e.is_exists() => {
            delete_by_name(host, host_name).await?;
            delete_by_name(pod, pod_name).await?;
            host.add_link_echoed(pair(), "add veth", host_name).await?
        }
        other => other?,
    };
    let result = async {
        let (host_index, pod_index) = match echoed.as_ref().and_then(indexes) {
            Some(both) => both,
            None => (
                host.require_link(host_name).await?.index,
                pod.require_link(pod_name).await?.index,
            ),
        };
        // The agent attaches the pod's programs with tc filters first; their
        // qdisc costs less on a link that is not up yet, so the host end
        // comes up only after it. Where it cannot be added here the agent
        // adds it, or attaches with tcx alone. (A veth cannot be created up:
        // it refuses to open before it has its peer.) The two ends' requests
        // go over two sockets, so one need not wait for the other's answer.
        let host_up = async {
            let _ = host.add_clsact(host_index).await;
            host.set_up(host_index).await
        };
        let (pod_up, host_up) = futures::future::join(pod.set_up(pod_index), host_up).await;
        pod_up.and(host_up)?;
        Ok(PodVeth {
            host_name: host_name.to_owned(),
            host_index,
            host_mac,
            pod_name: pod_name.to_owned(),
            pod_index,
            pod_mac,
        })
    }
    .await;
    if result.is_err() {
        // Deleting either end removes the pair.
        let _ = delete_by_name(host, host_name).await;
    }
    result
}

/// The request that creates the pair, both ends down, the pod's end
/// inside `pod_ns`.
fn pair_message(
    pod_ns: &NetNs,
    (host_name, host_mac): (&str, [u8; 6]),
    (pod_name, pod_mac): (&str, [u8; 6]),
    mtu: u32,
) -> netlink_packet_route::link::LinkMessage {
    use netlink_packet_route::link::{InfoData, InfoKind, InfoVeth};
    use rtnetlink::{LinkMessageBuilder, LinkUnspec};
    let peer = LinkMessageBuilder::<LinkUnspec>::new()
        .name(pod_name.to_owned())
        .mtu(mtu)
        .txqueuelen(1000)
        .address(pod_mac.to_vec())
        .setns_by_fd(pod_ns.fd().as_raw_fd())
        .build();
    LinkMessageBuilder::<rtnetlink::LinkVeth>::new_with_info_kind(InfoKind::Veth)
        .name(host_name.to_owned())
        .mtu(mtu)
        .txqueuelen(1000)
        .address(host_mac.to_vec())
        .set_info_data(InfoData::Veth(InfoVeth::Peer(peer)))
        .build()
}

/// The host end's index and its peer's (`IFLA_LINK`) from the echoed
/// description of a new pair.
fn indexes(echoed: &netlink_packet_route::link::LinkMessage) -> Option<(u32, u32)> {
    use netlink_packet_route::link::LinkAttribute;
    let peer = echoed.attributes.iter().find_map(|a| match a {
        LinkAttribute::Link(i) => Some(*i),
        _ => None,
    })?;
    Some((echoed.header.index, peer))
}

/// Addresses the pod's end `index` of its veth as Cilium's plugin does,
/// for each family the node runs: the IPv4 address as /32 with the router
/// on link and the default route through it, and likewise the IPv6
/// address (/128) and router. The default routes carry the route MTU, which
/// leaves room for the overlay's headers while the device keeps the full
/// MTU. `pod` is a handle inside the pod's namespace, where IPv6 must
/// already be on.
pub async fn address_pod(
    pod: &Netlink,
    index: u32,
    ipv4: Option<(Ipv4Addr, Ipv4Addr)>,
    ipv6: Option<(Ipv6Addr, Ipv6Addr)>,
    route_mtu: u32,
) -> Result<(), Error> {
    if let Some((ip, router)) = ipv4 {
        pod.ensure_ipv4_addr(index, ip, 32).await?;
        pod.replace_route(&Route::new(index, router, 32)).await?;
        let default = Route::new(index, Ipv4Addr::UNSPECIFIED, 0)
            .via(router)
            .mtu(route_mtu);
        pod.replace_route(&default).await?;
    }
    if let Some((ip6, router6)) = ipv6 {
        let mtu = Some(route_mtu);
        pod.ensure_ipv6_addr(index, ip6, 128).await?;
        pod.replace_route6(index, (router6, 128), None, None, mtu)
            .await?;
        pod.replace_route6(index, (Ipv6Addr::UNSPECIFIED, 0), Some(router6), None, mtu)
            .await?;
    }
    Ok(())
}

/// Deletes a link by name; a missing link is not an error.
pub async fn delete_by_name(nl: &Netlink, name: &str) -> Result<bool, Error> {
    match nl.link_by_name(name).await? {
        Some(link) => {
            nl.delete_link(link.index).await?;
            Ok(true)
        }
        None => Ok(false),
    }
}
