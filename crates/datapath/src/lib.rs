//! The kernel side of the agent: BPF objects, pinned maps, program loading
//! and attachment. This is the only crate that calls bpf(2); everything else
//! goes through the typed handles here.

pub mod attach;
pub mod bpffs;
pub mod ctmap;
mod error;
pub mod events;
pub mod lbmap;
pub mod loader;
pub mod map;
pub mod maps;
pub mod objects;
mod perf_ring;
pub mod policymap;
mod program_pins;
pub mod socketlb;
mod sys;
pub mod templates;
pub mod testrun;
pub mod typed;

pub use error::{AttachError, Error};
pub use loader::{Datapath, MapSizes};
pub use map::PinnedMap;
pub use maps::GlobalMap;
pub use sys::MapMeta;
pub use typed::{Map, PerCpuMap};
