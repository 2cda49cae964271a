//! `weft trace`'s generic programs (see `weft_abi::oneliner`): each copies
//! the task identity, the strings and the context bytes its probe's
//! configuration asks for into this CPU's ring, after testing the pushed-down
//! predicate parts. One body, [`capture`], serves every probe type.

use core::mem::MaybeUninit;

use aya_ebpf::{
    EbpfContext,
    btf_maps::{ArrayOfMaps, RingBuf},
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task,
        bpf_get_current_uid_gid, bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_probe_read_kernel,
        bpf_probe_read_kernel_str_bytes, bpf_probe_read_user, bpf_probe_read_user_str_bytes,
        generated::{
            bpf_d_path, bpf_get_attach_cookie, bpf_skb_output, bpf_seq_write, bpf_get_current_comm as bpf_get_current_comm_raw,
            bpf_probe_read_kernel as probe_read,
            bpf_probe_read_user as probe_read_user, bpf_send_signal,
        },
    },
    macros::{
        btf_map, fentry, fexit, kprobe, map, perf_event, raw_tracepoint, tracepoint, uprobe,
        uretprobe,
    },
    maps::{Array, HashMap, LruHashMap, PerCpuArray, PerCpuHashMap, PerfEventByteArray, StackTrace},
    programs::{
        FEntryContext, FExitContext, PerfEventContext, ProbeContext, RawTracePointContext,
        RetProbeContext, TracePointContext, tracing::StackIdContext,
    },
};
use weft_abi::{
    oneliner::{
        AGG_LINEAR, AGG_LOG2, AGG_NONE, AggKey, AggValue, Aggregation, COUNTER_ROW, Chain, CopyKind,
        Counter, Filter, HEADER_SIZE, Header, JOIN_ARG_LEN, JOIN_ARGS, JOIN_SIZE, KEY_PART_LEN,
        KEY_PARTS, LIVE, MAX_AGGS, MAX_SKB_BYTES, PATHS, SKBS, SkbMeta, PATHS_PER_PROBE, STRING_PATH, MAX_FILTERS, MAX_HOPS, MAX_SAVED, MAX_SAVES, MAX_STARTS, MAX_STRINGS, OP_EQ,
        OP_GE, OP_GT, OP_LE, OP_LT, OP_NE, Operand, PROBE_SLOTS, ProbeConfig, RAW_MASK, SCRATCH, SCRATCH_BYTES,
        STACK_KERNEL, STACK_USER, START_ADDRESS, START_SAVED, START_TASK, START_TASK_ADDRESS, STARTS_NONE, STARTS_STORE, STARTS_TAKE, STRING_CHAIN,
        STRING_DATA_LOC, STRING_LEN, STRING_SAVED, MAX_STRING_LEN, STRINGS_MASK, SUBJECT_COMM, SUBJECT_CONST,
        SUBJECT_CPU, SUBJECT_ELAPSED, SUBJECT_FIELD, SUBJECT_FUNC, SUBJECT_NONE, SUBJECT_PID,
        SUBJECT_PROBE, SUBJECT_TID, SUBJECT_UID, StartKey, Starts, USES_AGG, USES_ALL, USES_COMM,
        USES_ELAPSED, USES_FILTERS, USES_JOIN, USES_LINEAR, USES_LOG2, USES_MEMORY, USES_OPERANDS,
        USES_SAVE, USES_SIGNAL, USES_STACKS, USES_STARTS, USES_STRINGS, copy_key, is_memory,
        iterator_path_index, path_index,
        linear_bucket, log2_bucket,
    },
    syscall::MAX_CPUS,
};

use crate::counters::{self, Counters};

#[unsafe(no_mangle)]
static ONELINER_IGNORE_TGID: u32 = 0;

/// The maps of starts kept by thread whose taken starts are left as 0,
/// a bit per map (`weft_abi::oneliner::TID_STARTS_GLOBAL`), set by the
/// loader. Read-only, so the verifier walks the maps set only.
#[unsafe(no_mangle)]
static ONELINER_TID_STARTS: u64 = 0;

/// The parts of the body some probe needs (`weft_abi::oneliner::USES_*`),
/// set by the loader. Read-only, so the verifier knows its value and does
/// not walk the parts left out.
#[unsafe(no_mangle)]
static ONELINER_USES: u32 = USES_ALL;

/// Where each fentry and fexit copy's and each iterator's `path()`s find
/// their `struct path` (`weft_abi::oneliner::PATHS_GLOBAL`), set by the
/// loader. Read-only, so the verifier knows a program's argument and
/// offset as constants, as `bpf_d_path` needs, and walks no call in a
/// program without one.
#[unsafe(no_mangle)]
static ONELINER_PATHS: [u32; PATHS] = [0; PATHS];

/// Which argument of each fentry and fexit copy is the `struct sk_buff *`
/// its `skboutput()`s copy (`weft_abi::oneliner::SKBS_GLOBAL`), set by the
/// loader; read-only for the verifier, as [`ONELINER_PATHS`].
#[unsafe(no_mangle)]
static ONELINER_SKBS: [u32; SKBS] = [0; SKBS];

/// The packets `skboutput()` copies, each after its `SkbMeta`.
#[map]
static ONELINER_SKB_OUT: PerfEventByteArray = PerfEventByteArray::new(0);

/// [`capture`]'s `PATHS_AT` for programs that write no path.
const NO_PATHS: usize = usize::MAX;

/// Bytes of each string slot (`weft_abi::oneliner::STRING_LEN_GLOBAL`),
/// set by the loader from `BPFTRACE_STRLEN`. Read-only, so the verifier
/// knows the slots' bounds and drops the stores past them.
#[unsafe(no_mangle)]
static ONELINER_STRING_LEN: u32 = STRING_LEN as u32;

/// The slot length, 1 to [`MAX_STRING_LEN`] by a mask.
#[inline(always)]
fn string_len() -> usize {
    // SAFETY: a global the loader sets; read_volatile keeps the compiler
    // from folding in the default.
    let len = unsafe { core::ptr::read_volatile(&ONELINER_STRING_LEN) } as usize;
    (len.wrapping_sub(1) & (MAX_STRING_LEN - 1)) + 1
}

/// Whether some probe needs one of `parts`.
#[inline(always)]
fn uses(parts: u32) -> bool {
    // SAFETY: a global the loader sets; read_volatile keeps the compiler
    // from folding in the default.
    (unsafe { core::ptr::read_volatile(&ONELINER_USES) } & parts) != 0
}

