//! The contract of `weft trace`'s generic programs: one program per probe
//! type copies what user space asks for (task identity, chosen strings,
//! the first bytes of the context) into per-CPU rings, after testing the
//! predicate parts user space pushed down. User space runs the actions.

/// Name of the per-CPU ring buffer array map.
pub const RINGS_MAP: &str = "TRACE_RINGS";
/// Name of the hash map from probe key (the attach cookie: the attach
/// point's index) to [`ProbeConfig`].
pub const PROBES_MAP: &str = "TRACE_PROBES";
/// Name of the per-CPU counter array, indexed by [`Counter`].
pub const COUNTERS_MAP: &str = "TRACE_COUNTERS";
/// Name of the stack trace map `kstack`/`ustack` ids point into.
pub const STACKS_MAP: &str = "TRACE_STACKS";
/// Name of the per-CPU hash map of `count()`s kept in the kernel, from
/// [`CountKey`] to events counted.
pub const COUNTS_MAP: &str = "TRACE_COUNTS";
/// Entries of [`COUNTS_MAP`] (bpftrace's default `mapmax`); an event whose
/// key finds no room goes to user space instead, which counts it there.
pub const MAX_COUNTS: u32 = 4096;
/// Name of the global holding weft's own thread group id (never traced).
pub const IGNORE_GLOBAL: &str = "TRACE_IGNORE_TGID";

/// Bytes of each string the kernel reads (bpftrace's default `strlen`).
pub const STRING_LEN: usize = 64;
/// Strings per event at most.
pub const MAX_STRINGS: usize = 3;
/// Context bytes copied per event at most.
pub const MAX_RAW: usize = 256;
/// Predicate parts tested in the kernel per probe at most.
pub const MAX_FILTERS: usize = 4;
/// Bytes of the per-CPU scratch record (header, strings, context). The
/// kernel bounds lengths with masks ([`RAW_MASK`], [`STRINGS_MASK`]) that
/// older verifiers follow, so the scratch holds the masked maximum.
pub const SCRATCH: usize = 1024;
/// Mask bounding the context bytes copied (user space asks for at most
/// [`MAX_RAW`]).
pub const RAW_MASK: usize = 2 * MAX_RAW - 1;
/// Mask bounding the number of strings (at most [`MAX_STRINGS`]).
pub const STRINGS_MASK: usize = 3;
const _: () = assert!(MAX_STRINGS <= STRINGS_MASK);
const _: () = assert!(HEADER_SIZE + STRINGS_MASK * STRING_LEN + RAW_MASK < SCRATCH);

/// Strings `join()` reads from a pointer array, at most (bpftrace's
/// `join_argnum`).
pub const JOIN_ARGS: usize = 16;
/// Bytes of each string `join()` reads (bpftrace's `join_argsize`).
pub const JOIN_ARG_LEN: usize = 1024;
/// Bytes of the block `join()` appends to a record: [`JOIN_ARGS`] slots of
/// [`JOIN_ARG_LEN`], NUL-padded; an empty slot ends the array.
pub const JOIN_SIZE: usize = JOIN_ARGS * JOIN_ARG_LEN;
/// Bytes of the per-CPU scratch: a record without `join()` fits in
/// [`SCRATCH`]; one with it adds the block right after its context bytes,
/// so that a record longer than [`SCRATCH`] ends with a join block.
pub const SCRATCH_BYTES: usize = SCRATCH + JOIN_SIZE;

/// Copies of the fentry, fexit and raw tracepoint programs in the object:
/// these attach without a cookie, so each target needs a program of its
/// own, and copy `i` of kind `k` reads the configuration at [`copy_key`].
pub const COPIES: u32 = 8;

/// Copies of the tracepoint program: the kernel runs one program at most
/// once per tracepoint, so each probe on the same tracepoint needs its own
/// (`weft_trace_tracepoint`, then `weft_trace_tracepoint_1`, ...).
pub const TRACEPOINT_COPIES: usize = 4;

/// Program families that come in [`COPIES`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    /// `fentry:` (the context is the argument array).
    Fentry = 1,
    /// `fexit:` (the arguments, then the return value).
    Fexit = 2,
    /// `rawtracepoint:` (the context is the argument array).
    RawTracepoint = 3,
}

/// The [`PROBES_MAP`] key of copy `i` of `kind`: above every attach index.
#[must_use]
pub const fn copy_key(kind: CopyKind, i: u32) -> u32 {
    ((kind as u32) << 16) | i
}

/// Per-CPU counters.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Events that passed the kernel-side filters.
    Seen = 0,
    /// Events dropped because the ring was full.
    RingFull = 1,
    /// Events counted in [`COUNTS_MAP`] rather than sent.
    Counted = 2,
}

/// Number of [`Counter`] slots.
pub const COUNTERS: u32 = 3;

/// What keys a `count()` kept in the kernel ([`ProbeConfig::count_key`]).
pub const COUNT_KEY_NONE: u8 = 0;
/// The task name.
pub const COUNT_KEY_COMM: u8 = 1;
/// The thread group id.
pub const COUNT_KEY_PID: u8 = 2;
/// The thread id.
pub const COUNT_KEY_TID: u8 = 3;
/// The CPU.
pub const COUNT_KEY_CPU: u8 = 4;

