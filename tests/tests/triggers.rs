//! Triggers: `weft record --retain` keeps a ring, and a trigger keeps the
//! window around a matching record whatever the ring deletes.

use std::time::Duration;

use weft_tests::{Need, Running, SYSCALL_PROBE, Workload, capture_dir, query_rows, run_weft};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_weft-workload");

fn count(dir: &std::path::Path, query: &str) -> u64 {
    query_rows(dir, query)[0]["count"].as_u64().unwrap()
}

/// Runs a workload to its end; returns its pid.
fn run(steps: &[&str]) -> u32 {
    let workload = Workload::spawn(WORKLOAD, steps);
    let pid = workload.pid();
    workload.run_to_end();
    pid
}

/// Whether `test` can run here: the syscall probe, on a machine for
/// millions of calls.
fn can_flood(test: &str) -> bool {
    let mut need = SYSCALL_PROBE.to_vec();
    need.push(Need::Heavy);
    weft_tests::needs(test, &need)
}

/// `weft record` into `dir` as a ring of the last 2 s, with `more`.
fn ring(dir: &std::path::Path, more: &[&str]) -> Running {
    let mut args = vec!["record", "-o", dir.to_str().unwrap(), "--retain", "2s"];
    args.extend(more);
    Running::start(&args, "weft: recording")
}

#[test]
fn a_slow_sleep_keeps_its_window_while_the_ring_deletes_the_rest() {
    if !can_flood("a_slow_sleep_keeps_its_window_while_the_ring_deletes_the_rest") {
        return;
    }
    let dir = capture_dir("trigger-window");
    let running = ring(
        &dir,
        &[
            "--keep",
            "-3s..+3s",
            "--trigger",
            r#"syscalls where name = "nanosleep" and dur > 50ms"#,
        ],
    );
    // Old data the ring must delete, in segments of their own.
    let old = run(&["getpid:2000000"]);
    run(&["getpid:3000000"]);
    std::thread::sleep(Duration::from_secs(3));
    // The anomaly, with every call around it known exactly.
    let slow = run(&["getppid:200000", "nanosleep:100:1", "getppid:200000"]);
    // Newer data pushes the ring past the old records.
    std::thread::sleep(Duration::from_secs(4));
    for _ in 0..3 {
        run(&["getpid:2000000"]);
    }
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        finished.stderr.contains(
            r#"weft: trigger 1 (syscalls where name = "nanosleep" and dur > 50ms) fired"#
        ),
        "{}",
        finished.stderr
    );
    let of = |pid: u32, name: &str| {
        count(
            &dir,
            &format!(r#"syscalls where pid = {pid} and name = "{name}" | count"#),
        )
    };
    assert_eq!(
        of(slow, "getppid"),
        400_000,
        "the pinned window is complete"
    );
    assert_eq!(of(slow, "nanosleep"), 1);
    assert_eq!(of(old, "getpid"), 0, "unpinned old records are gone");
    let log = query_rows(&dir, "triggers");
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0]["trigger"], 1);
    let (_, info, _) = run_weft(&["info", dir.to_str().unwrap()]);
    assert!(
        info.contains("fired 1, merged 0, capped 0, suppressed 0"),
        "{info}"
    );

    // The window, extracted, answers as the capture does.
    let out = capture_dir("trigger-extract");
    let extract = |firing: &str, out: &str| {
        run_weft(&[
            "extract",
            dir.to_str().unwrap(),
            "--trigger",
            firing,
            "-o",
            out,
        ])
    };
    let (status, _, stderr) = extract("1", out.to_str().unwrap());
    assert!(status.success(), "{stderr}");
    let (start, end) = (&log[0]["start"], &log[0]["end"]);
    for query in [
        format!("syscalls [{start}, {end}] | count"),
        format!(r#"syscalls where pid = {slow} and name = "getppid" | count"#),
        format!("syscalls where pid = {slow} | count by name"),
        "triggers".to_owned(),
    ] {
        assert_eq!(
            query_rows(&dir, &query),
            query_rows(&out, &query),
            "{query}"
        );
    }
    let (status, _, stderr) = extract("1", out.to_str().unwrap());
    assert!(!status.success() && stderr.contains("exists"), "{stderr}");
    let never = dir.with_extension("never");
    let (status, _, stderr) = extract("2", never.to_str().unwrap());
    assert!(
        !status.success() && stderr.contains("has 1 trigger firings"),
        "{stderr}"
    );
    assert!(!never.exists(), "nothing half written");
}

