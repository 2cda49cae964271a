//! The context-switch source: every `sched:sched_switch`, on every CPU and
//! unfiltered (a PT trace's sideband must know who else ran), as one
//! `SwitchEvent`. Field offsets are the scheduler source's globals.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::tracepoint,
    programs::TracePointContext,
};
use weft_abi::{
    events::{Header, Source},
    switch::SwitchEvent,
};

use crate::{
    events::{self, Event},
    sched::{SCHED_NEXT_PID_OFFSET, SCHED_PREV_PID_OFFSET, SCHED_PREV_STATE_OFFSET},
    tracepoint,
};

impl Event for SwitchEvent {
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}

#[tracepoint]
pub fn context_switch(ctx: TracePointContext) -> i32 {
    events::emit(
        Source::Switch,
        SwitchEvent {
            header: Header::default(),
            // SAFETY: helper without preconditions.
            ts_ns: unsafe { bpf_ktime_get_ns() },
            prev_tid: tracepoint::field::<i32>(&ctx, &SCHED_PREV_PID_OFFSET).unwrap_or(0) as u32,
            // The task leaving is still the current one.
            prev_pid: (bpf_get_current_pid_tgid() >> 32) as u32,
            next_tid: tracepoint::field::<i32>(&ctx, &SCHED_NEXT_PID_OFFSET).unwrap_or(0) as u32,
            prev_state: tracepoint::field::<i64>(&ctx, &SCHED_PREV_STATE_OFFSET).unwrap_or(0)
                as u32,
        },
    );
    0
}
