//! `cargo xtask bench triggers`: what triggers cost, in one run — the
//! getppid loop under `weft record` without triggers and with three that
//! test every record, and the time from a matching record (a 100 ms
//! nanosleep after each run) to its window being pinned.

use std::process::Command;

use anyhow::{Context as _, Result};

use crate::{
    bench_loop::{Config, Loop, build, cpu_seconds, measure_loop, median, row},
    exec::{output, workspace_root},
};

/// The window kept before and after a match, in ms.
const KEEP_MS: i64 = 1;

/// Three triggers on every syscall record; the first matches the slow sleep.
const TRIGGERS: [&str; 3] = [
    r#"syscalls where name = "nanosleep" and dur > 50ms"#,
    "syscalls where ret = -5",
    r#"syscalls where name in ("fsync", "fdatasync") and dur > 1s"#,
];

pub fn run(options: &Loop) -> Result<()> {
    let bins = build()?;
    let workload = workspace_root().join("target/release/weft-workload");
    options.header("triggers");
    let dir = std::env::temp_dir().join(format!("weft-bench-triggers-{}", std::process::id()));
    let mut medians = Vec::new();
    let mut per_record = Vec::new();
    for (label, triggers) in [
        ("weft record", &[][..]),
        ("weft record, 3 triggers", &TRIGGERS[..]),
    ] {
        let _ = std::fs::remove_dir_all(&dir);
        let mut argv = vec![
            bins.weft.clone(),
            "record".into(),
            "--sources".into(),
            "syscalls".into(),
            "-o".into(),
            dir.display().to_string(),
        ];
        for trigger in triggers {
            argv.extend(["--trigger".into(), (*trigger).to_owned()]);
        }
        // Short windows: each slow sleep below fires on its own.
        argv.push(format!("--keep=-{KEEP_MS}ms..+{KEEP_MS}ms"));
        let config = Config {
            label: "record",
            tracer: Some((argv, "weft: recording")),
            syscall: "getppid",
        };
        let (samples, tracer) = measure_loop(&config, &bins, options.runs, options.calls)?;
        // One slow sleep per run's worth of matches, for the pin latency.
        for _ in 0..options.runs {
            slow_sleep(&workload)?;
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let tracer = tracer.context("weft record runs")?;
        let cpu = cpu_seconds(tracer.pid()) * 1e9;
        let lines = tracer.interrupt()?;
        // The ratio is to the run without triggers.
        row(
            label,
            &samples,
            medians.first().copied().unwrap_or(median(&samples)),
        );
        let records = lines
            .iter()
            .rev()
            .find(|l| l.starts_with("weft: recorded"))
            .context("weft printed no summary")?;
        println!("    {records}");
        let count: f64 = records
            .split_whitespace()
            .nth(2)
            .and_then(|n| n.parse().ok())
            .context("no record count")?;
        println!("    weft's CPU per record: {:.1} ns", cpu / count);
        medians.push(median(&samples));
        per_record.push(cpu / count);
        if !triggers.is_empty() {
            pin_latency(&bins.weft, &dir)?;
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "  slowdown with 3 triggers: {:.3} (target <= 1.05); trigger evaluation {:.1} ns of weft's CPU per record",
        medians[1] / medians[0],
        per_record[1] - per_record[0]
    );
    Ok(())
}

/// One 100 ms nanosleep by `weft-workload` (started by a byte on stdin).
fn slow_sleep(workload: &std::path::Path) -> Result<()> {
    use std::io::Write as _;
    let mut child = Command::new(workload)
        .arg("nanosleep:100:1")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .context("failed to start weft-workload")?;
    child.stdin.take().context("piped stdin")?.write_all(b"g")?;
    child.wait()?;
    Ok(())
}

/// Time from each matching record's own timestamp to its window's pin
/// (its arrival: the window's start plus the time kept before it).
fn pin_latency(weft: &str, dir: &std::path::Path) -> Result<()> {
    let text = output(Command::new(weft).args([
        "query",
        "--json",
        &dir.display().to_string(),
        "triggers where trigger = 1",
    ]))?;
    let mut latencies: Vec<f64> = text
        .lines()
        .filter_map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).ok()?;
            let pinned = row["start"].as_i64()? + KEEP_MS * 1_000_000;
            Some((pinned - row["time"].as_i64()?) as f64 / 1e6)
        })
        .collect();
    latencies.sort_by(f64::total_cmp);
    println!(
        "  match to pin: {} firings, median {:.1} ms, max {:.1} ms (target <= 100 ms)",
        latencies.len(),
        median(&latencies),
        latencies.last().copied().unwrap_or_default()
    );
    Ok(())
}
