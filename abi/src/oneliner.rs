//! The contract of `weft trace`'s generic programs: one program per probe
//! type copies what user space asks for (task identity, chosen strings,
//! the first bytes of the context) into per-CPU rings, after testing the
//! predicate parts user space pushed down. User space runs the actions,
//! but for a probe whose only action is an aggregation the program can
//! keep: the program files the event in [`AGGS_MAP`] instead. A start
//! time saved at one probe and read at a later one (`@start[tid] = nsecs`,
//! then `nsecs - @start[tid]`) is kept in [`STARTS_MAP`] instead of a map
//! of user space's, so neither probe needs to send its events for it.

/// Name of the per-CPU ring buffer array map.
pub const RINGS_MAP: &str = "ONELINER_RINGS";
/// Name of the hash map from probe key (the attach cookie: the attach
/// point's index) to [`ProbeConfig`].
pub const PROBES_MAP: &str = "ONELINER_PROBES";
/// Name of the per-CPU counter array, indexed by [`Counter`].
pub const COUNTERS_MAP: &str = "ONELINER_COUNTERS";
/// Name of the stack trace map `kstack`/`ustack` ids point into.
pub const STACKS_MAP: &str = "ONELINER_STACKS";
/// Name of the per-CPU hash map of aggregations kept in the kernel, from
/// [`AggKey`] to [`AggValue`].
pub const AGGS_MAP: &str = "ONELINER_AGGS";
/// Entries of [`AGGS_MAP`], shared by every map the kernel aggregates for
/// (twice bpftrace's default `mapmax`, as a histogram's buckets are keys
/// here); an event whose key finds no room goes to user space instead,
/// which aggregates it there.
pub const MAX_AGGS: u32 = 8192;
/// Name of the LRU hash map of pointers kept per thread: `tid | id << 32`
/// to the pointer ([`ProbeConfig::save`]), whose string a later probe of
/// the thread reads ([`STRING_SAVED`]).
pub const SAVED_MAP: &str = "ONELINER_SAVED";
/// Pointers one probe keeps in [`SAVED_MAP`] at most.
pub const MAX_SAVES: usize = 2;
/// Entries of [`SAVED_MAP`].
pub const MAX_SAVED: u32 = 16384;
/// Name of the hash map of start times the kernel keeps, from [`StartKey`]
/// to the `bpf_ktime_get_ns` of the probe that stored it ([`Starts`]).
pub const STARTS_MAP: &str = "ONELINER_STARTS";
/// Entries of [`STARTS_MAP`], shared by every map kept there. A plain hash,
/// as bpftrace's maps are: a start that finds no room is counted
/// ([`Counter::StartsLost`]), never one evicted unseen.
pub const MAX_STARTS: u32 = 65536;
/// Name of the global of the maps whose starts are kept by thread and
/// left as 0 when taken ([`Starts::tombstone`]), bit [`Starts::map`] set
/// for each: [`THREAD_EXIT_PROGRAM`] removes a thread's 0s when the
/// thread exits, so they do not fill [`STARTS_MAP`].
pub const TID_STARTS_GLOBAL: &str = "ONELINER_TID_STARTS";
/// [`Starts::map`] values past this one have no bit in
/// [`TID_STARTS_GLOBAL`]: their starts are deleted when taken.
pub const LAST_TID_STARTS: u16 = 63;
/// The program on `sched:sched_process_exit` that removes the exiting
/// thread's taken starts.
pub const THREAD_EXIT_PROGRAM: &str = "weft_oneliner_thread_exit";
/// Name of the global holding weft's own thread group id (never traced).
pub const IGNORE_GLOBAL: &str = "ONELINER_IGNORE_TGID";
/// Name of the global of `USES_*` bits: the parts of the generic body
/// that some probe of the one-liner needs ([`ProbeConfig::uses`]). The
/// verifier reads a frozen read-only global as a constant, so it walks
/// only those parts: most one-liners need few, and walking every part is
/// most of their start-up.
pub const USES_GLOBAL: &str = "ONELINER_USES";
/// Predicate parts ([`ProbeConfig::filters`]).
pub const USES_FILTERS: u32 = 1 << 0;
/// The task name test ([`ProbeConfig::match_comm`]).
pub const USES_COMM: u32 = 1 << 1;
/// Start times stored or taken ([`ProbeConfig::starts`]).
pub const USES_STARTS: u32 = 1 << 2;
/// `signal()`.
pub const USES_SIGNAL: u32 = 1 << 3;
/// Pointers kept for a later probe ([`ProbeConfig::save`]).
pub const USES_SAVE: u32 = 1 << 4;
/// Aggregation in the kernel ([`ProbeConfig::agg`]).
pub const USES_AGG: u32 = 1 << 5;
/// `kstack` or `ustack`.
pub const USES_STACKS: u32 = 1 << 6;
/// Strings at a pointer, a `__data_loc` field or a kept pointer.
pub const USES_STRINGS: u32 = 1 << 7;
/// Memory at the end of a [`Chain`] ([`STRING_MEMORY`], [`STRING_CHAIN`]).
pub const USES_MEMORY: u32 = 1 << 8;
/// `join()`.
pub const USES_JOIN: u32 = 1 << 9;
/// An aggregation's value or key part read as an integer ([`Operand`]s
/// of the task, the CPU or the context).
pub const USES_OPERANDS: u32 = 1 << 10;
/// An aggregation of the time since a start ([`SUBJECT_ELAPSED`]).
pub const USES_ELAPSED: u32 = 1 << 11;
/// `hist()` in the kernel.
pub const USES_LOG2: u32 = 1 << 12;
/// `lhist()` in the kernel.
pub const USES_LINEAR: u32 = 1 << 13;
/// Every part: the global's value in the object, for loaders that do not
/// set it.
pub const USES_ALL: u32 = (1 << 14) - 1;

