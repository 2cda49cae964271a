//! Queries on a real store answer exactly what a brute-force pass over the
//! same records computes: counts, exact percentiles, data-dependent
//! thresholds, groups, series and correlations, through summaries and
//! indexed scans alike.
#![expect(
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "test data stays far from the integer limits"
)]

use std::{collections::HashMap, path::PathBuf, sync::Arc};

use weft_query::{Answer, Catalog, Cell, Kind, Names, run};
use weft_store::{Bins, Config, Field, FieldKind, Partition, Snapshot, Store};

include!("../../store/tests/common/rng.rs");

const BASE: u64 = 1_000_000_000_000;
const N: u64 = 200_000;
/// Syscall numbers used, with names.
const SYSCALLS: [(i64, &str); 5] = [
    (0, "read"),
    (1, "write"),
    (17, "pread64"),
    (35, "nanosleep"),
    (44, "sendto"),
];

#[derive(Clone, Copy)]
struct Rec {
    time: u64,
    dur: i64,
    nr: i64,
    tid: i64,
}

struct Fixture {
    records: Vec<Rec>,
    snapshot: Snapshot,
    catalog: Catalog,
    _store: Store,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fields() -> Vec<Field> {
    vec![
        Field::new("duration_ns", 0, FieldKind::U64),
        Field::new("nr", 8, FieldKind::U32),
        Field::new("tid", 12, FieldKind::U32),
    ]
}

/// The fixture's indexes: latency (alone and by syscall), syscall number,
/// and one wide bin over thread ids, as `record` defines them.
fn define_indexes(store: &mut Store, source: weft_store::SourceId) {
    let mut bounds = vec![100i64];
    while *bounds.last().unwrap() < 100_000_000 {
        let last = *bounds.last().unwrap();
        bounds.push(last + last / 4);
    }
    store
        .define_index(
            source,
            "duration_ns",
            fields()[0].clone(),
            Bins::new(bounds.clone()).unwrap(),
        )
        .unwrap();
    store
        .define_partitioned_index(
            source,
            "duration_by_nr",
            fields()[0].clone(),
            Bins::new(bounds).unwrap(),
            Some(Partition {
                field: fields()[1].clone(),
                count: 512,
            }),
        )
        .unwrap();
    store
        .define_index(
            source,
            "nr",
            fields()[1].clone(),
            Bins::new((0..512).collect()).unwrap(),
        )
        .unwrap();
    // Counts by thread come from the values log of this one.
    store
        .define_index(
            source,
            "tid",
            fields()[2].clone(),
            Bins::new(vec![0, 1 << 36]).unwrap(),
        )
        .unwrap();
}

/// 200,000 records 1 µs apart: mostly fast reads and writes, some sendto
/// and pread64 with long tails, and one 50 ms nanosleep at record 150,000.
fn fixture(name: &str) -> Fixture {
    fixture_of_blocks(name, 64 << 10)
}

/// [`fixture`] in chunks of `block_size` bytes.
fn fixture_of_blocks(name: &str, block_size: u32) -> Fixture {
    let dir = std::env::temp_dir().join(format!("weft-query-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = Config {
        block_size,
        ..Config::default()
    };
    let mut store = Store::open(&dir, &config).unwrap();
    let source = store.define_source("syscalls", fields()).unwrap();
    define_indexes(&mut store, source);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut records = Vec::new();
    for i in 0..N {
        let pick = rng.below(100);
        let nr = match pick {
            0..45 => 0,
            45..85 => 1,
            85..93 => 17,
            _ => 44,
        };
        let mut dur = 200 + rng.below(2_000) as i64;
        if nr != 0 && nr != 1 && rng.below(50) == 0 {
            dur *= 1 + rng.below(200) as i64;
        }
        let (nr, dur) = if i == 150_000 {
            (35, 50_000_000)
        } else {
            (nr, dur)
        };
        let rec = Rec {
            time: BASE + i * 1_000 - 300,
            dur,
            nr,
            tid: 100 + rng.below(8) as i64,
        };
        let mut payload = Vec::with_capacity(16);
        payload.extend_from_slice(&(rec.dur as u64).to_le_bytes());
        payload.extend_from_slice(&(rec.nr as u32).to_le_bytes());
        payload.extend_from_slice(&(rec.tid as u32).to_le_bytes());
        store
            .append_at(source, BASE + i * 1_000, Some(rec.time), &payload)
            .unwrap();
        records.push(rec);
    }
    store.publish();
    let snapshot = store.snapshot();
    let mut catalog = Catalog::from_meta(snapshot.meta());
    let syscalls = catalog.source_mut("syscalls").unwrap();
    syscalls
        .alias("duration_ns", "dur", Kind::Duration)
        .unwrap();
    let names = Names::new(SYSCALLS.iter().map(|(n, s)| (*n, (*s).to_owned())), true);
    syscalls
        .alias("nr", "name", Kind::Named(Arc::new(names)))
        .unwrap();
    syscalls.span = Some("dur".into());
    Fixture {
        records,
        snapshot,
        catalog,
        _store: store,
        _dir: TempDir(dir),
    }
}

fn ask(f: &Fixture, query: &str) -> Answer {
    run(&f.snapshot, &f.catalog, query).unwrap_or_else(|e| panic!("{}", e.render(query)))
}

fn one(f: &Fixture, query: &str) -> Vec<Cell> {
    let answer = ask(f, query);
    assert_eq!(answer.rows.len(), 1, "{query}: {:?}", answer.rows);
    answer.rows[0].clone()
}

/// Nearest-rank quantile, computed the slow way.
fn quantile(mut values: Vec<i64>, q: f64) -> i64 {
    values.sort_unstable();
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

fn durs(f: &Fixture, keep: impl Fn(&Rec) -> bool) -> Vec<i64> {
    f.records
        .iter()
        .filter(|r| keep(r))
        .map(|r| r.dur)
        .collect()
}

#[test]
fn answers_summary_aggregates() {
    let f = fixture("summary");
    let all = durs(&f, |_| true);
    let row = one(
        &f,
        "syscalls | count, sum(dur), min(dur), max(dur), p50(dur), p99.99(dur)",
    );
    assert_eq!(
        row,
        vec![
            Cell::Int(N as i64),
            Cell::Int(all.iter().sum()),
            Cell::Int(*all.iter().min().unwrap()),
            Cell::Int(50_000_000),
            Cell::Int(quantile(all.clone(), 0.5)),
            Cell::Int(quantile(all, 0.9999)),
        ]
    );
    let answer = ask(&f, "syscalls | count");
    assert!(
        answer.plan.iter().any(|l| l.contains("chunk summaries")),
        "{:?}",
        answer.plan
    );
    assert_eq!(answer.stats.chunks_scanned, 0, "no record is read");
    assert!(answer.stats.chunks_summarized > 10);
}

#[test]
fn answers_filtered_percentile_by_name() {
    let f = fixture("sendto");
    let sendto = durs(&f, |r| r.nr == 44);
    let row = one(&f, r#"syscalls where name = "sendto" | p99.99(dur), count"#);
    assert_eq!(
        row,
        vec![
            Cell::Int(quantile(sendto.clone(), 0.9999)),
            Cell::Int(sendto.len() as i64)
        ]
    );
    // One syscall's part of the partitioned index answers from summaries.
    let answer = ask(&f, r#"syscalls where name = "sendto" | count"#);
    assert!(
        answer.plan[0].contains("one part of a partitioned index"),
        "{:?}",
        answer.plan
    );
    assert_eq!(answer.stats.chunks_scanned, 0);
    // Two syscalls: an indexed scan on the syscall number.
    let answer = ask(&f, r#"syscalls where name in ("sendto", "read") | count"#);
    assert!(
        answer.plan[0].contains("indexed scan of `syscalls` on `name` for values read..=sendto"),
        "{:?}",
        answer.plan
    );
    let both = durs(&f, |r| r.nr == 44 || r.nr == 0).len() as i64;
    assert_eq!(answer.rows[0], vec![Cell::Int(both)]);
}

#[test]
fn answers_counts_in_a_range_from_summaries() {
    let f = fixture("ranged");
    let slow = durs(&f, |r| r.dur > 1_000_000);
    let r = one(&f, "syscalls where dur > 1ms | count, max(dur)");
    assert_eq!(
        r,
        vec![
            Cell::Int(slow.len() as i64),
            Cell::Int(*slow.iter().max().unwrap())
        ]
    );
    let pread = durs(&f, |r| r.nr == 17 && r.dur >= 100_000);
    let answer = ask(
        &f,
        r#"syscalls where name = "pread64" and dur >= 100us | count, sum(dur)"#,
    );
    assert_eq!(
        answer.rows[0],
        vec![Cell::Int(pread.len() as i64), Cell::Int(pread.iter().sum())]
    );
    assert!(answer.plan[0].contains("partitioned"), "{:?}", answer.plan);
    let total = answer.stats.chunks_summarized + answer.stats.chunks_scanned;
    assert!(
        answer.stats.chunks_scanned * 2 < total,
        "most chunks from summaries: {:?}",
        answer.stats
    );
}

#[test]
fn answers_one_row_for_aggregates_over_nothing() {
    let f = fixture("nothing");
    for query in [
        "syscalls where tid = 1 | count, max(dur)",
        r#"syscalls where name = "pread64" and dur > p99 [start-2s, start-1s] | count, max(dur)"#,
    ] {
        assert_eq!(one(&f, query), vec![Cell::Int(0), Cell::Null], "{query}");
    }
}

#[test]
fn answers_full_scan_equals_indexed() {
    let mut f = fixture("full-scan");
    let queries = [
        r#"syscalls where name = "sendto" | p99.99(dur), count, max(dur)"#,
        r#"syscalls where name = "pread64" and dur > p99.9 | count"#,
        "syscalls | count, p50(dur) last 20ms",
        "syscalls around (syscalls | max(dur)) within 2ms | count",
        "syscalls | sort dur desc | limit 3",
        "syscalls | hist(dur)",
        r#"syscalls where name = "sendto" | hist(dur) last 20ms"#,
    ];
    let indexed: Vec<Answer> = queries.iter().map(|q| ask(&f, q)).collect();
    f.catalog.without_indexes();
    for (query, indexed) in queries.iter().zip(indexed) {
        let full = ask(&f, query);
        assert_eq!(full.rows, indexed.rows, "{query}");
        assert_eq!(full.stats.chunks_summarized, 0, "{query}");
        assert!(
            full.stats.chunks_scanned > indexed.stats.chunks_scanned,
            "{query}"
        );
    }
}

#[test]
fn answers_percentiles_per_bucket_from_summaries_as_a_scan_does() {
    let mut f = fixture("buckets");
    let queries = [
        "syscalls | p99(dur), count, max(dur), avg(dur) every 10ms",
        r#"syscalls where name = "sendto" | p99.9(dur), sum(dur), min(dur) every 20ms"#,
        "syscalls | percentiles(dur) every 50ms last 100ms",
        "syscalls | hist(dur) every 20ms",
        r#"syscalls where name = "sendto" | hist(dur) every 50ms"#,
    ];
    let summarized: Vec<Answer> = queries.iter().map(|q| ask(&f, q)).collect();
    for (query, answer) in queries.iter().zip(&summarized) {
        assert!(
            answer.plan.iter().any(|l| l.contains("per bucket")),
            "{query}: {:?}",
            answer.plan
        );
        assert!(answer.stats.chunks_summarized > 0, "{query}");
        assert!(answer.rows.len() > 1, "{query}");
    }
    // Buckets by the records' own time, as the scan groups them.
    f.catalog.without_indexes();
    for (query, summarized) in queries.iter().zip(summarized) {
        let scanned = ask(&f, query);
        assert_eq!(scanned.rows, summarized.rows, "{query}");
    }
}

/// Past 256 buckets, a series is answered from the summaries where the
/// window holds at least four chunks per bucket, else by one scan; both as
/// a scan answers it.
#[test]
fn answers_many_buckets_from_summaries_only_where_chunks_are_many() {
    let mut f = fixture_of_blocks("many-buckets", 4 << 10);
    // 200 ms of records in 1,177 chunks of 4 KiB: 267 buckets of 750 us
    // hold 4.4 each, 2,000 of 100 us not one.
    let cases = [
        ("syscalls | p99(dur), count every 750us", true),
        ("syscalls | p99(dur), count every 100us", false),
    ];
    let answers: Vec<Answer> = cases.iter().map(|(q, _)| ask(&f, q)).collect();
    for ((query, summarized), answer) in cases.iter().zip(&answers) {
        let per_bucket = answer.plan.iter().any(|l| l.contains("per bucket"));
        assert_eq!(per_bucket, *summarized, "{query}: {:?}", answer.plan);
        assert!(
            answer.rows.len() > 256,
            "{query}: {} rows",
            answer.rows.len()
        );
    }
    f.catalog.without_indexes();
    for ((query, _), answer) in cases.iter().zip(answers) {
        assert_eq!(ask(&f, query).rows, answer.rows, "{query}");
    }
}

#[test]
fn answers_counts_above_a_threshold_by_part_from_summaries_as_a_scan_does() {
    let mut f = fixture("above");
    let queries = [
        "syscalls where dur > p99.9 | count by name",
        "syscalls where dur >= 1500 | count by name",
        "syscalls where dur < 300 | count by name last 50ms",
    ];
    let summarized: Vec<Answer> = queries.iter().map(|q| ask(&f, q)).collect();
    for (query, answer) in queries.iter().zip(&summarized) {
        assert!(
            answer
                .plan
                .iter()
                .any(|l| l.contains("counted from the store's chunk summaries")),
            "{query}: {:?}",
            answer.plan
        );
        assert!(answer.rows.len() > 1, "{query}");
        // Only a window's edges are read record by record.
        let stats = answer.stats;
        assert!(
            stats.chunks_scanned <= 2 && stats.chunks_summarized > 10,
            "{query}: {stats:?}"
        );
    }
    f.catalog.without_indexes();
    for (query, summarized) in queries.iter().zip(summarized) {
        let mut scanned = ask(&f, query).rows;
        let mut rows = summarized.rows;
        scanned.sort_by_key(|r| format!("{r:?}"));
        rows.sort_by_key(|r| format!("{r:?}"));
        assert_eq!(scanned, rows, "{query}");
    }
}

#[test]
fn answers_grouped_percentiles_from_summaries_exactly() {
    let mut f = fixture("grouped");
    let queries = [
        "syscalls | count, p50(dur), p99(dur), percentiles(dur), avg(dur), sum(dur), min(dur) by name",
        "syscalls | p99.9(dur), count by name last 30ms",
        "syscalls | count by name",
    ];
    let indexed: Vec<Answer> = queries.iter().map(|q| ask(&f, q)).collect();
    for (query, answer) in queries.iter().zip(&indexed) {
        assert!(
            answer
                .plan
                .iter()
                .any(|l| l.contains("one part of a partitioned index per `name`")),
            "{query}: {:?}",
            answer.plan
        );
    }
    // The first answer, row by row, from the records.
    for row in &indexed[0].rows {
        let Cell::Text(name) = &row[0] else {
            panic!("{row:?}")
        };
        let nr = SYSCALLS.iter().find(|(_, n)| n == name).unwrap().0;
        let values = durs(&f, |r| r.nr == nr);
        assert_eq!(row[1], Cell::Int(values.len() as i64), "{name}");
        assert_eq!(row[2], Cell::Int(quantile(values.clone(), 0.5)), "{name}");
        assert_eq!(row[3], Cell::Int(quantile(values.clone(), 0.99)), "{name}");
    }
    f.catalog.without_indexes();
    for (query, indexed) in queries.iter().zip(indexed) {
        let full = ask(&f, query);
        assert_eq!(full.rows, indexed.rows, "{query}");
    }
}

#[test]
fn answers_records_above_their_percentile() {
    let f = fixture("threshold");
    let pread = durs(&f, |r| r.nr == 17);
    let p = quantile(pread.clone(), 0.9999);
    let expected = pread.iter().filter(|d| **d > p).count();
    let answer = ask(&f, r#"syscalls where name = "pread64" and dur > p99.99"#);
    assert_eq!(answer.rows.len(), expected);
    assert!(
        answer
            .plan
            .iter()
            .any(|l| l.contains("in one part of the index")),
        "{:?}",
        answer.plan
    );
    assert!(expected > 0);
    let names: Vec<&str> = answer.columns.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["time", "dur", "name", "tid"]);
    for row in &answer.rows {
        assert_eq!(row[2], Cell::Text("pread64".into()));
        assert!(matches!(row[1], Cell::Int(d) if d > p));
    }
    // Without other conditions the threshold comes from the store's percentile.
    let all = durs(&f, |_| true);
    let p = quantile(all.clone(), 0.999);
    let above = all.iter().filter(|d| **d >= p).count() as i64;
    assert_eq!(
        one(&f, "syscalls where dur >= p99.9 | count"),
        vec![Cell::Int(above)]
    );
}

/// Counts by thread, and by its name, come from the values log (only the
/// window's edges read record by record) and equal a brute-force pass and
/// the full scan.
#[test]
fn answers_counts_by_thread_from_the_values_log_as_a_scan_does() {
    let mut f = fixture("by-thread");
    // Threads 100 and 101 share a name, as a pool's workers do.
    let threads = (100..108).map(|tid| {
        let name = if tid < 102 {
            "worker".into()
        } else {
            format!("t{tid}")
        };
        (tid, name)
    });
    let names = Kind::Named(Arc::new(Names::new(threads, false)));
    (f.catalog.source_mut("syscalls").unwrap())
        .view("tid", "comm", names)
        .unwrap();
    let queries = [
        "syscalls | count by tid",
        "syscalls | count by comm",
        "syscalls | count by tid last 30ms",
    ];
    let from_values: Vec<Answer> = queries.iter().map(|q| ask(&f, q)).collect();
    for (query, answer) in queries.iter().zip(&from_values) {
        assert!(
            answer
                .plan
                .iter()
                .any(|l| l.contains("from the values log")),
            "{query}: {:?}",
            answer.plan
        );
        assert!(
            answer.stats.chunks_scanned <= 2,
            "{query}: {:?}",
            answer.stats
        );
    }
    let mut by_tid: HashMap<i64, i64> = HashMap::new();
    for r in &f.records {
        *by_tid.entry(r.tid).or_default() += 1;
    }
    let counted = |answer: &Answer| -> HashMap<String, i64> {
        (answer.rows.iter())
            .map(|row| match (&row[0], &row[1]) {
                (Cell::Int(tid), Cell::Int(n)) => (tid.to_string(), *n),
                (Cell::Text(name), Cell::Int(n)) => (name.clone(), *n),
                _ => panic!("{row:?}"),
            })
            .collect()
    };
    let expected: HashMap<String, i64> = by_tid.iter().map(|(t, n)| (t.to_string(), *n)).collect();
    assert_eq!(counted(&from_values[0]), expected);
    let mut by_name = HashMap::new();
    for (tid, n) in &by_tid {
        let name = if *tid < 102 {
            "worker".into()
        } else {
            format!("t{tid}")
        };
        *by_name.entry(name).or_default() += n;
    }
    assert_eq!(counted(&from_values[1]), by_name);
    f.catalog.without_indexes();
    for (query, from_values) in queries.iter().zip(from_values) {
        let scanned = ask(&f, query);
        assert_eq!(counted(&scanned), counted(&from_values), "{query}");
    }
}

#[test]
fn answers_groups_series_and_top() {
    let f = fixture("groups");
    let answer = ask(&f, "syscalls | count, max(dur) by name");
    let mut expected: HashMap<&str, (i64, i64)> = HashMap::new();
    for r in &f.records {
        let name = SYSCALLS.iter().find(|(n, _)| *n == r.nr).unwrap().1;
        let e = expected.entry(name).or_default();
        e.0 += 1;
        e.1 = e.1.max(r.dur);
    }
    assert_eq!(answer.rows.len(), expected.len());
    for row in &answer.rows {
        let Cell::Text(name) = &row[0] else {
            panic!("{row:?}")
        };
        let (count, max) = expected[name.as_str()];
        assert_eq!(row[1..], [Cell::Int(count), Cell::Int(max)], "{name}");
    }
    // Largest count first.
    assert_eq!(answer.rows[0][0], Cell::Text("read".into()));
    let top = ask(&f, "syscalls | top 2 max(dur) by name");
    assert_eq!(top.rows.len(), 2);
    assert_eq!(
        top.rows[0],
        vec![Cell::Text("nanosleep".into()), Cell::Int(50_000_000)]
    );
    let series = ask(&f, "syscalls | count every 50ms");
    let counts: Vec<i64> = series
        .rows
        .iter()
        .map(|r| match r[1] {
            Cell::Int(c) => c,
            _ => panic!(),
        })
        .collect();
    assert_eq!(counts.iter().sum::<i64>(), N as i64);
    assert!(counts.len() >= 4 && counts.len() <= 6, "{counts:?}");
    assert!(matches!(series.columns[0].kind, Kind::Time));
}

#[test]
fn answers_windows_last_and_ranges() {
    let f = fixture("windows");
    // Arrival times run from BASE to BASE + (N-1) µs; "now" is the last.
    let now = BASE + (N - 1) * 1_000;
    let count = |lo: u64, hi: u64| {
        (0..N)
            .filter(|i| (lo..=hi).contains(&(BASE + i * 1_000)))
            .count() as i64
    };
    assert_eq!(
        one(&f, "syscalls | count last 50ms"),
        vec![Cell::Int(count(now - 50_000_000, now))]
    );
    assert_eq!(
        one(&f, "syscalls | count [now-80ms, now-20ms]"),
        vec![Cell::Int(count(now - 80_000_000, now - 20_000_000))]
    );
    assert_eq!(
        one(
            &f,
            "syscalls where tid = 101 | count [start+10ms, start+20ms]"
        ),
        vec![Cell::Int(
            (0..N)
                .filter(|i| (BASE + 10_000_000..=BASE + 20_000_000).contains(&(BASE + i * 1_000)))
                .filter(|i| f.records[*i as usize].tid == 101)
                .count() as i64
        )]
    );
}

#[test]
fn answers_correlations_around_and_during() {
    let f = fixture("correlate");
    let sleep = f.records[150_000];
    let near = f
        .records
        .iter()
        .filter(|r| r.time.abs_diff(sleep.time) <= 5_000_000 && r.nr == 1)
        .count() as i64;
    let q = r#"syscalls around (syscalls | max(dur)) within 5ms where name = "write" | count"#;
    assert_eq!(one(&f, q), vec![Cell::Int(near)]);
    let during = f
        .records
        .iter()
        .filter(|r| r.tid == sleep.tid && r.time >= sleep.time - 50_000_000 && r.time <= sleep.time)
        .count() as i64;
    let q = r#"syscalls during (syscalls where name = "nanosleep") same tid | count"#;
    assert_eq!(one(&f, q), vec![Cell::Int(during)]);
    let answer = ask(&f, q);
    assert!(
        answer.plan.iter().any(|l| l.contains("1 anchor record(s)")),
        "{:?}",
        answer.plan
    );
    // Thousands of anchors closer together than the scan's slack: each
    // record is counted once, however many anchors' spans it lies near.
    let anchors: Vec<&Rec> = f.records.iter().filter(|r| r.nr == 44).collect();
    let during = f
        .records
        .iter()
        .filter(|r| {
            anchors
                .iter()
                .any(|a| a.tid == r.tid && r.time + a.dur as u64 >= a.time && r.time <= a.time)
        })
        .count() as i64;
    let q = r#"syscalls during (syscalls where name = "sendto") same tid | count"#;
    assert_eq!(one(&f, q), vec![Cell::Int(during)]);
}

#[test]
fn answers_sorted_limited_records_and_hist() {
    let f = fixture("sorted");
    let answer = ask(&f, "syscalls | sort dur desc | limit 3 | fields name, dur");
    let mut all = durs(&f, |_| true);
    all.sort_unstable_by(|a, b| b.cmp(a));
    let got: Vec<Cell> = answer.rows.iter().map(|r| r[1].clone()).collect();
    assert_eq!(
        got,
        all[..3].iter().map(|d| Cell::Int(*d)).collect::<Vec<_>>()
    );
    assert_eq!(answer.rows[0][0], Cell::Text("nanosleep".into()));
    // The k-th largest value bounds the scan, exactly: with ties at it, and
    // where k reaches into the bins that hold most records.
    for k in [1, 50, 2_000, 60_000] {
        let answer = ask(
            &f,
            &format!("syscalls | sort dur desc | limit {k} | fields dur"),
        );
        let got: Vec<Cell> = answer.rows.iter().map(|r| r[0].clone()).collect();
        let expected: Vec<Cell> = all[..k].iter().map(|d| Cell::Int(*d)).collect();
        assert_eq!(got, expected, "limit {k}");
        let bound = format!("the {k} largest `dur` are");
        assert!(
            answer.plan.iter().any(|l| l.contains(&bound)),
            "{:?}",
            answer.plan
        );
    }
    let hist = ask(&f, r#"syscalls where name = "nanosleep" | hist(dur)"#);
    assert_eq!(hist.rows.len(), 1);
    assert_eq!(
        hist.rows[0][..3],
        [Cell::Int(1 << 25), Cell::Int(1 << 26), Cell::Int(1)]
    );
}

#[test]
fn answers_name_errors_point_at_the_name() {
    let f = fixture("errors");
    let cases: &[(&str, &str)] = &[
        (
            "packets | count",
            "no source `packets` in this capture (sources: syscalls)\n  packets | count\n  ^^^^^^^",
        ),
        (
            "syscalls where durr > 1ms",
            "`syscalls` has no field `durr` (fields: time, dur, duration_ns, name, nr, tid)\n  syscalls where durr > 1ms\n                 ^^^^",
        ),
        (
            r#"syscalls where name = "sendtoo""#,
            "no `name` is called \"sendtoo\"\n  syscalls where name = \"sendtoo\"\n                        ^^^^^^^^^",
        ),
        (
            "syscalls where dur > \"slow\"",
            "`dur` is a duration: write it like `5ms`\n  syscalls where dur > \"slow\"\n                       ^^^^^^",
        ),
        (
            "syscalls where tid ~ \"1*\"",
            "`~` matches names, and `tid` has none; use `=` or `in`\n  syscalls where tid ~ \"1*\"\n                       ^^^^",
        ),
        (
            "syscalls where name > \"read\"",
            "`name` compares names with `=`, `!=`, `~` or `in` only\n  syscalls where name > \"read\"\n                        ^^^^^^",
        ),
        (
            "syscalls where not dur > p99",
            "a percentile threshold may only be compared with `=`, `<`, `>` and the like, among the top-level `and`s of `where`\n  syscalls where not dur > p99\n                           ^^^",
        ),
        (
            "syscalls around (syscalls | count) within 1s",
            "the sub-query must select records: no aggregate, or one `max(x)` or `min(x)`\n  syscalls around (syscalls | count) within 1s\n           ^^^^^^",
        ),
        (
            "syscalls | count, hist(dur)",
            "`hist` must be the only aggregate of its stage\n  syscalls | count, hist(dur)\n                    ^^^^^^^^^",
        ),
        (
            "syscalls | count by name | sort p99(dur)",
            "no column `p99(dur)` after the aggregate (columns: name, count)\n  syscalls | count by name | sort p99(dur)\n                                  ^^^^^^^^",
        ),
        (
            "syscalls [\"2026-11-22 05:00:00\", now]",
            "this capture has no wall-clock reference; use `now-…`, `start+…` or monotonic ns\n  syscalls [\"2026-11-22 05:00:00\", now]\n            ^^^^^^^^^^^^^^^^^^^^^",
        ),
    ];
    for (query, expected) in cases {
        match run(&f.snapshot, &f.catalog, query) {
            Ok(answer) => panic!("{query}: expected an error, got {:?}", answer.rows),
            Err(e) => assert_eq!(e.render(query), *expected, "for {query}"),
        }
    }
}

/// Syscalls as they arrive, then PT-like calls decoded 6 s after their own
/// time: windows and correlations must place the calls by their own time.
#[test]
fn answers_place_a_late_source_by_its_own_time() {
    const MS: u64 = 1_000_000;
    let dir = TempDir(std::env::temp_dir().join(format!("weft-query-late-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    let mut store = Store::open(&dir.0, &Config::default()).unwrap();
    let syscalls = store.define_source("syscalls", fields()).unwrap();
    let call_fields = vec![
        Field::new("dur", 0, FieldKind::U64),
        Field::new("tid", 8, FieldKind::U32),
        Field::new("depth", 12, FieldKind::U32),
    ];
    let calls = store.define_source("calls", call_fields).unwrap();
    // A syscall a ms, its own time 300 ns before it arrives; a 50 ms
    // nanosleep ends at 500 ms.
    for i in 0..1000u64 {
        let (dur, nr) = if i == 500 {
            (50 * MS, 35u32)
        } else {
            (1000, 0)
        };
        let mut payload = dur.to_le_bytes().to_vec();
        payload.extend_from_slice(&nr.to_le_bytes());
        payload.extend_from_slice(&100u32.to_le_bytes());
        store
            .append_at(syscalls, BASE + i * MS, Some(BASE + i * MS - 300), &payload)
            .unwrap();
    }
    // A 2 ms call ending every 10 ms, at 5, 15, ... 995 ms; the one at
    // 505 ms is 3 deep. All arrive 6 s on.
    for k in 0..100u64 {
        let mut payload = (2 * MS).to_le_bytes().to_vec();
        payload.extend_from_slice(&(100 + k as u32 % 2).to_le_bytes());
        payload.extend_from_slice(&(if k == 50 { 3u32 } else { 1 }).to_le_bytes());
        let time = BASE + k * 10 * MS + 5 * MS;
        store
            .append_at(calls, BASE + 6_000 * MS + k, Some(time), &payload)
            .unwrap();
    }
    store.publish();
    let snapshot = store.snapshot();
    let mut catalog = Catalog::from_meta(snapshot.meta());
    catalog.source_mut("calls").unwrap().span = Some("dur".into());
    catalog.source_mut("calls").unwrap().late = Some(10_000 * MS);
    catalog.source_mut("syscalls").unwrap().span = Some("duration_ns".into());
    let f = Fixture {
        records: Vec::new(),
        snapshot,
        catalog,
        _store: store,
        _dir: dir,
    };
    let window = format!("[{}, {}]", BASE + 200 * MS, BASE + 400 * MS);
    // Calls ending at 205 .. 395 ms.
    assert_eq!(one(&f, &format!("calls | count {window}")), [Cell::Int(20)]);
    assert_eq!(
        one(&f, &format!("calls where tid = 101 | count {window}")),
        [Cell::Int(10)]
    );
    let answer = ask(&f, &format!("calls | count {window}"));
    assert!(
        answer.plan.iter().any(|l| l.contains("up to 10.0s after")),
        "{:?}",
        answer.plan
    );
    // The calls that end during the sleep (450 .. 500 ms): 455 .. 495.
    assert_eq!(
        one(&f, "calls during (syscalls where nr = 35) | count"),
        [Cell::Int(5)]
    );
    // Around the sleep's end (arriving at 500 ms): the calls ending at
    // 495 and 505 ms.
    assert_eq!(
        one(
            &f,
            "calls around (syscalls where nr = 35) within 6ms | count"
        ),
        [Cell::Int(2)]
    );
    // The syscalls within 1 ms of the deep call's end (505 ms), and those
    // during it (503 .. 505 ms, by their own time).
    assert_eq!(
        one(
            &f,
            "syscalls around (calls where depth = 3) within 1ms | count"
        ),
        [Cell::Int(3)]
    );
    assert_eq!(
        one(&f, "syscalls during (calls where depth = 3) | count"),
        [Cell::Int(2)]
    );
    assert_eq!(one(&f, "calls | p50(dur)"), [Cell::Int(2 * MS as i64)]);
}
