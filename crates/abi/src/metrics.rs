//! `cilium_metrics`: per-CPU counters by reason and direction.

use crate::{assert_layout, Plain};

pub const DIR_INGRESS: u8 = 1;
pub const DIR_EGRESS: u8 = 2;
pub const DIR_SERVICE: u8 = 3;

pub const REASON_FORWARDED: u8 = 0;
/// Socket LB outcomes (counted, not drops).
pub const REASON_LB_NO_BACKEND_SLOT: u8 = 5;
pub const REASON_LB_NO_BACKEND: u8 = 6;
pub const REASON_LB_REVNAT_UPDATE: u8 = 7;
pub const REASON_LB_REVNAT_STALE: u8 = 8;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MetricsKey {
    pub reason: u8,
    pub dir: u8,
    pub line: u16,
    pub file: u8,
    pub reserved: [u8; 3],
}
assert_layout!(
    MetricsKey,
    size = 8,
    reason = 0,
    dir = 1,
    line = 2,
    file = 4
);
unsafe impl Plain for MetricsKey {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetricsValue {
    pub count: u64,
    pub bytes: u64,
}
assert_layout!(MetricsValue, size = 16, count = 0, bytes = 8);
unsafe impl Plain for MetricsValue {}

/// Cilium's name for a metrics direction.
pub fn direction_name(dir: u8) -> &'static str {
    match dir & 0x3 {
        DIR_INGRESS => "INGRESS",
        DIR_EGRESS => "EGRESS",
        DIR_SERVICE => "SERVICE",
        _ => "UNKNOWN",
    }
}

/// Cilium's text for a metrics reason: forwarded, a non-drop reason or a drop.
pub fn reason_text(reason: u8) -> String {
    match reason {
        0 => "Success".into(),
        3 => "Interface".into(),
        4 => "Interface Decrypted".into(),
        REASON_LB_NO_BACKEND_SLOT => "LB, sock cgroup: No backend slot entry found".into(),
        REASON_LB_NO_BACKEND => "LB, sock cgroup: No backend entry found".into(),
        REASON_LB_REVNAT_UPDATE => "LB, sock cgroup: Reverse entry update failed".into(),
        REASON_LB_REVNAT_STALE => "LB, sock cgroup: Reverse entry stale".into(),
        9 => "Fragmented packet".into(),
        10 => "Fragmented packet entry update failed".into(),
        11 => "Missed tail call to custom program".into(),
        code => crate::drop::reason_text(code)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("Unknown reason {code}")),
    }
}

/// Source file names for the `file` field of drop events and metrics.
pub fn source_file_name(id: u8) -> &'static str {
    match id {
        1 => "bpf_host.c",
        2 => "bpf_lxc.c",
        3 => "bpf_overlay.c",
        4 => "bpf_xdp.c",
        5 => "bpf_sock.c",
        6 => "bpf_network.c",
        _ => "",
    }
}
