//! Thin wrappers over the bpf(2) map commands aya does not expose for raw
//! byte keys and values (LPM keys with a prefix header, per-CPU values).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
const BPF_LINK_UPDATE: libc::c_long = 30;

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

fn bpf(cmd: libc::c_long, attr: &mut MapElemAttr) -> io::Result<()> {
    bpf_attr(cmd, attr)
}

/// bpf(2) with `attr`, a `#[repr(C)]` prefix of `union bpf_attr` that the
/// command reads; the kernel's non-negative answer.
fn bpf_call<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: callers pass a fully initialised repr(C) bpf_attr prefix for
    // cmd, and the size passed is that prefix's.
    let ret =
        unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn bpf_attr<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<()> {
    bpf_call(cmd, attr).map(drop)
}

/// A bpf(2) command that answers with a new file descriptor.
fn bpf_new_fd<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<std::os::fd::OwnedFd> {
    let fd = bpf_call(cmd, attr)?;
    // SAFETY: the kernel returned a fresh descriptor we now own.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) })
}

fn attr(fd: BorrowedFd<'_>, key: *const u8, value: *const u8, flags: u64) -> MapElemAttr {
    MapElemAttr {
        map_fd: fd.as_raw_fd() as u32,
        _pad: 0,
        key: key as u64,
        value: value as u64,
        flags,
    }
}

