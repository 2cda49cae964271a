//! `weft trace`: bpftrace-style one-liners run. The language lives in
//! `weft-oneliner` and the generic programs in `weft-kernel`; this module
//! resolves a program against the running kernel, loads the programs, and
//! runs the event loop: drain the rings into the program's actions, fire
//! intervals, stop on Ctrl-C, `exit()` or the end of the `-c` command or
//! `-p` process, then print maps and losses.

mod list;
mod past;
mod pcap;
pub(crate) mod process;
mod store;

pub use list::list;

use std::{
    io::Write as _,
    path::PathBuf,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use crate::error::{Context as _, Error, Result, bail};
use weft_kernel::ebpf;
use weft_kernel::oneliner::{
    kcore::Kcore,
    kernel::Kernel,
    probe::{Batch, OUT_OF_REGISTERS, OnelinerProbe, Preload},
};
use weft_oneliner::{
    Event, Flow, OutputFormat, Plan, Runtime, Target, Watch,
    ast::period_ns,
    limits::Limits,
    plan::{KeptStart, KernelAgg, KeyPart, Sample},
    run::helper_errors::Source,
};

use self::{
    process::{HeldChild, Process, Watched},
    store::KeptEvents,
};

/// A one-liner and how to run it.
pub struct Options {
    /// The program's text.
    pub text: String,
    /// Its name in warnings: `stdin`, as bpftrace names `-e`'s program,
    /// or the script's path.
    pub source: String,
    /// bpftrace's `-k` (1) or `-kk` (2): warn where a map helper fails.
    pub helper_errors: u8,
    /// Its positional parameters, `$1`, `$2`, ...
    pub params: Vec<String>,
    /// Whether `system()` may run commands (`--unsafe`).
    pub unsafe_calls: bool,
    /// A command to run (split on blanks, as bpftrace's `-c`): its pid is
    /// `cpid`, and the program stops when it exits.
    pub command: Option<String>,
    /// A running process to end with (bpftrace's `-p`).
    pub pid: Option<u32>,
    pub format: OutputFormat,
    /// Run the program, or only show what it would attach.
    pub action: Action,
    /// Write the program's output to this file (mode 0600) instead of
    /// stdout, as bpftrace's `-o`.
    pub output: Option<PathBuf>,
    /// Say nothing but the program's output and any losses (`-q`).
    pub quiet: bool,
    /// Bytes of each CPU's ring (a power of two).
    pub ring_bytes: u32,
    /// Keep every event whose predicate held in this capture directory.
    pub store: Option<PathBuf>,
    /// Where stacks' and uprobes' symbols come from.
    pub symbols: weft_symbols::Finder,
    /// Run over this capture instead of the running kernel.
    pub from: Option<PathBuf>,
    /// With `from`, over the window kept around this trigger firing
    /// (1-based).
    pub trigger: Option<usize>,
    /// Say the plan on stderr before attaching (bpftrace's `-v`).
    pub verbose: bool,
}

/// What `run` does with the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Trace until Ctrl-C, `exit()` or the end of the command.
    Run,
    /// Print the plan (attach points, fields, what the kernel tests) and
    /// exit without tracing.
    Explain,
    /// Print the probes the program attaches and exit.
    List,
}

/// How often the rings are drained.
const DRAIN: Duration = Duration::from_millis(10);
/// How long an event waits in its ring before it is handled, for those
/// of other CPUs committed late to come before it: a wakeup on one CPU
/// and the switch-in it causes on another are microseconds apart, and
/// were handled out of order when two batches split them.
const HOLD_NS: u64 = 500_000;