/// Bytes of each string slot by default (bpftrace's default `strlen`): a
/// string the kernel reads, or a struct region.
pub const STRING_LEN: usize = 64;
/// Bytes of a string slot at most: `BPFTRACE_STRLEN` up to bpftrace's
/// maximum, 200, rounded up to a power of two for the kernel's masks.
pub const MAX_STRING_LEN: usize = 256;
/// The global holding the slot length of a loaded program (a power of two
/// from [`STRING_LEN`] to [`MAX_STRING_LEN`]): read-only, so the verifier
/// knows it.
pub const STRING_LEN_GLOBAL: &str = "ONELINER_STRING_LEN";
/// Strings and struct regions per event at most: bpftrace has no such
/// limit, and a program reading a struct, its string members and another
/// struct behind it needs five or six.
pub const MAX_STRINGS: usize = 7;
/// Context bytes copied per event at most.
pub const MAX_RAW: usize = 256;
/// Predicate parts tested in the kernel per probe at most.
pub const MAX_FILTERS: usize = 4;
/// Bytes of the per-CPU scratch record (header, strings, context). The
/// kernel bounds lengths with masks ([`RAW_MASK`], [`STRINGS_MASK`]) that
/// older verifiers follow, so the scratch holds the masked maximum.
pub const SCRATCH: usize = 4096;
/// Mask bounding the context bytes copied (user space asks for at most
/// [`MAX_RAW`]).
pub const RAW_MASK: usize = 2 * MAX_RAW - 1;
/// Mask bounding the number of strings (at most [`MAX_STRINGS`]).
pub const STRINGS_MASK: usize = 7;
const _: () = assert!(MAX_STRINGS <= STRINGS_MASK);
const _: () = assert!(HEADER_SIZE + STRINGS_MASK * MAX_STRING_LEN + RAW_MASK < SCRATCH);

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

/// Name of the global saying, for each fentry and fexit copy and iterator, where its
/// `path()`s find their `struct path` ([`path_spec`], 0: none), at
/// [`path_index`]. The kernel's `bpf_d_path` takes only a pointer of a
/// type the verifier knows, loaded from the context at a constant offset;
/// a frozen read-only global is a constant to the verifier, where the
/// probe map's configuration is not.
pub const PATHS_GLOBAL: &str = "ONELINER_PATHS";
/// `path()`s per probe at most.
pub const PATHS_PER_PROBE: usize = 2;
/// Entries of [`PATHS_GLOBAL`]: the fentry copies', the fexit's, then the
/// iterators'.
pub const PATHS: usize = (2 * COPIES as usize + ITERATORS.len()) * PATHS_PER_PROBE;

/// Where in [`PATHS_GLOBAL`] `path()` number `j` of copy `copy` of an
/// fentry (`exit` false) or fexit program is.
#[must_use]
pub const fn path_index(exit: bool, copy: usize, j: usize) -> usize {
    ((exit as usize) * COPIES as usize + copy) * PATHS_PER_PROBE + j
}

