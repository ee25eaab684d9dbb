//! Mounting cgroup v2 where socket LB attaches (Cilium's `cilium-mount`).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// What `ensure_mounted` found or did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Mounted,
    AlreadyMounted,
    /// Something else is mounted there (its filesystem magic).
    OtherFilesystem(i64),
}

fn c_path(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "path with NUL"))
}

fn fs_magic(p: &Path) -> std::io::Result<i64> {
    let c = c_path(p)?;
    // SAFETY: statfs writes into the struct we own.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_type as i64)
}

/// Whether `p` is a mount point: its device differs from its parent's.
fn is_mount_point(p: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let parent = p.parent().unwrap_or(Path::new("/"));
    Ok(std::fs::metadata(p)?.dev() != std::fs::metadata(parent)?.dev() || p == Path::new("/"))
}

/// Mounts cgroup v2 at `path` unless it is there already.
pub fn ensure_mounted(path: &Path) -> std::io::Result<Outcome> {
    if path.exists() {
        let magic = fs_magic(path)?;
        if magic == CGROUP2_SUPER_MAGIC {
            return Ok(Outcome::AlreadyMounted);
        }
        if is_mount_point(path)? {
            return Ok(Outcome::OtherFilesystem(magic));
        }
    } else {
        std::fs::create_dir_all(path)?;
    }
    let (src, target, fstype) = (c"none", c_path(path)?, c"cgroup2");
    // SAFETY: valid C strings; no data argument.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Outcome::Mounted)
}
