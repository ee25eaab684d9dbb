//! Records the datapath writes to the `cilium_events` perf ring.

use crate::{assert_layout, Plain};

pub const NOTIFY_UNSPEC: u8 = 0;
pub const NOTIFY_DROP: u8 = 1;
pub const NOTIFY_DBG_MSG: u8 = 2;
pub const NOTIFY_DBG_CAPTURE: u8 = 3;
pub const NOTIFY_TRACE: u8 = 4;
pub const NOTIFY_POLICY_VERDICT: u8 = 5;
pub const NOTIFY_TRACE_SOCK: u8 = 7;

pub const NOTIFY_CAPTURE_VER: u16 = 1;
pub const TRACE_PAYLOAD_LEN: u32 = 128;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotifyCommonHdr {
    pub kind: u8,
    pub subtype: u8,
    pub source: u16,
    pub hash: u32,
}
assert_layout!(
    NotifyCommonHdr,
    size = 8,
    kind = 0,
    subtype = 1,
    source = 2,
    hash = 4
);
unsafe impl Plain for NotifyCommonHdr {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropNotify {
    pub hdr: NotifyCommonHdr,
    pub len_orig: u32,
    pub len_cap: u16,
    pub version: u16,
    pub src_label: u32,
    pub dst_label: u32,
    pub dst_id: u32,
    pub line: u16,
    pub file: u8,
    pub ext_error: i8,
    pub ifindex: u32,
}
assert_layout!(
    DropNotify,
    size = 36,
    len_orig = 8,
    len_cap = 12,
    version = 14,
    src_label = 16,
    dst_label = 20,
    dst_id = 24,
    line = 28,
    file = 30,
    ext_error = 31,
    ifindex = 32
);
unsafe impl Plain for DropNotify {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceNotify {
    pub hdr: NotifyCommonHdr,
    pub len_orig: u32,
    pub len_cap: u16,
    pub version: u16,
    pub src_label: u32,
    pub dst_label: u32,
    pub dst_id: u16,
    pub reason: u8,
    pub flags: u8,
    pub ifindex: u32,
    pub orig_ip: [u8; 16],
}
assert_layout!(
    TraceNotify,
    size = 48,
    len_orig = 8,
    len_cap = 12,
    version = 14,
    src_label = 16,
    dst_label = 20,
    dst_id = 24,
    reason = 26,
    flags = 27,
    ifindex = 28,
    orig_ip = 32
);
unsafe impl Plain for TraceNotify {}

/// `debug_capture_msg`: a packet captured where a program takes it
/// (subtype: `DBG_CAPTURE_*`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DebugCaptureMsg {
    pub hdr: NotifyCommonHdr,
    pub len_orig: u32,
    pub len_cap: u16,
    pub version: u16,
    pub arg1: u32,
    pub arg2: u32,
}
assert_layout!(
    DebugCaptureMsg,
    size = 24,
    len_orig = 8,
    len_cap = 12,
    arg1 = 16,
    arg2 = 20
);
unsafe impl Plain for DebugCaptureMsg {}

/// Capture points (`DBG_CAPTURE_*`), Cilium 1.16's numbers; 1-3 are
/// reserved there. The datapath captures only deliveries, as 1.16 does.
pub const DBG_CAPTURE_UNSPEC: u8 = 0;
pub const DBG_CAPTURE_DELIVERY: u8 = 4;
pub const DBG_CAPTURE_FROM_LB: u8 = 5;
pub const DBG_CAPTURE_AFTER_V46: u8 = 6;
pub const DBG_CAPTURE_AFTER_V64: u8 = 7;
pub const DBG_CAPTURE_PROXY_PRE: u8 = 8;
pub const DBG_CAPTURE_PROXY_POST: u8 = 9;
pub const DBG_CAPTURE_SNAT_PRE: u8 = 10;
pub const DBG_CAPTURE_SNAT_POST: u8 = 11;

/// Cilium 1.16's text for a capture point (`subTypeString` in
/// pkg/monitor/datapath_debug.go), as `cilium monitor` prints it before
/// the capture's argument (an ifindex, or a proxy port).
pub fn capture_point_text(subtype: u8) -> &'static str {
    match subtype {
        DBG_CAPTURE_DELIVERY => "Delivery to ifindex",
        DBG_CAPTURE_FROM_LB => "Incoming packet to load balancer on ifindex",
        DBG_CAPTURE_AFTER_V46 => "Packet after nat46 ifindex",
        DBG_CAPTURE_AFTER_V64 => "Packet after nat64 ifindex",
        DBG_CAPTURE_PROXY_PRE => "Packet to proxy port (Pre)",
        DBG_CAPTURE_PROXY_POST => "Packet to proxy port (Post)",
        DBG_CAPTURE_SNAT_PRE => "Packet going into snat engine on ifindex",
        DBG_CAPTURE_SNAT_POST => "Packet coming from snat engine on ifindex",
        _ => "Unknown message type",
    }
}

