//! `cilium_rs_ratelimit` (token buckets) and `cilium_rs_ratelimit_metrics`
//! (what each usage had refused): the events rate limit, maps of our own
//! with Cilium 1.17's `cilium_ratelimit` / `cilium_ratelimit_metrics`
//! layouts (C: `struct rs_ratelimit_*`). Cilium 1.16 has no metrics map and
//! keys its `cilium_ratelimit` by a netdev index alone, so these must not
//! carry its names.

use crate::{assert_layout, Plain};

pub const USAGE_ICMPV6: u32 = 1;
pub const USAGE_EVENTS_MAP: u32 = 2;

/// Cilium's name of a usage, as its metric label.
pub fn usage_name(usage: u32) -> &'static str {
    match usage {
        USAGE_ICMPV6 => "icmpv6",
        USAGE_EVENTS_MAP => "events",
        _ => "unknown",
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RatelimitKey {
    pub usage: u32,
    pub key: u32,
}
assert_layout!(RatelimitKey, size = 8, usage = 0, key = 4);
unsafe impl Plain for RatelimitKey {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RatelimitValue {
    pub last_topup: u64,
    pub tokens: u64,
}
assert_layout!(RatelimitValue, size = 16, last_topup = 0, tokens = 8);
unsafe impl Plain for RatelimitValue {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RatelimitMetricsKey {
    pub usage: u32,
}
assert_layout!(RatelimitMetricsKey, size = 4, usage = 0);
unsafe impl Plain for RatelimitMetricsKey {}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RatelimitMetricsValue {
    pub dropped: u64,
}
assert_layout!(RatelimitMetricsValue, size = 8, dropped = 0);
unsafe impl Plain for RatelimitMetricsValue {}
