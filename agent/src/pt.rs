//! `weft pt ...`: Intel PT on the command line, over the `weft-pt` crate.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use weft_pt::Errata;
use weft_pt::calls::{Call, Calls, Listing, Profile};
use weft_pt::dump::TimeColumn;
use weft_pt::flow::{Event, Flow, Step};
use weft_pt::image::Image;
use weft_pt::perf::{PerfData, PtInfo, Queue, Switch, TimeConv};
use weft_pt::pevent::{self, Channel};
use weft_pt::sideband::{Format, Note, Sideband};
use weft_pt::threads::{Clock, Router, Stretches, Threads};
use weft_pt::time::Clocks;

use crate::cli::{
    PtCallsArgs, PtCommand, PtDumpArgs, PtFlowArgs, PtFlowShowArgs, PtPerfArgs, SidebandArgs,
};

pub fn run(command: &PtCommand) -> anyhow::Result<ExitCode> {
    match command {
        PtCommand::Dump(args) => dump(args),
        PtCommand::Flow(args) => flow(args),
        PtCommand::Calls(args) => calls(args),
        PtCommand::Record(args) => crate::pt_record::record(args),
        PtCommand::Import(args) => {
            eprintln!("weft: {}", crate::live::client::import(&args.capture)?);
            Ok(ExitCode::SUCCESS)
        }
        PtCommand::Perf(args) => perf(args),
    }
}

