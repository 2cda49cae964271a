//! The terminal UI in a real terminal: `weft` under tmux, driven with
//! `send-keys` and read with `capture-pane`.

use std::{
    process::Command,
    time::{Duration, Instant},
};

use weft_tests::{
    Need, Running, SYSCALL_PROBE, Workload, capture_dir, needs, query_rows, record, weft_bin,
};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_weft-workload");

/// A tmux server of our own with one window running a command.
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    /// Whether tmux is there. `cargo xtask setup` installs it, so on the
    /// host its absence fails the test; the VM matrix's initramfs does
    /// not carry it, and there the test says why it skips.
    pub(crate) fn available(test: &str) -> bool {
        weft_tests::has_tool(test, "tmux", "-V")
    }

    /// Runs `command` in an 80×24 window; when it ends, the window shows
    /// `weft-exit=STATUS` and stays.
    fn start(name: &str, command: &str) -> Self {
        Self::start_sized(name, command, (80, 24))
    }

    /// [`Tmux::start`] in a window of `(columns, lines)`.
    pub(crate) fn start_sized(name: &str, command: &str, (x, y): (u16, u16)) -> Self {
        let socket = format!("weft-test-{name}-{}", std::process::id());
        let shell = format!("{command}; echo weft-exit=$?; sleep 600");
        let (x, y) = (x.to_string(), y.to_string());
        let status = Command::new("tmux")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", &x, "-y", &y, &shell])
            .env("TERM", "xterm-256color")
            .status()
            .expect("run tmux");
        assert!(status.success(), "tmux new-session failed");
        Self { socket }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("run tmux");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends keys by tmux's names (`Enter`, `Escape`, `q`).
    pub(crate) fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "0"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// Types text literally.
    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "0", "-l", text]);
    }

    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-t", "0"])
    }

    /// Waits until the screen satisfies `done` and returns how long that
    /// took; panics with the screen when it takes longer than `limit`.
    fn filled_within(&self, what: &str, limit: Duration, done: impl Fn(&str) -> bool) -> Duration {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return start.elapsed();
            }
            assert!(
                start.elapsed() < limit,
                "{what} was not filled within {limit:?}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until the screen satisfies `done`; panics with the screen
    /// after 30 s.
    pub(crate) fn wait_for(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "waited 30 s for {what}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

/// The line of `screen` that holds `word` as a whole word, split on blanks.
pub(crate) fn row<'a>(screen: &'a str, word: &str) -> Option<Vec<&'a str>> {
    screen
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|words| words.contains(&word))
}

