//! The stack source: a perf clock event on every CPU samples the thread
//! running there, as one `StackEvent` naming its kernel and user stacks by
//! their ids in the shared stack map; `sched_switch` writes the stacks a
//! thread leaves the CPU from into the same map (`sched.rs`).

use aya_ebpf::{
    bindings::BPF_F_USER_STACK,
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, perf_event},
    maps::StackTrace,
    programs::{PerfEventContext, tracing::StackIdContext},
};
use weft_abi::{
    events::{Header, Source},
    stacks::{MAX_STACKS, StackEvent},
};

use crate::events::{self, Event};

/// Stack ids to frames. Not told to replace a stack whose hash meets
/// another's: an id then always names the stack user space read for it,
/// and the newcomer is counted as lost (its id is negative).
#[map]
pub static STACK_TRACES: StackTrace = StackTrace::with_max_entries(MAX_STACKS, 0);

impl Event for StackEvent {
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}

/// The current task's kernel and user stack ids (negative: not taken).
#[inline(always)]
pub fn stack_ids<C: StackIdContext>(ctx: &C) -> (i32, i32) {
    let id = |flags: u64| ctx.get_stackid(&STACK_TRACES, flags).map_or_else(|e| e, |id| id as i32);
    (id(0), id(u64::from(BPF_F_USER_STACK)))
}

#[perf_event]
pub fn stacks_sample(ctx: PerfEventContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let (tid, pid) = (pid_tgid as u32, (pid_tgid >> 32) as u32);
    // An idle CPU runs no thread worth a stack.
    if tid == 0 || !events::wants_current(pid) {
        return 0;
    }
    let (kstack, ustack) = stack_ids(&ctx);
    events::emit(
        Source::Stacks,
        StackEvent {
            header: Header::default(),
            // SAFETY: helper without preconditions.
            ts_ns: unsafe { bpf_ktime_get_ns() },
            tid,
            pid,
            kstack,
            ustack,
        },
    );
    0
}