fn read_trace(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

fn dump(args: &PtDumpArgs) -> anyhow::Result<ExitCode> {
    let trace = read_trace(&args.trace)?;
    let column = TimeColumn {
        delta: args.time.time_delta,
        relative: args.time.no_wall_clock,
    };
    let options = weft_pt::dump::Options {
        offsets: !args.no_offset,
        sync: !args.no_sync,
        errata: args.cpu.map(Errata::for_cpu).unwrap_or_default(),
        time: args.time.time.then_some(column),
        tcal: args.time.tcal.then_some(column),
        clocks: args.clocks.clocks(),
        raw: args.raw,
        last_ip: args.lastip,
        exec_mode: args.exec_mode,
    };
    let mut session = sideband(&args.sideband)?;
    let session = session.as_mut().map(|(s, format)| (s, *format));
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let errors = weft_pt::dump::dump_with(&trace, options, session, &mut out)?;
    out.flush()?;
    Ok(finish(&args.trace, errors))
}

/// The sideband session the options ask for, and how to show it; `None`
/// without `--pevent-primary` or `--pevent-secondary`.
fn sideband(args: &SidebandArgs) -> anyhow::Result<Option<(Sideband<'static>, Format)>> {
    let config = pevent::Config {
        sample_type: args.pevent_sample_type,
        sample_types: Vec::new(),
        time_zero: args.pevent_time_zero,
        time_shift: args.pevent_time_shift,
        time_mult: args.pevent_time_mult,
        tsc_offset: args.pevent_tsc_offset,
    };
    let files = args.pevent_primary.iter().map(|f| (f, true));
    let files = files.chain(args.pevent_secondary.iter().map(|f| (f, false)));
    let mut channels = Vec::new();
    for (path, primary) in files {
        let file = read_trace(path)?;
        let name = path.display().to_string();
        channels.push(Channel::new(&name, file, config.clone(), primary));
    }
    if channels.is_empty() {
        return Ok(None);
    }
    // Mapped files as the records name them, under the sysroot if given.
    let root = args.pevent_sysroot.clone();
    let read = move |name: &str| match &root {
        Some(root) => std::fs::read(root.join(name.trim_start_matches('/'))),
        None => std::fs::read(name),
    };
    let session = Sideband::new(channels, Box::new(read))
        .with_kernel_start(args.pevent_kernel_start.unwrap_or(u64::MAX));
    let format = Format {
        compact: args.sb_compact,
        verbose: args.sb_verbose,
        filename: args.sb_filename,
        offset: args.sb_offset,
        time: args.sb_time,
        switches: args.sb_switch,
        warnings: args.sb_warn,
    };
    Ok(Some((session, format)))
}

/// How `weft pt flow` and `calls` decode: the CPU's errata, the capture's
/// address filter, and whether to resync after an error.
#[derive(Default)]
struct Decoding {
    errata: Errata,
    filter: Vec<(u64, u64)>,
    resync: bool,
}

impl Decoding {
    fn of(args: &PtFlowArgs) -> Self {
        Decoding {
            errata: args.cpu.map(Errata::for_cpu).unwrap_or_default(),
            filter: args.addr_filter.clone(),
            resync: args.resync_on_error,
        }
    }

    /// The flow of `trace` over `image`, timed with `clocks`.
    fn flow<'a>(&self, trace: &'a [u8], image: &'a Image, clocks: Clocks) -> Flow<'a> {
        Flow::new(trace, image, self.errata)
            .with_clocks(clocks)
            .with_filter(self.filter.clone())
            .with_resync(self.resync)
    }
}

fn flow(show: &PtFlowShowArgs) -> anyhow::Result<ExitCode> {
    let args = &show.flow;
    let decoding = Decoding::of(args);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut insns = 0u64;
    let mut session = sideband(&show.sideband)?;
    if session.is_some() && (args.perf || args.trace.is_dir()) {
        anyhow::bail!(
            "{}: --pevent-primary and --pevent-secondary go with a raw trace; a perf.data \
             file or a capture brings its own sideband",
            args.trace.display()
        );
    }
    let format = session.as_ref().map(|(_, f)| *f).unwrap_or_default();
    // A step as the options show it, counting instructions for --stat.
    let mut print = |out: &mut dyn Write, step: &Step| {
        insns += u64::from(matches!(step, Step::Insn { .. }));
        if !step.shown_by_ptxed(format, show.quiet) {
            return Ok(());
        }
        let step = step.ptxed(show.event_ips).with_times(show.event_times);
        writeln!(out, "{}", step.with_sideband(format))
    };
    let errors = each_input(args, &mut |input| {
        input.title(&mut out)?;
        // The recording's clocks time the steps that say which thread ran.
        let clocks = input.clocks(Clocks::default());
        let mut flow = decoding
            .flow(input.trace, input.image, clocks)
            .with_iflags(show.iflags)
            .with_ticks(show.event_ticks);
        if let Some((session, _)) = session.take() {
            flow = flow.with_sideband(session);
        }
        let Some(threads) = input.threads else {
            return walk(&mut flow, &mut |step| print(&mut out, &step));
        };
        let code_at = |tsc| threads.code_at(tsc);
        let mut flow = flow.with_code_at(&code_at);
        let (mut router, mut last, mut failed) = (Router::default(), None, None);
        let errors = walk(&mut flow, &mut |step| {
            router.step(threads, step, &mut |thread, step| {
                let title = (last != Some(thread) && !show.quiet)
                    .then(|| thread_title(input.comms, thread.pid, thread.tid));
                last = Some(thread);
                let written = title.map_or(Ok(()), |t| writeln!(out, "{t}"));
                if let Err(e) = written.and_then(|()| print(&mut out, &step)) {
                    failed.get_or_insert(e);
                }
            });
            failed.take().map_or(Ok(()), Err)
        })?;
        Ok(errors)
    })?;
    if show.stat {
        // ptxed's spelling.
        writeln!(out, "insn: {insns}.")?;
    }
    out.flush()?;
    Ok(finish(&args.trace, errors))
}

fn calls(args: &PtCallsArgs) -> anyhow::Result<ExitCode> {
    let decoding = Decoding::of(&args.flow);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // Threads of per-CPU traces, put together over all CPUs.
    let mut stretches = Stretches::default();
    let mut cpu = 0;
    let errors = each_input(&args.flow, &mut |input| {
        input.title(&mut out)?;
        let (trace, image) = (input.trace, input.image);
        let clocks = input.clocks(args.clocks.clocks());
        // Times in ns where the recording says how TSC maps to time.
        let ns = |call: Call| match input.clock {
            Some(clock) => call.with_clock(|tsc| clock.ns(tsc)),
            None => call,
        };
        if let Some(threads) = input.threads {
            let mut section = |pid, tid, image: &Image, made: Vec<Call>| {
                writeln!(out, "{}", thread_title(input.comms, pid, tid))?;
                thread_section(image, &made, input.clock, args.summary, &mut out)
            };
            let ends = (&mut stretches, &mut cpu);
            let how = (&decoding, clocks);
            return by_thread(how, &input, threads, ends, &ns, &mut section);
        }
        let mut flow = decoding.flow(trace, image, clocks);
        let unit = input.clock.map(|_| "ns");
        let mut calls = Calls::new(image);
        if args.summary {
            let mut profile = Profile::default();
            let errors = walk(&mut flow, &mut |step| {
                calls.step(&step, &mut |call| profile.add(&ns(call)));
                Ok(())
            })?;
            summary(image, &profile, unit, &mut out)?;
            return Ok(errors);
        }
        let mut listing = listing(image, &mut out, input.clock)?;
        let mut failed = None;
        let errors = walk(&mut flow, &mut |step| {
            calls.step(&step, &mut |call| {
                if let Err(e) = listing.line(&ns(call)) {
                    failed.get_or_insert(e);
                }
            });
            failed.take().map_or(Ok(()), Err)
        })?;
        listing.flush()?;
        Ok(errors)
    })?;
    out.flush()?;
    Ok(finish(&args.flow.trace, errors))
}

/// A call listing in the recording's unit; monotonic times are absolute,
/// as `weft record`'s captures give them.
fn listing<'a>(
    image: &'a Image,
    out: &'a mut dyn Write,
    clock: Option<Clock>,
) -> std::io::Result<Listing<'a>> {
    let listing = Listing::new(image, out, clock.map(|_| "ns"))?;
    Ok(match clock {
        Some(Clock::Monotonic(_)) => listing.absolute(),
        _ => listing,
    })
}