#[btf_map]
static ONELINER_RINGS: ArrayOfMaps<RingBuf<u8, { 1 << 16 }>, { MAX_CPUS as usize }> =
    ArrayOfMaps::new();

#[map]
static ONELINER_PROBES: Array<ProbeConfig> = Array::with_max_entries(PROBE_SLOTS, 0);

#[btf_map]
static ONELINER_COUNTERS: Counters = Counters::new();

/// Aggregations kept in the kernel.
#[map]
static ONELINER_AGGS: PerCpuHashMap<AggKey, AggValue> = PerCpuHashMap::with_max_entries(MAX_AGGS, 0);

/// Pointers kept per thread for a later probe's string.
#[map]
static ONELINER_SAVED: LruHashMap<u64, u64> = LruHashMap::with_max_entries(MAX_SAVED, 0);

/// Start times kept for a later probe (`@start[tid] = nsecs`).
#[map]
static ONELINER_STARTS: HashMap<StartKey, u64> = HashMap::with_max_entries(MAX_STARTS, 0);

/// Stacks for `kstack` and `ustack`, by id.
#[map]
static ONELINER_STACKS: StackTrace = StackTrace::with_max_entries(16384, 0);

/// `BPF_F_USER_STACK`.
const USER_STACK: u64 = 1 << 8;

/// Where a record is assembled before it is copied into the ring.
#[map]
static ONELINER_SCRATCH: PerCpuArray<[u8; SCRATCH_BYTES]> = PerCpuArray::with_max_entries(1, 0);

/// Addresses below this are user memory on x86-64.
const USER_TOP: u64 = 0x0000_8000_0000_0000;

/// Every tracepoint: the attach cookie is the probe key. (The record's
/// `common_type` cannot say which tracepoint fired: the kernel overwrites
/// the record's first 8 bytes with a `pt_regs` pointer before BPF runs.)
/// The kernel runs a program at most once per tracepoint, so a second
/// probe on the same tracepoint takes the next copy (see
/// `weft_abi::oneliner::TRACEPOINT_COPIES`).
macro_rules! tracepoints {
    ($($width:literal: $($name:ident)*;)*) => {$($(
        #[tracepoint]
        // Inlined into the entry point the macro makes: older verifiers
        // (6.1) reject a global subprogram that takes the context.
        #[inline(always)]
        pub fn $name(ctx: TracePointContext) -> u32 {
            // SAFETY: the helper only reads the current run context.
            let key = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
            capture::<_, $width, NO_PATHS>(&ctx, key as u32);
            0
        }
    )*)*};
}

// Each copy in each width of `weft_abi::oneliner::TRACEPOINT_WIDTHS`: the
// bytes of the record it loads in place ([`word_in_place`]), the widest a
// tracepoint's record is long enough for.
tracepoints! {
    0: weft_oneliner_tracepoint weft_oneliner_tracepoint_1
       weft_oneliner_tracepoint_2 weft_oneliner_tracepoint_3;
    24: weft_oneliner_tracepoint_w24 weft_oneliner_tracepoint_w24_1
        weft_oneliner_tracepoint_w24_2 weft_oneliner_tracepoint_w24_3;
    40: weft_oneliner_tracepoint_w40 weft_oneliner_tracepoint_w40_1
        weft_oneliner_tracepoint_w40_2 weft_oneliner_tracepoint_w40_3;
    64: weft_oneliner_tracepoint_w64 weft_oneliner_tracepoint_w64_1
        weft_oneliner_tracepoint_w64_2 weft_oneliner_tracepoint_w64_3;
}

/// kprobes and kretprobes: the context is the `pt_regs` the arguments and
/// return value are read from.
#[kprobe]
#[inline(always)]
pub fn weft_oneliner_kprobe(ctx: ProbeContext) -> u32 {
    registers(&ctx)
}

/// uprobes (aya attaches them, and needs the entry and return kinds apart).
#[uprobe]
#[inline(always)]
pub fn weft_oneliner_uprobe(ctx: ProbeContext) -> u32 {
    registers(&ctx)
}

#[uretprobe]
#[inline(always)]
pub fn weft_oneliner_uretprobe(ctx: RetProbeContext) -> u32 {
    registers(&ctx)
}

/// Captures a probe whose context is `pt_regs`.
#[inline(always)]
fn registers<C: StackIdContext>(ctx: &C) -> u32 {
    // SAFETY: the helper only reads the current run context.
    let key = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    capture::<C, 0, NO_PATHS>(ctx, key as u32);
    0
}

/// `profile:hz:N`: a CPU clock sample. No context bytes are copied (the
/// context is not the registers themselves), so probes have no fields.
#[perf_event]
#[inline(always)]
pub fn weft_oneliner_perf(ctx: PerfEventContext) -> u32 {
    // SAFETY: the helper only reads the current run context.
    let key = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    capture::<_, 0, NO_PATHS>(&ctx, key as u32);
    0
}

/// Copies `i` of the fentry, fexit and raw tracepoint programs; each reads
/// the configuration at its own key (see `weft_abi::oneliner::COPIES`).
macro_rules! copies {
    ($($i:literal: $fentry:ident $fexit:ident $raw:ident;)*) => {$(
        #[fentry]
        #[inline(always)]
        pub fn $fentry(ctx: FEntryContext) -> u32 {
            capture::<_, 0, { path_index(false, $i, 0) }>(&ctx, copy_key(CopyKind::Fentry, $i));
            0
        }

        #[fexit]
        #[inline(always)]
        pub fn $fexit(ctx: FExitContext) -> u32 {
            capture::<_, 0, { path_index(true, $i, 0) }>(&ctx, copy_key(CopyKind::Fexit, $i));
            0
        }

        #[raw_tracepoint]
        #[inline(always)]
        pub fn $raw(ctx: RawTracePointContext) -> u32 {
            capture::<_, 0, NO_PATHS>(&ctx, copy_key(CopyKind::RawTracepoint, $i));
            0
        }
    )*};
}

copies! {
    0: weft_oneliner_fentry_0 weft_oneliner_fexit_0 weft_oneliner_raw_tp_0;
    1: weft_oneliner_fentry_1 weft_oneliner_fexit_1 weft_oneliner_raw_tp_1;
    2: weft_oneliner_fentry_2 weft_oneliner_fexit_2 weft_oneliner_raw_tp_2;
    3: weft_oneliner_fentry_3 weft_oneliner_fexit_3 weft_oneliner_raw_tp_3;
    4: weft_oneliner_fentry_4 weft_oneliner_fexit_4 weft_oneliner_raw_tp_4;
    5: weft_oneliner_fentry_5 weft_oneliner_fexit_5 weft_oneliner_raw_tp_5;
    6: weft_oneliner_fentry_6 weft_oneliner_fexit_6 weft_oneliner_raw_tp_6;
    7: weft_oneliner_fentry_7 weft_oneliner_fexit_7 weft_oneliner_raw_tp_7;
}