/// The observation points of abi.h that the agent reads by number.
pub const TRACE_TO_LXC: u8 = 0;
pub const TRACE_TO_PROXY: u8 = 1;

/// Observation points carried in a trace record's subtype, with Cilium's names.
pub const TRACE_POINTS: [&str; 12] = [
    "to-endpoint",
    "to-proxy",
    "to-host",
    "to-stack",
    "to-overlay",
    "from-endpoint",
    "from-proxy",
    "from-host",
    "from-stack",
    "from-overlay",
    "from-network",
    "to-network",
];

/// The name Cilium gives a policy verdict's match type (bits 3-5 of its
/// flags).
pub fn match_type_name(m: u8) -> &'static str {
    match m {
        1 => "L3-Only",
        2 => "L3-L4",
        3 => "L4-Only",
        4 => "all",
        5 => "L3-Proto",
        6 => "Proto-Only",
        _ => "none",
    }
}

/// `policy_verdict_notify`: a policy decision; `hdr.source` is the local
/// endpoint ID.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PolicyVerdictNotify {
    pub hdr: NotifyCommonHdr,
    pub len_orig: u32,
    pub len_cap: u16,
    pub version: u16,
    pub remote_label: u32,
    /// 0 allowed, negative: the drop reason
    pub verdict: i32,
    /// host order
    pub dst_port: u16,
    pub proto: u8,
    /// bits 0-1 direction (1 ingress, 2 egress), bits 3-5 match type
    pub flags: u8,
    pub auth_type: u8,
    pub pad0: u8,
    pub pad1: u16,
}
assert_layout!(
    PolicyVerdictNotify,
    size = 32,
    len_orig = 8,
    remote_label = 16,
    verdict = 20,
    dst_port = 24,
    proto = 26,
    flags = 27
);
unsafe impl Plain for PolicyVerdictNotify {}

/// `trace_sock_notify`: where socket LB sent a socket (Cilium 1.16's
/// record, no packet); `xlate_point` is one of `XLATE_*`.
#[repr(C, packed)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TraceSockNotify {
    pub kind: u8,
    pub xlate_point: u8,
    /// IPv4 in the first four bytes, network order
    pub dst_ip: [u8; 16],
    /// host order
    pub dst_port: u16,
    pub sock_cookie: u64,
    pub cgroup_id: u64,
    /// `TRACE_SOCK_L4_*`
    pub l4_proto: u8,
    /// `TRACE_SOCK_FLAG_IPV6`
    pub flags: u8,
}
assert_layout!(
    TraceSockNotify,
    size = 38,
    xlate_point = 1,
    dst_ip = 2,
    dst_port = 18,
    sock_cookie = 20,
    cgroup_id = 28,
    l4_proto = 36,
    flags = 37
);
unsafe impl Plain for TraceSockNotify {}

pub const XLATE_PRE_DIRECTION_FWD: u8 = 1;
pub const XLATE_POST_DIRECTION_FWD: u8 = 2;
pub const XLATE_PRE_DIRECTION_REV: u8 = 3;
pub const XLATE_POST_DIRECTION_REV: u8 = 4;
pub const TRACE_SOCK_L4_TCP: u8 = 1;
pub const TRACE_SOCK_L4_UDP: u8 = 2;
pub const TRACE_SOCK_FLAG_IPV6: u8 = 0x1;
