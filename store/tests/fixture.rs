//! Captures written by each format version, checked in: every later build
//! must still open them and give the same answers.

use std::path::{Path, PathBuf};

use weft_store::{Bins, Config, Field, FieldKind, Store};

fn fixture(version: u8) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/v{version}"))
}

/// Writes the fixture of the current format; run by hand only when adding
/// a format version (`v1` was written by the build of that format):
/// `cargo test -p weft-store --test fixture -- --ignored write_fixture_v5`
/// (`v1` to `v4` were written by the builds of those formats).
#[test]
#[ignore = "rewrites the checked-in fixture"]
fn write_fixture_v5() {
    let dir = fixture(5);
    let _ = std::fs::remove_dir_all(&dir);
    write_fixture(&dir);
}

include!("common/write_fixture.rs");

#[test]
fn fixture_v1_opens_with_the_same_answers() {
    let stats = same_answers(&fixture(1));
    assert_eq!(
        stats.chunks_valued_for_bins, 0,
        "format 1 has no values log"
    );
    assert!(stats.chunks_read_for_bins > 0, "{stats:?}");
}

#[test]
fn fixture_v2_opens_with_the_same_answers_from_its_values() {
    let stats = same_answers(&fixture(2));
    assert_eq!(stats.chunks_read_for_bins, 0, "{stats:?}");
    assert!(stats.chunks_valued_for_bins > 0, "{stats:?}");
}

#[test]
fn fixture_v3_opens_with_the_same_answers_from_its_groups() {
    let stats = same_answers(&fixture(3));
    assert_eq!(stats.chunks_read_for_bins, 0, "{stats:?}");
    assert!(stats.chunks_valued_for_bins > 0, "{stats:?}");
    assert!(stats.chunks_in_groups > 0, "{stats:?}");
}

#[test]
fn fixture_v4_opens_with_the_same_answers_from_its_groups() {
    let stats = same_answers(&fixture(4));
    assert_eq!(stats.chunks_read_for_bins, 0, "{stats:?}");
    assert!(stats.chunks_in_groups > 0, "{stats:?}");
}

#[test]
fn fixture_v5_opens_whole_with_the_same_answers() {
    let stats = same_answers(&fixture(5));
    assert_eq!(stats.chunks_read_for_bins, 0, "{stats:?}");
    assert!(stats.chunks_in_groups > 0, "{stats:?}");
    let report = weft_store::check(&fixture(5)).unwrap();
    assert!(report.problems.is_empty(), "{report:?}");
}

/// A capture of format 1 takes more records in format 1 (no values log),
/// and answers for old and new records alike.
#[test]
fn a_format_1_capture_is_appended_to_in_format_1() {
    let dir = appended(1);
    assert!(!dir.join("values.log").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A capture of format 2 takes more records in format 2 (no groups log).
#[test]
fn a_format_2_capture_is_appended_to_in_format_2() {
    let dir = appended(2);
    assert!(dir.join("values.log").exists());
    assert!(!dir.join("groups.log").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A copy of fixture `version` with 1,000 more records appended, checked
/// to answer exactly in its own format; returns its directory.
fn appended(version: u8) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "weft-fixture-append-{version}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture(version)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    let mut store = Store::open(&dir, &small()).unwrap();
    let field = Field::new("latency_ns", 0, FieldKind::U64);
    let requests = store.define_source("requests", vec![field]).unwrap();
    for i in 0u64..1_000 {
        store
            .append_at(requests, 30_000 + i, None, &20_000u64.to_le_bytes())
            .unwrap();
    }
    store.close().unwrap();
    let (snapshot, recovery) = weft_store::open_read_only(&dir).unwrap();
    assert_eq!(snapshot.meta().format as u8, version);
    assert_eq!(recovery.cut_chunks, 0, "{recovery:?}");
    assert_eq!(snapshot.records().unwrap(), 3_200);
    let (p50, _) = snapshot.percentile(0, 1, 0..=u64::MAX, 0.5).unwrap();
    let mut values: Vec<i64> = (0..2_000).map(|i| i * 7 % 20_000).collect();
    values.extend([20_000; 1_000]);
    values.sort_unstable();
    assert_eq!(p50, Some(values[1_499]));
    dir
}

/// A capture of format 3 reopened mid-run has no group for that run but
/// answers the same, and the runs after it are grouped again.
#[test]
fn a_format_3_capture_appended_to_groups_its_new_runs() {
    let dir = appended(3);
    let mut store = Store::open(&dir, &small()).unwrap();
    let field = Field::new("latency_ns", 0, FieldKind::U64);
    let requests = store.define_source("requests", vec![field]).unwrap();
    for i in 0u64..2_000 {
        store
            .append_at(requests, 40_000 + i, None, &(i % 300).to_le_bytes())
            .unwrap();
    }
    store.close().unwrap();
    let (snapshot, recovery) = weft_store::open_read_only(&dir).unwrap();
    assert!(recovery.notes.is_empty(), "{recovery:?}");
    let (agg, stats) = snapshot.aggregate(0, 1, 0..=u64::MAX).unwrap();
    assert_eq!(agg.count, 5_000);
    assert!(stats.chunks_in_groups > 0, "{stats:?}");
    let (agg, stats) = snapshot.aggregate(0, 1, 40_000..=u64::MAX).unwrap();
    assert_eq!((agg.count, agg.max), (2_000, Some(299)));
    assert!(
        stats.chunks_in_groups > 0,
        "a run of the last session: {stats:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Checks the fixture's answers; returns how its p99 was found.
fn same_answers(dir: &Path) -> weft_store::QueryStats {
    let (snapshot, recovery) = weft_store::open_read_only(dir).unwrap();
    assert_eq!(
        (recovery.cut_chunks, recovery.cut_bytes),
        (0, 0),
        "{recovery:?}"
    );
    assert_eq!(snapshot.records().unwrap(), 2_200);
    let (agg, _) = snapshot.aggregate(0, 1, 0..=u64::MAX).unwrap();
    assert_eq!(
        (agg.count, agg.min, agg.max),
        (2_000, Some(0), Some(13_993))
    );
    let (p99, stats) = snapshot.percentile(0, 1, 0..=u64::MAX, 0.99).unwrap();
    let mut values: Vec<i64> = (0..2_000).map(|i| i * 7 % 20_000).collect();
    values.sort_unstable();
    assert_eq!(p99, Some(values[1_979]));
    let (packets, _) = snapshot.raw_scan(1, 0..=u64::MAX).unwrap();
    assert_eq!(packets.len(), 200);
    assert_eq!(packets[5].producer_ts, Some(497));
    // Counts per bucket of own time: from summaries in format 2, from
    // the records in format 1; the same either way.
    for step in [1_000, 100_000] {
        let mut expected = std::collections::BTreeMap::new();
        for p in &packets {
            let time = p.producer_ts.unwrap_or(p.ts);
            *expected.entry(time - time % step).or_insert(0) += 1;
        }
        let (got, _) = snapshot.count_every(1, 0..=u64::MAX, step, 0).unwrap();
        assert_eq!(got, expected, "step {step}");
    }
    stats
}
