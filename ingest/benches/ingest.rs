//! `cargo xtask bench ingest`: the ring -> store path of `weft record` on
//! ring-shaped input, stage by stage, against the store's plain append of
//! the same payloads measured in the same run. Needs no root.
//!
//! The input is a synthetic syscall mix laid out in rings exactly as the
//! kernel lays out the syscall probe's records: 40-byte `SyscallEvent`s
//! behind 8-byte ring headers, numbers drawn from a busy server's mix,
//! log-spread durations, 24 threads of 3 processes.
//!
//! Stages, run in interleaved rounds (each stage once a round, timed from
//! the first record to the store closed, its files fsynced; min/median/max
//! of the rounds, and of each round's rate over the same round's plain
//! append):
//! - `ring walk`: drain the rings and decode each record, nothing stored;
//! - `ring walk, time order`: the same through `ring::drain_merged`, which
//!   hands both rings' records out in time order, as `weft trace` drains;
//! - `append, no index`: the store's plain append of the payloads (from
//!   memory), with no index: the baseline;
//! - `append, syscall indexes`: the same with the syscall source's six
//!   default indexes;
//! - `ring -> store`: what `weft record` does per drain: the ring drained
//!   in batches, each record appended in place by `SyscallSink` (indexes,
//!   thread names), the arrival clock read once per batch.
//!
//! Arguments: `[--quick] [--records N] [--runs N] [--disk DIR] [--tmpfs DIR]
//! [--stage indexed|ring]`. `--stage` times one stage alone on the tmpfs
//! directory (the indexed append, or ring -> store), as ns per record: for
//! comparing builds in interleaved runs, or under `valgrind --tool=callgrind`,
//! whose instruction counts do not move with a busy machine (the ring
//! stages need a real ring mapping, which valgrind refuses: `indexed` there).

use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use weft_abi::ring::{self, Ring};
use weft_abi::syscall::{EVENT_SIZE, SyscallEvent};
use weft_ingest::syscalls::SyscallSink;
use weft_store::{Config, Store};

/// Bytes a drain takes from one ring at most, as `weft record` drains.
const BUDGET: usize = 4 << 20;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let quick = args.iter().any(|a| a == "--quick");
    let records: usize = arg("--records")
        .and_then(|n| n.parse().ok())
        .unwrap_or(if quick { 1_000_000 } else { 8_000_000 });
    let runs: usize = arg("--runs")
        .and_then(|n| n.parse().ok())
        .unwrap_or(if quick { 2 } else { 5 });
    let disk = PathBuf::from(arg("--disk").unwrap_or_else(|| "target/bench-ingest".into()));
    let tmpfs =
        PathBuf::from(arg("--tmpfs").unwrap_or_else(|| "/dev/shm/weft-bench-ingest".into()));

    let events = mix(records);
    let payloads: Vec<[u8; EVENT_SIZE]> = events.iter().map(SyscallEvent::to_le_bytes).collect();
    if let Some(stage) = arg("--stage") {
        let rates = measure(runs, || match stage.as_str() {
            "indexed" => append(&tmpfs, &payloads, true),
            "ring" => ring_to_store(&tmpfs, &events),
            other => panic!("--stage {other}: indexed or ring"),
        });
        let (lo, mid, hi) = spread(rates);
        println!(
            "{stage} (tmpfs): ns/record min {:.1} median {:.1} max {:.1}",
            1e9 / hi,
            1e9 / mid,
            1e9 / lo
        );
        let _ = fs::remove_dir_all(&tmpfs);
        return;
    }
    println!(
        "ingest: {records} syscall records (40 B payload, 48 B in the ring), {runs} rounds, \
         each running every stage once; M records/s, ns/record, and each round's rate over \
         its plain append: min/median/max"
    );
    println!(
        "{:<32} {:>22} {:>10} {:>20}",
        "stage", "M records/s", "ns/record", "vs append"
    );
    for (place, dir) in [("disk", disk.as_path()), ("tmpfs", tmpfs.as_path())] {
        let mut stages: [(&str, Box<Run>); 5] = [
            ("ring walk", Box::new(|| walk(&events))),
            (
                "ring walk, time order",
                Box::new(|| walk_in_time_order(&events)),
            ),
            (
                "append, no index",
                Box::new(|| append(dir, &payloads, false)),
            ),
            (
                "append, syscall indexes",
                Box::new(|| append(dir, &payloads, true)),
            ),
            ("ring -> store", Box::new(|| ring_to_store(dir, &events))),
        ];
        // Interleaved: a busy moment slows one round's stages alike, and
        // each is compared with the plain append of its own round.
        let mut rates = vec![Vec::new(); stages.len()];
        for _ in 0..runs {
            for ((_, stage), rates) in stages.iter_mut().zip(&mut rates) {
                let (count, seconds) = stage();
                rates.push(count as f64 / seconds);
            }
        }
        let baseline = rates[2].clone();
        for ((stage, _), rates) in stages.iter().zip(&rates) {
            let (lo, mid, hi) = spread(rates.clone());
            let ratios = rates.iter().zip(&baseline).map(|(r, b)| r / b).collect();
            let (rlo, rmid, rhi) = spread(ratios);
            println!(
                "{:<32} {:>6.2} {:>6.2} {:>6.2} {:>10.1} {:>5.2} {:>5.2} {:>5.2}x",
                format!("{stage} ({place})"),
                lo / 1e6,
                mid / 1e6,
                hi / 1e6,
                1e9 / mid,
                rlo,
                rmid,
                rhi,
            );
        }
        let _ = fs::remove_dir_all(dir);
    }
}

