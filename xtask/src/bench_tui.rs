//! `cargo xtask bench tui`: what the terminal UI costs while the getppid
//! loop runs at full speed under capture, in one run — the loop untraced,
//! under headless `weft record`, and under `weft tui` in a tmux terminal
//! showing the latency view; the UI's frame times and the CPU its threads
//! used. Then the UI at a rate this machine cannot trace: a recorded flood
//! replayed (`weft tui --replay`) at `--replay-rate` records/s, each view's
//! time to fill and the UI threads' CPU; and the replay's capture, grown
//! to `--recording-records`, opened as a recording.

use std::{
    collections::HashMap,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    bench_loop::{Bins, Config, Loop, build, measure_loop, median, row, stat_cpu_seconds},
    exec::output,
    setup,
};

/// The tmux server the UI runs in.
const SOCKET: &str = "weft-bench-tui";

#[derive(clap::Args)]
pub struct Options {
    #[command(flatten)]
    pub runs: Loop,
    /// Records/s the recorded flood is replayed at.
    #[arg(long, default_value_t = 4_000_000)]
    pub replay_rate: u64,
    /// Seconds the UI's CPU is measured over in the replay.
    #[arg(long, default_value_t = 10)]
    pub replay_seconds: u64,
    /// Syscalls the replay's capture holds before it is opened as a
    /// recording.
    #[arg(long, default_value_t = 100_000_000)]
    pub recording_records: u64,
}

pub fn run(options: &Options) -> Result<()> {
    let bins = build()?;
    traced(&options.runs, &bins)?;
    replayed(options, &bins)
}