/// What a thread's calls are called with: its process, its thread, its
/// process's code and its calls.
type ThreadCalls<'a> = dyn FnMut(i32, i32, &Image, Vec<Call>) -> std::io::Result<()> + 'a;

/// Routes the steps of `input`, one CPU's trace, to the threads that ran
/// them (`stretches`, with `cpu` the number of traces routed so far); after
/// the last, hands `out` each thread's calls, each thread with its own
/// call stack. Returns the decoding errors met.
fn by_thread(
    (decoding, clocks): (&Decoding, Clocks),
    input: &Input,
    threads: &Threads,
    (stretches, cpu): (&mut Stretches, &mut usize),
    ns: &dyn Fn(Call) -> Call,
    out: &mut ThreadCalls,
) -> anyhow::Result<usize> {
    let code_at = |tsc| threads.code_at(tsc);
    let mut flow = decoding
        .flow(input.trace, input.image, clocks)
        .with_code_at(&code_at);
    let mut router = Router::default();
    let errors = walk(&mut flow, &mut |step| {
        router.step(threads, step, &mut |thread, step| {
            stretches.push(*cpu, thread, step);
        });
        Ok(())
    })?;
    *cpu += 1;
    if !input.last {
        return Ok(errors);
    }
    for ((pid, tid), steps) in std::mem::take(stretches).threads() {
        let image = threads.image(pid);
        let mut calls = Calls::new(image);
        let mut made = Vec::new();
        for step in &steps {
            calls.step(step, &mut |call| made.push(ns(call)));
        }
        out(pid, tid, image, made)?;
    }
    Ok(errors)
}

/// One thread's calls: a call listing, or with `summary_only` a profile.
fn thread_section(
    image: &Image,
    made: &[Call],
    clock: Option<Clock>,
    summary_only: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if summary_only {
        let mut profile = Profile::default();
        for call in made {
            profile.add(call);
        }
        return summary(image, &profile, clock.map(|_| "ns"), out);
    }
    let mut listing = listing(image, out, clock)?;
    for call in made {
        listing.line(call)?;
    }
    listing.flush()
}

