//! The syscall probe: one record per completed system call, paired in the kernel.
//!
//! The probe remembers each thread's syscall entry (time and number) in task
//! storage and, at exit, appends one [`SyscallEvent`] to the [`Batch`] of the
//! CPU it runs on, which goes into that CPU's ring buffer as one record once
//! full. Filters in [`SyscallConfig`] are applied before anything is stored.

/// Maximum number of CPUs weft supports; the per-CPU ring array has this many
/// slots (user space shrinks it to the number of possible CPUs).
pub const MAX_CPUS: u32 = 4096;

/// Syscall numbers below this fit the [`SyscallConfig::syscalls`] bitmap. x86-64
/// numbers end below 512 (the x32 range starts at 512 and is not traced).
pub const MAX_SYSCALLS: u32 = 512;

/// Name of the per-CPU ring buffer array map.
pub const RINGS_MAP: &str = "SYSCALL_RINGS";
/// Name of the per-CPU batch array, one [`Batch`] per CPU, memory-mapped by
/// user space.
pub const BATCHES_MAP: &str = "SYSCALL_BATCHES";
/// Name of the program user space runs on a CPU (`BPF_PROG_TEST_RUN`) to
/// move that CPU's batch into its ring; it returns [`FLUSH_BUSY`] when a
/// probe on that CPU was changing the batch.
pub const FLUSH_PROGRAM: &str = "syscall_flush";
/// What [`FLUSH_PROGRAM`] returns when it found the batch in use.
pub const FLUSH_BUSY: u32 = 1;
/// Name of the per-CPU counter array map, indexed by [`Counter`].
pub const COUNTERS_MAP: &str = "SYSCALL_COUNTERS";
/// Name of the traced thread group id set (used when [`FILTER_PID`] is set).
pub const PIDS_MAP: &str = "SYSCALL_PIDS";
/// Name of the global holding the [`SyscallConfig`].
pub const CONFIG_GLOBAL: &str = "SYSCALL_CONFIG";

/// One completed system call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallEvent {
    /// `CLOCK_MONOTONIC` time of entry, in ns (`bpf_ktime_get_ns`).
    pub enter_ns: u64,
    /// Time from entry to exit, in ns.
    pub duration_ns: u64,
    /// The syscall's return value (negative errno on failure).
    pub ret: i64,
    /// Thread group id (the user-visible process id).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// x86-64 syscall number.
    pub nr: u32,
    /// CPU the syscall exited on.
    pub cpu: u32,
}

/// Size of a [`SyscallEvent`] record, fixed by the ABI.
pub const EVENT_SIZE: usize = 40;
const _: () = assert!(core::mem::size_of::<SyscallEvent>() == EVENT_SIZE);
const _: () = assert!(core::mem::align_of::<SyscallEvent>() == 8);

impl SyscallEvent {
    /// The record at the start of `bytes` as the probe wrote it (the
    /// host's byte order, which is the kernel's), or `None` when `bytes`
    /// is shorter than [`EVENT_SIZE`].
    #[must_use]
    #[inline]
    pub fn read(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..EVENT_SIZE)?;
        // SAFETY: EVENT_SIZE readable bytes; every bit pattern is a valid
        // SyscallEvent (plain integers), and the read is unaligned.
        Some(unsafe { bytes.as_ptr().cast::<Self>().read_unaligned() })
    }

    /// The record as little-endian bytes, in field order (the layout the
    /// kernel writes, without relying on the host's byte order).
    #[must_use]
    pub fn to_le_bytes(&self) -> [u8; EVENT_SIZE] {
        let Self {
            enter_ns,
            duration_ns,
            ret,
            pid,
            tid,
            nr,
            cpu,
        } = *self;
        let mut out = [0; EVENT_SIZE];
        out[0..8].copy_from_slice(&enter_ns.to_le_bytes());
        out[8..16].copy_from_slice(&duration_ns.to_le_bytes());
        out[16..24].copy_from_slice(&ret.to_le_bytes());
        out[24..28].copy_from_slice(&pid.to_le_bytes());
        out[28..32].copy_from_slice(&tid.to_le_bytes());
        out[32..36].copy_from_slice(&nr.to_le_bytes());
        out[36..40].copy_from_slice(&cpu.to_le_bytes());
        out
    }
}

const _: () = {
    assert!(core::mem::offset_of!(SyscallEvent, duration_ns) == 8);
    assert!(core::mem::offset_of!(SyscallEvent, ret) == 16);
    assert!(core::mem::offset_of!(SyscallEvent, pid) == 24);
    assert!(core::mem::offset_of!(SyscallEvent, tid) == 28);
    assert!(core::mem::offset_of!(SyscallEvent, nr) == 32);
    assert!(core::mem::offset_of!(SyscallEvent, cpu) == 36);
};

/// Records a [`Batch`] holds: the probe copies them into the ring in one
/// record once this many have gathered, since a ring record costs about as
/// much as the rest of the probe (see `docs/architecture.md`). 51 makes a
/// batch just over 2 KiB.
pub const BATCH_EVENTS: usize = 51;

