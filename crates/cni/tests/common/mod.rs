//! The node and cluster helpers live in testsupport (the benchmarks use
//! them too).
#![allow(unused_imports)]

pub use testsupport::node::*;