/// Runs the one-liner until Ctrl-C, `exit()` or the end of its command,
/// printing to stdout as bpftrace does.
pub fn run(args: Options) -> Result<()> {
    if let Some(from) = &args.from {
        return past::run(&args, from, args.trigger);
    }
    let text = &args.text;
    let ring_bytes = args.ring_bytes;
    // Started before the program is read, to run while it is checked.
    let preload = (args.action == Action::Run && ebpf::check_privileges().is_ok())
        .then(|| Preload::start(ring_bytes))
        .transpose()?;
    let mut plan = resolve(text, &args)?;
    if args.store.is_some() {
        store::copy_all_fields(&mut plan);
    }
    let limits = limits(&mut plan)?;
    let plan = plan;
    if args.action == Action::List {
        let mut names: Vec<String> = plan.attaches.iter().map(|a| a.target.name()).collect();
        names.dedup();
        println!("{}", names.join("\n"));
        return Ok(());
    }
    if args.action == Action::Explain {
        print!("{}", explain(&plan));
        return Ok(());
    }
    let preload = if let Some(preload) = preload {
        preload
    } else {
        // Not started above for lack of privileges: this says so.
        ebpf::check_privileges()?;
        Preload::start(ring_bytes)?
    };
    if args.verbose {
        eprint!("{}", explain(&plan));
    }
    let mut out = output(args.output.as_deref())?;
    let tracefs = ebpf::tracefs()?;
    // The command starts stopped, so that its pid can be tested in the
    // kernel and none of its events come before the probes are attached.
    let mut process = match (args.command.as_deref(), args.pid) {
        (Some(command), _) => Some(Process::Command(HeldChild::spawn(command)?)),
        (None, Some(pid)) => Some(Process::Watched(Watched::open(pid)?)),
        (None, None) => None,
    };
    let cpid = process.as_ref().map_or(0, Process::cpid);
    let mut probe = OnelinerProbe::load(&plan, preload, cpid, args.symbols)?;
    attach(&plan, &mut probe, tracefs, cpid)?;
    let format = args.format;
    if !args.quiet {
        say_attached(format, attached(&plan, &probe), &mut out)?;
    }
    // bpftrace's runtime tests wait for this line to start their workload;
    // with it, weft runs under the same suite.
    if std::env::var_os("__BPFTRACE_NOTIFY_PROBES_ATTACHED").is_some() {
        out.flush()?;
        eprintln!("__BPFTRACE_NOTIFY_PROBES_ATTACHED");
    }
    let source = Source {
        name: args.source.clone(),
        text: text.clone(),
    };
    let warn = (args.helper_errors, source);
    let mut runtime = runtime(&plan, format, limits, cpid, warn, &mut probe)?;
    let mut keep = args
        .store
        .as_deref()
        .map(|dir| KeptEvents::create(dir, &plan))
        .transpose()?;
    let result = event_loop(
        &plan,
        &mut runtime,
        &mut probe,
        &mut keep,
        process.as_mut(),
        &mut *out,
    );
    drop(process);
    // Detach first, so that every event aggregated in the kernel is drained.
    probe.detach();
    let exited = matches!(result, Ok(Flow::Exit));
    let stopped = exited || STOP.load(Ordering::Relaxed);
    drain_rest(
        &mut probe,
        &mut runtime,
        &mut keep,
        &mut *out,
        stopped,
        exited,
    );
    // Tasks stopped for watchpoints no longer set go on.
    runtime.take_watches().iter().for_each(go_on);
    runtime.take_kernel_starts();
    runtime.set_exited(false);
    for index in user_probes(&plan, |t| *t == Target::End) {
        run_end(&plan, index, &mut runtime, &mut probe, &mut keep, &mut out)?;
    }
    runtime.print_all(&mut out)?;
    out.flush()?;
    report_dropped_keys(&runtime, &limits);
    report_losses(&probe, args.quiet)?;
    if let Some(keep) = keep {
        keep.finish(&probe.delivery())?;
    }
    result.map(|_| ())
}

