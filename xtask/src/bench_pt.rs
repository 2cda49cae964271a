//! `cargo xtask bench pt`: how fast weft decodes Intel PT against libipt,
//! on the same large synthetic trace of a loop-heavy program, in one run:
//! packets/s and MB/s for packet decoding, instructions/s for the flow.
//! libipt is driven by a small C program built here (`bench/libipt.c`);
//! both sides time the decoding only, not reading the files.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use weft_pt::Errata;
use weft_pt::encode::Recorder;
use weft_pt::flow::{Flow, Step};
use weft_pt::image::Image;
use weft_pt::packet::Packets;

use crate::bench_loop::median;
use crate::exec::{exec, output, workspace_root};
use crate::setup;

#[derive(clap::Args)]
pub struct Options {
    /// Runs per decoder.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Size of the trace in MiB.
    #[arg(long, default_value_t = 128)]
    mib: usize,
}

/// Where the program is loaded, and where its parts start.
const ORG: u64 = 0x40_1000;
const MAIN: u64 = ORG;
const LOOP: u64 = ORG + 0x05;
const F: u64 = ORG + 0x20;
const G: u64 = ORG + 0x30;

/// main calls f directly and g through a register in a loop that runs
/// for as long as the trace lasts; f branches on the loop counter.
#[rustfmt::skip]
const CODE: [u8; 0x33] = [
    0xb9, 0xff, 0xff, 0xff, 0x7f,             // main: mov ecx, 0x7fffffff
    0xe8, 0x16, 0, 0, 0,                      // loop: call f
    0x48, 0x8d, 0x05, 0x1f, 0, 0, 0,          //       lea rax, [rip + g]
    0xff, 0xd0,                               //       call rax
    0xff, 0xc9,                               //       dec ecx
    0x75, 0xee,                               //       jnz loop
    0xc3,                                     //       ret
    0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
    0xf6, 0xc1, 0x01,                         // f: test cl, 1
    0x74, 0x01,                               //    jz done
    0x90,                                     //    nop
    0xc3,                                     // done: ret
    0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
    0x31, 0xc0,                               // g: xor eax, eax
    0xc3,                                     //    ret
];

/// Loop iterations between two PSBs: about the 4 KiB PSB period the
/// kernel configures by default.
const BLOCK: usize = 1000;

pub fn run(options: &Options) -> Result<()> {
    if options.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let dir = workspace_root().join("target/bench-pt");
    let harness = libipt_harness()?;
    let mut image = Image::new();
    image.add(ORG, CODE.to_vec());
    let trace = trace(&image, options.mib << 20)?;
    let (trace_file, code_file) = (dir.join("loop.pt"), dir.join("loop.bin"));
    std::fs::write(&trace_file, &trace)?;
    std::fs::write(&code_file, CODE)?;
    let mib = trace.len() as f64 / f64::from(1 << 20);
    println!(
        "pt: {mib:.0} MiB of PT for a loop of direct and indirect calls, {} runs each; decoding only, higher is better",
        options.runs
    );
    println!(
        "{:<26} {:>10} {:>10} {:>10} {:>8}",
        "decoder", "min", "median", "max", "ratio"
    );

    let (weft, libipt) = alternate(
        options.runs,
        || Ok(weft_packets(&trace)),
        || run_libipt(&harness, &["packets".as_ref(), trace_file.as_os_str()]),
    )?;
    same_count("packets", &weft, &libipt)?;
    let packets = weft[0].count as f64;
    table("packets, M/s", packets / 1e6, &weft, &libipt);
    table("packets, MiB/s", mib, &weft, &libipt);

    let address = format!("{ORG:#x}");
    let flow_args = [
        "flow".as_ref(),
        trace_file.as_os_str(),
        code_file.as_os_str(),
        address.as_ref(),
    ];
    let (weft, libipt) = alternate(
        options.runs,
        || Ok(weft_flow(&trace, &image)),
        || run_libipt(&harness, &flow_args),
    )?;
    same_count("instructions", &weft, &libipt)?;
    table(
        "instructions, M/s",
        weft[0].count as f64 / 1e6,
        &weft,
        &libipt,
    );
    Ok(())
}

/// What one decoding run did and how long it took.
#[derive(Debug, Clone, Copy)]
struct Run {
    count: u64,
    errors: u64,
    seconds: f64,
}

/// `runs` runs of each decoder, taking turns so that a slow spell of the
/// machine slows both.
fn alternate(
    runs: usize,
    mut weft: impl FnMut() -> Result<Run>,
    mut libipt: impl FnMut() -> Result<Run>,
) -> Result<(Vec<Run>, Vec<Run>)> {
    let (mut w, mut l) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        w.push(weft()?);
        l.push(libipt()?);
    }
    Ok((w, l))
}

/// Both decoders must have decoded the same thing, without errors.
fn same_count(what: &str, weft: &[Run], libipt: &[Run]) -> Result<()> {
    let (w, l) = (weft[0], libipt[0]);
    if w.errors != 0 || l.errors != 0 || w.count != l.count {
        bail!(
            "{what}: weft decoded {} with {} errors, libipt {} with {} errors",
            w.count,
            w.errors,
            l.count,
            l.errors
        );
    }
    Ok(())
}

