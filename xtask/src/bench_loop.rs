//! What the benches that time the getppid loop share: the binaries, the
//! loop under a tracer, tracers' processes, and rows of min/median/max
//! against a baseline of the same run.

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

pub struct Bins {
    pub weft: String,
    pub syscall_loop: String,
    pub floor: String,
    pub object: String,
}

pub fn build() -> Result<Bins> {
    setup::run()?;
    setup::install_packages(&["bpftrace"])?;
    mount_tracefs()?;
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

/// Mounts tracefs where a fresh boot has not: bpftrace finds tracepoints
/// there and, unlike weft, does not mount it itself.
fn mount_tracefs() -> Result<()> {
    if std::path::Path::new("/sys/kernel/tracing/events").is_dir() {
        return Ok(());
    }
    exec(Command::new("mount").args(["-t", "tracefs", "tracefs", "/sys/kernel/tracing"]))
}

/// One measured configuration: an optional tracer, and the syscall the loop makes.
pub struct Config {
    pub label: &'static str,
    pub tracer: Option<(Vec<String>, &'static str)>,
    pub syscall: &'static str,
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
    Ok((sorted(samples), tracer))
}

/// One configuration's runs from [`interleaved`]: ns per call and what its
/// tracer printed, both in round order.
#[derive(Default)]
pub struct Rounds {
    pub samples: Vec<f64>,
    pub printed: Vec<Vec<String>>,
}

impl Rounds {
    /// The samples, sorted.
    pub fn sorted(&self) -> Vec<f64> {
        sorted(self.samples.clone())
    }
}

/// Runs the loop once under each configuration in turn, for `runs` rounds,
/// each tracer started afresh and stopped (SIGINT) after its run. The
/// machine's speed drifts (other guests on the host) over a bench's
/// minutes; interleaved, a drift falls on every configuration alike, and
/// the configurations of one round compare with each other ([`per_round`]).
pub fn interleaved(
    configs: &[Config],
    bins: &Bins,
    runs: usize,
    calls: u32,
) -> Result<Vec<Rounds>> {
    let mut all: Vec<Rounds> = configs.iter().map(|_| Rounds::default()).collect();
    for _ in 0..runs {
        for (config, rounds) in configs.iter().zip(&mut all) {
            let (samples, tracer) = measure_loop(config, bins, 1, calls)?;
            rounds.samples.push(samples[0]);
            rounds.printed.push(match tracer {
                Some(tracer) => tracer
                    .interrupt()
                    .with_context(|| format!("stopping the tracer of {}", config.label))?,
                None => Vec::new(),
            });
        }
    }
    Ok(all)
}

/// `f` of each round's samples of `a` and `b`, in round order.
pub fn per_round(a: &Rounds, b: &Rounds, f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    a.samples
        .iter()
        .zip(&b.samples)
        .map(|(a, b)| f(*a, *b))
        .collect()
}

pub fn sorted(mut values: Vec<f64>) -> Vec<f64> {
    values.sort_by(f64::total_cmp);
    values
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

    /// Stops the tracer with SIGINT; returns what it printed. bpftrace 0.17
    /// now and then misses a Ctrl-C that comes just before it blocks, and
    /// waits there for good: it is sent another every 5 s (a round then
    /// waited without end).
    pub fn interrupt(mut self) -> Result<Vec<String>> {
        let pid = self.child.id().to_string();
        let interrupt = || exec(Command::new("kill").args(["-INT", &pid]));
        interrupt()?;
        let mut again = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let status = loop {
            if let Some(status) = self.child.try_wait()? {
                break status;
            }
            if std::time::Instant::now() > again {
                eprintln!("note: the tracer did not end 5 s after Ctrl-C: another Ctrl-C");
                interrupt()?;
                again += std::time::Duration::from_secs(5);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let lines: Vec<String> = self.lines.iter().collect();
        if !status.success() {
            bail!("tracer exited with {status}: {}", lines.join("\n"));
        }
        Ok(lines)
    }

    /// Stops the tracer with SIGINT; returns weft's final lost count if it printed one.
    pub fn stop(self) -> Result<Option<u64>> {
        Ok(stat_lost(&self.interrupt()?))
    }
}

/// The final lost count in the lines `weft stat --json` printed, if any.
pub fn stat_lost(lines: &[String]) -> Option<u64> {
    lines
        .iter()
        .filter(|line| line.contains("\"kind\":\"total\""))
        .find_map(|line| json_u64(line, "lost"))
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