#[test]
fn live_ui_shows_a_workload_answers_a_query_and_quits_cleanly() {
    let test = "live_ui_shows_a_workload_answers_a_query_and_quits_cleanly";
    if !needs(test, &SYSCALL_PROBE) || !Tmux::available(test) {
        return;
    }
    let calls = 4321;
    // It lives on a little after its calls, so that weft reads its name
    // (`comm`) from /proc before it exits.
    let workload = Workload::spawn(WORKLOAD, &[&format!("getppid:{calls}"), "nanosleep:500:1"]);
    let workload_pid = workload.pid().to_string();
    let tmux = Tmux::start(
        "live",
        &format!("{} tui --sources syscalls", weft_bin().display()),
    );
    tmux.wait_for("the overview", |s| {
        row(s, "syscalls").is_some() && s.contains("1 Overview")
    });
    workload.run_to_end();
    // One process, a minute's window, the latency view.
    tmux.keys(&["/"]);
    tmux.type_text("weft-workload");
    tmux.keys(&["Enter", "w", "2"]);
    let screen = tmux.wait_for("getppid in the latency view", |s| {
        row(s, "getppid").is_some_and(|r| r[1] == calls.to_string())
    });
    assert!(screen.contains("process weft-workload"), "{screen}");
    let getppid = row(&screen, "getppid").unwrap();
    assert!(getppid[2].ends_with('s'), "p50 is a duration: {getppid:?}");

    tmux.keys(&[":"]);
    tmux.type_text(r#"syscalls where comm = "weft-workload" and name = "getppid" | count"#);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the query's answer", |s| {
        s.lines().any(|l| l.trim() == calls.to_string())
    });

    // `p` on a listed record captures PT of its process, or says why not.
    tmux.keys(&[":"]);
    tmux.type_text(r#"syscalls where comm = "weft-workload" | fields time, pid | limit 1"#);
    tmux.keys(&["Enter"]);
    tmux.wait_for("the listed record", |s| s.contains(&workload_pid));
    tmux.keys(&["p"]);
    let pt_here = std::path::Path::new("/sys/bus/event_source/devices/intel_pt").exists();
    let said = if pt_here {
        format!("capturing Intel PT of process {workload_pid}")
    } else {
        "no PT capture: Intel PT is not available on this CPU or VM".to_owned()
    };
    tmux.wait_for("what p did", |s| s.contains(&said));

    // A broken query comes back with a caret under the token.
    tmux.keys(&[":"]);
    tmux.type_text("syscalls | p99(bogus)");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("the error", |s| s.contains('^'));
    // The bar is the last line; the caret line is just above it.
    let lines: Vec<&str> = screen.trim_end().lines().collect();
    assert_eq!(lines[lines.len() - 1].trim_end(), ":syscalls | p99(bogus)");
    let caret = lines[lines.len() - 2];
    assert_eq!(caret.find('^'), Some(":syscalls | p99(".len()), "{screen}");
    // Apart: ESC and a key at once read as Alt and the key.
    tmux.keys(&["Escape"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("weft to exit", |s| s.contains("weft-exit="));
    assert!(screen.contains("weft-exit=0"), "{screen}");
    assert!(screen.contains("weft: recorded"), "{screen}");
    assert!(
        !screen.contains(" weft  live "),
        "the terminal is back to its normal screen:\n{screen}"
    );
}

/// `weft tui -o DIR -- PROGRAM ARGS` runs the command off the terminal
/// (its output in the log printed after the UI closes), records it and its
/// children, and closes when it exits, the capture kept.
#[test]
fn the_ui_runs_a_command_and_closes_when_it_exits() {
    let test = "the_ui_runs_a_command_and_closes_when_it_exits";
    if !needs(test, &SYSCALL_PROBE) || !Tmux::available(test) {
        return;
    }
    let dir = capture_dir("tui-command");
    let script = format!("printf x | {WORKLOAD} getppid:654; sleep 1; echo said-by-the-command");
    let tmux = Tmux::start(
        "command",
        &format!(
            "{} tui --sources syscalls -o {} -- sh -c '{script}'",
            weft_bin().display(),
            dir.display()
        ),
    );
    let screen = tmux.wait_for("weft to exit with the command", |s| {
        s.contains("weft-exit=")
    });
    assert!(screen.contains("weft-exit=0"), "{screen}");
    assert!(screen.contains("said-by-the-command"), "{screen}");
    let rows = query_rows(&dir, r#"syscalls where name = "getppid" | count by pid"#);
    assert!(
        rows.iter().any(|r| r["count"] == 654),
        "the workload's calls, a process of their own: {rows:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recording_ui_shows_the_totals_that_query_gives() {
    let test = "recording_ui_shows_the_totals_that_query_gives";
    if !needs(test, &SYSCALL_PROBE) || !Tmux::available(test) {
        return;
    }
    let dir = capture_dir("tui");
    record(WORKLOAD, &dir, &["getppid:777", "getpid:55"], &[]);
    let tmux = Tmux::start(
        "recording",
        &format!("{} tui {}", weft_bin().display(), dir.display()),
    );
    let screen = tmux.wait_for("the overview", |s| row(s, "syscalls").is_some());
    assert!(screen.contains("recording"), "{screen}");
    for source in ["syscalls", "tasks"] {
        let total = query_rows(&dir, &format!("{source} | count"))[0]["count"].clone();
        let shown = row(&screen, source).unwrap();
        assert_eq!(shown[2], total.to_string(), "{source}: {shown:?}");
    }
    tmux.keys(&["2"]);
    let screen = tmux.wait_for("the latency view", |s| row(s, "getpid").is_some());
    assert_eq!(row(&screen, "getppid").unwrap()[1], "777", "{screen}");
    assert_eq!(row(&screen, "getpid").unwrap()[1], "55", "{screen}");
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("weft to exit", |s| s.contains("weft-exit="));
    assert!(screen.contains("weft-exit=0"), "{screen}");
}

#[test]
fn heavy_queries_in_the_ui_lose_no_event() {
    let test = "heavy_queries_in_the_ui_lose_no_event";
    if !needs(test, &SYSCALL_PROBE) || !Tmux::available(test) {
        return;
    }
    let dir = capture_dir("tui-heavy");
    let calls = 300_000;
    let workload = Workload::spawn(WORKLOAD, &[&format!("getppid:{calls}")]);
    let tmux = Tmux::start(
        "heavy",
        &format!(
            "{} tui --sources syscalls -o {}",
            weft_bin().display(),
            dir.display()
        ),
    );
    tmux.wait_for("the overview", |s| row(s, "syscalls").is_some());
    // Every record read and sorted, again and again, while the workload
    // runs: the queries share the CPUs, never the recorder's thread.
    let heavy = "syscalls | sort dur desc | limit 3";
    let pid = workload.pid();
    let runner = std::thread::spawn(move || workload.run_to_end());
    for _ in 0..5 {
        tmux.keys(&[":"]);
        tmux.type_text(heavy);
        tmux.keys(&["Enter"]);
        std::thread::sleep(Duration::from_millis(300));
    }
    runner.join().unwrap();
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("weft to exit", |s| s.contains("weft-exit="));
    assert!(screen.contains("weft-exit=0"), "{screen}");
    let recorded = screen
        .lines()
        .find(|l| l.starts_with("weft: recorded"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(recorded.ends_with("lost 0"), "{recorded}");
    let rows = query_rows(
        &dir,
        &format!(r#"syscalls where pid = {pid} and name = "getppid" | count"#),
    );
    assert_eq!(rows[0]["count"], calls, "every call recorded");
}

#[test]
fn every_view_of_a_large_recording_is_filled_within_a_second() {
    let test = "every_view_of_a_large_recording_is_filled_within_a_second";
    if !needs(test, &SYSCALL_PROBE) || !needs(test, &[Need::Heavy]) || !Tmux::available(test) {
        return;
    }
    // Millions of syscalls between sleeps, every source recorded.
    let dir = capture_dir("tui-large");
    let calls = 4_000_000;
    let workload = Workload::spawn(
        WORKLOAD,
        &[
            "nanosleep:30:5",
            &format!("getppid:{calls}"),
            "nanosleep:30:5",
        ],
    );
    let running = Running::start(
        &[
            "record",
            "--sources",
            "syscalls,sched,block",
            "-o",
            dir.to_str().expect("utf-8 path"),
        ],
        "weft: recording",
    );
    workload.run_to_end();
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);

    let second = Duration::from_secs(1);
    let tmux = Tmux::start(
        "large",
        &format!("{} tui {}", weft_bin().display(), dir.display()),
    );
    // The UI is up once it shows the sources; each view counts from there.
    tmux.wait_for("the overview", |s| row(s, "syscalls").is_some());
    let mut took = vec![];
    took.push(tmux.filled_within("the overview's headline", second, |s| {
        row(s, "syscalls").is_some_and(|r| r.contains(&"p99"))
    }));
    tmux.keys(&["2"]);
    took.push(tmux.filled_within("the latency table", second, |s| {
        row(s, "getppid").is_some_and(|r| r[1].parse::<u64>().is_ok_and(|n| n >= calls))
    }));
    took.push(tmux.filled_within("the histogram", second, |s| {
        s.contains("getppid dur histogram") && s.contains('█')
    }));
    // The block and off-CPU breakdowns: answered (the table replaces
    // "waiting for data…"); the sleeps are off-CPU in state S.
    tmux.keys(&["o"]);
    took.push(tmux.filled_within("the block breakdown", second, |s| {
        s.contains("block latency by op") && row(s, "op").is_some() && !s.contains("waiting")
    }));
    tmux.keys(&["o"]);
    took.push(tmux.filled_within("the off-CPU breakdown", second, |s| {
        s.contains("sched off_cpu by state") && row(s, "S").is_some()
    }));
    tmux.keys(&["4"]);
    took.push(tmux.filled_within("the timeline", second, |s| {
        s.contains("around")
            && s.lines()
                .any(|l| l.starts_with("syscalls") && l.contains('│'))
    }));
    eprintln!("{test}: filled after {took:?}");
    tmux.keys(&["q"]);
    let screen = tmux.wait_for("weft to exit", |s| s.contains("weft-exit="));
    assert!(screen.contains("weft-exit=0"), "{screen}");
}

#[test]
fn a_replay_plays_every_record_with_its_durations_at_new_times() {
    let test = "a_replay_plays_every_record_with_its_durations_at_new_times";
    if !needs(test, &SYSCALL_PROBE) || !Tmux::available(test) {
        return;
    }
    let from = capture_dir("replay-from");
    let calls = 100_000;
    record(
        WORKLOAD,
        &from,
        &[&format!("getppid:{calls}"), "nanosleep:300:3"],
        &["--sources", "syscalls,sched"],
    );
    let to = capture_dir("replay-to");
    let tmux = Tmux::start(
        "replay",
        &format!(
            "{} tui --replay {} --speed 2 -o {}",
            weft_bin().display(),
            from.display(),
            to.display()
        ),
    );
    // Played once, the replay ends and the UI with it.
    let screen = tmux.wait_for("the replay to end", |s| s.contains("weft-exit="));
    assert!(screen.contains("weft-exit=0"), "{screen}");
    let latencies = "syscalls | count, min(dur), p50(dur), p99(dur), max(dur), sum(dur) by name";
    let replayed = query_rows(&to, latencies);
    assert_eq!(replayed, query_rows(&from, latencies));
    let getppid = replayed.iter().find(|r| r["name"] == "getppid");
    assert_eq!(getppid.map(|r| &r["count"]), Some(&calls.into()));
    for source in ["syscalls", "sched", "tasks"] {
        let count = format!("{source} | count");
        assert_eq!(
            query_rows(&to, &count),
            query_rows(&from, &count),
            "{source}"
        );
    }
    // Every time moved to the replay's present, after the recording's
    // end, and the span shrank by the speed.
    let span = |dir: &std::path::Path| {
        let row = &query_rows(dir, "syscalls | min(time), max(time)")[0];
        let time = |key: &str| row[key].as_i64().expect("a time in ns");
        (time("min(time)"), time("max(time)"))
    };
    let (recorded, played) = (span(&from), span(&to));
    assert!(
        played.0 > recorded.1,
        "recorded {recorded:?}, replayed {played:?}"
    );
    let halved = (recorded.1 - recorded.0) / 2;
    assert!(
        (played.1 - played.0 - halved).abs() < 1_000,
        "recorded {recorded:?}, replayed {played:?}"
    );
}
