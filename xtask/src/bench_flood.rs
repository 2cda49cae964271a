//! `cargo xtask bench flood`: the fastest syscall flood one core can make
//! (the getppid loop pinned to CPU 0) for a while under `weft stat`,
//! `weft record` and the live UI (in tmux, its default view). For each:
//! syscalls the loop made, the loop's syscalls weft kept, what weft
//! received and lost in all (every process), how full its rings came,
//! and weft's CPU, in all and per record received.
//!
//! With `--baseline WEFT`, only `weft record` runs, alternating between
//! that binary (another build) and this one, `--runs` times each: the
//! ratio of their CPU per record is the change's cost on the ingest path,
//! measured in one run on the same load.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context as _, Result, bail};

use crate::{
    bench_loop::{Bins, Tracer, build, cpu_seconds, median},
    bench_tui::{tmux, ui_pid, wait_for},
    exec::output,
    setup,
};

#[derive(clap::Args)]
pub struct Options {
    /// Seconds of flood under each configuration.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Another build's weft binary to compare `weft record` with.
    #[arg(long, value_name = "WEFT")]
    baseline: Option<String>,
    /// Runs of each binary with `--baseline`.
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

/// One row of the table.
struct Row {
    made: u64,
    kept: u64,
    received: u64,
    lost: u64,
    /// The fullest a ring was when weft began a drain, in %.
    peak: u64,
    cpu: f64,
}

impl Row {
    /// weft's CPU ns per record received, over a flood of `seconds`.
    fn ns_per_record(&self, seconds: f64) -> f64 {
        self.cpu / 100.0 * seconds * 1e9 / self.received.max(1) as f64
    }
}

pub fn run(options: &Options) -> Result<()> {
    let bins = build()?;
    setup::install_packages(&["tmux"])?;
    println!(
        "flood: getppid on CPU 0 for {} s under each; weft's CPU in % of one core",
        options.seconds
    );
    println!(
        "{:<18} {:>14} {:>14} {:>14} {:>12} {:>7} {:>8} {:>8}",
        "weft", "loop made", "loop kept", "received", "lost", "ring %", "CPU %", "ns/rec"
    );
    let seconds = options.seconds as f64;
    let print = |label: &str, row: &Row| {
        println!(
            "{label:<18} {:>14} {:>14} {:>14} {:>12} {:>7} {:>8.1} {:>8.1}",
            row.made,
            row.kept,
            row.received,
            row.lost,
            row.peak,
            row.cpu,
            row.ns_per_record(seconds)
        );
    };
    if let Some(baseline) = &options.baseline {
        return compare(&bins, baseline, options.runs, seconds, &print);
    }
    print("stat", &stat(&bins, seconds)?);
    print("record", &record(&bins, &bins.weft, seconds)?);
    print("live UI", &ui(&bins, seconds)?);
    Ok(())
}

/// `weft record` of `baseline` and of this build, alternating, `runs`
/// times each; then the medians of their CPU per record and its ratio.
fn compare(
    bins: &Bins,
    baseline: &str,
    runs: usize,
    seconds: f64,
    print: &dyn Fn(&str, &Row),
) -> Result<()> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let mut costs = [Vec::new(), Vec::new()];
    for _ in 0..runs {
        for (which, (label, weft)) in [
            ("record (baseline)", baseline),
            ("record", bins.weft.as_str()),
        ]
        .into_iter()
        .enumerate()
        {
            let row = record(bins, weft, seconds)?;
            print(label, &row);
            costs[which].push(row.ns_per_record(seconds));
        }
    }
    for cost in &mut costs {
        cost.sort_by(f64::total_cmp);
    }
    let (before, after) = (median(&costs[0]), median(&costs[1]));
    println!(
        "median ns/rec: baseline {before:.1}, this build {after:.1}; this/baseline {:.3} (min {:.1}/{:.1}, max {:.1}/{:.1})",
        after / before,
        costs[1][0],
        costs[0][0],
        costs[1][runs - 1],
        costs[0][runs - 1],
    );
    Ok(())
}

