//! The node's own addresses in cilium_lxc and cilium_ipcache, so the
//! datapath recognises traffic to the host (Cilium's sync-host-ips).

use abi::endpoint::{EndpointInfo, EndpointKey};
use abi::ipcache::{IpcacheKey, RemoteEndpointInfo};
use abi::{identity, maps};
use datapath::PinnedMap;
use std::net::Ipv4Addr;
use std::path::Path;

/// Writes host entries for `host_ips` and the world catch-all.
pub fn sync(bpffs_root: &Path, host_ips: &[Ipv4Addr]) -> Result<(), datapath::Error> {
    let lxc = PinnedMap::open_global(bpffs_root, maps::LXC)?;
    let ipcache = PinnedMap::open_global(bpffs_root, maps::IPCACHE)?;
    for ip in host_ips {
        lxc.put(&EndpointKey::v4(*ip), &EndpointInfo::host())?;
        let host = RemoteEndpointInfo {
            sec_identity: identity::HOST,
            ..Default::default()
        };
        ipcache.put(&IpcacheKey::v4(*ip, 32), &host)?;
    }
    let world = RemoteEndpointInfo {
        sec_identity: identity::WORLD,
        ..Default::default()
    };
    ipcache.put(&IpcacheKey::v4(Ipv4Addr::UNSPECIFIED, 0), &world)?;
    Ok(())
}
