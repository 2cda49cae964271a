//! `weft query` on real recordings: a workload with known facts (exactly one
//! 50 ms `nanosleep` among 100,000 `getppid`) gives the known answers, the
//! percentiles equal those computed from a full export, and queries during
//! a recording see consistent, growing data.

use std::os::unix::fs::PermissionsExt as _;

use weft_tests::{
    Running, Workload, can_trace, capture_dir, has_tool, record, run_weft, setup_tool,
};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_weft-workload");

use weft_tests::query_rows as query;

/// The single row of an aggregate query.
fn row(dir: &std::path::Path, text: &str) -> serde_json::Value {
    let rows = query(dir, text);
    assert_eq!(rows.len(), 1, "{text}: {rows:?}");
    rows.into_iter().next().unwrap()
}

/// Counts by thread, process, name, CPU and return value come from the
/// values log, and latency aggregates by them from the summaries of chunks
/// that hold one thread's (one CPU's) records; each equals what a scan of
/// every record gives. The
/// workload's thread made over 100,000 calls.
fn groups_by_thread_come_from_summaries(dir: &std::path::Path) {
    let by_key = "a chunk whose records are of one `tid` counted for it";
    for (text, how) in [
        ("syscalls | count by comm", "from the values log"),
        ("syscalls | count by tid", "from the values log"),
        ("syscalls | count by pid", "from the values log"),
        ("syscalls | count by cpu", "from the values log"),
        ("syscalls | count by ret", "from the values log"),
        ("syscalls | p99(dur) by pid", by_key),
        (
            "syscalls | p99(dur), count by cpu",
            "a chunk whose records are of one `cpu`",
        ),
        (
            "syscalls | count, p50(dur), max(dur), avg(dur) by comm",
            by_key,
        ),
        (
            "syscalls | percentiles(dur), sum(dur), min(dur) by tid",
            by_key,
        ),
    ] {
        let plan = explain(dir, text);
        assert!(plan.contains(how), "{text}: {plan}");
        assert_same_as_full_scan(dir, text);
    }
    let counts = query(dir, "syscalls | count by comm");
    let workload = counts
        .iter()
        .find(|r| r["comm"] == "weft-workload")
        .unwrap();
    assert!(workload["count"].as_i64().unwrap() > 100_000, "{counts:?}");
}

/// `weft query --explain`'s plan of `text` over the capture at `dir`.
fn explain(dir: &std::path::Path, text: &str) -> String {
    let (status, plan, stderr) = run_weft(&["query", "--explain", dir.to_str().unwrap(), text]);
    assert!(status.success(), "{stderr}");
    plan
}

/// Asserts that `text` answers over `dir` as it does reading every record.
fn assert_same_as_full_scan(dir: &std::path::Path, text: &str) {
    let (status, scanned, stderr) = run_weft(&[
        "query",
        "--json",
        "--full-scan",
        dir.to_str().unwrap(),
        text,
    ]);
    assert!(status.success(), "{stderr}");
    let mut answered: Vec<String> = query(dir, text).iter().map(ToString::to_string).collect();
    let mut scanned: Vec<String> = (scanned.lines())
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .unwrap()
                .to_string()
        })
        .collect();
    answered.sort();
    scanned.sort();
    assert_eq!(answered, scanned, "{text}");
}

