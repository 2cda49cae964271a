// Shared by `fixture.rs` (which checks the fixtures in) and `fuzz.rs`
// (which damages a fresh one), through `include!`.

/// The fixtures' layout: small chunks, segments and runs, so that a few
/// thousand records span several of each.
fn small() -> Config {
    Config {
        block_size: 4096,
        blocks_per_segment: 4,
        group_chunks: 4,
        ..Config::default()
    }
}

/// Writes the fixtures' capture at `dir` in the current format, closed:
/// 2,000 requests with a latency index and 200 packets, over small chunks.
fn write_fixture(dir: &Path) {
    let mut store = Store::open(dir, &small()).unwrap();
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
