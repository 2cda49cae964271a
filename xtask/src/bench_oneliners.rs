//! `cargo xtask bench oneliners`: `weft trace` against bpftrace on the same
//! one-liners, in one run — the probe effect on a getppid loop pinned to
//! CPU 0, and the start-up time to the first event.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::bench_loop::{Config, Loop, Rounds, build, interleaved, median, per_round, row, sorted};

/// The one-liners measured, in the spelling both tools accept.
const PROGRAMS: [(&str, &str); 5] = [
    (
        "count by comm",
        "tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }",
    ),
    (
        "sum by comm",
        "tracepoint:raw_syscalls:sys_exit { @[comm] = sum(args->ret); }",
    ),
    (
        "lhist by comm",
        "tracepoint:raw_syscalls:sys_exit { @[comm] = lhist(args->ret, 0, 10000, 500); }",
    ),
    (
        "return hist by comm",
        "tracepoint:raw_syscalls:sys_exit { @[comm] = hist(args->ret); }",
    ),
    (
        "latency hist",
        "tracepoint:raw_syscalls:sys_enter { @start[tid] = nsecs; } \
         tracepoint:raw_syscalls:sys_exit /@start[tid]/ { @ns = hist(nsecs - @start[tid]); delete(@start[tid]); }",
    ),
];

#[derive(clap::Args)]
pub struct Options {
    #[command(flatten)]
    pub loop_: Loop,
    /// Another weft binary (a build before a change) measured in the same
    /// run as `weft (baseline)`, so a change's cost is one run's difference.
    #[arg(long, value_name = "WEFT")]
    pub baseline: Option<String>,
}

pub fn run(
    Options {
        loop_: options,
        baseline,
    }: &Options,
) -> Result<()> {
    let bins = build()?;
    options.header("oneliners");
    println!("(rounds interleave the configurations; each tracer starts afresh per round)");
    for (name, program) in PROGRAMS {
        let mut tools = vec![
            (
                "bpftrace",
                vec!["bpftrace".to_string(), "-e".into(), program.into()],
            ),
            (
                "weft",
                vec![bins.weft.clone(), "trace".into(), program.into()],
            ),
        ];
        if let Some(baseline) = baseline {
            let argv = vec![baseline.clone(), "trace".into(), program.into()];
            tools.push(("weft (baseline)", argv));
        }
        let mut configs = vec![Config {
            label: "untraced",
            tracer: None,
            syscall: "getppid",
        }];
        configs.extend(tools.into_iter().map(|(tool, argv)| Config {
            label: tool,
            tracer: Some((argv, "Attaching")),
            syscall: "getppid",
        }));
        let rounds = interleaved(&configs, &bins, options.runs, options.calls)?;
        let untraced = &rounds[0];
        let base = median(&untraced.sorted());
        row(&format!("{name}, untraced"), &untraced.sorted(), base);
        for (config, tool) in configs.iter().zip(&rounds).skip(1) {
            row(&format!("{name}, {}", config.label), &tool.sorted(), base);
            if config.label.starts_with("weft") {
                print_losses(&tool.printed);
            }
        }
        print_ratio(
            &format!("{name}: weft/bpftrace probe effect"),
            &effect_ratio(&rounds[2], &rounds[1], untraced),
            " (target <= 0.40)",
        );
        if let Some(before) = rounds.get(3) {
            print_ratio(
                &format!("{name}: weft/baseline probe effect"),
                &effect_ratio(&rounds[2], before, untraced),
                "",
            );
        }
    }
    startup(&bins.weft, options.runs)
}

/// Each round's probe effect (traced minus untraced ns per call) of
/// `tool` over that of `against` in the same round, sorted.
fn effect_ratio(tool: &Rounds, against: &Rounds, untraced: &Rounds) -> Vec<f64> {
    let base = per_round(against, untraced, |a, u| a - u);
    let traced = per_round(tool, untraced, |t, u| t - u).into_iter();
    sorted(
        traced
            .zip(base)
            .map(|(t, a)| t / a.max(f64::EPSILON))
            .collect(),
    )
}

/// weft's loss line of the last round, and how many rounds lost events.
fn print_losses(printed: &[Vec<String>]) {
    let lines: Vec<Option<&String>> = printed
        .iter()
        .map(|lines| lines.iter().rev().find(|l| l.contains(" lost ")))
        .collect();
    let lossy = lines
        .iter()
        .filter(|line| !line.is_some_and(|l| l.contains(" 0 lost ")))
        .count();
    println!(
        "    {} (rounds that lost events or printed no loss line: {lossy} of {})",
        lines
            .last()
            .copied()
            .flatten()
            .map_or("weft printed no loss line", String::as_str),
        lines.len()
    );
}

/// A ratio's median over the rounds, and its least and greatest.
fn print_ratio(label: &str, sorted: &[f64], target: &str) {
    println!(
        "  {label} {:.2}{target}, rounds {:.2} to {:.2}",
        median(sorted),
        sorted[0],
        sorted[sorted.len() - 1]
    );
}

/// Time from starting each tool to its first event: the program prints on
/// the first getppid and exits, while this process calls getppid every
/// millisecond.
fn startup(weft: &str, runs: usize) -> Result<()> {
    let program = r#"tracepoint:syscalls:sys_enter_getppid { printf("first\n"); exit(); }"#;
    let mut times = [Vec::new(), Vec::new()];
    for _ in 0..runs {
        for (i, argv) in [
            vec!["bpftrace", "-e", program],
            vec![weft, "trace", program],
        ]
        .iter()
        .enumerate()
        {
            times[i].push(first_event(argv)?.as_secs_f64() * 1000.0);
        }
    }
    for t in &mut times {
        t.sort_by(f64::total_cmp);
    }
    println!("start-up to first event, ms (lower is better)");
    row("bpftrace", &times[0], median(&times[0]));
    row("weft", &times[1], median(&times[0]));
    println!(
        "  bpftrace/weft start-up {:.2} (target >= 2.00)",
        median(&times[0]) / median(&times[1])
    );
    Ok(())
}

fn first_event(argv: &[&str]) -> Result<Duration> {
    let start = Instant::now();
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("failed to start {}", argv[0]))?;
    let stdout = child.stdout.take().context("piped stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("first") {
                let _ = tx.send(Instant::now());
                return;
            }
        }
    });
    let seen = loop {
        // A getppid system call (glibc does not cache it).
        let _ = std::os::unix::process::parent_id();
        if let Ok(at) = rx.recv_timeout(Duration::from_millis(1)) {
            break at;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            bail!("{} saw no event within 60 s", argv[0]);
        }
    };
    child.wait()?;
    Ok(seen - start)
}
