//! Where the lab lives on the host: `<lab dir>/underlay/` (the switch and
//! etcd), `<lab dir>/etcd/` (etcd's data) and `<lab dir>/node<i>/`.
//!
//! A node's own world (bpffs at /sys/fs/bpf, a tmpfs /run with
//! /run/cilium, its pods' namespace mounts) exists only in its mount
//! namespace; its directory holds what the host must see: pids, logs, the
//! CNI bin and conf dirs, pod namespace files and the agent's state.

use anyhow::{bail, Context};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// The switch's address on the underlay, where etcd listens.
pub const UNDERLAY_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const UNDERLAY_PREFIX: u8 = 24;
pub const UNDERLAY: &str = "underlay";
pub const BRIDGE: &str = "br0";
/// The demo's ClusterIP (in Cilium's default service CIDR style).
pub const DEMO_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
/// Cluster size limit: node addresses are 198.18.0.11 on.
pub const MAX_NODES: usize = 200;

pub fn root() -> PathBuf {
    std::env::var_os("CILIUM_LAB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/cilium-lab"))
}

/// Inside a node: the node's own cgroup, bound where Cilium's cgroup-root
/// defaults to, so its agent attaches socket LB there and nowhere else.
pub const NODE_CGROUP: &str = "/run/cilium/cgroupv2";

/// Moves this process into the cgroup of the node whose mount namespace it
/// is in (see `enter_node`), as a pod's processes are: socket LB applies to
/// its connect() calls from then on.
pub fn join_node_cgroup() -> anyhow::Result<()> {
    let procs = Path::new(NODE_CGROUP).join("cgroup.procs");
    std::fs::write(&procs, "0").with_context(|| format!("joining {}", procs.display()))
}

/// The node's cgroup in the host's cgroup v2 tree: one per lab dir and node,
/// so two labs never share one.
pub fn node_cgroup_name(index: usize) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    root().hash(&mut h);
    format!("cilium-lab-{:08x}-{}", h.finish() as u32, node_name(index))
}

pub fn node_name(index: usize) -> String {
    format!("node{index}")
}

/// Node `index` (from 1): its pod CIDR, a block of Cilium's default pool.
pub fn pod_cidr(index: usize) -> String {
    format!("10.{index}.0.0/24")
}

pub fn node_ip(index: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, 0, 10 + index as u8)
}

pub fn etcd_url() -> String {
    format!("http://{UNDERLAY_IP}:2379")
}

/// The index of a node name (`node3` is 3).
pub fn node_index(name: &str) -> Option<usize> {
    name.strip_prefix("node")?
        .parse()
        .ok()
        .filter(|i| (1..=MAX_NODES).contains(i))
}

/// Nodes that are up, in order.
pub fn running_nodes() -> Vec<(usize, Layout, i32)> {
    let mut nodes: Vec<(usize, Layout, i32)> = std::fs::read_dir(root())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let index = node_index(&e.file_name().to_string_lossy())?;
            let l = Layout::new(&node_name(index));
            let pid = l.running_holder()?;
            Some((index, l, pid))
        })
        .collect();
    nodes.sort_by_key(|(i, _, _)| *i);
    nodes
}

pub struct Layout {
    pub dir: PathBuf,
}

impl Layout {
    pub fn new(node: &str) -> Self {
        Self {
            dir: root().join(node),
        }
    }

    /// The node (or `underlay`) this directory is for.
    pub fn name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
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
    /// The agent's run directory (its pid file; Cilium's /var/run/cilium).
    pub fn run_dir(&self) -> PathBuf {
        self.dir.join("run")
    }
    pub fn state_dir(&self) -> PathBuf {
        self.run_dir().join("state")
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
        // A joined thread has run its last instruction but may not have
        // left the kernel yet: until it drops its share of this process's
        // fs_struct, setns(CLONE_NEWNS) fails with EINVAL. Give it a moment.
        let mut tries = 0;
        loop {
            // SAFETY: a valid namespace fd; this process has one thread here.
            if unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), flag) } == 0 {
                break;
            }
            let err = std::io::Error::last_os_error();
            tries += 1;
            if err.raw_os_error() != Some(libc::EINVAL) || tries == 200 {
                return Err(err).with_context(|| format!("entering {path}"));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
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
