//! `cargo xtask bench probe-effect`: the cost per syscall untraced, under
//! `weft stat`, under bpftrace, and with empty programs on the same hooks
//! (the floor); then what each of weft's programs and the empty ones cost
//! per run, by the kernel's own accounting.

use std::process::Command;

use anyhow::{Context as _, Result};

use crate::bench_loop::{Bins, Config, build, measure_loop, median};
use crate::setup;

#[derive(clap::Args)]
pub struct ProbeEffect {
    /// Runs per configuration.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Syscalls per run.
    #[arg(long, default_value_t = 3_000_000)]
    pub calls: u32,
}

/// bpftrace's per-syscall enter/exit latency histogram, the usual one-liner.
const BPFTRACE_LATENCY: &str = "tracepoint:raw_syscalls:sys_enter { @start[tid] = nsecs; } \
     tracepoint:raw_syscalls:sys_exit /@start[tid]/ { @ns[args->id] = hist(nsecs - @start[tid]); delete(@start[tid]); }";

pub fn run(options: &ProbeEffect) -> Result<()> {
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
    per_program(&bins, &configs, options.calls)
}

/// What each program costs per run by the kernel's own accounting
/// (`kernel.bpf_stats_enabled`, read with bpftool): weft's two programs
/// against the empty ones. The stats read the clock around every run,
/// which the empty programs' figure is; what weft's programs add above it
/// is their work.
fn per_program(bins: &Bins, configs: &[Config], calls: u32) -> Result<()> {
    setup::install_packages(&["bpftool"])?;
    let _stats = Stats::enable()?;
    println!("per program, ns per run (one run of {calls} calls with kernel.bpf_stats_enabled):");
    let mut work = Vec::new();
    for (label, names) in [
        ("b ", ["syscall_enter", "syscall_exit"]),
        ("d ", ["floor_raw_enter", "floor_raw_exit"]),
    ] {
        let config = configs
            .iter()
            .find(|c| c.label.starts_with(label))
            .context("the configurations list the weft and floor runs")?;
        let (_, tracer) = measure_loop(config, bins, 1, calls)?;
        let costs = program_costs(&names);
        if let Some(tracer) = tracer {
            tracer.stop()?;
        }
        let costs = costs?;
        for (name, ns) in names.iter().zip(&costs) {
            println!("  {name:<16} {ns:>8.1}");
        }
        work.push(costs.iter().sum::<f64>());
    }
    println!(
        "  weft's programs do {:.1} ns of work per syscall above the empty ones",
        work[0] - work[1]
    );
    Ok(())
}

/// ns per run of each program named, the most recently loaded of each name.
fn program_costs(names: &[&str]) -> Result<Vec<f64>> {
    let out = Command::new("bpftool")
        .args(["-j", "prog", "show"])
        .output()
        .context("running bpftool")?;
    let programs: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("reading bpftool's JSON")?;
    names
        .iter()
        .map(|name| {
            let program = programs
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["name"] == *name)
                .max_by_key(|p| p["id"].as_u64())
                .with_context(|| format!("no program {name} loaded"))?;
            let time = program["run_time_ns"].as_f64().unwrap_or(0.0);
            let runs = program["run_cnt"].as_f64().filter(|n| *n > 0.0);
            runs.map(|runs| time / runs)
                .with_context(|| format!("{name} has no runs counted"))
        })
        .collect()
}

/// `kernel.bpf_stats_enabled` on while it lives, as it was after.
struct Stats(String);

const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl Stats {
    fn enable() -> Result<Self> {
        let was = std::fs::read_to_string(BPF_STATS).context(BPF_STATS)?;
        std::fs::write(BPF_STATS, "1").context(BPF_STATS)?;
        Ok(Self(was))
    }
}

impl Drop for Stats {
    fn drop(&mut self) {
        let _ = std::fs::write(BPF_STATS, self.0.trim());
    }
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