/// Where in [`PATHS_GLOBAL`] `path()` number `j` of iterator `i` (of
/// [`ITERATORS`]) is.
#[must_use]
pub const fn iterator_path_index(i: usize, j: usize) -> usize {
    (2 * COPIES as usize + i) * PATHS_PER_PROBE + j
}

/// A [`PATHS_GLOBAL`] entry: the `struct path` at `offset` bytes into what
/// argument `arg` points to, its path written into string slot `slot`.
#[must_use]
pub const fn path_spec(slot: u8, arg: u8, offset: u16) -> u32 {
    (slot as u32 + 1) | (arg as u32) << 8 | (offset as u32) << 16
}

/// Name of the global saying, for each fentry and fexit copy, which
/// argument is the `struct sk_buff *` its `skboutput()`s copy ([`skb_spec`],
/// 0: none), at `path_index(exit, copy, 0) / PATHS_PER_PROBE`: the kernel's
/// `bpf_skb_output` takes only a pointer the verifier typed, as
/// `bpf_d_path` does ([`PATHS_GLOBAL`]).
pub const SKBS_GLOBAL: &str = "ONELINER_SKBS";
/// Entries of [`SKBS_GLOBAL`]: the fentry copies', then the fexit's.
pub const SKBS: usize = 2 * COPIES as usize;
/// The perf event array `bpf_skb_output` writes the packets into, one
/// buffer per CPU: each sample is a [`SkbMeta`], then the packet's bytes.
pub const SKB_OUTPUT_MAP: &str = "ONELINER_SKB_OUT";
/// Bytes of a packet copied at most: a perf sample's size is 16 bits, its
/// header and [`SkbMeta`] inside it.
pub const MAX_SKB_BYTES: u32 = 65_000;

/// A [`SKBS_GLOBAL`] entry: argument `arg` is the `struct sk_buff *`, whose
/// `len` is at `len_at` bytes into it.
#[must_use]
pub const fn skb_spec(arg: u8, len_at: u16) -> u32 {
    (arg as u32 + 1) | (len_at as u32) << 16
}

/// What precedes a packet in a [`SKB_OUTPUT_MAP`] sample: the event's time
/// and CPU, as its record's header has them, to find the record by.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkbMeta {
    /// The record's `ns`.
    pub ns: u64,
    /// The record's `cpu`.
    pub cpu: u32,
    /// The packet's bytes that follow.
    pub len: u32,
}

/// Arguments of a function an fentry or fexit program reads (the kernel's
/// `MAX_BPF_FUNC_ARGS`).
pub const MAX_FUNCTION_ARGS: usize = 12;

/// Copies of the tracepoint program: the kernel runs one program at most
/// once per tracepoint, so each probe on the same tracepoint needs its own
/// (`weft_oneliner_tracepoint`, then `weft_oneliner_tracepoint_1`, ...).
pub const TRACEPOINT_COPIES: usize = 4;

/// Widths of the tracepoint program: how many bytes of the record each
/// loads in place rather than through `bpf_probe_read_kernel` (0: none).
/// The kernel attaches a program only to a tracepoint whose last field
/// ends at or past the furthest byte the program loads in place, so each
/// tracepoint takes the widest its record allows. The copies of width `W`
/// are `weft_oneliner_tracepoint_wW`, `weft_oneliner_tracepoint_wW_1`, ...
pub const TRACEPOINT_WIDTHS: [u32; 4] = [0, 24, 40, 64];

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
    /// `iter:` (the context is the iterator's `struct bpf_iter__KIND`):
    /// copy `i` is the [`ITERATORS`]' `i`th, one program each.
    Iter = 4,
}

/// The kernel iterators `iter:` probes run, as bpftrace 0.17 names them;
/// the program of each is `weft_oneliner_iter_KIND`.
pub const ITERATORS: [&str; 2] = ["task", "task_file"];

/// Attach points a program may have: [`PROBES_MAP`]'s slots below this
/// are keyed by attach index, the [`copy_key`]s come after.
pub const MAX_ATTACHES: u32 = 4096;

/// Slots of [`PROBES_MAP`], an array (a lookup the verifier inlines,
/// where a hash map's cost ~40 ns an event).
pub const PROBE_SLOTS: u32 = MAX_ATTACHES + 4 * COPIES;

