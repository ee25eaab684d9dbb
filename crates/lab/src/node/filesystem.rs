//! What the node's processes see of the machine's filesystem: made once by
//! the node's init in its own mount namespace, cut off from the machine's
//! (nothing mounted here appears on the host, nothing the node writes
//! lands in the host's /etc, /opt or /var).
//!
//! - /etc, /opt and /var are overlays of the machine's with the node's own
//!   upper directories, so kubelet, containerd and the DaemonSet's hostPath
//!   volumes (/etc/cni/net.d, /opt/cni/bin, /var/lib/kubelet, /var/log/pods,
//!   the sysctl drop-ins of apply-sysctl-overwrites) read the machine's
//!   files and write the node's.
//! - containerd's root is a plain directory of the node's (its overlayfs
//!   snapshotter cannot stack on an overlay).
//! - /run is the node's own tmpfs (sockets, /run/netns, /var/run/cilium,
//!   the xtables lock).
//! - /proc belongs to the node's PID namespace, so the DaemonSet's
//!   `nsenter --mount=/hostproc/1/ns/mnt` enters the node, not the machine;
//!   /sys is the node's network namespace's, with the cgroup hierarchies
//!   mounted again (the node's subtree, seen through its cgroup namespace)
//!   and no bpffs: the mount-bpf-fs init container mounts the node's own.
//! - The kernel settings kubelet writes (`protectKernelDefaults: false`)
//!   are not namespaced: each is shadowed by a file of the node's, so the
//!   machine's values never change.
//!
//! Mounts made below / are then shared within the node, so the DaemonSet's
//! `Bidirectional` bpffs mount propagates from its container to the node.

use super::cgroups::Hierarchy;
use anyhow::Context;
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The settings kubelet's container manager writes when they differ
/// (`setupKernelTunables`), under /proc/sys.
pub const KUBELET_SYSCTLS: [&str; 6] = [
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

/// The directories under the node's lab directory that back its
/// filesystem.
pub struct Backing {
    pub dir: PathBuf,
}

impl Backing {
    /// The overlay upper dir for a machine directory (`/etc`).
    pub fn upper(&self, of: &str) -> PathBuf {
        self.dir.join("root").join(of.trim_start_matches('/'))
    }
    fn work(&self, of: &str) -> PathBuf {
        self.dir
            .join("overlay-work")
            .join(of.trim_start_matches('/'))
    }
    /// containerd's root.
    pub fn containerd_root(&self) -> PathBuf {
        self.dir.join("containerd")
    }
    fn sysctl_shadow(&self, name: &str) -> PathBuf {
        self.dir.join("sysctl").join(name.replace('/', "."))
    }
}

fn c(s: &Path) -> anyhow::Result<CString> {
    CString::new(s.as_os_str().as_encoded_bytes()).context("a path with NUL")
}

/// mount(2); `data` empty for none.
pub(crate) fn mount(
    src: &str,
    target: &Path,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> anyhow::Result<()> {
    let (src_c, target_c) = (CString::new(src)?, c(target)?);
    let fs_c = CString::new(fstype)?;
    let data_c = CString::new(data)?;
    // SAFETY: valid C strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            src_c.as_ptr(),
            target_c.as_ptr(),
            if fstype.is_empty() {
                std::ptr::null()
            } else {
                fs_c.as_ptr()
            },
            flags,
            if data.is_empty() {
                std::ptr::null()
            } else {
                data_c.as_ptr().cast()
            },
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| {
            format!("mounting {fstype:?} {src} on {} ({data})", target.display())
        });
    }
    Ok(())
}

fn bind(src: &Path, target: &Path) -> anyhow::Result<()> {
    mount(
        src.to_str().context("a non-UTF-8 path")?,
        target,
        "",
        libc::MS_BIND,
        "",
    )
}

/// Builds the node's view; the calling process is the node's init, alone
/// in fresh mount, network and PID namespaces (and its cgroup namespace).
pub fn build(backing: &Backing, hierarchies: &[Hierarchy]) -> anyhow::Result<()> {
    mount(
        "none",
        Path::new("/"),
        "",
        libc::MS_REC | libc::MS_PRIVATE,
        "",
    )?;

    for dir in ["/etc", "/opt", "/var"] {
        let (upper, work) = (backing.upper(dir), backing.work(dir));
        for d in [&upper, &work] {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        let data = format!(
            "lowerdir={dir},upperdir={},workdir={}",
            upper.display(),
            work.display()
        );
        mount("overlay", Path::new(dir), "overlay", 0, &data)?;
    }
    let containerd = Path::new("/var/lib/containerd");
    for d in [containerd, &backing.containerd_root()] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    bind(&backing.containerd_root(), containerd)?;

    mount(
        "tmpfs",
        Path::new("/run"),
        "tmpfs",
        libc::MS_NOSUID | libc::MS_NODEV,
        "mode=755",
    )?;
    mount(
        "proc",
        Path::new("/proc"),
        "proc",
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        "",
    )?;
    shadow_sysctls(backing)?;

    let sys = Path::new("/sys");
    mount(
        "sysfs",
        sys,
        "sysfs",
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        "",
    )?;
    let cgroup = Path::new("/sys/fs/cgroup");
    mount(
        "tmpfs",
        cgroup,
        "tmpfs",
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        "mode=755",
    )?;
    for h in hierarchies {
        let name = h
            .mount_point
            .strip_prefix(cgroup)
            .unwrap_or(&h.mount_point)
            .to_owned();
        let target = cgroup.join(&name);
        std::fs::create_dir_all(&target)
            .with_context(|| format!("creating {}", target.display()))?;
        mount(
            "cgroup",
            &target,
            &h.fstype,
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            &h.options,
        )?;
    }

    mount(
        "none",
        Path::new("/"),
        "",
        libc::MS_REC | libc::MS_SHARED,
        "",
    )?;
    Ok(())
}

/// Binds a file of the node's, holding the machine's value, over each
/// setting kubelet may write.
fn shadow_sysctls(backing: &Backing) -> anyhow::Result<()> {
    for name in KUBELET_SYSCTLS {
        let real = Path::new("/proc/sys").join(name);
        let Ok(value) = std::fs::read_to_string(&real) else {
            continue; // not in this kernel
        };
        let shadow = backing.sysctl_shadow(name);
        if let Some(d) = shadow.parent() {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        std::fs::write(&shadow, value).with_context(|| format!("writing {}", shadow.display()))?;
        bind(&shadow, &real)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backing_paths_stay_under_the_node_dir() {
        let b = Backing {
            dir: "/tmp/lab/node1".into(),
        };
        assert_eq!(b.upper("/etc"), Path::new("/tmp/lab/node1/root/etc"));
        assert_eq!(b.work("/var"), Path::new("/tmp/lab/node1/overlay-work/var"));
        assert_eq!(
            b.sysctl_shadow("kernel/keys/root_maxkeys"),
            Path::new("/tmp/lab/node1/sysctl/kernel.keys.root_maxkeys")
        );
    }
}
