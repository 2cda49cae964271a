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
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2");
    let dir = std::env::temp_dir().join(format!("weft-fuzz-values-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    let pristine = std::fs::read(dir.join("values.log")).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
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
            reseal_values(&mut bytes);
        }
        std::fs::write(dir.join("values.log"), &bytes).unwrap();
        let Ok((snapshot, _)) = weft_store::open_read_only(&dir) else {
            continue;
        };
        for q in [0.0, 0.5, 0.99, 1.0] {
            let _ = snapshot.percentile(0, 1, 0..=u64::MAX, q);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
