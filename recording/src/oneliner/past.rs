//! `weft trace --from DIR [--trigger N] PROGRAM`: a program run over what a
//! capture recorded, as it would have run when it happened. Each recorded
//! system call is its `sys_enter_NAME` event at its entry and its
//! `sys_exit_NAME` event at its return (and `raw_syscalls`' two), with the
//! fields the capture holds: the call's number, its return value, the
//! thread, its name and CPU. Events play in recorded time, a slice at a
//! time; `interval` probes fire on recorded time too, and `nsecs` is the
//! event's recorded time, so the latency idiom measures what happened.
//! Everything runs in weft: nothing is attached, and no privilege is needed.

use std::{ops::RangeInclusive, path::Path};

use anyhow::{Result, anyhow, bail};
use weft_abi::{syscall::SyscallEvent, syscall_names};
use weft_capture::{capture, extract::kept_window, tasks};
use weft_oneliner::{
    Event, Field, Flow, Kernel, Plan, Runtime, Target,
    ast::{Builtin, ProbeKind, Program, period_ns},
    kernel::{Member, Shape, Signature, UsdtSite, format_fields, glob_match},
    limits::Limits,
};
use weft_query::Names;
use weft_store::Snapshot;

use super::Options;

/// Recorded time read and played at a time; memory is one slice's events.
const SLICE_NS: u64 = 100_000_000;

/// The tracepoints' records as the capture rebuilds them: the common
/// header's 8 bytes, then the fields it holds.
const ENTER: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n";
const EXIT: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
                    \tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n";
const RAW_ENTER: &str = "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n";
const RAW_EXIT: &str = "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
                        \tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n";

/// Runs `options`' program over the capture in `from`, or over the window
/// kept around its firing `trigger` (1-based).
pub fn run(options: &Options, from: &Path, trigger: Option<usize>) -> Result<()> {
    let snapshot = capture::open(from, false)?;
    let window = match trigger {
        Some(n) => kept_window(&snapshot, n)?,
        None => snapshot
            .time_range()?
            .ok_or_else(|| anyhow!("{} holds no records", from.display()))?,
    };
    let plan = resolve(options, from)?;
    let syscalls = snapshot
        .meta()
        .sources
        .iter()
        .find(|s| s.name == weft_capture::registry::SYSCALLS)
        .map(|s| s.id)
        .ok_or_else(|| {
            anyhow!(
                "{} recorded no system calls (no `syscalls` source)",
                from.display()
            )
        })?;
    let names = tasks::names(&snapshot)?.unwrap_or_else(|| Names::new([], false));
    let limits = Limits::from_env().map_err(anyhow::Error::msg)?;
    let mut out = super::output(options.output.as_deref())?;
    let mut runtime = Runtime::new(&plan, options.format, *window.start());
    runtime.set_limits(limits);
    let mut player = Player {
        plan: &plan,
        hooks: Hook::of(&plan),
        runtime,
        names,
        intervals: intervals(&plan, *window.start()),
        played: 0,
    };
    let ended = player.play(&snapshot, syscalls, &window, &mut *out)?;
    if !ended {
        for index in super::user_probes(&plan, |t| *t == Target::End) {
            player
                .runtime
                .event(&past_event(index, *window.end()), &mut out)?;
        }
    }
    player.runtime.print_all(&mut out)?;
    out.flush()?;
    super::report_dropped_keys(&player.runtime, &limits);
    if !options.quiet {
        eprintln!(
            "weft: {} events played from {}",
            player.played,
            from.display()
        );
    }
    Ok(())
}

