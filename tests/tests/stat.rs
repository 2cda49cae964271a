//! `weft stat` against real syscalls of a child with an exactly known count.

use std::time::{Duration, Instant};

use serde_json::json;
use weft_tests::{Cgroup, Stat, StatOutput, Workload, can_trace, run_weft};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_weft-workload");

/// Runs `steps` in a fresh workload while `weft stat ARGS --pid <workload>` traces it.
fn trace_workload(steps: &[&str], args: &[&str]) -> StatOutput {
    let workload = Workload::spawn(WORKLOAD, steps);
    let pid = workload.pid().to_string();
    let mut all_args = vec!["--pid", pid.as_str()];
    all_args.extend_from_slice(args);
    let stat = Stat::start(&all_args);
    workload.run_to_end();
    let out = stat.stop();
    assert!(
        out.status.success(),
        "weft exited {}: {}",
        out.status,
        out.stderr
    );
    assert!(!out.stderr.contains("mismatch"), "{}", out.stderr);
    out
}

/// received + lost == seen, for every run.
fn assert_accounting(out: &StatOutput) {
    assert_eq!(
        out.counter("received") + out.counter("ring_full"),
        out.counter("seen"),
        "{}",
        out.total
    );
}

const N: u64 = 1_000_000;

#[test]
fn exact_getppid_count_raw_tracepoints() {
    if !can_trace("exact_getppid_count_raw_tracepoints") {
        return;
    }
    let out = trace_workload(&[&format!("getppid:{N}")], &["--attach", "raw"]);
    assert_eq!(out.count("getppid"), N, "{}", out.total);
    assert_eq!(out.counter("lost"), 0, "{}", out.total);
    assert_accounting(&out);
}

#[test]
fn exact_getppid_count_per_syscall_tracepoints() {
    if !can_trace("exact_getppid_count_per_syscall_tracepoints") {
        return;
    }
    let out = trace_workload(&[&format!("getppid:{N}")], &["--syscall", "getppid"]);
    assert_eq!(out.count("getppid"), N, "{}", out.total);
    assert_eq!(
        out.counter("received"),
        N,
        "only getppid may arrive: {}",
        out.total
    );
    assert_eq!(out.counter("lost"), 0, "{}", out.total);
    assert_accounting(&out);
}

#[test]
fn losses_are_counted_exactly() {
    if !can_trace("losses_are_counted_exactly") {
        return;
    }
    // A one-page ring that is not drained until the end must overflow.
    let out = trace_workload(
        &[&format!("getppid:{N}")],
        &[
            "--syscall",
            "getppid",
            "--ring-size",
            "4KiB",
            "--drain-interval",
            "1h",
        ],
    );
    let (received, lost) = (out.counter("received"), out.counter("ring_full"));
    assert!(
        lost > 0,
        "a 4 KiB ring cannot hold {N} records: {}",
        out.total
    );
    assert_eq!(received + lost, N, "{}", out.total);
    assert_eq!(out.count("getppid"), received);
    let per_cpu: u64 = out.total["ring_full_per_cpu"]
        .as_array()
        .expect("per-CPU losses")
        .iter()
        .map(|n| n.as_u64().expect("count"))
        .sum();
    assert_eq!(per_cpu, lost);
}

#[test]
fn nanosleep_latency_is_true() {
    const K: u64 = 50;
    if !can_trace("nanosleep_latency_is_true") {
        return;
    }
    let out = trace_workload(&[&format!("nanosleep:2:{K}")], &["--syscall", "nanosleep"]);
    let row = out
        .row("nanosleep")
        .unwrap_or_else(|| panic!("no nanosleep row: {}", out.total));
    assert_eq!(row["count"], K);
    let (min, max) = (
        row["min_ns"].as_u64().unwrap(),
        row["max_ns"].as_u64().unwrap(),
    );
    assert!(min >= 2_000_000, "a 2 ms sleep took {min} ns");
    assert!(max < 50_000_000, "a 2 ms sleep took {max} ns");
}

