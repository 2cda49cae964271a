//! `cargo xtask bench probe-effect`: the cost per syscall untraced, under
//! `weft stat`, under bpftrace, and with empty programs on the same hooks
//! (the floor); then what each of weft's programs and the empty ones cost
//! per run, by the kernel's own accounting.

use std::process::Command;

use anyhow::{Context as _, Result};

use crate::bench_loop::{
    Bins, Config, Rounds, build, interleaved, measure_loop, median, per_round, sorted, stat_lost,
};
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
    println!("(rounds interleave the configurations; each tracer starts afresh per round)");
    let rounds = interleaved(&configs, &bins, options.runs, options.calls)?;
    for (config, rounds) in configs.iter().zip(&rounds) {
        let samples = rounds.sorted();
        // weft's losses over every round; the other tracers print none.
        let lost: Option<u64> = rounds.printed.iter().map(|lines| stat_lost(lines)).sum();
        println!(
            "{:<40} {:>8.1} {:>8.1} {:>8.1} {:>10}",
            config.label,
            samples[0],
            median(&samples),
            samples[samples.len() - 1],
            lost.map_or_else(|| "-".to_owned(), |l| l.to_string())
        );
    }
    print_ratios(&rounds);
    per_program(&bins, &configs, options.calls)
}

/// What each program costs per run by the kernel's own accounting
/// (`kernel.bpf_stats_enabled`, read with bpftool): weft's two programs
/// against the empty ones. The stats read the clock around every run,
/// which the empty programs' figure is; what weft's programs add above it
/// is their work. Then what that work is made of: one program per
/// operation of the probe, each beside an empty one on `sys_enter`.
fn per_program(bins: &Bins, configs: &[Config], calls: u32) -> Result<()> {
    setup::install_packages(&["bpftool"])?;
    let _stats = Stats::enable()?;
    println!("per program, ns per run (one run of {calls} calls with kernel.bpf_stats_enabled):");
    let config = |label: &str| {
        configs
            .iter()
            .find(|c| c.label.starts_with(label))
            .context("the configurations list the weft and floor runs")
    };
    let mut work = Vec::new();
    for (config, names) in [
        (config("b ")?, ["syscall_enter", "syscall_exit"]),
        (config("d ")?, ["floor_raw_enter", "floor_raw_exit"]),
        (config("d4")?, ["floor_pairing_enter", "floor_pairing_exit"]),
    ] {
        let costs = run_costs(config, bins, calls, &names)?;
        for (name, ns) in names.iter().zip(&costs) {
            println!("  {name:<16} {ns:>8.1}");
        }
        work.push(costs.iter().sum::<f64>());
    }
    println!(
        "  weft's programs do {:.1} ns of work per syscall above the empty ones, {:.1} above exact pairing",
        work[0] - work[1],
        work[0] - work[2]
    );
    operation_costs(bins, calls)
}

/// The operations of the syscall probe (`ebpf/src/floor.rs`'s `cost_*`
/// programs) and how many times its two programs make each per syscall;
/// the last two are for comparison: what a record would cost were each
/// sent alone, and a counter the probe bumps only on a loss.
const OPERATIONS: &[(&str, &str, f64)] = &[
    ("cost_pid_tgid", "bpf_get_current_pid_tgid", 1.0),
    ("cost_ktime", "bpf_ktime_get_ns", 2.0),
    ("cost_task_storage", "task storage get", 2.0),
    ("cost_cpu", "bpf_get_smp_processor_id", 1.0),
    ("cost_batch", "record batched, batch to the ring", 1.0),
    ("cost_ring", "(a record alone to the ring)", 0.0),
    ("cost_counter", "(per-CPU counter, atomic add)", 0.0),
];

fn operation_costs(bins: &Bins, calls: u32) -> Result<()> {
    let config = Config {
        label: "operations",
        tracer: Some(floor(bins, "costs")),
        syscall: "getppid",
    };
    let mut names = vec!["floor_raw_enter"];
    names.extend(OPERATIONS.iter().map(|(name, ..)| *name));
    let costs = run_costs(&config, bins, calls, &names)?;
    println!("each operation alone, ns per run above the empty program:");
    let mut sum = 0.0;
    for ((_, what, times), ns) in OPERATIONS.iter().zip(&costs[1..]) {
        let ns = ns - costs[0];
        println!("  {what:<32} {ns:>8.1}  x{times}");
        sum += ns * times;
    }
    println!("  the operations of one traced syscall add up to {sum:.1} ns");
    Ok(())
}