/// Copies 0 and 1 of the raw tracepoint program in a second form, which
/// loads the context's second word in place (see [`word_in_place`]) rather
/// than through `bpf_probe_read_kernel`: for `sys_enter` and `sys_exit`,
/// whose two arguments are the most the kernel lets a program attached
/// there load (the syscall's number, or its return value, is the second).
/// Two, one per hook as a latency pair takes them: each program in the
/// object costs start-up, eight of them 2.5 ms; a later copy takes the
/// plain form.
macro_rules! raw_copies_16 {
    ($($i:literal: $raw:ident;)*) => {$(
        #[raw_tracepoint]
        #[inline(always)]
        pub fn $raw(ctx: RawTracePointContext) -> u32 {
            capture::<_, 16, NO_PATHS>(&ctx, copy_key(CopyKind::RawTracepoint, $i));
            0
        }
    )*};
}

raw_copies_16! {
    0: weft_oneliner_raw_tp_w16_0;
    1: weft_oneliner_raw_tp_w16_1;
}

/// `iter:task` and `iter:task_file`: run for each task (each open file of
/// each task) when weft reads the iterator, and once more at the end with
/// no task, which is no event.
#[unsafe(no_mangle)]
#[unsafe(link_section = "iter/task")]
pub fn weft_oneliner_iter_task(ctx: *mut core::ffi::c_void) -> i32 {
    iterate::<{ iterator_path_index(0, 0) }>(ctx, 0)
}

#[unsafe(no_mangle)]
#[unsafe(link_section = "iter/task_file")]
pub fn weft_oneliner_iter_task_file(ctx: *mut core::ffi::c_void) -> i32 {
    iterate::<{ iterator_path_index(1, 0) }>(ctx, 1)
}

/// Iterator `i`'s program, its `path()`s at `PATHS_AT`.
#[inline(always)]
fn iterate<const PATHS_AT: usize>(ctx: *mut core::ffi::c_void, i: u32) -> i32 {
    let ctx: *const u8 = ctx.cast_const().cast();
    // SAFETY: the context's words are the iterator's meta, then its task.
    let (meta, task) = unsafe { (context_word::<0>(ctx), context_word::<8>(ctx)) };
    if task == 0 {
        return 0;
    }
    let context = FEntryContext::new(ctx.cast_mut().cast());
    capture::<_, 0, PATHS_AT>(&context, copy_key(CopyKind::Iter, i));
    // One byte to the iterator's file per object, so that a read of N
    // bytes returns after N objects and weft drains the rings between:
    // a system's tasks or files at once would overflow them.
    // SAFETY: the meta's first word is its seq_file, which the verifier
    // types from the meta's BTF.
    let seq = unsafe { context_word::<0>(meta as *const u8) };
    let byte = 0u8;
    // SAFETY: one byte from the stack into the iterator's seq_file.
    unsafe { bpf_seq_write(seq as *mut _, (&raw const byte).cast(), 1) };
    0
}

fn count(counter: Counter) {
    counters::add(&ONELINER_COUNTERS, COUNTER_ROW, counter as u32, 1);
}

/// Reads `T` at `offset` bytes into the context.
#[inline(always)]
fn read<T>(ctx: *const u8, offset: usize) -> Option<T> {
    // SAFETY: bpf_probe_read checks the address.
    unsafe { bpf_probe_read_kernel(ctx.wrapping_add(offset).cast::<T>()) }.ok()
}

/// The word at byte `AT` of the context, loaded by an instruction of its
/// own at that constant offset: plain loads at several offsets the
/// compiler merges into one at `ctx + offset`, which the verifier refuses.
///
/// # Safety
///
/// The context holds 8 bytes at `AT` (the verifier checks it).
#[inline(always)]
unsafe fn context_word<const AT: u32>(ctx: *const u8) -> u64 {
    let word: u64;
    // SAFETY: the caller's.
    unsafe {
        core::arch::asm!(
            "{word} = *(u64 *)({ctx} + {at})",
            word = lateout(reg) word,
            ctx = in(reg) ctx,
            at = const AT,
            options(pure, readonly, nostack, preserves_flags),
        )
    };
    word
}

/// The word at `offset` of the context: loaded in place where it lies
/// within the first `in_place` bytes at an offset syscall fields (and
/// many others) are at, else read by the `bpf_probe_read_kernel` helper
/// (~16 ns an event). Only a tracepoint's record may be loaded so, and
/// only at a constant offset (the verifier refuses a load at a variable
/// one); the kernel refuses to attach a program to a tracepoint whose
/// record is shorter than the furthest byte it loads in place, so
/// `in_place` is a constant of each program (0: none), the rest of its
/// loads compiled out. Each load is an instruction of its own: as plain
/// loads, the compiler merges them into one at `ctx + offset`.
#[inline(always)]
fn word_in_place(ctx: *const u8, in_place: u32, offset: u32) -> Option<u64> {
    macro_rules! in_place {
        ($($at:literal)*) => {
            $(
                if $at + 8 <= in_place && offset == $at {
                    // SAFETY: an aligned word of the record, which the
                    // kernel made at least `in_place` bytes long.
                    return Some(unsafe { context_word::<$at>(ctx) });
                }
            )*
        };
    }
    in_place!(8 16 24 32 40 48 56);
    read::<u64>(ctx, offset as usize)
}

#[inline(always)]
fn compare(op: u8, left: i64, right: i64) -> bool {
    match op {
        OP_EQ => left == right,
        OP_NE => left != right,
        OP_LT => left < right,
        OP_LE => left <= right,
        OP_GT => left > right,
        OP_GE => left >= right,
        _ => false,
    }
}

/// Whether every pushed-down predicate part holds.
#[inline(always)]
fn passes(ctx: *const u8, in_place: u32, filters: &[Filter; MAX_FILTERS], pid_tgid: u64) -> bool {
    for filter in filters {
        if filter.subject == SUBJECT_NONE {
            return true;
        }
        let Some(value) = integer(
            ctx,
            in_place,
            filter.subject,
            filter.offset,
            filter.size,
            filter.signed,
            pid_tgid,
        ) else {
            return false;
        };
        if !compare(filter.op, value, filter.value) {
            return false;
        }
    }
    true
}

