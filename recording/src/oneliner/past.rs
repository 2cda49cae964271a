//! `weft trace --from DIR [--trigger N] PROGRAM`: a program run over what a
//! capture recorded, as it would have run when it happened. Each recorded
//! system call is its `sys_enter_NAME` event at its entry and its
//! `sys_exit_NAME` event at its return (and `raw_syscalls`' two), with the
//! fields the capture holds: the call's number, its return value, the
//! thread, its name and CPU. A capture with the `switch` source plays each
//! context switch as `sched:sched_switch`, with the fields it recorded
//! (`prev_comm`, `prev_pid`, `prev_state`, `next_comm`, `next_pid` at the
//! kernel's offsets; prio is not recorded, nor state before weft kept it), and the `block` source each
//! request as `block:block_rq_issue` at its issue and
//! `block:block_rq_complete` at its completion, and the `net` source each
//! packet as `net:netif_receive_skb` (received) or `net:net_dev_queue`
//! (sent), with its length and interface, and the `pagecache` source
//! each page-cache insertion and removal as `filemap:mm_filemap_add_to_page_cache`
//! and `filemap:mm_filemap_delete_from_page_cache`, and the `sched` source
//! each wakeup of a sleeping thread as `sched:sched_wakeup` (at its switch-in
//! less its run-queue wait), and applications' records each as
//! `tracepoint:app:SOURCE`, a `long` per field. With the `args` source, the
//! entries of the calls it holds play from its records with their
//! descriptor and byte count (`held.rs`). Events play in recorded
//! time, a slice at a time; `interval` probes fire on recorded time too, and `nsecs` is the
//! event's recorded time, so the latency idiom measures what happened.
//! Everything runs in weft: nothing is attached, and no privilege is needed.

use std::{fmt::Write as _, ops::RangeInclusive, path::Path, sync::Arc};

use crate::error::{Error, Result, bail};
use weft_abi::{
    args::ArgsEvent,
    block::{BlockEvent, Op},
    net::{Direction, EVENT_SIZE_BEFORE_TTL, PacketEvent},
    pagecache::{Op as PageOp, PageCacheEvent},
    sched::SchedEvent,
    switch::SwitchEvent,
    syscall::SyscallEvent,
    syscall_names,
};
use weft_capture::{
    capture, extract::kept_window, metadata::Metadata, sources::STORED_FROM, tasks,
};
use weft_oneliner::{
    Event, Field, Flow, Kernel, Plan, Runtime, Target,
    ast::{Builtin, ProbeKind, Program, period_ns},
    kernel::{Member, Shape, Signature, UsdtSite, format_fields, glob_match},
    limits::Limits,
};
use weft_query::Names;
use weft_store::Snapshot;

use super::Options;

mod held;

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
const SWITCH: &str = "\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                      \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
                      \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
                      \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n";
/// `sched_switch`'s `prev_state`, where the capture's `switch` source has it.
const SWITCH_STATE: &str = "\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n";
/// The block tracepoints' records with what the `block` source holds:
/// the operation alone in `rwbs` (its letter, without the `S`, `M`, `A`
/// and `F` flags, which the source does not keep).
const BLOCK_ISSUE: &str = "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
                           \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
                           \tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;\n\
                           \tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;\n\
                           \tfield:char rwbs[8];\toffset:32;\tsize:8;\tsigned:1;\n\
                           \tfield:char comm[16];\toffset:40;\tsize:16;\tsigned:1;\n";
const BLOCK_COMPLETE: &str = "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
                              \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
                              \tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;\n\
                              \tfield:int error;\toffset:28;\tsize:4;\tsigned:1;\n\
                              \tfield:char rwbs[8];\toffset:32;\tsize:8;\tsigned:1;\n";
/// The two net tracepoints' records (the same layout): the socket buffer's
/// address (not recorded: 0), its length, and the interface's name, which
/// the rebuilt record holds at [`NET_NAME_AT`].
const NET: &str = "\tfield:void * skbaddr;\toffset:8;\tsize:8;\tsigned:0;\n\
                   \tfield:unsigned int len;\toffset:16;\tsize:4;\tsigned:0;\n\
                   \tfield:__data_loc char[] name;\toffset:20;\tsize:4;\tsigned:0;\n";
/// The two filemap tracepoints' records (the same layout): the page frame
/// (not recorded: 0), the file's inode and device, the first page's index
/// and the folio's order (log2 of its pages).
const PAGE: &str = "\tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n\
                    \tfield:unsigned long i_ino;\toffset:16;\tsize:8;\tsigned:0;\n\
                    \tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;\n\
                    \tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;\n\
                    \tfield:unsigned char order;\toffset:36;\tsize:1;\tsigned:0;\n";
/// `sched_wakeup`'s record with what the `sched` source holds: the thread
/// woken, its name, and the CPU it next ran on (`prio` is not recorded).
const WAKEUP: &str = "\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                      \tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\
                      \tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n";