/// The [`PROBES_MAP`] key of copy `i` of `kind`: above every attach index.
#[must_use]
pub const fn copy_key(kind: CopyKind, i: u32) -> u32 {
    MAX_ATTACHES + (kind as u32 - 1) * COPIES + i
}

/// Per-CPU counters.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// Events that passed the kernel-side filters and were to be sent
    /// (those the kernel kept count as [`Counter::Aggregated`] instead).
    Seen = 0,
    /// Events dropped because the ring was full.
    RingFull = 1,
    /// Events aggregated in [`AGGS_MAP`], or whose start time was kept in
    /// [`STARTS_MAP`], rather than sent.
    Aggregated = 2,
    /// Start times [`STARTS_MAP`] had no room for.
    StartsLost = 3,
}

/// Number of [`Counter`] slots.
pub const COUNTERS: u32 = 4;

/// Slots of each CPU's row of [`COUNTERS_MAP`] (see [`crate::counters`]).
pub const COUNTER_ROW: u32 = crate::counters::row(COUNTERS);

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
/// The CPU.
pub const SUBJECT_CPU: u8 = 5;
/// [`Operand::constant`].
pub const SUBJECT_CONST: u8 = 6;
/// The task name (an aggregation key: 16 bytes, NUL-padded).
pub const SUBJECT_COMM: u8 = 7;
/// The attach point's index, which user space names as `probe`.
pub const SUBJECT_PROBE: u8 = 8;
/// The attach point's index, which user space names as `func`.
pub const SUBJECT_FUNC: u8 = 9;
/// The time since the start the probe took from [`STARTS_MAP`], divided
/// by [`Operand::constant`] (a sample: `(nsecs - @start[tid]) / 1000`).
pub const SUBJECT_ELAPSED: u8 = 10;

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

/// A value the kernel reads for an aggregation: its key parts and sample.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Operand {
    /// A `SUBJECT_*` value; `SUBJECT_NONE` is no operand.
    pub subject: u8,
    /// Bytes of a field (1, 2, 4 or 8).
    pub size: u8,
    /// Whether a field is signed.
    pub signed: u8,
    /// Keeps the offset aligned without a padding hole.
    pub reserved: u8,
    /// Offset of a field in the context.
    pub offset: u32,
    /// The value of `SUBJECT_CONST`.
    pub constant: i64,
}

/// Key parts of an aggregation at most (`@map[a, b]`).
pub const KEY_PARTS: usize = 2;
/// Bytes each key part takes in [`AggKey::key`].
pub const KEY_PART_LEN: usize = 16;

/// How an aggregation files its sample ([`Aggregation::how`]): not at all,
/// the probe sends its events.
pub const AGG_NONE: u8 = 0;
/// Under slot 0: count, sum, min, max, avg, stats.
pub const AGG_PLAIN: u8 = 1;
/// Under its log2 bucket: `hist()`.
pub const AGG_LOG2: u8 = 2;
/// Under its linear bucket: `lhist()`.
pub const AGG_LINEAR: u8 = 3;

/// One `@map[keys] = f(sample)` the kernel keeps itself.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Aggregation {
    /// The map: its index in the program, plus one.
    pub map: u16,
    /// An `AGG_*` value.
    pub how: u8,
    /// Keeps the operands aligned without a padding hole.
    pub reserved: [u8; 5],
    /// The key's parts; `SUBJECT_NONE` ends them.
    pub keys: [Operand; KEY_PARTS],
    /// The sample (`SUBJECT_NONE` for `count()`).
    pub value: Operand,
    /// `lhist()`'s lower bound.
    pub min: i64,
    /// `lhist()`'s upper bound.
    pub max: i64,
    /// `lhist()`'s step (> 0).
    pub step: i64,
}

/// A key of [`AGGS_MAP`]. 8-aligned so the kernel side writes its parts
/// as whole words: the verifier wants stack stores aligned, and a zeroed
/// byte array compiles to a call of a byte-by-byte `memset`.
#[repr(C, align(8))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AggKey {
    /// [`Aggregation::map`].
    pub map: u16,
    /// The `SUBJECT_*` of each key part, which says how its bytes read.
    pub parts: [u8; KEY_PARTS],
    /// The bucket of `hist()` and `lhist()`, else 0.
    pub slot: u32,
    /// Each part: the task name, NUL-padded, or a little-endian `i64`.
    pub key: [[u8; KEY_PART_LEN]; KEY_PARTS],
}