/// Handles the events left in the rings once the probes are detached.
/// After `exit()` or Ctrl-C (`stopped`) they run no command (so a backlog
/// of `system()` calls cannot hold weft); after `exit()` they update the
/// maps and print nothing, as bpftrace's kernel maps count until its
/// probes detach while its output stops.
fn drain_rest(
    probe: &mut OnelinerProbe,
    runtime: &mut Runtime<'_>,
    keep: &mut Option<KeptEvents>,
    out: &mut dyn std::io::Write,
    stopped: bool,
    exited: bool,
) {
    runtime.set_exited(stopped);
    let mut dropped = std::io::sink();
    let rest: &mut dyn std::io::Write = if exited { &mut dropped } else { out };
    // Each drain is a bounded batch: drain until nothing is left.
    while probe
        .drain(u64::MAX, |event| {
            let _ = handle(runtime, keep, event, &mut *rest);
            true
        })
        .events
        > 0
    {}
}

/// Attaches `plan`'s probes; as bpftrace's, a BEGIN the kernel runs runs
/// just before, and its event, the earliest, is handled first once they
/// are (so that its "Tracing..." says the probes are in place).
fn attach(
    plan: &Plan,
    probe: &mut OnelinerProbe,
    tracefs: &std::path::Path,
    cpid: u32,
) -> Result<()> {
    for index in user_probes(plan, |t| *t == Target::Begin) {
        if plan.attaches[index].kernel_run {
            probe.run_in_kernel(index)?;
        }
    }
    Ok(probe.attach(plan, tracefs, cpid)?)
}

/// "Attaching N probes...", as bpftrace says it, once they are: what
/// reads it may take it as so.
fn say_attached(format: OutputFormat, probes: usize, out: &mut dyn std::io::Write) -> Result<()> {
    match format {
        OutputFormat::Text | OutputFormat::Folded => log::info!(
            "Attaching {probes} probe{}...",
            if probes == 1 { "" } else { "s" }
        ),
        OutputFormat::Json => writeln!(
            out,
            "{}",
            weft_oneliner::json::line(
                "attached_probes",
                &weft_oneliner::json::Json::object([(
                    "probes",
                    weft_oneliner::json::Json::int(probes)
                )])
            )
        )?,
    }
    Ok(())
}

/// The limits the environment sets (`BPFTRACE_*`), checked against
/// `plan`. A map size set there is held exactly in weft: the kernel's map
/// of aggregations is shared by every map and cannot count one map's keys.
fn limits(plan: &mut Plan) -> Result<Limits> {
    let limits = Limits::from_env().map_err(Error::Invalid)?;
    plan.set_string_len(limits.slot_len());
    plan.packet_pages = limits.perf_rb_pages;
    if plan.attaches.len() > limits.max_probes {
        bail!(
            "the program attaches {} probes, more than BPFTRACE_MAX_PROBES ({}); set it higher \
             to attach them all (as bpftrace warns, many probes slow the whole system)",
            plan.attaches.len(),
            limits.max_probes
        );
    }
    if limits.map_keys_max != Limits::default().map_keys_max {
        for attach in &mut plan.attaches {
            attach.agg = None;
        }
    }
    Ok(limits)
}

/// Says how many new keys each full map dropped.
fn report_dropped_keys(runtime: &Runtime<'_>, limits: &Limits) {
    for (map, dropped) in runtime.dropped_keys() {
        log::warn!(
            "weft: @{map} was full ({} keys, BPFTRACE_MAP_KEYS_MAX): {dropped} updates of new keys dropped",
            limits.map_keys_max
        );
    }
}

/// Where the program's output goes: `path`, created (or emptied) with
/// mode 0600 as [`crate::output::create`] opens it, and written a line at
/// a time, so that it can be followed; else stdout.
fn output(path: Option<&std::path::Path>) -> Result<Box<dyn std::io::Write>> {
    // `-o -` is stdout, as for every tool that writes a file.
    let Some(path) = path.filter(|p| p.as_os_str() != "-") else {
        return Ok(Box::new(std::io::stdout().lock()));
    };
    let file = crate::output::create(path)?;
    Ok(Box::new(std::io::LineWriter::new(file)))
}

