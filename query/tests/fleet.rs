//! A fleet query over several stores answers exactly what one query over
//! a store holding all their records answers, with each host sending far
//! fewer bytes than its records, its messages crossing as JSON.
#![expect(
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "test data stays far from the integer limits"
)]

use std::{path::PathBuf, sync::Arc};

use weft_query::{
    Catalog, Kind, Names,
    fleet::{self, Host, wire::Reply, wire::Request},
    parse, run,
};
use weft_store::{Bins, Config, Field, FieldKind, Partition, Snapshot, Store};

include!("../../store/tests/common/rng.rs");

const BASE: u64 = 1_000_000_000_000;
const SYSCALLS: [(i64, &str); 4] = [(0, "read"), (1, "write"), (17, "pread64"), (44, "sendto")];

struct Capture {
    snapshot: Snapshot,
    catalog: Catalog,
    _store: Store,
    dir: PathBuf,
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `(duration, nr, tid)`
type Rec = (i64, i64, i64);

fn fields() -> Vec<Field> {
    vec![
        Field::new("duration_ns", 0, FieldKind::U64),
        Field::new("nr", 8, FieldKind::U32),
        Field::new("tid", 12, FieldKind::U32),
    ]
}

/// Records of one host: mostly short reads and writes, sendto and pread64
/// with long tails. Different seeds make different hosts.
fn records(seed: u64, n: u64) -> Vec<Rec> {
    let mut rng = Rng(seed);
    (0..n)
        .map(|_| {
            let nr = [0, 0, 1, 1, 17, 44][rng.below(6) as usize];
            let mut dur = 200 + rng.below(2_000) as i64;
            if nr >= 17 && rng.below(40) == 0 {
                dur *= 1 + rng.below(500) as i64;
            }
            (dur, nr, 100 + rng.below(4) as i64)
        })
        .collect()
}

fn capture(name: &str, records: &[Rec]) -> Capture {
    capture_binned(name, records, 4)
}

/// A capture whose `duration_ns` index has `per_octave` bins per power of
/// two.
fn capture_binned(name: &str, records: &[Rec], per_octave: i64) -> Capture {
    let timed: Vec<(u64, Rec)> = records
        .iter()
        .enumerate()
        .map(|(i, r)| (BASE + i as u64 * 1_000, *r))
        .collect();
    capture_timed(name, &timed, per_octave, None)
}

/// A capture of records at their times, with a wall-clock reference.
fn capture_timed(
    name: &str,
    records: &[(u64, Rec)],
    per_octave: i64,
    wall_offset: Option<i64>,
) -> Capture {
    let dir = std::env::temp_dir().join(format!("weft-fleet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = Config {
        block_size: 64 << 10,
        ..Config::default()
    };
    let mut store = Store::open(&dir, &config).unwrap();
    let source = store.define_source("syscalls", fields()).unwrap();
    let bounds: Vec<i64> = (0..15 * per_octave)
        .map(|i| 100 * (1 << (i / per_octave)) + i)
        .collect();
    store
        .define_index(
            source,
            "duration_ns",
            fields()[0].clone(),
            Bins::new(bounds.clone()).unwrap(),
        )
        .unwrap();
    // Per syscall, as weft's recordings keep it: `by name` from summaries.
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
    for (time, (dur, nr, tid)) in records {
        let mut payload = Vec::with_capacity(16);
        payload.extend_from_slice(&(*dur as u64).to_le_bytes());
        payload.extend_from_slice(&(*nr as u32).to_le_bytes());
        payload.extend_from_slice(&(*tid as u32).to_le_bytes());
        store.append_at(source, *time, None, &payload).unwrap();
    }
    store.publish();
    let snapshot = store.snapshot();
    let mut catalog = Catalog::from_meta(snapshot.meta());
    catalog.wall_offset = wall_offset;
    let syscalls = catalog.source_mut("syscalls").unwrap();
    syscalls
        .alias("duration_ns", "dur", Kind::Duration)
        .unwrap();
    let names = Names::new(SYSCALLS.iter().map(|(n, s)| (*n, (*s).to_owned())), true);
    syscalls
        .alias("nr", "name", Kind::Named(Arc::new(names)))
        .unwrap();
    Capture {
        snapshot,
        catalog,
        _store: store,
        dir,
    }
}

/// A host in this process whose replies cross as JSON, as a peer's would.
struct Local<'a> {
    name: String,
    capture: &'a Capture,
}

impl Host for Local<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn ask(&mut self, request: &Request) -> weft_query::Result<(Reply, u64)> {
        let request: Request =
            serde_json::from_str(&serde_json::to_string(request).unwrap()).unwrap();
        let query = parse(&request.query)?;
        let reply = fleet::reply(
            &self.capture.snapshot,
            &self.capture.catalog,
            &query,
            &request,
        )?;
        let bytes = serde_json::to_vec(&reply).unwrap();
        Ok((serde_json::from_slice(&bytes).unwrap(), bytes.len() as u64))
    }
}