/// The integer `subject` names: an id of the task, the CPU, or a field of
/// the context (`size` bytes at `offset`, sign-extended when `signed`).
/// The uid is asked for only here, where a probe uses it.
#[inline(always)]
fn integer(
    ctx: *const u8,
    in_place: u32,
    subject: u8,
    offset: u32,
    size: u8,
    signed: u8,
    pid_tgid: u64,
) -> Option<i64> {
    Some(match subject {
        SUBJECT_PID => (pid_tgid >> 32) as i64,
        SUBJECT_TID => i64::from(pid_tgid as u32),
        SUBJECT_UID => i64::from(bpf_get_current_uid_gid() as u32),
        // SAFETY: a helper without preconditions.
        SUBJECT_CPU => i64::from(unsafe { bpf_get_smp_processor_id() }),
        SUBJECT_FIELD => {
            let raw = word_in_place(ctx, in_place, offset)?;
            let bits = u32::from(size & 15) * 8;
            if bits == 0 || bits >= 64 {
                raw as i64
            } else if signed != 0 {
                ((raw << (64 - bits)) as i64) >> (64 - bits)
            } else {
                (raw & ((1u64 << bits) - 1)) as i64
            }
        }
        _ => return None,
    })
}

/// Tests the probe's filters and writes its record into this CPU's ring.
#[inline(always)]
///
/// `IN_PLACE` is how many bytes of the context the program may load in
/// place (see [`word_in_place`]); 0 where every field is read by the helper.
#[inline(always)]
fn capture<C: StackIdContext, const IN_PLACE: u32, const PATHS_AT: usize>(context: &C, key: u32) {
    let ctx: *const u8 = context.as_ptr().cast();
    let Some(config) = ONELINER_PROBES.get(key).filter(|config| config.live != 0) else {
        return;
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    // SAFETY: a global the loader sets; read_volatile keeps its value live.
    if config.live == LIVE
        && (pid_tgid >> 32) as u32 == unsafe { core::ptr::read_volatile(&ONELINER_IGNORE_TGID) }
    {
        return;
    }
    if uses(USES_FILTERS) && !passes(ctx, IN_PLACE, &config.filters, pid_tgid) {
        return;
    }
    // The task's name and ids are asked for where they are used: a probe
    // that keeps its event in the kernel may need none of them.
    if uses(USES_COMM) && config.match_comm != 0 && !comm_is(&config.comm) {
        return;
    }
    let starts = &config.starts;
    let mut start = 0;
    if uses(USES_STARTS) && starts.how == STARTS_TAKE {
        match take_start(ctx, IN_PLACE, starts, pid_tgid) {
            Some(taken) => start = taken,
            // The predicate `/@start[tid]/` is false.
            None if starts.required != 0 => return,
            None => {}
        }
    }
    if uses(USES_SIGNAL) && config.signal != 0 {
        // SAFETY: sends a signal to the current task's process; the
        // checker allowed it only under --unsafe.
        unsafe { bpf_send_signal(u32::from(config.signal)) };
    }
    if uses(USES_SAVE) {
        for i in 0..MAX_SAVES {
            let id = config.saves[i];
            if id != 0
                && let Some(pointer) = read::<u64>(ctx, config.save_offsets[i] as usize)
            {
                let _ = ONELINER_SAVED.insert(&saved_key(pid_tgid, id), &pointer, 0);
            }
        }
    }
    // Read once, and only where it is used: a probe that aggregates alone
    // needs no time.
    let ns = if config.agg.how == AGG_NONE || starts.how != STARTS_NONE {
        // SAFETY: a helper without preconditions.
        unsafe { bpf_ktime_get_ns() }
    } else {
        0
    };
    if uses(USES_STARTS) && starts.how == STARTS_STORE {
        if !store_start(ctx, IN_PLACE, starts, pid_tgid, ns) {
            count(Counter::StartsLost);
        }
        if starts.send == 0 {
            count(Counter::Aggregated);
            return;
        }
    }
    if uses(USES_AGG) && config.agg.how != AGG_NONE {
        let task = Task {
            ctx,
            in_place: IN_PLACE,
            attach: config.attach,
            pid_tgid,
            ns,
            start,
        };
        if aggregate(&task, &config.agg) {
            count(Counter::Aggregated);
            return;
        }
    }
    // Each event that passed is counted once: here, when it is to be sent,
    // or above, when the kernel kept it.
    count(Counter::Seen);
    let Some(buf) = ONELINER_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    // SAFETY: the per-CPU scratch value, used by one program at a time on
    // this CPU (tracing programs do not nest on one CPU's scratch use).
    let buf = unsafe { &mut *buf };
    // SAFETY: helpers without preconditions.
    let (ns, cpu) = unsafe {
        // An aggregation the kernel could not file took no time above.
        let ns = if ns == 0 { bpf_ktime_get_ns() } else { ns };
        (ns, bpf_get_smp_processor_id())
    };
    // A mask, not `min`: the compiler keeps it, and 6.1's verifier follows
    // it (it loses a `min` bound and rejects the copy below).
    let raw_len = config.raw_len as usize & RAW_MASK;
    let stack = |wanted: u8, flags: u64| {
        if !uses(USES_STACKS) || config.stacks & wanted == 0 {
            return -1;
        }
        context
            .get_stackid(&ONELINER_STACKS, flags)
            .map_or(-1, |id| id as i32)
    };
    // Field by field into the scratch buffer, which holds at least a
    // header: a `Header` value would zero its comm first (a `memset`
    // call) only for the helper to overwrite it.
    let header = buf.as_mut_ptr().cast::<Header>();
    // SAFETY: fields of the header at the start of the scratch buffer.
    unsafe {
        (&raw mut (*header).ns).write_unaligned(ns);
        (&raw mut (*header).pid_tgid).write_unaligned(pid_tgid);
        (&raw mut (*header).uid_gid).write_unaligned(bpf_get_current_uid_gid());
        current_comm((&raw mut (*header).comm).cast());
        (&raw mut (*header).cpu).write_unaligned(cpu);
        (&raw mut (*header).attach).write_unaligned(config.attach);
        (&raw mut (*header).raw_len).write_unaligned(raw_len as u16);
        (&raw mut (*header).kstack).write_unaligned(stack(STACK_KERNEL, 0));
        (&raw mut (*header).ustack).write_unaligned(stack(STACK_USER, USER_STACK));
        (&raw mut (*header).start).write_unaligned(start);
    }
    let strings = if uses(USES_STRINGS | USES_MEMORY) {
        config.strings as usize & STRINGS_MASK
    } else {
        0
    };
    for i in 0..MAX_STRINGS {
        if i >= strings {
            break;
        }
        read_string(ctx, config, i, pid_tgid, buf);
    }
    if PATHS_AT != NO_PATHS && uses(USES_MEMORY) {
        write_paths::<PATHS_AT>(ctx, buf);
    }
    if PATHS_AT != NO_PATHS {
        // A copy's skb entry is its first path's index over the paths a
        // copy has; the iterators' lie past the entries, which have none.
        // Not behind `USES_MEMORY`: a probe may copy packets and read no
        // memory, and the entry, a constant to the verifier, gates it.
        output_skb(context, PATHS_AT / PATHS_PER_PROBE, ns, cpu);
    }
    let start = HEADER_SIZE + strings * string_len();
    if raw_len > 0 {
        // SAFETY: start + raw_len ≤ SCRATCH by the masks (asserted in
        // weft_abi::oneliner);
        // the helper checks the source.
        unsafe {
            probe_read(
                buf.as_mut_ptr().add(start).cast(),
                raw_len as u32,
                ctx.cast(),
            )
        };
    }
    // Below SCRATCH (asserted in weft_abi::oneliner); the mask says so to
    // the verifier.
    let mut len = (start + raw_len) & (SCRATCH - 1);
    if uses(USES_JOIN) && config.join != 0 {
        read_join(ctx, config, len, buf);
        len += JOIN_SIZE;
    }
    let ring = ONELINER_RINGS.get(cpu);
    let sent = ring.is_some_and(|ring| {
        // Flags 0: the kernel wakes weft only when this record lands in
        // an empty ring, which is once per drain while events flow, and
        // shows the first event after a quiet spell at once.
        ring.output_untyped::<[u8]>(&buf[..len], 0).is_ok()
    });
    if !sent {
        count(Counter::RingFull);
    }
}

/// What the kernel knows of the event: the context and the task.
struct Task {
    ctx: *const u8,
    /// The bytes of the context loaded in place ([`word_in_place`]).
    in_place: u32,
    attach: u16,
    pid_tgid: u64,
    /// `bpf_ktime_get_ns` at the event.
    ns: u64,
    /// The start time taken ([`STARTS_TAKE`]), else 0.
    start: u64,
}

/// The [`ONELINER_STARTS`] key `starts` names at this event.
#[inline(always)]
fn start_key(ctx: *const u8, in_place: u32, starts: &Starts, pid_tgid: u64) -> Option<StartKey> {
    let key = &starts.key;
    let value = integer(ctx, in_place, key.subject, key.offset, key.size, key.signed, pid_tgid)?;
    Some(key_of(starts.map, value))
}

/// The [`ONELINER_STARTS`] key of `value` in map `map`.
#[inline(always)]
fn key_of(map: u16, value: i64) -> StartKey {
    let mut key = MaybeUninit::<StartKey>::uninit();
    let at = key.as_mut_ptr();
    // SAFETY: our own stack value, every byte written before it is read:
    // `map` and the reserved bytes as one little-endian word, since
    // zeroed bytes alone compile to a `memset` call.
    unsafe {
        core::ptr::write_volatile(at.cast::<u64>(), u64::from(map));
        (&raw mut (*at).key).write(value);
        key.assume_init()
    }
}

/// The start time stored under the key `starts` names, deleted when the
/// probe deletes it.
#[inline(always)]
fn take_start(ctx: *const u8, in_place: u32, starts: &Starts, pid_tgid: u64) -> Option<u64> {
    let key = start_key(ctx, in_place, starts, pid_tgid)?;
    let slot = ONELINER_STARTS.get_ptr_mut(&key)?;
    // SAFETY: the map's value for this key, a plain u64.
    let start = unsafe { core::ptr::read_volatile(slot) };
    // A start taken already, left as 0 (`Starts::tombstone`).
    if start == 0 {
        return None;
    }
    if starts.delete != 0 {
        if starts.tombstone != 0 {
            // SAFETY: as above.
            unsafe { core::ptr::write_volatile(slot, 0) };
        } else {
            let _ = ONELINER_STARTS.remove(&key);
        }
    }
    Some(start)
}

/// Stores `ns` under the key `starts` names: in place over a start taken
/// already where the map keeps them (`Starts::tombstone`), which is a
/// lookup where an insert is a hash update.
#[inline(always)]
fn store_start(ctx: *const u8, in_place: u32, starts: &Starts, pid_tgid: u64, ns: u64) -> bool {
    let Some(key) = start_key(ctx, in_place, starts, pid_tgid) else {
        return false;
    };
    if starts.tombstone != 0
        && let Some(slot) = ONELINER_STARTS.get_ptr_mut(&key)
    {
        // SAFETY: the map's value for this key, a plain u64.
        unsafe { core::ptr::write_volatile(slot, ns) };
        return true;
    }
    ONELINER_STARTS.insert(&key, &ns, 0).is_ok()
}

/// On `sched:sched_process_exit`: removes the exiting thread's taken
/// starts (0s) of the maps kept by thread, which would otherwise stay
/// until the map is full. A start not taken stays, as bpftrace prints a
/// thread's start left by its last system call (`exit`) at the end.
#[tracepoint]
pub fn weft_oneliner_thread_exit(_ctx: TracePointContext) -> u32 {
    let tid = bpf_get_current_pid_tgid() as u32;
    // SAFETY: a global the loader sets; read_volatile keeps the compiler
    // from folding in the default.
    let maps = unsafe { core::ptr::read_volatile(&ONELINER_TID_STARTS) };
    for map in 1..64u16 {
        if maps & (1 << map) == 0 {
            continue;
        }
        let key = key_of(map, i64::from(tid));
        // SAFETY: the value is only read.
        if unsafe { ONELINER_STARTS.get(&key) } == Some(&0) {
            let _ = ONELINER_STARTS.remove(&key);
        }
    }
    0
}

/// `(ns - start) / divisor`, rounded toward zero as user space divides.
#[inline(always)]
fn elapsed(ns: u64, start: u64, divisor: i64) -> i64 {
    let since = ns.wrapping_sub(start).cast_signed();
    // checked: a division that may panic does not load in BPF; the
    // divisor is positive (the checker takes no other).
    let quotient = since
        .unsigned_abs()
        .checked_div(divisor.cast_unsigned())
        .unwrap_or(0)
        .cast_signed();
    if since < 0 { -quotient } else { quotient }
}

/// Files the event under `agg` in [`ONELINER_AGGS`]; false when it cannot (a
/// full map, an unreadable field), and the event is sent instead.
#[inline(always)]
fn aggregate(task: &Task, agg: &Aggregation) -> bool {
    let mut sample = 0;
    // Here, not in `operand`: keys never measure time, and each inlined
    // copy of the division would add paths for the verifier to walk.
    // Each part's test of `uses` leaves it out of a program loaded
    // without it; no probe of that program can need it.
    if agg.value.subject == SUBJECT_ELAPSED {
        if !uses(USES_ELAPSED) {
            return false;
        }
        sample = elapsed(task.ns, task.start, agg.value.constant);
    } else if agg.value.subject != SUBJECT_NONE {
        if !uses(USES_OPERANDS) {
            return false;
        }
        match operand(task, &agg.value) {
            Some(value) => sample = value,
            None => return false,
        }
    }
    let sample = forget_range(sample);
    let slot = match agg.how {
        AGG_LOG2 if uses(USES_LOG2) => log2_bucket(sample),
        AGG_LINEAR if uses(USES_LINEAR) => linear_bucket(sample, agg.min, agg.max, agg.step),
        _ => 0,
    };
    // Every byte written once, in place: a zeroed key first would be a
    // byte-by-byte `memset` call (~30 ns an event), and an `Option` of
    // bytes that is `None` leaves them undefined, which the verifier
    // refuses to copy.
    let mut key = MaybeUninit::<AggKey>::uninit();
    let at = key.as_mut_ptr();
    // SAFETY: fields of our own stack value, written before it is read.
    let parts = unsafe {
        (&raw mut (*at).map).write(agg.map);
        (&raw mut (*at).parts).write([agg.keys[0].subject, agg.keys[1].subject]);
        (&raw mut (*at).slot).write(slot);
        [&raw mut (*at).key[0], &raw mut (*at).key[1]]
    };
    if !key_part(task, &agg.keys[0], parts[0]) || !key_part(task, &agg.keys[1], parts[1]) {
        return false;
    }
    // SAFETY: every field is written above (AggKey has no padding).
    let key = unsafe { key.assume_init_ref() };
    if let Some(value) = ONELINER_AGGS.get_ptr_mut(key) {
        // SAFETY: this CPU's value; programs do not nest on one CPU here.
        unsafe { (*value).add(sample) };
        return true;
    }
    let mut value = AggValue::EMPTY;
    value.add(sample);
    ONELINER_AGGS.insert(key, &value, 0).is_ok()
}

/// `value`, with what the verifier knows of its range forgotten: it
/// passes through map memory, which the verifier does not follow. Each
/// subject gives the sample a range of its own, and each range would
/// otherwise walk the buckets' branches apart (loading took four times
/// as long).
#[inline(always)]
fn forget_range(value: i64) -> i64 {
    let Some(buf) = ONELINER_SCRATCH.get_ptr_mut(0) else {
        return value;
    };
    let slot = buf.cast::<i64>();
    // SAFETY: the per-CPU scratch holds far more than 8 bytes; nothing
    // else uses it until the record is built.
    unsafe {
        core::ptr::write_volatile(slot, value);
        core::ptr::read_volatile(slot)
    }
}

/// Writes one key part's bytes into `out` (8-aligned, see [`AggKey`]);
/// false when a field cannot be read.
#[inline(always)]
fn key_part(task: &Task, part: &Operand, out: *mut [u8; KEY_PART_LEN]) -> bool {
    let id = match part.subject {
        SUBJECT_NONE => 0,
        SUBJECT_COMM => {
            current_comm(out.cast());
            return true;
        }
        SUBJECT_PROBE | SUBJECT_FUNC => i64::from(task.attach),
        _ if !uses(USES_OPERANDS) => return false,
        _ => match operand(task, part) {
            Some(id) => id,
            None => return false,
        },
    };
    let words = out.cast::<u64>();
    // SAFETY: `out` is 16 aligned bytes of the key. Volatile, so the two
    // stores are not merged into a `memset` call.
    unsafe {
        core::ptr::write_volatile(words, id as u64);
        core::ptr::write_volatile(words.add(1), 0);
    }
    true
}

/// Writes the task's name, NUL-padded, into the 16 8-aligned bytes at
/// `out`. They are zeroed first as two words: kernels before 6.2 copy
/// the name with `strscpy`, which leaves the bytes after its NUL as they
/// were. (aya's `bpf_get_current_comm()` zeroes its own array byte by byte
/// instead, a `memset` call, then copies it out byte by byte again.)
#[inline(always)]
fn current_comm(out: *mut u8) {
    let words = out.cast::<u64>();
    // SAFETY: `out` points to 16 writable, 8-aligned bytes (a stack slot
    // or the scratch map value), which the helper fills. Volatile, so the
    // stores are not merged into a `memset` call.
    unsafe {
        core::ptr::write_volatile(words, 0);
        core::ptr::write_volatile(words.add(1), 0);
        bpf_get_current_comm_raw(out.cast(), 16);
    }
}

/// Whether the task's name is `expected` (NUL-padded).
#[inline(always)]
fn comm_is(expected: &[u8; 16]) -> bool {
    let mut comm = MaybeUninit::<[u64; 2]>::uninit();
    current_comm(comm.as_mut_ptr().cast());
    // SAFETY: all 16 bytes are written.
    let comm = unsafe { comm.assume_init() };
    let expected = expected.as_ptr().cast::<u64>();
    // SAFETY: 16 bytes of the configuration, read as two words.
    let want = unsafe { [expected.read_unaligned(), expected.add(1).read_unaligned()] };
    comm == want
}

/// The integer an operand names.
#[inline(always)]
fn operand(task: &Task, operand: &Operand) -> Option<i64> {
    if operand.subject == SUBJECT_CONST {
        return Some(operand.constant);
    }
    integer(
        task.ctx,
        task.in_place,
        operand.subject,
        operand.offset,
        operand.size,
        operand.signed,
        task.pid_tgid,
    )
}

/// Reads string `i` of the probe into its slot of `buf`, which stays
/// empty where a pointer cannot be read.
#[inline(always)]
fn read_string(
    ctx: *const u8,
    config: &ProbeConfig,
    i: usize,
    pid_tgid: u64,
    buf: &mut [u8; SCRATCH_BYTES],
) {
    let kind = config.string_kinds[i];
    if kind == STRING_PATH {
        // Written by write_paths, which leaves a slot as bpf_d_path does.
        if uses(USES_MEMORY) {
            zero_slot(i, buf);
        }
        return;
    }
    if is_memory(kind) {
        if uses(USES_MEMORY) {
            read_memory(ctx, &config.chains[i], kind == STRING_CHAIN, i, pid_tgid, buf);
        }
        return;
    }
    if !uses(USES_STRINGS) {
        return;
    }
    let len = string_len();
    let start = HEADER_SIZE + i * len;
    let slot = &mut buf[start..start + len];
    slot[0] = 0;
    let offset = config.string_offsets[i] as usize;
    let address = if kind == STRING_SAVED {
        // SAFETY: the value is only read.
        match unsafe { ONELINER_SAVED.get(&saved_key(pid_tgid, offset as u8)) } {
            Some(pointer) => *pointer,
            None => return,
        }
    } else if kind == STRING_DATA_LOC {
        let Some(loc) = read::<u32>(ctx, offset) else {
            return;
        };
        ctx as u64 + u64::from(loc & 0xffff)
    } else {
        let Some(pointer) = read::<u64>(ctx, offset) else {
            return;
        };
        pointer
    };
    read_str_at(address, slot);
}

/// The [`ONELINER_SAVED`] key of pointer `id` of the thread.
#[inline(always)]
fn saved_key(pid_tgid: u64, id: u8) -> u64 {
    (pid_tgid & 0xffff_ffff) | (u64::from(id) << 32)
}

/// An offset from an address read from memory, which may be negative
/// (`-8(%rbp)`, a USDT argument): sign-extended.
#[inline(always)]
fn signed(offset: u32) -> u64 {
    i64::from(offset.cast_signed()).cast_unsigned()
}

/// Reads the bytes `chain` names, or the string there when `string`, into
/// slot `i` of `buf`: zeros where a pointer on the way cannot be read, as
/// bpftrace reads them.
#[inline(always)]
fn read_memory(
    ctx: *const u8,
    chain: &Chain,
    string: bool,
    i: usize,
    pid_tgid: u64,
    buf: &mut [u8; SCRATCH_BYTES],
) {
    let slot = zero_slot(i, buf);
    let slot_len = slot.len();
    let words = slot.as_mut_ptr().cast::<u64>();
    if chain.start == START_TASK_ADDRESS {
        // SAFETY: the slot's first word; the helper has no preconditions.
        unsafe { words.write_volatile(bpf_get_current_task()) };
        return;
    }
    let base = match chain.start {
        // SAFETY: a helper without preconditions.
        START_TASK => unsafe { bpf_get_current_task() },
        START_ADDRESS => chain.address(),
        START_SAVED => {
            // SAFETY: the value is only read.
            match unsafe { ONELINER_SAVED.get(&saved_key(pid_tgid, chain.address() as u8)) } {
                Some(pointer) => *pointer,
                None => return,
            }
        }
        _ => ctx as u64,
    };
    // A start that is an address, not the context or the task.
    let fixed = chain.start == START_ADDRESS || chain.start == START_SAVED;
    // 1 to the slot's length, by a mask the verifier follows.
    let len = (usize::from(chain.len).wrapping_sub(1) & (slot_len - 1)) + 1;
    let dst = slot.as_mut_ptr().cast();
    if chain.hops == 0 && !fixed {
        // The context's or the task's own bytes: kernel memory.
        let address = base.wrapping_add(u64::from(chain.at));
        if string {
            read_str_at(address, slot);
        } else {
            // SAFETY: len ≤ the slot's length; the helper checks the source.
            unsafe { probe_read(dst, len as u32, address as *const _) };
        }
        return;
    }
    // From the first pointer on, the address is a number read from memory
    // (never the context pointer, on which the verifier refuses `&`), or
    // the fixed address itself where there is no pointer.
    let mut address = if chain.hops == 0 {
        base
    } else {
        let Some(first) = read_at::<u64>(base.wrapping_add(u64::from(chain.offsets[0]))) else {
            return;
        };
        first
    };
    // Unrolled by hand, as in read_join.
    macro_rules! hops {
        ($($h:literal)*) => {
            $(
                if $h < chain.hops {
                    let Some(next) = read_at::<u64>(address.wrapping_add(signed(chain.offsets[$h])))
                    else {
                        return;
                    };
                    address = next;
                }
            )*
        };
    }
    hops!(1 2 3);
    const _: () = assert!(MAX_HOPS == 4);
    let address = address.wrapping_add(signed(chain.at));
    if string {
        read_str_at(address, slot);
        return;
    }
    // SAFETY: len ≤ the slot's length; the helpers check the source.
    unsafe {
        if address < USER_TOP {
            if probe_read_user(dst, len as u32, address as *const _) < 0 {
                // A user buffer shorter than the read may end a mapping
                // (the 5 bytes of `buf(args->buf, 5)` of a write): the
                // bytes up to the page's end, as bpftrace reads only the
                // length asked for.
                let rest = PAGE - (address & (PAGE - 1));
                if rest < len as u64 {
                    let rest = (rest as usize).wrapping_sub(1) & (slot_len - 1);
                    probe_read_user(dst, (rest + 1) as u32, address as *const _);
                }
            }
        } else {
            probe_read(dst, len as u32, address as *const _);
        }
    }
}

/// String slot `i` of `buf`, zeroed.
#[inline(always)]
fn zero_slot(i: usize, buf: &mut [u8; SCRATCH_BYTES]) -> &mut [u8] {
    let slot_len = string_len();
    let start = HEADER_SIZE + i * slot_len;
    let slot = &mut buf[start..start + slot_len];
    // Word by word and volatile: `fill(0)` compiles to a byte-by-byte
    // `memset` call. Unrolled by hand to the longest slot, each store
    // behind a test of the slot's length, which the verifier knows: it
    // walks only the slot's stores (a loop 6.1's verifier may refuse).
    let words = slot.as_mut_ptr().cast::<u64>();
    macro_rules! zero {
        ($($w:literal)*) => {
            $(
                if $w * 8 < slot_len {
                    // SAFETY: inside the slot; the scratch map value is
                    // 8-aligned.
                    unsafe { words.add($w).write_volatile(0) };
                }
            )*
        };
    }
    zero!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31);
    const _: () = assert!(MAX_STRING_LEN == 32 * 8);
    slot
}