/// One kernel event: run, and kept in the store when its predicate held.
fn handle(
    runtime: &mut Runtime<'_>,
    keep: &mut Option<KeptEvents>,
    event: &Event<'_>,
    out: &mut dyn std::io::Write,
) -> std::io::Result<Flow> {
    let (flow, matched) = runtime.fire(event, out)?;
    if let Some(keep) = keep
        && matched
    {
        keep.append(event);
    }
    Ok(flow)
}

/// Parses `text`, puts `params` in for `$1`, `$2`, ..., and checks it,
/// with errors pointing into it.
fn resolve(text: &str, args: &Options) -> Result<Plan> {
    let render = |e: weft_oneliner::Error| Error::Program(e.render(text));
    let mut program = weft_oneliner::parse::parse_with(text, &args.params).map_err(render)?;
    program.unsafe_calls = args.unsafe_calls;
    program.pid = args.pid;
    program.command = (args.command.as_deref())
        .and_then(|command| command.split_whitespace().next())
        .map(str::to_owned);
    program.all_fields = args.store.is_some();
    let tracefs = ebpf::tracefs()?;
    weft_oneliner::check(program, &Kernel::new(tracefs)).map_err(render)
}

/// Set by SIGINT and SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);
/// Set by SIGUSR1: print the maps now, as bpftrace does, and go on.
static PRINT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(signal: libc::c_int) {
    if signal == libc::SIGUSR1 {
        PRINT.store(true, Ordering::Relaxed);
    } else {
        STOP.store(true, Ordering::Relaxed);
    }
}

fn catch_signals() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
        libc::signal(libc::SIGUSR1, handler);
    }
}

/// Attach points of `plan` whose target satisfies `wanted`.
fn user_probes(plan: &Plan, wanted: impl Fn(&Target) -> bool) -> Vec<usize> {
    plan.attaches
        .iter()
        .enumerate()
        .filter(|(_, a)| wanted(&a.target))
        .map(|(i, _)| i)
        .collect()
}

/// An event of a probe that fires in weft itself (BEGIN, END, interval).
fn user_event(attach: usize) -> Event<'static> {
    // SAFETY: getuid, getgid and sched_getcpu have no preconditions.
    let (uid, gid, cpu) = unsafe { (libc::getuid(), libc::getgid(), libc::sched_getcpu()) };
    let pid = std::process::id();
    Event {
        attach,
        ns: weft_store::now_ns(),
        pid,
        tid: pid,
        uid,
        gid,
        cpu: u32::try_from(cpu).unwrap_or(0),
        comm: b"weft",
        ..Event::default()
    }
}

/// Runs END attach point `index`, the probes detached: in weft, or where
/// it reads the kernel, in the kernel, its event then handled as any
/// probe's.
fn run_end(
    plan: &Plan,
    index: usize,
    runtime: &mut Runtime<'_>,
    probe: &mut OnelinerProbe,
    keep: &mut Option<KeptEvents>,
    mut out: &mut dyn std::io::Write,
) -> Result<Flow> {
    if !plan.attaches[index].kernel_run {
        return Ok(runtime.event(&user_event(index), &mut out)?);
    }
    probe.run_in_kernel(index)?;
    // Its event is in the rings now, and nothing attached sends others.
    let mut flow = Ok(Flow::Continue);
    probe.drain(u64::MAX, |event| {
        flow = handle(runtime, keep, event, &mut out);
        matches!(flow, Ok(Flow::Continue))
    });
    Ok(flow?)
}

