//! The node's cgroups: one directory per hierarchy of the machine (every
//! cgroup v1 controller, `name=systemd`, and the v2 `unified` tree), under
//! the cgroup the lab runs in. The node's init joins them before it
//! unshares its cgroup namespace, so everything on the node (kubelet's
//! `kubepods`, containerd's shims, the agent's cgroup2 mount for socket LB)
//! sees the node's subtree as the whole tree and never the machine's.

use anyhow::Context;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// One mounted hierarchy of the machine, as /proc/self/mountinfo shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    /// Where the machine has it mounted (`/sys/fs/cgroup/cpu`).
    pub mount_point: PathBuf,
    /// `cgroup` (v1) or `cgroup2`.
    pub fstype: String,
    /// The v1 mount options that name it (`cpu`, `name=systemd`); empty for v2.
    pub options: String,
}

impl Hierarchy {
    /// The key this hierarchy has in /proc/self/cgroup (`cpu`,
    /// `name=systemd`, or empty for v2).
    fn key(&self) -> &str {
        &self.options
    }
}

/// The v1 options that say which controllers a hierarchy carries.
fn naming_options(super_options: &str) -> String {
    const NOT_NAMING: [&str; 6] = ["rw", "ro", "relatime", "noatime", "nosuid", "nodev"];
    super_options
        .split(',')
        .filter(|o| !NOT_NAMING.contains(o) && *o != "noexec" && !o.starts_with("release_agent"))
        .filter(|o| !o.starts_with("clone_children") && *o != "xattr" && *o != "nsdelegate")
        .collect::<Vec<_>>()
        .join(",")
}

/// The hierarchies in a mountinfo text.
pub fn parse_mountinfo(text: &str) -> Vec<Hierarchy> {
    let mut found = Vec::new();
    for line in text.lines() {
        // fields up to " - ", then fstype, source, super options
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mount_point = left.split_whitespace().nth(4).unwrap_or_default();
        let mut right = right.split_whitespace();
        let (Some(fstype), Some(_source), Some(super_options)) =
            (right.next(), right.next(), right.next())
        else {
            continue;
        };
        let options = match fstype {
            "cgroup" => naming_options(super_options),
            "cgroup2" => String::new(),
            _ => continue,
        };
        let h = Hierarchy {
            mount_point: PathBuf::from(mount_point),
            fstype: fstype.to_owned(),
            options,
        };
        // a hierarchy mounted twice is one hierarchy
        if !found.iter().any(|f: &Hierarchy| f.key() == h.key()) {
            found.push(h);
        }
    }
    found
}

/// Where this process is in each hierarchy, from a /proc/self/cgroup text:
/// `(key, path)` with the v1 key as the controllers listed there.
fn parse_self_cgroup(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, key, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some((key.to_owned(), path.to_owned()))
        })
        .collect()
}

/// The node's directory in every hierarchy of the machine.
#[derive(Clone, Debug)]
pub struct NodeCgroups {
    pub dirs: Vec<(Hierarchy, PathBuf)>,
}

impl NodeCgroups {
    /// The node's cgroups, named `name`, under the cgroups this process is
    /// in (not made yet).
    pub fn plan(name: &str) -> anyhow::Result<Self> {
        let mountinfo =
            std::fs::read_to_string("/proc/self/mountinfo").context("reading mountinfo")?;
        let own =
            std::fs::read_to_string("/proc/self/cgroup").context("reading /proc/self/cgroup")?;
        let own = parse_self_cgroup(&own);
        let mut dirs = Vec::new();
        for h in parse_mountinfo(&mountinfo) {
            let path = own
                .iter()
                .find(|(key, _)| {
                    // v1 keys list controllers in the kernel's order, which
                    // may differ from the mount options' order
                    let mut a: Vec<&str> = key.split(',').collect();
                    let mut b: Vec<&str> = h.key().split(',').collect();
                    a.sort_unstable();
                    b.sort_unstable();
                    a == b
                })
                .map(|(_, p)| p.trim_start_matches('/').to_owned())
                .unwrap_or_default();
            let dir = h.mount_point.join(path).join(name);
            dirs.push((h, dir));
        }
        anyhow::ensure!(
            !dirs.is_empty(),
            "no cgroup hierarchy is mounted on this machine"
        );
        Ok(Self { dirs })
    }

    /// Makes the directories; a cpuset child starts with no CPUs or memory
    /// nodes, so it gets its parent's.
    pub fn create(&self) -> anyhow::Result<()> {
        for (_, dir) in &self.dirs {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating cgroup {}", dir.display()))?;
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let parent = dir.parent().expect("a child").join(file);
                if let Ok(value) = std::fs::read_to_string(&parent) {
                    std::fs::write(dir.join(file), value.trim()).with_context(|| {
                        format!("copying {} into {}", parent.display(), dir.display())
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Moves the calling process into every one of them. Async-signal-safe
    /// enough for a child between fork and exec: writes only.
    pub fn join(&self) -> std::io::Result<()> {
        for (_, dir) in &self.dirs {
            std::fs::write(dir.join("cgroup.procs"), b"0")?;
        }
        Ok(())
    }

    /// Removes the node's cgroups, children first, once nothing runs in
    /// them (the node's processes may take a moment to be gone).
    pub fn remove(&self) {
        for (_, dir) in &self.dirs {
            remove_tree(dir);
        }
    }
}

fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    remove_dir(dir, Duration::from_secs(10));
}

/// Removes a cgroup's directory, waiting up to `patience` for the
/// processes in it to be gone (EBUSY until then).
pub fn remove_dir(dir: &Path, patience: Duration) {
    let t = std::time::Instant::now();
    loop {
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && t.elapsed() < patience => {
                std::thread::sleep(Duration::from_millis(100))
            }
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => break,
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                eprintln!("removing cgroup {}: {e}", dir.display());
                return;
            }
            _ => return,
        }
    }
    eprintln!(
        "cgroup {} still has processes; left in place",
        dir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
25 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 25 0:26 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:28 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
33 30 0:29 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
35 30 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
36 30 0:30 / /run/elsewhere rw,relatime - cgroup cgroup rw,name=systemd
";

    #[test]
    fn every_hierarchy_once_with_its_naming_options() {
        let h = parse_mountinfo(MOUNTINFO);
        let keys: Vec<(&str, &str)> = h
            .iter()
            .map(|h| (h.mount_point.to_str().unwrap(), h.options.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("/sys/fs/cgroup/cpu", "cpu"),
                ("/sys/fs/cgroup/cpuacct", "cpuacct"),
                ("/sys/fs/cgroup/memory", "memory"),
                ("/sys/fs/cgroup/systemd", "name=systemd"),
                ("/sys/fs/cgroup/unified", ""),
            ]
        );
        assert_eq!(h[4].fstype, "cgroup2");
    }

    #[test]
    fn own_cgroup_per_hierarchy() {
        let own = parse_self_cgroup("9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n");
        assert_eq!(
            own,
            [
                ("name=systemd".to_owned(), "/".to_owned()),
                ("memory".to_owned(), "/process_api/abc".to_owned()),
                (String::new(), "/".to_owned()),
            ]
        );
    }
}