/// The program checked against what the capture holds, to run in weft.
fn resolve(options: &Options, from: &Path) -> Result<Plan> {
    let text = &options.text;
    let render = |e: weft_oneliner::Error| anyhow!("{}", e.render(text));
    let program = weft_oneliner::parse::parse_with(text, &options.params).map_err(render)?;
    recorded_probes(&program, from).map_err(render)?;
    unrecorded_builtins(&program).map_err(render)?;
    let plan = weft_oneliner::check::check_in_weft(program, &Recorded).map_err(render)?;
    for attach in &plan.attaches {
        let unrecorded = [
            (!attach.strings.is_empty(), "strings"),
            (
                !attach.reads.is_empty() || !attach.members.is_empty(),
                "memory",
            ),
            (attach.join.is_some(), "join()'s arguments"),
            (attach.kstack || attach.ustack, "stacks"),
            (attach.signal.is_some(), "signal()"),
        ];
        if let Some((_, what)) = unrecorded.iter().find(|(used, _)| *used) {
            bail!(
                "{}: the capture holds no {what} of its events: --from reads what was recorded \
                 (docs/oneliners.md, \"Over a capture\")",
                attach.target.name()
            );
        }
    }
    Ok(plan)
}

/// An error unless every probe of `program` is one the capture can play.
fn recorded_probes(program: &Program, from: &Path) -> weft_oneliner::error::Result<()> {
    for probe in program.items.iter().flat_map(|item| &item.probes) {
        let played = match &probe.kind {
            ProbeKind::Begin | ProbeKind::End | ProbeKind::Interval { .. } => true,
            ProbeKind::Tracepoint { category, .. } => ["syscalls", "raw_syscalls"]
                .iter()
                .any(|c| glob_match(category, c)),
            _ => false,
        };
        if !played {
            return Err(weft_oneliner::Error::new(
                probe.span,
                format!(
                    "{} recorded no such events: --from plays system calls \
                     (tracepoint:syscalls:*, tracepoint:raw_syscalls:*), BEGIN, END and interval",
                    from.display()
                ),
            ));
        }
    }
    Ok(())
}

/// An error at the first builtin the capture holds nothing for.
fn unrecorded_builtins(program: &Program) -> weft_oneliner::error::Result<()> {
    let unrecorded = [
        Builtin::Uid,
        Builtin::Gid,
        Builtin::Username,
        Builtin::Cpid,
        Builtin::Curtask,
        Builtin::Kstack,
        Builtin::Ustack,
    ];
    let Some((span, builtin)) = program.first_use(&unrecorded) else {
        return Ok(());
    };
    let name = (Builtin::ALL.iter())
        .find(|(_, b)| *b == builtin)
        .map_or("it", |(name, _)| name);
    Err(weft_oneliner::Error::new(
        span,
        format!("a capture does not record `{name}` for its events: --from cannot read it"),
    ))
}

/// Interval probes as `(attach, period, next)`, the first due a period
/// after `start`.
fn intervals(plan: &Plan, start: u64) -> Vec<(usize, u64, u64)> {
    super::user_probes(plan, |t| matches!(t, Target::Interval { .. }))
        .into_iter()
        .map(|i| {
            let Target::Interval { unit, n } = plan.attaches[i].target else {
                unreachable!("filtered")
            };
            let period = period_ns(unit, n);
            (i, period, start.saturating_add(period))
        })
        .collect()
}

/// An event of BEGIN, END or an interval, at recorded time `ns`.
fn past_event(attach: usize, ns: u64) -> Event<'static> {
    Event {
        attach,
        ns,
        comm: b"weft",
        ..Event::default()
    }
}

/// One recorded system call's entry or return.
struct Played {
    ns: u64,
    exit: bool,
    call: SyscallEvent,
}

/// The program running over the capture.
struct Player<'p> {
    plan: &'p Plan,
    /// The attach points that take recorded calls, and which.
    hooks: Vec<(usize, Hook)>,
    runtime: Runtime<'p>,
    names: Names,
    /// Interval probes: `(attach, period, next)`.
    intervals: Vec<(usize, u64, u64)>,
    played: u64,
}