#[test]
fn a_trigger_on_every_call_fires_at_most_its_limit() {
    let test = "a_trigger_on_every_call_fires_at_most_its_limit";
    if !weft_tests::needs(test, &SYSCALL_PROBE) {
        return;
    }
    let dir = capture_dir("trigger-limit");
    let hooked = dir.with_extension("hooked");
    let running = Running::start(
        &[
            "record",
            "-o",
            dir.to_str().unwrap(),
            // Only the workload: the hook's shell calls getppid too.
            "--comm",
            "weft-workload",
            "--keep=-1ms..+1ms",
            "--max-triggers",
            "3/1h",
            "--trigger",
            r#"syscalls where name = "getppid""#,
            "--on-trigger",
            &format!(
                r#"echo "$WEFT_TRIGGER_ID pid=$WEFT_TRIGGER_PID $WEFT_TRIGGER_NOTE" >> {}"#,
                hooked.display()
            ),
        ],
        "weft: recording",
    );
    // Ten matches 30 ms apart: each after the last one's window.
    let steps: Vec<&str> = ["getppid:1", "nanosleep:30:1"].repeat(10);
    let pid = run(&steps);
    // SIGUSR2 is the manual trigger, and so is `weft trigger`, with a note
    // (taken at the recorder's next tick, within a second).
    running.signal(libc::SIGUSR2);
    std::thread::sleep(Duration::from_millis(300));
    let (status, _, stderr) =
        run_weft(&["trigger", dir.to_str().unwrap(), "--note", "slow checkout"]);
    assert!(status.success(), "{stderr}");
    let (status, _, stderr) = run_weft(&["trigger", "/nonexistent"]);
    assert!(
        !status.success() && stderr.contains("no capture at /nonexistent"),
        "{stderr}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        finished
            .stderr
            .contains("weft: trigger 0 (manual (SIGUSR2)) fired"),
        "{}",
        finished.stderr
    );
    assert_eq!(
        count(
            &dir,
            &format!(r#"syscalls where pid = {pid} and name = "getppid" | count"#)
        ),
        10,
        "every record is stored, fired or not"
    );
    let (_, info, _) = run_weft(&["info", dir.to_str().unwrap()]);
    assert!(
        info.contains("fired 3, merged 0, capped 0, suppressed 7"),
        "{info}"
    );
    assert!(info.contains("manual (SIGUSR2): fired 2"), "{info}");
    assert!(info.contains(": slow checkout"), "{info}");
    assert_eq!(count(&dir, "triggers where trigger = 1 | count"), 3);
    assert_eq!(count(&dir, "triggers where trigger = 0 | count"), 2);
    // The hook ran once per firing, with the firing in its environment.
    let mut lines: Vec<String> = std::fs::read_to_string(&hooked)
        .unwrap()
        .lines()
        .map(|l| l.trim_end().to_owned())
        .collect();
    lines.sort();
    // The process whose record matched, for e.g. `weft pt record --pid`;
    // none for the manual trigger.
    let matched = format!("1 pid={pid}");
    assert_eq!(
        lines,
        [
            "0 pid=",
            "0 pid= slow checkout",
            &matched,
            &matched,
            &matched
        ]
    );
}

/// `--pt-on-trigger` captures Intel PT of the process whose record matched
/// into the capture; where the CPU has no PT (this AMD VM) weft says so at
/// start and the trigger keeps its window all the same.
#[test]
fn pt_on_trigger_captures_the_matching_process_or_says_pt_is_absent() {
    let test = "pt_on_trigger_captures_the_matching_process_or_says_pt_is_absent";
    if !weft_tests::needs(test, &SYSCALL_PROBE) {
        return;
    }
    let (status, _, stderr) = run_weft(&["record", "--pt-on-trigger", "5s", "-o", "/nonexistent"]);
    assert!(
        !status.success() && stderr.contains("a PT window lasts 100ms to 2s"),
        "{stderr}"
    );
    let has_pt = std::path::Path::new("/sys/bus/event_source/devices/intel_pt").exists();
    // Without PT weft says so first, before it records.
    let ready = if has_pt {
        "weft: recording"
    } else {
        "weft: --pt-on-trigger: Intel PT is not available on this CPU or VM"
    };
    let dir = capture_dir("trigger-pt");
    let running = Running::start(
        &[
            "record",
            "-o",
            dir.to_str().unwrap(),
            "--comm",
            "weft-workload",
            "--trigger",
            r#"syscalls where name = "getppid""#,
            "--pt-on-trigger",
            "100ms",
        ],
        ready,
    );
    if !has_pt {
        running.wait_for_stderr("weft: recording");
    }
    // The process must still run while its PT is captured.
    let pid = run(&["getppid:1", "nanosleep:400:1"]);
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        finished.stderr.contains("weft: trigger 1 (syscalls where"),
        "{}",
        finished.stderr
    );
    let captures: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("pt-1-")
        })
        .collect();
    if has_pt {
        assert!(
            finished
                .stderr
                .contains(&format!("weft: trigger 1: PT of process {pid} in")),
            "{}",
            finished.stderr
        );
        assert_eq!(captures.len(), 1, "{captures:?}");
        assert!(captures[0].join("capture.json").exists());
    } else {
        assert_eq!(captures, Vec::<std::path::PathBuf>::new());
    }
}

