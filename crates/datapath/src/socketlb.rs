//! Socket LB: bpf_sock's programs on the node's cgroup v2 root.
//!
//! Each program is held by a link pinned at
//! `<bpffs>/cilium/socketlb/links/cgroup/<program>` (Cilium's layout), so
//! connect() keeps being balanced while the agent is down. A new agent swaps
//! its programs into the same links in one step; a link left on another
//! cgroup (cgroup-root changed) or on a removed one is replaced.

use crate::loader::{load_object, MapSizes};
use crate::objects;
use crate::{sys, AttachError, Error};
use aya::programs::links::{CgroupAttachMode, FdLink};
use aya::programs::CgroupSockAddr;
use aya::Ebpf;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// bpf_sock's programs, in the order they are attached.
pub const PROGRAMS: [&str; 4] = [
    "cil_sock4_connect",
    "cil_sock4_sendmsg",
    "cil_sock4_recvmsg",
    "cil_sock4_getpeername",
];

/// The IPv6 hooks the dual-stack build adds.
pub const PROGRAMS_V6: [&str; 4] = [
    "cil_sock6_connect",
    "cil_sock6_sendmsg",
    "cil_sock6_recvmsg",
    "cil_sock6_getpeername",
];

/// The programs a node of these families attaches.
fn programs(ipv6: bool) -> impl Iterator<Item = &'static str> {
    PROGRAMS
        .into_iter()
        .chain(PROGRAMS_V6.into_iter().filter(move |_| ipv6))
}

const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// The cookie of the calling thread's network namespace (`SO_NETNS_COOKIE`
/// of a socket made in it), which bpf_get_netns_cookie() gives a socket
/// program for sockets of that namespace.
pub fn own_netns_cookie() -> std::io::Result<u64> {
    use std::os::fd::AsRawFd;
    let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: the buffer is a u64 and len says its size
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NETNS_COOKIE,
            (&mut cookie as *mut u64).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cookie)
}

/// `<bpffs>/cilium/socketlb/links/cgroup`.
pub fn links_dir(bpffs_root: &Path) -> PathBuf {
    bpffs_root.join("cilium/socketlb/links/cgroup")
}

/// bpf_sock, loaded and verified, with its maps shared through the pins
/// under `globals`.
pub struct SocketLb {
    ebpf: Ebpf,
    ipv6: bool,
}

impl SocketLb {
    /// `sizes` must be the node's: a map sized otherwise would count as
    /// incompatible and replace the pinned one (and its contents).
    pub fn load(globals: &Path, sizes: &MapSizes) -> Result<Self, Error> {
        let mut ebpf = load_object(sizes.objects().sock, globals, &sizes.overrides())?;
        for name in programs(sizes.ipv6) {
            let prog = program(&mut ebpf, name)?;
            crate::loader::verify(|| prog.load()).map_err(|e| program_error(name, e))?;
        }
        Ok(Self {
            ebpf,
            ipv6: sizes.ipv6,
        })
    }

    /// Attaches every program to `cgroup` (a cgroup v2 directory).
    pub fn attach(&mut self, bpffs_root: &Path, cgroup: &Path) -> Result<(), Error> {
        let fail = |program: &str, cause: AttachError| Error::Attach {
            program: program.to_owned(),
            device: cgroup.display().to_string(),
            cause: Box::new(cause),
        };
        check_cgroup2(cgroup).map_err(|m| fail(PROGRAMS[0], m))?;
        let cgroup_dir =
            std::fs::File::open(cgroup).map_err(|e| Error::io("opening", cgroup, e))?;
        let cgroup_id = cgroup_dir
            .metadata()
            .map_err(|e| Error::io("reading", cgroup, e))?
            .ino();
        let dir = links_dir(bpffs_root);
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("creating", &dir, e))?;
        // a node that turned IPv6 off keeps no IPv6 hook
        if !self.ipv6 {
            for name in PROGRAMS_V6 {
                let _ = std::fs::remove_file(dir.join(name));
            }
        }
        for name in programs(self.ipv6) {
            let prog = program(&mut self.ebpf, name)?;
            let pin = dir.join(name);
            if replace_pinned(prog, &pin, cgroup_id) {
                continue;
            }
            let _ = std::fs::remove_file(&pin);
            let id = prog
                .attach(&cgroup_dir, CgroupAttachMode::default())
                .map_err(|e| fail(name, e.into()))?;
            let link: FdLink = prog
                .take_link(id)
                .map_err(|e| fail(name, e.into()))?
                .try_into()
                .map_err(|e: aya::programs::links::LinkError| fail(name, e.into()))?;
            link.pin(&pin).map_err(|source| {
                fail(
                    name,
                    AttachError::Pin {
                        path: pin.clone(),
                        source,
                    },
                )
            })?;
        }
        Ok(())
    }
}

/// Removes the pinned links, which detaches the programs (bpf-lb-sock
/// turned off, or cleanup).
pub fn detach(bpffs_root: &Path) {
    crate::attach::remove_links(&links_dir(bpffs_root));
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut CgroupSockAddr, Error> {
    ebpf.program_mut(name)
        .ok_or_else(|| Error::NoProgram {
            object: objects::BPF_SOCK.name,
            program: name.to_owned(),
        })?
        .try_into()
        .map_err(|e| program_error(name, e))
}

fn program_error(name: &str, e: aya::programs::ProgramError) -> Error {
    Error::Program {
        object: objects::BPF_SOCK.name,
        program: name.to_owned(),
        source: Box::new(e),
    }
}

/// Swaps `prog` into the link pinned at `pin` if that link is live and on
/// the cgroup `cgroup_id`; false when there is no such link to reuse.
fn replace_pinned(prog: &CgroupSockAddr, pin: &Path, cgroup_id: u64) -> bool {
    let Ok(link) = sys::obj_get(pin) else {
        return false;
    };
    match sys::link_cgroup_id(link.as_fd()) {
        Ok(id) if id == cgroup_id => {}
        _ => return false,
    }
    let Ok(prog_fd) = prog.fd() else {
        return false;
    };
    match sys::link_update(link.as_fd(), prog_fd.as_fd()) {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(subsys = "socketlb", pin = %pin.display(), error = %e, "pinned link is stale");
            false
        }
    }
}

fn check_cgroup2(path: &Path) -> Result<(), AttachError> {
    use std::os::unix::ffi::OsStrExt;
    let cpath = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: statfs writes into the zeroed struct we own; cpath outlives it.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(cpath.as_ptr(), &mut st) } != 0 {
        return Err(AttachError::Statfs(std::io::Error::last_os_error()));
    }
    if st.f_type as i64 != CGROUP2_SUPER_MAGIC {
        return Err(AttachError::NotCgroup2);
    }
    Ok(())
}