/// Decodes the `weft pt record` capture in `dir` into calls timed in
/// `CLOCK_MONOTONIC` ns, as `weft record` stores them: `out` gets each
/// thread's process, thread (0 where the capture has no context switches
/// to tell), code and calls. Returns the decoding errors met.
pub fn capture_calls(dir: &std::path::Path, out: &mut ThreadCalls) -> anyhow::Result<usize> {
    let args = PtFlowArgs {
        trace: dir.to_owned(),
        image: Vec::new(),
        maps: None,
        cpu: None,
        addr_filter: Vec::new(),
        resync_on_error: false,
        perf: false,
        pid: None,
        symbols: crate::cli::SymbolArgs {
            debug_dir: Vec::new(),
            no_demangle: false,
        },
    };
    let decoding = Decoding::of(&args);
    let (mut stretches, mut cpu) = (Stretches::default(), 0);
    each_cpu(&args, &mut |input| {
        let Some(clock) = input.clock else {
            anyhow::bail!(
                "{}: the capture has no clock readings: its calls cannot be placed in time",
                dir.display()
            );
        };
        let ns = |call: Call| call.with_clock(|tsc| clock.ns(tsc));
        let clocks = input.clocks(Clocks::default());
        if let Some(threads) = input.threads {
            let ends = (&mut stretches, &mut cpu);
            return by_thread((&decoding, clocks), &input, threads, ends, &ns, out);
        }
        // One process's trace without the switches: its threads are not
        // told apart.
        let mut flow = decoding.flow(input.trace, input.image, clocks);
        let mut calls = Calls::new(input.image);
        let mut made = Vec::new();
        let errors = walk(&mut flow, &mut |step| {
            calls.step(&step, &mut |call| made.push(ns(call)));
            Ok(())
        })?;
        out(input.process.unwrap_or_default(), 0, input.image, made)?;
        Ok(errors)
    })
}

/// `[thread TID (COMM), process PID]`.
fn thread_title(comms: Option<&HashMap<i32, String>>, pid: i32, tid: i32) -> String {
    let comm = comms.and_then(|c| c.get(&tid)).map_or("?", String::as_str);
    format!("[thread {tid} ({comm}), process {pid}]")
}

/// A trace to decode and the code it ran; from a perf.data file, one per
/// AUX queue, and from a capture directory, one per CPU, titled.
struct Input<'a> {
    title: Option<String>,
    trace: &'a [u8],
    image: &'a Image,
    /// How the trace's TSC becomes time, when the recording says.
    clock: Option<Clock>,
    /// The clocks the recording says it was made with (zero where it
    /// does not say).
    recorded: Option<Clocks>,
    /// Who ran when, for one CPU's trace of several threads.
    threads: Option<&'a Threads<'a>>,
    /// Thread names, by thread id, where the recording has them.
    comms: Option<&'a HashMap<i32, String>>,
    /// The recording's last trace (per-CPU traces of threads are put
    /// together after it).
    last: bool,
    /// The process a capture directory traced, when one.
    process: Option<i32>,
}

impl Input<'_> {
    fn title(&self, out: &mut dyn Write) -> std::io::Result<()> {
        match &self.title {
            Some(title) => writeln!(out, "[{title}]"),
            None => Ok(()),
        }
    }

    /// `given`, with what the recording says where `given` says nothing.
    fn clocks(&self, mut given: Clocks) -> Clocks {
        if let Some(recorded) = self.recorded {
            if given.mtc_freq == 0 {
                given.mtc_freq = recorded.mtc_freq;
            }
            if given.ctc_eax == 0 && given.ctc_ebx == 0 {
                (given.ctc_eax, given.ctc_ebx) = (recorded.ctc_eax, recorded.ctc_ebx);
            }
            if given.nom_freq == 0 {
                given.nom_freq = recorded.nom_freq;
            }
        }
        given
    }
}

