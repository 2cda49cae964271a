//! The syscall probe: pairs `sys_enter` and `sys_exit` per thread and appends
//! one `SyscallEvent` per completed syscall to the current CPU's batch, which
//! goes into that CPU's ring buffer as one record once full.
//!
//! Entry points exist for raw tracepoints (`raw_syscalls`, all syscalls) and for
//! the per-syscall tracepoints (`syscalls:sys_enter_NAME`), which let weft attach
//! to chosen syscalls only so the rest of the machine pays nothing.

use aya_ebpf::{
    EbpfContext,
    bindings::BPF_RB_NO_WAKEUP,
    bindings::BPF_F_MMAPABLE,
    btf_maps::{Array, ArrayOfMaps, RingBuf},
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_get_smp_processor_id, bpf_ktime_get_ns,
        bpf_probe_read_kernel,
    },
    macros::{btf_map, map, raw_tracepoint, tracepoint},
    maps::HashMap,
    programs::{RawTracePointContext, TracePointContext},
};
use weft_abi::syscall::{
    BATCH_EVENTS, Batch, COUNTER_ROW, Counter, FILTER_CGROUP, FILTER_COMM, FILTER_PID, FLUSH_BUSY,
    InFlight,
    MAX_CPUS, SyscallConfig, SyscallEvent,
};

use crate::{
    counters::{self, Counters},
    task_storage::TaskStorage,
    tracepoint,
};

/// Written by user space before load; read through `read_volatile` so the
/// compiler does not fold the default in.
#[unsafe(no_mangle)]
static SYSCALL_CONFIG: SyscallConfig = SyscallConfig::ALL;

/// Offsets into the per-syscall tracepoint record (from tracefs `format`
/// files, set by user space): `__syscall_nr` and, for exits, `ret`.
#[unsafe(no_mangle)]
static SYSCALL_TP_NR_OFFSET: u32 = 8;
#[unsafe(no_mangle)]
static SYSCALL_TP_RET_OFFSET: u32 = 16;

/// One ring buffer per CPU. The template size is replaced by user space, which
/// creates the inner rings with the size the user asked for.
#[btf_map]
static SYSCALL_RINGS: ArrayOfMaps<RingBuf<SyscallEvent, { 1 << 16 }>, { MAX_CPUS as usize }> =
    ArrayOfMaps::new();

/// Each CPU's records not yet in its ring, indexed by CPU. One entry here;
/// user space makes one per possible CPU.
#[btf_map]
static SYSCALL_BATCHES: Array<Batch, 1, { BPF_F_MMAPABLE as usize }> = Array::new();

/// Each thread's syscall in flight, in task-local storage.
#[btf_map]
static SYSCALL_INFLIGHT: TaskStorage<InFlight> = TaskStorage::new();

#[btf_map]
static SYSCALL_COUNTERS: Counters = Counters::new();

#[map]
static SYSCALL_PIDS: HashMap<u32, u8> = HashMap::with_max_entries(1024, 0);

/// x86-64 syscalls that never return to the caller: no exit will pair them.
const NR_EXIT: u32 = 60;
const NR_EXIT_GROUP: u32 = 231;
/// Syscalls whose new child returns from them without having entered.
const NR_CLONE: u32 = 56;
const NR_FORK: u32 = 57;
const NR_VFORK: u32 = 58;
const NR_CLONE3: u32 = 435;
/// Offset of `orig_ax` in x86-64 `struct pt_regs` (the UAPI register layout).
const PT_REGS_ORIG_AX: usize = 15 * 8;

/// The configuration, read in place: the pointer goes through `read_volatile`
/// so the compiler cannot fold in the default, and fields are read from the
/// map value rather than copied to the (size-limited) stack.
#[inline(always)]
fn config() -> &'static SyscallConfig {
    // SAFETY: the pointer is to a static, so it is valid for 'static.
    unsafe { &*core::ptr::read_volatile(&&raw const SYSCALL_CONFIG) }
}

#[inline(always)]
fn count(counter: Counter) {
    count_many(counter, 1);
}

#[inline(always)]
fn count_many(counter: Counter, n: u64) {
    counters::add(&SYSCALL_COUNTERS, COUNTER_ROW, counter as u32, n);
}

/// Whether the current thread is not weft's and passes the filters.
#[inline(always)]
fn wants_task(config: &SyscallConfig, tgid: u32) -> bool {
    tgid != config.ignore_tgid && passes_filters(config, tgid)
}