/// The runtime of `plan`'s actions, reading what `probe` keeps.
/// `helper_errors` is `-k`'s count and the program's text and name.
fn runtime<'p>(
    plan: &'p Plan,
    format: OutputFormat,
    limits: Limits,
    cpid: u32,
    (helper_errors, source): (u8, Source),
    probe: &mut OnelinerProbe,
) -> Result<Runtime<'p>> {
    let mut runtime = Runtime::new(plan, format, weft_store::now_ns());
    runtime.set_limits(limits);
    runtime.set_cpid(cpid);
    runtime.set_helper_errors(helper_errors, source);
    runtime.set_names(Box::new(probe.names()));
    runtime.set_kernel_memory(Box::<Kcore>::default());
    runtime.set_kernel_aggs(Box::new(probe.aggs()?));
    runtime.set_packets(Box::<pcap::PcapFiles>::default());
    Ok(runtime)
}

/// The probes attached, as bpftrace counts them: a watchpoint on a
/// function's argument is its uprobe until a call sets it.
fn attached(plan: &Plan, probe: &OnelinerProbe) -> usize {
    let set_later = (plan.attaches.iter())
        .filter(|a| matches!(a.target, Target::WatchArg { .. }))
        .count();
    plan.attaches.len() - set_later - probe.left_out()
}

/// Sets the watchpoints functions' calls asked for
/// (`watchpoint:FUNCTION+argN`), each then letting its stopped task go on,
/// as bpftrace does; one the CPU has no register for is said so in the
/// output, as bpftrace says it, and the task goes on all the same.
fn set_watches(
    runtime: &mut Runtime<'_>,
    probe: &mut OnelinerProbe,
    out: &mut dyn std::io::Write,
) -> Result<()> {
    for watch in runtime.take_watches() {
        match probe.watch(watch.attach, watch.address) {
            Ok(true) => {}
            Ok(false) => writeln!(out, "{OUT_OF_REGISTERS}")?,
            Err(error) => eprintln!("weft: {error:#}"),
        }
        go_on(&watch);
    }
    Ok(())
}

/// Lets the task the kernel stopped for `watch` go on.
fn go_on(watch: &Watch) {
    if let Some(pid) = watch.stopped.and_then(|pid| i32::try_from(pid).ok()) {
        // SAFETY: kill has no memory preconditions. The process may have
        // ended meanwhile, which is no error here.
        unsafe { libc::kill(pid, libc::SIGCONT) };
    }
}

