//! Per-network-namespace sysctls, written through /proc/sys/net, which the
//! kernel resolves against the writer's network namespace.

//!
//! Which procfs they go through is Cilium's `procfs` option: in a
//! container /proc/sys is read-only, so the DaemonSet mounts the node's
//! /proc/sys/net at /host/proc/sys/net and the ConfigMap says
//! `procfs: /host/proc`. It is one setting of the whole process, made
//! once at start (`use_procfs`), before anything is written: every writer
//! (the datapath's devices, the health endpoint) goes through the same
//! mount, and the CNI plugin, which runs on the node, keeps /proc.

use crate::Error;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

static PROCFS: OnceLock<PathBuf> = OnceLock::new();

/// Every sysctl this process set, with the value and when: the agent
/// reports them (`cilium-dbg statedb sysctl`) as Cilium's sysctl table
/// does, so what it changed on the node can be read back.
static WRITTEN: Mutex<BTreeMap<String, Written>> = Mutex::new(BTreeMap::new());

/// A sysctl as this process last set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    pub key: String,
    pub value: String,
    pub at: SystemTime,
}

/// The sysctls this process has set, by key.
pub fn written() -> Vec<Written> {
    WRITTEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect()
}

/// Sets the procfs sysctls are read and written through; the first call
/// counts.
pub fn use_procfs(procfs: &Path) {
    let _ = PROCFS.set(procfs.to_owned());
}

fn path(key: &str) -> PathBuf {
    PROCFS
        .get()
        .map(PathBuf::as_path)
        .unwrap_or(Path::new("/proc"))
        .join("sys")
        .join(key.replace('.', "/"))
}

/// Sets a sysctl of the node's network namespace, and records it.
pub fn write(key: &str, value: &str) -> Result<(), Error> {
    write_in_pod_netns(key, value)?;
    let key = key.replace('/', ".");
    WRITTEN.lock().unwrap_or_else(|e| e.into_inner()).insert(
        key.clone(),
        Written {
            key,
            value: value.to_owned(),
            at: SystemTime::now(),
        },
    );
    Ok(())
}

/// Sets a sysctl of a pod's network namespace (the caller's thread is in
/// it): not one of the node's, so not recorded.
pub fn write_in_pod_netns(key: &str, value: &str) -> Result<(), Error> {
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

/// IPv6 forwarding, as Cilium's datapath sets it with enable-ipv6.
pub fn enable_ipv6_forwarding() -> Result<(), Error> {
    write("net.ipv6.conf.all.disable_ipv6", "0")?;
    write("net.ipv6.conf.all.forwarding", "1")
}

/// The per-device settings Cilium applies to its own devices.
pub fn configure_cilium_device(dev: &str) -> Result<(), Error> {
    write(&format!("net.ipv4.conf.{dev}.forwarding"), "1")?;
    write(&format!("net.ipv4.conf.{dev}.rp_filter"), "0")?;
    write(&format!("net.ipv4.conf.{dev}.accept_local"), "1")?;
    write(&format!("net.ipv4.conf.{dev}.send_redirects"), "0")
}
