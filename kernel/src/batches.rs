//! The syscall probe's per-CPU batches (`weft_abi::syscall::Batch`), mapped
//! into memory: how many syscalls each CPU saw, which CPUs hold records old
//! enough to send, and, once the probe is detached, the records no CPU sent.

use std::{
    os::fd::{AsFd as _, AsRawFd as _},
    ptr,
    time::{Duration, Instant},
};

use crate::error::{Context as _, Result};
use aya::maps::MapData;
use weft_abi::{
    mapping::Mapping,
    syscall::{BATCH_EVENTS, Batch, EVENT_SIZE},
};

/// The array map's values, one [`Batch`] per possible CPU.
pub struct Batches {
    memory: Mapping,
    cpus: usize,
}

// SAFETY: the mapping belongs to this value alone; the kernel side writes
// it concurrently, which every access allows for (volatile reads of single
// fields, records read only once the programs are detached).
unsafe impl Send for Batches {}

impl Batches {
    /// Maps `map`, an array of `cpus` batches made with `BPF_F_MMAPABLE`.
    pub fn map(map: &MapData, cpus: u32) -> Result<Self> {
        let cpus = cpus as usize;
        let bytes = size_of::<Batch>().next_multiple_of(8) * cpus;
        let memory = Mapping::array(map.fd().as_fd().as_raw_fd(), bytes, true)
            .context("failed to map the syscall batches")?;
        Ok(Self { memory, cpus })
    }

    #[allow(
        clippy::cast_ptr_alignment,
        reason = "the mapping is page-aligned and batches are 8-byte multiples apart"
    )]
    fn batch(&self, cpu: usize) -> *mut Batch {
        debug_assert!(cpu < self.cpus);
        // SAFETY: within the mapping, whose values are `Batch`-sized apart
        // (its size is a multiple of 8) and page-aligned at the start.
        unsafe { self.memory.as_ptr().cast::<Batch>().add(cpu) }
    }

    /// Each CPU's count of syscalls that passed the filters.
    pub fn seen(&self) -> Vec<u64> {
        (0..self.cpus)
            // SAFETY: an aligned field of a mapped batch, which the kernel
            // writes whole.
            .map(|cpu| unsafe { ptr::read_volatile(&raw const (*self.batch(cpu)).seen) })
            .collect()
    }

    /// The CPUs whose batch holds a record of a syscall that ended before
    /// `before_ns` (`CLOCK_MONOTONIC`). Read while the probe runs, so a
    /// batch changing meanwhile may be named or missed: a hint to flush.
    pub fn stale(&self, before_ns: u64) -> impl Iterator<Item = u32> + '_ {
        (0..self.cpus).filter_map(move |cpu| {
            let batch = self.batch(cpu);
            // SAFETY: aligned fields of a mapped batch.
            let (len, first) = unsafe {
                (
                    ptr::read_volatile(&raw const (*batch).len),
                    ptr::read_volatile(&raw const (*batch).events[0]),
                )
            };
            let ended = first.enter_ns.saturating_add(first.duration_ns);
            (len > 0 && ended < before_ns).then_some(cpu as u32)
        })
    }

    /// Hands each CPU's unsent records to `on_record`, one event's bytes at
    /// a time, and empties the batches; returns how many. Only for after
    /// the programs are detached: a program still finishing is waited for.
    pub fn take(&mut self, mut on_record: impl FnMut(&[u8])) -> u64 {
        let mut taken = 0;
        for cpu in 0..self.cpus {
            let batch = self.batch(cpu);
            wait_idle(batch);
            // SAFETY: no program writes the batch any more.
            let batch = unsafe { &mut *batch };
            let len = (batch.len as usize).min(BATCH_EVENTS);
            // SAFETY: the first `len` records, as the kernel laid them out
            // (the bytes a ring record of them would hold).
            let bytes = unsafe {
                std::slice::from_raw_parts(batch.events.as_ptr().cast::<u8>(), len * EVENT_SIZE)
            };
            bytes.chunks_exact(EVENT_SIZE).for_each(&mut on_record);
            taken += len as u64;
            batch.len = 0;
        }
        taken
    }
}

/// Waits (briefly: a program runs for nanoseconds) until no program on the
/// batch's CPU is changing it.
fn wait_idle(batch: *mut Batch) {
    let deadline = Instant::now() + Duration::from_secs(1);
    // SAFETY: an aligned field of a mapped batch.
    while unsafe { ptr::read_volatile(&raw const (*batch).busy) } != 0 && Instant::now() < deadline
    {
        std::thread::yield_now();
    }
}