const _: () = assert!(core::mem::size_of::<Aggregation>() == 80);
const _: () = assert!(core::mem::size_of::<AggKey>() == 40);

/// What the kernel keeps per [`AggKey`] and CPU: everything every kind
/// needs, so one update serves them all.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AggValue {
    /// Samples.
    pub count: u64,
    /// Their sum, wrapping as BPF's arithmetic does.
    pub sum: i64,
    /// The least.
    pub min: i64,
    /// The greatest.
    pub max: i64,
}

impl AggValue {
    /// Nothing aggregated yet.
    pub const EMPTY: Self = Self {
        count: 0,
        sum: 0,
        min: i64::MAX,
        max: i64::MIN,
    };

    /// Adds one sample.
    #[expect(clippy::inline_always, reason = "eBPF code must not call out for this")]
    #[inline(always)]
    pub fn add(&mut self, sample: i64) {
        self.count += 1;
        self.sum = self.sum.wrapping_add(sample);
        if sample < self.min {
            self.min = sample;
        }
        if sample > self.max {
            self.max = sample;
        }
    }

    /// Adds what another CPU kept.
    pub fn merge(&mut self, other: &Self) {
        self.count += other.count;
        self.sum = self.sum.wrapping_add(other.sum);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
}

/// bpftrace's log2 bucket of `v` (`hist()`): 0 for negatives, 1 for 0,
/// then `k + 2` for [2^k, 2^(k+1)). Without branches (and without a count
/// of leading zeros, which BPF lacks): each branch on the sample would
/// double the paths the verifier walks, and loading slows with them.
#[expect(clippy::inline_always, reason = "eBPF code must not call out for this")]
#[inline(always)]
#[must_use]
pub fn log2_bucket(v: i64) -> u32 {
    // 1 unless negative.
    let counted = ((!v).cast_unsigned() >> 63) as u32;
    // Every bit below the highest set one set too: its bit count is then
    // the highest bit's position plus one (0 for 0).
    let mut x = v.cast_unsigned();
    x |= x >> 1;
    x |= x >> 2;
    x |= x >> 4;
    x |= x >> 8;
    x |= x >> 16;
    x |= x >> 32;
    x -= (x >> 1) & 0x5555_5555_5555_5555;
    x = (x & 0x3333_3333_3333_3333) + ((x >> 2) & 0x3333_3333_3333_3333);
    x = (x + (x >> 4)) & 0x0f0f_0f0f_0f0f_0f0f;
    let bits = x.wrapping_mul(0x0101_0101_0101_0101) >> 56;
    (bits as u32 + 1) * counted
}

/// bpftrace's linear bucket of `v` (`lhist()`): 0 below `min`, then one
/// per `step`, then one for `max` and above; `step` > 0.
#[expect(clippy::inline_always, reason = "eBPF code must not call out for this")]
#[inline(always)]
#[must_use]
pub fn linear_bucket(v: i64, min: i64, max: i64, step: i64) -> u32 {
    if v < min {
        0
    } else {
        // checked: a division that may panic does not load in BPF.
        let above = if v >= max { max } else { v }
            .wrapping_sub(min)
            .cast_unsigned();
        above.checked_div(step.cast_unsigned()).unwrap_or(0) as u32 + 1
    }
}

/// What a probe does with [`STARTS_MAP`] ([`Starts::how`]): nothing.
pub const STARTS_NONE: u8 = 0;
/// Stores the event's time under the key (`@start[tid] = nsecs`).
pub const STARTS_STORE: u8 = 1;
/// Takes the time stored under the key into [`Header::start`] (0 when
/// there is none), for `nsecs - @start[tid]`.
pub const STARTS_TAKE: u8 = 2;

/// A probe's use of one map of start times kept in [`STARTS_MAP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Starts {
    /// A `STARTS_*` value.
    pub how: u8,
    /// [`STARTS_TAKE`]: the event is dropped when there is no start, as
    /// the predicate `/@start[tid]/` drops it.
    pub required: u8,
    /// [`STARTS_TAKE`]: the start is deleted once taken
    /// (`delete(@start[tid])`).
    pub delete: u8,
    /// [`STARTS_STORE`]: the event is sent too; else storing the start was
    /// the probe's only action.
    pub send: u8,
    /// The map: its index in the program, plus one.
    pub map: u16,
    /// The key is the thread and the map has its bit in
    /// [`TID_STARTS_GLOBAL`]: a
    /// start taken and deleted is left as 0, and a start stored over one
    /// is written in place. A thread's start taken and stored again so is
    /// two lookups where deleting and inserting it is three hash updates
    /// (the latency idiom's cost, from 0.48 to 0.34 of bpftrace's).
    pub tombstone: u8,
    /// Keeps the key aligned without a padding hole.
    pub reserved: u8,
    /// The key the start is stored or taken under.
    pub key: Operand,
}

