//! `cargo xtask bench live`: what answering costs while a capture is being
//! recorded, with a baseline binary (a build before a change) in the same
//! run: the time a live query takes inside `weft record` (`weft query
//! --explain` through the live socket), and the CPU the terminal UI's
//! query worker uses refreshing its latency view each second. A shell
//! starting processes all the while gives the capture new threads to name.

use std::{
    collections::HashMap,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};

use crate::{
    bench_loop::{Tracer, median, sorted},
    bench_tui::{thread_seconds, tmux, ui_pid, wait_for},
    exec::output,
    run::build_weft_release,
    setup,
};

#[derive(clap::Args)]
pub struct Options {
    /// Rounds; each measures every binary once, in turn.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Live queries of each kind timed per round.
    #[arg(long, default_value_t = 20)]
    queries: usize,
    /// Seconds the UI's query worker is measured over per round.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Another weft binary measured in the same rounds as `baseline`; its
    /// file must be called `weft` (the UI is found by that name).
    #[arg(long, value_name = "WEFT")]
    baseline: Option<String>,
}

/// The live queries timed: one the UI's latency view asks, one naming
/// threads (which reads their names).
const QUERIES: [&str; 2] = [
    "syscalls | count, p99(dur) by name last 60s",
    "syscalls | count by comm last 60s",
];

pub fn run(options: &Options) -> Result<()> {
    setup::install_packages(&["tmux"])?;
    let mut bins = vec![("weft", build_weft_release()?)];
    if let Some(baseline) = &options.baseline {
        bins.push(("baseline", baseline.clone()));
    }
    let mut workload = Command::new("sh")
        .args(["-c", "while :; do /bin/true; done"])
        .spawn()
        .context("failed to start the workload")?;
    let result = rounds(options, &bins);
    let _ = workload.kill();
    let _ = workload.wait();
    let (times, cpu) = result?;
    println!("live queries, ms inside weft record (min / median / max over the rounds):");
    for ((label, query), samples) in &times {
        println!("  {label:<9} {}  {query}", spread(samples));
    }
    println!("UI query worker, % of a core on the latency view:");
    for (label, samples) in &cpu {
        println!("  {label:<9} {}", spread(samples));
    }
    Ok(())
}

type Times = HashMap<(&'static str, &'static str), Vec<f64>>;

fn rounds(
    options: &Options,
    bins: &[(&'static str, String)],
) -> Result<(Times, HashMap<&'static str, Vec<f64>>)> {
    let (mut times, mut cpu) = (Times::new(), HashMap::new());
    for round in 0..options.rounds {
        for (label, weft) in bins {
            println!("round {}: {label}", round + 1);
            for (query, ms) in live_queries(weft, options.queries)? {
                times.entry((*label, query)).or_default().extend(ms);
            }
            cpu.entry(*label)
                .or_insert_with(Vec::new)
                .push(ui_worker(weft, options.seconds)?);
        }
    }
    Ok((times, cpu))
}

/// Each query's times, in ms as `--explain` reports them, asked `count`
/// times of a `weft record` of syscalls.
fn live_queries(weft: &str, count: usize) -> Result<Vec<(&'static str, Vec<f64>)>> {
    let dir = scratch("live");
    let argv: Vec<String> = [weft, "record", "--sources", "syscalls", "-o", &dir]
        .map(String::from)
        .to_vec();
    let recorder = Tracer::start(&argv, "weft: recording")?;
    // Records and thread names to read.
    std::thread::sleep(Duration::from_secs(3));
    let times = QUERIES
        .into_iter()
        .map(|query| {
            let ms = (0..count)
                .map(|_| {
                    let explained =
                        output(Command::new(weft).args(["query", "--live", "--explain", query]))?;
                    explained_ms(&explained).context("no time in weft query --explain")
                })
                .collect::<Result<Vec<_>>>()?;
            Ok((query, ms))
        })
        .collect::<Result<Vec<_>>>();
    // Stopped however the queries went: a recorder left running would
    // answer the next round's questions (it holds the live socket).
    let lines = recorder.interrupt()?;
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(refused) = lines.iter().find(|l| l.contains("another weft serves")) {
        anyhow::bail!("{refused}: stop it first");
    }
    times
}

/// The `time: 1.234 ms` line of `--explain`.
fn explained_ms(text: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix("time: ")?.strip_suffix(" ms")?.parse().ok())
}

/// The UI's query worker thread.
const WORKER: &str = "weft-tui-query";

/// The CPU of the UI's query worker ([`WORKER`]) over
/// `seconds` on the latency view, in % of a core.
fn ui_worker(weft: &str, seconds: u64) -> Result<f64> {
    let dir = scratch("tui");
    let command = format!("{weft} tui --sources syscalls -o {dir}; sleep 600");
    tmux(&["new-session", "-d", "-x", "200", "-y", "50", &command])?;
    let measured = (|| {
        wait_for("the overview", |s| s.contains("1 Overview"))?;
        tmux(&["send-keys", "-t", "0", "2"])?;
        std::thread::sleep(Duration::from_secs(2));
        let pid = ui_pid()?;
        let worker = || thread_seconds(&pid).get(WORKER).copied();
        let (before, start) = (worker(), Instant::now());
        std::thread::sleep(Duration::from_secs(seconds));
        match (before, worker()) {
            (Some(before), Some(after)) => {
                Ok((after - before) / start.elapsed().as_secs_f64() * 100.0)
            }
            _ => anyhow::bail!("weft {pid} has no {WORKER} thread"),
        }
    })();
    let _ = tmux(&["send-keys", "-t", "0", "q"]);
    std::thread::sleep(Duration::from_secs(1));
    let _ = tmux(&["kill-server"]);
    let _ = std::fs::remove_dir_all(&dir);
    measured
}

fn scratch(what: &str) -> String {
    let dir = std::env::temp_dir().join(format!("weft-bench-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.display().to_string()
}

fn spread(samples: &[f64]) -> String {
    let s = sorted(samples.to_vec());
    format!(
        "{:>8.2} / {:>8.2} / {:>8.2}",
        s.first().copied().unwrap_or_default(),
        median(&s),
        s.last().copied().unwrap_or_default()
    )
}
