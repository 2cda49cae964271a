//! The `frames` source: the functions of each stack id the `stacks` and
//! `sched` records name, read from the kernel's stack map the first time
//! the id is met and named then, while its process still runs (a user
//! stack is named from the process's own files), and stored once.

use std::collections::HashSet;

use crate::error::Result;
use weft_kernel::events::StackReader;
use weft_oneliner::Stack;
use weft_store::{SourceId, Store};

/// User stacks remembered as stored; past it the memory is cleared (a
/// stack met again is then stored again, which readers take as the same).
const MAX_SEEN: usize = 1 << 20;

/// A stack met again is stored again after this long (ns), so that a
/// recording's ring (`--retain`, `--max-disk`), which deletes its oldest
/// records, keeps the frames of the stacks its newer records name.
const RENOTE_NS: u64 = 60_000_000_000;

/// Bytes of a stack's names kept: 127 frames of long C++ names at most.
const MAX_TEXT: usize = 16 << 10;

/// The frames of the stacks the records name.
pub struct FrameLog {
    stacks: StackReader,
    source: SourceId,
    /// Stored stacks: (process or 0 for the kernel's, id, user).
    seen: HashSet<(u32, i32, bool)>,
    /// When `seen` was last cleared.
    since: u64,
}

impl FrameLog {
    /// Defines the `frames` source; its stacks are read from `stacks`.
    pub fn define(store: &mut Store, stacks: StackReader) -> Result<Self> {
        Ok(Self {
            stacks,
            source: weft_capture::sources::own::FRAMES.define(store)?,
            seen: HashSet::new(),
            since: 0,
        })
    }

    /// Stores the frames of the kernel stack `kstack` and of process
    /// `pid`'s user stack `ustack` unless stored before (negative: none).
    pub fn note(
        &mut self,
        store: &mut Store,
        now: u64,
        pid: u32,
        kstack: i32,
        ustack: i32,
    ) -> Result<()> {
        if self.seen.len() >= MAX_SEEN || now.saturating_sub(self.since) > RENOTE_NS {
            self.seen.clear();
            self.since = now;
        }
        if kstack >= 0 && self.seen.insert((0, kstack, false)) {
            let stack = self.stacks.kernel(kstack);
            self.store(store, now, (0, kstack, false), stack.as_deref())?;
        }
        if ustack >= 0 && self.seen.insert((pid, ustack, true)) {
            let stack = self.stacks.user(pid, ustack);
            self.store(store, now, (pid, ustack, true), stack.as_deref())?;
        }
        Ok(())
    }

    fn store(
        &self,
        store: &mut Store,
        now: u64,
        (pid, id, user): (u32, i32, bool),
        stack: Option<&Stack>,
    ) -> Result<()> {
        let Some(stack) = stack else {
            return Ok(());
        };
        let mut payload = Vec::with_capacity(256);
        payload.extend_from_slice(&id.cast_unsigned().to_le_bytes());
        payload.extend_from_slice(&pid.to_le_bytes());
        payload.extend_from_slice(&[u8::from(user), 0, 0, 0]);
        payload.extend_from_slice(folded(stack).as_bytes());
        payload.truncate(12 + MAX_TEXT);
        store.append_at(self.source, now, None, &payload)?;
        Ok(())
    }
}

/// The tracing machinery a kernel stack taken at a tracepoint may end in:
/// `__traceiter_sched_switch` is there only while two or more programs
/// share the tracepoint (one alone is called straight from it), so the
/// same sleep would fold two ways.
const TRACING: [&str; 5] = [
    "__traceiter_",
    "__bpf_trace_",
    "bpf_trace_run",
    "perf_trace_",
    "trace_call_bpf",
];

/// `stack`'s functions, outermost first, `;` between them: a frame's
/// offset into its function left out, so that flame graphs merge calls
/// from one function; innermost frames of the tracing machinery left out.
fn folded(stack: &Stack) -> String {
    let tracing = |name: &str| !stack.user && TRACING.iter().any(|t| name.starts_with(t));
    let names: Vec<&str> = (stack.frames.iter())
        .map(|frame| function(&frame.name))
        .skip_while(|name| tracing(name))
        .collect();
    let names: Vec<&str> = names.into_iter().rev().collect();
    names.join(";")
}

/// `name` without a `+offset` suffix.
fn function(name: &str) -> &str {
    match name.rsplit_once('+') {
        Some((function, offset))
            if !offset.is_empty() && offset.bytes().all(|b| b.is_ascii_digit()) =>
        {
            function
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use weft_oneliner::{Frame, Stack};

    #[test]
    fn folds_frames_outermost_first_without_offsets() {
        let frame = |name: &str| Frame {
            ip: 0,
            name: name.into(),
            file: None,
        };
        let stack = Stack {
            user: false,
            frames: vec![
                frame("do_nanosleep+71"),
                frame("hrtimer_nanosleep+128"),
                frame("0x7f0012345678"),
                frame("operator+"),
            ],
        };
        assert_eq!(
            super::folded(&stack),
            "operator+;0x7f0012345678;hrtimer_nanosleep;do_nanosleep"
        );
    }

    #[test]
    fn a_kernel_stack_s_tracing_frames_are_left_out() {
        let frame = |name: &str| Frame {
            ip: 0,
            name: name.into(),
            file: None,
        };
        let frames = [
            "__traceiter_sched_switch+52",
            "__schedule+1024",
            "schedule+40",
        ];
        let kernel = Stack {
            user: false,
            frames: frames.map(frame).to_vec(),
        };
        assert_eq!(super::folded(&kernel), "schedule;__schedule");
        // A user stack is as it is.
        let user = Stack {
            user: true,
            ..kernel
        };
        assert_eq!(
            super::folded(&user),
            "schedule;__schedule;__traceiter_sched_switch"
        );
    }
}