/// A key of [`STARTS_MAP`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StartKey {
    /// [`Starts::map`].
    pub map: u16,
    /// Keeps the key aligned without a padding hole.
    pub reserved: [u8; 6],
    /// The key's value.
    pub key: i64,
}

const _: () = assert!(core::mem::size_of::<Starts>() == 24);
const _: () = assert!(core::mem::size_of::<StartKey>() == 16);

/// String sources.
pub const STRING_POINTER: u8 = 1;
/// A `__data_loc` field: `(length << 16) | offset` into the record.
pub const STRING_DATA_LOC: u8 = 2;
/// Not a string: [`Chain::len`] bytes of memory at the end of the slot's
/// [`Chain`] (kernel struct fields, `$task->real_parent->pid`).
pub const STRING_MEMORY: u8 = 3;
/// The string a `char *` points to, where the last of the slot's
/// [`Chain`] hops leads (`str(args->file->f_path.dentry->d_name.name)`).
pub const STRING_CHAIN: u8 = 4;
/// The string at the pointer [`SAVED_MAP`] keeps for the thread under the
/// id in the slot's offset: a syscall's input saved at its entry
/// (`@filename[tid] = args.filename`), read at its exit, once the kernel
/// has touched it, as bpftrace reads it.
pub const STRING_SAVED: u8 = 5;
/// The file path of a `struct path` (`path()`), which the program's
/// [`PATHS_GLOBAL`] entry places and `bpf_d_path` writes; the slot is
/// zeroed before.
pub const STRING_PATH: u8 = 6;

/// [`ProbeConfig::live`]: a probe the kernel fires at the current
/// thread's own act (a system call, a function, a uprobe, a sample);
/// weft's own events are left out.
pub const LIVE: u8 = 1;
/// [`ProbeConfig::live`]: BEGIN or END, which weft runs in its own thread
/// (`BPF_PROG_TEST_RUN`): its events are weft's.
pub const LIVE_IN_WEFT: u8 = 2;
/// [`ProbeConfig::live`]: a tracepoint the kernel fires about any task or
/// in an interrupt (a wakeup, a block completion, a packet): the thread
/// current then is incidental, and the event is kept when it is weft.
pub const LIVE_ANY_THREAD: u8 = 3;

/// Pointers a [`Chain`] follows at most (`a->b->c->d->e`).
pub const MAX_HOPS: usize = 4;
/// [`Chain::start`]: the probe's context (its record, registers or
/// argument array).
pub const START_CONTEXT: u8 = 0;
/// [`Chain::start`]: the current task (`curtask`).
pub const START_TASK: u8 = 1;
/// [`Chain::start`]: the current task's address itself, into the slot's
/// first 8 bytes (`curtask` as a value); nothing is read.
pub const START_TASK_ADDRESS: u8 = 2;
/// [`Chain::start`]: a fixed address, user or kernel memory by its value
/// (`*(int32 *)kaddr("nr_cpu_ids")`), held in the chain's last two
/// offsets ([`Chain::address`]), so that such a chain follows at most
/// [`ADDRESS_HOPS`] pointers.
pub const START_ADDRESS: u8 = 3;
/// [`Chain::start`]: the pointer [`SAVED_MAP`] keeps for the thread under
/// the id held as a [`START_ADDRESS`] chain's address: a struct pointer
/// saved at a function's entry, its members read at the exit
/// (`@sk[tid] = arg0` … `((struct sock *)@sk[tid])->sk_state`). Nothing is
/// read where the thread has none.
pub const START_SAVED: u8 = 4;
/// Pointers a chain from a fixed address follows at most.
pub const ADDRESS_HOPS: usize = MAX_HOPS - 2;

