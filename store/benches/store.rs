//! `cargo xtask bench store`: ingest rate against a plain buffered file
//! append measured in the same run, then query latency over 60 s of a
//! 1 M records/s latency-like source and a 30x rarer one.
//!
//! Arguments: `[--quick] [--queries-only | --ingest-only] [--disk DIR] [--tmpfs DIR]`.
#![expect(
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "synthetic latencies move between f64, u64 and i64 on purpose"
)]

use std::{
    fs,
    io::Write as _,
    path::{Path, PathBuf},
    time::Instant,
};

use weft_store::{Bins, Config, Field, FieldKind, Store};

const SECOND: u64 = 1_000_000_000;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let arg = |name: &str, default: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, String::as_str)
            .to_owned()
    };
    let disk = PathBuf::from(arg("--disk", "target/bench-store"));
    let tmpfs = PathBuf::from(arg("--tmpfs", "/dev/shm/weft-bench-store"));
    if !args.iter().any(|a| a == "--queries-only") {
        ingest(
            &[("disk", disk.as_path()), ("tmpfs", tmpfs.as_path())],
            quick,
        );
    }
    if !args.iter().any(|a| a == "--ingest-only") {
        queries(&tmpfs, quick);
    }
    println!("peak RSS: {} MiB", peak_rss_kib() / 1024);
}

/// min, median, max of `samples`.
fn spread(mut samples: Vec<f64>) -> (f64, f64, f64) {
    samples.sort_by(f64::total_cmp);
    (
        samples[0],
        samples[samples.len() / 2],
        samples[samples.len() - 1],
    )
}

fn ingest(places: &[(&str, &Path)], quick: bool) {
    println!("ingest: records/s (M) and MB/s of payload, min/median/max of 3 runs");
    println!(
        "(both fsync their files at the end; +i: with a 190-bin value index; B/record: record-log bytes per record)"
    );
    println!(
        "{:<6} {:>6} {:>28} {:>28} {:>12} {:>10}",
        "where", "bytes", "weft-store M/s", "raw append M/s", "store/raw", "B/record"
    );
    for &(label, dir) in places {
        for (size, indexed) in [
            (8usize, false),
            (48, false),
            (48, true),
            (64, false),
            (256, false),
            (1024, false),
        ] {
            let budget: u64 = if quick { 64 << 20 } else { 512 << 20 };
            let n = (budget / size as u64).min(if quick { 2_000_000 } else { 10_000_000 });
            let payload = vec![0x5au8; size];
            let (mut store_rates, mut raw_rates, mut per_record) = (Vec::new(), Vec::new(), 0.0);
            for _ in 0..3 {
                let (rate, stored) = store_run(dir, &payload, n, indexed);
                store_rates.push(rate);
                per_record = stored as f64 / n as f64;
                raw_rates.push(raw_run(dir, &payload, n));
            }
            let (s, r) = (spread(store_rates), spread(raw_rates));
            println!(
                "{label:<6} {:>6} {:>8.2} {:>8.2} {:>8.2} ({:>5.0} MB/s) {:>6.2} {:>6.2} {:>6.2} ({:>5.0} MB/s) {:>10.2}x {:>10.1}",
                format!("{size}{}", if indexed { "+i" } else { "" }),
                s.0 / 1e6,
                s.1 / 1e6,
                s.2 / 1e6,
                s.1 * size as f64 / 1e6,
                r.0 / 1e6,
                r.1 / 1e6,
                r.2 / 1e6,
                r.1 * size as f64 / 1e6,
                s.1 / r.1,
                per_record,
            );
        }
        let _ = fs::remove_dir_all(dir);
    }
}