/// Runs until Ctrl-C, `exit()` or the end of the `-c` command or `-p`
/// process; BEGIN first, where weft runs it (the kernel ran its own).
fn event_loop(
    plan: &Plan,
    runtime: &mut Runtime<'_>,
    probe: &mut OnelinerProbe,
    keep: &mut Option<KeptEvents>,
    mut process: Option<&mut Process>,
    mut out: &mut dyn std::io::Write,
) -> Result<Flow> {
    catch_signals();
    for index in user_probes(plan, |t| *t == Target::Begin) {
        if !plan.attaches[index].kernel_run
            && runtime.event(&user_event(index), &mut out)? == Flow::Exit
        {
            return Ok(Flow::Exit);
        }
    }
    if let Some(process) = &process {
        process.release();
    }
    let start = weft_store::now_ns();
    let mut intervals: Vec<(usize, u64, u64)> =
        user_probes(plan, |t| matches!(t, Target::Interval { .. }))
            .into_iter()
            .filter(|&i| !plan.attaches[i].kernel_run)
            .map(|i| {
                let Target::Interval { unit, n } = plan.attaches[i].target else {
                    unreachable!("filtered")
                };
                let period_ns = period_ns(unit, n);
                (i, period_ns, start + period_ns)
            })
            .collect();
    // Whether the last wait saw no events.
    let mut idle = true;
    if plan
        .attaches
        .iter()
        .any(|a| matches!(a.target, Target::Iter { .. }))
    {
        return iterate(probe, runtime, keep, out);
    }
    loop {
        // Events and intervals are taken up to HOLD ago: a record on one
        // CPU may be committed after a later one on another.
        let until = weft_store::now_ns().saturating_sub(HOLD_NS);
        let (batch, mut flow) = drain_events(probe, until, runtime, keep, &mut out)?;
        for address in runtime.take_unwatched() {
            probe.unwatch(address);
        }
        set_watches(runtime, probe, &mut out)?;
        let drained = batch.events;
        if let Some(keep) = keep.as_mut().filter(|_| drained > 0) {
            keep.publish();
        }
        for (index, period, next) in &mut intervals {
            if flow == Flow::Continue && until >= *next {
                *next += *period;
                flow = runtime.event(&user_event(*index), &mut out)?;
            }
        }
        if PRINT.swap(false, Ordering::Relaxed) {
            runtime.print_maps(&mut out)?;
        }
        out.flush()?;
        if flow == Flow::Exit {
            return Ok(Flow::Exit);
        }
        // Events the process made before it exited are drained after the
        // probes are detached.
        let ended = process.as_mut().is_some_and(|p| p.ended());
        if ended || STOP.load(Ordering::Relaxed) {
            return Ok(Flow::Continue);
        }
        // While events keep coming, drain again at once: rings fill in
        // milliseconds at millions of events a second.
        if drained > 0 {
            idle = false;
            continue;
        }
        let timeout = intervals
            .iter()
            .map(|(_, _, next)| Duration::from_nanos(next.saturating_sub(until)))
            .min()
            .unwrap_or(DRAIN)
            .min(DRAIN);
        if let Some(held) = batch.held {
            // The rings hold events, so a wait on them would return at
            // once: sleep, after a quiet spell only until the oldest is
            // HOLD old, so that it is shown at once.
            let ripe = Duration::from_nanos(held.saturating_sub(until));
            std::thread::sleep(if idle { ripe.min(timeout) } else { timeout });
            idle = true;
        } else if idle {
            // The first event after a quiet spell is shown at once.
            probe.wait(timeout);
        } else {
            // Events came lately: sleep, so that they are taken in batches
            // rather than with a wake-up each.
            std::thread::sleep(timeout);
            idle = true;
        }
    }
}

/// Runs the program's iterator over every object, handling their events
/// as they come, until it has been over them all, the program exits or
/// weft is stopped.
fn iterate(
    probe: &mut OnelinerProbe,
    runtime: &mut Runtime<'_>,
    keep: &mut Option<KeptEvents>,
    mut out: &mut dyn std::io::Write,
) -> Result<Flow> {
    loop {
        let more = probe.iterate()?;
        // One CPU ran them all, in order: nothing to wait for.
        loop {
            let (batch, flow) = drain_events(probe, u64::MAX, runtime, keep, &mut out)?;
            if flow == Flow::Exit {
                return Ok(Flow::Exit);
            }
            if batch.events == 0 {
                break;
            }
        }
        out.flush()?;
        if !more || STOP.load(Ordering::Relaxed) {
            return Ok(Flow::Continue);
        }
    }
}

/// Hands the events up to `until` to the program: the batch, and whether
/// the program asked to exit.
fn drain_events(
    probe: &mut OnelinerProbe,
    until: u64,
    runtime: &mut Runtime<'_>,
    keep: &mut Option<KeptEvents>,
    mut out: &mut dyn std::io::Write,
) -> Result<(Batch, Flow)> {
    let mut flow = Flow::Continue;
    let mut failure = None;
    let batch = probe.drain(until, |event| {
        match handle(runtime, keep, event, &mut out) {
            Ok(f) => {
                flow = f;
                // Ctrl-C ends a batch too: the rest is drained after.
                f == Flow::Continue && !STOP.load(Ordering::Relaxed)
            }
            Err(e) => {
                failure = Some(e);
                false
            }
        }
    });
    match failure {
        Some(e) => Err(e).context("failed to write the output"),
        None => Ok((batch, flow)),
    }
}

