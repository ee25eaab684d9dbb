//! Reading `cilium_events`: one perf ring per CPU, opened by the agent (the
//! datapath's perf output only lands once a ring is there).

use crate::maps::Events;
use crate::Error;
use aya::maps::perf::{PerfEvent, PerfEventArray, PerfEventArrayBuffer};
use aya::maps::{Map, MapData};
use std::os::fd::AsRawFd;
use std::path::Path;

/// What a ring hands over.
pub enum Record<'a> {
    Sample(&'a [u8]),
    /// Records the kernel could not write because the ring was full.
    Lost(u64),
}

pub struct EventReader {
    rings: Vec<PerfEventArrayBuffer<MapData>>,
    _array: PerfEventArray<MapData>,
}

/// Pages per CPU ring (Cilium's monitor uses 64).
pub const RING_PAGES: usize = 64;

impl EventReader {
    /// Opens a ring for each possible CPU on the pinned `cilium_events`.
    pub fn open(bpffs_root: &Path) -> Result<Self, Error> {
        // the layout check; aya reads the rings through its own descriptor
        Events::open(bpffs_root)?;
        let pin = Events::pin_path(bpffs_root);
        let fail = |message: String| Error::Map {
            map: Events::NAME.into(),
            message,
        };
        let data = MapData::from_pin(&pin).map_err(|e| fail(e.to_string()))?;
        let mut array: PerfEventArray<MapData> =
            PerfEventArray::try_from(Map::PerfEventArray(data)).map_err(|e| fail(e.to_string()))?;
        let cpus = crate::sys::possible_cpus()
            .map_err(|e| Error::io("reading", "/sys/devices/system/cpu/possible", e))?;
        let mut rings = Vec::new();
        for cpu in 0..cpus as u32 {
            rings.push(
                array
                    .open(cpu, Some(RING_PAGES))
                    .map_err(|e| fail(format!("opening the ring of CPU {cpu}: {e}")))?,
            );
        }
        Ok(Self {
            rings,
            _array: array,
        })
    }

    pub fn cpus(&self) -> usize {
        self.rings.len()
    }

    /// Waits up to `timeout_ms` for records and hands each to `f` with
    /// the CPU whose ring held it.
    pub fn poll(&mut self, timeout_ms: i32, f: &mut dyn FnMut(usize, Record<'_>)) {
        let mut fds: Vec<libc::pollfd> = self
            .rings
            .iter()
            .map(|r| libc::pollfd {
                fd: r.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: fds is a valid array of pollfd of the length passed.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if n <= 0 {
            return;
        }
        let mut joined = Vec::new();
        for (cpu, ring) in self.rings.iter_mut().enumerate() {
            if !ring.readable() {
                continue;
            }
            ring.for_each(|ev| match ev {
                PerfEvent::Sample { head, tail } => {
                    if tail.is_empty() {
                        f(cpu, Record::Sample(head));
                    } else {
                        joined.clear();
                        joined.extend_from_slice(head);
                        joined.extend_from_slice(tail);
                        f(cpu, Record::Sample(&joined));
                    }
                }
                PerfEvent::Lost { count } => f(cpu, Record::Lost(count)),
            });
        }
    }
}