/// A key of [`COUNTS_MAP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CountKey {
    /// [`ProbeConfig::count_map`]: which map of the program.
    pub map: u32,
    /// [`ProbeConfig::count_key`]: what the bytes hold.
    pub kind: u32,
    /// The task name, NUL-padded, or a little-endian `u32` id.
    pub key: [u8; 16],
}

/// What a filter compares.
pub const SUBJECT_NONE: u8 = 0;
/// The thread group id.
pub const SUBJECT_PID: u8 = 1;
/// The thread id.
pub const SUBJECT_TID: u8 = 2;
/// The user id.
pub const SUBJECT_UID: u8 = 3;
/// An integer at [`Filter::offset`] of the context.
pub const SUBJECT_FIELD: u8 = 4;

/// Comparison operators of a [`Filter`].
pub const OP_EQ: u8 = 0;
/// `!=`.
pub const OP_NE: u8 = 1;
/// `<`.
pub const OP_LT: u8 = 2;
/// `<=`.
pub const OP_LE: u8 = 3;
/// `>`.
pub const OP_GT: u8 = 4;
/// `>=`.
pub const OP_GE: u8 = 5;

/// One predicate part: `subject op value`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    /// A `SUBJECT_*` value; `SUBJECT_NONE` ends the list.
    pub subject: u8,
    /// An `OP_*` value.
    pub op: u8,
    /// Bytes of the field (1, 2, 4 or 8).
    pub size: u8,
    /// Whether the field is signed.
    pub signed: u8,
    /// Offset of the field in the context.
    pub offset: u32,
    /// The constant compared with.
    pub value: i64,
}

/// String sources.
pub const STRING_POINTER: u8 = 1;
/// A `__data_loc` field: `(length << 16) | offset` into the record.
pub const STRING_DATA_LOC: u8 = 2;

/// What the kernel does for one probe.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeConfig {
    /// The attach point index written into each record's header.
    pub attach: u16,
    /// Context bytes to copy (at most [`MAX_RAW`]).
    pub raw_len: u16,
    /// Strings to read (at most [`MAX_STRINGS`]).
    pub strings: u8,
    /// Whether [`Self::comm`] must equal the task's name.
    pub match_comm: u8,
    /// `STRING_*` kind of each string.
    pub string_kinds: [u8; MAX_STRINGS],
    /// `STACK_*` bits: which stacks to record.
    pub stacks: u8,
    /// Context offset of each string's pointer or `__data_loc` word.
    pub string_offsets: [u16; MAX_STRINGS],
    /// Task name to match, NUL-padded.
    pub comm: [u8; 16],
    /// Context offset of the pointer array `join()` reads.
    pub join_offset: u16,
    /// Whether to read the array at [`Self::join_offset`] (`join()`).
    pub join: u8,
    /// The map (index + 1) a probe whose only action is `@map[key] =
    /// count()` counts into in the kernel, sending nothing; 0 sends.
    pub count_map: u16,
    /// A `COUNT_KEY_*` value: what keys the count.
    pub count_key: u8,
    /// Keeps the filters 8-byte aligned without padding holes.
    pub reserved: [u8; 2],
    /// Predicate parts, all of which must hold.
    pub filters: [Filter; MAX_FILTERS],
}

/// [`ProbeConfig::stacks`]: record the kernel stack.
pub const STACK_KERNEL: u8 = 1;
/// [`ProbeConfig::stacks`]: record the user stack.
pub const STACK_USER: u8 = 2;

/// The start of every record; then `strings` strings of [`STRING_LEN`]
/// bytes, then `raw_len` bytes of the context, then, for a probe that
/// calls `join()`, a block of [`JOIN_SIZE`] bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// `bpf_ktime_get_ns`.
    pub ns: u64,
    /// `bpf_get_current_pid_tgid`: tgid in the high half.
    pub pid_tgid: u64,
    /// `bpf_get_current_uid_gid`: gid in the high half.
    pub uid_gid: u64,
    /// The task name.
    pub comm: [u8; 16],
    /// The CPU.
    pub cpu: u32,
    /// The attach point index ([`ProbeConfig::attach`]).
    pub attach: u16,
    /// Context bytes that follow the strings.
    pub raw_len: u16,
    /// The kernel stack's id in [`STACKS_MAP`], negative when not recorded.
    pub kstack: i32,
    /// The user stack's id in [`STACKS_MAP`], negative when not recorded.
    pub ustack: i32,
}

/// Bytes of a [`Header`].
pub const HEADER_SIZE: usize = 56;
const _: () = assert!(core::mem::size_of::<Header>() == HEADER_SIZE);

#[cfg(feature = "user")]
mod user {
    // SAFETY: `#[repr(C)]`, `Copy`, integers only, no padding holes.
    unsafe impl aya::Pod for super::ProbeConfig {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::CountKey {}
}
