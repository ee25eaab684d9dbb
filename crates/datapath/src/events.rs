//! Reading `cilium_events`: one perf ring per CPU, opened by the agent (the
//! datapath's perf output only lands once a ring is there).

use crate::maps::Events;
use crate::perf_ring::PerfRing;
pub use crate::perf_ring::Record;
use crate::Error;
use std::path::Path;

pub struct EventReader {
    rings: Vec<PerfRing>,
    /// The map's entries last as long as the descriptor they were put
    /// through: the kernel takes them out when it closes.
    _events: Events,
}

/// Pages per CPU ring (Cilium's monitor uses 64).
pub const RING_PAGES: usize = 64;

/// The longest a record waits to be read while its ring is not yet a
/// quarter full (the rings wake their reader only then).
const STRAGGLER_MS: i32 = 25;

impl EventReader {
    /// Opens a ring for each possible CPU on the pinned `cilium_events`.
    pub fn open(bpffs_root: &Path) -> Result<Self, Error> {
        let events = Events::open(bpffs_root)?;
        let cpus = crate::sys::possible_cpus()
            .map_err(|e| Error::io("reading", "/sys/devices/system/cpu/possible", e))?;
        let mut rings = Vec::new();
        for cpu in 0..cpus as u32 {
            let ring = PerfRing::open(cpu, RING_PAGES).map_err(|e| Error::Map {
                map: Events::NAME.into(),
                message: format!("opening the ring of CPU {cpu}: {e}"),
            })?;
            events.attach_ring(cpu, ring.raw_fd())?;
            rings.push(ring);
        }
        Ok(Self {
            rings,
            _events: events,
        })
    }

    pub fn cpus(&self) -> usize {
        self.rings.len()
    }

    /// Waits up to `timeout_ms` (less while records may be waiting) for
    /// records and hands each to `f` with the CPU whose ring held it.
    pub fn poll(&mut self, timeout_ms: i32, f: &mut dyn FnMut(usize, Record<'_>)) {
        let mut fds: Vec<libc::pollfd> = self
            .rings
            .iter()
            .map(|r| libc::pollfd {
                fd: r.raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds is a valid array of pollfd of the length passed.
        unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                timeout_ms.clamp(0, STRAGGLER_MS),
            )
        };
        for (cpu, ring) in self.rings.iter_mut().enumerate() {
            ring.drain(&mut |rec| f(cpu, rec));
        }
    }
}
