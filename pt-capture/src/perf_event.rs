//! The kernel's side of a capture: one `intel_pt` perf event on one CPU,
//! opened disabled with perf-event2 from the PMU's sysfs format, and its
//! AUX area mapped by hand on the event's file descriptor (perf-event2
//! maps no AUX area). Written against `linux/perf_event.h` and
//! `Documentation/userspace-api/perf_ring_buffer.rst`; it needs PT
//! hardware, so the tests on machines without PT stop before it.

use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{Ordering, fence};

use perf_event::events::Dynamic;

use weft_abi::mapping::Mapping;

use crate::window::{Aux, Traced, WindowPlan};

/// `_IO('$', 0)` and `_IO('$', 1)`.
const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

/// Offsets in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const AUX_HEAD: usize = 1056;
const AUX_TAIL: usize = 1064;
const AUX_OFFSET: usize = 1072;
const AUX_SIZE: usize = 1080;

/// Pages of the ordinary ring, where the kernel reports AUX records.
const DATA_PAGES: usize = 8;
const PERF_RECORD_AUX: u32 = 11;
const PERF_AUX_FLAG_TRUNCATED: u64 = 1;

/// One CPU's `intel_pt` event with its mapped ring and AUX area.
pub struct PerfEvent {
    counter: perf_event::Counter,
    base: Mapping,
    aux: Mapping,
    page: usize,
}

impl PerfEvent {
    /// Open the event for `cpu` (every process on it; the capture's
    /// sideband says which thread ran when), disabled.
    pub fn open(pmu: &Path, plan: &WindowPlan, cpu: u32) -> io::Result<PerfEvent> {
        let mut builder = Dynamic::builder(pmu)?;
        for &(name, value) in &plan.fields {
            builder.field(name, value).map_err(io::Error::other)?;
        }
        let event = builder.build().map_err(io::Error::other)?;
        let counter = perf_event::Builder::new(event)
            .one_cpu(cpu as usize)
            .any_pid()
            .enabled(false)
            .exclude_kernel(!plan.kernel)
            .exclude_hv(true)
            .build()?;
        let page = weft_abi::mapping::page_size()?;
        let fd = counter.as_raw_fd();
        let base = Mapping::shared(fd, (1 + DATA_PAGES) * page, 0, true)?;
        let aux_len = usize::try_from(plan.aux_bytes).map_err(io::Error::other)?;
        // The kernel reads where to put the AUX area from the header.
        base.word(AUX_OFFSET)
            .store(base.len() as u64, Ordering::SeqCst);
        base.word(AUX_SIZE).store(plan.aux_bytes, Ordering::SeqCst);
        // Mapped writable, the area stops when full (the reader moves the
        // tail); read-only, it is overwritten (snapshot mode).
        let aux = Mapping::shared(fd, aux_len, base.len(), !plan.snapshot)?;
        Ok(PerfEvent {
            counter,
            base,
            aux,
            page,
        })
    }

    fn ioctl(&self, request: libc::c_ulong) -> io::Result<()> {
        // SAFETY: a perf event ioctl with no argument on our own fd.
        if unsafe { libc::ioctl(self.counter.as_raw_fd(), request, 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether an AUX record in the ordinary ring says data was lost.
    fn truncated(&self) -> bool {
        let head = self.base.word(DATA_HEAD).load(Ordering::Acquire) as usize;
        let tail = self.base.word(DATA_TAIL).load(Ordering::Relaxed) as usize;
        let size = DATA_PAGES * self.page;
        let data = &self.base.bytes()[self.page..];
        let byte = |at: usize| data[at % size];
        let read = |at: usize, n: usize| {
            (0..n)
                .rev()
                .fold(0u64, |v, i| v << 8 | u64::from(byte(at + i)))
        };
        let mut at = tail;
        let mut truncated = false;
        while at + 8 <= head {
            let (kind, len) = (read(at, 4) as u32, read(at + 6, 2) as usize);
            if len < 8 {
                break;
            }
            if kind == PERF_RECORD_AUX && read(at + 24, 8) & PERF_AUX_FLAG_TRUNCATED != 0 {
                truncated = true;
            }
            at += len;
        }
        truncated
    }
}

impl Traced for PerfEvent {
    fn enable(&self) -> io::Result<()> {
        self.ioctl(PERF_EVENT_IOC_ENABLE)
    }

    fn disable(&self) -> io::Result<()> {
        self.ioctl(PERF_EVENT_IOC_DISABLE)
    }

    fn take(&self) -> io::Result<Aux> {
        let head = self.base.word(AUX_HEAD).load(Ordering::Acquire);
        fence(Ordering::Acquire);
        let size = self.aux.len() as u64;
        // In snapshot mode the head runs on; the last `size` bytes hold.
        let tail = if self.aux.writable() {
            self.base.word(AUX_TAIL).load(Ordering::Relaxed)
        } else {
            head.saturating_sub(size)
        };
        let ring = self.aux.bytes();
        let bytes = (tail..head).map(|at| ring[(at % size) as usize]).collect();
        if self.aux.writable() {
            self.base.word(AUX_TAIL).store(head, Ordering::Release);
        }
        Ok(Aux {
            bytes,
            truncated: self.truncated() || (!self.aux.writable() && head > size),
        })
    }
}