/// The last line: events delivered and lost.
/// With `quiet`, only a loss is reported.
fn report_losses(probe: &OnelinerProbe, quiet: bool) -> Result<()> {
    let delivery = probe.delivery();
    let aggregated = probe.aggregated();
    if aggregated > 0 && !quiet {
        log::info!("weft: {aggregated} of the events aggregated in the kernel");
    }
    let packets_lost = probe.packets_lost();
    if packets_lost > 0 {
        log::warn!(
            "weft: {packets_lost} packets of skboutput() lost (the kernel's buffer of them was \
             full, or their events were)"
        );
    }
    let starts_lost = probe.starts_lost();
    if starts_lost > 0 {
        log::warn!("weft: {starts_lost} start times lost (the kernel's map of them was full)");
    }
    if delivery.skipped > 0 {
        log::warn!(
            "weft: {} events lost unseen: the kernel ran no probe for them, as another BPF \
             program or a bpf() call on a map was under way on their CPU",
            delivery.skipped
        );
    }
    if delivery.ring_full > 0 || !quiet {
        log::info!(
            "weft: {} events, {} lost (ring full)",
            delivery.received,
            delivery.ring_full
        );
    }
    delivery.report_mismatch("trace");
    if probe.malformed() > 0 {
        bail!("{} malformed trace records", probe.malformed());
    }
    Ok(())
}

/// What a probe does with a start time the kernel keeps.
fn kept_start(plan: &Plan, start: &KeptStart) -> String {
    match *start {
        KeptStart::Store { map, key, send } => format!(
            "stores nsecs as @{}[{key}]{}",
            plan.maps[map].name,
            if send { "" } else { ", sending no events" }
        ),
        KeptStart::Take {
            map,
            key,
            required,
            delete,
        } => format!(
            "takes @{}[{key}] into the event{}{}",
            plan.maps[map].name,
            if required {
                ", dropping it where there is none"
            } else {
                ""
            },
            if delete { ", and deletes it" } else { "" }
        ),
    }
}

/// An aggregation kept in the kernel, as `@map[keys] = kind(sample)`.
fn described(plan: &Plan, agg: &KernelAgg) -> String {
    let keys: Vec<String> = agg
        .keys
        .iter()
        .map(|part| match part {
            KeyPart::Comm => "comm".to_owned(),
            KeyPart::Probe => "probe".to_owned(),
            KeyPart::Func => "func".to_owned(),
            KeyPart::Int(subject) => subject.to_string(),
        })
        .collect();
    let keys = if keys.is_empty() {
        String::new()
    } else {
        format!("[{}]", keys.join(", "))
    };
    let sample = match agg.sample {
        None => String::new(),
        Some(Sample::Const(n)) => n.to_string(),
        Some(Sample::Int(subject)) => subject.to_string(),
        Some(Sample::Elapsed { divisor: 1 }) => "nsecs - start".to_owned(),
        Some(Sample::Elapsed { divisor }) => format!("(nsecs - start) / {divisor}"),
    };
    format!(
        "@{}{keys} = {}({sample})",
        plan.maps[agg.map].name,
        agg.kind.function()
    )
}

