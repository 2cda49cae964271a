//! `cargo xtask bench queries`: the Loom paper's case studies on this
//! machine. Records `--seconds` of a real RocksDB (`db_bench readrandom`)
//! and a real Redis (`redis-server` under `redis-benchmark`), then times
//! each case-study query over `[now-80s, now-20s]`: weft with its indexes,
//! weft reading every record (`--full-scan`), and DuckDB over a Parquet
//! export of the same recording. Reports min/median/max of `--runs` runs.

#![expect(
    clippy::doc_markdown,
    reason = "product names (RocksDB, DuckDB) are prose"
)]

use std::{
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    bench_loop::Tracer,
    exec::{exec, output, workspace_root},
    run::build_weft_release,
    setup,
};

#[derive(clap::Args)]
pub struct Options {
    /// Seconds recorded per case; the queries read [now-80s, now-20s].
    #[arg(long, default_value_t = 120)]
    seconds: u64,
    /// Runs per query and engine.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Only this case: rocksdb or redis.
    #[arg(long)]
    case: Option<String>,
    /// Query the recordings of an earlier run instead of recording again.
    #[arg(long)]
    reuse: bool,
}

/// One case study: a workload, and its questions in both languages.
struct Case {
    name: &'static str,
    workload: Workload,
    /// The syscall the questions are about, and another one to correlate.
    subject: &'static str,
    neighbour: &'static str,
    /// The other source recorded and asked about (exported to Parquet as
    /// DuckDB's view `o`).
    other: &'static str,
}

const CASES: [Case; 2] = [
    Case {
        name: "rocksdb",
        workload: Workload::RocksDb,
        subject: "pread64",
        neighbour: "pread64",
        other: "pagecache",
    },
    Case {
        name: "redis",
        workload: Workload::Redis,
        subject: "sendto",
        neighbour: "write",
        other: "net",
    },
];

/// What runs while weft records.
#[derive(Clone, Copy)]
enum Workload {
    /// `db_bench readrandom` on a prefilled database, small block cache:
    /// every block read is a `pread64`.
    RocksDb,
    /// `redis-benchmark` (SET and GET, 20 clients) against `redis-server`.
    Redis,
}

/// `[now-80s, now-20s]` in the Parquet file's own time column (ns).
const DUCK_WINDOW: &str = "with b as (select max(time) m from t) ";
const DUCK_IN: &str = "time between b.m - 80000000000 and b.m - 20000000000";

