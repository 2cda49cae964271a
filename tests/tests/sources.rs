//! The event sources besides syscalls, on the running kernel: each records
//! what a workload with known behaviour did, exactly, and says what it lost.

use weft_tests::{Need, capture_dir, needs, record, run_weft};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_weft-workload");

/// `weft query DIR QUERY --json`: the rows as JSON objects.
fn query(dir: &std::path::Path, text: &str) -> Vec<serde_json::Value> {
    let (status, stdout, stderr) = run_weft(&["query", "--json", dir.to_str().unwrap(), text]);
    assert!(status.success(), "{text}: {stderr}");
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

#[test]
fn sched_shows_each_sleep_as_an_off_cpu_interval() {
    if !needs(
        "sched_shows_each_sleep_as_an_off_cpu_interval",
        &[Need::Root, Need::Tracepoint("sched/sched_switch")],
    ) {
        return;
    }
    let dir = capture_dir("sched-sleeps");
    let sleeps = 25;
    let stderr = record(
        WORKLOAD,
        &dir,
        &[
            "getppid:1000",
            &format!("nanosleep:10:{sleeps}"),
            "getppid:1000",
        ],
        &["--sources", "sched"],
    );
    assert!(
        stderr.contains("sched: ") && stderr.contains("lost 0"),
        "{stderr}"
    );
    let rows = query(
        &dir,
        r#"sched where state = "S" | count, min(off_cpu), max(off_cpu) by pid"#,
    );
    assert_eq!(rows.len(), 1, "one thread slept: {rows:?}");
    let row = &rows[0];
    assert_eq!(row["count"], sleeps, "{row}");
    assert!(row["min(off_cpu)"].as_i64().unwrap() >= 10_000_000, "{row}");
    assert!(
        row["max(off_cpu)"].as_i64().unwrap() < 1_000_000_000,
        "{row}"
    );
    // The thread's name comes along, and the run-queue wait is part of the
    // off-CPU time.
    let rows = query(
        &dir,
        r#"sched where state = "S" | fields comm, off_cpu, runq"#,
    );
    assert_eq!(rows.len(), sleeps);
    for row in rows {
        assert_eq!(row["comm"], "weft-workload", "{row}");
        assert!(row["runq"].as_i64() <= row["off_cpu"].as_i64(), "{row}");
    }
}