struct Fleet {
    hosts: Vec<Capture>,
    all: Capture,
}

fn fleet(name: &str, sizes: &[u64]) -> Fleet {
    let per_host: Vec<Vec<Rec>> = sizes
        .iter()
        .enumerate()
        .map(|(i, n)| records(0x9E37_79B9_7F4A_7C15 + i as u64, *n))
        .collect();
    Fleet {
        hosts: per_host
            .iter()
            .enumerate()
            .map(|(i, r)| capture(&format!("{name}-{i}"), r))
            .collect(),
        all: capture(&format!("{name}-all"), &per_host.concat()),
    }
}

fn ask_fleet(f: &Fleet, query: &str) -> fleet::FleetAnswer {
    fleet_answer(&f.hosts, query).unwrap_or_else(|e| panic!("{}", e.render(query)))
}

/// `query` over `captures` as hosts `h0`, `h1`, ...
fn fleet_answer(captures: &[Capture], query: &str) -> weft_query::Result<fleet::FleetAnswer> {
    let mut locals: Vec<Local> = captures
        .iter()
        .enumerate()
        .map(|(i, capture)| Local {
            name: format!("h{i}"),
            capture,
        })
        .collect();
    let mut hosts: Vec<&mut dyn Host> = locals.iter_mut().map(|l| l as &mut dyn Host).collect();
    fleet::answer(query, &mut hosts)
}

#[test]
fn fleet_answers_equal_one_capture_of_all_records() {
    let f = fleet("same", &[40_000, 25_000, 30_000]);
    for query in [
        "syscalls | count, sum(dur), min(dur), max(dur), avg(dur)",
        "syscalls | p50(dur), p90(dur), p99(dur), p99.99(dur), p100(dur), p0(dur)",
        "syscalls where name = sendto | p99.99(dur)",
        "syscalls | percentiles(dur) by name",
        "syscalls | count, p99(dur) by name, tid",
        "syscalls where dur > 100us | count by name",
        "syscalls | top 2 p99(dur) by name",
        "syscalls | hist(dur)",
        "syscalls | count by name | sort name | limit 2",
        "syscalls where tid = 999 | p50(dur), count",
    ] {
        let one = run(&f.all.snapshot, &f.all.catalog, query)
            .unwrap_or_else(|e| panic!("{}", e.render(query)));
        let many = ask_fleet(&f, query);
        assert_eq!(many.answer.rows, one.rows, "{query}");
        let names = |a: &weft_query::Answer| -> Vec<String> {
            a.columns.iter().map(|h| h.name.clone()).collect()
        };
        assert_eq!(names(&many.answer), names(&one), "{query}");
    }
}

#[test]
fn a_fleet_percentile_sends_far_fewer_bytes_than_the_records() {
    let f = fleet("bytes", &[100_000, 100_000]);
    let query = "syscalls | p50(dur), p99.99(dur)";
    let many = ask_fleet(&f, query);
    let one = run(&f.all.snapshot, &f.all.catalog, query).unwrap();
    assert_eq!(many.answer.rows, one.rows);
    // 16 bytes a record: what shipping them would cost.
    for t in &many.traffic {
        assert!(t.bytes * 100 < 100_000 * 16, "{t:?}");
        // Bin counts from the summaries; only the chunks holding the two
        // quantiles' bins are read.
        assert!(t.scanned < 100_000 / 2, "{t:?}");
    }
    assert!(
        many.answer.plan.iter().any(|l| l.contains("sent")),
        "{:?}",
        many.answer.plan
    );
}

