//! The node and cluster helpers live in testsupport (the benchmarks use
//! them too), the addressing plan in topology (cilium-lab uses it too).
#![allow(unused_imports)]

pub mod ipv6;

pub use testsupport::cluster::*;
pub use testsupport::node::*;
pub use testsupport::topology::node_ip;
