//! The stack source: a low-rate CPU profile, one record per sample of a
//! thread on a CPU (a perf clock event on every CPU), naming the kernel and
//! user stacks it was in by their ids in [`STACKS_MAP`]; and, when the
//! scheduler source runs too, the stacks a thread left the CPU from
//! (`sched::SchedEvent::kstack`). User space reads each id's frames once,
//! names them and stores them beside the records (the `frames` source).

use crate::events::Header;

/// Name of the stack trace map both programs write stack ids into.
pub const STACKS_MAP: &str = "STACK_TRACES";
/// Name of the global that asks `sched_switch` for the stacks of the
/// thread leaving the CPU (1) or not (0).
pub const SCHED_STACKS_GLOBAL: &str = "SCHED_STACKS";
/// Stacks the map holds: distinct stacks past it, and those whose hash
/// meets another's, are counted as lost stacks (id < 0).
pub const MAX_STACKS: u32 = 1 << 14;
/// Samples per second per CPU by default: low enough to leave running, not
/// a multiple of the timer tick (so samples do not beat with it).
pub const DEFAULT_HZ: u64 = 49;

/// One sample of a thread on a CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackEvent {
    /// Source and CPU.
    pub header: Header,
    /// `CLOCK_MONOTONIC` time of the sample, in ns.
    pub ts_ns: u64,
    /// The thread sampled.
    pub tid: u32,
    /// Its process.
    pub pid: u32,
    /// Its kernel stack's id in [`STACKS_MAP`] (negative: none, an errno).
    pub kstack: i32,
    /// Its user stack's id (negative: none, as for a kernel thread).
    pub ustack: i32,
}

/// Size of a [`StackEvent`] record.
pub const EVENT_SIZE: usize = 32;
const _: () = assert!(core::mem::size_of::<StackEvent>() == EVENT_SIZE);

#[cfg(feature = "pod")]
mod user {
    // SAFETY: `#[repr(C)]`, `Copy`, integers only, no padding holes.
    unsafe impl aya::Pod for super::StackEvent {}
}
