//! A capture written by format version 1, checked in: every later build must
//! still open it and give the same answers.

use std::path::{Path, PathBuf};

use weft_store::{Bins, Config, Field, FieldKind, Store};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1")
}

/// Rewrites the fixture; run by hand only when adding a format version:
/// `cargo test -p weft-store --test fixture -- --ignored write_fixture_v1`.
#[test]
#[ignore = "rewrites the checked-in fixture"]
fn write_fixture_v1() {
    let dir = fixture();
    let _ = std::fs::remove_dir_all(&dir);
    let mut store = Store::open(
        &dir,
        &Config {
            block_size: 4096,
            blocks_per_segment: 4,
            ..Config::default()
        },
    )
    .unwrap();
    let field = Field::new("latency_ns", 0, FieldKind::U64);
    let requests = store
        .define_source("requests", vec![field.clone()])
        .unwrap();
    let packets = store
        .define_source("packets", vec![Field::new("len", 0, FieldKind::U32)])
        .unwrap();
    store
        .define_index(
            requests,
            "latency",
            field,
            Bins::new(vec![100, 1_000, 10_000]).unwrap(),
        )
        .unwrap();
    for i in 0u64..2_000 {
        store
            .append_at(requests, i * 10, None, &(i * 7 % 20_000).to_le_bytes())
            .unwrap();
        if i % 10 == 0 {
            store
                .append_at(
                    packets,
                    i * 10,
                    Some((i * 10).saturating_sub(3)),
                    &(i as u32).to_le_bytes(),
                )
                .unwrap();
        }
    }
    store.close().unwrap();
}

#[test]
fn fixture_v1_opens_with_the_same_answers() {
    let (snapshot, recovery) = weft_store::open_read_only(&fixture()).unwrap();
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
    let (p99, _) = snapshot.percentile(0, 1, 0..=u64::MAX, 0.99).unwrap();
    let mut values: Vec<i64> = (0..2_000).map(|i| i * 7 % 20_000).collect();
    values.sort_unstable();
    assert_eq!(p99, Some(values[1_979]));
    let (packets, _) = snapshot.raw_scan(1, 0..=u64::MAX).unwrap();
    assert_eq!(packets.len(), 200);
    assert_eq!(packets[5].producer_ts, Some(497));
}