/// The questions: (label, weft query, DuckDB SQL over view `t`).
fn questions(case: &Case) -> Vec<(String, String, String)> {
    let (s, n) = (case.subject, case.neighbour);
    let window = "[now-80s, now-20s]";
    [
        (
            format!("p99.99 of {s} latency"),
            format!(r#"syscalls where name = "{s}" | p99.99(dur) {window}"#),
            format!(
                "{DUCK_WINDOW}select quantile_disc(dur, 0.9999) from t, b where name = '{s}' and {DUCK_IN}"
            ),
        ),
        (
            format!("{s} slower than their p99.99"),
            format!(r#"syscalls where name = "{s}" and dur > p99.99 {window} | count"#),
            format!(
                "{DUCK_WINDOW}, w as (select dur from t, b where name = '{s}' and {DUCK_IN}), \
                 p as (select quantile_disc(dur, 0.9999) q from w) select count(*) from w, p where dur > p.q"
            ),
        ),
        (
            format!("{n} within 5 s of the slowest {s}"),
            format!(
                r#"syscalls around (syscalls where name = "{s}" | max(dur) {window}) within 5s where name = "{n}" | count"#
            ),
            format!(
                "{DUCK_WINDOW}, a as (select time x from t, b where name = '{s}' and {DUCK_IN} order by dur desc limit 1) \
                 select count(*) from t, a where name = '{n}' and time between a.x - 5000000000 and a.x + 5000000000"
            ),
        ),
        (
            "count, p50, p99 of latency by syscall".into(),
            format!("syscalls | count, p50(dur), p99(dur) by name {window}"),
            format!(
                "{DUCK_WINDOW}select name, count(*), quantile_disc(dur, 0.5), quantile_disc(dur, 0.99) \
                 from t, b where {DUCK_IN} group by name"
            ),
        ),
        (
            "p99 of latency per second".into(),
            format!("syscalls | p99(dur) every 1s {window}"),
            format!(
                "{DUCK_WINDOW}select floor(time / 1000000000), quantile_disc(dur, 0.99) \
                 from t, b where {DUCK_IN} group by 1"
            ),
        ),
        (
            format!("count of {s}"),
            format!(r#"syscalls where name = "{s}" | count {window}"#),
            format!("{DUCK_WINDOW}select count(*) from t, b where name = '{s}' and {DUCK_IN}"),
        ),
        (
            "the 10 slowest calls".into(),
            format!("syscalls | sort dur desc | limit 10 {window}"),
            format!(
                "{DUCK_WINDOW}select time, name, dur, tid from t, b where {DUCK_IN} order by dur desc limit 10"
            ),
        ),
        (
            "calls above their p99.99, by syscall".into(),
            format!("syscalls where dur > p99.99 {window} | count by name"),
            format!(
                "{DUCK_WINDOW}, w as (select name, dur from t, b where {DUCK_IN}), \
                 p as (select quantile_disc(dur, 0.9999) q from w) \
                 select name, count(*) from w, p where dur > p.q group by name"
            ),
        ),
        (
            "count by thread name".into(),
            format!("syscalls | count by comm {window}"),
            format!("{DUCK_WINDOW}select comm, count(*) from t, b where {DUCK_IN} group by comm"),
        ),
    ]
    .into_iter()
    .chain(by_field_questions(s, window))
    .chain([other_question(case, window)])
    .collect()
}

/// Questions grouped by fields without a partitioned index, per second,
/// and a histogram of the case's subject.
fn by_field_questions(s: &str, window: &str) -> Vec<(String, String, String)> {
    vec![
        (
            "p99 of latency by process".into(),
            format!("syscalls | p99(dur) by pid {window}"),
            format!(
                "{DUCK_WINDOW}select pid, quantile_disc(dur, 0.99) from t, b where {DUCK_IN} group by pid"
            ),
        ),
        (
            "count by CPU".into(),
            format!("syscalls | count by cpu {window}"),
            format!("{DUCK_WINDOW}select cpu, count(*) from t, b where {DUCK_IN} group by cpu"),
        ),
        (
            "count by return value".into(),
            format!("syscalls | count by ret {window}"),
            format!("{DUCK_WINDOW}select ret, count(*) from t, b where {DUCK_IN} group by ret"),
        ),
        (
            "count per second".into(),
            format!("syscalls | count every 1s {window}"),
            format!(
                "{DUCK_WINDOW}select floor(time / 1000000000), count(*) from t, b where {DUCK_IN} group by 1"
            ),
        ),
        (
            format!("latency histogram of {s}"),
            format!(r#"syscalls where name = "{s}" | hist(dur) {window}"#),
            format!(
                "{DUCK_WINDOW}select floor(log2(greatest(dur, 1))), count(*) \
                 from t, b where name = '{s}' and {DUCK_IN} group by 1"
            ),
        ),
    ]
}

/// The question about the case's other source.
fn other_question(case: &Case, window: &str) -> (String, String, String) {
    let s = case.subject;
    match case.workload {
        Workload::RocksDb => (
            "page-cache insertions".into(),
            format!(r#"pagecache where kind = "add" | count {window}"#),
            format!("{DUCK_WINDOW}select count(*) from o, b where kind = 'add' and {DUCK_IN}"),
        ),
        Workload::Redis => (
            format!("packets within 5 s of the slowest {s}"),
            format!(
                r#"packets around (syscalls where name = "{s}" | max(dur) {window}) within 5s | count"#
            ),
            format!(
                "{DUCK_WINDOW}, a as (select time x from t, b where name = '{s}' and {DUCK_IN} order by dur desc limit 1) \
                 select count(*) from o, a where o.time between a.x - 5000000000 and a.x + 5000000000"
            ),
        ),
    }
}

pub fn run(options: &Options) -> Result<()> {
    if options.seconds < 90 {
        bail!("--seconds must be at least 90: the queries read [now-80s, now-20s]");
    }
    setup::run()?;
    setup::install_packages(&["rocksdb-tools", "redis-server", "redis-tools"])?;
    let weft = build_weft_release()?;
    let out = workspace_root().join("target/bench");
    std::fs::create_dir_all(&out)?;
    for case in CASES
        .iter()
        .filter(|c| options.case.as_deref().is_none_or(|name| name == c.name))
    {
        let dir = out.join(format!("queries-{}", case.name));
        if !(options.reuse && dir.join("weft.json").exists()) {
            record(case, &weft, &dir, options.seconds)?;
        }
        report(case, &weft, &dir, options.runs)?;
    }
    Ok(())
}

/// Records `seconds` of the case's workload, system-wide, into `dir`.
fn record(case: &Case, weft: &str, dir: &Path, seconds: u64) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    let scratch = dir.with_extension("data");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let mut helpers = prepare(case, &scratch)?;
    println!(
        "{}: recording {seconds} s into {}",
        case.name,
        dir.display()
    );
    let argv: Vec<String> = [weft, "record", "-o"]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([
            dir.display().to_string(),
            "--duration".into(),
            format!("{seconds}s"),
            "--sources".into(),
            format!("syscalls,{}", case.other),
            "--interface".into(),
            "lo".into(),
        ])
        .collect();
    let recorder = Tracer::start(&argv, "weft: recording")?;
    helpers.push(load(case, &scratch, seconds)?);
    let lines = recorder.wait()?;
    for mut helper in helpers {
        let _ = helper.kill();
        let _ = helper.wait();
    }
    let _ = std::fs::remove_dir_all(&scratch);
    if let Some(line) = lines.iter().find(|l| l.contains("weft: recorded")) {
        println!("{}: {line}", case.name);
    }
    Ok(())
}

/// Starts what must run before recording (the Redis server), and fills the
/// RocksDB database.
fn prepare(case: &Case, scratch: &Path) -> Result<Vec<Child>> {
    match case.workload {
        Workload::RocksDb => {
            println!("rocksdb: filling a 1 M key database");
            exec(
                Command::new("db_bench")
                    .args([
                        "--benchmarks=fillrandom",
                        "--num=1000000",
                        "--value_size=400",
                    ])
                    .args(["--compression_type=none", "--disable_wal=1"])
                    .arg(format!("--db={}", scratch.display()))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            )?;
            Ok(Vec::new())
        }
        Workload::Redis => {
            let server = Command::new("redis-server")
                .args(["--port", "7379", "--save", "", "--appendonly", "no"])
                .stdout(Stdio::null())
                .spawn()
                .context("failed to start redis-server")?;
            std::thread::sleep(Duration::from_millis(500));
            Ok(vec![server])
        }
    }
}

/// Starts the load that runs while weft records.
fn load(case: &Case, scratch: &Path, seconds: u64) -> Result<Child> {
    let mut cmd = match case.workload {
        Workload::RocksDb => {
            let mut cmd = Command::new("db_bench");
            cmd.args([
                "--benchmarks=readrandom",
                "--use_existing_db=1",
                "--num=1000000",
            ])
            .args([
                "--cache_size=8388608",
                "--threads=2",
                "--compression_type=none",
            ])
            .arg(format!("--duration={}", seconds + 10))
            .arg(format!("--db={}", scratch.display()));
            cmd
        }
        Workload::Redis => {
            let mut cmd = Command::new("redis-benchmark");
            cmd.args([
                "-p",
                "7379",
                "-t",
                "set,get",
                "-n",
                "2000000000",
                "-c",
                "20",
                "-q",
            ]);
            cmd
        }
    };
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("failed to start the {} load", case.name))
}

/// Times each question with each engine and prints the table.
fn report(case: &Case, weft: &str, dir: &Path, runs: usize) -> Result<()> {
    let parquet = dir.with_extension("parquet");
    let other = dir.with_extension(format!("{}.parquet", case.other));
    for (file, source) in [(&parquet, "syscalls"), (&other, case.other)] {
        exec(
            Command::new(weft)
                .arg("export")
                .arg(dir)
                .args(["--source", source, "-o"])
                .arg(file),
        )?;
    }
    let info = output(Command::new(weft).arg("info").arg(dir))?;
    println!("{info}");
    println!(
        "{:<40} {:>26} {:>26} {:>26} {:>8} {:>8} {:>8}",
        "question (ms: min / median / max)",
        "weft indexed",
        "weft full scan",
        "duckdb parquet",
        "full/idx",
        "duck/idx",
        "weft MiB"
    );
    for (label, query, sql) in questions(case) {
        let (indexed, answer) = time_weft(weft, dir, &query, false, runs)?;
        let (full, full_answer) = time_weft(weft, dir, &query, true, runs)?;
        if answer != full_answer {
            bail!("{label}: indexed answer {answer} but full scan {full_answer}");
        }
        let duck = time_duckdb(&parquet, &other, &sql, runs)?;
        // A grouped answer is a row a line: its first row and how many.
        let rows = answer.lines().count();
        let first = answer.lines().next().unwrap_or_default();
        let shown = if rows > 1 {
            format!("{first} (1 of {rows} rows)")
        } else {
            first.to_owned()
        };
        println!(
            "{label:<40} {:>26} {:>26} {:>26} {:>7.1}x {:>7.1}x {:>8.1}   answer {shown}",
            spread(&indexed),
            spread(&full),
            spread(&duck),
            median(&full) / median(&indexed),
            median(&duck) / median(&indexed),
            peak_mib(weft, dir, &query)?,
        );
    }
    Ok(())
}

/// The peak resident memory (MiB) of one indexed `weft query` of `query`,
/// as its `--explain` says (not a timed run).
fn peak_mib(weft: &str, dir: &Path, query: &str) -> Result<f64> {
    let explain = output(
        Command::new(weft)
            .args(["query", "--explain"])
            .arg(dir)
            .arg(query),
    )?;
    explain
        .lines()
        .find_map(|line| line.strip_prefix("memory: "))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no memory line in --explain of {query}: {explain}"))
}

/// Wall-clock ms of `runs` runs of `weft query` (process start included),
/// sorted, and the answer.
fn time_weft(
    weft: &str,
    dir: &Path,
    query: &str,
    full: bool,
    runs: usize,
) -> Result<(Vec<f64>, String)> {
    let mut times = Vec::new();
    let mut answer = String::new();
    for _ in 0..runs {
        let mut cmd = Command::new(weft);
        cmd.arg("query").arg("--json").arg(dir).arg(query);
        if full {
            cmd.arg("--full-scan");
        }
        let start = Instant::now();
        answer = output(&mut cmd)?;
        times.push(start.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok((times, answer))
}

/// Wall-clock ms of `runs` runs of the SQL in DuckDB (in one Python
/// process, so interpreter start is not counted), sorted. View `t` holds
/// the syscalls, `o` the other source.
fn time_duckdb(parquet: &Path, other: &Path, sql: &str, runs: usize) -> Result<Vec<f64>> {
    let script = format!(
        "import duckdb, json, time\n\
         con = duckdb.connect()\n\
         con.execute(\"set enable_progress_bar = false\")\n\
         con.execute(\"create view t as select * from read_parquet('{}')\")\n\
         con.execute(\"create view o as select * from read_parquet('{}')\")\n\
         times = []\n\
         for _ in range({runs}):\n\
         \x20   start = time.perf_counter()\n\
         \x20   con.execute({sql:?}).fetchall()\n\
         \x20   times.append((time.perf_counter() - start) * 1e3)\n\
         print('timings', json.dumps(sorted(times)))",
        parquet.display(),
        other.display()
    );
    let out = output(Command::new(setup::duckdb_python()).args(["-c", &script]))?;
    // The timings follow their label: on a long query DuckDB may draw its
    // progress bar on the same output, which once ended the bench here.
    let times = out
        .lines()
        .find_map(|line| line.split_once("timings ").map(|(_, times)| times))
        .with_context(|| format!("no timings in DuckDB's output: {out}"))?;
    times
        .trim()
        .trim_matches(['[', ']'])
        .split(',')
        .map(|t| t.trim().parse::<f64>().context("duckdb timing"))
        .collect()
}

fn median(sorted: &[f64]) -> f64 {
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

fn spread(sorted: &[f64]) -> String {
    format!(
        "{:.1} / {:.1} / {:.1}",
        sorted.first().copied().unwrap_or(f64::NAN),
        median(sorted),
        sorted.last().copied().unwrap_or(f64::NAN)
    )
}
