//! Rust mirrors of `bpf/include/abi.h`.
//!
//! This is the only place a map layout is spelled in Rust. Every struct is
//! `#[repr(C)]` (or packed where the C struct is) and carries compile-time
//! size and offset checks against the C layout, so a drift between the two
//! sides fails the build instead of corrupting a map.

pub mod auth;
mod bytes;
pub mod ct;
pub mod drop;
pub mod endpoint;
pub mod events;
pub mod frag;
pub mod hex;
pub mod identity;
pub mod ipcache;
pub mod lb;
pub mod maps;
pub mod metrics;
pub mod node;
pub mod order;
pub mod policy;
pub mod ratelimit;
pub mod runtime_config;
pub mod state_dir;
pub mod tunnel;

pub use bytes::Plain;
pub use order::{Be16, Be32, V6Addr};
