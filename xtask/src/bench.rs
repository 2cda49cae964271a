//! `cargo xtask bench`: benchmarks that report ratios against a baseline
//! measured in the same run, with min/median/max over several runs.

use std::{
    io::{BufRead as _, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    thread,
    time::Duration,
};

use anyhow::{Context as _, Result, bail};

use crate::{
    exec::{exec, output, workspace_root},
    run::{build_release, build_weft_release},
    setup,
};

#[derive(clap::Subcommand)]
pub enum Bench {
    /// Cost per syscall: untraced, under `weft stat`, under bpftrace, and with
    /// empty programs on the same hooks (the floor).
    ProbeEffect(ProbeEffect),
    /// Store ingest against a raw file append, and query latency over 60 s
    /// of a 1 M records/s source (needs no root).
    Store {
        /// Smaller data: a quick check rather than the reported figures.
        #[arg(long)]
        quick: bool,
    },
    /// The ring -> store path of `weft record` on rings in memory, stage
    /// by stage, against the store's plain append (needs no root).
    Ingest {
        /// Fewer records: a quick check rather than the reported figures.
        #[arg(long)]
        quick: bool,
    },
    /// A one-core getppid flood under `weft stat`, `weft record` and the
    /// live UI: syscalls made, kept, received, lost, and weft's CPU.
    Flood(crate::bench_flood::Options),
    /// The Loom case studies: record RocksDB and Redis, then time each
    /// question with weft's indexes, a weft full scan and DuckDB on Parquet.
    #[expect(clippy::doc_markdown, reason = "product names in help text")]
    Queries(crate::bench_queries::Options),
    /// Every event source: the rate one core can generate for each, what
    /// weft received and lost, its CPU use, and the probe effect of all
    /// sources on a getppid loop and on Redis over `lo`.
    Sources(crate::bench_sources::Options),
    /// One-liners: the getppid loop untraced, under bpftrace and under
    /// `weft trace` for a count by comm and an enter/exit latency histogram,
    /// and each tool's start-up time to its first event.
    Oneliners(Loop),
    /// The terminal UI: the getppid loop under headless `weft record` and
    /// under `weft tui` in tmux, its frame times and its threads' CPU.
    Tui(Loop),
    /// Triggers: the getppid loop under `weft record` without and with three
    /// triggers, and the time from a matching record to its pinned window.
    Triggers(Loop),
    /// Intel PT decoding: weft against libipt on the same large synthetic
    /// trace, packets/s, MiB/s and instructions/s (needs no PT hardware).
    Pt(crate::bench_pt::Options),
}

#[derive(clap::Args)]
pub struct ProbeEffect {
    /// Runs per configuration.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Syscalls per run.
    #[arg(long, default_value_t = 3_000_000)]
    calls: u32,
}

pub fn run(bench: &Bench) -> Result<()> {
    match bench {
        Bench::ProbeEffect(options) => probe_effect(options),
        Bench::Queries(options) => crate::bench_queries::run(options),
        Bench::Sources(options) => crate::bench_sources::run(options),
        Bench::Oneliners(options) => crate::bench_oneliners::run(options),
        Bench::Tui(options) => crate::bench_tui::run(options),
        Bench::Triggers(options) => crate::bench_triggers::run(options),
        Bench::Pt(options) => crate::bench_pt::run(options),
        Bench::Flood(options) => crate::bench_flood::run(options),
        Bench::Store { quick } => cargo_bench("weft-store", "store", *quick),
        Bench::Ingest { quick } => cargo_bench("weft-ingest", "ingest", *quick),
    }
}

/// `cargo bench` of one crate's bench target, with `--quick` passed on.
fn cargo_bench(package: &str, bench: &str, quick: bool) -> Result<()> {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(workspace_root()).args([
        "bench",
        "--locked",
        "--package",
        package,
        "--bench",
        bench,
        "--",
    ]);
    if quick {
        cmd.arg("--quick");
    }
    exec(&mut cmd)
}

/// bpftrace's per-syscall enter/exit latency histogram, the usual one-liner.
const BPFTRACE_LATENCY: &str = "tracepoint:raw_syscalls:sys_enter { @start[tid] = nsecs; } \
     tracepoint:raw_syscalls:sys_exit /@start[tid]/ { @ns[args->id] = hist(nsecs - @start[tid]); delete(@start[tid]); }";

pub struct Bins {
    pub weft: String,
    pub syscall_loop: String,
    floor: String,
    object: String,
}

pub fn build() -> Result<Bins> {
    setup::run()?;
    setup::install_packages(&["bpftrace"])?;
    let weft = build_weft_release()?;
    build_release(&["--package", "weft-tests", "--bins"])?;
    let root = workspace_root();
    let release = root.join("target/release");
    Ok(Bins {
        weft,
        syscall_loop: release.join("weft-syscall-loop").display().to_string(),
        floor: release.join("weft-floor").display().to_string(),
        object: root
            .join("target/ebpf/bpfel-unknown-none/release/weft-ebpf")
            .display()
            .to_string(),
    })
}

/// One measured configuration: an optional tracer, and the syscall the loop makes.
pub struct Config {
    pub label: &'static str,
    pub tracer: Option<(Vec<String>, &'static str)>,
    pub syscall: &'static str,
}

fn probe_effect(options: &ProbeEffect) -> Result<()> {
    let bins = build()?;
    let configs = configs(&bins);
    println!(
        "probe-effect: {} runs x {} calls, ns per call (lower is better)",
        options.runs, options.calls
    );
    println!(
        "{:<40} {:>8} {:>8} {:>8} {:>10}",
        "configuration", "min", "median", "max", "weft lost"
    );
    let mut medians = Vec::new();
    for config in &configs {
        let (samples, lost) = measure(config, &bins, options)?;
        let m = median(&samples);
        println!(
            "{:<40} {:>8.1} {:>8.1} {:>8.1} {:>10}",
            config.label,
            samples.first().copied().unwrap_or_default(),
            m,
            samples.last().copied().unwrap_or_default(),
            lost.map_or_else(|| "-".to_owned(), |l| l.to_string())
        );
        medians.push(m);
    }
    print_ratios(&medians);
    Ok(())
}

/// The configurations, in the order `print_ratios` expects.
fn configs(bins: &Bins) -> Vec<Config> {
    let weft = |extra: &[&str]| {
        let mut cmd = vec![bins.weft.clone(), "stat".into(), "--json".into()];
        cmd.extend(extra.iter().map(|s| (*s).to_owned()));
        Some((cmd, "weft: tracing"))
    };
    let floor = |kind: &str| {
        Some((
            vec![bins.floor.clone(), bins.object.clone(), kind.to_owned()],
            "attached",
        ))
    };
    let bpftrace = Some((
        vec!["bpftrace".into(), "-e".into(), BPFTRACE_LATENCY.into()],
        "Attaching",
    ));
    let config = |label, tracer, syscall| Config {
        label,
        tracer,
        syscall,
    };
    vec![
        config("a  untraced getppid", None, "getppid"),
        config("b  weft stat, every syscall (raw_tp)", weft(&[]), "getppid"),
        config("c  bpftrace enter/exit latency hist()", bpftrace, "getppid"),
        config(
            "d  empty raw_tp sys_enter+sys_exit",
            floor("raw"),
            "getppid",
        ),
        config(
            "d2 empty tp_btf sys_enter+sys_exit",
            floor("btf"),
            "getppid",
        ),
        config("d3 empty tracepoint sys_enter+exit", floor("tp"), "getppid"),
        config(
            "f  weft stat --syscall getppid",
            weft(&["--syscall", "getppid"]),
            "getppid",
        ),
        config("a' untraced getpid", None, "getpid"),
        config(
            "e  getpid, weft --syscall getppid",
            weft(&["--syscall", "getppid"]),
            "getpid",
        ),
    ]
}

fn print_ratios(medians: &[f64]) {
    let [
        untraced,
        weft,
        bpftrace,
        floor,
        btf,
        tp,
        selected,
        untraced_other,
        other,
    ] = medians
    else {
        unreachable!("one median per configuration")
    };
    println!("ratios of medians:");
    println!("  b/a  weft / untraced            {:.2}", weft / untraced);
    println!(
        "  c/a  bpftrace / untraced        {:.2}",
        bpftrace / untraced
    );
    println!("  d/a  floor (raw_tp) / untraced  {:.2}", floor / untraced);
    println!(
        "  b/d  weft / floor               {:.2}   (target <= 1.3)",
        weft / floor
    );
    println!("  d2/d tp_btf / raw_tp floor      {:.2}", btf / floor);
    println!("  d3/d tracepoint / raw_tp floor  {:.2}", tp / floor);
    println!(
        "  f/a  weft --syscall, traced call / untraced   {:.2}",
        selected / untraced
    );
    println!(
        "  e/a' weft --syscall getppid, getpid / untraced getpid  {:.2}",
        other / untraced_other
    );
}

/// Runs the loop `runs` times under the configuration's tracer; returns the
/// sorted ns per call and, for weft, the lost count it reported.
fn measure(config: &Config, bins: &Bins, options: &ProbeEffect) -> Result<(Vec<f64>, Option<u64>)> {
    let (samples, tracer) = measure_loop(config, bins, options.runs, options.calls)?;
    let lost = match tracer {
        Some(tracer) => tracer.stop()?,
        None => None,
    };
    Ok((samples, lost))
}

/// Runs the getppid/getpid loop `runs` times on CPU 0 under the
/// configuration's tracer; returns the sorted ns per call and the tracer,
/// still running.
pub fn measure_loop(
    config: &Config,
    bins: &Bins,
    runs: usize,
    calls: u32,
) -> Result<(Vec<f64>, Option<Tracer>)> {
    let tracer = match &config.tracer {
        Some((argv, ready)) => Some(Tracer::start(argv, ready)?),
        None => None,
    };
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let out = output(
            Command::new("taskset")
                .args(["-c", "0", &bins.syscall_loop, config.syscall])
                .arg(calls.to_string()),
        )?;
        samples.push(
            out.trim()
                .parse::<f64>()
                .context("loop printed no number")?,
        );
    }
    samples.sort_by(f64::total_cmp);
    Ok((samples, tracer))
}

/// Runs and calls of the getppid loop, for the benches that time it
/// against a baseline of the same run.
#[derive(clap::Args)]
pub struct Loop {
    /// Runs per configuration.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Syscalls per run.
    #[arg(long, default_value_t = 2_000_000)]
    pub calls: u32,
}

impl Loop {
    /// Prints the title line and the column headers of a loop table.
    pub fn header(&self, bench: &str) {
        println!(
            "{bench}: {} runs x {} getppid calls on CPU 0, ns per call (lower is better)",
            self.runs, self.calls
        );
        println!(
            "{:<34} {:>8} {:>8} {:>8} {:>8}",
            "configuration", "min", "median", "max", "ratio"
        );
    }
}

/// One row of a loop table: min, median, max and the median over `base`.
pub fn row(label: &str, sorted: &[f64], base: f64) {
    let (min, max) = (sorted[0], sorted[sorted.len() - 1]);
    let median = median(sorted);
    println!(
        "{label:<34} {min:>8.1} {median:>8.1} {max:>8.1} {:>8.2}",
        median / base
    );
}

/// User plus system CPU seconds of process `pid` so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat_cpu_seconds(&stat)
}

