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
        "v2",
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
        "v3",
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

fn fixture_dir(version: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{version}"))
}

/// 400 rounds over a copy of fixture `version`: its `file` with one to
/// four random bits flipped (after its header), the checksums mended by
/// `reseal` in even rounds; `check` then opens the copy.
fn damage_rounds(
    version: &str,
    file: &str,
    seed: u64,
    reseal: fn(&mut [u8]),
    mut check: impl FnMut(&std::path::Path, u32),
) {
    let dir = std::env::temp_dir().join(format!(
        "weft-fuzz-{}-{}",
        file.trim_end_matches(".log"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture_dir(version)).unwrap() {
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
