//! The node's own addresses in cilium_lxc and the ipcache, so the datapath
//! recognises traffic to the host (Cilium's sync-host-ips).

use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::identity;
use controlplane::ipcache::{Entry, IpCache, Source};
use controlplane::KernelError;
use datapath::maps::Lxc;
use std::net::Ipv4Addr;
use std::path::Path;

/// Writes host entries for `host_ips` and the world catch-all.
pub fn sync(
    bpffs_root: &Path,
    ipcache: &IpCache,
    host_ips: &[Ipv4Addr],
) -> Result<(), KernelError> {
    let lxc = Lxc::open(bpffs_root).map_err(KernelError::new)?;
    for ip in host_ips {
        lxc.put(&EndpointKey::v4(*ip), &EndpointInfo::host())
            .map_err(KernelError::new)?;
        ipcache.upsert(*ip, 32, Entry::new(identity::HOST, Source::Local))?;
    }
    let world = Entry::new(identity::WORLD, Source::Generated);
    ipcache.upsert(Ipv4Addr::UNSPECIFIED, 0, world).map(drop)
}