/// Runs the loop once under `config`'s tracer; what each program named
/// cost per run meanwhile.
fn run_costs(config: &Config, bins: &Bins, calls: u32, names: &[&str]) -> Result<Vec<f64>> {
    let (_, tracer) = measure_loop(config, bins, 1, calls)?;
    let costs = program_costs(names);
    if let Some(tracer) = tracer {
        tracer.stop()?;
    }
    costs
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

/// weft-floor attaching the `kind` of empty programs (or `costs`).
fn floor(bins: &Bins, kind: &str) -> (Vec<String>, &'static str) {
    (
        vec![bins.floor.clone(), bins.object.clone(), kind.to_owned()],
        "attached",
    )
}

/// The configurations, in the order `print_ratios` expects.
fn configs(bins: &Bins) -> Vec<Config> {
    let weft = |extra: &[&str]| {
        let mut cmd = vec![bins.weft.clone(), "stat".into(), "--json".into()];
        cmd.extend(extra.iter().map(|s| (*s).to_owned()));
        Some((cmd, "weft: tracing"))
    };
    let floor = |kind| Some(floor(bins, kind));
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
            "d4 exact pairing: 2 clocks + task storage",
            floor("pairing"),
            "getppid",
        ),
        config(
            "f  weft --syscall getppid (raw)",
            weft(&["--syscall", "getppid", "--attach", "raw"]),
            "getppid",
        ),
        config(
            "f2 weft --syscall getppid (per-syscall)",
            weft(&["--syscall", "getppid", "--attach", "syscall"]),
            "getppid",
        ),
        config("a' untraced getpid", None, "getpid"),
        config(
            "e  getpid, weft --syscall getppid (raw)",
            weft(&["--syscall", "getppid", "--attach", "raw"]),
            "getpid",
        ),
        config(
            "e2 getpid, weft --syscall getppid (tp)",
            weft(&["--syscall", "getppid", "--attach", "syscall"]),
            "getpid",
        ),
        config("g  untraced read (1 byte of /dev/zero)", None, "read"),
        config(
            "h  read, weft record --sources syscalls",
            Some(record(bins, "syscalls")),
            "read",
        ),
        config(
            "i  read, weft record --sources syscalls,args",
            Some(record(bins, "syscalls,args")),
            "read",
        ),
    ]
}

/// `weft record` of `sources` into a capture of the bench's own, kept
/// to 256 MiB (each round appends a session to it).
fn record(bins: &Bins, sources: &str) -> (Vec<String>, &'static str) {
    let dir = crate::exec::workspace_root().join(format!("target/bench/probe-{sources}"));
    let _ = std::fs::remove_dir_all(&dir);
    let cmd = [
        bins.weft.as_str(),
        "record",
        "-o",
        &dir.display().to_string(),
        "--sources",
        sources,
        "--max-disk",
        "256M",
        "--append",
    ];
    (cmd.map(str::to_owned).to_vec(), "weft: recording")
}

/// The median over the rounds of each round's ratio of two configurations.
fn print_ratios(rounds: &[Rounds]) {
    let [
        untraced,
        weft,
        bpftrace,
        floor,
        btf,
        tp,
        pairing,
        selected,
        selected_tp,
        untraced_other,
        other,
        other_tp,
        untraced_read,
        read_syscalls,
        read_args,
    ] = rounds
    else {
        unreachable!("rounds of every configuration")
    };
    println!("ratios, the median over the rounds of each round's ratio:");
    for (label, a, b) in [
        ("b/a  weft / untraced", weft, untraced),
        ("c/a  bpftrace / untraced", bpftrace, untraced),
        ("d/a  floor (raw_tp) / untraced", floor, untraced),
        ("b/d  weft / empty programs", weft, floor),
        ("b/d4 weft / exact pairing (target <= 1.1)", weft, pairing),
        ("d4/d exact pairing / empty programs", pairing, floor),
        ("d2/d tp_btf / raw_tp floor", btf, floor),
        ("d3/d tracepoint / raw_tp floor", tp, floor),
        (
            "f/a  --syscall, traced call / untraced, raw",
            selected,
            untraced,
        ),
        ("f2/a the same, per-syscall", selected_tp, untraced),
        (
            "e/a' --syscall getppid, getpid / untraced, raw",
            other,
            untraced_other,
        ),
        ("e2/a' the same, per-syscall", other_tp, untraced_other),
        (
            "h/g  read, recorded / untraced",
            read_syscalls,
            untraced_read,
        ),
        (
            "i/g  read, recorded with args / untraced",
            read_args,
            untraced_read,
        ),
        (
            "i/h  with args / without (default path)",
            read_args,
            read_syscalls,
        ),
    ] {
        let ratio = median(&sorted(per_round(a, b, |a, b| a / b)));
        println!("  {label:<48} {ratio:>5.2}");
    }
    let args_ns = median(&sorted(per_round(read_args, read_syscalls, |a, b| a - b)));
    println!(
        "  {:<48} {args_ns:>5.1}",
        "i-h  ns the args source adds per read"
    );
}
