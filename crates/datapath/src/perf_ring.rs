//! One CPU's ring of a perf event array, opened by hand rather than
//! through aya, which has the kernel wake the reader on every record. A
//! wakeup from the datapath is an irq_work, a self-interrupt that costs a
//! VM exit here: with every packet traced it was a twentieth of an iperf
//! run's CPU. These rings wake their reader once a quarter of the ring is
//! written; the reader's poll timeout picks up the records in between.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_BPF_OUTPUT: u64 = 10;
const PERF_SAMPLE_RAW: u64 = 1 << 10;
/// `perf_event_attr.watermark`: wake after `wakeup_watermark` bytes
const ATTR_WATERMARK: u64 = 1 << 14;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_SAMPLE: u32 = 9;
/// `perf_event_mmap_page`'s data_head, data_tail, data_offset, data_size
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// `struct perf_event_attr` up to `config1` (PERF_ATTR_SIZE_VER0): all a
/// BPF output event needs.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_watermark: u32,
    bp_type: u32,
    config1: u64,
}
const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == 64);

/// What a ring hands over.
pub enum Record<'a> {
    Sample(&'a [u8]),
    /// Records the kernel could not write because the ring was full.
    Lost(u64),
}

pub struct PerfRing {
    fd: OwnedFd,
    base: *mut u8,
    map_len: usize,
    page: usize,
    data_len: usize,
    /// the record being read, copied out of the ring (around whose end
    /// it may wrap)
    record: Vec<u8>,
}

// SAFETY: the mapping belongs to this value alone and is only read through
// `&mut self`.
unsafe impl Send for PerfRing {}

impl PerfRing {
    /// A ring of `pages` pages for BPF output on `cpu`.
    pub fn open(cpu: u32, pages: usize) -> io::Result<Self> {
        let page = crate::sys::page_size();
        let data_len = pages * page;
        let attr = PerfEventAttr {
            kind: PERF_TYPE_SOFTWARE,
            size: std::mem::size_of::<PerfEventAttr>() as u32,
            config: PERF_COUNT_SW_BPF_OUTPUT,
            sample_period: 1,
            sample_type: PERF_SAMPLE_RAW,
            flags: ATTR_WATERMARK,
            wakeup_watermark: (data_len / 4) as u32,
            ..Default::default()
        };
        // SAFETY: attr is a valid perf_event_attr of the size it states.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &attr as *const PerfEventAttr,
                -1,
                cpu as libc::c_int,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor perf_event_open just returned, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let map_len = page + data_len;
        // SAFETY: mapping the event's ring as the kernel lays it out: one
        // metadata page, then the data pages.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ring = Self {
            fd,
            base: base.cast(),
            map_len,
            page,
            data_len,
            record: Vec::new(),
        };
        // SAFETY: an ioctl without argument on our own perf event.
        if unsafe { libc::ioctl(ring.fd.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ring)
    }

    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        // SAFETY: `at` is one of the metadata page's aligned u64 fields,
        // shared with the kernel, hence atomics.
        unsafe { &*(self.base.add(at) as *const AtomicU64) }
    }

    /// Copies `len` bytes from ring offset `from` (which may wrap) into `out`.
    fn copy_out(&self, from: usize, len: usize, out: &mut Vec<u8>) {
        out.clear();
        let start = from % self.data_len;
        let first = len.min(self.data_len - start);
        // SAFETY: both ranges lie inside the data pages.
        unsafe {
            let data = self.base.add(self.page);
            out.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            out.extend_from_slice(std::slice::from_raw_parts(data, len - first));
        }
    }

    /// Hands every record written so far to `f`, then gives their room
    /// back to the kernel.
    pub fn drain(&mut self, f: &mut dyn FnMut(Record<'_>)) {
        let head = self.word(DATA_HEAD).load(Ordering::Acquire) as usize;
        let mut tail = self.word(DATA_TAIL).load(Ordering::Relaxed) as usize;
        let mut record = std::mem::take(&mut self.record);
        while tail < head {
            self.copy_out(tail, 8, &mut record);
            let kind = u32::from_ne_bytes(record[0..4].try_into().expect("4 bytes"));
            let size = usize::from(u16::from_ne_bytes(
                record[6..8].try_into().expect("2 bytes"),
            ));
            if size < 8 {
                // a header the kernel never writes: give up on what is left
                tail = head;
                break;
            }
            self.copy_out(tail, size, &mut record);
            match kind {
                PERF_RECORD_SAMPLE if size >= 12 => {
                    let raw =
                        u32::from_ne_bytes(record[8..12].try_into().expect("4 bytes")) as usize;
                    f(Record::Sample(&record[12..(12 + raw).min(size)]));
                }
                PERF_RECORD_LOST if size >= 24 => {
                    f(Record::Lost(u64::from_ne_bytes(
                        record[16..24].try_into().expect("8 bytes"),
                    )));
                }
                _ => {}
            }
            tail += size;
        }
        self.record = record;
        self.word(DATA_TAIL).store(tail as u64, Ordering::Release);
    }
}

impl Drop for PerfRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, no longer referenced.
        unsafe {
            libc::munmap(self.base.cast(), self.map_len);
        }
    }
}