/// Whether the current thread passes the pid, comm and cgroup filters.
#[inline(always)]
fn passes_filters(config: &SyscallConfig, tgid: u32) -> bool {
    if config.flags & FILTER_PID != 0 {
        // SAFETY: the value is only tested for presence.
        if unsafe { SYSCALL_PIDS.get(&tgid) }.is_none() {
            return false;
        }
    }
    if config.flags & FILTER_COMM != 0 {
        match bpf_get_current_comm() {
            Ok(comm) if comm == config.comm => {}
            _ => return false,
        }
    }
    // SAFETY: helper without preconditions.
    config.flags & FILTER_CGROUP == 0 || unsafe { bpf_get_current_cgroup_id() } == config.cgroup
}

#[inline(always)]
fn on_enter<C: EbpfContext>(ctx: &C, nr: u32) {
    let config = config();
    if !config.wants_syscall(nr) || nr == NR_EXIT || nr == NR_EXIT_GROUP {
        return;
    }
    // weft's own calls are dropped at the exit, which reads the thread's
    // ids anyway: reading them here too would cost every call ~9 ns.
    // The filters are tested here, once per call.
    if config.flags & (FILTER_PID | FILTER_COMM | FILTER_CGROUP) != 0
        && !passes_filters(config, (bpf_get_current_pid_tgid() >> 32) as u32)
    {
        return;
    }
    // SAFETY: helper without preconditions.
    let enter_ns = unsafe { bpf_ktime_get_ns() };
    match SYSCALL_INFLIGHT.current(true) {
        // SAFETY: the task's own storage; only this thread's programs touch it.
        Some(slot) => unsafe {
            *slot = InFlight {
                enter_ns,
                nr,
                active: 1,
            }
        },
        None => {
            count(Counter::EnterTableFull);
            // Rare (memory pressure) and worth a line in weft's log.
            aya_log_ebpf::warn!(
                ctx,
                "no task storage for tid {}: syscall {} not paired",
                bpf_get_current_pid_tgid() as u32,
                nr
            );
        }
    }
}

#[inline(always)]
fn on_exit(ret: i64, nr_at_exit: impl FnOnce() -> u32) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tid = pid_tgid as u32;
    let Some(slot) = SYSCALL_INFLIGHT.current(false) else {
        exit_without_enter(ret, pid_tgid, nr_at_exit());
        return;
    };
    // SAFETY: as in `on_enter`, only this thread touches its entry.
    let inflight = unsafe { *slot };
    if inflight.active == 0 {
        exit_without_enter(ret, pid_tgid, nr_at_exit());
        return;
    }
    // SAFETY: as above.
    unsafe { (*slot).active = 0 };
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let duration_ns = now.wrapping_sub(inflight.enter_ns);
    let config = config();
    if duration_ns < config.min_duration_ns || (pid_tgid >> 32) as u32 == config.ignore_tgid {
        return;
    }
    // SAFETY: helper without preconditions.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let event = SyscallEvent {
        enter_ns: inflight.enter_ns,
        duration_ns,
        ret,
        pid: (pid_tgid >> 32) as u32,
        tid,
        nr: inflight.nr,
        cpu,
    };
    let Some(batch) = SYSCALL_BATCHES.get_ptr_mut(cpu) else {
        return;
    };
    // SAFETY: this CPU's batch; no other program on this CPU runs until
    // this one returns but the flush program, which `busy` keeps out.
    unsafe { append(&mut *batch, event, || SYSCALL_RINGS.get(cpu)) };
}

/// Adds `event` to this CPU's batch, sending the batch to `ring` once full.
/// Every access to the batch is volatile: the compiler keeps volatile
/// accesses in order, so none moves outside the span `busy` marks.
#[inline(always)]
pub fn append<'a, const SIZE: usize>(
    batch: &mut Batch,
    event: SyscallEvent,
    ring: impl FnOnce() -> Option<&'a RingBuf<SyscallEvent, SIZE>>,
) {
    use core::ptr::{read_volatile, write_volatile};
    // SAFETY: valid, aligned fields of the map value.
    let len = unsafe {
        write_volatile(&raw mut batch.busy, 1);
        write_volatile(&raw mut batch.seen, read_volatile(&raw const batch.seen) + 1);
        read_volatile(&raw const batch.len)
    };
    if let Some(slot) = batch.events.get_mut(len as usize) {
        // SAFETY: as above.
        unsafe {
            write_volatile(slot, event);
            write_volatile(&raw mut batch.len, len + 1);
        }
    }
    if len as usize + 1 >= BATCH_EVENTS {
        send(batch, ring());
    }
    // SAFETY: as above.
    unsafe { write_volatile(&raw mut batch.busy, 0) };
}