/// Hands `decode` each trace of `args` with its code, and sums the
/// decoding errors it counts. A perf.data queue's trace is put together
/// only when its turn comes, and each process's code is read once.
fn each_input(
    args: &PtFlowArgs,
    decode: &mut dyn FnMut(Input) -> anyhow::Result<usize>,
) -> anyhow::Result<usize> {
    if args.trace.is_dir() {
        return each_cpu(args, decode);
    }
    let file = read_trace(&args.trace)?;
    if !args.perf {
        return decode(Input {
            title: None,
            trace: &file,
            image: &read_image(args)?,
            clock: None,
            recorded: None,
            threads: None,
            comms: None,
            last: true,
            process: None,
        });
    }
    let name = args.trace.display();
    let perf = PerfData::parse(&file).with_context(|| name.to_string())?;
    if perf.queues.is_empty() {
        anyhow::bail!("{name}: no Intel PT trace (no AUXTRACE records)");
    }
    let clock = perf.clock();
    // A per-CPU queue (`perf record -a`) is split between threads by the
    // switch records when the file has them and says how TSC maps to
    // their time; without, --pid names the one process to decode.
    let switches: Vec<Option<(Vec<Switch>, TimeConv)>> = perf
        .queues
        .iter()
        .map(|queue| {
            let on = perf.switches_on(u32::try_from(queue.cpu).ok()?);
            (!on.is_empty()).then_some(on).zip(clock)
        })
        .collect();
    let mut pids = BTreeSet::new();
    for (queue, switches) in perf.queues.iter().zip(&switches) {
        match switches {
            Some((on, _)) => pids.extend(on.iter().map(|s| s.pid).filter(|p| *p > 0)),
            None if queue.cpu >= 0 => {
                pids.insert(args.pid.with_context(|| {
                    format!(
                        "{name}: the trace is per CPU (perf record -a) without context-switch \
                         records: name the process whose code to decode with --pid"
                    )
                })?);
            }
            None => {
                pids.insert(perf.pid_of(queue.tid).unwrap_or(queue.tid));
            }
        }
    }
    let mut images = HashMap::new();
    for pid in pids {
        let mut image = Image::with_finder(args.symbols.finder());
        let skipped = image.add_mappings(perf.mappings(pid), &mut |path| std::fs::read(path))?;
        warn_skipped(skipped);
        images.insert(pid, image);
    }
    let none = Image::new();
    // The last name each thread had.
    let comms: HashMap<i32, String> = perf.comms.iter().map(|c| (c.tid, c.comm.clone())).collect();
    let mut errors = 0;
    let count = perf.queues.len();
    for (i, (queue, switches)) in perf.queues.iter().zip(switches).enumerate() {
        let threads = switches.map(|(switches, conv)| Threads {
            switches,
            clock: Clock::Perf(conv),
            images: &images,
            none: &none,
        });
        let image = match (&threads, queue.cpu >= 0) {
            (Some(_), _) => &none,
            (None, true) => &images[&args.pid.unwrap_or_default()],
            (None, false) => &images[&perf.pid_of(queue.tid).unwrap_or(queue.tid)],
        };
        errors += decode(Input {
            title: Some(queue_title(&perf, queue)),
            trace: &queue.trace(&file),
            image,
            clock: clock.map(Clock::Perf),
            recorded: perf.info.as_ref().map(PtInfo::clocks),
            threads: threads.as_ref(),
            comms: Some(&comms),
            last: i + 1 == count,
            process: None,
        })?;
    }
    Ok(errors)
}

/// Hands `decode` each CPU's trace of a `weft pt record` capture, with the
/// code of the process it traced (or that `--image` and `--maps` give).
fn each_cpu(
    args: &PtFlowArgs,
    decode: &mut dyn FnMut(Input) -> anyhow::Result<usize>,
) -> anyhow::Result<usize> {
    let saved = weft_pt_capture::dir::load(&args.trace)?;
    let name = args.trace.display();
    // The code of each process the capture kept, or what the command
    // line gives for the traced one.
    let images: HashMap<i32, Image> = if args.image.is_empty() && args.maps.is_none() {
        if saved.maps.is_empty() {
            anyhow::bail!(
                "{name}: the capture kept no process's maps: give the code with --image or --maps"
            );
        }
        saved
            .maps
            .iter()
            .map(|(pid, maps)| {
                let image = Image::with_finder(args.symbols.finder());
                Ok((*pid, maps_image(image, maps, &saved.build_ids)?))
            })
            .collect::<anyhow::Result<_>>()?
    } else {
        HashMap::from([(saved.pid.unwrap_or_default(), read_image(args)?)])
    };
    // Without the context switches, a trace is decoded with the code of
    // the one process it traced.
    let process = match (saved.pid, images.len()) {
        (Some(pid), _) => Some(pid),
        (None, 1) => images.keys().next().copied(),
        (None, _) => None,
    };
    let none = Image::new();
    let image = process.and_then(|pid| images.get(&pid)).unwrap_or(&none);
    let mut errors = 0;
    for (cpu, path) in &saved.traces {
        let trace = read_trace(path)?;
        let switches: Vec<Switch> = saved
            .switches
            .iter()
            .filter(|s| s.cpu == *cpu)
            .copied()
            .collect();
        // With them, each CPU's trace is split between the threads that
        // ran, each decoded with its process's code where the capture
        // kept it.
        if switches.is_empty() && process.is_none() {
            anyhow::bail!(
                "{name}: CPU {cpu}'s trace has no context switches to tell its {} processes apart",
                images.len()
            );
        }
        let threads = saved
            .clock
            .filter(|_| !switches.is_empty())
            .map(|clock| Threads {
                switches,
                clock: Clock::Monotonic(clock),
                images: &images,
                none: &none,
            });
        errors += decode(Input {
            title: Some(format!("cpu {cpu}, {} bytes", trace.len())),
            trace: &trace,
            image,
            clock: saved.clock.map(Clock::Monotonic),
            recorded: Some(Clocks {
                mtc_freq: saved.mtc_period,
                ctc_eax: saved.cpuid_0x15.0,
                ctc_ebx: saved.cpuid_0x15.1,
                ..Clocks::default()
            }),
            threads: threads.as_ref(),
            comms: Some(&saved.threads),
            last: Some(cpu) == saved.traces.last().map(|(c, _)| c),
            process,
        })?;
    }
    Ok(errors)
}

