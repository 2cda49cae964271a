//! What every event source other than syscalls shares: one ring buffer per
//! CPU that all of them write into, a record header naming the source, the
//! per-source loss counters and the task filters applied in the kernel.
//!
//! Syscalls keep their own rings (`syscall`): they come at millions per
//! second and a stat session loads nothing else. The other sources come at
//! lower rates and share one set of rings, so that weft drains one ring per
//! CPU however many sources run.

/// Name of the per-CPU ring buffer array map.
pub const RINGS_MAP: &str = "EVENT_RINGS";
/// Name of the per-CPU counter array: slot `source * COUNTERS + counter`.
pub const COUNTERS_MAP: &str = "EVENT_COUNTERS";
/// Name of the traced thread group id set (used when [`FILTER_PID`] is set).
pub const PIDS_MAP: &str = "EVENT_PIDS";
/// Name of the global holding the [`EventConfig`].
pub const CONFIG_GLOBAL: &str = "EVENT_CONFIG";

/// The sources writing into the shared rings; the value is the record's
/// [`Header::source`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Scheduler: one record per thread switched onto a CPU.
    Sched = 1,
    /// Block I/O: one record per completed request.
    Block = 2,
    /// Page cache: pages added, removed and read.
    PageCache = 3,
    /// Packets seen by TC on ingress and egress.
    Net = 4,
    /// Every context switch, unfiltered.
    Switch = 5,
    /// Which thread used which TCP or UDP socket.
    Conns = 6,
    /// A low-rate CPU profile: threads' kernel and user stacks.
    Stacks = 7,
    /// File-related system calls with their descriptors and paths.
    Args = 8,
}

/// Slots per source in the counter array (slot 0 is unused).
pub const SOURCES: u32 = 9;

impl Source {
    /// Every source, in value order.
    pub const ALL: [Self; 8] = [
        Self::Sched,
        Self::Block,
        Self::PageCache,
        Self::Net,
        Self::Switch,
        Self::Conns,
        Self::Stacks,
        Self::Args,
    ];

    /// The source a header's `source` value names.
    #[must_use]
    pub fn from_u32(value: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|s| *s as u32 == value)
    }
}

/// The first bytes of every record in the shared rings.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// A [`Source`] value.
    pub source: u32,
    /// The CPU the record was written on.
    pub cpu: u32,
}

/// Bytes of a [`Header`]. Only `source` is dropped before a record is
/// stored: its store source says the same.
pub const HEADER_SIZE: usize = 8;
const _: () = assert!(core::mem::size_of::<Header>() == HEADER_SIZE);

/// Per-CPU counters each source keeps; the value plus `source * COUNTERS`
/// is the slot in a CPU's row of [`COUNTERS_MAP`]. `emitted + RingFull == Seen`.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Records the source produced (emitted or lost).
    Seen = 0,
    /// Records that did not fit the ring buffer and were dropped.
    RingFull = 1,
    /// Starts of an interval (a wakeup, an issued request) that could not be
    /// remembered because the table was full: its end produces no record.
    TableFull = 2,
}

/// Number of [`Counter`] slots per source.
pub const COUNTERS: u32 = 3;

/// Slots of each CPU's row of [`COUNTERS_MAP`] (see [`crate::counters`]).
pub const COUNTER_ROW: u32 = crate::counters::row(SOURCES * COUNTERS);

/// Only threads whose thread group id is in the pid set are traced.
pub const FILTER_PID: u32 = 1 << 0;
/// Only threads whose `comm` equals [`EventConfig::comm`] are traced.
pub const FILTER_COMM: u32 = 1 << 1;
/// Only threads in the cgroup [`EventConfig::cgroup`] are traced.
pub const FILTER_CGROUP: u32 = 1 << 2;

/// Task filters shared by all sources, written by user space into a
/// read-only global before load. A source applies them to the thread its
/// record is about, where the kernel lets it know that thread.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EventConfig {
    /// `FILTER_*` bits.
    pub flags: u32,
    /// weft's own thread group, never traced (0 traces everything).
    pub ignore_tgid: u32,
    /// cgroup v2 id (the cgroup directory's inode number).
    pub cgroup: u64,
    /// Task name to match, NUL-padded as in `task_struct::comm`.
    pub comm: [u8; 16],
}
const _: () = assert!(core::mem::size_of::<EventConfig>() == 32);

impl EventConfig {
    /// A configuration that traces every thread.
    pub const ALL: Self = Self {
        flags: 0,
        ignore_tgid: 0,
        cgroup: 0,
        comm: [0; 16],
    };
}

#[cfg(feature = "pod")]
mod user {
    // SAFETY: `#[repr(C)]`, `Copy`, integers only, no padding holes.
    unsafe impl aya::Pod for super::EventConfig {}
}