impl Player<'_> {
    /// Plays BEGIN, then every recorded call in `window` in time order;
    /// `true` when the program called `exit()` (END has run).
    fn play(
        &mut self,
        snapshot: &Snapshot,
        syscalls: weft_store::SourceId,
        window: &RangeInclusive<u64>,
        out: &mut dyn std::io::Write,
    ) -> Result<bool> {
        for index in super::user_probes(self.plan, |t| *t == Target::Begin) {
            if self
                .runtime
                .event(&past_event(index, *window.start()), out)?
                == Flow::Exit
            {
                return self.exit(*window.start(), out);
            }
        }
        let reads = Reads::of(&self.hooks, snapshot, syscalls);
        let mut slice = Vec::new();
        let mut from = *window.start();
        while from <= *window.end() {
            let to = from.saturating_add(SLICE_NS - 1).min(*window.end());
            slice.clear();
            reads.each(snapshot, syscalls, from..=to, |payload| {
                let Some(call) = syscall(payload) else {
                    return;
                };
                let exit = call.enter_ns.saturating_add(call.duration_ns);
                slice.push(Played {
                    ns: call.enter_ns,
                    exit: false,
                    call,
                });
                slice.push(Played {
                    ns: exit,
                    exit: true,
                    call,
                });
            })?;
            // An entry comes before its own return at the same time.
            slice.sort_by_key(|p| (p.ns, p.exit));
            for played in &slice {
                if self.event(played, out)? == Flow::Exit {
                    return self.exit(played.ns, out);
                }
            }
            from = to.saturating_add(1);
            if to == u64::MAX {
                break;
            }
        }
        // The intervals due after the last call, up to the window's end.
        if self.intervals_until(*window.end(), out)? == Flow::Exit {
            return self.exit(*window.end(), out);
        }
        Ok(false)
    }

    /// Fires the intervals due by `ns`, then each probe of `played`'s
    /// tracepoint.
    fn event(&mut self, played: &Played, out: &mut dyn std::io::Write) -> Result<Flow> {
        if self.intervals_until(played.ns, out)? == Flow::Exit {
            return Ok(Flow::Exit);
        }
        let call = &played.call;
        let comm = self.names.name_of(i64::from(call.tid));
        let mut comm_bytes = [0u8; 16];
        let len = comm.len().min(15);
        comm_bytes[..len].copy_from_slice(&comm.as_bytes()[..len]);
        // `__syscall_nr` (an int) or `id` (a long) at 8, `ret` at 16.
        let mut record = [0u8; 24];
        record[8..16].copy_from_slice(&i64::from(call.nr).to_le_bytes());
        record[16..24].copy_from_slice(&call.ret.to_le_bytes());
        for &(index, hook) in &self.hooks {
            if !hook.takes(call.nr, played.exit) {
                continue;
            }
            let event = Event {
                attach: index,
                ns: played.ns,
                pid: call.pid,
                tid: call.tid,
                cpu: call.cpu,
                comm: &comm_bytes,
                raw: &record,
                ..Event::default()
            };
            self.played += 1;
            if self.runtime.event(&event, out)? == Flow::Exit {
                return Ok(Flow::Exit);
            }
        }
        Ok(Flow::Continue)
    }

    /// Fires the intervals due by recorded time `ns`.
    fn intervals_until(&mut self, ns: u64, out: &mut dyn std::io::Write) -> Result<Flow> {
        for (index, period, next) in &mut self.intervals {
            while *next <= ns {
                let event = past_event(*index, *next);
                *next = next.saturating_add(*period);
                if self.runtime.event(&event, out)? == Flow::Exit {
                    return Ok(Flow::Exit);
                }
            }
        }
        Ok(Flow::Continue)
    }

    /// After `exit()` at recorded time `ns`: END runs, as bpftrace runs it.
    fn exit(&mut self, ns: u64, out: &mut dyn std::io::Write) -> Result<bool> {
        for index in super::user_probes(self.plan, |t| *t == Target::End) {
            self.runtime.event(&past_event(index, ns), out)?;
        }
        Ok(true)
    }
}