#[test]
fn a_firing_explains_where_its_calls_time_went() {
    let test = "a_firing_explains_where_its_calls_time_went";
    let mut need = SYSCALL_PROBE.to_vec();
    need.push(Need::Tracepoint("sched/sched_switch"));
    if !weft_tests::needs(test, &need) {
        return;
    }
    let dir = capture_dir("trigger-explain");
    let stderr = weft_tests::record(
        WORKLOAD,
        &dir,
        &["getppid:1000", "nanosleep:30:3", "getppid:1000"],
        &[
            "--sources",
            "syscalls,sched",
            "--trigger",
            "syscalls where dur > 20ms",
            "--keep",
            "-1s..+1s",
        ],
    );
    assert!(stderr.contains("weft: trigger 1 ("), "{stderr}");
    let d = dir.to_str().unwrap();
    // No query: the trigger's condition `| explain` over the kept window.
    let (status, stdout, stderr) = run_weft(&["query", d, "--trigger", "1", "--json"]);
    assert!(status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows[0]["factor"], "sleeping", "{rows:#?}");
    // The three sleeps, against every call of the window (the 2,000
    // getppid and the workload's own few).
    let wall = (rows.iter())
        .filter_map(|r| r["factor"].as_str())
        .find(|f| f.starts_with("wall time ("))
        .unwrap_or_else(|| panic!("{rows:#?}"))
        .to_owned();
    let baseline: u64 = wall
        .strip_prefix("wall time (3 calls, ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{rows:#?}"));
    assert!((2003..2100).contains(&baseline), "{rows:#?}");
    // A query of one's own, over the same window.
    let (status, stdout, stderr) = run_weft(&[
        "query",
        d,
        "--trigger",
        "1",
        "--json",
        r#"syscalls where name = "nanosleep" | count"#,
    ]);
    assert!(
        status.success() && stdout.contains(r#""count":3"#),
        "{stdout}{stderr}"
    );
    let (status, _, stderr) = run_weft(&["query", d, "--trigger", "1", "syscalls | count last 5s"]);
    assert!(
        !status.success() && stderr.contains("sets the window"),
        "{stderr}"
    );
    let (status, _, stderr) = run_weft(&["query", d, "--trigger", "2"]);
    assert!(
        !status.success() && stderr.contains("has 1 trigger firings"),
        "{stderr}"
    );
}

#[test]
fn deleted_records_are_answered_for_by_their_kept_summaries() {
    if !can_flood("deleted_records_are_answered_for_by_their_kept_summaries") {
        return;
    }
    let dir = capture_dir("kept-summaries");
    let running = ring(&dir, &["--retain-summaries", "1h"]);
    // Calls the ring deletes, then newer ones that push it past them.
    let old = run(&["getppid:3000000"]);
    std::thread::sleep(Duration::from_secs(3));
    for _ in 0..3 {
        run(&["getpid:2000000"]);
    }
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    let getppid = r#"syscalls where name = "getppid""#;
    let kept = count(&dir, &format!("{getppid} and pid = {old} | count"));
    assert!(kept < 3_000_000, "the ring deleted none of them: {kept}");
    // Their summaries still count every call, and time them.
    let rows = query_rows(&dir, &format!("{getppid} | count, p50(dur), max(dur)"));
    let counted = rows[0]["count"].as_u64().unwrap();
    assert!(
        (3_000_000..3_010_000).contains(&counted),
        "{counted} getppid calls counted: {rows:?}"
    );
    assert!(rows[0]["p50(dur)"].as_i64().unwrap() > 0, "{rows:?}");
    let series = query_rows(&dir, &format!("{getppid} | count every 1s"));
    let total: u64 = series.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    assert_eq!(total, counted, "{series:?}");
    // A person reading the answer is told it is approximate, and how.
    let (status, table, stderr) = run_weft(&[
        "query",
        dir.to_str().unwrap(),
        &format!("{getppid} | count, p99(dur)"),
    ]);
    assert!(status.success(), "{stderr}");
    assert!(
        table.contains(
            "(approximate: records deleted from this window were answered for by their kept \
             summaries: times to within"
        ),
        "{table}"
    );
    let (_, explain, _) = run_weft(&[
        "query",
        "--explain",
        dir.to_str().unwrap(),
        &format!("{getppid} | count"),
    ]);
    assert!(
        explain.contains("deleted, answered for by their kept summaries")
            && !explain.contains("; 0 deleted, answered for"),
        "{explain}"
    );
    // `info` tells the records held from those only summarized.
    let (_, info, _) = run_weft(&["info", "--json", dir.to_str().unwrap()]);
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    let syscalls = &info["sources"][0];
    let (held, summarized) = (
        syscalls["records"].as_u64(),
        syscalls["summarized"].as_u64(),
    );
    let received = info["sessions"][0]["lost"]["syscalls"]["received"].as_u64();
    assert_eq!(
        held.zip(summarized).map(|(h, s)| h + s),
        received,
        "{syscalls}"
    );
    assert!(summarized.unwrap() >= 3_000_000 - kept, "{syscalls}");
}
