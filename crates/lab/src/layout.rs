//! Where a lab node lives on the host: `<lab dir>/<node>/`.
//!
//! The node's own world (bpffs at /sys/fs/bpf, a tmpfs /run with
//! /run/cilium) exists only in its mount namespace; this directory holds
//! what the host must see: pids, logs, the CNI bin and conf dirs, pod
//! namespace files and the agent's state.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

pub const NODE: &str = "node1";
/// The node's pod CIDR (a block of Cilium's default cluster pool).
pub const POD_CIDR: &str = "10.1.0.0/24";
/// The node's underlay address.
pub const NODE_IP: &str = "198.18.0.11/24";

pub struct Layout {
    pub dir: PathBuf,
}

impl Layout {
    pub fn new(node: &str) -> Self {
        let root = std::env::var_os("CILIUM_LAB_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/tmp/cilium-lab"));
        Self {
            dir: root.join(node),
        }
    }

    pub fn holder_pid_file(&self) -> PathBuf {
        self.dir.join("holder.pid")
    }
    pub fn ready_file(&self) -> PathBuf {
        self.dir.join("ready")
    }
    pub fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }
    pub fn cni_bin_dir(&self) -> PathBuf {
        self.dir.join("opt/cni/bin")
    }
    pub fn cni_conf_file(&self) -> PathBuf {
        self.dir.join("etc/cni/net.d/05-cilium.conflist")
    }
    pub fn netns_dir(&self) -> PathBuf {
        self.dir.join("netns")
    }
    pub fn netns(&self, pod: &str) -> PathBuf {
        self.netns_dir().join(pod)
    }

    /// The holder's pid when the node is up.
    pub fn running_holder(&self) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(self.holder_pid_file())
            .ok()?
            .trim()
            .parse()
            .ok()?;
        alive(pid).then_some(pid)
    }

    /// Pods of the node: the namespace files under netns/.
    pub fn pods(&self) -> Vec<String> {
        let mut pods: Vec<String> = std::fs::read_dir(self.netns_dir())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        pods.sort();
        pods
    }
}

pub fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// A binary next to cilium-lab.
pub fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe().context("locating cilium-lab")?;
    let p = exe.parent().context("binary dir")?.join(name);
    if !p.exists() {
        bail!(
            "{} not found next to cilium-lab (run ./scripts/install.sh first)",
            p.display()
        );
    }
    Ok(p)
}

pub fn bin_dir() -> anyhow::Result<PathBuf> {
    Ok(sibling("cilium-lab")?
        .parent()
        .expect("has parent")
        .to_owned())
}

/// Moves this (single-threaded) process into the node's mount and network
/// namespaces, where its bpffs, /run/cilium and pods are visible.
pub fn enter_node(holder: i32) -> anyhow::Result<()> {
    for (ns, flag) in [("mnt", libc::CLONE_NEWNS), ("net", libc::CLONE_NEWNET)] {
        let path = format!("/proc/{holder}/ns/{ns}");
        let f = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
        // SAFETY: a valid namespace fd; this process has one thread here.
        if unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), flag) } != 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("entering {path}"));
        }
    }
    Ok(())
}

pub fn write_atomic(path: &Path, body: &[u8]) -> anyhow::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, body).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}