/// Writes the file paths of an fentry or fexit copy's or an iterator's `path()`s, its
/// [`ONELINER_PATHS`] entries from `AT`, into their slots of `buf`:
/// `bpf_d_path` of the `struct path` an argument leads to. The slot then
/// holds what the helper leaves, as bpftrace's buffer does: the path, or
/// its last bytes where it is longer than the slot.
#[inline(always)]
fn write_paths<const AT: usize>(ctx: *const u8, buf: &mut [u8; SCRATCH_BYTES]) {
    for j in 0..PATHS_PER_PROBE {
        let Some(spec) = ONELINER_PATHS.get(AT + j) else {
            return;
        };
        // SAFETY: a global the loader sets; a volatile read keeps the
        // load, whose value the verifier knows.
        let spec = unsafe { core::ptr::read_volatile(spec) };
        if spec == 0 {
            continue;
        }
        let slot = (spec as usize).wrapping_sub(1) & STRINGS_MASK;
        // An iterator's file may be null, to the verifier at least.
        let Some(pointer) = argument(ctx, (spec >> 8) & 0xff).filter(|&p| p != 0) else {
            continue;
        };
        let path = pointer.wrapping_add(u64::from(spec >> 16));
        let len = string_len();
        let start = HEADER_SIZE + slot * len;
        let out = &mut buf[start..start + len];
        // SAFETY: the helper writes at most `len` bytes into the slot; the
        // verifier checks that `path` is a `struct path` of the kernel's.
        unsafe { bpf_d_path(path as *mut _, out.as_mut_ptr().cast(), len as u32) };
    }
}

