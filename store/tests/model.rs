//! Every operator against a plain in-memory reference (a `Vec` of records),
//! with random schemas, bins, payloads and windows — including windows inside
//! the unsealed tail, across flushed chunks, and after reopening read-only.
#![expect(
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    clippy::range_plus_one,
    reason = "random test data mixes signed and unsigned values on purpose"
)]

use std::ops::RangeInclusive;

use weft_store::{Bins, Config, Field, FieldKind, IndexId, Snapshot, SourceId, Store};

include!("common/rng.rs");

struct RefRecord {
    source: SourceId,
    ts: u64,
    producer: Option<u64>,
    payload: Vec<u8>,
}

struct Model {
    records: Vec<RefRecord>,
    /// (index id, source, field)
    indexes: Vec<(IndexId, SourceId, Field)>,
}

impl Model {
    fn values(&self, source: SourceId, field: &Field, window: &RangeInclusive<u64>) -> Vec<i64> {
        self.records
            .iter()
            .filter(|r| r.source == source && window.contains(&r.ts))
            .filter_map(|r| field.read(&r.payload))
            .collect()
    }
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn random_bins(rng: &mut Rng, spread: u64) -> Bins {
    let mut bounds: Vec<i64> = (0..1 + rng.below(6))
        .map(|_| rng.below(spread) as i64 - 50)
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    Bins::new(bounds).unwrap()
}

/// Builds a store and the reference from one seed; leaves the store open.
fn build(seed: u64, dir: &std::path::Path, n: usize) -> (Store, Model) {
    let mut rng = Rng(seed | 1);
    // Groups of 3 chunks straddle the segments of 4.
    let config = Config {
        block_size: 4096,
        blocks_per_segment: 4,
        group_chunks: 3,
        ..Config::default()
    };
    let mut store = Store::open(dir, &config).unwrap();
    let kinds = [
        FieldKind::U32,
        FieldKind::U64,
        FieldKind::I32,
        FieldKind::U16,
    ];
    let mut fields = Vec::new();
    for s in 0..1 + rng.below(3) {
        let kind = kinds[rng.below(4) as usize];
        let field = Field::new("v", rng.below(3) as u32 * 4, kind);
        let id = store
            .define_source(&format!("s{s}"), vec![field.clone()])
            .unwrap();
        fields.push((id, field));
    }
    let mut model = Model {
        records: Vec::new(),
        indexes: Vec::new(),
    };
    let define = |store: &mut Store, model: &mut Model, rng: &mut Rng| {
        let (source, field) = fields[rng.below(fields.len() as u64) as usize].clone();
        let id = store
            .define_index(source, "idx", field.clone(), random_bins(rng, 600))
            .unwrap();
        model.indexes.push((id, source, field));
    };
    define(&mut store, &mut model, &mut rng);
    let mut ts = 1_000;
    for i in 0..n {
        if i == n / 3 {
            define(&mut store, &mut model, &mut rng);
        }
        if i == n / 2 && model.indexes.len() > 1 {
            store.close_index(model.indexes[0].0).unwrap();
        }
        ts += rng.below(3) * rng.below(1000);
        let (source, _) = fields[rng.below(fields.len() as u64) as usize];
        // Rare sources: source 0 is ten times more frequent than the others.
        let source = if rng.below(10) < 8 {
            fields[0].0
        } else {
            source
        };
        let mut payload: Vec<u8> = (0..12 + rng.below(100)).map(|_| rng.next() as u8).collect();
        let value = rng.below(500) as i64 - 20;
        payload[..8].copy_from_slice(&value.to_le_bytes());
        payload[8..12].copy_from_slice(&(value as u32).to_le_bytes());
        let producer = (rng.below(4) == 0).then(|| ts - rng.below(100));
        store.append_at(source, ts, producer, &payload).unwrap();
        model.records.push(RefRecord {
            source,
            ts,
            producer,
            payload,
        });
        if rng.below(500) == 0 {
            store.publish();
        }
    }
    store.publish();
    (store, model)
}

fn random_window(rng: &mut Rng, model: &Model) -> RangeInclusive<u64> {
    let last = model.records.last().map_or(0, |r| r.ts);
    let a = rng.below(last + 2000);
    let b = a + rng.below(last / 3 + 1);
    match rng.below(5) {
        0 => 0..=u64::MAX,
        1 => last.saturating_sub(rng.below(2000))..=last, // the unsealed tail
        _ => a..=b,
    }
}

fn check(snapshot: &Snapshot, model: &Model, seed: u64) {
    let mut rng = Rng(seed.wrapping_mul(7) | 1);
    // Chunks that `count_every` counted from their summaries.
    let (mut summarized, mut grouped) = (0, 0);
    for _ in 0..40 {
        let window = random_window(&mut rng, model);
        // Raw scans, every source.
        for source in 0..snapshot.meta().sources.len() as SourceId {
            let (records, _) = snapshot.raw_scan(source, window.clone()).unwrap();
            let expected: Vec<(u64, &[u8])> = model
                .records
                .iter()
                .filter(|r| r.source == source && window.contains(&r.ts))
                .map(|r| (r.ts, r.payload.as_slice()))
                .collect();
            let got: Vec<(u64, &[u8])> = records
                .iter()
                .map(|r| (r.ts, r.payload.as_slice()))
                .collect();
            assert_eq!(
                got, expected,
                "raw_scan source {source} window {window:?} seed {seed}"
            );
            // Counts per bucket of the records' own times.
            let step = 1 + rng.below(20_000) * (1 + rng.below(100));
            let offset = rng.next();
            let mut expected = std::collections::BTreeMap::new();
            for r in model
                .records
                .iter()
                .filter(|r| r.source == source && window.contains(&r.ts))
            {
                let time = r.producer.unwrap_or(r.ts);
                *expected
                    .entry(time.wrapping_sub(time.wrapping_add(offset) % step))
                    .or_insert(0u64) += 1;
            }
            let (got, stats) = snapshot
                .count_every(source, window.clone(), step, offset)
                .unwrap();
            summarized += stats.chunks_summarized;
            grouped += stats.chunks_in_groups;
            assert_eq!(
                got, expected,
                "count_every source {source} step {step} window {window:?} seed {seed}"
            );
        }
        for (index, source, field) in &model.indexes {
            let mut values = model.values(*source, field, &window);
            // Indexed scan over a random value range.
            let lo = rng.below(600) as i64 - 100;
            let range = lo..=lo + rng.below(300) as i64;
            let (records, _) = snapshot
                .indexed_scan(*source, *index, window.clone(), range.clone())
                .unwrap();
            let expected = values.iter().filter(|v| range.contains(v)).count();
            assert_eq!(
                records.len(),
                expected,
                "indexed_scan {index} {window:?} {range:?} seed {seed}"
            );
            // Aggregates.
            let (agg, stats) = snapshot.aggregate(*source, *index, window.clone()).unwrap();
            grouped += stats.chunks_in_groups;
            assert_eq!(agg.count, values.len() as u64, "count seed {seed}");
            assert_eq!(
                agg.sum,
                values.iter().map(|v| i128::from(*v)).sum::<i128>(),
                "sum seed {seed}"
            );
            assert_eq!(agg.min, values.iter().copied().min(), "min seed {seed}");
            assert_eq!(agg.max, values.iter().copied().max(), "max seed {seed}");
            // Exact percentiles, nearest rank.
            values.sort_unstable();
            for q in [
                0.0,
                0.5,
                0.9,
                0.99,
                0.9999,
                1.0,
                rng.below(1000) as f64 / 1000.0,
            ] {
                let (got, stats) = snapshot
                    .percentile(*source, *index, window.clone(), q)
                    .unwrap();
                grouped += stats.chunks_in_groups;
                let expected = (!values.is_empty()).then(|| {
                    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
                    values[rank - 1]
                });
                assert_eq!(
                    got, expected,
                    "p{q} index {index} window {window:?} seed {seed}"
                );
            }
        }
    }
    assert!(summarized > 0, "no chunk counted per bucket from summaries");
    assert!(grouped > 0, "no chunk answered by its group's summaries");
}

#[test]
fn operators_match_reference_live_and_reopened() {
    for seed in 1..=12 {
        let dir = temp_dir(&format!("model-{seed}"));
        let (store, model) = build(seed, &dir, 3000 + seed as usize * 500);
        check(&store.snapshot(), &model, seed);
        store.close().unwrap();
        let (snapshot, recovery) = weft_store::open_read_only(&dir).unwrap();
        assert_eq!(recovery.cut_chunks, 0);
        assert_eq!(snapshot.records().unwrap(), model.records.len() as u64);
        check(&snapshot, &model, seed);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn percentile_narrows_huge_bins_exactly() {
    // One bin holding more values than fit in memory at once forces the
    // counting passes; values spread over the whole i64 range.
    let dir = temp_dir("huge-bin");
    let mut store = Store::open(
        &dir,
        &Config {
            block_size: 1 << 20,
            ..Config::default()
        },
    )
    .unwrap();
    let field = Field::new("v", 0, FieldKind::I64);
    let source = store.define_source("s", vec![field.clone()]).unwrap();
    let index = store
        .define_index(source, "v", field, Bins::new(vec![i64::MAX - 1]).unwrap())
        .unwrap();
    let mut rng = Rng(99);
    // More than one pass holds (4 Mi values), in a bin too wide to count
    // per value: only narrowing passes can answer.
    let mut values: Vec<i64> = (0..4_500_000).map(|_| rng.next() as i64).collect();
    for (ts, v) in values.iter().enumerate() {
        store
            .append_at(source, ts as u64, None, &v.to_le_bytes())
            .unwrap();
    }
    store.publish();
    values.sort_unstable();
    let snapshot = store.snapshot();
    for q in [0.1, 0.5, 0.999] {
        let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
        let (got, _) = snapshot.percentile(source, index, 0..=u64::MAX, q).unwrap();
        assert_eq!(got, Some(values[rank - 1]), "q {q}");
    }
    drop(snapshot);
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn percentile_of_a_bin_holding_one_value_too_often_ends() {
    // A flood of equal durations: narrowing cannot split one value, so it
    // must stop there (it looped for ever when one value was held more
    // times than fit in memory).
    let dir = temp_dir("one-value");
    let config = Config {
        block_size: 1 << 20,
        ..Config::default()
    };
    let mut store = Store::open(&dir, &config).unwrap();
    let field = Field::new("v", 0, FieldKind::I64);
    let source = store.define_source("s", vec![field.clone()]).unwrap();
    let index = store
        .define_index(source, "v", field, Bins::new(vec![100, 1_000_000]).unwrap())
        .unwrap();
    // More than a pass holds, in a bin too wide to count per value.
    let values = (0..4_300_000u64).map(|i| {
        if i % 100 == 0 {
            101 + (i % 7) as i64
        } else {
            187
        }
    });
    for (ts, v) in values.enumerate() {
        store
            .append_at(source, ts as u64, None, &v.to_le_bytes())
            .unwrap();
    }
    store.publish();
    let snapshot = store.snapshot();
    for (q, expected) in [(0.001, 101), (0.5, 187), (1.0, 187)] {
        let (got, _) = snapshot.percentile(source, index, 0..=u64::MAX, q).unwrap();
        assert_eq!(got, Some(expected), "q {q}");
    }
    drop(snapshot);
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn aggregate_parts_counts_a_flood_of_few_values_exactly() {
    // More values in one part's median bin than a pass holds (4 Mi): they
    // are counted per value instead, in the same single pass.
    let dir = temp_dir("flood-parts");
    let config = Config {
        block_size: 1 << 20,
        ..Config::default()
    };
    let mut store = Store::open(&dir, &config).unwrap();
    let value = Field::new("v", 0, FieldKind::I64);
    let nr = Field::new("nr", 8, FieldKind::U32);
    let source = store
        .define_source("s", vec![value.clone(), nr.clone()])
        .unwrap();
    let partition = weft_store::Partition {
        field: nr,
        count: 2,
    };
    let index = store
        .define_partitioned_index(
            source,
            "v_by_nr",
            value,
            Bins::new(vec![100, 1000]).unwrap(),
            Some(partition),
        )
        .unwrap();
    let mut rng = Rng(3);
    let mut flood = Vec::new();
    for ts in 0..4_300_000u64 {
        let (v, n) = if ts % 1000 == 0 {
            (5000 + rng.below(100) as i64, 0u32)
        } else {
            (250 + rng.below(40) as i64, 1)
        };
        if n == 1 {
            flood.push(v);
        }
        let mut payload = v.to_le_bytes().to_vec();
        payload.extend_from_slice(&n.to_le_bytes());
        store.append_at(source, ts, None, &payload).unwrap();
    }
    store.publish();
    let snapshot = store.snapshot();
    let qs = [0.5, 0.99, 1.0];
    let (answers, _) = snapshot
        .aggregate_parts(source, index, 0..=u64::MAX, &qs)
        .unwrap();
    flood.sort_unstable();
    let n = flood.len();
    let expected: Vec<Option<i64>> = qs
        .iter()
        .map(|q| Some(flood[((q * n as f64).ceil() as usize).clamp(1, n) - 1]))
        .collect();
    assert_eq!(answers[1].part, 1);
    assert_eq!(answers[1].aggregate.count, n as u64);
    assert_eq!(answers[1].quantiles, expected);
    drop(snapshot);
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn partitioned_index_matches_reference_per_part() {
    // Latency-like values split by a "syscall number" in 0..6, with some
    // numbers outside the partition's count (they share the last part).
    let dir = temp_dir("partitioned");
    let config = Config {
        block_size: 4096,
        blocks_per_segment: 4,
        group_chunks: 5,
        ..Config::default()
    };
    let mut store = Store::open(&dir, &config).unwrap();
    let (value, nr) = (
        Field::new("v", 0, FieldKind::I64),
        Field::new("nr", 8, FieldKind::U32),
    );
    let source = store
        .define_source("s", vec![value.clone(), nr.clone()])
        .unwrap();
    let partition = weft_store::Partition {
        field: nr.clone(),
        count: 4,
    };
    // The same values unpartitioned: the sum of the partitioned index's
    // parts, which the writer adds up instead of reading the records.
    let bins = Bins::new(vec![10, 100, 1000]).unwrap();
    let plain = (store.define_index(source, "v", value.clone(), bins)).unwrap();
    let index = store
        .define_partitioned_index(
            source,
            "v_by_nr",
            value.clone(),
            Bins::new(vec![10, 100, 1000]).unwrap(),
            Some(partition),
        )
        .unwrap();
    let mut rng = Rng(77);
    let mut records = Vec::new();
    for ts in 0..20_000u64 {
        let v = rng.below(5000) as i64;
        let n = rng.below(6) as u32;
        let mut payload = v.to_le_bytes().to_vec();
        payload.extend_from_slice(&n.to_le_bytes());
        store.append_at(source, ts, None, &payload).unwrap();
        records.push((ts, v, n));
        if ts == 7_777 {
            // A source defined mid-chunk keeps the chunk's totals intact.
            store.define_source("late", vec![]).unwrap();
        }
    }
    store.publish();
    let snapshot = store.snapshot();
    let part_of = |n: u32| if n < 4 { n } else { 4 };
    let check_windows = |snapshot: &Snapshot| {
        let mut rng = Rng(5);
        for _ in 0..30 {
            let a = rng.below(20_000);
            let window = a..=a + rng.below(8000);
            for part in [None, Some(0), Some(3), Some(4)] {
                let values: Vec<i64> = records
                    .iter()
                    .filter(|(ts, _, n)| {
                        window.contains(ts) && part.is_none_or(|p| part_of(*n) == p)
                    })
                    .map(|(_, v, _)| *v)
                    .collect();
                if part.is_none() {
                    check_part(snapshot, (source, plain, None), &window, values.clone());
                }
                check_part(snapshot, (source, index, part), &window, values);
            }
            check_parts(snapshot, (source, index), &window, &records, part_of);
        }
    };
    check_windows(&snapshot);
    assert!(
        snapshot
            .percentile_part(source, index, Some(5), 0..=u64::MAX, 0.5)
            .is_err(),
        "part 5 does not exist"
    );
    drop(snapshot);
    store.close().unwrap();
    // Reopened, the flushed chunks' values come from the values log.
    let (reopened, _) = weft_store::open_read_only(&dir).unwrap();
    let (answers, stats) = reopened
        .aggregate_parts(source, index, 0..=u64::MAX, &[0.5, 0.99])
        .unwrap();
    assert_eq!(answers.len(), 5);
    assert_eq!(stats.chunks_read_for_bins, 0, "{stats:?}");
    assert!(stats.chunks_in_groups > 0, "whole groups of 5: {stats:?}");
    assert_eq!(
        stats.chunks_valued_for_bins, stats.chunks_summarized,
        "{stats:?}"
    );
    check_windows(&reopened);
    let (agg, _) = reopened
        .aggregate_part(source, index, Some(2), 0..=u64::MAX, i64::MIN..=i64::MAX)
        .unwrap();
    assert_eq!(
        agg.count,
        records.iter().filter(|r| r.2 == 2).count() as u64
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_index_summed_from_parts_writes_the_bytes_it_would_accumulate() {
    // Two stores take the same records and indexes: values in bins, and
    // the same values partitioned. In the first the partitioned index reads
    // the same field, so the writer adds the plain index up from its parts;
    // in the second it reads a field of another name at the same place, so
    // the plain index takes each record itself. Their logs are the same.
    let config = Config {
        block_size: 4096,
        blocks_per_segment: 4,
        group_chunks: 5,
        ..Config::default()
    };
    let bins = || Bins::new(vec![10, 11, 100, 1000, 1 << 40]).unwrap();
    let mut dirs = Vec::new();
    for (name, partitioned) in [("summed", "v"), ("accumulated", "w")] {
        let dir = temp_dir(name);
        let mut store = Store::open(&dir, &config).unwrap();
        let (value, nr) = (
            Field::new("v", 0, FieldKind::I64),
            Field::new("nr", 8, FieldKind::U32),
        );
        let other = Field::new(partitioned, 0, FieldKind::I64);
        let source =
            (store.define_source("s", vec![value.clone(), nr.clone(), other.clone()])).unwrap();
        store.define_index(source, "v", value, bins()).unwrap();
        let partition = weft_store::Partition {
            field: nr,
            count: 4,
        };
        (store.define_partitioned_index(source, "by", other, bins(), Some(partition))).unwrap();
        let mut rng = Rng(91);
        for ts in 0..30_000u64 {
            // Runs of one value, values one bin wide, wide and huge ones.
            let v = match rng.below(5) {
                0 => 10,
                1 => rng.below(2000) as i64,
                2 => (ts / 7) as i64 % 50,
                3 => 1 << 41,
                _ => rng.below(3) as i64 - 1,
            };
            let mut payload = v.to_le_bytes().to_vec();
            payload.extend_from_slice(&(rng.below(6) as u32).to_le_bytes());
            store.append_at(source, ts, None, &payload).unwrap();
        }
        store.close().unwrap();
        dirs.push(dir);
    }
    for log in ["chunks.log", "time.log", "values.log", "groups.log"] {
        let [a, b] = [&dirs[0], &dirs[1]].map(|dir| std::fs::read(dir.join(log)).unwrap());
        assert!(a.len() > 64, "{log}: {} bytes", a.len());
        assert!(a == b, "{log} differs: {} and {} bytes", a.len(), b.len());
    }
    for dir in dirs {
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// Checks every part's aggregate and quantiles at once against the
/// reference's records `(ts, value, partition value)`.
fn check_parts(
    snapshot: &Snapshot,
    (source, index): (SourceId, IndexId),
    window: &RangeInclusive<u64>,
    records: &[(u64, i64, u32)],
    part_of: impl Fn(u32) -> u32,
) {
    let qs = [0.0, 0.5, 0.99, 1.0];
    let (answers, _) = snapshot
        .aggregate_parts(source, index, window.clone(), &qs)
        .unwrap();
    let mut expected = std::collections::BTreeMap::<u32, Vec<i64>>::new();
    for (ts, v, n) in records {
        if window.contains(ts) {
            expected.entry(part_of(*n)).or_default().push(*v);
        }
    }
    let parts: Vec<u32> = answers.iter().map(|a| a.part).collect();
    assert_eq!(
        parts,
        expected.keys().copied().collect::<Vec<_>>(),
        "{window:?}"
    );
    for (answer, (_, mut values)) in answers.into_iter().zip(expected) {
        values.sort_unstable();
        let n = values.len();
        assert_eq!(answer.aggregate.count, n as u64);
        assert_eq!(
            answer.aggregate.sum,
            values.iter().map(|v| i128::from(*v)).sum::<i128>()
        );
        assert_eq!(answer.aggregate.min, values.first().copied());
        assert_eq!(answer.aggregate.max, values.last().copied());
        let quantiles: Vec<Option<i64>> = qs
            .iter()
            .map(|q| Some(values[((q * n as f64).ceil() as usize).clamp(1, n) - 1]))
            .collect();
        assert_eq!(
            answer.quantiles, quantiles,
            "part {} {window:?}",
            answer.part
        );
    }
}

/// Checks aggregates, a ranged aggregate, an indexed scan and percentiles
/// of one part (or all) against `values`, the reference's.
fn check_part(
    snapshot: &Snapshot,
    (source, index, part): (SourceId, IndexId, Option<u32>),
    window: &RangeInclusive<u64>,
    mut values: Vec<i64>,
) {
    let all = i64::MIN..=i64::MAX;
    let (agg, _) = snapshot
        .aggregate_part(source, index, part, window.clone(), all)
        .unwrap();
    assert_eq!(agg.count, values.len() as u64, "{part:?} {window:?}");
    assert_eq!(agg.max, values.iter().copied().max());
    let range = 500..=900;
    // Only values in a range: bins straddling its bounds are read.
    let (agg, _) = snapshot
        .aggregate_part(source, index, part, window.clone(), range.clone())
        .unwrap();
    let inside: Vec<i64> = values
        .iter()
        .copied()
        .filter(|v| range.contains(v))
        .collect();
    assert_eq!(
        agg.count,
        inside.len() as u64,
        "{part:?} {window:?} in range"
    );
    assert_eq!(agg.sum, inside.iter().map(|v| i128::from(*v)).sum::<i128>());
    assert_eq!(agg.min, inside.iter().copied().min());
    let mut scanned = 0;
    snapshot
        .indexed_scan_part_each(source, index, part, window.clone(), range.clone(), |_| {
            scanned += 1;
        })
        .unwrap();
    assert_eq!(scanned, values.iter().filter(|v| range.contains(v)).count());
    values.sort_unstable();
    for q in [0.5, 0.99, 1.0] {
        let (got, _) = snapshot
            .percentile_part(source, index, part, window.clone(), q)
            .unwrap();
        let expected = (!values.is_empty()).then(|| {
            let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
            values[rank - 1]
        });
        assert_eq!(got, expected, "p{q} part {part:?} window {window:?}");
    }
}

#[test]
fn percentiles_asked_again_reuse_sealed_chunks_and_stay_exact_as_the_store_grows() {
    // The UI asks the same percentiles every second while records arrive:
    // the second time, sealed chunks' bins come from the cache, and the
    // active chunk (which keeps growing) is read again each time.
    let dir = temp_dir("cached-bins");
    let config = Config {
        block_size: 4096,
        ..Config::default()
    };
    let mut store = Store::open(&dir, &config).unwrap();
    let field = Field::new("v", 0, FieldKind::I64);
    let source = store.define_source("s", vec![field.clone()]).unwrap();
    let bins = Bins::new(vec![100, 200, 400, 800]).unwrap();
    let index = store.define_index(source, "v", field, bins).unwrap();
    let mut rng = Rng(7);
    let mut values: Vec<(u64, i64)> = Vec::new();
    let mut cached = 0;
    for round in 0..40u64 {
        for _ in 0..97 {
            let ts = values.len() as u64;
            let v = rng.below(1000) as i64;
            store.append_at(source, ts, None, &v.to_le_bytes()).unwrap();
            values.push((ts, v));
        }
        store.publish();
        let snapshot = store.snapshot();
        let from = round * 97 / 2;
        for window in [0..=u64::MAX, from..=u64::MAX] {
            let mut want: Vec<i64> = values
                .iter()
                .filter(|(ts, _)| window.contains(ts))
                .map(|(_, v)| *v)
                .collect();
            want.sort_unstable();
            for q in [0.5, 0.99] {
                let rank = ((q * want.len() as f64).ceil() as usize).clamp(1, want.len());
                let (got, stats) = snapshot
                    .percentile(source, index, window.clone(), q)
                    .unwrap();
                assert_eq!(got, Some(want[rank - 1]), "round {round} q {q} {window:?}");
                cached += stats.chunks_cached_for_bins;
            }
        }
    }
    assert!(
        cached > 100,
        "sealed chunks came from the cache {cached} times"
    );
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Aggregates by key (a thread's id, or what it maps to) equal the
/// reference's per group, live and reopened, over windows that cut chunks
/// and group runs: runs of one key make whole chunks (and group runs) of
/// it, counted from their summaries; a few keys interleaved make chunks
/// that mix them, read.
#[test]
fn aggregates_by_key_match_reference_per_group() {
    by_key_model("by-key", None);
}

/// As above, with the values log keeping the values apart per key from
/// the 20th run of a key on (`Store::split_values`): the chunks that mix
/// keys after it are counted from their values-log entries, not read; the
/// ones before it still are.
#[test]
fn aggregates_by_key_from_values_split_per_key_match_reference() {
    by_key_model("by-key-split", Some(8));
}

/// Runs of one key and stretches where three interleave, 4 KiB chunks in
/// groups of 3: every group's aggregate and quantiles checked against the
/// records, live and reopened, the key splitting the values log's values
/// from run `split_from` on.
fn by_key_model(name: &str, split_from: Option<u32>) {
    let dir = temp_dir(name);
    let config = Config {
        block_size: 4096,
        blocks_per_segment: 4,
        group_chunks: 3,
        ..Config::default()
    };
    let mut store = Store::open(&dir, &config).unwrap();
    let (source, index, keys) = define_keyed(&mut store, vec![100, 200, 400, 800]);
    let records = append_runs_of_keys(&mut store, source, |store, run| {
        if split_from == Some(run) {
            store.split_values(keys, index).unwrap();
        }
    });
    store.publish();
    let last = records.len() as u64 - 1;
    let windows = [0..=u64::MAX, 1000..=20_000, last - 500..=last, 5..=6];
    let check_all = |snapshot: &Snapshot| {
        for window in &windows {
            check_keys(snapshot, (source, index, keys), window, &records, |k| {
                Some(i64::from(k))
            });
            // Keys 7 and 9 stand for one group (a process of two threads).
            check_keys(snapshot, (source, index, keys), window, &records, |k| {
                Some(i64::from(if k == 9 { 7 } else { k }))
            });
        }
        // A key without a group leaves the question to a scan.
        let (answer, _) = snapshot
            .aggregate_by_key(
                (source, index, keys),
                &|k| (k != 8).then_some(k),
                0..=u64::MAX,
                &[0.5],
            )
            .unwrap();
        assert_eq!(answer, None);
    };
    // Keys 7, 8 and 9 for one group (three threads of a process): the
    // chunks that interleave them are that group's alone, by their
    // values-log entries, and are not read once sealed.
    let one_process = |k: i64| Some(k.min(7));
    check_all(&store.snapshot());
    let (_, stats) = store
        .snapshot()
        .aggregate_by_key((source, index, keys), &Some, 0..=u64::MAX, &[0.99])
        .unwrap();
    // Both ways are taken: chunks and group runs of one key from their
    // summaries, the rest read.
    assert!(
        stats.chunks_summarized > 50 && stats.chunks_scanned > 10,
        "{stats:?}"
    );
    assert!(stats.chunks_in_groups > 0, "{stats:?}");
    store.close().unwrap();
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    check_all(&snapshot);
    check_keys(
        &snapshot,
        (source, index, keys),
        &(0..=u64::MAX),
        &records,
        |k| one_process(i64::from(k)),
    );
    let scanned = |group: &(dyn Fn(i64) -> Option<i64> + Sync)| {
        let asked = (source, index, keys);
        let (_, stats) = (snapshot.aggregate_by_key(asked, group, 0..=u64::MAX, &[0.99])).unwrap();
        stats.chunks_scanned
    };
    let (apart, together) = (scanned(&Some), scanned(&one_process));
    if split_from.is_some() {
        // Only the chunks before the split that mix keys are read.
        assert!(apart > 5 && apart < 30, "{apart}");
        assert!(together < apart, "{together} of {apart}");
    } else {
        // Only the chunks where one run of a key meets the next are read then.
        assert!(together + 50 < apart, "{together} of {apart}");
    }
    drop(snapshot);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Defines a source of records `(value: i64, key: u32)`, an index over
/// the values with bounds `bounds` and one wide bin over the keys: the
/// source, the value index and the key index.
fn define_keyed(store: &mut Store, bounds: Vec<i64>) -> (SourceId, IndexId, IndexId) {
    let value = Field::new("v", 0, FieldKind::I64);
    let key = Field::new("k", 8, FieldKind::U32);
    let source = store
        .define_source("s", vec![value.clone(), key.clone()])
        .unwrap();
    let index = store
        .define_index(source, "v", value, Bins::new(bounds).unwrap())
        .unwrap();
    let keys = store
        .define_index(source, "k", key, Bins::new(vec![0, 1 << 36]).unwrap())
        .unwrap();
    (source, index, keys)
}

/// Appends 60 runs of records `(value, key)` to `source`, a time apart:
/// long runs of one key, then stretches where three interleave; calls
/// `before` ahead of each run. Returns them as `(ts, value, key)`.
fn append_runs_of_keys(
    store: &mut Store,
    source: SourceId,
    mut before: impl FnMut(&mut Store, u32),
) -> Vec<(u64, i64, u32)> {
    let mut rng = Rng(11);
    let mut records = Vec::new();
    let mut ts = 0u64;
    for run in 0..60u32 {
        before(store, run);
        let (len, mixed) = if run % 4 == 3 {
            (1500, true)
        } else {
            (900, false)
        };
        for i in 0..len {
            let k = if mixed { 7 + i % 3 } else { run % 5 };
            let v = (rng.below(1000) as i64) - 50 + i64::from(k) * 10;
            // Extremes too, whose sums and spreads overflow an i64.
            let v = match (mixed, i % 700) {
                (true, 1 | 2) => i64::MAX,
                (true, 3) => i64::MIN,
                _ => v,
            };
            let mut payload = v.to_le_bytes().to_vec();
            payload.extend_from_slice(&k.to_le_bytes());
            store.append_at(source, ts, None, &payload).unwrap();
            records.push((ts, v, k));
            ts += 1;
        }
    }
    records
}

/// Checks every group's aggregate and quantiles against the reference's
/// records `(ts, value, key)`, each key's group by `group`.
fn check_keys(
    snapshot: &Snapshot,
    indexes: (SourceId, IndexId, IndexId),
    window: &RangeInclusive<u64>,
    records: &[(u64, i64, u32)],
    group: impl Fn(u32) -> Option<i64> + Sync,
) {
    let qs = [0.0, 0.5, 0.99, 1.0];
    let by = |k: i64| group(u32::try_from(k).ok()?);
    let (answers, _) = snapshot
        .aggregate_by_key(indexes, &by, window.clone(), &qs)
        .unwrap();
    let answers = answers.expect("every key has a group");
    let mut expected = std::collections::BTreeMap::<i64, Vec<i64>>::new();
    for (ts, v, k) in records {
        if window.contains(ts) {
            expected.entry(group(*k).unwrap()).or_default().push(*v);
        }
    }
    let keys: Vec<i64> = answers.iter().map(|a| a.key).collect();
    assert_eq!(
        keys,
        expected.keys().copied().collect::<Vec<_>>(),
        "{window:?}"
    );
    for (answer, (key, mut values)) in answers.into_iter().zip(expected) {
        values.sort_unstable();
        let n = values.len();
        assert_eq!(answer.aggregate.count, n as u64, "{key} {window:?}");
        assert_eq!(
            answer.aggregate.sum,
            values.iter().map(|v| i128::from(*v)).sum::<i128>()
        );
        assert_eq!(answer.aggregate.min, values.first().copied());
        assert_eq!(answer.aggregate.max, values.last().copied());
        let quantiles: Vec<Option<i64>> = qs
            .iter()
            .map(|q| Some(values[((q * n as f64).ceil() as usize).clamp(1, n) - 1]))
            .collect();
        assert_eq!(answer.quantiles, quantiles, "key {key} {window:?}");
    }
}

/// A key with more values than a pass may hold groups for (each group is
/// its bin counts) leaves the question to the caller, however the records
/// interleave, rather than growing with them.
#[test]
fn aggregates_by_a_key_of_too_many_values_are_refused() {
    let dir = temp_dir("by-key-many");
    let mut store = Store::open(&dir, &Config::default()).unwrap();
    let (source, index, keys) = define_keyed(&mut store, vec![100, 200]);
    for ts in 0..20_000u32 {
        let mut payload = i64::from(ts % 300).to_le_bytes().to_vec();
        payload.extend_from_slice(&ts.to_le_bytes());
        store
            .append_at(source, u64::from(ts), None, &payload)
            .unwrap();
    }
    store.publish();
    let (answer, stats) = store
        .snapshot()
        .aggregate_by_key((source, index, keys), &Some, 0..=u64::MAX, &[0.5])
        .unwrap();
    assert_eq!(answer, None, "{stats:?}");
    // Fewer values, one group each: answered.
    let (answer, _) = store
        .snapshot()
        .aggregate_by_key(
            (source, index, keys),
            &|k| Some(k % 100),
            0..=u64::MAX,
            &[0.5],
        )
        .unwrap();
    assert_eq!(answer.map(|a| a.len()), Some(100));
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
