//! `cilium_runtime_config`: u32 index to u64 value.

pub const UTIME_OFFSET: u32 = 0;
pub const AGENT_LIVENESS: u32 = 1;

/// Name Cilium's CLI prints for an index.
pub fn index_name(index: u32) -> Option<&'static str> {
    match index {
        UTIME_OFFSET => Some("UTimeOffset"),
        AGENT_LIVENESS => Some("AgentLiveness"),
        _ => None,
    }
}