/// Copies the packet of the `struct sk_buff *` argument [`ONELINER_SKBS`]
/// names at `at`, if any, into this CPU's buffer of [`ONELINER_SKB_OUT`]
/// after its [`SkbMeta`]: `skb->len` bytes, at most [`MAX_SKB_BYTES`]
/// (user space cuts them as `skboutput()` asks).
#[inline(always)]
fn output_skb<C: EbpfContext>(context: &C, at: usize, ns: u64, cpu: u32) {
    let Some(spec) = ONELINER_SKBS.get(at) else {
        return;
    };
    // SAFETY: a global the loader sets; a volatile read keeps the load,
    // whose value the verifier knows.
    let spec = unsafe { core::ptr::read_volatile(spec) };
    if spec == 0 {
        return;
    }
    let ctx: *const u8 = context.as_ptr().cast();
    let Some(skb) = argument(ctx, (spec & 0xff).wrapping_sub(1)).filter(|&p| p != 0) else {
        return;
    };
    let len = read::<u32>(skb as *const u8, (spec >> 16) as usize).unwrap_or(0);
    let len = len.min(MAX_SKB_BYTES);
    let mut meta = SkbMeta { ns, cpu, len };
    const CURRENT_CPU: u64 = 0xffff_ffff;
    // SAFETY: the helper copies `len` bytes of the packet and the meta
    // from the stack into the map's buffer; the verifier checks that `skb`
    // is a `struct sk_buff` of the kernel's.
    unsafe {
        bpf_skb_output(
            skb as *mut _,
            (&raw const ONELINER_SKB_OUT).cast_mut().cast(),
            (u64::from(len) << 32) | CURRENT_CPU,
            (&raw mut meta).cast(),
            size_of::<SkbMeta>() as u64,
        )
    };
}