#[test]
fn pid_filter_excludes_other_processes() {
    if !can_trace("pid_filter_excludes_other_processes") {
        return;
    }
    let other = Workload::spawn(WORKLOAD, &["getppid:20000"]);
    let traced = Workload::spawn(WORKLOAD, &["getppid:10000"]);
    let pid = traced.pid().to_string();
    let stat = Stat::start(&["--pid", &pid, "--syscall", "getppid"]);
    other.run_to_end();
    traced.run_to_end();
    let out = stat.stop();
    assert_eq!(out.count("getppid"), 10_000, "{}", out.total);
}

/// `-P` gives a row per process, named, as `syscount -P` does, `--by tid`
/// one per thread and `--by comm` one per task name, and every row counts
/// its calls that failed, as `strace -c` does: two workloads, each row
/// exact.
#[test]
fn per_process_rows_and_errors_are_exact() {
    if !can_trace("per_process_rows_and_errors_are_exact") {
        return;
    }
    // Each lives on 100 ms after its calls: a process's name is read from
    // /proc when its first call is drained (a process gone by then shows
    // as `?`).
    let one = Workload::spawn(
        WORKLOAD,
        &["getppid:3000", "close-bad:700", "nanosleep:100:1"],
    );
    let two = Workload::spawn(WORKLOAD, &["close-bad:1100", "nanosleep:100:1"]);
    let pids = format!("{},{}", one.pid(), two.pid());
    let by_process = Stat::start(&["--pid", &pids, "--syscall", "getppid,close", "-P"]);
    let by_call = Stat::start(&["--pid", &pids, "--syscall", "getppid,close"]);
    let by_thread = Stat::start(&["--pid", &pids, "--syscall", "getppid,close", "--by", "tid"]);
    let by_name = Stat::start(&["--pid", &pids, "--syscall", "getppid,close", "--by", "comm"]);
    let (pid_one, pid_two) = (one.pid(), two.pid());
    one.run_to_end();
    two.run_to_end();
    let by_call = by_call.stop();
    assert_eq!(by_call.count("close"), 1800, "{}", by_call.total);
    assert_eq!(by_call.row("close").unwrap()["errors"], 1800);
    assert_eq!(by_call.row("close").unwrap()["top_errno"], "EBADF");
    assert_eq!(by_call.row("getppid").unwrap()["errors"], 0);
    let by_process = by_process.stop();
    let rows = by_process.total["processes"].as_array().expect("processes");
    let row = |pid: u32| {
        rows.iter()
            .find(|r| r["pid"] == pid)
            .unwrap_or_else(|| panic!("no row for {pid}: {}", by_process.total))
    };
    assert_eq!(rows.len(), 2, "{}", by_process.total);
    for (pid, count, errors) in [(pid_one, 3700, 700), (pid_two, 1100, 1100)] {
        let row = row(pid);
        assert_eq!(
            (row["count"].as_u64(), row["errors"].as_u64()),
            (Some(count), Some(errors))
        );
        assert_eq!(row["comm"], "weft-workload");
    }
    // The workload makes its calls on its main thread, whose tid is its pid.
    let by_thread = by_thread.stop();
    let threads = by_thread.total["threads"].as_array().expect("threads");
    let mut counts: Vec<_> = (threads.iter())
        .map(|r| (r["tid"].as_u64(), r["count"].as_u64(), r["comm"].clone()))
        .collect();
    counts.sort_by_key(|(tid, ..)| *tid);
    let mut expected = vec![
        (Some(u64::from(pid_one)), Some(3700), json!("weft-workload")),
        (Some(u64::from(pid_two)), Some(1100), json!("weft-workload")),
    ];
    expected.sort_by_key(|(tid, ..)| *tid);
    assert_eq!(counts, expected, "{}", by_thread.total);
    // One name, both processes.
    let by_name = by_name.stop();
    let names = by_name.total["comms"].as_array().expect("comms");
    assert_eq!(names.len(), 1, "{}", by_name.total);
    assert_eq!(
        (
            &names[0]["comm"],
            names[0]["count"].as_u64(),
            names[0]["errors"].as_u64()
        ),
        (&json!("weft-workload"), Some(4800), Some(1800))
    );
    assert!(names[0].get("pid").is_none(), "{}", by_name.total);
}