/// Where the bytes of a [`STRING_MEMORY`] slot are: from the start's
/// address, each of the first `hops` offsets names a pointer to follow
/// (read at that offset from the address so far); `len` bytes are read at
/// `at` from the last. User or kernel memory by address. Offsets from an
/// address read from memory (every one but the first) are signed: a USDT
/// argument may be at `-8(%rbp)`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    /// A `START_*` value.
    pub start: u8,
    /// Pointers followed (at most [`MAX_HOPS`]).
    pub hops: u8,
    /// Bytes read (1 to the slot's length, [`MAX_STRING_LEN`] at most).
    pub len: u16,
    /// Offset of the bytes from the last address.
    pub at: u32,
    /// Offset of each pointer from the address before it.
    pub offsets: [u32; MAX_HOPS],
}

impl Chain {
    /// The fixed address a [`START_ADDRESS`] chain starts from: its last
    /// two offsets, low word first.
    #[must_use]
    pub fn address(&self) -> u64 {
        u64::from(self.offsets[ADDRESS_HOPS]) | u64::from(self.offsets[ADDRESS_HOPS + 1]) << 32
    }

    /// Sets the fixed address of a [`START_ADDRESS`] chain.
    pub fn set_address(&mut self, address: u64) {
        self.offsets[ADDRESS_HOPS] = address as u32;
        self.offsets[ADDRESS_HOPS + 1] = (address >> 32) as u32;
    }
}

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
    /// A signal to send the task when the filters hold (`signal()`), or 0.
    pub signal: u8,
    /// Pointers to keep for the thread in [`SAVED_MAP`], each under this
    /// id, plus one; 0 keeps none.
    pub saves: [u8; MAX_SAVES],
    /// [`LIVE`] once user space configured the probe (an array slot it
    /// never wrote reads as zeros), [`LIVE_IN_WEFT`] for BEGIN and END,
    /// [`LIVE_ANY_THREAD`] where weft's own thread may be current.
    pub live: u8,
    /// Keeps the offsets aligned without a padding hole.
    pub reserved: u8,
    /// Context offset of each pointer [`Self::saves`] keeps.
    pub save_offsets: [u16; MAX_SAVES],
    /// Predicate parts, all of which must hold.
    pub filters: [Filter; MAX_FILTERS],
    /// A probe whose only action is an aggregation the kernel can keep
    /// aggregates here and sends nothing; `AGG_NONE` sends. An event the
    /// kernel cannot file is sent. One per probe: a second doubled the
    /// paths the verifier walks through the rest of the program, and with
    /// them the load time of every one-liner.
    pub agg: Aggregation,
    /// The chain of each [`STRING_MEMORY`] slot.
    pub chains: [Chain; MAX_STRINGS],
    /// The start time the probe stores or takes, if any.
    pub starts: Starts,
}

const _: () = assert!(core::mem::size_of::<ProbeConfig>() == 392);

impl ProbeConfig {
    /// The `USES_*` parts of the generic body this probe needs: a program
    /// loaded without one of them ignores that part of the configuration.
    #[must_use]
    pub fn uses(&self) -> u32 {
        let strings = &self.string_kinds[..usize::from(self.strings).min(MAX_STRINGS)];
        let agg = &self.agg;
        let aggregates = agg.how != AGG_NONE;
        let integer = |operand: &Operand| {
            !matches!(
                operand.subject,
                SUBJECT_NONE | SUBJECT_COMM | SUBJECT_PROBE | SUBJECT_FUNC | SUBJECT_ELAPSED
            )
        };
        [
            (self.filters[0].subject != SUBJECT_NONE, USES_FILTERS),
            (self.match_comm != 0, USES_COMM),
            (self.starts.how != STARTS_NONE, USES_STARTS),
            (self.signal != 0, USES_SIGNAL),
            (self.saves[0] != 0, USES_SAVE),
            (aggregates, USES_AGG),
            (self.stacks != 0, USES_STACKS),
            (strings.iter().any(|k| !is_memory(*k)), USES_STRINGS),
            (strings.iter().any(|k| is_memory(*k)), USES_MEMORY),
            (self.join != 0, USES_JOIN),
            (
                aggregates && (agg.keys.iter().any(integer) || integer(&agg.value)),
                USES_OPERANDS,
            ),
            (
                aggregates && agg.value.subject == SUBJECT_ELAPSED,
                USES_ELAPSED,
            ),
            (agg.how == AGG_LOG2, USES_LOG2),
            (agg.how == AGG_LINEAR, USES_LINEAR),
        ]
        .into_iter()
        .filter(|(used, _)| *used)
        .fold(0, |uses, (_, part)| uses | part)
    }
}