#[test]
fn groups_that_are_parts_come_from_summaries() {
    let f = fleet("parts", &[60_000, 60_000]);
    let query = "syscalls | count, p50(dur), p99(dur), max(dur) by name";
    let many = ask_fleet(&f, query);
    let one = run(&f.all.snapshot, &f.all.catalog, query).unwrap();
    assert_eq!(many.answer.rows, one.rows);
    for t in &many.traffic {
        // Counts per bin from the summaries; then only the chunks whose
        // summaries reach each name's quantile bins are read.
        assert!(t.scanned < 60_000, "{t:?}");
    }
}

#[test]
fn a_quantile_among_many_equal_values_is_found() {
    // 6,000 calls a host of the same few durations: p50's bin holds more
    // than a host sends, and narrowing ends at a single value.
    let same = |seed: u64| -> Vec<Rec> {
        let mut rng = Rng(seed);
        (0..6_000)
            .map(|_| (300 + rng.below(3) as i64, 0, 100))
            .collect()
    };
    let (a, b) = (same(1), same(2));
    let f = Fleet {
        hosts: vec![capture("equal-0", &a), capture("equal-1", &b)],
        all: capture("equal-all", &[a, b].concat()),
    };
    for query in [
        "syscalls | p50(dur), p99(dur), p0(dur)",
        "syscalls | p50(dur) by tid",
    ] {
        let one = run(&f.all.snapshot, &f.all.catalog, query).unwrap();
        assert_eq!(ask_fleet(&f, query).answer.rows, one.rows, "{query}");
    }
}

#[test]
fn a_full_bin_is_narrowed_to_a_piece_whose_values_are_sent() {
    // Durations spread over 1-2 ms: p50's bin (about 131 µs wide) holds
    // some 5,000 values a host, more than a host sends; its counts per
    // piece pick a piece 512 ns wide, whose few values come in round two.
    let spread = |seed: u64| -> Vec<Rec> {
        let mut rng = Rng(seed);
        (0..40_000)
            .map(|_| (1_000_000 + rng.below(1_000_000) as i64, 1, 100))
            .collect()
    };
    let (a, b) = (spread(3), spread(4));
    let f = Fleet {
        hosts: vec![capture("spread-0", &a), capture("spread-1", &b)],
        all: capture("spread-all", &[a, b].concat()),
    };
    let query = "syscalls | p50(dur)";
    let many = ask_fleet(&f, query);
    assert_eq!(many.rounds, 2);
    let one = run(&f.all.snapshot, &f.all.catalog, query).unwrap();
    assert_eq!(many.answer.rows, one.rows);
}

#[test]
fn hosts_whose_indexes_bin_differently_count_in_shared_bins() {
    let (a, b) = (records(11, 20_000), records(12, 30_000));
    let f = Fleet {
        hosts: vec![capture("bins-0", &a), capture_binned("bins-1", &b, 8)],
        all: capture("bins-all", &[a, b].concat()),
    };
    let query = "syscalls | p50(dur), p99(dur), count";
    let many = ask_fleet(&f, query);
    let one = run(&f.all.snapshot, &f.all.catalog, query).unwrap();
    assert_eq!(many.answer.rows, one.rows);
    // Asked twice for partials: summaries, then the records.
    assert!(
        many.traffic.iter().all(|t| t.asks >= 3),
        "{:?}",
        many.traffic
    );
}

#[test]
fn a_fleet_refuses_per_host_thresholds_and_listings() {
    let f = fleet("refuse", &[100, 100]);
    let mut locals: Vec<Local> = f
        .hosts
        .iter()
        .map(|capture| Local {
            name: "h".into(),
            capture,
        })
        .collect();
    let mut hosts: Vec<&mut dyn Host> = locals.iter_mut().map(|l| l as &mut dyn Host).collect();
    for (query, says) in [
        ("syscalls where dur > p99 | count", "percentile in `where`"),
        ("syscalls | limit 3", "listing records"),
    ] {
        let error = fleet::answer(query, &mut hosts).unwrap_err().render(query);
        assert!(error.contains(says), "{query}: {error}");
    }
}

