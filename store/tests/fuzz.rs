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