/// Appends `n` records (`indexed`: with a 190-bin index on the first 8
/// bytes) and closes the store; returns records/s and bytes stored.
fn store_run(dir: &Path, payload: &[u8], n: u64, indexed: bool) -> (f64, u64) {
    let _ = fs::remove_dir_all(dir);
    let start = Instant::now();
    let mut store = Store::open(dir, &Config::default()).unwrap();
    let field = Field::new("v", 0, FieldKind::U64);
    let source = store.define_source("bench", vec![field.clone()]).unwrap();
    if indexed {
        store
            .define_index(source, "v", field, latency_bins())
            .unwrap();
    }
    for i in 0..n {
        store.append_at(source, i, None, payload).unwrap();
    }
    store.close().unwrap();
    // Durable, like the baseline: on tmpfs this costs nothing.
    for entry in fs::read_dir(dir).unwrap() {
        fs::File::open(entry.unwrap().path())
            .unwrap()
            .sync_all()
            .unwrap();
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let stored: u64 = fs::read_dir(dir)
        .unwrap()
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("records-"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    (rate, stored)
}

/// The baseline: the same payloads appended to one file through a `BufWriter`.
fn raw_run(dir: &Path, payload: &[u8], n: u64) -> f64 {
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).unwrap();
    let start = Instant::now();
    let mut file =
        std::io::BufWriter::with_capacity(256 << 10, fs::File::create(dir.join("raw")).unwrap());
    for _ in 0..n {
        file.write_all(payload).unwrap();
    }
    file.into_inner().unwrap().sync_all().unwrap();
    n as f64 / start.elapsed().as_secs_f64()
}

include!("../tests/common/rng.rs");

impl Rng {
    /// Exponential-tailed latency around 20 µs, in ns.
    fn latency(&mut self) -> u64 {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        1_000 + (-(1.0 - u).ln() * 20_000.0) as u64
    }
}

fn time<T>(label: &str, runs: usize, mut f: impl FnMut() -> T) -> T {
    let mut samples = Vec::new();
    let mut out = None;
    for _ in 0..runs {
        let start = Instant::now();
        out = Some(f());
        samples.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let (min, median, max) = spread(samples);
    println!("  {label:<48} {min:>9.1} {median:>9.1} {max:>9.1} ms");
    out.unwrap()
}

fn queries(dir: &Path, quick: bool) {
    let _ = fs::remove_dir_all(dir);
    let seconds = if quick { 6 } else { 60 };
    let rate = 1_000_000u64;
    let mut store = Store::open(dir, &Config::default()).unwrap();
    let lat = Field::new("latency_ns", 0, FieldKind::U64);
    let requests = store.define_source("requests", vec![lat.clone()]).unwrap();
    let packets = store
        .define_source("packets", vec![Field::new("len", 0, FieldKind::U64)])
        .unwrap();
    let index = store
        .define_index(requests, "latency", lat, latency_bins())
        .unwrap();
    let mut rng = Rng(7);
    let mut payload = [0u8; 48];
    let start = Instant::now();
    let n = seconds * rate;
    for i in 0..n {
        let ts = i * SECOND / rate;
        payload[..8].copy_from_slice(&rng.latency().to_le_bytes());
        store.append_at(requests, ts, None, &payload).unwrap();
        if i % 30 == 0 {
            payload[..8].copy_from_slice(&(64 + i % 1400).to_le_bytes());
            store.append_at(packets, ts, None, &payload).unwrap();
        }
    }
    store.publish();
    let took = start.elapsed();
    println!(
        "queries over {seconds} s at {} M records/s (+ a 30x rarer source), ingested in {:.1} s; min/median/max of 5 runs:",
        rate / 1_000_000,
        took.as_secs_f64()
    );
    let snapshot = store.snapshot();
    let end = (n - 1) * SECOND / rate;
    let window = end.saturating_sub(60 * SECOND)..=end;
    let (max, _) = time("max over the last 60 s", 5, || {
        snapshot.aggregate(requests, index, window.clone()).unwrap()
    });
    let (p, stats) = time("p99.99 over the last 60 s", 5, || {
        snapshot
            .percentile(requests, index, window.clone(), 0.9999)
            .unwrap()
    });
    let p = p.unwrap();
    let (above, _) = time("all records above that p99.99", 5, || {
        snapshot
            .indexed_scan(requests, index, window.clone(), p..=i64::MAX)
            .unwrap()
    });
    let max_value = max.max.unwrap();
    let (slowest, _) = snapshot
        .indexed_scan(requests, index, window.clone(), max_value..=max_value)
        .unwrap();
    let at = slowest[0].ts;
    let (nearby, _) = time("rare source within 5 s of the maximum", 5, || {
        snapshot
            .raw_scan(packets, at.saturating_sub(5 * SECOND)..=at + 5 * SECOND)
            .unwrap()
    });
    println!(
        "  max {max_value} ns, p99.99 {p} ns ({} chunks from summaries, {} scanned), {} records above it, {} rare records near the max",
        stats.chunks_summarized,
        stats.chunks_scanned,
        above.len(),
        nearby.len()
    );
    drop(snapshot);
    store.close().unwrap();
    let _ = fs::remove_dir_all(dir);
}

/// Log-spaced latency bins, 10% apart, from 1 µs to 100 s (190 bins).
fn latency_bins() -> Bins {
    let mut bounds = vec![1_000i64];
    while *bounds.last().unwrap() < 100 * SECOND as i64 {
        let next = (*bounds.last().unwrap() as f64 * 1.1) as i64;
        bounds.push(next.max(bounds.last().unwrap() + 1));
    }
    Bins::new(bounds).unwrap()
}

/// Peak resident set size, from /proc.
fn peak_rss_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
