//! The scheduler source: one record each time a thread is switched onto a
//! CPU, saying how long it was off CPU, how much of that it spent runnable
//! but waiting (run-queue latency), and why it left (its state then).
//!
//! The kernel side remembers, per thread, when it was switched out (with its
//! state) and when it was woken, from `sched:sched_switch` and
//! `sched:sched_wakeup[_new]`; the record is written when the thread runs
//! again. Threads off CPU since before weft started produce no record.

use crate::events::Header;

/// One thread switched onto a CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedEvent {
    /// Source and CPU.
    pub header: Header,
    /// Thread id of the thread switched in.
    pub tid: u32,
    /// Its thread group id.
    pub pid: u32,
    /// `CLOCK_MONOTONIC` time it was switched in, in ns.
    pub ts_ns: u64,
    /// Time since it was switched out, in ns.
    pub off_cpu_ns: u64,
    /// Time from its wakeup (or, if preempted, from its switch-out) to now:
    /// how long it waited runnable for a CPU, in ns.
    pub runq_ns: u64,
    /// The thread it replaced on this CPU (0: idle).
    pub prev_tid: u32,
    /// Its state when it was switched out, as `sched_switch` reports it:
    /// 0 runnable (yielded), 0x100 preempted, else one `TASK_REPORT` bit
    /// (1 sleeping, 2 uninterruptible, ..., 0x80 idle).
    pub state: u32,
    /// The kernel stack it left the CPU from, as an id in the stack
    /// source's map, when that source runs (negative: none).
    pub kstack: i32,
    /// Its user stack then (negative: none).
    pub ustack: i32,
}

/// Size of a [`SchedEvent`] record.
pub const EVENT_SIZE: usize = 56;
const _: () = assert!(core::mem::size_of::<SchedEvent>() == EVENT_SIZE);

impl SchedEvent {
    /// The event at the start of `bytes`, if they hold a whole one.
    #[must_use]
    pub fn read(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..EVENT_SIZE)?;
        // SAFETY: EVENT_SIZE readable bytes; every bit pattern is a valid
        // SchedEvent (plain integers), and the read is unaligned.
        Some(unsafe { bytes.as_ptr().cast::<Self>().read_unaligned() })
    }
}

/// What the kernel side keeps per thread between switch-out and switch-in.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct OffCpu {
    /// When it was switched out, in ns.
    pub out_ns: u64,
    /// When it was woken, in ns (0: not yet).
    pub wakeup_ns: u64,
    /// Its thread group id.
    pub pid: u32,
    /// Its state when switched out.
    pub state: u32,
    /// The kernel stack it left from (see [`SchedEvent::kstack`]).
    pub kstack: i32,
    /// The user stack it left from.
    pub ustack: i32,
}
const _: () = assert!(core::mem::size_of::<OffCpu>() == 32);

#[cfg(feature = "pod")]
mod user {
    // SAFETY: `#[repr(C)]`, `Copy`, integers only, no padding holes.
    unsafe impl aya::Pod for super::SchedEvent {}
}
