//! Per-network-namespace sysctls, written through /proc/sys/net, which the
//! kernel resolves against the writer's network namespace.

use crate::Error;
use std::path::PathBuf;

fn path(key: &str) -> PathBuf {
    PathBuf::from("/proc/sys").join(key.replace('.', "/"))
}

pub fn write(key: &str, value: &str) -> Result<(), Error> {
    std::fs::write(path(key), value).map_err(|source| Error::Sysctl {
        key: key.to_owned(),
        source,
    })?;
    tracing::debug!(subsys = "sysctl", key, value, "Setting sysctl");
    Ok(())
}

pub fn read(key: &str) -> Result<String, Error> {
    std::fs::read_to_string(path(key))
        .map(|s| s.trim().to_owned())
        .map_err(|source| Error::Sysctl {
            key: key.to_owned(),
            source,
        })
}

/// IP forwarding and a permissive rp_filter, as Cilium's datapath cell sets them.
pub fn enable_ipv4_forwarding() -> Result<(), Error> {
    write("net.ipv4.ip_forward", "1")?;
    write("net.ipv4.conf.all.forwarding", "1")?;
    write("net.ipv4.conf.all.rp_filter", "0")
}

/// The per-device settings Cilium applies to its own devices.
pub fn configure_cilium_device(dev: &str) -> Result<(), Error> {
    write(&format!("net.ipv4.conf.{dev}.forwarding"), "1")?;
    write(&format!("net.ipv4.conf.{dev}.rp_filter"), "0")?;
    write(&format!("net.ipv4.conf.{dev}.accept_local"), "1")?;
    write(&format!("net.ipv4.conf.{dev}.send_redirects"), "0")
}
