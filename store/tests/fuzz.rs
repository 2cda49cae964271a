//! Every input the `store_reader` fuzz target ever crashed on, replayed: each
//! was a panic on corrupt capture files and must now give an error instead.

#![expect(clippy::missing_panics_doc, reason = "test helper")]

include!("common/fuzz_input.rs");

#[test]
fn store_reader_regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut replayed = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("store_reader-"))
        {
            store_reader(&std::fs::read(&path).unwrap());
            replayed += 1;
        }
    }
    assert!(replayed > 0, "no regression inputs found");
}

/// The values log of the format-2 fixture with bytes changed at random
/// (its checksums mended half the time, so the decoding behind them is
/// reached): every query answers or errs; none panics.
#[test]
fn a_damaged_values_log_never_panics() {
    damage_rounds(
        &fixture_dir("v2"),
        "values.log",
        0x9e37_79b9_7f4a_7c15,
        reseal_values,
        |dir, _| {
            let Ok((snapshot, _)) = weft_store::open_read_only(dir) else {
                return;
            };
            for q in [0.0, 0.5, 0.99, 1.0] {
                let _ = snapshot.percentile(0, 1, 0..=u64::MAX, q);
            }
        },
    );
}

/// The groups log of the format-3 fixture with bytes changed at random
/// (its checksums mended half the time): every query answers or errs, and
/// none panics. With checksums intact a damaged group is refused, and the
/// answers stay those of the chunks.
/// Values split per key (threads interleaving): damage to their sections
/// never panics, and an entry whose checksum no longer holds gives an error
/// or the intact answer, never another.
#[test]
fn a_damaged_split_values_log_never_panics_nor_misanswers() {
    let from = std::env::temp_dir().join(format!("weft-fuzz-split-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&from);
    let mut store = Store::open(&from, &small()).unwrap();
    let (value, key) = (
        Field::new("v", 0, FieldKind::I64),
        Field::new("k", 8, FieldKind::U32),
    );
    let source = store
        .define_source("s", vec![value.clone(), key.clone()])
        .unwrap();
    let bins = Bins::new(vec![100, 1_000, 10_000]).unwrap();
    let values = store.define_index(source, "v", value, bins).unwrap();
    let wide = Bins::new(vec![0, 1 << 36]).unwrap();
    let keys = store.define_index(source, "k", key, wide).unwrap();
    store.split_values(keys, values).unwrap();
    for i in 0..3_000u32 {
        let mut payload = (i64::from(i) * 37 % 20_000 - 500).to_le_bytes().to_vec();
        payload.extend_from_slice(&(i % 3).to_le_bytes());
        store
            .append_at(source, u64::from(i), None, &payload)
            .unwrap();
    }
    store.close().unwrap();
    let answers = |dir: &Path| {
        let (snapshot, _) = weft_store::open_read_only(dir)?;
        let asked = (source, values, keys);
        let (by_key, _) = snapshot.aggregate_by_key(asked, &Some, 0..=u64::MAX, &[0.5, 0.99])?;
        Ok::<_, weft_store::Error>(by_key)
    };
    let pristine = answers(&from).unwrap();
    assert!(pristine.as_ref().is_some_and(|groups| groups.len() == 3));
    damage_rounds(
        &from,
        "values.log",
        0xbb67_ae85_84ca_a73b,
        reseal_values,
        |dir, round| {
            let got = answers(dir);
            if round % 2 == 1
                && let Ok(got) = got
            {
                assert_eq!(got, pristine, "round {round}");
            }
        },
    );
    std::fs::remove_dir_all(&from).unwrap();
}

#[test]
fn a_damaged_groups_log_never_panics() {
    let answers = |dir: &std::path::Path| {
        let (snapshot, _) = weft_store::open_read_only(dir)?;
        let (agg, _) = snapshot.aggregate(0, 1, 0..=u64::MAX)?;
        let (p99, _) = snapshot.percentile(0, 1, 0..=u64::MAX, 0.99)?;
        let (every, _) = snapshot.count_every(1, 0..=u64::MAX, 1_000, 0)?;
        Ok::<_, weft_store::Error>((agg, p99, every))
    };
    let mut pristine = None;
    damage_rounds(
        &fixture_dir("v3"),
        "groups.log",
        0x2545_f491_4f6c_dd1d,
        reseal_groups,
        |dir, round| {
            let got = answers(dir);
            let pristine = pristine.get_or_insert_with(|| {
                let fixture = fixture_dir("v3");
                answers(&fixture).unwrap()
            });
            if round % 2 == 1 {
                // Damage the checksums catch: refused, or the chunks answer.
                if let Ok(got) = got {
                    assert_eq!(&got, pristine, "round {round}");
                }
            }
        },
    );
}

/// The rollups log of a ring's capture (groups-log entries) with bytes
/// changed at random (their checksums mended half the time): every query
/// answers or errs, none panics, and a writer that reopens the capture
/// goes on recording and rolling up what it deletes.
#[test]
fn a_damaged_rollups_log_never_panics_nor_stops_a_recording() {
    let config = Config {
        blocks_per_segment: 2,
        retain: Some(2_000),
        retain_summaries: Some(u64::MAX / 4),
        ..small()
    };
    let write = |dir: &Path, from: u64| -> weft_store::Result<()> {
        let mut store = Store::open(dir, &config)?;
        let field = Field::new("latency_ns", 0, FieldKind::U64);
        let source = store.define_source("requests", vec![field.clone()])?;
        let bins = Bins::new(vec![100, 1_000])?;
        store.define_index(source, "latency", field, bins)?;
        for i in from..from + 3_000 {
            store.append_at(source, i, None, &(i % 2_000).to_le_bytes())?;
        }
        store.close()
    };
    let from = std::env::temp_dir().join(format!("weft-fuzz-ring-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&from);
    write(&from, 0).unwrap();
    assert!(std::fs::metadata(from.join("rollups.log")).unwrap().len() > 16 + 36);
    damage_rounds(
        &from,
        "rollups.log",
        0x6a09_e667_f3bc_c908,
        reseal_groups,
        |dir, round| {
            if let Ok((snapshot, _)) = weft_store::open_read_only(dir) {
                let _ = snapshot.aggregate(0, 1, 0..=u64::MAX);
                let _ = snapshot.percentile(0, 1, 0..=u64::MAX, 0.99);
                let _ = snapshot.count_every(0, 0..=u64::MAX, 500, 0);
                let _ = snapshot.aggregate_parts(0, 1, 0..=u64::MAX, &[0.5]);
            }
            if round % 20 == 0 {
                let records = 3_000 * (u64::from(round) / 20 + 1);
                write(dir, records).unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
        },
    );
    std::fs::remove_dir_all(&from).unwrap();
}

fn fixture_dir(version: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{version}"))
}

/// 400 rounds over a copy of the capture at `from`: its `file` with one to
/// four random bits flipped (after its header), the checksums mended by
/// `reseal` in even rounds; `check` then opens the copy.
fn damage_rounds(
    from: &Path,
    file: &str,
    seed: u64,
    reseal: fn(&mut [u8]),
    mut check: impl FnMut(&std::path::Path, u32),
) {
    // Named by the seed too: two tests damage a values log at once, and
    // one removing the other's copy failed it now and then.
    let dir = std::env::temp_dir().join(format!(
        "weft-fuzz-{}-{seed:x}-{}",
        file.trim_end_matches(".log"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    let pristine = std::fs::read(dir.join(file)).unwrap();
    let mut state = seed;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..400 {
        let mut bytes = pristine.clone();
        for _ in 0..=next() % 4 {
            let at = 16 + (next() as usize) % (bytes.len() - 16);
            bytes[at] ^= 1 << (next() % 8);
        }
        if round % 2 == 0 {
            reseal(&mut bytes);
        }
        std::fs::write(dir.join(file), &bytes).unwrap();
        check(&dir, round);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Recomputes the checksum of every group header and summary in a groups
/// log, so that damage reaches the decoding behind them.
fn reseal_groups(file: &mut [u8]) {
    const HEAD: usize = 36;
    const SUMMARY: usize = 84;
    let mut at = 16;
    while at + HEAD <= file.len() {
        let crc = crc32fast::hash(&file[at..at + HEAD - 4]);
        file[at + HEAD - 4..at + HEAD].copy_from_slice(&crc.to_le_bytes());
        let n = u32::from_le_bytes(file[at + 12..at + 16].try_into().unwrap()) as usize;
        at += HEAD;
        for _ in 0..n {
            let Some(summary) = file.get_mut(at..at + SUMMARY) else {
                return;
            };
            let crc = crc32fast::hash(&summary[..SUMMARY - 4]);
            summary[SUMMARY - 4..].copy_from_slice(&crc.to_le_bytes());
            at += SUMMARY;
        }
    }
}

include!("common/write_fixture.rs");

use std::path::Path;

use weft_store::{Bins, Config, Field, FieldKind, Store};

/// Every question the fuzz loop asks of a snapshot, as comparable text;
/// `None` where one failed, or where an answer leaves out deleted chunks.
fn every_answer(snapshot: &weft_store::Snapshot) -> Vec<Option<String>> {
    let all = 0..=u64::MAX;
    let answers = [
        snapshot.records().map(|n| format!("{n}")),
        (snapshot.raw_scan(0, all.clone()))
            .map(|(r, s)| format!("{} {}", r.len(), s.chunks_expired)),
        (snapshot.raw_scan(1, 10..=9_000)).map(|(r, s)| format!("{:?} {}", r, s.chunks_expired)),
        (snapshot.indexed_scan(0, 1, all.clone(), 50..=5_000))
            .map(|(r, s)| format!("{:?} {}", r, s.chunks_expired)),
        (snapshot.aggregate(0, 1, 5..=u64::MAX))
            .map(|(a, s)| format!("{a:?} {}", s.chunks_expired)),
        (snapshot.aggregate_parts(0, 1, all.clone(), &[0.5, 0.99]))
            .map(|(p, s)| format!("{p:?} {}", s.chunks_expired)),
        // Keyed by the index's own values: its chunks of one value are
        // counted from summaries and values log, the rest read.
        (snapshot.aggregate_by_key((0, 1, 1), &|v| Some(v / 100), all.clone(), &[0.5]))
            .map(|(k, s)| format!("{k:?} {}", s.chunks_expired)),
        (snapshot.count_every(1, all.clone(), 1_000, 0))
            .map(|(c, s)| format!("{c:?} {}", s.chunks_expired)),
        (snapshot.bucket_counts(0, 1, None, all.clone(), &[500, 5_000]))
            .map(|(c, s)| format!("{c:?} {}", s.chunks_expired)),
        (snapshot.top_bound(0, 1, all.clone(), 10))
            .map(|(b, s)| format!("{b:?} {}", s.chunks_expired)),
        (snapshot.percentile(0, 1, all.clone(), 0.0))
            .map(|(p, s)| format!("{p:?} {}", s.chunks_expired)),
        (snapshot.percentile(0, 1, all.clone(), 0.9999))
            .map(|(p, s)| format!("{p:?} {}", s.chunks_expired)),
        (snapshot.percentile(0, 1, all, 1.0)).map(|(p, s)| format!("{p:?} {}", s.chunks_expired)),
    ];
    answers
        .into_iter()
        .map(|a| {
            a.ok()
                .filter(|text| text.ends_with(" 0") || !text.contains(' '))
        })
        .collect()
}

/// Whether a `meta` file is of version 2, which ends with its checksum.
fn has_checksum(meta: &Path) -> bool {
    std::fs::read_to_string(meta).is_ok_and(|t| t.starts_with("weft-store meta 2"))
}

/// A xorshift generator: the loop's seed is printed, so a failure repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One random fault on `bytes`, described.
fn mutate(bytes: &mut Vec<u8>, rng: &mut Rng) -> String {
    let len = bytes.len();
    match rng.below(7) {
        0 if len > 0 => {
            let at = rng.below(len);
            bytes[at] ^= 1 << rng.below(8);
            format!("bit flipped at {at}")
        }
        1 if len > 0 => {
            let at = rng.below(len);
            let n = (1 + rng.below(64)).min(len - at);
            let value = rng.next() as u8;
            bytes[at..at + n].fill(value);
            format!("{n} bytes set to {value} at {at}")
        }
        2 => {
            let at = rng.below(len + 1);
            bytes.truncate(at);
            format!("cut at {at}")
        }
        3 => {
            let n = 1 + rng.below(200);
            bytes.extend((0..n).map(|_| rng.next() as u8));
            format!("{n} bytes appended")
        }
        4 if len > 0 => {
            // A piece copied over another place, as a bad copy might.
            let (from, to) = (rng.below(len), rng.below(len));
            let n = (1 + rng.below(512)).min(len - from).min(len - to);
            bytes.copy_within(from..from + n, to);
            format!("{n} bytes from {from} copied to {to}")
        }
        5 if len > 0 => {
            let page = rng.below(len.div_ceil(4096)) * 4096;
            let end = (page + 4096).min(len);
            bytes[page..end].fill(0);
            format!("page at {page} zeroed")
        }
        _ => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(64);
            bytes.splice(at..at, (0..n).map(|_| rng.next() as u8));
            format!("{n} bytes inserted at {at}")
        }
    }
}

/// Mends every checksum of the file `name` (its format `version`), so that
/// damage reaches the decoding behind them.
fn reseal(name: &str, version: u8, bytes: &mut [u8]) {
    if bytes.len() < 16 {
        return;
    }
    match name {
        "time.log" => reseal_entries(bytes, if version == 1 { 44 } else { 56 }),
        "chunks.log" => reseal_entries(bytes, 84),
        "values.log" => reseal_values(bytes),
        "groups.log" => reseal_groups(bytes),
        "meta" => {
            let text = String::from_utf8_lossy(bytes).into_owned();
            if let Some((body, _)) = text.trim_end().rsplit_once('\n') {
                let body = format!("{body}\n");
                let line = format!("crc {:08x}\n", crc32fast::hash(body.as_bytes()));
                let mended = format!("{body}{line}");
                if mended.len() == bytes.len() {
                    bytes.copy_from_slice(mended.as_bytes());
                }
            }
        }
        _ if name.starts_with("records-") => {
            for block in bytes.get_mut(16..).unwrap_or_default().chunks_mut(4096) {
                if block.len() == 4096 {
                    let crc = crc32fast::hash(&block[4..]);
                    block[..4].copy_from_slice(&crc.to_le_bytes());
                }
            }
        }
        _ => {}
    }
}

/// A closed ring: the fixture's sources, records enough for the budget to
/// delete most segments and free their entries in the index logs.
fn write_ring(dir: &std::path::Path) {
    let config = Config {
        disk_budget: Some(96 << 10),
        ..small()
    };
    let mut store = Store::open(dir, &config).unwrap();
    let field = Field::new("latency_ns", 0, FieldKind::U64);
    let requests = store
        .define_source("requests", vec![field.clone()])
        .unwrap();
    store
        .define_source("packets", vec![Field::new("len", 0, FieldKind::U32)])
        .unwrap();
    let bins = Bins::new(vec![100, 1_000, 10_000]).unwrap();
    store
        .define_index(requests, "latency", field, bins)
        .unwrap();
    for i in 0u64..20_000 {
        store
            .append_at(requests, i * 10, None, &(i * 7 % 20_000).to_le_bytes())
            .unwrap();
    }
    store.close().unwrap();
    assert!(
        !weft_store::open_read_only(dir)
            .unwrap()
            .1
            .deleted_segments
            .is_empty()
    );
}

/// The fuzz target's idea without libFuzzer (which needs a nightly
/// toolchain), for a time budget: the fixtures of every format and a
/// fresh closed capture, each round one to three random faults in random
/// files, checksums mended in half the rounds. Opening, every query,
/// `--skip-damaged`'s opening and queries, and `check` must never panic;
/// where no checksum was mended and nothing was cut or deleted, every
/// answer given is the undamaged one. `WEFT_FUZZ_SECONDS` sets the budget
/// (default 10; `cargo xtask test` gives 60; longer on demand), and
/// `WEFT_FUZZ_SEED` repeats a run. Among the captures damaged is a ring
/// whose budget deleted its oldest segments and freed their index entries.
#[test]
fn damaged_captures_for_a_time_budget() {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    let budget = std::time::Duration::from_secs(env("WEFT_FUZZ_SECONDS").unwrap_or(10));
    let seed = env("WEFT_FUZZ_SEED").unwrap_or_else(|| {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
        now.map_or(1, |d| d.as_nanos() as u64) | 1
    });
    eprintln!("fuzzing damaged captures for {budget:?}, WEFT_FUZZ_SEED={seed}");
    let base = std::env::temp_dir().join(format!("weft-fuzz-budget-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let fresh = base.join("fresh");
    write_fixture(&fresh);
    let budgeted = base.join("ring");
    write_ring(&budgeted);
    let seeds: Vec<(std::path::PathBuf, u8)> = vec![
        (fixture_dir("v1"), 1),
        (fixture_dir("v2"), 2),
        (fixture_dir("v3"), 3),
        (fixture_dir("v4"), 4),
        (fresh, 4),
        (budgeted, 4),
    ];
    let pristine: Vec<Vec<Option<String>>> = (seeds.iter())
        .map(|(dir, _)| every_answer(&weft_store::open_read_only(dir).unwrap().0))
        .collect();
    let dir = base.join("damaged");
    let mut rng = Rng(seed);
    let start = std::time::Instant::now();
    let mut rounds = 0u64;
    while start.elapsed() < budget {
        let which = rng.below(seeds.len());
        let (from, version) = &seeds[which];
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut names = Vec::new();
        for entry in std::fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
            names.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
        names.sort();
        let mended = rng.below(2) == 0;
        let mut faults = Vec::new();
        let mut lossy = false;
        for _ in 0..=rng.below(3) {
            let name = &names[rng.below(names.len())];
            let path = dir.join(name);
            let Ok(mut bytes) = std::fs::read(&path) else {
                continue;
            };
            if rng.below(20) == 0 {
                std::fs::remove_file(&path).unwrap();
                faults.push(format!("{name} deleted"));
                lossy = true;
                continue;
            }
            let what = mutate(&mut bytes, &mut rng);
            lossy |= what.starts_with("cut");
            // A known gap: each summary carries its own checksum and chunk
            // number, but not its place among its chunk's (or group's)
            // summaries, so whole summaries copied over their neighbours
            // pass every check and can hide a key. Closing it needs a
            // checksum over each entry's summaries (a format change).
            lossy |=
                what.contains("copied") && matches!(name.as_str(), "chunks.log" | "groups.log");
            // Metas from before their checksum line cannot show damage.
            lossy |= name == "meta" && !has_checksum(&from.join("meta"));
            if mended {
                reseal(name, *version, &mut bytes);
            }
            std::fs::write(&path, &bytes).unwrap();
            faults.push(format!("{name}: {what}"));
        }
        let case = format!(
            "round {rounds}, {}: {faults:?}, mended: {mended}",
            from.display()
        );
        let answers = std::panic::catch_unwind(|| {
            let opened = weft_store::open_read_only(&dir);
            let answers = opened
                .as_ref()
                .ok()
                .map(|(s, r)| (every_answer(s), r.cut_chunks));
            if let Ok((snapshot, _, _)) = weft_store::open_skipping_damaged(&dir) {
                every_answer(&snapshot);
            }
            let _ = weft_store::check(&dir);
            answers
        })
        .unwrap_or_else(|_| panic!("{case}: panicked (WEFT_FUZZ_SEED={seed})"));
        if let Some((answers, 0)) = answers
            && !mended
            && !lossy
        {
            for (got, want) in answers.iter().zip(&pristine[which]) {
                if let (Some(got), Some(want)) = (got, want) {
                    assert_eq!(
                        got, want,
                        "{case}: a different answer (WEFT_FUZZ_SEED={seed})"
                    );
                }
            }
        }
        rounds += 1;
    }
    eprintln!("{rounds} rounds, none panicked or answered wrongly");
    std::fs::remove_dir_all(&base).unwrap();
}
