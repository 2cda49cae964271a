//! `weft pt ...`: Intel PT on the command line, over the `weft-pt` crate.

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use weft_pt::Errata;
use weft_pt::calls::{Call, Calls, Listing, Profile};
use weft_pt::dump::TimeColumn;
use weft_pt::flow::Step;
use weft_pt::image::Image;
use weft_pt::perf_data::PerfData;
use weft_pt::pevent::{self, Channel};
use weft_pt::sideband::{SampleFormat, Sideband};
use weft_pt::threads::{Router, Stretches, TscToNs};
use weft_pt::time::Clocks;
use weft_pt_capture::decode::{
    Decoding, Source, by_thread, each_input, queue_title, read_trace, walk,
};

use crate::cli::{
    PtCallsArgs, PtCommand, PtDumpArgs, PtFlowArgs, PtFlowShowArgs, PtPerfArgs, SidebandArgs,
};

pub fn run(command: &PtCommand) -> anyhow::Result<ExitCode> {
    match command {
        PtCommand::Dump(args) => dump(args),
        PtCommand::Flow(args) => flow(args),
        PtCommand::Calls(args) => calls(args),
        PtCommand::Record(args) => crate::pt_record::run(args),
        PtCommand::Import(args) => {
            eprintln!(
                "weft: {}",
                weft_recording::live::client::import(&args.capture)?
            );
            Ok(ExitCode::SUCCESS)
        }
        PtCommand::Perf(args) => perf(args),
    }
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
fn sideband(args: &SidebandArgs) -> anyhow::Result<Option<(Sideband<'static>, SampleFormat)>> {
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
        Some(root) => weft_symbols::read_file(&root.join(name.trim_start_matches('/'))),
        None => weft_symbols::read_file(std::path::Path::new(name)),
    };
    let session = Sideband::new(channels, Box::new(read))
        .with_kernel_start(args.pevent_kernel_start.unwrap_or(u64::MAX));
    let format = SampleFormat {
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

/// What `weft pt flow` and `calls` decode, and where its code comes from.
fn source(args: &PtFlowArgs) -> Source {
    Source {
        trace: args.trace.clone(),
        images: args.image.clone(),
        maps: args.maps.clone(),
        perf: args.perf,
        pid: args.pid,
        debug_dirs: args.symbols.debug_dir.clone(),
        demangle: !args.symbols.no_demangle,
    }
}

/// How `weft pt flow` and `calls` decode: the CPU's errata, the capture's
/// address filter, and whether to resync after an error.
fn decoding(args: &PtFlowArgs) -> Decoding {
    Decoding {
        errata: args.cpu.map(Errata::for_cpu).unwrap_or_default(),
        filter: args.addr_filter.clone(),
        resync: args.resync_on_error,
    }
}

fn flow(show: &PtFlowShowArgs) -> anyhow::Result<ExitCode> {
    let args = &show.flow;
    let decoding = decoding(args);
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
    let errors = each_input::<anyhow::Error>(&source(args), &mut |input| {
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
            return Ok(walk(&mut flow, &mut |step| print(&mut out, &step))?);
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
    let decoding = decoding(&args.flow);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // Threads of per-CPU traces, put together over all CPUs.
    let mut stretches = Stretches::default();
    let mut cpu = 0;
    let errors = each_input::<anyhow::Error>(&source(&args.flow), &mut |input| {
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
            return Ok(by_thread(how, &input, threads, ends, &ns, &mut section)?);
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
    clock: Option<TscToNs>,
) -> std::io::Result<Listing<'a>> {
    let listing = Listing::new(image, out, clock.map(|_| "ns"))?;
    Ok(match clock {
        Some(TscToNs::Monotonic(_)) => listing.absolute(),
        _ => listing,
    })
}

/// One thread's calls: a call listing, or with `summary_only` a profile.
fn thread_section(
    image: &Image,
    made: &[Call],
    clock: Option<TscToNs>,
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

/// `[thread TID (COMM), process PID]`.
fn thread_title(comms: Option<&HashMap<i32, String>>, pid: i32, tid: i32) -> String {
    let comm = comms.and_then(|c| c.get(&tid)).map_or("?", String::as_str);
    format!("[thread {tid} ({comm}), process {pid}]")
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
        .map(
            |(&kind, count)| match weft_pt::perf_data::record_name(kind) {
                Some(name) => format!("{name} {count}"),
                None => format!("type {kind} {count}"),
            },
        )
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

/// Exit 1 when the trace had errors, after saying how many.
fn finish(trace: &std::path::Path, errors: usize) -> ExitCode {
    if errors > 0 {
        eprintln!("weft: {}: {errors} decoding error(s)", trace.display());
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