/// Rows of `amount` per second for each decoder; the ratio is weft's
/// median rate over libipt's.
fn table(unit: &str, amount: f64, weft: &[Run], libipt: &[Run]) {
    let rates = |runs: &[Run]| {
        let mut rates: Vec<f64> = runs.iter().map(|r| amount / r.seconds).collect();
        rates.sort_by(f64::total_cmp);
        rates
    };
    let (weft, libipt) = (rates(weft), rates(libipt));
    let base = median(&libipt);
    for (name, rates) in [("weft", &weft), ("libipt", &libipt)] {
        let label = format!("{name} {unit}");
        println!(
            "{label:<26} {:>10.1} {:>10.1} {:>10.1} {:>8.2}",
            rates[0],
            median(rates),
            rates[rates.len() - 1],
            median(rates) / base
        );
    }
}

fn weft_packets(trace: &[u8]) -> Run {
    let start = Instant::now();
    let (mut count, mut errors) = (0, 0);
    let mut packets = Packets::new(trace);
    if packets.sync_forward() {
        while let Some(next) = packets.next_packet() {
            if next.is_ok() {
                count += 1;
            } else {
                errors += 1;
                if !packets.sync_forward() {
                    break;
                }
            }
        }
    }
    Run {
        count,
        errors,
        seconds: start.elapsed().as_secs_f64(),
    }
}

fn weft_flow(trace: &[u8], image: &Image) -> Run {
    let start = Instant::now();
    let (mut count, mut errors) = (0, 0);
    Flow::new(trace, image, Errata::default()).run(&mut |step| match step {
        Step::Insn { .. } => count += 1,
        Step::Event(weft_pt::flow::Event::Error { .. }, _) => errors += 1,
        Step::Event(_, _) | Step::Sideband(_) => {}
    });
    Run {
        count,
        errors,
        seconds: start.elapsed().as_secs_f64(),
    }
}

/// One run of the C harness: it prints count, errors and nanoseconds.
fn run_libipt(harness: &Path, args: &[&std::ffi::OsStr]) -> Result<Run> {
    let text = output(Command::new(harness).args(args))?;
    let fields: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("libipt harness printed {text:?}"))?;
    let [count, errors, ns] = fields[..] else {
        bail!("libipt harness printed {text:?}");
    };
    Ok(Run {
        count,
        errors,
        seconds: ns as f64 / 1e9,
    })
}

/// Builds the C program that decodes with libipt (`bench/libipt.c`, against
/// Debian's `libipt-dev`), in `target/bench-pt`; returns its path.
pub fn libipt_harness() -> Result<std::path::PathBuf> {
    setup::install_packages(&["libipt-dev", "gcc"])?;
    let dir = workspace_root().join("target/bench-pt");
    std::fs::create_dir_all(&dir)?;
    let harness = dir.join("libipt");
    exec(
        Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&harness)
            .arg(workspace_root().join("xtask/bench/libipt.c"))
            .arg("-lipt"),
    )?;
    Ok(harness)
}

/// The trace of the loop running until it fills `bytes`: main's start,
/// one block of PT (a PSB+ at g, `BLOCK` iterations back to g) repeated,
/// and one more iteration that stops tracing at its call of g. The block ends just after a TIP, with
/// no TNT bits pending, and spans an even number of iterations, so each
/// copy continues the path where the last one left it.
fn trace(image: &Image, bytes: usize) -> Result<Vec<u8>> {
    let mut cpu = Recorder::new(image, MAIN, 0);
    // ecx = 0x7fffffff in f the first time: odd, so jz is not taken.
    walk(
        &mut cpu,
        &[MAIN, LOOP, F, F + 3, F + 5, F + 6, LOOP + 5, LOOP + 12, G],
    )?;
    let head = cpu.size();
    cpu.psb(G);
    for i in 0..BLOCK {
        // After the dec, ecx is even in every other iteration.
        let f: &[u64] = if i % 2 == 0 {
            &[F, F + 3, F + 6]
        } else {
            &[F, F + 3, F + 5, F + 6]
        };
        let mut path = vec![G, G + 2, LOOP + 14, LOOP + 16, LOOP];
        path.extend(f);
        path.extend([LOOP + 5, LOOP + 12, G]);
        walk(&mut cpu, &path)?;
    }
    let end = cpu.size();
    // One more iteration up to the indirect call, whose TIP.PGD (tracing
    // stopped as it jumped to g) ends the trace.
    let last = [
        G,
        G + 2,
        LOOP + 14,
        LOOP + 16,
        LOOP,
        F,
        F + 3,
        F + 6,
        LOOP + 5,
        LOOP + 12,
    ];
    walk(&mut cpu, &last)?;
    cpu.disable(Some(G));
    let recorded = cpu.finish();
    let (block, tail) = (&recorded[head..end], &recorded[end..]);
    let mut trace = Vec::with_capacity(bytes + block.len());
    trace.extend(&recorded[..head]);
    while trace.len() + tail.len() < bytes {
        trace.extend(block);
    }
    trace.extend(tail);
    Ok(trace)
}

fn walk(cpu: &mut Recorder, path: &[u64]) -> Result<()> {
    for pair in path.windows(2) {
        cpu.step(pair[0], pair[1])?;
    }
    Ok(())
}