/// Which recorded calls an attach point takes: one call's entry or return
/// (`syscalls:sys_enter_NAME`), or every call's (`raw_syscalls`).
#[derive(Clone, Copy)]
enum Hook {
    Call { nr: u32, exit: bool },
    Raw { exit: bool },
}

impl Hook {
    /// The hooks of `plan`'s attach points, resolved once.
    fn of(plan: &Plan) -> Vec<(usize, Self)> {
        (plan.attaches.iter().enumerate())
            .filter_map(|(index, attach)| {
                let Target::Tracepoint { category, name } = &attach.target else {
                    return None;
                };
                let hook = if category == "raw_syscalls" {
                    Self::Raw {
                        exit: name == "sys_exit",
                    }
                } else {
                    let (exit, call) = match name.strip_prefix("sys_exit_") {
                        Some(call) => (true, call),
                        None => (false, name.strip_prefix("sys_enter_")?),
                    };
                    Self::Call {
                        nr: syscall_names::number(call)?,
                        exit,
                    }
                };
                Some((index, hook))
            })
            .collect()
    }

    fn takes(self, nr: u32, exit: bool) -> bool {
        match self {
            Self::Call {
                nr: wanted,
                exit: at,
            } => wanted == nr && at == exit,
            Self::Raw { exit: at } => at == exit,
        }
    }
}

/// Which recorded calls a program's probes take, and how they are read:
/// with a probe on `raw_syscalls` every call, scanned; else only the calls
/// its `syscalls` probes name, through the capture's index by number (one
/// range of numbers at a time), so a program on one call reads that call's
/// records and no others.
enum Reads {
    All,
    /// Ranges of call numbers, and the `nr` index.
    Calls(Vec<RangeInclusive<i64>>, weft_store::IndexId),
    /// Only BEGIN, END and intervals: nothing is read.
    None,
}

impl Reads {
    fn of(hooks: &[(usize, Hook)], snapshot: &Snapshot, syscalls: weft_store::SourceId) -> Self {
        let mut numbers = Vec::new();
        for (_, hook) in hooks {
            match hook {
                Hook::Raw { .. } => return Self::All,
                Hook::Call { nr, .. } => numbers.push(i64::from(*nr)),
            }
        }
        if numbers.is_empty() {
            return Self::None;
        }
        let index = snapshot
            .meta()
            .indexes
            .iter()
            .find(|i| i.source == syscalls && i.name == "nr" && i.until_chunk.is_none());
        let Some(index) = index else {
            return Self::All;
        };
        numbers.sort_unstable();
        numbers.dedup();
        let mut ranges: Vec<RangeInclusive<i64>> = Vec::new();
        for nr in numbers {
            match ranges.last_mut() {
                Some(last) if *last.end() + 1 == nr => *last = *last.start()..=nr,
                _ => ranges.push(nr..=nr),
            }
        }
        Self::Calls(ranges, index.id)
    }

    /// Calls `visit` with the payload of each record to play in `window`.
    fn each(
        &self,
        snapshot: &Snapshot,
        syscalls: weft_store::SourceId,
        window: RangeInclusive<u64>,
        mut visit: impl FnMut(&[u8]),
    ) -> Result<()> {
        match self {
            Self::All => {
                snapshot.raw_scan_each(syscalls, window, |r| visit(r.payload))?;
            }
            Self::Calls(ranges, index) => {
                for range in ranges {
                    snapshot.indexed_scan_each(
                        syscalls,
                        *index,
                        window.clone(),
                        range.clone(),
                        |r| {
                            visit(r.payload);
                        },
                    )?;
                }
            }
            Self::None => {}
        }
        Ok(())
    }
}