/// The `prev_state` bit of a preempted thread (`TASK_REPORT_MAX`): it left
/// runnable, as with state 0 (a yield), and was never woken.
const PREEMPTED: u32 = 0x100;
/// Where a rebuilt net record holds the interface's name.
const NET_NAME_AT: usize = 32;
/// The link header TC counts in a packet's length and
/// `netif_receive_skb` does not (the device has pulled it by then): an
/// Ethernet header's, as on Ethernet, veth and loopback devices.
const LINK_HEADER: u32 = 14;
/// Bytes of the largest rebuilt record: an application's, a `long` per
/// field after the common header (`sched_switch`'s is 64).
const RECORD_LEN: usize = 8 + 8 * weft_client::protocol::MAX_FIELDS;

/// Runs `options`' program over the capture in `from`, or over the window
/// kept around its firing `trigger` (1-based).
pub fn run(options: &Options, from: &Path, trigger: Option<usize>) -> Result<()> {
    let snapshot = capture::open(from, false)?;
    let window = match trigger {
        Some(n) => kept_window(&snapshot, n)?,
        None => snapshot
            .time_range()?
            .ok_or_else(|| Error::Invalid(format!("{} holds no records", from.display())))?,
    };
    let source = |name: &str| {
        (snapshot.meta().sources.iter())
            .find(|s| s.name == name)
            .map(|s| s.id)
    };
    let metadata = weft_capture::metadata::read_metadata(from)?;
    let switch_state = (snapshot.meta().sources.iter())
        .find(|s| s.name == "switch")
        .is_some_and(|s| s.fields.iter().any(|f| f.name == "prev_state"));
    let sources = Sources {
        syscalls: source(weft_capture::registry::SYSCALLS),
        switch: source("switch"),
        switch_state,
        block: source("block"),
        net: source("net"),
        pagecache: source("pagecache"),
        sched: source("sched"),
        args: source("args"),
        apps: App::all(&snapshot, &metadata),
    };
    let plan = resolve(options, from, &sources)?;
    let names =
        tasks::names(&snapshot)?.map_or_else(|| Arc::new(Names::new([], false)), |t| t.comm);
    let limits = Limits::from_env().map_err(Error::Invalid)?;
    let mut out = super::output(options.output.as_deref())?;
    let mut runtime = Runtime::new(&plan, options.format, *window.start());
    runtime.set_limits(limits);
    let mut player = Player {
        plan: &plan,
        hooks: Hook::of(&plan, &sources),
        runtime,
        names,
        interfaces: interfaces(&metadata),
        paths: paths(&snapshot)?,
        intervals: intervals(&plan, *window.start()),
        app_pids: (sources.apps.iter())
            .map(|app| {
                let pid = app.fields.iter().find(|(name, _)| name == "pid");
                pid.map(|(_, offset)| *offset as usize)
            })
            .collect(),
        played: 0,
    };
    if (player.hooks.iter()).any(|(_, hook)| matches!(hook, Hook::WakeupNew)) {
        log::warn!(
            "weft: tracepoint:sched:sched_wakeup_new plays no events: the `sched` source does \
             not record a new thread's first wakeup"
        );
    }
    let ended = player.play(&snapshot, &sources, &window, &mut *out)?;
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
        log::info!(
            "weft: {} events played from {}",
            player.played,
            from.display()
        );
    }
    Ok(())
}