/// Runs the loop on CPU 0 for `seconds` while `weft` (pid) runs; returns
/// the loop's pid, its calls and weft's CPU share meanwhile.
fn flood(bins: &Bins, seconds: f64, weft: u32) -> Result<(u32, u64, f64)> {
    let cpu_before = cpu_seconds(weft);
    let start = Instant::now();
    let child = Command::new("taskset")
        .args(["-c", "0", &bins.syscall_loop, "getppid", "for"])
        .arg(seconds.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .context("failed to start the loop")?;
    let pid = child.id();
    let out = child.wait_with_output()?;
    let cpu = (cpu_seconds(weft) - cpu_before) / start.elapsed().as_secs_f64() * 100.0;
    let text = String::from_utf8_lossy(&out.stdout);
    let calls = text
        .trim()
        .strip_prefix("calls ")
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("the loop printed `{text}`"))?;
    Ok((pid, calls, cpu))
}

fn stat(bins: &Bins, seconds: f64) -> Result<Row> {
    let argv = [bins.weft.clone(), "stat".into(), "--json".into()];
    let tracer = Tracer::start(&argv, "weft: tracing")?;
    let (_, made, cpu) = flood(bins, seconds, tracer.pid())?;
    let lines = tracer.interrupt()?;
    let total = lines
        .iter()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|json| json["kind"] == "total")
        .context("weft stat printed no total")?;
    let kept = total["syscalls"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == "getppid"))
        .and_then(|r| r["count"].as_u64())
        .unwrap_or(0);
    Ok(Row {
        made,
        kept,
        received: total["received"].as_u64().unwrap_or(0),
        lost: total["lost"].as_u64().unwrap_or(0),
        peak: total["ring_peak_percent"].as_u64().unwrap_or(0),
        cpu,
    })
}

/// `weft record` (the binary `weft`) under the flood.
fn record(bins: &Bins, weft: &str, seconds: f64) -> Result<Row> {
    let dir = fresh_dir("record");
    let argv = [weft.to_owned(), "record".into(), "-o".into(), dir.clone()];
    let tracer = Tracer::start(&argv, "weft: recording")?;
    let (pid, made, cpu) = flood(bins, seconds, tracer.pid())?;
    tracer.interrupt()?;
    let row = recorded(bins, &dir, pid, made, cpu);
    let _ = std::fs::remove_dir_all(&dir);
    row
}

fn ui(bins: &Bins, seconds: f64) -> Result<Row> {
    let dir = fresh_dir("ui");
    // Room for the whole flood, so that kept counts what was received
    // rather than what the UI's default size limit left.
    let command = format!(
        "{} tui -o {dir} --max-disk 16GiB --retain 1h; echo weft-exit=$?; sleep 600",
        bins.weft
    );
    tmux(&["new-session", "-d", "-x", "200", "-y", "50", &command])?;
    let result = (|| {
        wait_for("the overview", |s| s.contains("1 Overview"))?;
        let weft: u32 = ui_pid()?.parse().context("no weft in the tmux pane")?;
        let (pid, made, cpu) = flood(bins, seconds, weft)?;
        tmux(&["send-keys", "-t", "0", "q"])?;
        wait_for("weft to exit", |s| s.contains("weft-exit="))?;
        recorded(bins, &dir, pid, made, cpu)
    })();
    let _ = tmux(&["kill-server"]);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The row of a recording in `dir` of the loop `pid` that made `made` calls.
fn recorded(bins: &Bins, dir: &str, pid: u32, made: u64, cpu: f64) -> Result<Row> {
    let text = std::fs::read_to_string(Path::new(dir).join("weft.json"))
        .with_context(|| format!("{dir} has no weft.json"))?;
    let metadata: serde_json::Value = serde_json::from_str(&text)?;
    let losses = &metadata["sessions"][0]["lost"]["syscalls"];
    let query = format!("syscalls where pid = {pid} and name = \"getppid\" | count");
    let answer = output(Command::new(&bins.weft).args(["query", "--json", dir, &query]))?;
    let kept = serde_json::from_str::<serde_json::Value>(answer.trim())
        .ok()
        .and_then(|row| row["count"].as_u64());
    let Some(kept) = kept else {
        bail!("`{query}` answered `{answer}`");
    };
    Ok(Row {
        made,
        kept,
        received: losses["received"].as_u64().unwrap_or(0),
        lost: losses["lost"].as_u64().unwrap_or(0),
        peak: losses["ring_peak_percent"].as_u64().unwrap_or(0),
        cpu,
    })
}

/// A capture path that does not exist yet.
fn fresh_dir(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("weft-bench-flood-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.display().to_string()
}
