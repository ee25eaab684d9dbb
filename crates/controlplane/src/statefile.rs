//! Replacing a state file whole, so that a killed agent leaves either the
//! old content or the new one under the name, never half of either.
//!
//! The state lives for one boot, like Cilium's `/var/run/cilium`, so
//! surviving a killed agent needs only the page cache: no fsync. The usual
//! write-then-rename is not free on ext4 all the same: renaming over an
//! existing file starts writeback of the new one first (`auto_da_alloc`,
//! ext4's guard for editors that skip fsync), about 0.3-0.6 ms on this
//! machine kind, and the IPAM file is replaced twice per pod ADD. Swapping
//! the two names (`RENAME_EXCHANGE`) is just as atomic and triggers no
//! writeback; the old content then sits under the temporary name until it
//! is unlinked.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Where the next content is written before it takes `path`'s name.
fn staging(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_owned();
    name.push(".tmp");
    path.with_file_name(name)
}

fn c_path(path: &Path) -> std::io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "NUL in path"))
}

/// Swaps the names of two existing files in one step.
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    let (a, b) = (c_path(a)?, c_path(b)?);
    // SAFETY: both are NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Puts `body` under `path` atomically (see the module comment).
pub fn replace(path: &Path, body: &[u8]) -> std::io::Result<()> {
    let tmp = staging(path);
    // A fresh file: truncating one that still holds unwritten data would
    // start its writeback too.
    match std::fs::remove_file(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)?
        .write_all(body)?;
    match exchange(&tmp, path) {
        Ok(()) => std::fs::remove_file(&tmp),
        // Nothing to swap with yet, a filesystem that cannot swap, or a
        // seccomp filter that refuses renameat2: the plain rename is just
        // as atomic.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(libc::ENOENT | libc::EINVAL | libc::ENOSYS | libc::EPERM)
            ) =>
        {
            std::fs::rename(&tmp, path)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_holds_the_newest_content_and_nothing_is_left_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        replace(&path, b"first").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        replace(&path, b"second, longer").unwrap();
        replace(&path, b"third").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"third");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["state.json"]);
    }

    #[test]
    fn a_staging_file_left_by_a_killed_writer_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        replace(&path, b"kept").unwrap();
        std::fs::write(staging(&path), b"half writ").unwrap();
        replace(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert!(!staging(&path).exists());
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent").join("state.json");
        assert!(replace(&path, b"x").is_err());
        assert!(!path.exists());
    }
}