/// Looks a key up; Ok(false) when absent.
pub fn lookup(fd: BorrowedFd<'_>, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
    match bpf(
        BPF_MAP_LOOKUP_ELEM,
        &mut attr(fd, key.as_ptr(), value.as_mut_ptr(), 0),
    ) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

pub fn update(fd: BorrowedFd<'_>, key: &[u8], value: &[u8], flags: u64) -> io::Result<()> {
    bpf(
        BPF_MAP_UPDATE_ELEM,
        &mut attr(fd, key.as_ptr(), value.as_ptr(), flags),
    )
}

/// Deletes a key; Ok(false) when it was absent.
pub fn delete(fd: BorrowedFd<'_>, key: &[u8]) -> io::Result<bool> {
    match bpf(
        BPF_MAP_DELETE_ELEM,
        &mut attr(fd, key.as_ptr(), std::ptr::null(), 0),
    ) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Writes the key after `key` (or the first key when `key` is None) into
/// `next`; Ok(false) at the end of the map.
pub fn next_key(fd: BorrowedFd<'_>, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
    let key_ptr = key.map_or(std::ptr::null(), <[u8]>::as_ptr);
    match bpf(
        BPF_MAP_GET_NEXT_KEY,
        &mut attr(fd, key_ptr, next.as_mut_ptr(), 0),
    ) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The kernel's page size: what ring buffers are sized in and what
/// madvise(2) ranges are aligned to.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Number of possible CPUs: the kernel sizes per-CPU values by it.
pub fn possible_cpus() -> io::Result<usize> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")?;
    parse_cpu_list(text.trim())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad cpu list {text:?}")))
}

fn parse_cpu_list(list: &str) -> Option<usize> {
    let mut max = None;
    for part in list.split(',') {
        let last = part.rsplit('-').next()?;
        let n: usize = last.trim().parse().ok()?;
        max = Some(max.map_or(n, |m: usize| m.max(n)));
    }
    max.map(|m| m + 1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_list_counts_highest_cpu() {
        assert_eq!(super::parse_cpu_list("0-1"), Some(2));
        assert_eq!(super::parse_cpu_list("0"), Some(1));
        assert_eq!(super::parse_cpu_list("0-3,8-11"), Some(12));
        assert_eq!(super::parse_cpu_list("x"), None);
    }
}

const BPF_OBJ_GET: libc::c_long = 7;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

/// The identity of a map as the kernel reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapMeta {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
}

/// Opens a pinned object by path.
pub fn obj_get(path: &std::path::Path) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    #[repr(C)]
    struct ObjGetAttr {
        pathname: u64,
        bpf_fd: u32,
        file_flags: u32,
        path_fd: i32,
        _pad: u32,
    }
    let cpath = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut attr = ObjGetAttr {
        pathname: cpath.as_ptr() as u64,
        bpf_fd: 0,
        file_flags: 0,
        path_fd: 0,
        _pad: 0,
    };
    // cpath outlives the call
    bpf_new_fd(BPF_OBJ_GET, &mut attr)
}

/// BPF_OBJ_GET_INFO_BY_FD into `info` (the kernel fills what fits).
fn obj_info(fd: BorrowedFd<'_>, info: &mut [u32]) -> io::Result<()> {
    #[repr(C)]
    struct InfoAttr {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    bpf_attr(
        BPF_OBJ_GET_INFO_BY_FD,
        &mut InfoAttr {
            bpf_fd: fd.as_raw_fd() as u32,
            info_len: std::mem::size_of_val(info) as u32,
            info: info.as_mut_ptr() as u64,
        },
    )
}

/// Reads a map's type, sizes and flags.
pub fn map_meta(fd: BorrowedFd<'_>) -> io::Result<MapMeta> {
    let mut info = [0u32; 20];
    obj_info(fd, &mut info)?;
    // struct bpf_map_info: type, id, key_size, value_size, max_entries, map_flags, ...
    Ok(MapMeta {
        map_type: info[0],
        key_size: info[2],
        value_size: info[3],
        max_entries: info[4],
        map_flags: info[5],
    })
}

const BPF_MAP_GET_FD_BY_ID: libc::c_long = 14;

/// Opens a map by its kernel ID (what userspace reads from a map-in-map).
pub fn map_fd_by_id(id: u32) -> io::Result<std::os::fd::OwnedFd> {
    #[repr(C)]
    struct ByIdAttr {
        map_id: u32,
        next_id: u32,
        open_flags: u32,
    }
    let mut attr = ByIdAttr {
        map_id: id,
        next_id: 0,
        open_flags: 0,
    };
    bpf_new_fd(BPF_MAP_GET_FD_BY_ID, &mut attr)
}

/// The kernel's ID of a map (what a map-in-map lookup returns).
pub fn map_id(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut info = [0u32; 20];
    obj_info(fd, &mut info)?;
    Ok(info[1])
}

/// The cgroup ID (its directory's inode) a cgroup link is attached to; 0
/// once that cgroup is gone.
pub fn link_cgroup_id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // struct bpf_link_info: type, id, prog_id, then (8-aligned) the
    // cgroup variant: cgroup_id u64, attach_type u32.
    let mut info = [0u32; 8];
    obj_info(fd, &mut info)?;
    Ok(u64::from(info[4]) | u64::from(info[5]) << 32)
}

#[repr(C)]
struct LinkUpdateAttr {
    link_fd: u32,
    new_prog_fd: u32,
    flags: u32,
    old_prog_fd: u32,
}

/// Swaps the program of a live link in one step (BPF_LINK_UPDATE), so
/// the hook is never without a program.
pub fn link_update(link: BorrowedFd<'_>, prog: BorrowedFd<'_>) -> io::Result<()> {
    bpf_attr(
        BPF_LINK_UPDATE,
        &mut LinkUpdateAttr {
            link_fd: link.as_raw_fd() as u32,
            new_prog_fd: prog.as_raw_fd() as u32,
            flags: 0,
            old_prog_fd: 0,
        },
    )
}

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_OBJ_PIN: libc::c_long = 6;

#[repr(C)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

/// Creates a map (BPF_MAP_CREATE); `inner` is the template of a
/// map-in-map's values. The kernel keeps the first 15 bytes of `name`.
pub fn map_create(
    meta: &MapMeta,
    inner: Option<BorrowedFd<'_>>,
    name: &str,
) -> io::Result<std::os::fd::OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type: meta.map_type,
        key_size: meta.key_size,
        value_size: meta.value_size,
        max_entries: meta.max_entries,
        map_flags: meta.map_flags,
        inner_map_fd: inner.map_or(0, |f| f.as_raw_fd() as u32),
        numa_node: 0,
        map_name: [0; 16],
    };
    for (d, s) in attr.map_name.iter_mut().zip(name.bytes().take(15)) {
        *d = s;
    }
    bpf_new_fd(BPF_MAP_CREATE, &mut attr)
}

/// Pins an object at `path` (BPF_OBJ_PIN).
pub fn obj_pin(fd: BorrowedFd<'_>, path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    #[repr(C)]
    struct PinAttr {
        pathname: u64,
        bpf_fd: u32,
        file_flags: u32,
    }
    let cpath = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    bpf_attr(
        BPF_OBJ_PIN,
        &mut PinAttr {
            pathname: cpath.as_ptr() as u64,
            bpf_fd: fd.as_raw_fd() as u32,
            file_flags: 0,
        },
    )
}