/// One timed run of a stage: (records, seconds).
type Run<'a> = dyn FnMut() -> (usize, f64) + 'a;

/// Records/s of each of `runs` runs of `run`, which returns (records, seconds).
fn measure(runs: usize, mut run: impl FnMut() -> (usize, f64)) -> Vec<f64> {
    (0..runs)
        .map(|_| {
            let (records, seconds) = run();
            records as f64 / seconds
        })
        .collect()
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

/// `n` syscalls as a busy server makes them: mostly reads, writes, polls,
/// futexes and network calls, durations spread over six decades, 24
/// threads of 3 processes in runs of a few records each.
fn mix(n: usize) -> Vec<SyscallEvent> {
    // (number, weight, typical duration in ns)
    const MIX: &[(u32, u32, u64)] = &[
        (0, 20, 2_000),    // read
        (1, 15, 3_000),    // write
        (232, 8, 200_000), // epoll_wait
        (202, 10, 20_000), // futex
        (44, 8, 5_000),    // sendto
        (45, 8, 4_000),    // recvfrom
        (257, 4, 8_000),   // openat
        (3, 4, 500),       // close
        (9, 3, 1_500),     // mmap
        (110, 10, 150),    // getppid
        (39, 5, 120),      // getpid
        (7, 3, 1_000_000), // poll
        (228, 2, 300),     // clock_gettime (vDSO misses)
    ];
    let total: u32 = MIX.iter().map(|m| m.1).sum();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut now = 1_000_000_000u64;
    let mut thread = 0u32;
    (0..n)
        .map(|_| {
            let r = next();
            if r % 4 == 0 {
                thread = (r >> 8) as u32 % 24;
            }
            let mut pick = (r >> 16) as u32 % total;
            let &(nr, _, typical) = MIX
                .iter()
                .find(|m| {
                    let hit = pick < m.1;
                    pick = pick.saturating_sub(m.1);
                    hit
                })
                .expect("the weights sum to total");
            // Log-spread around the typical duration: /8 to x8.
            let duration = (typical << ((r >> 40) % 7)) >> 3;
            now += 250;
            SyscallEvent {
                enter_ns: now,
                duration_ns: duration.max(50),
                ret: if nr == 0 { 512 } else { 0 },
                pid: 1000 + thread % 3,
                tid: 1000 + thread,
                nr,
                cpu: thread % 2,
            }
        })
        .collect()
}

/// Rings holding `events`, split over two CPUs' rings as the probe would
/// fill them.
fn rings(events: &[SyscallEvent]) -> Vec<Ring> {
    let bytes = (events.len() / 2 + 1) * (EVENT_SIZE + 8);
    let mut rings: Vec<Ring> = (0..2)
        .map(|_| Ring::in_memory(bytes.next_power_of_two()))
        .collect();
    for event in events {
        let cpu = event.cpu as usize % rings.len();
        assert!(
            rings[cpu].push(&event.to_le_bytes()),
            "the ring holds them all"
        );
    }
    rings
}

/// Drains every ring in `BUDGET` batches until all are empty.
fn drain_all(rings: &mut [Ring], mut on_batch: impl FnMut(&mut Ring)) {
    loop {
        let mut any = false;
        for ring in rings.iter_mut() {
            if ring.pending() > 0 {
                on_batch(ring);
                any = true;
            }
        }
        if !any {
            break;
        }
    }
}

fn walk(events: &[SyscallEvent]) -> (usize, f64) {
    let mut rings = rings(events);
    let start = Instant::now();
    let mut sum = 0u64;
    let mut count = 0;
    drain_all(&mut rings, |ring| {
        ring.drain(BUDGET, |record| {
            let event = SyscallEvent::read(record).expect("the bench pushed whole events");
            sum = sum.wrapping_add(event.duration_ns);
            count += 1;
        });
    });
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(count, events.len());
    std::hint::black_box(sum);
    (count, seconds)
}

/// `walk` through `ring::drain_merged`, each drain a quarter of each ring.
fn walk_in_time_order(events: &[SyscallEvent]) -> (usize, f64) {
    let mut rings = rings(events);
    let start = Instant::now();
    let mut sum = 0u64;
    let mut count = 0;
    let enter_ns = |record: &[u8]| SyscallEvent::read(record).map_or(0, |e| e.enter_ns);
    while rings.iter().any(|ring| ring.pending() > 0) {
        ring::drain_merged(&mut rings, enter_ns, u64::MAX, |record| {
            let event = SyscallEvent::read(record).expect("the bench pushed whole events");
            sum = sum.wrapping_add(event.duration_ns);
            count += 1;
            true
        });
    }
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(count, events.len());
    std::hint::black_box(sum);
    (count, seconds)
}

fn fresh(dir: &Path) -> Store {
    let _ = fs::remove_dir_all(dir);
    Store::open(dir, &Config::default()).expect("the bench directory is writable")
}

fn append(dir: &Path, payloads: &[[u8; EVENT_SIZE]], indexed: bool) -> (usize, f64) {
    let start = Instant::now();
    let mut store = fresh(dir);
    let source = if indexed {
        weft_ingest::syscalls::define_source(&mut store).unwrap()
    } else {
        store
            .define_source("syscalls", weft_ingest::syscalls::fields())
            .unwrap()
    };
    for (ts, payload) in (0u64..).zip(payloads) {
        store.append_at(source, ts, Some(ts), payload).unwrap();
    }
    store.close().unwrap();
    (payloads.len(), start.elapsed().as_secs_f64())
}

fn ring_to_store(dir: &Path, events: &[SyscallEvent]) -> (usize, f64) {
    let mut rings = rings(events);
    let start = Instant::now();
    let mut store = fresh(dir);
    let mut sink = SyscallSink::define(&mut store).unwrap();
    let mut count = 0;
    drain_all(&mut rings, |ring| {
        let now = weft_store::now_ns();
        let drained = ring.drain(BUDGET, |record| {
            sink.append(&mut store, now, record).unwrap();
        });
        count += drained.records as usize;
    });
    store.close().unwrap();
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(count, events.len());
    (count, seconds)
}