/// `--cgroup DIR` traces the threads in that cgroup v2 directory only,
/// in the kernel: of two workloads, the one moved into it is counted
/// exactly, the other not at all. A directory of another file system is
/// refused by name.
#[test]
fn cgroup_filter_counts_only_the_cgroup_s_threads() {
    let test = "cgroup_filter_counts_only_the_cgroup_s_threads";
    if !can_trace(test) {
        return;
    }
    let Some(cgroup) = Cgroup::create(test) else {
        return;
    };
    let inside = Workload::spawn(WORKLOAD, &["getppid:4000"]);
    let outside = Workload::spawn(WORKLOAD, &["getppid:9000"]);
    std::fs::write(cgroup.dir.join("cgroup.procs"), inside.pid().to_string())
        .expect("move the workload into the cgroup");
    let dir = cgroup.dir.to_str().unwrap();
    let stat = Stat::start(&["--cgroup", dir, "--syscall", "getppid", "-P"]);
    let pid = inside.pid();
    outside.run_to_end();
    inside.run_to_end();
    let out = stat.stop();
    let rows = out.total["processes"].as_array().expect("processes");
    assert_eq!(rows.len(), 1, "{}", out.total);
    assert_eq!(
        (rows[0]["pid"].as_u64(), rows[0]["count"].as_u64()),
        (Some(pid.into()), Some(4000))
    );

    let tmp = std::env::temp_dir();
    let (status, _, stderr) = run_weft(&["stat", "--cgroup", tmp.to_str().unwrap(), "-d", "1s"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a cgroup v2 directory"), "{stderr}");
}

/// `--cost` reports what weft's own kernel programs cost, by the kernel's
/// BPF statistics: the entry and exit programs each ran at least once per
/// call the workload made (other processes' getppid calls run them too),
/// each run took time, and the sum per syscall is theirs.
#[test]
fn cost_reports_each_program_s_runs_and_time() {
    if !can_trace("cost_reports_each_program_s_runs_and_time") {
        return;
    }
    let out = trace_workload(&["getppid:20000"], &["--syscall", "getppid", "--cost"]);
    assert_eq!(out.count("getppid"), 20_000, "{}", out.total);
    let cost = &out.total["probe_cost"];
    let programs = cost["programs"].as_array().expect("programs");
    assert_eq!(programs.len(), 2, "{cost}");
    let mut sum = 0;
    for program in programs {
        let runs = program["runs"].as_u64().unwrap();
        let per_run = program["ns_per_run"].as_f64().unwrap();
        assert!(runs >= 20_000, "{program}");
        assert!((1.0..1e6).contains(&per_run), "{program}");
        sum += program["run_ns"].as_u64().unwrap();
    }
    let fewest = programs
        .iter()
        .map(|p| p["runs"].as_u64().unwrap())
        .min()
        .unwrap();
    let cpu = cost["weft_cpu_percent"].as_f64().unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    assert!((0.0..=100.0 * cpus as f64).contains(&cpu), "{cost}");
    let per_syscall = cost["ns_per_syscall"].as_u64().unwrap();
    assert_eq!(per_syscall, sum / fewest, "{cost}");
}

/// Without `--cost`, the kernel's BPF statistics are on for a second of
/// every ten, the first from 2 s in, and the total still says what the
/// programs cost a syscall, from those runs. (3.5 s: the workload sleeps
/// into the first sample.)
#[test]
fn the_programs_time_per_syscall_is_sampled_without_cost() {
    if !can_trace("the_programs_time_per_syscall_is_sampled_without_cost") {
        return;
    }
    let out = trace_workload(&["getppid:20000", "nanosleep:3500:1"], &[]);
    assert_eq!(out.count("getppid"), 20_000, "{}", out.total);
    let per_syscall = out.total["bpf_ns_per_syscall"].as_f64();
    assert!(
        per_syscall.is_some_and(|ns| (1.0..1e6).contains(&ns)),
        "{}",
        out.total
    );
    assert!(out.total.get("probe_cost").is_none(), "{}", out.total);
}

#[test]
fn syscall_filter_excludes_other_syscalls() {
    if !can_trace("syscall_filter_excludes_other_syscalls") {
        return;
    }
    for attach in ["raw", "syscall"] {
        let out = trace_workload(
            &["getppid:30000", "getpid:7000"],
            &["--syscall", "getpid", "--attach", attach],
        );
        assert_eq!(out.count("getpid"), 7000, "{attach}: {}", out.total);
        assert_eq!(out.counter("received"), 7000, "{attach}: {}", out.total);
    }
}

#[test]
fn comm_filter_selects_by_task_name() {
    if !can_trace("comm_filter_selects_by_task_name") {
        return;
    }
    let out = trace_workload(&["getppid:5000"], &["--comm", "weft-workload"]);
    assert_eq!(out.count("getppid"), 5000, "{}", out.total);
    let out = trace_workload(&["getppid:5000"], &["--comm", "not-workload"]);
    assert_eq!(out.counter("received"), 0, "{}", out.total);
}

#[test]
fn min_duration_drops_short_syscalls() {
    if !can_trace("min_duration_drops_short_syscalls") {
        return;
    }
    // 50 ms apart: under an emulating hypervisor (the VM matrix) a getppid
    // preempted by a timer tick can take a few ms.
    let out = trace_workload(
        &["getppid:20000", "nanosleep:60:10"],
        &["--min-duration", "50ms"],
    );
    assert_eq!(out.count("getppid"), 0, "{}", out.total);
    assert_eq!(out.count("nanosleep"), 10, "{}", out.total);
}

#[test]
fn text_tables_per_interval_and_total() {
    if !can_trace("text_tables_per_interval_and_total") {
        return;
    }
    let pid = std::process::id().to_string();
    let (status, stdout, stderr) = weft_tests::run_weft(&[
        "stat",
        "--pid",
        &pid,
        "--duration",
        "1s",
        "--interval",
        "300ms",
    ]);
    assert!(status.success(), "{stderr}");
    let intervals = stdout
        .lines()
        .filter(|l| l.starts_with("== interval"))
        .count();
    assert!(
        (2..=4).contains(&intervals),
        "expected about 3 intervals:\n{stdout}"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("== total")).count(),
        1,
        "{stdout}"
    );
    assert!(
        stdout.contains("SYSCALL") && stdout.contains("P99.9"),
        "{stdout}"
    );
    assert!(
        stdout.contains("lost 0 (ring full 0, enter table full 0)"),
        "{stdout}"
    );
}

#[test]
fn a_few_syscalls_arrive_while_tracing_not_only_at_the_end() {
    if !can_trace("a_few_syscalls_arrive_while_tracing_not_only_at_the_end") {
        return;
    }
    // Three records fill no CPU's batch (weft_abi::syscall::BATCH_EVENTS),
    // and the workload then sleeps 1.5 s untraced: the records must come
    // in an interval long before that, when weft has the CPU send them.
    let workload = Workload::spawn(WORKLOAD, &["getppid:3", "nanosleep:1500:1"]);
    let pid = workload.pid().to_string();
    let stat = weft_tests::Running::start(
        &[
            "stat",
            "--json",
            "--pid",
            &pid,
            "--syscall",
            "getppid",
            "--interval",
            "200ms",
        ],
        "weft: tracing",
    );
    workload.run_to_end();
    let out = stat.stop();
    assert!(out.status.success(), "{}", out.stderr);
    let per_interval: Vec<u64> = out
        .stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|object| object["kind"] == "interval")
        .map(|object| {
            object["syscalls"]
                .as_array()
                .expect("syscalls array")
                .iter()
                .filter(|row| row["name"] == "getppid")
                .map(|row| row["count"].as_u64().expect("count"))
                .sum()
        })
        .collect();
    assert!(
        per_interval.len() >= 6,
        "a 1.5 s workload spans about 8 intervals of 200 ms: {per_interval:?}"
    );
    assert_eq!(
        per_interval[..4].iter().sum::<u64>(),
        3,
        "the 3 getppid calls come within 800 ms, while the workload sleeps: {per_interval:?}"
    );
}

