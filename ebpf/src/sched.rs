//! The scheduler source: `sched:sched_switch` and `sched:sched_wakeup`
//! (classic tracepoints, whose field offsets user space reads from tracefs
//! and writes into the globals below), one `SchedEvent` per switch-in of a
//! thread whose switch-out weft saw.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::HashMap,
    programs::TracePointContext,
};
use weft_abi::{
    events::{Counter, Header, Source},
    sched::{OffCpu, SchedEvent},
};

use crate::{
    events::{self, Event},
    stacks, tracepoint,
};

#[unsafe(no_mangle)]
pub static SCHED_PREV_PID_OFFSET: u32 = 24;
#[unsafe(no_mangle)]
pub static SCHED_PREV_STATE_OFFSET: u32 = 32;
#[unsafe(no_mangle)]
pub static SCHED_NEXT_PID_OFFSET: u32 = 56;
#[unsafe(no_mangle)]
static SCHED_WAKEUP_PID_OFFSET: u32 = 24;
/// 1 when the stack source runs: each thread's stacks as it leaves the CPU
/// go into its record.
#[unsafe(no_mangle)]
static SCHED_STACKS: u32 = 0;

/// The `prev_state` of a preempted thread (the kernel's `TASK_REPORT_MAX`):
/// it left runnable, like state 0 (a yield).
const TASK_REPORT_MAX: u32 = 0x100;

/// Threads off CPU, by thread id. Sleeping threads stay here until they run
/// again, so the table is large; a full table is counted (`TableFull`).
#[map]
static SCHED_OFF_CPU: HashMap<u32, OffCpu> = HashMap::with_max_entries(1 << 16, 0);

impl Event for SchedEvent {
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> i32 {
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let prev_tid = tracepoint::field::<i32>(&ctx, &SCHED_PREV_PID_OFFSET).unwrap_or(0) as u32;
    let next_tid = tracepoint::field::<i32>(&ctx, &SCHED_NEXT_PID_OFFSET).unwrap_or(0) as u32;
    if prev_tid != 0 {
        switched_out(&ctx, now, prev_tid);
    }
    if next_tid != 0 {
        switched_in(now, next_tid, prev_tid);
    }
    0
}

/// The current thread (`tid`) leaves the CPU: remember when and why.
#[inline(always)]
fn switched_out(ctx: &TracePointContext, now: u64, tid: u32) {
    let pid = (bpf_get_current_pid_tgid() >> 32) as u32;
    if !events::wants_current(pid) {
        return;
    }
    let state = tracepoint::field::<i64>(ctx, &SCHED_PREV_STATE_OFFSET).unwrap_or(0) as u32;
    // SAFETY: a global user space sets before load.
    let (kstack, ustack) = if unsafe { core::ptr::read_volatile(&SCHED_STACKS) } != 0 {
        stacks::stack_ids(ctx)
    } else {
        (-1, -1)
    };
    let off = OffCpu {
        out_ns: now,
        wakeup_ns: 0,
        pid,
        state,
        kstack,
        ustack,
    };
    if SCHED_OFF_CPU.insert(tid, off, 0).is_err() {
        events::count(Source::Sched, Counter::TableFull);
    }
}

#[inline(always)]
fn switched_in(now: u64, tid: u32, prev_tid: u32) {
    // SAFETY: the value is copied out before the entry is removed.
    let Some(off) = (unsafe { SCHED_OFF_CPU.get(tid) }).copied() else {
        return;
    };
    let _ = SCHED_OFF_CPU.remove(tid);
    let waited_from = if off.state == 0 || off.state & TASK_REPORT_MAX != 0 {
        off.out_ns
    } else if off.wakeup_ns != 0 {
        off.wakeup_ns
    } else {
        now
    };
    events::emit(
        Source::Sched,
        SchedEvent {
            header: Header::default(),
            tid,
            pid: off.pid,
            ts_ns: now,
            off_cpu_ns: now.wrapping_sub(off.out_ns),
            runq_ns: now.wrapping_sub(waited_from),
            prev_tid,
            state: off.state,
            kstack: off.kstack,
            ustack: off.ustack,
        },
    );
}

/// `sched_wakeup` (and `sched_wakeup_new`): the first wakeup after a
/// switch-out starts the thread's run-queue wait.
#[tracepoint]
pub fn sched_wakeup(ctx: TracePointContext) -> i32 {
    let Some(tid) = tracepoint::field::<i32>(&ctx, &SCHED_WAKEUP_PID_OFFSET) else {
        return 0;
    };
    if let Some(off) = SCHED_OFF_CPU.get_ptr_mut(tid as u32) {
        // SAFETY: a valid map value; a racing update at worst keeps the
        // other CPU's wakeup time, which is as right.
        unsafe {
            if (*off).wakeup_ns == 0 {
                (*off).wakeup_ns = bpf_ktime_get_ns();
            }
        }
    }
    0
}
