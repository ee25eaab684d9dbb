//! The compiled BPF objects, embedded at build time (see build.rs).

/// An embedded, compiled BPF object.
#[derive(Clone, Copy)]
pub struct Object {
    pub name: &'static str,
    pub bytes: &'static [u8],
}

impl Object {
    /// Gives back the pages of the embedded bytes once a load has read
    /// them. They are the binary's read-only data, mapped from its file:
    /// a later load reads them in again, but an idle agent no longer keeps
    /// the half megabyte of the objects it loaded in its RSS.
    pub fn release(&self) {
        let page = crate::sys::page_size();
        let start = (self.bytes.as_ptr() as usize).div_ceil(page) * page;
        let end = (self.bytes.as_ptr() as usize + self.bytes.len()) / page * page;
        if end > start {
            // SAFETY: whole pages inside a read-only private file mapping
            // that is never written: dropping them changes no byte, the
            // next read faults the same contents back in from the file.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
}

/// Programs on pod veths: `cil_from_container`, ...
pub const BPF_LXC: Object = Object {
    name: "bpf_lxc.o",
    bytes: aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bpf_lxc.o")),
};

/// Programs on cilium_host: `cil_from_host`.
pub const BPF_HOST: Object = Object {
    name: "bpf_host.o",
    bytes: aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bpf_host.o")),
};

/// Programs on cilium_vxlan: `cil_from_overlay`.
pub const BPF_OVERLAY: Object = Object {
    name: "bpf_overlay.o",
    bytes: aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bpf_overlay.o")),
};

/// Socket LB on the node's cgroup: `cil_sock4_connect`, ...
pub const BPF_SOCK: Object = Object {
    name: "bpf_sock.o",
    bytes: aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bpf_sock.o")),
};

/// The dual-stack builds (`ENABLE_IPV6`): the IPv6 maps and paths besides
/// the IPv4 ones.
pub const BPF_LXC_V6: Object = Object {
    name: "bpf_lxc_v6.o",
    bytes: aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bpf_lxc_v6.o")),
};

pub const BPF_HOST_V6: Object = Object {
    name: "bpf_host_v6.o",
    bytes: aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bpf_host_v6.o")),
};

pub const BPF_OVERLAY_V6: Object = Object {
    name: "bpf_overlay_v6.o",
    bytes: aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bpf_overlay_v6.o")),
};

pub const BPF_SOCK_V6: Object = Object {
    name: "bpf_sock_v6.o",
    bytes: aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/bpf_sock_v6.o")),
};

/// The objects a node runs: the dual-stack builds when IPv6 is on.
#[derive(Clone, Copy)]
pub struct Family {
    pub lxc: Object,
    pub host: Object,
    pub overlay: Object,
    pub sock: Object,
}

impl Family {
    pub const fn of(ipv6: bool) -> Self {
        if ipv6 {
            Self {
                lxc: BPF_LXC_V6,
                host: BPF_HOST_V6,
                overlay: BPF_OVERLAY_V6,
                sock: BPF_SOCK_V6,
            }
        } else {
            Self {
                lxc: BPF_LXC,
                host: BPF_HOST,
                overlay: BPF_OVERLAY,
                sock: BPF_SOCK,
            }
        }
    }
}