#[test]
fn by_host_groups_each_hosts_records_under_its_name() {
    let f = fleet("by-host", &[20_000, 15_000, 10_000]);
    let alone = |i: usize, query: &str| {
        run(&f.hosts[i].snapshot, &f.hosts[i].catalog, query)
            .unwrap_or_else(|e| panic!("{}", e.render(query)))
    };
    let host = |i: usize| weft_query::Cell::Text(format!("h{i}"));
    // `host` alone: one row per host, as that host alone answers.
    let many = ask_fleet(
        &f,
        "syscalls | count, p99(dur), max(dur) by host | sort host",
    );
    let names: Vec<String> = many.answer.columns.iter().map(|h| h.name.clone()).collect();
    assert_eq!(names, ["host", "count", "p99(dur)", "max(dur)"]);
    let expected: Vec<Vec<weft_query::Cell>> = (0..3)
        .map(|i| {
            let mut row = alone(i, "syscalls | count, p99(dur), max(dur)").rows[0].clone();
            row.insert(0, host(i));
            row
        })
        .collect();
    assert_eq!(many.answer.rows, expected);
    // Beside other fields, first or last: the same rows as each host's own
    // groups, the host's name in its place.
    for (query, alone_query, at) in [
        (
            "syscalls where dur > 1us | count, p50(dur) by name, host",
            "syscalls where dur > 1us | count, p50(dur) by name",
            1,
        ),
        (
            "syscalls | p99.9(dur) by host, name",
            "syscalls | p99.9(dur) by name",
            0,
        ),
    ] {
        let mut rows = ask_fleet(&f, query).answer.rows;
        let mut expected: Vec<Vec<weft_query::Cell>> = (0..3)
            .flat_map(|i| {
                alone(i, alone_query).rows.into_iter().map(move |mut row| {
                    row.insert(at, host(i));
                    row
                })
            })
            .collect();
        let order = |a: &Vec<weft_query::Cell>, b: &Vec<weft_query::Cell>| {
            format!("{a:?}").cmp(&format!("{b:?}"))
        };
        rows.sort_by(order);
        expected.sort_by(order);
        assert_eq!(rows, expected, "{query}");
    }
}

#[test]
fn a_correlation_across_hosts_keeps_the_records_near_any_host_s_anchors() {
    // Two hosts whose clocks started 2 s apart: their records interleave
    // in wall-clock time. One capture of all of them on A's clock is what
    // the fleet must answer.
    let (wall_a, wall_b) = (5_000_000_000, 7_000_000_000);
    let a: Vec<(u64, Rec)> = records(11, 20_000)
        .into_iter()
        .enumerate()
        .map(|(i, r)| (BASE + i as u64 * 1_000, r))
        .collect();
    let b: Vec<(u64, Rec)> = records(12, 20_000)
        .into_iter()
        .enumerate()
        .map(|(i, r)| (BASE - 2_000_000_000 + i as u64 * 1_000 + 500, r))
        .collect();
    let mut all: Vec<(u64, Rec)> = a
        .iter()
        .copied()
        .chain(b.iter().map(|(t, r)| (t + 2_000_000_000, *r)))
        .collect();
    all.sort_by_key(|(t, _)| *t);
    let hosts = [
        capture_timed("corr-a", &a, 4, Some(wall_a)),
        capture_timed("corr-b", &b, 4, Some(wall_b)),
    ];
    let one = capture_timed("corr-all", &all, 4, Some(wall_a));
    for query in [
        "syscalls around (syscalls where name = sendto and dur > 100us) within 20us | count, p99(dur) by name",
        "syscalls around (syscalls | max(dur)) within 300us | count, sum(dur)",
        "syscalls around (syscalls where dur < 201ns | min(dur)) within 5us | count",
    ] {
        let many = fleet_answer(&hosts, query).unwrap_or_else(|e| panic!("{}", e.render(query)));
        let expected = run(&one.snapshot, &one.catalog, query)
            .unwrap_or_else(|e| panic!("{}", e.render(query)));
        assert_eq!(many.answer.rows, expected.rows, "{query}");
        assert!(!expected.rows.is_empty(), "{query}");
    }
    // `same` matches one host's fields; sorted sub-queries would be each
    // host's own.
    for (query, says) in [
        (
            "syscalls around (syscalls where dur > 1ms) within 1ms same tid | count",
            "`same`",
        ),
        (
            "syscalls around (syscalls | sort dur | limit 3) within 1ms | count",
            "sub-query",
        ),
    ] {
        let error = fleet_answer(&hosts, query).unwrap_err();
        assert!(
            error.render(query).contains(says),
            "{}",
            error.render(query)
        );
    }
}
