//! The images the lab imports, each built from paths it is given and the
//! host's installed Debian packages; no network.

pub mod agent;
pub mod agnhost;
pub mod busybox;
pub mod coredns;
pub mod jessie_dnsutils;
pub mod pause;
pub mod test_images;

use std::path::Path;

use crate::host_files::HostFiles;
use crate::layer::Layer;
use crate::Error;

/// The PATH of Debian's and busybox's images.
pub const PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A user line of /etc/passwd and the group of the same name.
pub struct User {
    pub name: &'static str,
    pub uid: u32,
    pub home: &'static str,
    pub shell: &'static str,
}

pub const ROOT: User = User {
    name: "root",
    uid: 0,
    home: "/root",
    shell: "/bin/sh",
};

pub const NOBODY: User = User {
    name: "nobody",
    uid: 65534,
    home: "/nonexistent",
    shell: "/bin/false",
};

/// /etc/passwd with `users`, /etc/group with a group per user plus
/// `extra_groups` lines (already formatted).
pub fn add_accounts(layer: &mut Layer, users: &[User], extra_groups: &[&str]) -> Result<(), Error> {
    let passwd: String = users
        .iter()
        .map(|u| {
            format!(
                "{}:x:{}:{}:{}:{}:{}\n",
                u.name, u.uid, u.uid, u.name, u.home, u.shell
            )
        })
        .collect();
    let mut group: String = users
        .iter()
        .map(|u| format!("{}:x:{}:\n", u.name, u.uid))
        .collect();
    for g in extra_groups {
        group.push_str(g);
        group.push('\n');
    }
    layer.file_bytes("/etc/passwd", passwd, 0o644)?;
    layer.file_bytes("/etc/group", group, 0o644)
}

/// The directories every image here has: /tmp (sticky, world-writable),
/// /run with /var/run pointing at it, and the mount points runc fills.
pub fn add_base_dirs(layer: &mut Layer) -> Result<(), Error> {
    layer.dir("/tmp", 0o1777)?;
    layer.dir("/run", 0o755)?;
    layer.symlink("/var/run", "../run")?;
    for d in ["/proc", "/sys", "/dev", "/etc"] {
        layer.dir(d, 0o755)?;
    }
    layer.dir("/root", 0o700)
}

/// Debian 12's usrmerge: /bin, /sbin, /lib and /lib64 as the host has
/// them (symlinks into /usr), so host programs and libraries are found at
/// every path they are looked up by.
pub fn add_usrmerge(layer: &mut Layer, host: &mut HostFiles) -> Result<(), Error> {
    for top in ["/bin", "/sbin", "/lib", "/lib64"] {
        host.add_path(layer, top)?;
    }
    Ok(())
}

/// glibc without /etc/nsswitch.conf asks DNS before /etc/hosts (which
/// kubelet fills); Debian's order is files first.
pub fn add_nsswitch(layer: &mut Layer) -> Result<(), Error> {
    layer.file_bytes(
        "/etc/nsswitch.conf",
        "passwd: files\ngroup: files\nhosts: files dns\n",
        0o644,
    )
}

/// Reads a required input file's metadata, naming it when it is missing.
pub(crate) fn require(path: &Path) -> Result<(), Error> {
    std::fs::metadata(path)
        .map(|_| ())
        .map_err(|e| Error::io("reading", path, e))
}