/// `-c COMMAND` and `-- PROGRAM ARGS` run the command and trace it and the
/// processes it starts (in a cgroup of its own, filtered in the kernel)
/// until it exits: a shell's two workloads, one in the background, are
/// counted exactly; a workload outside running at the same time is not;
/// weft ends when the shell does and leaves no cgroup behind, nor when it
/// stops first (`--duration`) and ends the command's processes itself.
#[test]
fn a_command_and_the_processes_it_starts_are_traced_until_it_exits() {
    let test = "a_command_and_the_processes_it_starts_are_traced_until_it_exits";
    if !can_trace(test) {
        return;
    }
    let mut outside = Workload::spawn(WORKLOAD, &["getppid:20000"]);
    outside.go();
    // Each workload waits for a byte on stdin; the pipe gives it one.
    let script =
        format!("printf x | {WORKLOAD} getppid:700 & printf x | {WORKLOAD} getppid:300; wait");
    // `-c` splits on blanks, as bpftrace's: the script from a file.
    let file = std::env::temp_dir().join(format!("weft-command-{}.sh", std::process::id()));
    std::fs::write(&file, &script).expect("write the script");
    let command = format!("sh {}", file.display());
    for form in [
        vec!["--", "sh", "-c", script.as_str()],
        vec!["-c", command.as_str()],
    ] {
        let mut args = vec!["stat", "--json", "--syscall", "getppid", "-P"];
        args.extend(&form);
        let (status, stdout, stderr) = run_weft(&args);
        assert!(status.success(), "{form:?}: {stderr}");
        let total: serde_json::Value = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|o| o["kind"] == "total")
            .unwrap_or_else(|| panic!("{form:?}: no total in {stdout}"));
        let rows = total["processes"].as_array().expect("processes");
        // The two workloads' rows (each a process of its own; named or
        // not, as they may be gone before weft reads their names), and
        // the shell's own few calls.
        let mut counts: Vec<u64> = (rows.iter()).filter_map(|r| r["count"].as_u64()).collect();
        counts.sort_unstable();
        let (shell, workloads) = counts.split_at(counts.len().saturating_sub(2));
        assert_eq!(workloads, [300, 700], "{form:?}: {total}");
        assert!(shell.iter().sum::<u64>() < 10, "{form:?}: {total}");
        assert!(
            rows.iter().all(|r| r["pid"] != outside.pid()),
            "{form:?}: the outside workload was traced: {total}"
        );
    }
    // Stopped before the command ends, weft ends it and all it started (a
    // background sleep too), and so leaves no cgroup either.
    let started = Instant::now();
    let (status, _, stderr) =
        run_weft(&["stat", "-d", "1s", "--", "sh", "-c", "sleep 30 & sleep 30"]);
    assert!(status.success(), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(20), "{stderr}");
    assert!(!stderr.contains("left in place"), "{stderr}");
    let cgroup2 =
        weft_tests::cgroup2_root().expect("a cgroup2 mount (weft made the command's cgroup there)");
    let left: Vec<String> = std::fs::read_dir(&cgroup2)
        .expect("read the cgroup2 root")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| {
            name.strip_prefix("weft-")
                .is_some_and(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
    let _ = std::fs::remove_file(&file);
}