/// How the kernel runs a probe on `target`, for `--explain`.
fn kernel_program(target: &Target) -> &'static str {
    match target {
        Target::Tracepoint { .. } => {
            "weft_oneliner_tracepoint_wN (words of the record's first N bytes loaded in place, N as long as the record allows), perf event linked with a cookie"
        }
        Target::Kprobe { .. } => "weft_oneliner_kprobe, perf event linked with a cookie",
        Target::Uprobe { .. } => "weft_oneliner_uprobe/uretprobe, attached with a cookie",
        Target::Usdt { .. } => {
            "weft_oneliner_uprobe, uprobe perf event at the site (its semaphore counted) linked with a cookie"
        }
        Target::Profile { .. } => "weft_oneliner_perf, one CPU clock event per CPU with a cookie",
        Target::PerfEvent { .. } => "weft_oneliner_perf, one perf event per CPU with a cookie",
        Target::Watchpoint { .. } => {
            "weft_oneliner_perf, a breakpoint perf event on the watched process (per CPU without one) with a cookie"
        }
        Target::WatchArg { .. } => {
            "weft_oneliner_perf, a breakpoint perf event on the watched process, set where a call of the function asks (its uprobe below), with a cookie"
        }
        Target::Fentry { .. } => "a copy of weft_oneliner_fentry/fexit loaded for this function",
        Target::Iter { .. } => {
            "weft_oneliner_iter_KIND, run by weft's reads of its iterator, 32 objects a read"
        }
        Target::Interval { .. } => "weft_oneliner_perf, one CPU clock event on CPU 0 with a cookie",
        Target::Begin | Target::End => {
            "a copy of weft_oneliner_raw_tp, run once in weft's thread (BPF_PROG_TEST_RUN)"
        }
        Target::RawTracepoint { .. } => "a copy of weft_oneliner_raw_tp",
    }
}

/// Where each part of the program runs.
fn explain(plan: &Plan) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    for (index, attach) in plan.attaches.iter().enumerate() {
        let _ = writeln!(out, "probe {index}: {}", attach.target.name());
        if !attach.in_kernel() {
            let _ = writeln!(out, "  runs in weft (no kernel program)");
            continue;
        }
        let how = if attach.hook == weft_oneliner::plan::Hook::Raw {
            "a copy of weft_oneliner_raw_tp on the raw tracepoint of the same name (the program reads only what it holds)"
        } else {
            kernel_program(&attach.target)
        };
        let _ = writeln!(out, "  kernel program: {how}");
        let mut tests: Vec<String> = attach.filters.iter().map(ToString::to_string).collect();
        if let Some(comm) = &attach.comm {
            tests.push(format!("comm == \"{comm}\""));
        }
        if !tests.is_empty() {
            let _ = writeln!(out, "  kernel tests: {}", tests.join(" and "));
        }
        if let Some(start) = &attach.start {
            let _ = writeln!(
                out,
                "  kernel keeps start times: {}",
                kept_start(plan, start)
            );
            if matches!(start, KeptStart::Store { send: false, .. }) {
                continue;
            }
        }
        if let Some(agg) = &attach.agg {
            let _ = writeln!(
                out,
                "  kernel aggregates: {}, sending no events; weft reads the kernel's map to print it",
                described(plan, agg)
            );
            continue;
        }
        let strings: Vec<&str> = attach.strings.iter().map(|f| f.name.as_str()).collect();
        let stacks = match (attach.kstack, attach.ustack) {
            (true, true) => "; kernel and user stacks",
            (true, false) => "; kernel stack",
            (false, true) => "; user stack",
            (false, false) => "",
        };
        let join = attach.join.as_ref().map_or_else(String::new, |f| {
            format!("; the strings of array {}", f.name)
        });
        let mut reads = String::new();
        for (field, map) in &attach.saves {
            let _ = write!(
                reads,
                "; keeps pointer {} for the thread (@{})",
                field.name, plan.maps[*map].name
            );
        }
        for map in &attach.saved {
            let _ = write!(
                reads,
                "; the string of @{}'s pointer kept for the thread",
                plan.maps[*map].name
            );
        }
        for read in &attach.reads {
            let _ = write!(reads, "; {read}");
        }
        let _ = writeln!(
            out,
            "  kernel copies: task ids, comm, time, cpu; {} context bytes; strings [{}]{reads}{join}{stacks}",
            attach.raw_len,
            strings.join(", ")
        );
        let _ = writeln!(
            out,
            "  weft runs: {}the actions",
            if plan.program.items[attach.item].predicate.is_some() {
                "the whole predicate, then "
            } else {
                ""
            }
        );
    }
    out
}
