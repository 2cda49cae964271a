//! The argument source: the file-related calls' own tracepoints
//! (`syscalls:sys_enter_NAME`/`sys_exit_NAME`, attached only to the calls
//! in `weft_abi::args::calls`), paired per thread in task storage. The
//! entry keeps the arguments that name the file; the exit sends one
//! `ArgsEvent`, with the path an open-family call was given read from the
//! caller's memory (as opensnoop reads it: the string a call was given is
//! still there when it returns).

use aya_ebpf::{
    EbpfContext as _,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_user_str_bytes},
    macros::{btf_map, map, tracepoint},
    maps::PerCpuArray,
    programs::TracePointContext,
};
use weft_abi::{
    args::{ArgsEvent, ArgsInFlight, ArgsSnap, EVENT_SIZE, MAX_PATH, TP_ARGS_OFFSET, calls},
    events::{Counter, Header, Source},
};

use crate::{
    events::{self, Event},
    task_storage::TaskStorage,
    tracepoint,
};

/// Offsets of `__syscall_nr` and, at exits, `ret` (from tracefs).
#[unsafe(no_mangle)]
static ARGS_NR_OFFSET: u32 = 8;
#[unsafe(no_mangle)]
static ARGS_RET_OFFSET: u32 = 16;

/// Each thread's call in flight.
#[btf_map]
static ARGS_INFLIGHT: TaskStorage<ArgsInFlight> = TaskStorage::new();

/// Where a record and its path are put together, one per CPU: too large
/// for the stack.
#[map]
static ARGS_SNAP: PerCpuArray<ArgsSnap> = PerCpuArray::with_max_entries(1, 0);

impl Event for ArgsEvent {
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}

/// Argument `I` of a `sys_enter_NAME` record, read from the context
/// directly: a tracepoint program may load from its record at a constant
/// offset, which costs a load where `bpf_probe_read` costs a helper call.
/// Volatile, so that the compiler does not turn several into one load at
/// a computed offset, which the verifier refuses.
#[inline(always)]
fn arg<const I: usize>(ctx: &TracePointContext) -> u64 {
    // SAFETY: the programs are attached only to calls with more than `I`
    // arguments (see `weft_kernel::source::ARGS`); the verifier checks
    // the offset is inside the context, the kernel at attach that it is
    // inside the record.
    unsafe {
        core::ptr::read_volatile(ctx.as_ptr().cast::<u8>().add(TP_ARGS_OFFSET + 8 * I).cast::<u64>())
    }
}

/// The entry of a call of three arguments or more.
#[tracepoint]
pub fn args_enter(ctx: TracePointContext) -> i32 {
    enter(&ctx, [arg::<0>(&ctx), arg::<1>(&ctx), arg::<2>(&ctx)]);
    0
}

/// The entry of a call of one or two arguments (its first alone is read).
#[tracepoint]
pub fn args_enter_short(ctx: TracePointContext) -> i32 {
    enter(&ctx, [arg::<0>(&ctx), 0, 0]);
    0
}

/// Keeps what the call's arguments `args` (its first three) say of its file.
#[inline(always)]
fn enter(ctx: &TracePointContext, args: [u64; 3]) {
    let Some(nr) = tracepoint::field::<i32>(ctx, &ARGS_NR_OFFSET) else {
        return;
    };
    let nr = nr as u32;
    if nr == calls::FCNTL && !matches!(args[1], calls::F_DUPFD | calls::F_DUPFD_CLOEXEC) {
        return;
    }
    if !events::wants_current((bpf_get_current_pid_tgid() >> 32) as u32) {
        return;
    }
    let (fd, path) = match calls::path_arg(nr) {
        Some(0) => (u64::MAX, args[0]),
        Some(_) => (args[0], args[1]),
        None => (args[0], 0),
    };
    let count = if nr == calls::CLOSE_RANGE {
        args[1]
    } else if calls::counts_bytes(nr) {
        args[2]
    } else {
        0
    };
    let Some(slot) = ARGS_INFLIGHT.current(true) else {
        events::count(Source::Args, Counter::TableFull);
        return;
    };
    // SAFETY: the task's own storage; only this thread's programs touch it.
    unsafe {
        *slot = ArgsInFlight {
            // SAFETY: helper without preconditions.
            enter_ns: bpf_ktime_get_ns(),
            fd,
            count,
            path,
            nr,
            active: 1,
        };
    }
}

#[tracepoint]
pub fn args_exit(ctx: TracePointContext) -> i32 {
    let Some(slot) = ARGS_INFLIGHT.current(false) else {
        return 0;
    };
    // SAFETY: as in `args_enter`.
    let inflight = unsafe { *slot };
    if inflight.active == 0 {
        return 0;
    }
    // SAFETY: as above.
    unsafe { (*slot).active = 0 };
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let pid_tgid = bpf_get_current_pid_tgid();
    let mut event = ArgsEvent {
        header: Header::default(),
        exit_ns: now,
        duration_ns: now.wrapping_sub(inflight.enter_ns),
        ret: tracepoint::field::<i64>(&ctx, &ARGS_RET_OFFSET).unwrap_or(0),
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        nr: inflight.nr,
        fd: inflight.fd as i32,
        count: inflight.count,
        file: 0,
        given: 0,
    };
    let Some(snap) = ARGS_SNAP.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: this CPU's scratch value; programs on this CPU do not
    // interleave with this one.
    let snap = unsafe { &mut *snap };
    if inflight.path != 0 {
        // SAFETY: the helper checks the user address.
        if let Ok(path) =
            unsafe { bpf_probe_read_user_str_bytes(inflight.path as *const u8, &mut snap.path) }
        {
            event.given = path.len() as u32;
        }
    }
    let cpu = events::stamp(Source::Args, &mut event);
    snap.event = event;
    // The mask bounds the length for the verifier; `given` is below
    // MAX_PATH already.
    let len = EVENT_SIZE + (event.given as usize & (MAX_PATH - 1));
    // SAFETY: `len` bytes of the value (the record, then at most MAX_PATH-1
    // of the path).
    let record = unsafe { core::slice::from_raw_parts((snap as *const ArgsSnap).cast::<u8>(), len) };
    events::emit_bytes(Source::Args, cpu, record);
    0
}