/// Whether a string slot of this `STRING_*` kind is read along a [`Chain`]
/// (a path's: where its `struct path` is).
#[must_use]
pub fn is_memory(kind: u8) -> bool {
    kind == STRING_MEMORY || kind == STRING_CHAIN || kind == STRING_PATH
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
    /// The start time the probe took ([`STARTS_TAKE`]), else 0.
    pub start: u64,
}

/// Bytes of a [`Header`].
pub const HEADER_SIZE: usize = 64;
const _: () = assert!(core::mem::size_of::<Header>() == HEADER_SIZE);

#[cfg(feature = "pod")]
mod user {
    // SAFETY: `#[repr(C)]`, `Copy`, integers only, no padding holes.
    unsafe impl aya::Pod for super::ProbeConfig {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::AggKey {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::AggValue {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::StartKey {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_uses_the_parts_its_configuration_names() {
        assert_eq!(ProbeConfig::default().uses(), 0);
        let mut config = ProbeConfig {
            strings: 2,
            string_kinds: [STRING_POINTER, STRING_CHAIN, STRING_MEMORY, 0, 0, 0, 0],
            ..ProbeConfig::default()
        };
        // The third slot is past `strings`.
        assert_eq!(config.uses(), USES_STRINGS | USES_MEMORY);
        config.strings = 0;
        config.agg.how = AGG_PLAIN;
        config.agg.keys[0].subject = SUBJECT_COMM;
        assert_eq!(config.uses(), USES_AGG);
        config.agg.keys[1].subject = SUBJECT_PID;
        assert_eq!(config.uses(), USES_AGG | USES_OPERANDS);
        config.agg.keys[1].subject = SUBJECT_NONE;
        config.agg.how = AGG_LOG2;
        config.agg.value.subject = SUBJECT_ELAPSED;
        config.starts.how = STARTS_TAKE;
        assert_eq!(
            config.uses(),
            USES_AGG | USES_LOG2 | USES_ELAPSED | USES_STARTS
        );
        config = ProbeConfig {
            filters: [Filter {
                subject: SUBJECT_PID,
                ..Filter::default()
            }; MAX_FILTERS],
            match_comm: 1,
            signal: 9,
            saves: [1, 0],
            stacks: STACK_USER,
            join: 1,
            ..ProbeConfig::default()
        };
        assert_eq!(
            config.uses(),
            USES_FILTERS | USES_COMM | USES_SIGNAL | USES_SAVE | USES_STACKS | USES_JOIN
        );
        config.agg.how = AGG_LINEAR;
        assert_eq!(config.uses() & USES_LINEAR, USES_LINEAR);
        assert_eq!(USES_ALL.count_ones(), 14, "every part is in USES_ALL");
        // A configuration that needs every part needs USES_ALL: no bit is
        // one that no configuration sets.
        config.strings = 2;
        config.string_kinds = [STRING_POINTER, STRING_MEMORY, 0, 0, 0, 0, 0];
        config.starts.how = STARTS_STORE;
        config.agg.value.subject = SUBJECT_ELAPSED;
        config.agg.keys[0].subject = SUBJECT_TID;
        assert_eq!(config.uses() | USES_LOG2, USES_ALL);
    }

    #[test]
    fn buckets_are_bpftraces() {
        let reference = |v: i64| match v {
            i64::MIN..=-1 => 0,
            0 => 1,
            _ => 65 - v.leading_zeros(),
        };
        for k in 0..63 {
            for v in [(1i64 << k) - 1, 1 << k, (1 << k) + 1, -(1 << k)] {
                assert_eq!(log2_bucket(v), reference(v), "{v}");
            }
        }
        for v in [i64::MIN, i64::MAX, 1000, 4096, 1808] {
            assert_eq!(log2_bucket(v), reference(v), "{v}");
        }
        assert_eq!(linear_bucket(-1, 0, 2000, 500), 0);
        assert_eq!(linear_bucket(999, 0, 2000, 500), 2);
        assert_eq!(linear_bucket(2996, 0, 2000, 500), 5);
        assert_eq!(linear_bucket(i64::MIN, -10, 10, 0), 0);
    }
}