/// Argument `arg` of an fentry or fexit program, loaded from the context
/// at a constant offset (the verifier types such a load by the function's
/// BTF, and refuses one at a variable offset), each an instruction of its
/// own as in [`word_in_place`].
#[inline(always)]
fn argument(ctx: *const u8, arg: u32) -> Option<u64> {
    macro_rules! arguments {
        ($($at:literal)*) => {
            $(
                if arg * 8 == $at {
                    // SAFETY: an argument of the context, which the
                    // verifier checks the function has.
                    return Some(unsafe { context_word::<$at>(ctx) });
                }
            )*
        };
    }
    arguments!(0 8 16 24 32 40 48 56 64 72 80 88);
    const _: () = assert!(weft_abi::oneliner::MAX_FUNCTION_ARGS == 12);
    None
}

/// The smallest page size: where a mapping may end.
const PAGE: u64 = 4096;

/// A `T` at `address`, user or kernel memory by the address.
#[inline(always)]
fn read_at<T>(address: u64) -> Option<T> {
    // SAFETY: the helpers check the address.
    unsafe {
        if address < USER_TOP {
            bpf_probe_read_user(address as *const T)
        } else {
            bpf_probe_read_kernel(address as *const T)
        }
    }
    .ok()
}

/// Reads the string at `address` into `slot`, user or kernel memory by
/// the address; false when it cannot be read.
#[inline(always)]
fn read_str_at(address: u64, slot: &mut [u8]) -> bool {
    // SAFETY: the helpers check the source address and bound the copy.
    unsafe {
        if address < USER_TOP {
            bpf_probe_read_user_str_bytes(address as *const u8, slot)
        } else {
            bpf_probe_read_kernel_str_bytes(address as *const u8, slot)
        }
    }
    .is_ok()
}

