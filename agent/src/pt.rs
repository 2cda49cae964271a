//! `weft pt ...`: Intel PT on the command line, over the `weft-pt` crate.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use weft_pt::Errata;
use weft_pt::calls::{Calls, Listing, Profile};
use weft_pt::dump::TimeColumn;
use weft_pt::flow::{Event, Flow, Step};
use weft_pt::image::Image;

use crate::cli::{PtCallsArgs, PtCommand, PtDumpArgs, PtFlowArgs};

pub fn run(command: &PtCommand) -> anyhow::Result<ExitCode> {
    match command {
        PtCommand::Dump(args) => dump(args),
        PtCommand::Flow(args) => flow(args),
        PtCommand::Calls(args) => calls(args),
        PtCommand::Record(args) => crate::pt_record::record(args),
    }
}

fn read_trace(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

fn dump(args: &PtDumpArgs) -> anyhow::Result<ExitCode> {
    let trace = read_trace(&args.trace)?;
    let options = weft_pt::dump::Options {
        offsets: !args.no_offset,
        sync: !args.no_sync,
        errata: args.cpu.map(Errata::for_cpu).unwrap_or_default(),
        time: args.time.time.then_some(TimeColumn {
            delta: args.time.time_delta,
            relative: args.time.no_wall_clock,
        }),
        clocks: args.clocks.clocks(),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let errors = weft_pt::dump::dump(&trace, options, &mut out)?;
    out.flush()?;
    Ok(finish(&args.trace, errors))
}

fn flow(args: &PtFlowArgs) -> anyhow::Result<ExitCode> {
    let (trace, image) = (read_trace(&args.trace)?, read_image(args)?);
    let errata = args.cpu.map(Errata::for_cpu).unwrap_or_default();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut flow = Flow::new(&trace, &image, errata);
    let errors = walk(&mut flow, &mut |step| writeln!(out, "{step}"))?;
    out.flush()?;
    Ok(finish(&args.trace, errors))
}

fn calls(args: &PtCallsArgs) -> anyhow::Result<ExitCode> {
    let (trace, image) = (read_trace(&args.flow.trace)?, read_image(&args.flow)?);
    let errata = args.flow.cpu.map(Errata::for_cpu).unwrap_or_default();
    let mut flow = Flow::new(&trace, &image, errata).with_clocks(args.clocks.clocks());
    let mut calls = Calls::new(&image);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let errors = if args.summary {
        let mut profile = Profile::default();
        let errors = walk(&mut flow, &mut |step| {
            calls.step(&step, &mut |call| profile.add(&call));
            Ok(())
        })?;
        summary(&image, &profile, &mut out)?;
        errors
    } else {
        let mut listing = Listing::new(&image, &mut out)?;
        let mut failed = None;
        let errors = walk(&mut flow, &mut |step| {
            calls.step(&step, &mut |call| {
                if let Err(e) = listing.line(&call) {
                    failed.get_or_insert(e);
                }
            });
            failed.take().map_or(Ok(()), Err)
        })?;
        listing.flush()?;
        errors
    };
    out.flush()?;
    Ok(finish(&args.flow.trace, errors))
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
        if matches!(step, Step::Event(Event::Error { .. })) {
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

fn summary(image: &Image, profile: &Profile, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "{:>10} {:>14} {:>14}  FUNCTION",
        "CALLS", "TOTAL", "OWN"
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
    let mut image = Image::new();
    for spec in &args.image {
        image.add_spec(spec)?;
    }
    if let Some(maps) = &args.maps {
        let text =
            std::fs::read_to_string(maps).with_context(|| format!("reading {}", maps.display()))?;
        let skipped = image
            .add_maps(&text, &mut |path| std::fs::read(path))
            .with_context(|| maps.display().to_string())?;
        for file in skipped {
            eprintln!("weft: warning: not in the image: {file}");
        }
    }
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
