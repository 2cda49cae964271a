//! `weft record` writes every syscall of a known workload into a capture that
//! the store reopens with the same facts; `weft info` reports them.

use std::os::unix::fs::PermissionsExt as _;

use weft_tests::{Running, Workload, can_trace, capture_dir, query_rows, run_weft};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_weft-workload");
const NR_GETPPID: i64 = 110;
const NR_NANOSLEEP: i64 = 35;

use weft_tests::record;

/// The store index called `name` of source 0.
fn index(snapshot: &weft_store::Snapshot, name: &str) -> u16 {
    snapshot
        .meta()
        .indexes
        .iter()
        .find(|i| i.name == name)
        .expect("index")
        .id
}

#[test]
fn record_holds_exact_counts_and_true_latencies() {
    if !can_trace("record_holds_exact_counts_and_true_latencies") {
        return;
    }
    let dir = capture_dir("exact");
    let stderr = record(WORKLOAD, &dir, &["getppid:100000", "nanosleep:2:20"], &[]);
    assert!(stderr.contains("lost 0"), "{stderr}");

    let (snapshot, recovery) = weft_store::open_read_only(&dir).unwrap();
    assert_eq!(recovery.cut_chunks, 0);
    let nr = index(&snapshot, "nr");
    let (getppid, _) = snapshot
        .indexed_scan(0, nr, 0..=u64::MAX, NR_GETPPID..=NR_GETPPID)
        .unwrap();
    assert_eq!(getppid.len(), 100_000);
    let (sleeps, _) = snapshot
        .indexed_scan(0, nr, 0..=u64::MAX, NR_NANOSLEEP..=NR_NANOSLEEP)
        .unwrap();
    assert_eq!(sleeps.len(), 20);
    let duration = &snapshot.meta().sources[0].fields[1];
    for record in &sleeps {
        let ns = duration.read(&record.payload).unwrap();
        assert!(
            (2_000_000..50_000_000).contains(&ns),
            "a 2 ms sleep took {ns} ns"
        );
        assert!(record.producer_ts.is_some(), "kernel exit time kept");
    }
    // The latency index answers the same as the records.
    let latency = index(&snapshot, "duration_ns");
    let (p100, _) = snapshot.percentile(0, latency, 0..=u64::MAX, 1.0).unwrap();
    let longest = sleeps
        .iter()
        .map(|r| duration.read(&r.payload).unwrap())
        .max();
    assert!(
        p100 >= longest,
        "max {p100:?} below a nanosleep {longest:?}"
    );

    // weft.json says the session is complete and lost nothing.
    let metadata: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("weft.json")).unwrap()).unwrap();
    let session = &metadata["sessions"][0];
    assert_eq!(session["complete"], true, "{metadata}");
    assert_eq!(session["lost"]["syscalls"]["ring_full"], 0, "{metadata}");
    let received = session["lost"]["syscalls"]["received"].as_u64().unwrap();
    let (syscalls, _) = snapshot.aggregate(0, 0, 0..=u64::MAX).unwrap();
    assert_eq!(syscalls.count, received);
    // Beside them, one `tasks` record names the workload's thread.
    assert_eq!(snapshot.records().unwrap(), received + 1);

    // Private: the directory is 0700, every file 0600.
    assert_eq!(
        std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", entry.path().display());
    }

    // weft info reports the same count.
    let (status, stdout, stderr) = run_weft(&["info", "--json", dir.to_str().unwrap()]);
    assert!(status.success(), "{stderr}");
    let info: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        info["sources"][0]["records"].as_u64(),
        Some(received),
        "{info}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn record_refuses_an_existing_capture_unless_appending() {
    if !can_trace("record_refuses_an_existing_capture_unless_appending") {
        return;
    }
    let dir = capture_dir("append");
    record(WORKLOAD, &dir, &["getppid:1000"], &[]);
    let (status, _, stderr) =
        run_weft(&["record", "-o", dir.to_str().unwrap(), "--duration", "1s"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("already holds a capture") && stderr.contains("--append"),
        "{stderr}"
    );
    record(WORKLOAD, &dir, &["getppid:2000"], &["--append"]);
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    let nr = index(&snapshot, "nr");
    let (getppid, _) = snapshot
        .indexed_scan(0, nr, 0..=u64::MAX, NR_GETPPID..=NR_GETPPID)
        .unwrap();
    assert_eq!(getppid.len(), 3000, "both sessions' records");
    let metadata: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("weft.json")).unwrap()).unwrap();
    assert_eq!(metadata["sessions"].as_array().map(Vec::len), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn record_killed_leaves_a_capture_that_opens() {
    if !can_trace("record_killed_leaves_a_capture_that_opens") {
        return;
    }
    let dir = capture_dir("killed");
    let running = Running::start(&["record", "-o", dir.to_str().unwrap()], "weft: recording");
    let workload = Workload::spawn(WORKLOAD, &["getppid:300000"]);
    workload.run_to_end();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let finished = running.stop_with(libc::SIGKILL);
    assert!(!finished.status.success());
    let (status, stdout, stderr) = run_weft(&["info", dir.to_str().unwrap()]);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("sessions  1 (0 complete)"), "{stdout}");
    assert!(stdout.contains("source    syscalls:"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// weft never records its own calls, which would feed back into what it
/// traces (its entry program no longer reads the thread's ids, so the
/// exit drops them): a recorder filtered to the name `weft` keeps another
/// weft's calls and none of its own.
#[test]
fn record_keeps_another_weft_s_calls_and_none_of_its_own() {
    if !can_trace("record_keeps_another_weft_s_calls_and_none_of_its_own") {
        return;
    }
    let dir = capture_dir("self");
    let recorder = Running::start(
        &["record", "-o", dir.to_str().unwrap(), "--comm", "weft"],
        "weft: recording",
    );
    let (status, _, stderr) = run_weft(&["stat", "--comm", "no-such-task", "--duration", "1s"]);
    assert!(status.success(), "{stderr}");
    let own = recorder.pid();
    let finished = recorder.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    let rows = query_rows(&dir, "syscalls | count by pid");
    assert!(!rows.is_empty(), "the other weft's calls are kept");
    assert!(
        rows.iter()
            .all(|row| row["pid"].as_u64() != Some(own.into())),
        "weft {own} recorded itself: {rows:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn queries_tell_threads_apart_by_their_cgroup() {
    let test = "queries_tell_threads_apart_by_their_cgroup";
    if !can_trace(test) {
        return;
    }
    let Some(cgroup) = weft_tests::Cgroup::create(test) else {
        return;
    };
    let dir = capture_dir("cgroups");
    // Each stays 300 ms after its calls (a sleep, not recorded), so that
    // the recorder reads its cgroup from /proc before it exits: a CI run
    // read one too late and counted the 4,000 calls under no cgroup.
    let inside = Workload::spawn(WORKLOAD, &["getppid:4000", "nanosleep:300:1"]);
    let outside = Workload::spawn(WORKLOAD, &["getppid:9000", "nanosleep:300:1"]);
    std::fs::write(cgroup.dir.join("cgroup.procs"), inside.pid().to_string())
        .expect("move the workload into the cgroup");
    // The path /proc shows for it: from the cgroup2 root.
    let path = format!("/{}", cgroup.dir.file_name().unwrap().to_str().unwrap());
    let running = Running::start(
        &[
            "record",
            "-o",
            dir.to_str().unwrap(),
            "--syscall",
            "getppid",
        ],
        "weft: recording",
    );
    let (a, b) = (inside.pid(), outside.pid());
    inside.run_to_end();
    outside.run_to_end();
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    let count = |query: &str| query_rows(&dir, query)[0]["count"].as_u64().unwrap();
    assert_eq!(
        count(&format!(r#"syscalls where cgroup = "{path}" | count"#)),
        4000
    );
    let rows = query_rows(
        &dir,
        &format!("syscalls where pid in ({a}, {b}) | count by cgroup"),
    );
    let of = |cgroup: &str| {
        rows.iter()
            .find(|r| r["cgroup"] == cgroup)
            .and_then(|r| r["count"].as_u64())
    };
    assert_eq!(of(&path), Some(4000), "{rows:?}");
    assert_eq!(rows.len(), 2, "and the other workload's cgroup: {rows:?}");
    assert_eq!(
        rows.iter()
            .map(|r| r["count"].as_u64().unwrap())
            .sum::<u64>(),
        13_000
    );
}

/// `weft record` reads its probes' counters from memory, never through
/// `bpf()`: while a map call lasts, the kernel runs no classic tracepoint
/// program on its CPU (`bpf_prog_active`), so each read would lose the
/// sched, block and page-cache events that came then, uncounted before
/// Linux 6.7. Traced by strace for 3 s (three status ticks), weft makes no
/// map call from its last attach to its exit.
#[test]
fn record_makes_no_map_call_while_its_probes_run() {
    let test = "record_makes_no_map_call_while_its_probes_run";
    if !can_trace(test) || !weft_tests::has_tool(test, "strace", "-V") {
        return;
    }
    let capture = capture_dir(test);
    let calls = capture.with_extension("strace");
    let strace = [
        "strace",
        "-f",
        "-qq",
        "-e",
        "trace=bpf",
        "-o",
        calls.to_str().unwrap(),
    ];
    let running = Running::start_under(
        &strace,
        &[
            "record",
            "-o",
            capture.to_str().unwrap(),
            "--sources",
            "sched,switch,syscalls",
            "--duration",
            "3s",
        ],
        "weft: recording",
    );
    let finished = running.wait();
    assert!(finished.status.success(), "{}", finished.stderr);
    let calls = std::fs::read_to_string(&calls).expect("strace's output");
    let lines: Vec<&str> = calls.lines().collect();
    let attach = ["BPF_LINK_CREATE", "BPF_RAW_TRACEPOINT_OPEN"];
    let last_attach = (lines.iter())
        .rposition(|line| attach.iter().any(|call| line.contains(call)))
        .unwrap_or_else(|| panic!("no attach call traced:\n{calls}"));
    let map_calls: Vec<&&str> = lines[last_attach..]
        .iter()
        .filter(|line| line.contains("bpf(BPF_MAP_"))
        .collect();
    assert!(
        map_calls.is_empty(),
        "map calls while probes ran:\n{map_calls:#?}"
    );
    // It recorded meanwhile, counters read (none lost).
    assert!(finished.stderr.contains("switch: "), "{}", finished.stderr);
    assert!(finished.stderr.contains("lost 0"), "{}", finished.stderr);
}
