//! The context-switch source: one record per `sched:sched_switch` on every
//! CPU, unfiltered: which thread left the CPU and which came in, when. It
//! is the sideband that splits a per-CPU Intel PT trace between the
//! threads that ran (`weft pt record`), and a source like any other.

use crate::events::Header;

/// One context switch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchEvent {
    /// Source and CPU.
    pub header: Header,
    /// `CLOCK_MONOTONIC` time of the switch, in ns.
    pub ts_ns: u64,
    /// The thread that left the CPU (0: idle).
    pub prev_tid: u32,
    /// Its process.
    pub prev_pid: u32,
    /// The thread that came in (0: idle); its process is not known to the
    /// tracepoint.
    pub next_tid: u32,
    /// The state the thread left in, as the tracepoint's `prev_state`
    /// gives it: 0 runnable (a yield), 1 asleep, 2 in an uninterruptible
    /// wait..., `TASK_REPORT_MAX` (0x100 on 6.x) preempted. Captures of
    /// weft before it hold 0 here; their schema has no `prev_state`.
    pub prev_state: u32,
}

impl SwitchEvent {
    /// The event at the start of `bytes`, if they hold a whole one.
    #[must_use]
    pub fn read(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..EVENT_SIZE)?;
        // SAFETY: EVENT_SIZE readable bytes; every bit pattern is a valid
        // SwitchEvent (plain integers), and the read is unaligned.
        Some(unsafe { bytes.as_ptr().cast::<Self>().read_unaligned() })
    }
}

/// Size of a [`SwitchEvent`] record.
pub const EVENT_SIZE: usize = 32;
const _: () = assert!(core::mem::size_of::<SwitchEvent>() == EVENT_SIZE);

#[cfg(feature = "pod")]
mod user {
    // SAFETY: `#[repr(C)]`, `Copy`, integers only, no padding holes.
    unsafe impl aya::Pod for super::SwitchEvent {}
}