fn queue_title(perf: &PerfData, queue: &Queue) -> String {
    let comm = perf.comm(queue.tid).unwrap_or("?");
    let whose = if queue.cpu >= 0 {
        format!("cpu {}", queue.cpu)
    } else {
        format!("thread {} ({comm})", queue.tid)
    };
    format!("queue {}: {whose}, {} bytes", queue.idx, queue.bytes())
}

/// `weft pt perf FILE`: what the file holds.
fn perf(args: &PtPerfArgs) -> anyhow::Result<ExitCode> {
    let file = read_trace(&args.file)?;
    let perf = PerfData::parse(&file).with_context(|| args.file.display().to_string())?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match &perf.info {
        Some(info) => writeln!(
            out,
            "intel_pt: pmu type {}, {}, {}, tsc {}, mtc {}, cyc {}",
            info.pmu_type,
            if info.per_cpu_mmaps {
                "per CPU"
            } else {
                "per thread"
            },
            if info.snapshot_mode {
                "snapshot"
            } else {
                "full trace"
            },
            on(info.enabled(Some(info.tsc_bit))),
            on(info.enabled(info.mtc_bit)),
            on(info.enabled(info.cyc_bit)),
        )?,
        None => writeln!(out, "intel_pt: no AUXTRACE_INFO record")?,
    }
    if let Some(info) = &perf.info {
        let clocks = info.clocks();
        writeln!(
            out,
            "clocks: mtc period {}, tsc:ctc {}/{} (CPUID 0x15 EBX/EAX), max non-turbo ratio {}",
            clocks.mtc_freq, clocks.ctc_ebx, clocks.ctc_eax, clocks.nom_freq
        )?;
    }
    if let Some(clock) = perf.clock() {
        writeln!(
            out,
            "clock: ns = {} + tsc * {} >> {}",
            clock.zero, clock.mult, clock.shift
        )?;
    }
    for queue in &perf.queues {
        writeln!(
            out,
            "{}, {} chunks",
            queue_title(&perf, queue),
            queue.chunks.len()
        )?;
    }
    writeln!(
        out,
        "sideband: {} executable mappings, {} thread names, {} context switches",
        perf.mmaps.len(),
        perf.comms.len(),
        perf.context_switches()
    )?;
    writeln!(
        out,
        "lost: {} AUX records truncated, {} records lost",
        perf.truncated, perf.lost
    )?;
    let counts: Vec<String> = perf
        .counts
        .iter()
        .map(|(&kind, count)| match weft_pt::perf::record_name(kind) {
            Some(name) => format!("{name} {count}"),
            None => format!("type {kind} {count}"),
        })
        .collect();
    writeln!(out, "records: {}", counts.join(", "))?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// A config bit: `?` where the file has no config to say.
fn on(yes: Option<bool>) -> &'static str {
    match yes {
        Some(true) => "on",
        Some(false) => "off",
        None => "?",
    }
}

fn warn_skipped(skipped: Vec<weft_pt::image::ImageError>) {
    for file in skipped {
        eprintln!("weft: warning: not in the image: {file}");
    }
}

