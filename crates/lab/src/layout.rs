//! Where the lab lives on the host: `<lab dir>/underlay/` (the switch and
//! etcd), `<lab dir>/etcd/` (etcd's data) and `<lab dir>/node<i>/`.
//!
//! A node's own world (bpffs at /sys/fs/bpf, a tmpfs /run with
//! /run/cilium, its pods' namespace mounts) exists only in its mount
//! namespace; its directory holds what the host must see: pids, logs, the
//! CNI bin and conf dirs, pod namespace files and the agent's state. What
//! is in a node's directory, and the cluster's addresses, are the
//! `topology` crate's (shared with the tests and the bench); the lab adds
//! its holders' files and where the lab dir is.

use anyhow::{bail, Context};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use topology::NodeDir;

/// The directory of the underlay, the lab's switch.
pub const UNDERLAY: &str = "underlay";
/// The directory of the host outside the cluster (`exec outside -- ...`).
pub const OUTSIDE: &str = "outside";
/// The demo's ClusterIP (in Cilium's default service CIDR style), clear
/// of the cluster DNS's.
pub const DEMO_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 20);
/// The kube-dns Service's ClusterIP, kubelets' `clusterDNS`: the tenth
/// address of the service range, as kubeadm picks it.
pub const DNS_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);

pub fn root() -> PathBuf {
    std::env::var_os("CILIUM_LAB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/cilium-lab"))
}

/// The directory of a machine of the lab: a node (`node3`) or `underlay`.
pub fn machine_dir(name: &str) -> NodeDir {
    NodeDir::new(root().join(name))
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
    format!(
        "cilium-lab-{:08x}-{}",
        h.finish() as u32,
        topology::node_name(index)
    )
}

/// Nodes that are up, in order.
pub fn running_nodes() -> Vec<(usize, NodeDir, i32)> {
    let mut nodes: Vec<(usize, NodeDir, i32)> = std::fs::read_dir(root())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let index = topology::node_index(&e.file_name().to_string_lossy())?;
            let l = machine_dir(&topology::node_name(index));
            let pid = l.running_holder()?;
            Some((index, l, pid))
        })
        .collect();
    nodes.sort_by_key(|(i, _, _)| *i);
    nodes
}

/// What the lab keeps in a machine's directory besides the node's own
/// files: the holder's pid and ready files, the daemons' logs.
pub trait Holder {
    fn holder_pid_file(&self) -> PathBuf;
    fn ready_file(&self) -> PathBuf;
    fn log(&self, name: &str) -> PathBuf;
    /// The holder's pid when the machine is up.
    fn running_holder(&self) -> Option<i32>;
    /// Pods of the node: the namespace files under netns/.
    fn pods(&self) -> Vec<String>;
}

impl Holder for NodeDir {
    fn holder_pid_file(&self) -> PathBuf {
        self.dir.join("holder.pid")
    }
    fn ready_file(&self) -> PathBuf {
        self.dir.join("ready")
    }
    fn log(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.log"))
    }

    fn running_holder(&self) -> Option<i32> {
        let pid: i32 = std::fs::read_to_string(self.holder_pid_file())
            .ok()?
            .trim()
            .parse()
            .ok()?;
        alive(pid).then_some(pid)
    }

    fn pods(&self) -> Vec<String> {
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
    enter(
        holder,
        &[("mnt", libc::CLONE_NEWNS), ("net", libc::CLONE_NEWNET)],
    )
}

/// `enter_node`, and a real node's PID and UTS namespaces: the children
/// this process starts after are processes of the node (a tool that reads
/// /proc/self, as crictl does, finds itself in the node's /proc).
pub fn enter_real_node(holder: i32) -> anyhow::Result<()> {
    enter(
        holder,
        &[
            ("pid", libc::CLONE_NEWPID),
            ("uts", libc::CLONE_NEWUTS),
            ("mnt", libc::CLONE_NEWNS),
            ("net", libc::CLONE_NEWNET),
        ],
    )
}

fn enter(holder: i32, namespaces: &[(&str, libc::c_int)]) -> anyhow::Result<()> {
    // all opened first: a real node's mount namespace has a /proc of its
    // own PID namespace, where the holder's pid is not
    let mut opened = Vec::new();
    for &(ns, flag) in namespaces {
        let path = format!("/proc/{holder}/ns/{ns}");
        let f = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
        opened.push((path, f, flag));
    }
    for (path, f, flag) in opened {
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
