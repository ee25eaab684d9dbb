//! The compiled BPF objects, embedded at build time (see build.rs).

/// An embedded, compiled BPF object.
#[derive(Clone, Copy)]
pub struct Object {
    pub name: &'static str,
    pub bytes: &'static [u8],
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
