//! What the init-container tools do, as functions the binaries and tests
//! share. Every path is an argument: the lab and tests run them inside
//! their own namespaces, never on the host's.

pub mod cgroup;
pub mod sysctlfix;
