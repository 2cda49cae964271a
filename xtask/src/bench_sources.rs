//! `cargo xtask bench sources`: for each event source alone, the rate one
//! core generates (`weft-stress` pinned to CPU 0) with what weft received,
//! lost and spent in CPU; then the probe effect of net with and without
//! conns, of sched with and without the stacks it takes at each switch-out
//! (and the profile's samples), and of every source at once, on a getppid
//! loop, on context switches (a pipe ping-pong on one CPU) and on Redis
//! over `lo`, as ratios against the same workloads untraced in the same run.

use std::{path::PathBuf, process::Command, time::Instant};

use anyhow::{Context as _, Result, bail};

use crate::{
    bench_loop::{Tracer, cpu_seconds, median},
    exec::{output, workspace_root},
    run::{build_release, build_weft_release},
    setup,
};

#[derive(clap::Args)]
pub struct Options {
    /// Runs per probe-effect configuration.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Events per stress run, in thousands.
    #[arg(long, default_value_t = 300)]
    thousands: u64,
    /// Another build's weft binary, whose `weft record` takes turns with
    /// this build's in each probe-effect run: a change's cost to the
    /// traced workloads, measured in one run.
    #[arg(long, value_name = "WEFT")]
    baseline: Option<String>,
}

struct Bins {
    weft: String,
    stress: String,
    syscall_loop: String,
}

/// Redis listens here during the benchmark.
const REDIS_PORT: &str = "6391";

pub fn run(options: &Options) -> Result<()> {
    setup::run()?;
    setup::install_packages(&["redis-server", "redis-tools"])?;
    let weft = build_weft_release()?;
    build_release(&["--package", "weft-tests", "--bins"])?;
    let release = workspace_root().join("target/release");
    let bins = Bins {
        weft,
        stress: release.join("weft-stress").display().to_string(),
        syscall_loop: release.join("weft-syscall-loop").display().to_string(),
    };
    let scratch = workspace_root().join("target/bench/sources");
    std::fs::create_dir_all(&scratch)?;
    let file = scratch.join("stress-file");
    std::fs::write(&file, vec![0u8; 64 << 20])?;
    stress_table(&bins, options, &scratch, &file)?;
    probe_effect(&bins, options, &scratch)
}

/// One source alone under its generator.
fn stress_table(
    bins: &Bins,
    options: &Options,
    scratch: &std::path::Path,
    file: &std::path::Path,
) -> Result<()> {
    let n = options.thousands * 1000;
    let path = file.display().to_string();
    // Direct reads are slow (a real disk); a tenth as many.
    let cases = [
        ("sched", "switches", n, ""),
        ("net", "udp", n, ""),
        ("pagecache", "lookups", n, path.as_str()),
        ("block", "direct", n / 10, path.as_str()),
        ("app", "app", n, ""),
    ];
    println!(
        "sources alone: one generator pinned to CPU 0 ({} k events each)",
        options.thousands
    );
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>8} {:>10}",
        "source", "generated/s", "received", "received/s", "lost", "weft CPU"
    );
    for (source, kind, count, path) in cases {
        let dir = fresh(scratch, &format!("stress-{source}"));
        let tracer = record(
            &bins.weft,
            &dir,
            &["--sources", source, "--interface", "lo"],
        )?;
        let cpu_before = cpu_seconds(tracer.pid());
        let start = Instant::now();
        let seconds: f64 = output(
            Command::new("taskset")
                .args(["-c", "0", &bins.stress, kind, &count.to_string()])
                .args((!path.is_empty()).then_some(path)),
        )?
        .trim()
        .parse()
        .context("weft-stress printed no time")?;
        let elapsed = start.elapsed().as_secs_f64();
        let cpu = cpu_seconds(tracer.pid()) - cpu_before;
        tracer.interrupt()?;
        let losses = &session_losses(&dir)?[source];
        let (received, lost) = (field(losses, "received")?, field(losses, "lost")?);
        println!(
            "{source:<10} {:>12.0} {received:>12} {:>12.0} {lost:>8} {:>9.0}%",
            count as f64 / seconds,
            received as f64 / elapsed,
            100.0 * cpu / elapsed,
        );
    }
    Ok(())
}