/// The program checked against what the capture holds, to run in weft.
fn resolve(options: &Options, from: &Path, sources: &Sources) -> Result<Plan> {
    let text = &options.text;
    let render = |e: weft_oneliner::Error| Error::Program(e.render(text));
    let program = weft_oneliner::parse::parse_with(text, &options.params).map_err(render)?;
    recorded_probes(&program, from, sources).map_err(render)?;
    unrecorded_builtins(&program).map_err(render)?;
    let recorded = Recorded(sources);
    let plan = weft_oneliner::check::check_in_weft(program, &recorded).map_err(render)?;
    for attach in &plan.attaches {
        // The strings a capture holds: a packet's interface, and with
        // `args` the path an open was given.
        let supplied = |field: &Field| match &attach.target {
            Target::Tracepoint { category, name } if category == "net" => field.name == "name",
            Target::Tracepoint { category, name } if category == "syscalls" => {
                let call = name.strip_prefix("sys_enter_").unwrap_or_default();
                sources.args.is_some() && held::is_path(call, &field.name)
            }
            _ => false,
        };
        let unrecorded = [
            (
                !attach.strings.iter().all(supplied) || !attach.saved.is_empty(),
                "strings",
            ),
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
fn recorded_probes(
    program: &Program,
    from: &Path,
    sources: &Sources,
) -> weft_oneliner::error::Result<()> {
    for probe in program.items.iter().flat_map(|item| &item.probes) {
        let played = match &probe.kind {
            ProbeKind::Begin | ProbeKind::End | ProbeKind::Interval { .. } => true,
            ProbeKind::Tracepoint { category, name } => {
                let calls = ["syscalls", "raw_syscalls"]
                    .iter()
                    .any(|c| glob_match(category, c));
                let switches = glob_match(category, "sched") && glob_match(name, "sched_switch");
                let block = glob_match(category, "block")
                    && BLOCK_EVENTS.iter().any(|event| glob_match(name, event));
                let net = glob_match(category, "net")
                    && NET_EVENTS.iter().any(|event| glob_match(name, event));
                let pages = glob_match(category, "filemap")
                    && PAGE_EVENTS.iter().any(|event| glob_match(name, event));
                let wakeups = glob_match(category, "sched")
                    && WAKEUP_EVENTS.iter().any(|event| glob_match(name, event));
                let apps = glob_match(category, APP)
                    && sources.apps.iter().any(|app| glob_match(name, &app.name));
                apps || (calls && (sources.syscalls.is_some() || sources.args.is_some()))
                    || (switches && sources.switch.is_some())
                    || (block && sources.block.is_some())
                    || (net && sources.net.is_some())
                    || (pages && sources.pagecache.is_some())
                    || (wakeups && sources.sched.is_some())
            }
            _ => false,
        };
        if !played {
            return Err(weft_oneliner::Error::new(
                probe.span,
                format!(
                    "{} recorded no such events: --from plays system calls \
                     (tracepoint:syscalls:*, tracepoint:raw_syscalls:*) where the capture has \
                     the `syscalls` source, context switches (tracepoint:sched:sched_switch) \
                     where it has `switch`, block requests (tracepoint:block:block_rq_issue, \
                     block_rq_complete) where it has `block`, packets \
                     (tracepoint:net:netif_receive_skb, net_dev_queue) where it has `net`, \
                     page-cache insertions and removals \
                     (tracepoint:filemap:mm_filemap_add_to_page_cache, \
                     mm_filemap_delete_from_page_cache) where it has `pagecache`, \
                     wakeups (tracepoint:sched:sched_wakeup, sched_wakeup_new) where it has \
                     `sched`, applications' records (tracepoint:app:SOURCE) where it has \
                     `app`, BEGIN, END and interval",
                    from.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The category of the tracepoints an application's records play as
/// (`tracepoint:app:SOURCE`): no kernel has one.
const APP: &str = "app";

/// The block tracepoints a capture's `block` source plays.
const BLOCK_EVENTS: [&str; 2] = ["block_rq_issue", "block_rq_complete"];

/// The net tracepoints a capture's `net` source plays: a received
/// packet's and a sent one's.
const NET_EVENTS: [&str; 2] = ["netif_receive_skb", "net_dev_queue"];

/// The filemap tracepoints a capture's `pagecache` source plays: an
/// insertion's and a removal's. Its lookups are not played: the source
/// keeps a read's first `mm_filemap_get_pages` alone, where the kernel
/// fires one per batch of a large read.
const PAGE_EVENTS: [&str; 2] = [
    "mm_filemap_add_to_page_cache",
    "mm_filemap_delete_from_page_cache",
];

/// The sched tracepoints a capture's `sched` source plays: a sleeping
/// thread's wakeup. A new thread's first (`sched_wakeup_new`) is not
/// recorded: the source notes threads it saw leave a CPU; that probe is
/// accepted, and plays nothing.
const WAKEUP_EVENTS: [&str; 2] = ["sched_wakeup", "sched_wakeup_new"];

/// The capture's sources a program can be played from.
struct Sources {
    syscalls: Option<weft_store::SourceId>,
    switch: Option<weft_store::SourceId>,
    /// Whether its records hold `prev_state` (captures before it: no).
    switch_state: bool,
    block: Option<weft_store::SourceId>,
    net: Option<weft_store::SourceId>,
    pagecache: Option<weft_store::SourceId>,
    sched: Option<weft_store::SourceId>,
    /// Whose calls play with their arguments (`held`).
    args: Option<weft_store::SourceId>,
    /// Applications' sources, each played as `tracepoint:app:NAME`.
    apps: Vec<App>,
}

/// An application's source: its name, and each field's name and offset
/// (every field an `i64`; the low half of a trace id, whose name is no
/// identifier, is left out).
struct App {
    name: String,
    id: weft_store::SourceId,
    fields: Vec<(String, u32)>,
}

impl App {
    /// The sources the capture's applications defined, as its metadata
    /// names them.
    fn all(snapshot: &Snapshot, metadata: &Metadata) -> Vec<Self> {
        (snapshot.meta().sources.iter())
            .filter(|source| metadata.app_sources.contains_key(&source.name))
            .map(|source| Self {
                name: source.name.clone(),
                id: source.id,
                fields: (source.fields.iter())
                    .filter(|f| !f.name.contains('.'))
                    .map(|f| (f.name.clone(), f.offset))
                    .collect(),
            })
            .collect()
    }

    /// Its tracepoint's format: each field a `long` at 8 past its offset.
    fn format(&self) -> String {
        let mut format = String::new();
        for (name, offset) in &self.fields {
            let at = offset + 8;
            // Writing to a String cannot fail.
            let _ = writeln!(
                format,
                "\tfield:long {name};\toffset:{at};\tsize:8;\tsigned:1;"
            );
        }
        format
    }
}

/// The names of the capture's `paths` source, by number (none without it).
fn paths(snapshot: &Snapshot) -> Result<std::collections::HashMap<u32, String>> {
    let paths = (snapshot.meta().sources.iter()).find(|s| s.name == weft_capture::registry::PATHS);
    Ok(match paths {
        Some(paths) => weft_capture::sources::numbered(snapshot, paths.id)?
            .into_iter()
            .collect(),
        None => std::collections::HashMap::new(),
    })
}

/// The names of the interfaces the capture's packets were seen on, by
/// index, as its sessions noted them (a later session's name wins).
fn interfaces(metadata: &Metadata) -> std::collections::HashMap<u32, String> {
    (metadata.sessions.iter())
        .filter_map(|session| session.sources.get("net"))
        .flat_map(|net| &net.interfaces)
        .filter_map(|(index, name)| Some((index.parse().ok()?, name.clone())))
        .collect()
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

/// One recorded event to play: a system call's entry or return, or a
/// context switch.
struct Played {
    ns: u64,
    what: What,
}

enum What {
    /// A call, with its arguments when the `args` source held it.
    Call {
        exit: bool,
        call: SyscallEvent,
        held: Option<Arguments>,
    },
    Switch(SwitchEvent),
    Block {
        complete: bool,
        request: BlockEvent,
    },
    Packet(PacketEvent),
    /// A page-cache insertion or removal.
    Page(PageCacheEvent),
    /// A sleeping thread woken, as its switch-in records it.
    Wakeup(SchedEvent),
    /// A record of application source `app` (in `Sources::apps`).
    App {
        app: usize,
        payload: Vec<u8>,
    },
}

impl Played {
    /// The order of events at one time: an entry before its own return, an
    /// issue before its own completion.
    fn order(&self) -> (u64, bool) {
        let last = matches!(
            self.what,
            What::Call { exit: true, .. } | What::Block { complete: true, .. }
        );
        (self.ns, last)
    }
}

/// What the `args` source holds of a call's arguments.
#[derive(Clone, Copy)]
struct Arguments {
    fd: i32,
    count: u64,
    /// The path an open was given, by its number in `paths`.
    given: u32,
}

/// The program running over the capture.
struct Player<'p> {
    plan: &'p Plan,
    /// The attach points that take recorded calls, and which.
    hooks: Vec<(usize, Hook)>,
    runtime: Runtime<'p>,
    names: Arc<Names>,
    /// Interface names by index, for the packets.
    interfaces: std::collections::HashMap<u32, String>,
    /// The `paths` source's names by number, for the opens' paths.
    paths: std::collections::HashMap<u32, String>,
    /// Interval probes: `(attach, period, next)`.
    intervals: Vec<(usize, u64, u64)>,
    /// Where each application source's records hold the sender's pid.
    app_pids: Vec<Option<usize>>,
    played: u64,
}

impl Player<'_> {
    /// Plays BEGIN, then every recorded call in `window` in time order;
    /// `true` when the program called `exit()` (END has run).
    fn play(
        &mut self,
        snapshot: &Snapshot,
        sources: &Sources,
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
        let reads = Reads::of(&self.hooks, snapshot, sources.syscalls, false);
        let held = Reads::of(&self.hooks, snapshot, sources.args, true);
        let switch = sources
            .switch
            .filter(|_| self.hooks.iter().any(|(_, h)| matches!(h, Hook::Switch)));
        let block = (sources.block)
            .filter(|_| (self.hooks.iter()).any(|(_, h)| matches!(h, Hook::Block { .. })));
        let net = (sources.net)
            .filter(|_| (self.hooks.iter()).any(|(_, h)| matches!(h, Hook::Packet { .. })));
        let pages = (sources.pagecache)
            .filter(|_| (self.hooks.iter()).any(|(_, h)| matches!(h, Hook::Page { .. })));
        let wakeups =
            (sources.sched).filter(|_| (self.hooks.iter()).any(|(_, h)| matches!(h, Hook::Wakeup)));
        let apps = Hook::apps(&self.hooks);
        let mut slice = Vec::new();
        let mut from = *window.start();
        while from <= *window.end() {
            let to = from.saturating_add(SLICE_NS - 1).min(*window.end());
            slice.clear();
            let mut both_ends = |call: SyscallEvent, held: Option<Arguments>| {
                let exit = call.enter_ns.saturating_add(call.duration_ns);
                for (ns, exit) in [(call.enter_ns, false), (exit, true)] {
                    let what = What::Call { exit, call, held };
                    slice.push(Played { ns, what });
                }
            };
            if let Some(syscalls) = sources.syscalls {
                reads.each(snapshot, syscalls, from..=to, |payload| {
                    if let Some(call) = syscall(payload) {
                        both_ends(call, None);
                    }
                })?;
            }
            if let Some(args) = sources.args {
                held.each(snapshot, args, from..=to, |payload| {
                    if let Some((call, arguments)) = held_call(payload) {
                        both_ends(call, Some(arguments));
                    }
                })?;
            }
            if let Some(block) = block {
                // A request plays in the slice of its completion, its issue
                // too: each slice is in time order.
                snapshot.raw_scan_each(block, from..=to, |r| {
                    if let Some(request) = block_event(r.payload) {
                        let issue = request.ts_ns.saturating_sub(request.latency_ns);
                        for (ns, complete) in [(issue, false), (request.ts_ns, true)] {
                            slice.push(Played {
                                ns,
                                what: What::Block { complete, request },
                            });
                        }
                    }
                })?;
            }
            gather(snapshot, net, from..=to, &mut slice, |payload| {
                let packet = packet_event(payload)?;
                Some((packet.ts_ns, What::Packet(packet)))
            })?;
            gather(snapshot, pages, from..=to, &mut slice, |payload| {
                let event = page_event(payload)?;
                Some((event.ts_ns, What::Page(event)))
            })?;
            // A wakeup plays in the slice of the switch-in that recorded it.
            gather(snapshot, wakeups, from..=to, &mut slice, |payload| {
                let event = sched_event(payload)?;
                let woken = event.state != 0 && event.state & PREEMPTED == 0;
                let at = event.ts_ns.saturating_sub(event.runq_ns);
                woken.then_some((at, What::Wakeup(event)))
            })?;
            gather(snapshot, switch, from..=to, &mut slice, |payload| {
                let event = switch_event(payload)?;
                Some((event.ts_ns, What::Switch(event)))
            })?;
            for &app in &apps {
                gather_app(snapshot, sources, app, from..=to, &mut slice)?;
            }
            slice.sort_by_key(Played::order);
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
        let mut record = [0u8; RECORD_LEN];
        let (pid, tid, cpu) = self.rebuild(&played.what, &mut record);
        // A packet is no thread's work (the kernel's softirq), and a
        // wakeup's waker is not recorded: no name.
        let comm = match played.what {
            What::Packet(_) | What::Wakeup(_) => [0u8; 16],
            _ => self.comm(tid),
        };
        // The one string a probe can read here (its string slots all
        // hold it): a packet's interface, or the path an open was given.
        let supplied: Vec<u8> = match &played.what {
            What::Packet(packet) => self.interface(packet.ifindex).to_vec(),
            What::Call {
                exit: false,
                held: Some(arguments),
                ..
            } => {
                let path = self.paths.get(&arguments.given).map_or("", String::as_str);
                [path.as_bytes(), &[0]].concat()
            }
            _ => Vec::new(),
        };
        let strings: [&[u8]; 8] = [&supplied; 8];
        for &(index, hook) in &self.hooks {
            if !hook.takes(&played.what) {
                continue;
            }
            let event = Event {
                attach: index,
                ns: played.ns,
                pid,
                tid,
                cpu,
                comm: &comm,
                raw: &record,
                strings: &strings,
                ..Event::default()
            };
            self.played += 1;
            if self.runtime.event(&event, out)? == Flow::Exit {
                return Ok(Flow::Exit);
            }
        }
        Ok(Flow::Continue)
    }

    /// Into `record`, the tracepoint's record of `what`; the task the
    /// event ran in: `(pid, tid, cpu)`.
    fn rebuild(&self, what: &What, record: &mut [u8; RECORD_LEN]) -> (u32, u32, u32) {
        match what {
            What::Call { call, exit, held } => {
                // `__syscall_nr` (an int) or `id` (a long) at 8; at an
                // exit `ret` at 16, at an entry the held arguments.
                record[8..16].copy_from_slice(&i64::from(call.nr).to_le_bytes());
                match held {
                    Some(arguments) if !exit => {
                        let name = syscall_names::name(call.nr).unwrap_or_default();
                        held::fill(name, arguments.fd, arguments.count, record);
                    }
                    _ => record[16..24].copy_from_slice(&call.ret.to_le_bytes()),
                }
                (call.pid, call.tid, call.cpu)
            }
            What::Switch(switch) => {
                record[8..24].copy_from_slice(&self.comm(switch.prev_tid));
                record[24..28].copy_from_slice(&switch.prev_tid.to_le_bytes());
                record[32..40].copy_from_slice(&i64::from(switch.prev_state).to_le_bytes());
                record[40..56].copy_from_slice(&self.comm(switch.next_tid));
                record[56..60].copy_from_slice(&switch.next_tid.to_le_bytes());
                (switch.prev_pid, switch.prev_tid, switch.header.cpu)
            }
            What::Block { complete, request } => {
                record[8..12].copy_from_slice(&request.dev.to_le_bytes());
                record[16..24].copy_from_slice(&request.sector.to_le_bytes());
                record[24..28].copy_from_slice(&(request.bytes >> 9).to_le_bytes());
                if *complete {
                    record[28..32].copy_from_slice(&request.error.to_le_bytes());
                } else {
                    record[28..32].copy_from_slice(&request.bytes.to_le_bytes());
                    record[40..56].copy_from_slice(&self.comm(request.tid));
                }
                record[32] = Op::letter(request.op);
                (request.pid, request.tid, request.header.cpu)
            }
            What::Packet(packet) => {
                let len = if packet.dir == Direction::Ingress as u8 {
                    packet.len.saturating_sub(LINK_HEADER)
                } else {
                    packet.len
                };
                record[16..20].copy_from_slice(&len.to_le_bytes());
                let name = self.interface(packet.ifindex);
                let len = name.iter().position(|b| *b == 0).unwrap_or(name.len());
                record[NET_NAME_AT..NET_NAME_AT + len].copy_from_slice(&name[..len]);
                // `__data_loc`: the string's length (its NUL too), then where.
                let loc = ((len as u32 + 1) << 16) | NET_NAME_AT as u32;
                record[20..24].copy_from_slice(&loc.to_le_bytes());
                // Not a thread's: a packet is the kernel's (softirq) work.
                (0, 0, packet.header.cpu)
            }
            What::Page(page) => {
                record[16..24].copy_from_slice(&page.ino.to_le_bytes());
                record[24..32].copy_from_slice(&page.index.to_le_bytes());
                record[32..36].copy_from_slice(&page.dev.to_le_bytes());
                // A folio holds a power of two of pages.
                record[36] = page.pages.max(1).ilog2() as u8;
                (page.pid, page.tid, page.header.cpu)
            }
            What::Wakeup(woken) => {
                record[8..24].copy_from_slice(&self.comm(woken.tid));
                record[24..28].copy_from_slice(&woken.tid.to_le_bytes());
                record[32..36].copy_from_slice(&woken.header.cpu.to_le_bytes());
                // The waker is not recorded: the CPU is where it ran next.
                (0, 0, woken.header.cpu)
            }
            What::App { app, payload } => {
                let len = payload.len().min(RECORD_LEN - 8);
                record[8..8 + len].copy_from_slice(&payload[..len]);
                // The sender's process, where the source has a `pid` field
                // (weft fills it from the socket's credentials); its CPU
                // is not recorded.
                let pid = (self.app_pids.get(*app).copied().flatten())
                    .and_then(|at| payload.get(at..at + 8))
                    .and_then(|bytes| Some(i64::from_le_bytes(bytes.try_into().ok()?)))
                    .and_then(|pid| u32::try_from(pid).ok())
                    .unwrap_or(0);
                (pid, pid, 0)
            }
        }
    }

    /// Interface `ifindex`'s name as the kernel's records hold it: at
    /// most 15 bytes (IFNAMSIZ less the NUL), NUL-padded; empty when the
    /// capture did not name it.
    fn interface(&self, ifindex: u32) -> [u8; 16] {
        weft_abi::comm_bytes(self.interfaces.get(&ifindex).map_or("", String::as_str))
    }

    /// Thread `tid`'s name as the kernel's records hold it: at most 15
    /// bytes, NUL-padded (the idle threads are `swapper/N`, not known).
    fn comm(&self, tid: u32) -> [u8; 16] {
        weft_abi::comm_bytes(&self.names.name_of(i64::from(tid)))
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

/// Into `slice`, the event `play` makes of each record of `source` (when
/// the program plays it) in `window`.
fn gather(
    snapshot: &Snapshot,
    source: Option<weft_store::SourceId>,
    window: RangeInclusive<u64>,
    slice: &mut Vec<Played>,
    play: impl Fn(&[u8]) -> Option<(u64, What)>,
) -> Result<()> {
    if let Some(source) = source {
        snapshot.raw_scan_each(source, window, |r| {
            if let Some((ns, what)) = play(r.payload) {
                slice.push(Played { ns, what });
            }
        })?;
    }
    Ok(())
}

/// Into `slice`, the records of application source `app` in `window`,
/// each played when weft read it.
fn gather_app(
    snapshot: &Snapshot,
    sources: &Sources,
    app: usize,
    window: RangeInclusive<u64>,
    slice: &mut Vec<Played>,
) -> Result<()> {
    snapshot.raw_scan_each(sources.apps[app].id, window, |r| {
        let payload = r.payload.to_vec();
        let ns = r.producer_ts.unwrap_or(r.ts);
        slice.push(Played {
            ns,
            what: What::App { app, payload },
        });
    })?;
    Ok(())
}

/// Which recorded events an attach point takes: one call's entry or
/// return (`syscalls:sys_enter_NAME`), every call's (`raw_syscalls`), or
/// every context switch (`sched:sched_switch`).
#[derive(Clone, Copy)]
enum Hook {
    /// A named call's entry or return; `held` when the capture's `args`
    /// source holds the call (its records play it, with its arguments).
    Call {
        nr: u32,
        exit: bool,
        held: bool,
    },
    Raw {
        exit: bool,
    },
    Switch,
    Block {
        complete: bool,
    },
    Packet {
        sent: bool,
    },
    Page {
        delete: bool,
    },
    Wakeup,
    /// `sched_wakeup_new`: a new thread's first wakeup, never recorded.
    WakeupNew,
    /// An application's records, by its place in `Sources::apps`.
    App(usize),
}

impl Hook {
    /// The hooks of `plan`'s attach points, resolved once.
    fn of(plan: &Plan, sources: &Sources) -> Vec<(usize, Self)> {
        (plan.attaches.iter().enumerate())
            .filter_map(|(index, attach)| {
                let Target::Tracepoint { category, name } = &attach.target else {
                    return None;
                };
                let hook = if category == APP {
                    Self::App(sources.apps.iter().position(|app| app.name == *name)?)
                } else if category == "sched" {
                    match name.as_str() {
                        "sched_switch" => Self::Switch,
                        "sched_wakeup" => Self::Wakeup,
                        "sched_wakeup_new" => Self::WakeupNew,
                        _ => return None,
                    }
                } else if category == "net" {
                    Self::Packet {
                        sent: name == "net_dev_queue",
                    }
                } else if category == "filemap" {
                    Self::Page {
                        delete: name == "mm_filemap_delete_from_page_cache",
                    }
                } else if category == "block" {
                    Self::Block {
                        complete: name == "block_rq_complete",
                    }
                } else if category == "raw_syscalls" {
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
                        held: sources.args.is_some() && held::holds(call),
                    }
                };
                Some((index, hook))
            })
            .collect()
    }

    /// The application sources `hooks` play, each once.
    fn apps(hooks: &[(usize, Self)]) -> Vec<usize> {
        let mut apps: Vec<usize> = (hooks.iter())
            .filter_map(|(_, hook)| match hook {
                Self::App(app) => Some(*app),
                _ => None,
            })
            .collect();
        apps.sort_unstable();
        apps.dedup();
        apps
    }

    fn takes(self, what: &What) -> bool {
        match (self, what) {
            (
                Self::Call {
                    nr,
                    exit: at,
                    held: from_args,
                },
                What::Call { exit, call, held },
            ) => nr == call.nr && at == *exit && from_args == held.is_some(),
            (Self::Raw { exit: at }, What::Call { exit, held, .. }) => {
                at == *exit && held.is_none()
            }
            (Self::Switch, What::Switch(_)) | (Self::Wakeup, What::Wakeup(_)) => true,
            (Self::App(at), What::App { app, .. }) => at == *app,
            (Self::Block { complete: at }, What::Block { complete, .. }) => at == *complete,
            (Self::Packet { sent }, What::Packet(packet)) => {
                sent == (packet.dir == Direction::Egress as u8)
            }
            (Self::Page { delete }, What::Page(page)) => {
                let op = if delete { PageOp::Delete } else { PageOp::Add };
                page.op == op as u32
            }
            _ => false,
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
    /// How `source` is read: the `syscalls` source for the calls the
    /// hooks take from it, or (`held`) the `args` source for those it holds.
    fn of(
        hooks: &[(usize, Hook)],
        snapshot: &Snapshot,
        source: Option<weft_store::SourceId>,
        held: bool,
    ) -> Self {
        let mut numbers = Vec::new();
        for (_, hook) in hooks {
            match *hook {
                Hook::Raw { .. } if !held => return Self::All,
                Hook::Call { nr, held: from, .. } if from == held => numbers.push(i64::from(nr)),
                _ => {}
            }
        }
        let Some(syscalls) = source.filter(|_| !numbers.is_empty()) else {
            return Self::None;
        };
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

/// An `args` record's call (its entry from its return less its duration),
/// descriptor and count, as the probe wrote them: stored from the header's
/// `cpu` on ([`STORED_FROM`]).
fn held_call(payload: &[u8]) -> Option<(SyscallEvent, Arguments)> {
    let mut whole = [0u8; weft_abi::args::EVENT_SIZE];
    let stored = payload.get(..whole.len() - STORED_FROM)?;
    whole[STORED_FROM..].copy_from_slice(stored);
    let event = ArgsEvent::read(&whole)?;
    let call = SyscallEvent {
        enter_ns: event.exit_ns.saturating_sub(event.duration_ns),
        duration_ns: event.duration_ns,
        ret: event.ret,
        pid: event.pid,
        tid: event.tid,
        nr: event.nr,
        cpu: event.header.cpu,
    };
    let arguments = Arguments {
        fd: event.fd,
        count: event.count,
        given: event.given,
    };
    Some((call, arguments))
}

/// A `switch` record, as the probe wrote it: stored from the header's
/// `cpu` on ([`STORED_FROM`]).
fn switch_event(payload: &[u8]) -> Option<SwitchEvent> {
    let mut whole = [0u8; weft_abi::switch::EVENT_SIZE];
    let stored = payload.get(..whole.len() - STORED_FROM)?;
    whole[STORED_FROM..].copy_from_slice(stored);
    SwitchEvent::read(&whole)
}

/// A `sched` record, as the probe wrote it: stored from the header's `cpu`
/// on ([`STORED_FROM`]).
fn sched_event(payload: &[u8]) -> Option<SchedEvent> {
    let mut whole = [0u8; weft_abi::sched::EVENT_SIZE];
    let stored = payload.get(..whole.len() - STORED_FROM)?;
    whole[STORED_FROM..].copy_from_slice(stored);
    SchedEvent::read(&whole)
}

/// A `block` record, as the probe wrote it: stored from the header's
/// `cpu` on ([`STORED_FROM`]).
fn block_event(payload: &[u8]) -> Option<BlockEvent> {
    let mut whole = [0u8; weft_abi::block::EVENT_SIZE];
    let stored = payload.get(..whole.len() - STORED_FROM)?;
    whole[STORED_FROM..].copy_from_slice(stored);
    BlockEvent::read(&whole)
}

/// A `net` record, as the probe wrote it: stored from the header's `cpu`
/// on ([`STORED_FROM`]), its payload bytes (if any) after it. What is
/// played (interface, length, time, direction) lies in the part every
/// capture's records have: the window and TTL that newer ones add read 0.
fn packet_event(payload: &[u8]) -> Option<PacketEvent> {
    let mut whole = [0u8; weft_abi::net::EVENT_SIZE];
    let stored = payload.get(..EVENT_SIZE_BEFORE_TTL - STORED_FROM)?;
    whole[STORED_FROM..EVENT_SIZE_BEFORE_TTL].copy_from_slice(stored);
    PacketEvent::read(&whole)
}

/// A `pagecache` record's insertion or removal (its lookups are not
/// played), as the probe wrote it: stored from the header's `cpu` on
/// ([`STORED_FROM`]).
fn page_event(payload: &[u8]) -> Option<PageCacheEvent> {
    let mut whole = [0u8; weft_abi::pagecache::EVENT_SIZE];
    let stored = payload.get(..whole.len() - STORED_FROM)?;
    whole[STORED_FROM..].copy_from_slice(stored);
    PageCacheEvent::read(&whole).filter(|event| event.op != PageOp::Lookup as u32)
}

/// What the checker may know of a capture: the tracepoints of the sources
/// it holds, with the fields it recorded; no kernel types.
struct Recorded<'s>(&'s Sources);

impl Kernel for Recorded<'_> {
    fn tracepoints(&self, category: &str, name: &str) -> Vec<(String, String)> {
        let mut found: Vec<(String, String)> = Vec::new();
        if self.0.switch.is_some()
            && glob_match(category, "sched")
            && glob_match(name, "sched_switch")
        {
            found.push(("sched".into(), "sched_switch".into()));
        }
        if self.0.sched.is_some() && glob_match(category, "sched") {
            for event in WAKEUP_EVENTS.iter().filter(|event| glob_match(name, event)) {
                found.push(("sched".into(), (*event).into()));
            }
        }
        if self.0.block.is_some() && glob_match(category, "block") {
            for event in BLOCK_EVENTS.iter().filter(|event| glob_match(name, event)) {
                found.push(("block".into(), (*event).into()));
            }
        }
        if self.0.net.is_some() && glob_match(category, "net") {
            for event in NET_EVENTS.iter().filter(|event| glob_match(name, event)) {
                found.push(("net".into(), (*event).into()));
            }
        }
        if self.0.pagecache.is_some() && glob_match(category, "filemap") {
            for event in PAGE_EVENTS.iter().filter(|event| glob_match(name, event)) {
                found.push(("filemap".into(), (*event).into()));
            }
        }
        if glob_match(category, APP) {
            for app in self.0.apps.iter().filter(|app| glob_match(name, &app.name)) {
                found.push((APP.into(), app.name.clone()));
            }
        }
        let (calls, held) = (self.0.syscalls.is_some(), self.0.args.is_some());
        if !calls && !held {
            found.sort();
            return found;
        }
        if glob_match(category, "syscalls") {
            for nr in 0..weft_abi::syscall::MAX_SYSCALLS {
                // Without the `syscalls` source, the calls `args` holds.
                let Some(call) = syscall_names::name(nr).filter(|c| calls || held::holds(c)) else {
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
        if calls && glob_match(category, "raw_syscalls") {
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
            ("syscalls", n) if n.starts_with("sys_enter_") => {
                let call = &n["sys_enter_".len()..];
                if self.0.args.is_some() && held::holds(call) {
                    return Ok(format_fields(&(ENTER.to_owned() + &held::format(call))));
                }
                ENTER
            }
            ("syscalls", n) if n.starts_with("sys_exit_") => EXIT,
            ("sched", "sched_switch") if self.0.switch_state => {
                return Ok(format_fields(&(SWITCH.to_owned() + SWITCH_STATE)));
            }
            ("sched", "sched_switch") if self.0.switch.is_some() => SWITCH,
            ("sched", n) if self.0.sched.is_some() && WAKEUP_EVENTS.contains(&n) => WAKEUP,
            ("block", "block_rq_issue") if self.0.block.is_some() => BLOCK_ISSUE,
            ("block", "block_rq_complete") if self.0.block.is_some() => BLOCK_COMPLETE,
            ("net", "netif_receive_skb" | "net_dev_queue") if self.0.net.is_some() => NET,
            ("filemap", n) if self.0.pagecache.is_some() && PAGE_EVENTS.contains(&n) => PAGE,
            (APP, n) => match self.0.apps.iter().find(|app| app.name == n) {
                Some(app) => return Ok(format_fields(&app.format())),
                None => return Err(format!("the capture has no application source {n}")),
            },
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

    fn paths(&self, _: &str) -> Vec<String> {
        Vec::new()
    }

    fn uprobe_functions(&self, path: &str) -> Result<(String, Vec<String>), String> {
        Err(format!("the capture recorded no calls into {path}"))
    }

    fn uprobe_parameters(
        &self,
        path: &str,
        _: &str,
    ) -> Result<Option<weft_oneliner::UserFunction>, String> {
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