/// A `syscalls` record's call, as the probe wrote it.
fn syscall(payload: &[u8]) -> Option<SyscallEvent> {
    use std::mem::offset_of;
    let u64_at = |at: usize| {
        Some(u64::from_le_bytes(
            payload.get(at..at + 8)?.try_into().ok()?,
        ))
    };
    let u32_at = |at: usize| {
        Some(u32::from_le_bytes(
            payload.get(at..at + 4)?.try_into().ok()?,
        ))
    };
    Some(SyscallEvent {
        enter_ns: u64_at(offset_of!(SyscallEvent, enter_ns))?,
        duration_ns: u64_at(offset_of!(SyscallEvent, duration_ns))?,
        ret: u64_at(offset_of!(SyscallEvent, ret))?.cast_signed(),
        pid: u32_at(offset_of!(SyscallEvent, pid))?,
        tid: u32_at(offset_of!(SyscallEvent, tid))?,
        nr: u32_at(offset_of!(SyscallEvent, nr))?,
        cpu: u32_at(offset_of!(SyscallEvent, cpu))?,
    })
}

/// What the checker may know of a capture: the system call tracepoints,
/// with the fields it recorded; no kernel types.
struct Recorded;

impl Kernel for Recorded {
    fn tracepoints(&self, category: &str, name: &str) -> Vec<(String, String)> {
        let mut found: Vec<(String, String)> = Vec::new();
        if glob_match(category, "syscalls") {
            for nr in 0..weft_abi::syscall::MAX_SYSCALLS {
                let Some(call) = syscall_names::name(nr) else {
                    continue;
                };
                for phase in ["enter", "exit"] {
                    let event = format!("sys_{phase}_{call}");
                    if glob_match(name, &event) {
                        found.push(("syscalls".into(), event));
                    }
                }
            }
        }
        if glob_match(category, "raw_syscalls") {
            for event in ["sys_enter", "sys_exit"] {
                if glob_match(name, event) {
                    found.push(("raw_syscalls".into(), event.into()));
                }
            }
        }
        found.sort();
        found
    }

    fn tracepoint_fields(&self, category: &str, name: &str) -> Result<Vec<Field>, String> {
        let format = match (category, name) {
            ("raw_syscalls", "sys_enter") => RAW_ENTER,
            ("raw_syscalls", "sys_exit") => RAW_EXIT,
            ("syscalls", n) if n.starts_with("sys_enter_") => ENTER,
            ("syscalls", n) if n.starts_with("sys_exit_") => EXIT,
            _ => return Err(format!("the capture recorded no {category}:{name} events")),
        };
        Ok(format_fields(format))
    }

    fn has_raw_tracepoint(&self, _: &str) -> bool {
        false
    }

    fn has_kprobes(&self) -> bool {
        false
    }

    fn functions(&self, _: &str) -> Vec<String> {
        Vec::new()
    }

    fn function(&self, function: &str) -> Result<Signature, String> {
        Err(format!("the capture recorded no calls of {function}"))
    }

    fn record(&self, name: &str) -> Result<u32, String> {
        Err(format!(
            "the capture holds no kernel memory to read {name} from"
        ))
    }

    fn record_name(&self, _: u32) -> String {
        String::new()
    }

    fn record_size(&self, _: u32) -> u32 {
        0
    }

    fn member(&self, _: u32, name: &str) -> Result<Member, String> {
        Err(format!(
            "the capture holds no kernel memory to read `{name}` from"
        ))
    }

    fn record_align(&self, _: u32) -> u32 {
        1
    }

    fn typedef(&self, _: &str) -> Option<Shape> {
        None
    }

    fn usdt(&self, path: &str) -> Result<(String, Vec<UsdtSite>), String> {
        Err(format!("the capture recorded no USDT probes of {path}"))
    }

    fn process_files(&self, pid: u32) -> Result<Vec<String>, String> {
        Err(format!("the capture holds no process {pid} to look in"))
    }

    fn uprobe_functions(&self, path: &str) -> Result<(String, Vec<String>), String> {
        Err(format!("the capture recorded no calls into {path}"))
    }

    fn enumerator(&self, _: &str) -> Option<i64> {
        None
    }

    fn symbol(&self, _: &str) -> Option<u64> {
        None
    }

    fn cgroup_id(&self, path: &str) -> Result<u64, String> {
        Err(format!("the capture records no cgroups ({path})"))
    }
}