/// The probe-effect configurations: a label and `weft record`'s sources
/// (none: untraced).
const EFFECTS: [(&str, Option<&str>); 7] = [
    ("untraced", None),
    // What conns (beside net by default) costs per packet.
    ("net without conns", Some("net,-conns")),
    ("net with conns", Some("net")),
    // What the stacks at each switch-out and the samples cost.
    ("sched", Some("sched")),
    ("sched,stacks", Some("sched,stacks")),
    (
        "sched,block,pagecache,net",
        Some("sched,block,pagecache,net"),
    ),
    ("all (syscalls too)", Some("all")),
];

/// The getppid loop, context switches and Redis, untraced and under every
/// source; with a baseline, its `weft record` and this build's in turns.
fn probe_effect(bins: &Bins, options: &Options, scratch: &std::path::Path) -> Result<()> {
    let mut redis = Command::new("taskset")
        .args([
            "-c",
            "1",
            "redis-server",
            "--port",
            REDIS_PORT,
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .context("failed to start redis-server")?;
    std::thread::sleep(std::time::Duration::from_millis(500));
    let result = (|| -> Result<()> {
        println!(
            "probe effect: median of {} runs (lower is better){}",
            options.runs,
            if options.baseline.is_some() {
                "; each run starts this build's and the baseline's weft in turns"
            } else {
                ""
            }
        );
        let mut builds = vec![("", bins.weft.as_str())];
        builds.extend(options.baseline.as_deref().map(|b| (" (baseline)", b)));
        let mut rows = Vec::new();
        for (label, sources) in EFFECTS {
            let builds = if sources.is_some() {
                &builds[..]
            } else {
                &builds[..1]
            };
            let mut runs = vec![Effect::default(); builds.len()];
            for _ in 0..options.runs {
                for ((_, weft), effect) in builds.iter().zip(&mut runs) {
                    effect.measure(bins, weft, sources, &fresh(scratch, "effect"))?;
                }
            }
            for ((suffix, _), effect) in builds.iter().zip(runs) {
                let row = effect.medians();
                println!(
                    "  {:<28} getppid {:>7.1} ns/call   switch {:>7.0} ns   redis {:>7.2} us/request   lost {}",
                    format!("{label}{suffix}"),
                    row[0],
                    row[1],
                    row[2],
                    if sources.is_some() {
                        effect.lost.to_string()
                    } else {
                        "-".into()
                    },
                );
                rows.push((format!("{label}{suffix}"), row));
            }
        }
        let base = rows[0].1;
        println!("ratios against untraced:");
        for (label, row) in &rows[1..] {
            println!(
                "  {label:<28} getppid {:.2}   switch {:.2}   redis {:.2}",
                row[0] / base[0],
                row[1] / base[1],
                row[2] / base[2]
            );
        }
        if options.baseline.is_some() {
            // Rows come in pairs, this build's then the baseline's.
            println!(
                "probe effect (traced minus untraced), this build over the baseline \
                 (-: the baseline's under 5 %):"
            );
            for pair in rows[1..].chunks(2) {
                let [(label, ours), (_, theirs)] = pair else {
                    continue;
                };
                // Where the baseline costs a workload under 5 %, the
                // ratio of two such small differences is noise: left out.
                let effect = |i: usize| {
                    let (ours, theirs) = (ours[i] - base[i], theirs[i] - base[i]);
                    if theirs > 0.05 * base[i] {
                        format!("{:.2}", ours / theirs)
                    } else {
                        "-".into()
                    }
                };
                println!(
                    "  {label:<28} getppid {:>5}   switch {:>5}   redis {:>5}",
                    effect(0),
                    effect(1),
                    effect(2)
                );
            }
        }
        Ok(())
    })();
    let _ = redis.kill();
    let _ = redis.wait();
    result
}

/// One configuration's runs: getppid ns per call, ns per switch round
/// trip, Redis us per request, and the records weft lost in all.
#[derive(Clone, Default)]
struct Effect {
    samples: [Vec<f64>; 3],
    lost: u64,
}

impl Effect {
    /// One run: `weft record` of `sources` by `weft` (none: untraced)
    /// while each workload runs once.
    fn measure(
        &mut self,
        bins: &Bins,
        weft: &str,
        sources: Option<&str>,
        dir: &std::path::Path,
    ) -> Result<()> {
        let tracer = match sources {
            Some(sources) => Some(record(
                weft,
                dir,
                &["--sources", sources, "--interface", "lo"],
            )?),
            None => None,
        };
        self.samples[0].push(getppid_ns(bins)?);
        self.samples[1].push(switch_ns(bins)?);
        self.samples[2].push(redis_us_per_request()?);
        if let Some(tracer) = tracer {
            tracer.interrupt()?;
            self.lost += total_lost(dir)?;
        }
        Ok(())
    }

    fn medians(&self) -> [f64; 3] {
        self.samples.clone().map(|mut values| {
            values.sort_by(f64::total_cmp);
            median(&values)
        })
    }
}

fn getppid_ns(bins: &Bins) -> Result<f64> {
    output(Command::new("taskset").args(["-c", "0", &bins.syscall_loop, "getppid", "2000000"]))?
        .trim()
        .parse()
        .context("the loop printed no number")
}

/// Nanoseconds per round trip of a pipe ping-pong between two threads on
/// CPU 0: two context switches each.
fn switch_ns(bins: &Bins) -> Result<f64> {
    let rounds = 200_000;
    let seconds: f64 = output(Command::new("taskset").args([
        "-c",
        "0",
        &bins.stress,
        "switches",
        &rounds.to_string(),
    ]))?
    .trim()
    .parse()
    .context("weft-stress printed no time")?;
    Ok(seconds * 1e9 / f64::from(rounds))
}

/// Microseconds per request of `redis-benchmark` GET/SET over `lo`.
fn redis_us_per_request() -> Result<f64> {
    let csv = output(Command::new("taskset").args([
        "-c",
        "0",
        "redis-benchmark",
        "-p",
        REDIS_PORT,
        "-n",
        "100000",
        "-c",
        "4",
        "-t",
        "set,get",
        "--csv",
    ]))?;
    // Lines: "test","rps",...; the mean of the tests' rates.
    let rates: Vec<f64> = csv
        .lines()
        .skip(1)
        .filter_map(|line| line.split(',').nth(1)?.trim_matches('"').parse().ok())
        .collect();
    if rates.is_empty() {
        bail!("redis-benchmark printed no rates: {csv}");
    }
    Ok(1e6 * rates.len() as f64 / rates.iter().sum::<f64>())
}

fn record(weft: &str, dir: &std::path::Path, extra: &[&str]) -> Result<Tracer> {
    let mut argv = vec![
        weft.to_owned(),
        "record".into(),
        "-o".into(),
        dir.display().to_string(),
    ];
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    Tracer::start(&argv, "weft: recording")
}

fn fresh(scratch: &std::path::Path, name: &str) -> PathBuf {
    let dir = scratch.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The per-source losses `weft record` wrote into the capture's `weft.json`.
fn session_losses(dir: &std::path::Path) -> Result<serde_json::Value> {
    let path = dir.join("weft.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("no {}", path.display()))?;
    let metadata: serde_json::Value = serde_json::from_str(&text)?;
    Ok(metadata["sessions"][0]["lost"].clone())
}

fn field(losses: &serde_json::Value, key: &str) -> Result<u64> {
    losses[key]
        .as_u64()
        .with_context(|| format!("no `{key}` in {losses}"))
}

/// Records lost by every source of a capture.
fn total_lost(dir: &std::path::Path) -> Result<u64> {
    let losses = session_losses(dir)?;
    let sources = losses.as_object().context("weft.json has no losses")?;
    sources.values().map(|l| field(l, "lost")).sum()
}
