//! The node's own addresses in cilium_lxc and the ipcache, so the datapath
//! recognises traffic to the host (Cilium's sync-host-ips).

use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::identity;
use controlplane::ipcache::{Entry, IpCache, Source};
use controlplane::KernelError;
use datapath::maps::Lxc;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;

/// Writes host entries for `host_ips` and the world catch-all of each
/// family the node runs: IPv6's is world-ipv6 on a dual-stack node and
/// the plain world on an IPv6-only one, as 1.16's hostips-sync.
pub fn sync(
    bpffs_root: &Path,
    ipcache: &IpCache,
    host_ips: &[IpAddr],
    stack: crate::option::Families,
) -> Result<(), KernelError> {
    let lxc = Lxc::open(bpffs_root).map_err(KernelError::new)?;
    for ip in host_ips {
        lxc.put(&EndpointKey::new(*ip), &EndpointInfo::host())
            .map_err(KernelError::new)?;
        let len = abi::ipcache::host_prefix_len(*ip);
        ipcache.upsert(*ip, len, Entry::new(identity::HOST, Source::Local))?;
    }
    if stack.ipv4 {
        let world = Entry::new(identity::WORLD, Source::Generated);
        ipcache.upsert(Ipv4Addr::UNSPECIFIED, 0, world)?;
    }
    if stack.ipv6 {
        let id = match stack.ipv4 {
            true => identity::WORLD_IPV6,
            false => identity::WORLD,
        };
        ipcache.upsert(Ipv6Addr::UNSPECIFIED, 0, Entry::new(id, Source::Generated))?;
    }
    Ok(())
}
