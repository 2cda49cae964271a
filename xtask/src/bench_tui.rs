//! `cargo xtask bench tui`: what the terminal UI costs while the getppid
//! loop runs at full speed under capture, in one run — the loop untraced,
//! under headless `weft record`, and under `weft tui` in a tmux terminal
//! showing the latency view; the UI's frame times and the CPU its threads
//! used.

use std::{
    collections::HashMap,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    bench_loop::{Config, Loop, build, measure_loop, median, row, stat_cpu_seconds},
    exec::output,
    setup,
};

/// The tmux server the UI runs in.
const SOCKET: &str = "weft-bench-tui";

pub fn run(options: &Loop) -> Result<()> {
    let bins = build()?;
    setup::install_packages(&["tmux"])?;
    options.header("tui");
    let loop_only = Config {
        label: "untraced",
        tracer: None,
        syscall: "getppid",
    };
    let (base, _) = measure_loop(&loop_only, &bins, options.runs, options.calls)?;
    row("untraced", &base, median(&base));

    let dir = std::env::temp_dir().join(format!("weft-bench-tui-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let headless = Config {
        label: "record",
        tracer: Some((
            vec![
                bins.weft.clone(),
                "record".into(),
                "--sources".into(),
                "syscalls".into(),
                "-o".into(),
                dir.display().to_string(),
            ],
            "weft: recording",
        )),
        syscall: "getppid",
    };
    let (recorded, tracer) = measure_loop(&headless, &bins, options.runs, options.calls)?;
    let lines = tracer.context("weft record runs")?.interrupt()?;
    row("weft record (headless)", &recorded, median(&base));
    println!("    {}", last_with(&lines, "weft: recorded"));
    let _ = std::fs::remove_dir_all(&dir);

    let command = format!(
        "{} tui --sources syscalls --frame-stats -o {}; echo weft-exit=$?; sleep 600",
        bins.weft,
        dir.display()
    );
    tmux(&["new-session", "-d", "-x", "200", "-y", "50", &command])?;
    let result = with_ui(options, &bins, &base, &recorded);
    let _ = tmux(&["kill-server"]);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The loop with the UI open on the latency view, then the UI's figures.
fn with_ui(
    options: &Loop,
    bins: &crate::bench_loop::Bins,
    base: &[f64],
    recorded: &[f64],
) -> Result<()> {
    wait_for("the overview", |s| s.contains("1 Overview"))?;
    tmux(&["send-keys", "-t", "0", "2"])?;
    std::thread::sleep(Duration::from_millis(500));
    let pid = ui_pid()?;
    let before = thread_seconds(&pid);
    let started = Instant::now();
    let loop_only = Config {
        label: "untraced",
        tracer: None,
        syscall: "getppid",
    };
    let (samples, _) = measure_loop(&loop_only, bins, options.runs, options.calls)?;
    let elapsed = started.elapsed().as_secs_f64();
    let after = thread_seconds(&pid);
    tmux(&["send-keys", "-t", "0", "q"])?;
    let screen = wait_for("weft to exit", |s| s.contains("weft-exit="))?;
    row("weft tui (latency view)", &samples, median(base));
    println!(
        "    {}",
        last_with(&screen_lines(&screen), "weft: recorded")
    );
    println!(
        "  loop slowdown, tui / headless record: {:.3} (target <= 1.05)",
        median(&samples) / median(recorded)
    );
    println!(
        "  frames: {} (target: median <= 16 ms, max <= 100 ms)",
        last_with(&screen_lines(&screen), "frames drawn").trim_start_matches("weft: ")
    );
    let cpu = |names: &[&str]| {
        let used: f64 = names
            .iter()
            .map(|n| after.get(*n).unwrap_or(&0.0) - before.get(*n).unwrap_or(&0.0))
            .sum();
        used / elapsed * 100.0
    };
    println!(
        "  CPU over {elapsed:.1}s: UI threads (draw + queries) {:.1}% of a core, recorder {:.1}%",
        cpu(&["weft", "weft-tui-query"]),
        cpu(&["weft-record"])
    );
    Ok(())
}

pub fn last_with(lines: &[String], text: &str) -> String {
    lines
        .iter()
        .rev()
        .find(|l| l.contains(text))
        .cloned()
        .unwrap_or_else(|| format!("(no line with `{text}`)"))
}

pub fn screen_lines(screen: &str) -> Vec<String> {
    screen.lines().map(str::to_owned).collect()
}

pub fn tmux(args: &[&str]) -> Result<String> {
    output(
        Command::new("tmux")
            .args(["-L", SOCKET, "-f", "/dev/null"])
            .args(args),
    )
}

pub fn wait_for(what: &str, done: impl Fn(&str) -> bool) -> Result<String> {
    let start = Instant::now();
    loop {
        let screen = tmux(&["capture-pane", "-p", "-J", "-t", "0"])?;
        if done(&screen) {
            return Ok(screen);
        }
        if start.elapsed() > Duration::from_secs(60) {
            bail!("waited 60 s for {what}; the screen:\n{screen}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The pid of `weft`, the child of the pane's shell.
pub fn ui_pid() -> Result<String> {
    let shell = tmux(&["list-panes", "-F", "#{pane_pid}"])?;
    let pid = output(Command::new("pgrep").args(["-P", shell.trim(), "-x", "weft"]))?;
    Ok(pid.trim().to_owned())
}

/// CPU seconds (user + system) used so far by each thread name of `pid`.
fn thread_seconds(pid: &str) -> HashMap<String, f64> {
    let mut seconds = HashMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return seconds;
    };
    for task in tasks.flatten() {
        let (Ok(name), Ok(stat)) = (
            std::fs::read_to_string(task.path().join("comm")),
            std::fs::read_to_string(task.path().join("stat")),
        ) else {
            continue;
        };
        *seconds.entry(name.trim_end().to_owned()).or_default() += stat_cpu_seconds(&stat);
    }
    seconds
}
