//! The cluster on one machine, as `cilium-lab`, the multi-node tests and
//! the benchmarks build it: nodes are network namespaces plugged into one
//! underlay bridge, node `i` (from 1) at 198.18.0.(10+i)/24 with the pod
//! CIDR 10.i.0.0/24, etcd on the bridge's 198.18.0.1.
//!
//! - [`plan`]: the addressing plan, pure: node index to name, underlay
//!   address, pod CIDR; the bridge and etcd addresses.
//! - [`layout`]: what lives in a node's directory (run and state dirs,
//!   socket, bpffs, config, pod network namespaces, CNI files).
//! - [`underlay`]: the bridge and a node's `eth0` on it, through `netdev`.
//!
//! A crate of its own rather than a module of `testsupport`: `cilium-lab`
//! is a shipped binary and must not link the tests' sandbox helpers; the
//! tests reach this crate as `testsupport::topology`.

pub mod layout;
pub mod plan;
pub mod underlay;

pub use layout::NodeDir;
pub use plan::*;