/// Run the flow, handing each step to `out` until it fails; the number of
/// decoding errors met.
fn walk(
    flow: &mut Flow,
    out: &mut dyn FnMut(Step) -> std::io::Result<()>,
) -> anyhow::Result<usize> {
    let mut errors = 0;
    let mut failed = None;
    flow.run(&mut |step| {
        // A sideband that cannot be read is an error in the input too.
        let sideband_error =
            matches!(&step, Step::Sideband(Note::Problem { problem, .. }) if problem.is_error());
        if matches!(step, Step::Event(Event::Error { .. }, _)) || sideband_error {
            errors += 1;
        }
        if failed.is_none()
            && let Err(e) = out(step)
        {
            failed = Some(e);
        }
    });
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(errors),
    }
}

fn summary(
    image: &Image,
    profile: &Profile,
    unit: Option<&str>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let unit = unit.map(|u| format!("({u})")).unwrap_or_default();
    writeln!(
        out,
        "{:>10} {:>14} {:>14}  FUNCTION",
        "CALLS",
        format!("TOTAL{unit}"),
        format!("OWN{unit}")
    )?;
    for (function, cost) in profile.by_own_time() {
        let name = weft_pt::calls::name(image, function);
        writeln!(
            out,
            "{:>10} {:>14} {:>14}  {name}",
            cost.calls, cost.total, cost.own
        )?;
    }
    Ok(())
}

fn read_image(args: &PtFlowArgs) -> anyhow::Result<Image> {
    let mut image = Image::with_finder(args.symbols.finder());
    for spec in &args.image {
        image.add_spec(spec)?;
    }
    match &args.maps {
        Some(maps) => maps_image(image, maps, &HashMap::new()),
        None if args.image.is_empty() => anyhow::bail!(
            "{}: give the code the trace ran with --image or --maps",
            args.trace.display()
        ),
        None => Ok(image),
    }
}

/// `image` with the executable files of a process's memory map `maps`. A
/// file whose build-id is not the one `build_ids` says the capture saw is
/// left out, with why: its code is not the code that ran.
fn maps_image(
    mut image: Image,
    maps: &std::path::Path,
    build_ids: &HashMap<String, Option<String>>,
) -> anyhow::Result<Image> {
    let text =
        std::fs::read_to_string(maps).with_context(|| format!("reading {}", maps.display()))?;
    let mut read = |path: &std::path::Path| {
        let bytes = std::fs::read(path)?;
        let name = path.display().to_string();
        let Some(then) = build_ids.get(&name) else {
            return Ok(bytes);
        };
        let now = weft_pt::image::build_id(&name, &bytes).ok().flatten();
        if now == *then {
            return Ok(bytes);
        }
        let show = |id: &Option<String>| id.clone().unwrap_or_else(|| "none".into());
        Err(std::io::Error::other(format!(
            "changed since the capture (build-id {} then, {} now)",
            show(then),
            show(&now)
        )))
    };
    let skipped = image
        .add_maps(&text, &mut read)
        .with_context(|| maps.display().to_string())?;
    warn_skipped(skipped);
    Ok(image)
}

/// Exit 1 when the trace had errors, after saying how many.
fn finish(trace: &std::path::Path, errors: usize) -> ExitCode {
    if errors > 0 {
        eprintln!("weft: {}: {errors} decoding error(s)", trace.display());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_fills_in_the_clocks_the_command_line_left_out() {
        let image = Image::new();
        let input = Input {
            title: None,
            trace: &[],
            image: &image,
            clock: None,
            recorded: Some(Clocks {
                mtc_freq: 3,
                ctc_eax: 2,
                ctc_ebx: 168,
                nom_freq: 24,
                ..Clocks::default()
            }),
            threads: None,
            comms: None,
            last: true,
            process: None,
        };
        let filled = input.clocks(Clocks::default());
        assert_eq!(
            (
                filled.mtc_freq,
                filled.ctc_eax,
                filled.ctc_ebx,
                filled.nom_freq
            ),
            (3, 2, 168, 24)
        );
        let given = Clocks {
            mtc_freq: 6,
            ctc_eax: 1,
            ctc_ebx: 100,
            nom_freq: 30,
            ..Clocks::default()
        };
        assert_eq!(input.clocks(given), given, "what the user gave wins");
    }
}
