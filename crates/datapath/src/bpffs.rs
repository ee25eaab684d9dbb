//! Making sure a BPF filesystem is mounted where pins are expected.

use crate::Error;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const BPF_FS_MAGIC: i64 = 0xcafe4a11;

/// True when `path` is the root of (or inside) a mounted bpffs.
pub fn is_bpffs(path: &Path) -> Result<bool, Error> {
    let c = CString::new(path.as_os_str().as_bytes()).map_err(|e| {
        Error::io(
            "statfs",
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
        )
    })?;
    // SAFETY: statfs writes into a zeroed struct we own; c is NUL-terminated.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return Err(Error::io("statfs", path, std::io::Error::last_os_error()));
    }
    Ok(st.f_type as i64 == BPF_FS_MAGIC)
}

/// Mounts a bpffs at `root` unless one is already there, and creates the
/// directory for global pins. Returns true when it mounted.
pub fn ensure_mounted(root: &Path) -> Result<bool, Error> {
    std::fs::create_dir_all(root).map_err(|e| Error::io("creating", root, e))?;
    let mounted = if is_bpffs(root)? {
        false
    } else {
        let target = CString::new(root.as_os_str().as_bytes()).map_err(|e| {
            Error::io(
                "mount",
                root,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
            )
        })?;
        // SAFETY: all pointers are valid NUL-terminated strings for the call.
        let ret = unsafe {
            libc::mount(
                c"bpffs".as_ptr(),
                target.as_ptr(),
                c"bpf".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if ret != 0 {
            return Err(Error::io(
                "mounting bpffs at",
                root,
                std::io::Error::last_os_error(),
            ));
        }
        tracing::info!(subsys = "datapath", path = %root.display(), "Mounted BPF filesystem");
        true
    };
    let globals = root.join(abi::maps::GLOBALS_DIR);
    std::fs::create_dir_all(&globals).map_err(|e| Error::io("creating", &globals, e))?;
    Ok(mounted)
}