/// User plus system CPU seconds in the text of a `/proc/.../stat` file
/// (a process's or a thread's).
pub fn stat_cpu_seconds(stat: &str) -> f64 {
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    // /proc reports in USER_HZ, 100 on every Linux ABI weft runs on.
    ticks / 100.0
}

pub fn median(sorted: &[f64]) -> f64 {
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// A tracer process running alongside the loop.
pub struct Tracer {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Tracer {
    /// Starts `argv` and waits until a line of its output contains `ready`.
    pub fn start(argv: &[String], ready: &str) -> Result<Self> {
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("failed to start {}", argv[0]))?;
        let (tx, lines) = mpsc::channel();
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
            child.stderr.take().map(|p| Box::new(p) as _),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        drop(tx);
        let tracer = Self { child, lines };
        let mut seen = Vec::new();
        loop {
            let line = tracer
                .lines
                .recv_timeout(Duration::from_secs(60))
                .with_context(|| {
                    format!("{} did not become ready: {}", argv[0], seen.join("\n"))
                })?;
            seen.push(line.clone());
            if line.contains(ready) {
                // Let attachment settle before timing.
                thread::sleep(Duration::from_millis(300));
                return Ok(tracer);
            }
        }
    }

    /// Waits for the tracer to finish on its own; returns what it printed.
    pub fn wait(mut self) -> Result<Vec<String>> {
        let status = self.child.wait()?;
        let lines: Vec<String> = self.lines.iter().collect();
        if !status.success() {
            bail!("tracer exited with {status}: {}", lines.join("\n"));
        }
        Ok(lines)
    }

    /// The tracer's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the tracer with SIGINT; returns what it printed.
    pub fn interrupt(mut self) -> Result<Vec<String>> {
        exec(Command::new("kill").args(["-INT", &self.child.id().to_string()]))?;
        let status = self.child.wait()?;
        let lines: Vec<String> = self.lines.iter().collect();
        if !status.success() {
            bail!("tracer exited with {status}: {}", lines.join("\n"));
        }
        Ok(lines)
    }

    /// Stops the tracer with SIGINT; returns weft's final lost count if it printed one.
    fn stop(self) -> Result<Option<u64>> {
        let lines = self.interrupt()?;
        Ok(lines
            .iter()
            .filter(|line| line.contains("\"kind\":\"total\""))
            .find_map(|line| json_u64(line, "lost")))
    }
}

/// The unsigned integer value of `"key":` in a flat JSON line.
fn json_u64(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(&format!("\"{key}\":"))? + key.len() + 3..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_u64_finds_key() {
        let line = r#"{"kind":"total","lost":42,"ring_full":3}"#;
        assert_eq!(json_u64(line, "lost"), Some(42));
        assert_eq!(json_u64(line, "missing"), None);
    }
}