/// Reads the strings of the pointer array `join()` names into the block
/// at `at` of `buf`, up to the first null pointer; an empty slot ends them.
#[inline(always)]
fn read_join(ctx: *const u8, config: &ProbeConfig, at: usize, buf: &mut [u8; SCRATCH_BYTES]) {
    buf[at] = 0;
    let Some(array) = read::<u64>(ctx, config.join_offset as usize) else {
        return;
    };
    // Unrolled by hand: 6.1's verifier rejects the loop LLVM makes of
    // this (a back-edge along a fall-through), and LLVM keeps it a loop.
    macro_rules! slots {
        ($($i:literal)*) => {
            $(
                if !read_join_slot(array, $i, at, buf) {
                    return;
                }
            )*
        };
    }
    slots!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    const _: () = assert!(JOIN_ARGS == 16);
}

/// Reads string `i` of the array at `array` into its slot of the join
/// block at `at`; false when the array ends there.
#[inline(always)]
fn read_join_slot(array: u64, i: usize, at: usize, buf: &mut [u8; SCRATCH_BYTES]) -> bool {
    let start = at + i * JOIN_ARG_LEN;
    let slot = &mut buf[start..start + JOIN_ARG_LEN];
    slot[0] = 0;
    let Some(pointer) = read_at::<u64>(array.wrapping_add(8 * i as u64)) else {
        return false;
    };
    if pointer == 0 {
        return false;
    }
    read_str_at(pointer, slot)
}