/// The UI beside the loop it traces.
fn traced(options: &Loop, bins: &Bins) -> Result<()> {
    setup::install_packages(&["tmux"])?;
    options.header("tui");
    let loop_only = Config {
        label: "untraced",
        tracer: None,
        syscall: "getppid",
    };
    let (base, _) = measure_loop(&loop_only, bins, options.runs, options.calls)?;
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
    let (recorded, tracer) = measure_loop(&headless, bins, options.runs, options.calls)?;
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
    let result = with_ui(options, bins, &base, &recorded);
    let _ = tmux(&["kill-server"]);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The loop with the UI open on the latency view, then the UI's figures.
fn with_ui(options: &Loop, bins: &Bins, base: &[f64], recorded: &[f64]) -> Result<()> {
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
    println!(
        "  CPU over {elapsed:.1}s: UI threads (draw + queries) {:.1}% of a core, recorder {:.1}%",
        share(&before, &after, elapsed, &["weft", "weft-tui-query"]),
        share(&before, &after, elapsed, &["weft-record"])
    );
    Ok(())
}

/// The CPU the threads called `names` used between two readings of
/// [`thread_seconds`], in % of a core over `elapsed` seconds.
fn share(
    before: &HashMap<String, f64>,
    after: &HashMap<String, f64>,
    elapsed: f64,
    names: &[&str],
) -> f64 {
    let used: f64 = names
        .iter()
        .map(|n| after.get(*n).unwrap_or(&0.0) - before.get(*n).unwrap_or(&0.0))
        .sum();
    used / elapsed * 100.0
}

/// The UI over a flood recorded here and replayed at `replay_rate`.
fn replayed(options: &Options, bins: &Bins) -> Result<()> {
    let scratch = |name: &str, root: &Path| {
        let dir = root.join(format!("weft-bench-tui-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    };
    let flood = scratch("flood", &std::env::temp_dir());
    // tmpfs: the replay writes ~200 MB/s, more than this VM's disk takes.
    let live = scratch("replay", Path::new("/dev/shm"));
    let result = record_flood(bins, &flood).and_then(|recorded| {
        let speed = options.replay_rate as f64 / recorded;
        println!(
            "replay: a getppid flood recorded at {:.2} M records/s, replayed at {speed:.2}x \
             (target {:.1} M records/s) into tmpfs",
            recorded / 1e6,
            options.replay_rate as f64 / 1e6
        );
        let command = format!(
            "{} tui --replay {} --speed {speed} --loop --frame-stats -o {} --max-disk 8GiB; \
             echo weft-exit=$?; sleep 600",
            bins.weft,
            flood.display(),
            live.display()
        );
        tmux(&["new-session", "-d", "-x", "200", "-y", "50", &command])?;
        let result = replay_views(options).and_then(|()| {
            let _ = tmux(&["kill-server"]);
            recording_views(bins, &live)
        });
        let _ = tmux(&["kill-server"]);
        result
    });
    let _ = std::fs::remove_dir_all(&flood);
    let _ = std::fs::remove_dir_all(&live);
    result
}

/// Records 6 s of the getppid loop on CPU 0 (all of it inside the loop's
/// run, so the recording's rate is even) into `dir`; returns its syscalls
/// per second.
fn record_flood(bins: &Bins, dir: &Path) -> Result<f64> {
    let mut flood = Command::new("taskset")
        .args(["-c", "0", &bins.syscall_loop, "getppid", "for", "9"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .context("failed to start the loop")?;
    std::thread::sleep(Duration::from_millis(500));
    let recorded = Command::new(&bins.weft)
        .args([
            "record",
            "--sources",
            "syscalls,sched,block",
            "-d",
            "6s",
            "-o",
        ])
        .arg(dir)
        .output()
        .context("failed to start weft record");
    let _ = flood.wait();
    let recorded = recorded?;
    if !recorded.status.success() {
        bail!(
            "weft record failed: {}\n{}",
            recorded.status,
            String::from_utf8_lossy(&recorded.stderr)
        );
    }
    // The density between the first and the last record: the session's
    // own length also holds the probes' loading.
    let query = "syscalls | count, min(time), max(time)";
    let answer = output(
        Command::new(&bins.weft)
            .args(["query", "--json"])
            .arg(dir)
            .arg(query),
    )?;
    let row: serde_json::Value = serde_json::from_str(answer.trim())
        .with_context(|| format!("`{query}` answered `{answer}`"))?;
    let number = |key: &str| row[key].as_f64().unwrap_or_default();
    let span = (number("max(time)") - number("min(time)")) / 1e9;
    if span <= 0.0 {
        bail!("`{query}` answered `{answer}`");
    }
    Ok(number("count") / span)
}

/// The words of the line of `screen` that holds `word` as a whole word.
fn line_with<'a>(screen: &'a str, word: &str) -> Option<Vec<&'a str>> {
    screen
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|words| words.contains(&word))
}

/// Shows each view in turn; how long each took to fill.
fn fill_times() -> Result<String> {
    let mut filled = vec![];
    let views: [(&str, &str, &Filled); 5] = [
        ("1", "overview", &|s| {
            line_with(s, "syscalls").is_some_and(|r| r.contains(&"p99"))
        }),
        ("2", "latency", &|s| {
            s.contains("getppid dur histogram")
                && s.contains('█')
                && line_with(s, "getppid").is_some()
        }),
        ("o", "block", &|s| {
            s.contains("block latency by op")
                && line_with(s, "op").is_some()
                && !s.contains("waiting")
        }),
        ("o", "off-CPU", &|s| {
            s.contains("sched off_cpu by state") && line_with(s, "state").is_some()
        }),
        ("4", "timeline", &|s| {
            s.contains("around")
                && s.lines()
                    .any(|l| l.starts_with("syscalls") && l.contains('│'))
        }),
    ];
    for (key, name, done) in views {
        tmux(&["send-keys", "-t", "0", key])?;
        let start = Instant::now();
        wait_for(name, done)?;
        filled.push(format!(
            "{name} {:.0} ms",
            start.elapsed().as_secs_f64() * 1e3
        ));
    }
    Ok(filled.join(", "))
}

/// Whether a screen shows a view filled.
type Filled = dyn Fn(&str) -> bool;

/// Each view's time to fill on the replay's capture, opened as a recording.
fn recording_views(bins: &Bins, dir: &Path) -> Result<()> {
    let query = "syscalls | count";
    let answer = output(
        Command::new(&bins.weft)
            .args(["query", "--json"])
            .arg(dir)
            .arg(query),
    )?;
    let count: serde_json::Value = serde_json::from_str(answer.trim())
        .with_context(|| format!("`{query}` answered `{answer}`"))?;
    let command = format!(
        "{} tui {}; echo weft-exit=$?; sleep 600",
        bins.weft,
        dir.display()
    );
    tmux(&["new-session", "-d", "-x", "200", "-y", "50", &command])?;
    wait_for("the overview", |s| line_with(s, "syscalls").is_some())?;
    println!(
        "recording: the replay's capture, {} syscalls, opened with weft tui DIR; filled after \
         (target <= 1 s each): {}",
        count["count"],
        fill_times()?
    );
    tmux(&["send-keys", "-t", "0", "q"])?;
    wait_for("weft to exit", |s| s.contains("weft-exit="))?;
    Ok(())
}

/// Each view's time to fill once shown, the UI threads' CPU on the latency
/// view, and the rate the replay kept.
fn replay_views(options: &Options) -> Result<()> {
    wait_for("the overview", |s| line_with(s, "syscalls").is_some())?;
    // Ten seconds of the replay fill the windows the views ask about.
    std::thread::sleep(Duration::from_secs(10));
    println!("  filled after (target <= 1 s each): {}", fill_times()?);
    tmux(&["send-keys", "-t", "0", "2"])?;
    std::thread::sleep(Duration::from_secs(1));
    let pid = ui_pid()?;
    let before = thread_seconds(&pid);
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(options.replay_seconds));
    let elapsed = started.elapsed().as_secs_f64();
    let after = thread_seconds(&pid);
    // Played on until the capture is as large as the recording asked for.
    let enough = options.recording_records;
    tmux(&["send-keys", "-t", "0", "1"])?;
    wait_for("the capture to grow", |s| {
        line_with(s, "syscalls").is_some_and(|r| {
            r.iter()
                .filter_map(|w| w.parse::<u64>().ok())
                .any(|n| n >= enough)
        })
    })?;
    tmux(&["send-keys", "-t", "0", "q"])?;
    let screen = screen_lines(&wait_for("weft to exit", |s| s.contains("weft-exit="))?);
    println!(
        "  CPU over {elapsed:.1}s on the latency view: UI threads (draw + queries) {:.1}% of a \
         core (target < 10 %), replay {:.1}%, store flusher {:.1}%",
        share(&before, &after, elapsed, &["weft", "weft-tui-query"]),
        share(&before, &after, elapsed, &["weft-replay"]),
        // The kernel keeps 15 bytes of a thread's name.
        share(&before, &after, elapsed, &["weft-store-flus"])
    );
    println!("    {}", last_with(&screen, "weft: replayed"));
    println!(
        "  frames: {}",
        last_with(&screen, "frames drawn").trim_start_matches("weft: ")
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
pub fn thread_seconds(pid: &str) -> HashMap<String, f64> {
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
