//! Netlink, per-netns sysctls and the iptables masquerading rule for the
//! agent's node devices.
//!
//! The only crate that speaks netlink. Everything here acts on the network
//! namespace of the calling thread, which is how the lab and the tests give
//! each node its own world.

pub mod direct;
mod error;
pub mod host;
pub mod inventory;
pub mod iptables;
pub mod link;
pub mod netns;
pub mod sysctl;
pub mod underlay;
pub mod veth;
pub mod vxlan;

pub use error::Error;
pub use host::{HostDevices, CILIUM_HOST, CILIUM_NET};
pub use link::{Link, Netlink};
pub use netns::NetNs;