/// One CPU's completed syscalls not yet in its ring, in an array map that
/// user space maps into memory. Only programs on that CPU change it, and
/// they run with preemption off; `busy` is set while one does, so that the
/// flush program, run from an interrupt on that CPU, leaves it alone.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Batch {
    /// Records in `events`, below [`BATCH_EVENTS`] between programs.
    pub len: u32,
    /// 1 while a program on this CPU is changing the batch.
    pub busy: u32,
    /// Completed syscalls this CPU saw that passed every filter, sent or
    /// lost: the `Seen` count of the loss accounting.
    pub seen: u64,
    /// The records, oldest first; the first `len` are set.
    pub events: [SyscallEvent; BATCH_EVENTS],
}
const _: () = assert!(core::mem::size_of::<Batch>() == 16 + 40 * BATCH_EVENTS);
const _: () = assert!(core::mem::offset_of!(Batch, events) == 16);

/// What the probe keeps between a thread's syscall entry and its exit.
///
/// Kept in task-local storage: one value per thread, reused for every syscall
/// of that thread (written in place; a hash map insert and delete per syscall
/// cost far more) and freed by the kernel when the thread exits.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct InFlight {
    /// `CLOCK_MONOTONIC` time of entry, in ns.
    pub enter_ns: u64,
    /// Syscall number.
    pub nr: u32,
    /// 1 between entry and exit, 0 once the exit consumed the entry.
    pub active: u32,
}
const _: () = assert!(core::mem::size_of::<InFlight>() == 16);

/// Only threads whose thread group id is in the pid set are traced.
pub const FILTER_PID: u32 = 1 << 0;
/// Only threads whose `comm` equals [`SyscallConfig::comm`] are traced.
pub const FILTER_COMM: u32 = 1 << 1;
/// Only syscalls whose bit is set in [`SyscallConfig::syscalls`] are traced.
pub const FILTER_SYSCALL: u32 = 1 << 2;
/// Only threads in cgroup [`SyscallConfig::cgroup`] are traced.
pub const FILTER_CGROUP: u32 = 1 << 3;

/// Filters and options, written by user space into a read-only global before
/// the program is loaded (so the verifier sees constants and prunes unused
/// filters).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SyscallConfig {
    /// `FILTER_*` bits.
    pub flags: u32,
    /// A thread group never traced: weft's own, so its draining does not
    /// show up in (and feed back into) what it measures. 0 traces everything.
    pub ignore_tgid: u32,
    /// Syscalls shorter than this are counted as filtered, not emitted.
    pub min_duration_ns: u64,
    /// The cgroup v2 id (its directory's inode) threads must be in.
    pub cgroup: u64,
    /// Task name to match, NUL-padded as in `task_struct::comm`.
    pub comm: [u8; 16],
    /// Bitmap of syscall numbers to trace, bit `nr % 64` of word `nr / 64`.
    pub syscalls: [u64; (MAX_SYSCALLS / 64) as usize],
}
const _: () = assert!(core::mem::size_of::<SyscallConfig>() == 104);

impl SyscallConfig {
    /// A configuration that traces every syscall of every thread.
    pub const ALL: Self = Self {
        flags: 0,
        ignore_tgid: 0,
        min_duration_ns: 0,
        cgroup: 0,
        comm: [0; 16],
        syscalls: [0; (MAX_SYSCALLS / 64) as usize],
    };

    /// Whether syscall `nr` passes the syscall filter.
    #[expect(clippy::inline_always, reason = "eBPF code must not call out for this")]
    #[expect(
        clippy::needless_bitwise_bool,
        reason = "branch-free for the verifier, see body"
    )]
    #[inline(always)]
    #[must_use]
    pub fn wants_syscall(&self, nr: u32) -> bool {
        if self.flags & FILTER_SYSCALL == 0 {
            return true;
        }
        // Branch-free on purpose: the word is loaded through a mask, which the
        // verifier can bound, and the range check is combined afterwards (a
        // check before the load lets the compiler drop the mask, and the
        // verifier cannot always follow the bound through register copies).
        let word = self.syscalls[((nr / 64) & (MAX_SYSCALLS / 64 - 1)) as usize];
        (nr < MAX_SYSCALLS) & (word & (1 << (nr % 64)) != 0)
    }

    /// Adds syscall `nr` to the syscall filter (and turns the filter on).
    /// Numbers at or above [`MAX_SYSCALLS`] are ignored.
    pub fn add_syscall(&mut self, nr: u32) {
        if nr < MAX_SYSCALLS {
            self.flags |= FILTER_SYSCALL;
            self.syscalls[(nr / 64) as usize] |= 1 << (nr % 64);
        }
    }
}

/// Per-CPU counters the probe keeps; the value is the slot in a CPU's row
/// of [`COUNTERS_MAP`]. With [`Batch::seen`], `received + RingFull == seen`
/// holds for every CPU.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Records that did not fit the ring buffer and were dropped.
    RingFull = 0,
    /// Entries that could not be stored (task storage allocation failed);
    /// their exit is then also counted as `ExitWithoutEnter`.
    EnterTableFull = 1,
    /// Exits whose entry was never seen (began before weft attached, or its
    /// entry was not stored). These syscalls are not in `seen`.
    ExitWithoutEnter = 2,
}

/// Number of [`Counter`] slots.
pub const COUNTERS: u32 = 3;

/// Slots of each CPU's row of [`COUNTERS_MAP`] (see [`crate::counters`]).
pub const COUNTER_ROW: u32 = crate::counters::row(COUNTERS);

#[cfg(feature = "pod")]
mod user {
    // SAFETY: both are `#[repr(C)]`, `Copy`, made of integers, with no padding
    // holes (asserted by size above), so every bit pattern is valid.
    unsafe impl aya::Pod for super::SyscallEvent {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::InFlight {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::SyscallConfig {}
}
