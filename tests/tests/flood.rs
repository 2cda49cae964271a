//! The fastest syscall flood one core can make, under `weft record`: every
//! syscall kept when weft keeps up; when it cannot (a tiny ring), every
//! loss counted and the stop still on time.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use weft_tests::{Need, Running, can_trace, capture_dir, needs, query_rows};

const SYSCALL_LOOP: &str = env!("CARGO_BIN_EXE_weft-syscall-loop");

/// Whether a flood can run here: the syscall probe, and a real machine
/// (under the VM matrix's TCG a flood is a slow trickle).
fn can_flood(test: &str) -> bool {
    can_trace(test) && needs(test, &[Need::Heavy])
}

/// Runs the getppid loop on CPU 0 for `seconds`; returns its pid and the
/// calls it made.
fn flood(seconds: f64) -> (u32, u64) {
    let child = Command::new("taskset")
        .args(["-c", "0", SYSCALL_LOOP, "getppid", "for"])
        .arg(seconds.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn taskset (util-linux)");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait for the loop");
    assert!(out.status.success(), "the loop failed: {}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    let calls = text
        .trim()
        .strip_prefix("calls ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the loop printed `{text}`"));
    (pid, calls)
}

/// `weft.json`'s syscall losses of the first session.
fn syscall_losses(dir: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("weft.json")).expect("weft.json");
    let metadata: serde_json::Value = serde_json::from_str(&text).expect("weft.json is JSON");
    metadata["sessions"][0]["lost"]["syscalls"].clone()
}

fn count(losses: &serde_json::Value, key: &str) -> u64 {
    losses[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no {key} in {losses}"))
}

#[test]
fn record_keeps_every_syscall_of_a_ten_second_flood() {
    if !can_flood("record_keeps_every_syscall_of_a_ten_second_flood") {
        return;
    }
    let dir = capture_dir("flood");
    let running = Running::start(
        &["record", "-o", dir.to_str().expect("utf-8 path")],
        "weft: recording",
    );
    let (pid, calls) = flood(10.0);
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    let losses = syscall_losses(&dir);
    assert_eq!(count(&losses, "lost"), 0, "{}", finished.stderr);
    assert_eq!(
        count(&losses, "received"),
        count(&losses, "seen"),
        "{losses}"
    );
    let rows = query_rows(
        &dir,
        &format!("syscalls where pid = {pid} and name = \"getppid\" | count"),
    );
    assert_eq!(
        rows[0]["count"].as_u64(),
        Some(calls),
        "the loop made {calls} getppid calls; {}",
        finished.stderr
    );
    // A percentile per 5 ms (2,000 buckets of a few chunks each): a scan
    // would hold every duration (8 bytes a call); the summaries answer a
    // bucket at a time in bounded memory. About 2 s.
    assert!(calls > 5_000_000, "a flood of only {calls} calls");
    let series = "syscalls | p99(dur) every 5ms";
    let dir_arg = dir.to_str().expect("utf-8 path");
    let (status, explained, stderr) =
        weft_tests::run_weft(&["query", dir_arg, "--explain", series]);
    assert!(status.success(), "{stderr}");
    assert!(explained.contains("aggregate: per bucket"), "{explained}");
    let peak: f64 = (explained.lines())
        .find_map(|l| l.strip_prefix("memory: ")?.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no memory line: {explained}"));
    assert!(peak < 64.0, "{peak} MiB: {explained}");
}

/// Under a flood, `weft record` with a 256 KiB ring loses records; it must
/// count each, and stop within a second of its time.
fn overloaded(stop: &str) {
    let dir = capture_dir(&format!("overload-{stop}"));
    let dir_arg = dir.to_str().expect("utf-8 path");
    let mut args = vec!["record", "-o", dir_arg, "--ring-size", "256KiB"];
    if stop == "duration" {
        args.extend(["--duration", "3s"]);
    }
    let flood = std::thread::spawn(|| flood(6.0));
    std::thread::sleep(Duration::from_millis(300));
    let running = Running::start(&args, "weft: recording");
    let started = Instant::now();
    let finished = if stop == "duration" {
        running.wait()
    } else {
        std::thread::sleep(Duration::from_secs(3));
        running.stop_with(libc::SIGTERM)
    };
    let took = started.elapsed();
    flood.join().expect("the flood thread does not panic");
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        took < Duration::from_secs(4),
        "asked to stop at 3 s, weft stopped after {took:?}: {}",
        finished.stderr
    );
    let losses = syscall_losses(&dir);
    assert!(
        count(&losses, "ring_full") > 0,
        "a 256 KiB ring kept up? {losses}"
    );
    assert_eq!(
        count(&losses, "received") + count(&losses, "ring_full"),
        count(&losses, "seen"),
        "{losses}"
    );
    assert!(!finished.stderr.contains("mismatch"), "{}", finished.stderr);
    // Every loss is a record of the `losses` source, and an answer over
    // the window says how many records it lacks.
    let lost = count(&losses, "lost");
    let noted = query_rows(&dir, r#"losses where source = "syscalls" | sum(lost)"#);
    assert_eq!(noted[0]["sum(lost)"].as_u64(), Some(lost), "{losses}");
    let (status, table, stderr) = weft_tests::run_weft(&["query", dir_arg, "syscalls | count"]);
    assert!(status.success(), "{stderr}");
    assert!(
        table.contains(&format!(
            "({lost} records of this source were lost in this window"
        )),
        "{table}"
    );
}

#[test]
fn record_overloaded_stops_at_its_duration_and_counts_every_loss() {
    if can_flood("record_overloaded_stops_at_its_duration_and_counts_every_loss") {
        overloaded("duration");
    }
}

#[test]
fn record_overloaded_stops_at_sigterm_and_counts_every_loss() {
    if can_flood("record_overloaded_stops_at_sigterm_and_counts_every_loss") {
        overloaded("sigterm");
    }
}