/// Copies the batch's records into `ring` (this CPU's) as one record and
/// empties it; counts them as lost when the ring has no room.
#[inline(always)]
fn send<const SIZE: usize>(batch: &mut Batch, ring: Option<&RingBuf<SyscallEvent, SIZE>>) {
    // SAFETY: a valid, aligned field of the map value (volatile: see `append`).
    let len = unsafe { core::ptr::read_volatile(&raw const batch.len) } as usize;
    let Some(events) = batch.events.get(..len) else {
        return;
    };
    let sent = ring.is_some_and(|ring| {
        // No wakeup: user space drains on a timer.
        ring.output_untyped::<[SyscallEvent]>(events, BPF_RB_NO_WAKEUP.into())
            .is_ok()
    });
    if !sent {
        count_many(Counter::RingFull, len as u64);
    }
    // SAFETY: as above.
    unsafe { core::ptr::write_volatile(&raw mut batch.len, 0) };
}

/// Counts an exit that has no entry, unless the filters would have dropped it
/// anyway or it is a new child returning from fork/clone.
#[inline(never)]
fn exit_without_enter(ret: i64, pid_tgid: u64, nr: u32) {
    let config = config();
    if !config.wants_syscall(nr) || !wants_task(config, (pid_tgid >> 32) as u32) {
        return;
    }
    let forked_child = ret == 0 && matches!(nr, NR_CLONE | NR_FORK | NR_VFORK | NR_CLONE3);
    if !forked_child {
        count(Counter::ExitWithoutEnter);
    }
}

/// `raw_syscalls:sys_enter`: args are (`struct pt_regs *`, `long id`).
#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn syscall_enter(ctx: RawTracePointContext) -> i32 {
    // SAFETY: arg 1 of sys_enter is the syscall number.
    let nr = unsafe { *ctx.as_ptr().cast::<u64>().add(1) } as u32;
    on_enter(&ctx, nr);
    0
}

/// `raw_syscalls:sys_exit`: args are (`struct pt_regs *`, `long ret`).
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn syscall_exit(ctx: RawTracePointContext) -> i32 {
    let args = ctx.as_ptr().cast::<u64>();
    // SAFETY: the raw tracepoint context holds two u64 arguments.
    let (regs, ret) = unsafe { (*args, *args.add(1) as i64) };
    on_exit(ret, || {
        let addr = (regs as usize + PT_REGS_ORIG_AX) as *const u64;
        // SAFETY: bpf_probe_read_kernel checks the address.
        unsafe { bpf_probe_read_kernel(addr) }.unwrap_or(u64::MAX) as u32
    });
    0
}

/// `syscalls:sys_enter_NAME`, attached only to the chosen syscalls.
#[tracepoint]
pub fn syscall_enter_tp(ctx: TracePointContext) -> i32 {
    if let Some(nr) = tracepoint::field::<i32>(&ctx, &SYSCALL_TP_NR_OFFSET) {
        on_enter(&ctx, nr as u32);
    }
    0
}

/// `syscalls:sys_exit_NAME`, attached only to the chosen syscalls.
#[tracepoint]
pub fn syscall_exit_tp(ctx: TracePointContext) -> i32 {
    let nr = tracepoint::field::<i32>(&ctx, &SYSCALL_TP_NR_OFFSET).unwrap_or(-1) as u32;
    if let Some(ret) = tracepoint::field::<i64>(&ctx, &SYSCALL_TP_RET_OFFSET) {
        on_exit(ret, || nr);
    }
    0
}

/// Never attached: user space runs it on one CPU (`BPF_PROG_TEST_RUN`) to
/// send the batch that CPU gathered when its records grow old, which on a
/// quiet CPU may take long to fill. It runs from an interrupt, so it may
/// find a probe on that CPU halfway through the batch; it then returns
/// `FLUSH_BUSY` and user space tries again.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn syscall_flush(_ctx: RawTracePointContext) -> i32 {
    // SAFETY: helper without preconditions.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let Some(batch) = SYSCALL_BATCHES.get_ptr_mut(cpu) else {
        return 0;
    };
    // SAFETY: this CPU's batch, changed by nothing else while this runs
    // unless `busy` says so.
    let batch = unsafe { &mut *batch };
    // SAFETY: a valid, aligned field of the map value.
    if unsafe { core::ptr::read_volatile(&raw const batch.busy) } != 0 {
        return FLUSH_BUSY as i32;
    }
    // SAFETY: as above.
    if unsafe { core::ptr::read_volatile(&raw const batch.len) } != 0 {
        send(batch, SYSCALL_RINGS.get(cpu));
    }
    0
}