/// Where a process's threads interleave, its chunks mix them: percentiles
/// and aggregates by thread, process and name then come from the values
/// log's latencies kept apart per thread, no chunk's records are read, and
/// the answers are those of reading every record.
#[test]
fn percentiles_by_thread_where_threads_interleave_read_no_records() {
    if !can_trace("percentiles_by_thread_where_threads_interleave_read_no_records") {
        return;
    }
    let dir = capture_dir("by-thread-interleaved");
    let stderr = record(WORKLOAD, &dir, &["threads:4:50000"], &[]);
    assert!(stderr.contains("lost 0"), "{stderr}");
    let counts = query(&dir, r#"syscalls where name = "getppid" | count by tid"#);
    assert_eq!(counts.len(), 4, "{counts:?}");
    assert!(counts.iter().all(|r| r["count"] == 50_000), "{counts:?}");
    for text in [
        "syscalls | p99(dur) by pid",
        "syscalls | percentiles(dur), sum(dur), min(dur), max(dur) by tid",
        "syscalls | count, p50(dur), avg(dur) by comm",
    ] {
        let plan = explain(&dir, text);
        assert!(
            plan.contains("a chunk whose records are of one `tid` counted for it")
                && plan.contains(", 0 read,"),
            "{text}: {plan}"
        );
        assert_same_as_full_scan(&dir, text);
    }
}

#[test]
fn query_answers_known_facts_of_a_recording() {
    if !can_trace("query_answers_known_facts_of_a_recording") {
        return;
    }
    let dir = capture_dir("query-facts");
    let stderr = record(
        WORKLOAD,
        &dir,
        &["getppid:50000", "nanosleep:50:1", "getppid:50000"],
        &[],
    );
    assert!(stderr.contains("lost 0"), "{stderr}");

    let r = row(&dir, r#"syscalls where name = "getppid" | count"#);
    assert_eq!(r["count"], 100_000);
    let r = row(
        &dir,
        r#"syscalls where name = "nanosleep" | count, max(dur)"#,
    );
    assert_eq!(r["count"], 1);
    let sleep = r["max(dur)"].as_i64().unwrap();
    assert!((50_000_000..150_000_000).contains(&sleep), "{sleep}");

    // Threads are named: the workload's one thread made every call.
    let r = row(
        &dir,
        r#"syscalls where comm = "weft-workload" and name = "getppid" | count"#,
    );
    assert_eq!(r["count"], 100_000);
    let r = row(&dir, "syscalls | top 1 by comm");
    assert_eq!(r["comm"], "weft-workload");
    let r = row(&dir, r#"syscalls where comm ~ "weft-*" | count by comm"#);
    assert_eq!(r["comm"], "weft-workload");
    groups_by_thread_come_from_summaries(&dir);

    // The slowest record above the p99.99 is the sleep.
    let rows = query(
        &dir,
        "syscalls where dur > p99.99 | sort dur desc | limit 1",
    );
    assert_eq!(rows[0]["name"], "nanosleep", "{rows:?}");
    assert_eq!(rows[0]["dur"], sleep);

    // Percentiles from the summaries equal those of a full export.
    let mut all: Vec<i64> = query(&dir, "syscalls | fields dur")
        .iter()
        .map(|r| r["dur"].as_i64().unwrap())
        .collect();
    all.sort_unstable();
    let n = all.len();
    let p = row(&dir, "syscalls | count, p50(dur), p99(dur), p99.99(dur)");
    assert_eq!(p["count"], n);
    for (column, q) in [
        ("p50(dur)", 0.5),
        ("p99(dur)", 0.99),
        ("p99.99(dur)", 0.9999),
    ] {
        #[expect(clippy::cast_sign_loss, reason = "q is in 0..=1")]
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        assert_eq!(p[column], all[rank - 1], "{column}");
    }

    // Correlation: the sleep, and nothing else of its thread, during itself.
    let r = row(
        &dir,
        r#"syscalls during (syscalls where name = "nanosleep") same tid | count"#,
    );
    assert_eq!(r["count"], 1);
    let r = row(
        &dir,
        "syscalls around (syscalls | max(dur)) within 10s | count by name | limit 1",
    );
    assert_eq!(r["name"], "getppid");
    assert_eq!(r["count"], 100_000);

    // The table names the columns and shows durations in units.
    let (status, stdout, _) = run_weft(&[
        "query",
        dir.to_str().unwrap(),
        r#"syscalls where name = "nanosleep" | fields name, dur"#,
    ]);
    assert!(status.success());
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with("name") && lines[1].starts_with("nanosleep"),
        "{stdout}"
    );
    assert!(lines[1].trim_end().ends_with("ms"), "{stdout}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn query_errors_point_at_the_token() {
    if !can_trace("query_errors_point_at_the_token") {
        return;
    }
    let dir = capture_dir("query-errors");
    record(WORKLOAD, &dir, &["getppid:10"], &[]);
    let (status, stdout, stderr) =
        run_weft(&["query", dir.to_str().unwrap(), "syscalls where durr > 5ms"]);
    assert_eq!(status.code(), Some(2));
    assert!(stdout.is_empty());
    assert_eq!(
        stderr,
        "weft: `syscalls` has no field `durr` (fields: time, name, dur, ret, comm, pid, tid, cpu, enter_ns, duration_ns, cgroup, nr)\n  syscalls where durr > 5ms\n                 ^^^^\n"
    );
    let (status, _, stderr) = run_weft(&["query", "/nonexistent/capture", "syscalls | count"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("/nonexistent/capture"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn query_while_recording_sees_consistent_growing_data() {
    if !can_trace("query_while_recording_sees_consistent_growing_data") {
        return;
    }
    let dir = capture_dir("query-live");
    let workload = Workload::spawn(WORKLOAD, &["getppid:3000000"]);
    let pid = workload.pid().to_string();
    let running = Running::start(
        &["record", "-o", dir.to_str().unwrap(), "--pid", &pid],
        "weft: recording",
    );
    let busy = std::thread::spawn(move || workload.run_to_end());
    let mut counts = Vec::new();
    while !busy.is_finished() || counts.len() < 3 {
        // p100 comes from bin counts and a record scan, max from summaries:
        // a torn snapshot would make them disagree (or fail the query).
        let r = row(&dir, "syscalls | count, p100(dur), max(dur)");
        assert_eq!(r["p100(dur)"], r["max(dur)"], "{r}");
        counts.push(r["count"].as_i64().unwrap());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    busy.join().unwrap();
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        counts.windows(2).all(|w| w[0] <= w[1]),
        "counts went back: {counts:?}"
    );
    // On a slow guest the rings may fill: every call is recorded or counted lost.
    let lost: i64 = finished
        .stderr
        .split("; lost ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no loss count in {}", finished.stderr));
    let r = row(&dir, r#"syscalls where name = "getppid" | count"#);
    let count = r["count"].as_i64().unwrap();
    assert!(
        count <= 3_000_000 && count + lost >= 3_000_000,
        "{count} recorded, {lost} lost: {}",
        finished.stderr
    );
    let grew = counts.iter().any(|c| (1..3_000_000).contains(c));
    assert!(grew, "no query saw the capture mid-way: {counts:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn export_parquet_matches_duckdb() {
    if !can_trace("export_parquet_matches_duckdb") {
        return;
    }
    let Some(python) = setup_tool(
        "export_parquet_matches_duckdb",
        "WEFT_PYTHON",
        "a Python with duckdb",
    ) else {
        return;
    };
    let dir = capture_dir("export");
    record(WORKLOAD, &dir, &["getppid:20000", "nanosleep:20:1"], &[]);
    let out = dir.with_extension("parquet");
    let (status, _, stderr) =
        run_weft(&["export", dir.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(status.success(), "{stderr}");
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let weft = row(&dir, "syscalls | count, p99.99(dur), max(dur)");
    let getppid = row(&dir, r#"syscalls where name = "getppid" | count"#);
    let metadata: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("weft.json")).unwrap()).unwrap();
    let offset = metadata["sessions"][0]["wall_offset_ns"].as_i64().unwrap();
    let script = format!(
        "import duckdb, json, math\n\
         f = '{}'\n\
         durs = [d for (d,) in duckdb.sql(f\"select dur from '{{f}}' order by dur\").fetchall()]\n\
         total, top = len(durs), durs[-1]\n\
         p = durs[min(max(math.ceil(0.9999 * total), 1), total) - 1]\n\
         (getppid,) = duckdb.sql(f\"select count(*) from '{{f}}' where name = 'getppid' and comm = 'weft-workload'\").fetchall()[0]\n\
         print(json.dumps([total, p, top, getppid]))\n\
         (kind,) = duckdb.sql(f\"select typeof(wall_time) from '{{f}}' limit 1\").fetchall()[0]\n\
         (off,) = duckdb.sql(f\"select count(*) from '{{f}}' where epoch_us(wall_time) != (time + {offset}) // 1000\").fetchall()[0]\n\
         codecs = sorted({{c for (c,) in duckdb.sql(f\"select compression from parquet_metadata('{{f}}')\").fetchall()}})\n\
         print(json.dumps([kind, off, codecs]))",
        out.display()
    );
    let duck = std::process::Command::new(python)
        .args(["-c", &script])
        .output()
        .expect("run python");
    assert!(
        duck.status.success(),
        "{}",
        String::from_utf8_lossy(&duck.stderr)
    );
    let printed = String::from_utf8_lossy(&duck.stdout);
    let mut lines = printed.lines();
    let duck: Vec<i64> = serde_json::from_str(lines.next().unwrap()).unwrap();
    // `wall_time` is a UTC timestamp, `time` plus the capture's wall offset
    // (to the microsecond) on every row; every column chunk is compressed.
    let wall: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        wall,
        serde_json::json!(["TIMESTAMP WITH TIME ZONE", 0, ["ZSTD"]])
    );
    assert_eq!(duck[0], weft["count"].as_i64().unwrap(), "row count");
    assert_eq!(duck[1], weft["p99.99(dur)"].as_i64().unwrap(), "p99.99");
    assert_eq!(duck[2], weft["max(dur)"].as_i64().unwrap(), "max");
    assert_eq!(duck[3], getppid["count"].as_i64().unwrap());
    assert_eq!(duck[3], 20_000);

    // `-o -` writes to standard output (a pipe into jq, tshark -r -), and
    // no file named `-`.
    let (status, stdout, stderr) = run_weft(&[
        "export",
        dir.to_str().unwrap(),
        "--format",
        "jsonl",
        "--where",
        r#"name = "getppid""#,
        "-o",
        "-",
    ]);
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout.lines().count(), 20_000);
    assert!(stderr.contains("to standard output"), "{stderr}");
    assert!(!std::path::Path::new("-").exists());

    // A bad condition leaves no file behind (and no temporary one).
    std::fs::remove_file(&out).unwrap();
    let (status, _, stderr) = run_weft(&[
        "export",
        dir.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--where",
        "durr > 1",
    ]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("no field `durr`"), "{stderr}");
    assert!(!out.exists());
    let tmp = out.with_extension("parquet.weft-tmp");
    assert!(!tmp.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn query_live_asks_the_running_recorder() {
    if !can_trace("query_live_asks_the_running_recorder") {
        return;
    }
    let dir = capture_dir("query-live-socket");
    let workload = Workload::spawn(WORKLOAD, &["getppid:50000"]);
    let pid = workload.pid().to_string();
    let running = Running::start(
        &["record", "-o", dir.to_str().unwrap(), "--pid", &pid],
        "weft: recording",
    );
    workload.run_to_end();
    let live = |query: &str| run_weft(&["query", "--live", "--json", query]);
    // The recorder publishes each second; wait for the whole workload.
    let mut count = serde_json::Value::Null;
    for _ in 0..50 {
        let (status, stdout, stderr) = live(r#"syscalls where name = "getppid" | count last 1h"#);
        assert!(status.success(), "{stderr}");
        count = serde_json::from_str::<serde_json::Value>(&stdout).unwrap()["count"].clone();
        if count == 50_000 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(count, 50_000);
    let (status, _, stderr) = live("syscalls where durr > 1ms");
    assert_eq!(status.code(), Some(2));
    assert!(
        stderr.contains("no field `durr`") && stderr.contains("^^^^"),
        "{stderr}"
    );
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(!std::path::Path::new("/run/weft/query.sock").exists());
    let (status, _, stderr) = live("syscalls | count");
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("no live weft"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two `weft record --metrics ADDR` (two hosts, each tracing its own
/// workload) scraped by a real Prometheus server (Debian's, which `cargo
/// xtask setup` installs): records and losses per source, and each
/// syscall's latency quantiles over the window, read back through
/// Prometheus's HTTP API, equal to what `weft query --live` answers; and
/// `histogram_quantile` over both hosts' summed latency buckets within one
/// bucket of the exact fleet quantile `weft query --fleet` gives, from the
/// classic buckets (text) and, for a second Prometheus with native
/// histograms on (protobuf), from the native ones.
#[test]
fn prometheus_scrapes_the_metrics_live_queries_give() {
    let test = "prometheus_scrapes_the_metrics_live_queries_give";
    if !can_trace(test) {
        return;
    }
    if !has_tool(test, "prometheus", "--version") {
        return;
    }
    let prometheus_addr = "127.0.0.1:19090";
    let keys = capture_dir("metrics-keys");
    std::fs::create_dir_all(&keys).unwrap();
    let secret = keys.join("key");
    std::fs::write(&secret, "the metrics test's shared secret\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let secret = secret.to_str().unwrap();
    // The first host answers `query --live`; the second finds the socket
    // taken and records on.
    let hosts = [
        ("metrics-a", 20_000, "127.0.0.1:19464", "127.0.0.1:19465"),
        ("metrics-b", 30_000, "127.0.0.1:19466", "127.0.0.1:19467"),
    ];
    let (mut recorders, mut workloads) = (Vec::new(), Vec::new());
    for (name, calls, metrics, peer) in hosts {
        let dir = capture_dir(name);
        let workload = Workload::spawn(WORKLOAD, &[&format!("getppid:{calls}")]);
        let pid = workload.pid().to_string();
        let running = Running::start(
            &[
                "record",
                "-o",
                dir.to_str().unwrap(),
                "--pid",
                &pid,
                "--metrics",
                metrics,
                "--metrics-window",
                "1m",
                "--peer-listen",
                peer,
                "--peer-secret",
                secret,
            ],
            "weft: recording",
        );
        recorders.push((dir, running));
        workloads.push(workload);
    }
    let targets: Vec<&str> = hosts.iter().map(|h| h.2).collect();
    let prometheus = Prometheus::start(&keys.join("prometheus"), prometheus_addr, &targets, false);
    let native = Prometheus::start(&keys.join("native"), "127.0.0.1:19091", &targets, true);
    for workload in workloads {
        workload.run_to_end();
    }
    let calls = |instance: &str| {
        format!(r#"weft_syscall_calls{{syscall="getppid",instance="{instance}"}}"#)
    };
    // Scraped each second: wait for a scrape after the workloads' end.
    let total = r#"sum(weft_syscall_duration_seconds_count{syscall="getppid"})"#;
    for _ in 0..100 {
        if prometheus.value(&calls(targets[0])) == Some(20_000.0)
            && prometheus.value(total) == Some(50_000.0)
        {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(prometheus.value(&calls(targets[0])), Some(20_000.0));
    assert_eq!(prometheus.value(total), Some(50_000.0));
    let native_total = r#"histogram_count(sum(weft_syscall_duration_seconds{syscall="getppid"}))"#;
    for _ in 0..50 {
        if native.value(native_total) == Some(50_000.0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(native.value(native_total), Some(50_000.0));
    assert_eq!(native.value(&calls(targets[0])), Some(20_000.0));
    let instance = format!(r#"source="syscalls",instance="{}""#, targets[0]);
    assert!(prometheus.value(&format!("weft_records_total{{{instance}}}")) >= Some(20_000.0));
    assert_eq!(
        prometheus.value(&format!("weft_lost_total{{{instance}}}")),
        Some(0.0)
    );
    this_hosts_quantiles_are_live_queries(&prometheus, targets[0]);
    let peers = format!("{},{}", hosts[0].3, hosts[1].3);
    fleet_histogram_quantiles_are_within_a_bucket(&prometheus, &native, &peers, secret);
    drop((prometheus, native));
    for (dir, running) in recorders {
        let finished = running.stop();
        assert!(finished.status.success(), "{}", finished.stderr);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    std::fs::remove_dir_all(&keys).unwrap();
}

/// The per-host quantile gauges of `instance` equal what `weft query
/// --live` answers (the first host's socket).
fn this_hosts_quantiles_are_live_queries(prometheus: &Prometheus, instance: &str) {
    let getppid = r#"syscalls where name = "getppid""#;
    for (quantile, percentile) in [("0.5", "p50"), ("0.99", "p99"), ("0.9999", "p99.99")] {
        let (status, stdout, stderr) = run_weft(&[
            "query",
            "--live",
            "--json",
            &format!("{getppid} | {percentile}(dur) last 1m"),
        ]);
        assert!(status.success(), "{stderr}");
        let row: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        let ns = row[format!("{percentile}(dur)")].as_u64().unwrap();
        let metric = format!(
            r#"weft_syscall_latency_seconds{{syscall="getppid",quantile="{quantile}",instance="{instance}"}}"#
        );
        assert_eq!(prometheus.value(&metric), Some(ns as f64 / 1e9), "{metric}");
    }
}

/// `histogram_quantile` over the hosts' summed buckets lies in the bucket
/// that holds the exact fleet quantile (`weft query --fleet` over `peers`):
/// the classic buckets' in `prometheus`, the native ones' (schema 3,
/// `(2^((i-1)/8), 2^(i/8)]` s) in `native`.
fn fleet_histogram_quantiles_are_within_a_bucket(
    prometheus: &Prometheus,
    native: &Prometheus,
    peers: &str,
    secret: &str,
) {
    // The histogram's edges: 2^k and 1.5 * 2^k ns from 64 ns.
    let edges: Vec<u64> = (6..36)
        .flat_map(|k| [1u64 << k, 3 << (k - 1)])
        .chain([1 << 36])
        .collect();
    for (q, name) in [(0.5, "p50"), (0.99, "p99"), (0.9999, "p99.99")] {
        let (status, stdout, stderr) = run_weft(&[
            "query",
            "--fleet",
            peers,
            "--peer-secret",
            secret,
            "--json",
            &format!(r#"syscalls where name = "getppid" | {name}(dur)"#),
        ]);
        assert!(status.success(), "{stderr}");
        let exact = serde_json::from_str::<serde_json::Value>(&stdout).unwrap()
            [format!("{name}(dur)")]
        .as_u64()
        .unwrap();
        let bucket = edges.partition_point(|e| *e < exact);
        let (lo, hi) = (
            if bucket == 0 { 0 } else { edges[bucket - 1] },
            edges[bucket],
        );
        let read_classic = prometheus
            .value(&format!(
                r#"histogram_quantile({q}, sum by (le) (weft_syscall_duration_seconds_bucket{{syscall="getppid"}}))"#
            ))
            .unwrap();
        assert!(
            lo as f64 / 1e9 - 1e-12 <= read_classic && read_classic <= hi as f64 / 1e9 + 1e-12,
            "{name}: Prometheus says {read_classic} s, the fleet {exact} ns in ({lo}, {hi}]"
        );
        let read = native
            .value(&format!(
                r#"histogram_quantile({q}, sum(weft_syscall_duration_seconds{{syscall="getppid"}}))"#
            ))
            .unwrap();
        let i = (8.0 * (exact as f64 / 1e9).log2()).ceil();
        let (lo, hi) = (((i - 1.0) / 8.0).exp2(), (i / 8.0).exp2());
        assert!(
            lo - 1e-12 <= read && read <= hi + 1e-12,
            "{name}: native Prometheus says {read} s, the fleet {exact} ns in ({lo}, {hi}] s"
        );
        eprintln!("{name}: fleet {exact} ns, classic {read_classic} s, native {read} s");
    }
}

/// A Prometheus server scraping weft each second, killed when dropped.
struct Prometheus {
    child: std::process::Child,
    addr: String,
    data: std::path::PathBuf,
}

impl Prometheus {
    /// With `native`, native histograms on (weft is then scraped in
    /// protobuf).
    fn start(data: &std::path::Path, addr: &str, targets: &[&str], native: bool) -> Self {
        let _ = std::fs::remove_dir_all(data);
        std::fs::create_dir_all(data).unwrap();
        let config = data.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: weft\n    static_configs:\n      - targets: ['{}']\n",
                targets.join("', '")
            ),
        )
        .unwrap();
        let child = std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                data.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .args(native.then_some("--enable-feature=native-histograms"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let prometheus = Self {
            child,
            addr: addr.to_owned(),
            data: data.to_owned(),
        };
        for _ in 0..150 {
            if prometheus
                .get("/-/ready")
                .is_some_and(|(status, _)| status == 200)
            {
                return prometheus;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("prometheus did not get ready on {addr}");
    }

    /// The value of instant query `query`, if it has one.
    fn value(&self, query: &str) -> Option<f64> {
        let encoded: String = query
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' => char::from(b).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let (status, body) = self.get(&format!("/api/v1/query?query={encoded}"))?;
        assert_eq!(status, 200, "{body}");
        let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
        answer["data"]["result"][0]["value"][1]
            .as_str()?
            .parse()
            .ok()
    }

    /// A plain HTTP GET: status and body.
    fn get(&self, path: &str) -> Option<(u16, String)> {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(&self.addr).ok()?;
        write!(stream, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).ok()?;
        let status = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response.split_once("\r\n\r\n")?.1.to_owned();
        Some((status, body))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data);
    }
}

/// Reads a Perfetto trace with Perfetto's own protos (the `perfetto` package, in
/// the venv `cargo xtask setup` makes) and prints, as JSON, each slice of a
/// thread's track (tid, start, duration, name, category), each child
/// track's slice count by track name, each `sched_switch` ftrace event
/// (cpu, time, prev tid, next tid, next name), the process tree's thread
/// names and each counter track's sum of values.
const PERFETTO_SLICES: &str = r#"
import json, sys
from collections import Counter
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace
trace = Trace()
trace.ParseFromString(open(sys.argv[1], "rb").read())
tids, names, open_slices, slices, children = {}, {}, {}, [], Counter()
switches, threads, counters, interned = [], {}, Counter(), {}
first = trace.packet[0].clock_snapshot
assert first.primary_trace_clock == 3, "the trace's clock is CLOCK_MONOTONIC"
assert {c.clock_id for c in first.clocks} == {3, 6}, "MONOTONIC and BOOTTIME"
defaults = trace.packet[0].trace_packet_defaults.timestamp_clock_id
for packet in trace.packet:
    if packet.sequence_flags & 1:
        interned = {}
    d = packet.interned_data
    interned.update({("category", c.iid): c.name for c in d.event_categories})
    interned.update({("name", n.iid): n.name for n in d.event_names})
    interned.update({("annotation", a.iid): a.name for a in d.debug_annotation_names})
    if packet.HasField("process_tree"):
        threads.update({str(t.tid): t.name for t in packet.process_tree.threads})
    for e in packet.ftrace_events.event:
        s = e.sched_switch
        assert e.pid == s.prev_pid
        switches.append([packet.ftrace_events.cpu, e.timestamp, s.prev_pid, s.next_pid, s.next_comm])
    if packet.HasField("track_descriptor"):
        d = packet.track_descriptor
        if d.HasField("thread"):
            tids[d.uuid] = d.thread.tid
        names[d.uuid] = d.name
    if not packet.HasField("track_event"):
        continue
    assert (packet.timestamp_clock_id or defaults) == 3, "CLOCK_MONOTONIC"
    e = packet.track_event
    if e.type == e.TYPE_COUNTER:
        counters[names[e.track_uuid]] += e.counter_value
        continue
    for a in e.debug_annotations:
        assert a.HasField("name") or ("annotation", a.name_iid) in interned
    name = e.name if e.HasField("name") else interned.get(("name", e.name_iid))
    categories = list(e.categories) + [interned[("category", i)] for i in e.category_iids]
    if e.type == e.TYPE_SLICE_BEGIN:
        assert packet.sequence_flags & 2, "reads the interned names"
        open_slices.setdefault(e.track_uuid, []).append((packet.timestamp, name, categories))
    elif e.type == e.TYPE_SLICE_END:
        start, name, categories = open_slices[e.track_uuid].pop()
        if e.track_uuid in tids:
            slices.append([tids[e.track_uuid], start, packet.timestamp - start, name, categories[0]])
        else:
            children[names[e.track_uuid]] += 1
assert not any(open_slices.values()), "every slice ends"
print(json.dumps({"slices": sorted(slices), "children": children, "switches": switches,
                  "threads": threads, "counters": counters}))
"#;

/// 40 records of an application's `requests` (pid, latency 1 to 40 us),
/// this test's process their sender.
fn push_requests() {
    let mut client = weft_client::Client::connect().unwrap();
    let kinds = [
        ("pid", weft_client::Kind::Int),
        ("latency", weft_client::Kind::Duration),
    ];
    client.define("requests", &kinds).unwrap();
    for i in 1..=40 {
        client.push("requests", &[0, i * 1000]).unwrap();
    }
    assert_eq!(client.sync().unwrap(), 40);
}

/// The slices the `requests` of [`push_requests`] make in `dir`'s Perfetto
/// trace: on the sender's track, ending at each record's time.
fn request_slices(dir: &std::path::Path) -> Vec<serde_json::Value> {
    let requests: Vec<serde_json::Value> = query(dir, "requests | fields pid, time, latency")
        .into_iter()
        .map(|r| {
            let (time, latency) = (r["time"].as_u64().unwrap(), r["latency"].as_u64().unwrap());
            serde_json::json!([r["pid"], time - latency, latency, "requests", "requests"])
        })
        .collect();
    assert_eq!(requests.len(), 40);
    assert_eq!(requests[0][0], std::process::id(), "the sender's pid");
    requests
}

/// `weft export --format perfetto` read back with Perfetto's own protos:
/// every syscall of the workload is a slice on its thread's track with its
/// enter time and duration, and every record of an application's source a
/// slice on its process's track as long as its duration field (names
/// interned), the sched source's off-CPU stretches are
/// slices on the thread's off-CPU track, every context switch is a
/// `sched_switch` on its CPU, the process tree names the workload, and
/// the syscalls/s counter track adds up to the calls.
#[test]
fn export_perfetto_holds_every_record_with_its_time() {
    let test = "export_perfetto_holds_every_record_with_its_time";
    if !can_trace(test) {
        return;
    }
    let Some(python) = setup_tool(test, "WEFT_PYTHON", "a Python with perfetto") else {
        return;
    };
    let dir = capture_dir("export-perfetto");
    let workload = Workload::spawn(WORKLOAD, &["getppid:3000", "nanosleep:20:3"]);
    let workload_pid = workload.pid();
    let pid = workload_pid.to_string();
    let running = Running::start(
        &[
            "record",
            "-o",
            dir.to_str().unwrap(),
            "--pid",
            &pid,
            "--sources",
            "syscalls,sched,switch,app",
        ],
        "weft: recording",
    );
    push_requests();
    workload.run_to_end();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    let out = dir.with_extension("perfetto");
    let (status, _, stderr) = run_weft(&[
        "export",
        dir.to_str().unwrap(),
        "--format",
        "perfetto",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    let read = std::process::Command::new(python)
        .args(["-c", PERFETTO_SLICES, out.to_str().unwrap()])
        .output()
        .expect("run python");
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let perfetto: serde_json::Value = serde_json::from_slice(&read.stdout).unwrap();
    let mut expected: Vec<serde_json::Value> =
        query(&dir, "syscalls | fields tid, enter_ns, dur, name")
            .into_iter()
            .map(|r| serde_json::json!([r["tid"], r["enter_ns"], r["dur"], r["name"], "syscalls"]))
            .collect();
    let syscalls = expected.len();
    expected.extend(request_slices(&dir));
    expected.sort_by_key(std::string::ToString::to_string);
    let mut slices = perfetto["slices"].as_array().unwrap().clone();
    slices.sort_by_key(std::string::ToString::to_string);
    assert!(syscalls > 3000, "{syscalls}");
    assert_eq!(slices, expected);
    let off_cpu = query(&dir, "sched | count")[0]["count"].clone();
    assert_eq!(perfetto["children"]["off-CPU"], off_cpu, "{perfetto}");
    // Every switch, as recorded; the workload's by its name.
    let mut switches: Vec<[u64; 4]> = (perfetto["switches"].as_array().unwrap().iter())
        .map(|s| std::array::from_fn(|i| s[i].as_u64().unwrap()))
        .collect();
    switches.sort_unstable();
    let mut recorded: Vec<[u64; 4]> = query(&dir, "switch | fields cpu, ts, prev_tid, next_tid")
        .iter()
        .map(|r| ["cpu", "ts", "prev_tid", "next_tid"].map(|f| r[f].as_u64().unwrap()))
        .collect();
    recorded.sort_unstable();
    assert!(recorded.len() > 3, "{}", recorded.len());
    assert_eq!(switches, recorded);
    let into_workload = (perfetto["switches"].as_array().unwrap().iter())
        .filter(|s| s[3] == u64::from(workload_pid))
        .map(|s| s[4].as_str().unwrap())
        .collect::<Vec<_>>();
    assert!(
        into_workload.len() >= 3 && into_workload.iter().all(|n| *n == "weft-workload"),
        "{into_workload:?}"
    );
    assert_eq!(
        perfetto["threads"][workload_pid.to_string()],
        "weft-workload"
    );
    // The syscalls/s counter track counts every call, a second at a time.
    assert_eq!(perfetto["counters"]["syscalls/s"], syscalls, "{perfetto}");
    assert!(
        stderr.contains(&format!(
            "exported {} records of every source",
            expected.len() as u64 + off_cpu.as_u64().unwrap() + recorded.len() as u64
        )),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_file(&out).unwrap();
}

/// Asks `DuckDB` and Spark the same questions of a partitioned tree: per
/// host, the count of getppid calls and the nearest-rank p99 and p50 of
/// their durations (as `weft query` defines a percentile). Prints
/// `{"duckdb": {host: [count, p99, p50]}, "spark": {...}}`.
const FLEET_QUESTIONS: &str = r#"
import json, sys
root = sys.argv[1]
rank = lambda q: f"cast(ceil({q} * count(*)) as int)"
def answers(rows):
    return {host: [count, p99, p50] for host, count, p99, p50 in rows}
import duckdb
duck = duckdb.sql(f"""
    select host, count(*), list_sort(list(dur))[{rank(0.99)}], list_sort(list(dur))[{rank(0.5)}]
    from read_parquet('{root}/**/*.parquet', hive_partitioning = true)
    where name = 'getppid' and hostname = host group by host""").fetchall()
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("weft")
         .config("spark.ui.enabled", "false").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.read.parquet(root).createOrReplaceTempView("syscalls")
sql = f"""select host, count(*), element_at(sort_array(collect_list(dur)), {rank(0.99)}),
                 element_at(sort_array(collect_list(dur)), {rank(0.5)})
          from syscalls where name = 'getppid' and hostname = host group by host"""
sparks = [tuple(r) for r in spark.sql(sql).collect()]
spark.stop()
print(json.dumps({"duckdb": answers(duck), "spark": answers(sparks)}))
"#;

/// Two captures exported as two hosts into one partitioned tree are one
/// table: `DuckDB` and Spark (local mode) give each host's count and
/// percentiles as `weft query` gives them on its capture.
#[test]
fn partitioned_exports_of_two_hosts_are_one_table_for_duckdb_and_spark() {
    let test = "partitioned_exports_of_two_hosts_are_one_table_for_duckdb_and_spark";
    if !can_trace(test) {
        return;
    }
    let Some(python) = setup_tool(test, "WEFT_PYTHON", "a Python with duckdb and pyspark") else {
        return;
    };
    let root = capture_dir("fleet");
    let _ = std::fs::remove_dir_all(&root);
    let mut expected = serde_json::Map::new();
    for (host, calls) in [("db-1", 3000), ("web-2", 2000)] {
        let dir = capture_dir(&format!("fleet-{host}"));
        record(
            WORKLOAD,
            &dir,
            &[&format!("getppid:{calls}"), "nanosleep:10:1"],
            &[],
        );
        let (status, _, stderr) = run_weft(&[
            "export",
            dir.to_str().unwrap(),
            "--partition",
            "--host",
            host,
            "-o",
            root.to_str().unwrap(),
        ]);
        assert!(status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!("records of {host} into ")),
            "{stderr}"
        );
        let weft = row(
            &dir,
            r#"syscalls where name = "getppid" | count, p99(dur), p50(dur)"#,
        );
        expected.insert(
            host.to_owned(),
            serde_json::json!([weft["count"], weft["p99(dur)"], weft["p50(dur)"]]),
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
    let partitions = std::fs::read_dir(root.join("host=db-1/source=syscalls"))
        .unwrap()
        .count();
    assert!(partitions >= 1);
    let asked = std::process::Command::new(python)
        .args(["-c", FLEET_QUESTIONS, root.to_str().unwrap()])
        .output()
        .expect("run python");
    assert!(
        asked.status.success(),
        "{}",
        String::from_utf8_lossy(&asked.stderr)
    );
    let answers: serde_json::Value = serde_json::from_slice(&asked.stdout).unwrap();
    let expected = serde_json::Value::Object(expected);
    assert_eq!(answers["duckdb"], expected, "DuckDB");
    assert_eq!(answers["spark"], expected, "Spark");
    std::fs::remove_dir_all(&root).unwrap();
}

/// `weft query --fleet` over a running recorder's peer port and a finished
/// capture answers as one capture of both: the recorder's calls and the
/// capture's add up, the maximum is the larger, a percentile equals the
/// nearest-rank one over both hosts' exported durations, and each host
/// sends far fewer bytes than its records. A query signed with another
/// secret, or a secret file other users can read, is refused.
#[test]
fn fleet_query_answers_a_peer_and_a_capture_as_one() {
    let test = "fleet_query_answers_a_peer_and_a_capture_as_one";
    if !can_trace(test) {
        return;
    }
    let finished = capture_dir("fleet-finished");
    let stderr = record(WORKLOAD, &finished, &["getppid:30000"], &[]);
    assert!(stderr.contains("lost 0"), "{stderr}");
    let live = capture_dir("fleet-live");
    let keys = capture_dir("fleet-keys");
    std::fs::create_dir_all(&keys).unwrap();
    let key = |name: &str, mode: u32| {
        let path = keys.join(name);
        std::fs::write(&path, format!("{name}-a-shared-secret-of-the-fleet\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let (secret, other, open) = (key("fleet", 0o600), key("other", 0o600), key("open", 0o644));
    let workload = Workload::spawn(WORKLOAD, &["getppid:20000"]);
    let pid = workload.pid().to_string();
    let addr = "127.0.0.1:19465";
    let running = Running::start(
        &[
            "record",
            "-o",
            live.to_str().unwrap(),
            "--pid",
            &pid,
            "--peer-listen",
            addr,
            "--peer-secret",
            &secret,
        ],
        "weft: recording",
    );
    workload.run_to_end();
    let fleet = |hosts: &str, key: &str, query: &str| {
        run_weft(&[
            "query",
            "--fleet",
            hosts,
            "--peer-secret",
            key,
            "--json",
            query,
        ])
    };
    let getppid = r#"syscalls where name = "getppid""#;
    // The recorder publishes each second: wait for the whole workload.
    let mut count = serde_json::Value::Null;
    for _ in 0..50 {
        let (status, stdout, stderr) = fleet(addr, &secret, &format!("{getppid} | count"));
        assert!(status.success(), "{stderr}");
        count = serde_json::from_str::<serde_json::Value>(&stdout).unwrap()["count"].clone();
        if count == 20_000 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(count, 20_000);
    let both = format!("{addr},{}", finished.display());
    let (status, stdout, stderr) = fleet(&both, &secret, &format!("{getppid} | count, max(dur)"));
    assert!(status.success(), "{stderr}");
    let merged: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let max = format!("{getppid} | max(dur)");
    let finished_max = row(&finished, &max)["max(dur)"].as_i64().unwrap();
    // The recorder as its peer port sees it (its directory lags by up to
    // the second between publishes): through its live socket.
    let (status, stdout, stderr) = run_weft(&["query", "--live", "--json", &max]);
    assert!(status.success(), "{stderr}");
    let live_max = serde_json::from_str::<serde_json::Value>(&stdout).unwrap()["max(dur)"]
        .as_i64()
        .unwrap();
    assert_eq!(merged["count"], 50_000);
    assert_eq!(
        merged["max(dur)"].as_i64(),
        Some(finished_max.max(live_max))
    );

    for (key, says) in [
        (&other, "not signed with this host's peer secret"),
        (&open, "chmod 600"),
    ] {
        let (status, _, stderr) = fleet(addr, key, "syscalls | count");
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    let stopped = running.stop();
    assert!(stopped.status.success(), "{}", stopped.stderr);

    // Both captures finished: exact percentiles over both hosts' calls.
    fleet_percentiles_are_exact(&[&finished, &live]);
    for dir in [&finished, &live, &keys] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// Fleet percentiles of getppid over `dirs` equal the nearest-rank ones of
/// their exported durations, and each host sends far fewer bytes than the
/// records its scan visited.
fn fleet_percentiles_are_exact(dirs: &[&std::path::Path]) {
    let getppid = r#"syscalls where name = "getppid""#;
    let durations = weft_tests::exported_durations(dirs, r#"name = "getppid""#);
    assert_eq!(durations.len(), 50_000);
    let hosts: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    let hosts = hosts.join(",");
    // Nearest ranks of 50,000 values: ceil(q * n).
    for (rank, name) in [(25_000, "p50"), (49_500, "p99"), (49_995, "p99.99")] {
        let (status, stdout, stderr) = run_weft(&[
            "query",
            "--fleet",
            &hosts,
            "--json",
            &format!("{getppid} | {name}(dur)"),
        ]);
        assert!(status.success(), "{stderr}");
        let value: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(
            value[format!("{name}(dur)")].as_i64(),
            Some(durations[rank - 1]),
            "{name}"
        );
    }
    let (status, stdout, stderr) = run_weft(&[
        "query",
        "--fleet",
        &hosts,
        "--explain",
        &format!("{getppid} | p50(dur)"),
    ]);
    assert!(status.success(), "{stderr}");
    let hosts_said: Vec<&str> = stdout.lines().filter(|l| l.starts_with("host ")).collect();
    assert_eq!(hosts_said.len(), dirs.len(), "{stdout}");
    for line in hosts_said {
        let number = |after: &str| -> u64 {
            line.split(after)
                .nth(1)
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .trim_start_matches('(')
                .parse()
                .unwrap()
        };
        // A syscall record is 40 bytes as stored.
        assert!(number("sent ") * 20 < number("covers ") * 40, "{line}");
    }
}

/// `weft diff` on two captures of one workload, one with its sleeps made
/// three times longer: nanosleep's median is B's three times A's and
/// heads the table (getppid's 50 calls too few for their p99 to rank), getppid's count is the same, and a `--fail-if` past
/// the change exits 1 naming nanosleep while one short of it exits 0.
#[test]
fn diff_finds_the_injected_delay_and_fails_past_a_threshold() {
    let test = "diff_finds_the_injected_delay_and_fails_past_a_threshold";
    if !can_trace(test) {
        return;
    }
    let (a, b) = (capture_dir("diff-a"), capture_dir("diff-b"));
    for (dir, sleep) in [(&a, "nanosleep:2:30"), (&b, "nanosleep:6:30")] {
        weft_tests::record(WORKLOAD, dir, &["getppid:50", sleep], &[]);
    }
    let (a_arg, b_arg) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (status, stdout, stderr) = run_weft(&["diff", a_arg, b_arg, "--json"]);
    assert!(status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        rows[0]["name"], "nanosleep",
        "what changed most first: {stdout}"
    );
    let ratio = |row: &serde_json::Value, column: &str| {
        row["b"][column].as_f64().unwrap() / row["a"][column].as_f64().unwrap()
    };
    // The median: 30 sleeps' p99 is their slowest, which one stall moves.
    let r = ratio(&rows[0], "p50(dur)");
    assert!((2.5..3.5).contains(&r), "nanosleep p50 {r}: {stdout}");
    let getppid = rows.iter().find(|r| r["name"] == "getppid").unwrap();
    assert_eq!(
        (&getppid["a"]["count"], &getppid["b"]["count"]),
        (&50.into(), &50.into())
    );
    // Exact: A's p99 is what `weft query` gives.
    let p99 = query(&a, r#"syscalls where name = "nanosleep" | p99(dur)"#)[0]["p99(dur)"].clone();
    assert_eq!(rows[0]["a"]["p99(dur)"], p99);
    let (status, _, stderr) = run_weft(&["diff", a_arg, b_arg, "--fail-if", "p50(dur) > 2x"]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("weft: nanosleep: p50(dur) is"), "{stderr}");
    let (status, stdout, stderr) = run_weft(&["diff", a_arg, b_arg, "--fail-if", "p50 > 5x"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("SYSCALL") && stdout.contains("nanosleep"),
        "{stdout}"
    );
    let (status, _, stderr) = run_weft(&["diff", a_arg, b_arg, "--fail-if", "p98 > 2x"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    for dir in [a, b] {
        std::fs::remove_dir_all(&*dir).unwrap();
    }
}
