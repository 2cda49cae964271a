//! `| explain` splits calls' wall time exactly as the `sched`, `block` and
//! `pagecache` records inside them say, and ranks the factors against the
//! calls without the threshold.
#![expect(
    clippy::float_cmp,
    clippy::cast_possible_wrap,
    reason = "the splits are sums of whole microseconds divided by 4: exact in f64; four states"
)]

use std::{path::PathBuf, sync::Arc};

use weft_query::{Answer, Catalog, Cell, Kind, Names, run};
use weft_store::{Config, Field, FieldKind, SourceId, Store};

const BASE: u64 = 1_000_000_000_000;
const US: u64 = 1_000;

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A record of one of the four sources, at its time.
enum Rec {
    Call {
        tid: u32,
        end: u64,
        dur: u64,
    },
    Sched {
        tid: u32,
        back: u64,
        off: u64,
        runq: u64,
        state: u8,
    },
    Block {
        done: u64,
        latency: u64,
        read: bool,
    },
    Added {
        tid: u32,
        at: u64,
        pages: u32,
    },
    /// A function call a PT capture saw, at its return.
    Pt {
        tid: u32,
        ret: u64,
        dur: u64,
        depth: u32,
        func: u32,
    },
}

impl Rec {
    fn time(&self) -> u64 {
        match *self {
            Self::Call { end, .. } => end,
            Self::Sched { back, .. } => back,
            Self::Block { done, .. } => done,
            Self::Added { at, .. } => at,
            Self::Pt { ret, .. } => ret,
        }
    }
}

const STATES: [&str; 4] = ["R", "R+", "S", "D"];
const S: u8 = 2;
const D: u8 = 3;

/// Thread 7: 98 calls of 10 µs on the CPU, then four of 1 ms: one that
/// sleeps 700 µs and waits 100 µs for a CPU, one preempted for 600 µs,
/// one uninterruptible for 800 µs of which a block request covers 500 µs,
/// one uninterruptible for 900 µs in which it added 4 pages to the cache,
/// while a read and then a write were in flight (600 µs of reading, 250
/// µs with only the write).
/// A stretch of thread 8 inside thread 7's calls counts for neither.
fn records(fast: u64) -> Vec<Rec> {
    let mut recs = Vec::new();
    let mut t = BASE;
    for _ in 0..fast {
        t += 100 * US;
        recs.push(Rec::Call {
            tid: 7,
            end: t,
            dur: 10 * US,
        });
    }
    let slow = |recs: &mut Vec<Rec>, t: &mut u64| {
        *t += 10_000 * US;
        recs.push(Rec::Call {
            tid: 7,
            end: *t,
            dur: 1_000 * US,
        });
        *t - 1_000 * US
    };
    let s = slow(&mut recs, &mut t);
    // PT inside it: `parse` (with `fetch` nested in it), then `fetch`.
    for (from, to, depth, func) in [(10, 300, 1, 1), (50, 200, 2, 2), (400, 900, 1, 2)] {
        recs.push(Rec::Pt {
            tid: 7,
            ret: s + to * US,
            dur: (to - from) * US,
            depth,
            func,
        });
    }
    recs.push(Rec::Sched {
        tid: 7,
        back: s + 900 * US,
        off: 800 * US,
        runq: 100 * US,
        state: S,
    });
    recs.push(Rec::Sched {
        tid: 8,
        back: s + 900 * US,
        off: 800 * US,
        runq: 0,
        state: S,
    });
    let s = slow(&mut recs, &mut t);
    recs.push(Rec::Sched {
        tid: 7,
        back: s + 700 * US,
        off: 600 * US,
        runq: 600 * US,
        state: 1,
    });
    let s = slow(&mut recs, &mut t);
    recs.push(Rec::Sched {
        tid: 7,
        back: s + 900 * US,
        off: 800 * US,
        runq: 0,
        state: D,
    });
    recs.push(Rec::Block {
        done: s + 600 * US,
        latency: 500 * US,
        read: false,
    });
    let s = slow(&mut recs, &mut t);
    recs.push(Rec::Sched {
        tid: 7,
        back: s + 950 * US,
        off: 900 * US,
        runq: 0,
        state: D,
    });
    recs.push(Rec::Block {
        done: s + 700 * US,
        latency: 600 * US,
        read: true,
    });
    recs.push(Rec::Block {
        done: s + 950 * US,
        latency: 300 * US,
        read: false,
    });
    recs.push(Rec::Added {
        tid: 7,
        at: s + 60 * US,
        pages: 4,
    });
    recs.sort_by_key(Rec::time);
    recs
}

/// The five sources: syscalls, sched, block, pagecache, calls.
fn define(store: &mut Store) -> [SourceId; 5] {
    let calls = store
        .define_source(
            "syscalls",
            vec![
                Field::new("dur", 0, FieldKind::U64),
                Field::new("tid", 8, FieldKind::U32),
            ],
        )
        .unwrap();
    let sched = store
        .define_source(
            "sched",
            vec![
                Field::new("off_cpu", 0, FieldKind::U64),
                Field::new("runq", 8, FieldKind::U64),
                Field::new("tid", 16, FieldKind::U32),
                Field::new("state", 20, FieldKind::U8),
            ],
        )
        .unwrap();
    let block = store
        .define_source(
            "block",
            vec![
                Field::new("latency", 0, FieldKind::U64),
                Field::new("op", 8, FieldKind::U8),
            ],
        )
        .unwrap();
    let cache = store
        .define_source(
            "pagecache",
            vec![
                Field::new("pages", 0, FieldKind::U32),
                Field::new("tid", 4, FieldKind::U32),
                Field::new("kind", 8, FieldKind::U8),
            ],
        )
        .unwrap();
    let pt = store
        .define_source(
            "calls",
            vec![
                Field::new("dur", 0, FieldKind::U64),
                Field::new("tid", 8, FieldKind::U32),
                Field::new("depth", 12, FieldKind::U32),
                Field::new("func", 16, FieldKind::U32),
            ],
        )
        .unwrap();
    [calls, sched, block, cache, pt]
}

/// `rec`'s source (of `ids`, as [`define`] orders them) and payload.
fn payload(rec: &Rec, ids: &[SourceId; 5]) -> (SourceId, Vec<u8>) {
    let [calls, sched, block, cache, pt] = *ids;
    match *rec {
        Rec::Call { tid, dur, .. } => {
            (calls, [&dur.to_le_bytes()[..], &tid.to_le_bytes()].concat())
        }
        Rec::Sched {
            tid,
            off,
            runq,
            state,
            ..
        } => (
            sched,
            [
                &off.to_le_bytes()[..],
                &runq.to_le_bytes(),
                &tid.to_le_bytes(),
                &[state],
            ]
            .concat(),
        ),
        Rec::Block { latency, read, .. } => (
            block,
            [&latency.to_le_bytes()[..], &[u8::from(!read)]].concat(),
        ),
        Rec::Pt {
            tid,
            dur,
            depth,
            func,
            ..
        } => (
            pt,
            [
                &dur.to_le_bytes()[..],
                &tid.to_le_bytes(),
                &depth.to_le_bytes(),
                &func.to_le_bytes(),
            ]
            .concat(),
        ),
        Rec::Added { tid, pages, .. } => (
            cache,
            [&pages.to_le_bytes()[..], &tid.to_le_bytes(), &[0]].concat(),
        ),
    }
}

/// The catalog a capture's writer would fill: durations, the span, and
/// the names of states, operations and page-cache kinds.
fn catalog(snapshot: &weft_store::Snapshot) -> Catalog {
    let mut catalog = Catalog::from_meta(snapshot.meta());
    let named = |names: &[&str]| {
        Kind::Named(Arc::new(Names::new(
            names
                .iter()
                .enumerate()
                .map(|(i, n)| (i as i64, (*n).to_owned())),
            true,
        )))
    };
    let syscalls = catalog.source_mut("syscalls").unwrap();
    syscalls.set_kind("dur", Kind::Duration).unwrap();
    syscalls.span = Some("dur".into());
    let sched = catalog.source_mut("sched").unwrap();
    sched.set_kind("state", named(&STATES)).unwrap();
    let block = catalog.source_mut("block").unwrap();
    block.set_kind("op", named(&["read", "write"])).unwrap();
    let calls = catalog.source_mut("calls").unwrap();
    calls
        .set_kind("func", named(&["main", "parse", "fetch"]))
        .unwrap();
    calls.set_kind("dur", Kind::Duration).unwrap();
    calls.span = Some("dur".into());
    let cache = catalog.source_mut("pagecache").unwrap();
    cache.set_kind("kind", named(&["add", "delete"])).unwrap();
    catalog
}

fn ask(query: &str) -> Answer {
    ask_with(query, 98)
}

/// `query` over [`records`] with `fast` calls on the CPU.
fn ask_with(query: &str, fast: u64) -> Answer {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("weft-explain-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _cleanup = TempDir(dir.clone());
    let mut store = Store::open(&dir, &Config::default()).unwrap();
    let ids = define(&mut store);
    for rec in records(fast) {
        let (source, payload) = payload(&rec, &ids);
        store
            .append_at(source, rec.time(), Some(rec.time()), &payload)
            .unwrap();
    }
    store.publish();
    let snapshot = store.snapshot();
    let catalog = catalog(&snapshot);
    run(&snapshot, &catalog, query).unwrap_or_else(|e| panic!("{}", e.render(query)))
}

/// The factor rows as (name, selected %, baseline %, selected per call).
fn factors(answer: &Answer) -> Vec<(String, f64, f64, f64)> {
    answer
        .rows
        .iter()
        .map(|row| {
            let float = |c: &Cell| match c {
                Cell::Float(f) => *f,
                other => panic!("{other:?}"),
            };
            let Cell::Text(name) = &row[0] else {
                panic!("{row:?}")
            };
            (name.clone(), float(&row[1]), float(&row[2]), float(&row[4]))
        })
        .collect()
}

#[test]
fn explain_splits_each_call_by_the_records_inside_it() {
    let answer = ask("syscalls where dur > 500us | explain");
    let rows = factors(&answer);
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    // 4 ms of selected calls: run-queue 700 µs, page-cache 650 (the
    // reading call's wait, but for the 250 µs with only a write in
    // flight), block 500 + 250, sleeping 700, uninterruptible without I/O
    // 300, on-CPU 900.
    let per_call = |name: &str| rows.iter().find(|r| r.0 == name).unwrap().3;
    assert_eq!(per_call("run-queue wait"), 175_000.0, "{rows:?}");
    assert_eq!(per_call("page-cache misses"), 162_500.0, "{rows:?}");
    assert_eq!(per_call("block I/O"), 187_500.0, "{rows:?}");
    assert_eq!(per_call("sleeping"), 175_000.0, "{rows:?}");
    assert_eq!(per_call("uninterruptible, no I/O"), 75_000.0, "{rows:?}");
    assert_eq!(per_call("off-CPU, other states"), 0.0, "{rows:?}");
    assert_eq!(per_call("on-CPU"), 225_000.0, "{rows:?}");
    // The baseline adds 98 calls of 10 µs on the CPU, so every off-CPU
    // factor takes more of a selected call's time than of a call's in the
    // baseline (each call weighs alike), and on-CPU less; the wall time is
    // last.
    let wall = names
        .iter()
        .position(|n| n.starts_with("wall time"))
        .unwrap();
    assert_eq!(names[wall], "wall time (4 calls, 102 in the baseline)");
    assert_eq!(names[wall - 1], "on-CPU", "{rows:?}");
    // After it, the outermost functions PT saw inside the calls: `fetch`
    // 500 µs and `parse` 290 µs of the first call (the `fetch` nested in
    // `parse` is `parse`'s time).
    assert_eq!(
        names[wall + 1..],
        ["in code: fetch", "in code: parse"],
        "{rows:?}"
    );
    assert_eq!(rows[wall + 1].3, 125_000.0, "{rows:?}");
    assert_eq!(rows[wall + 2].3, 72_500.0, "{rows:?}");
    let page = rows.iter().find(|r| r.0 == "page-cache misses").unwrap();
    assert!(
        (page.1 - 16.25).abs() < 1e-9 && (page.2 - 65.0 / 102.0).abs() < 1e-9,
        "{page:?}"
    );
    assert_eq!(
        names[0], "block I/O",
        "the largest gain ranks first: {rows:?}"
    );
    assert!(
        answer
            .plan
            .iter()
            .any(|l| l.contains("4 selected call(s) against 102")),
        "{:?}",
        answer.plan
    );
}

#[test]
fn explain_reads_a_large_baseline_from_stretches_of_the_window() {
    let answer = ask_with("syscalls where dur > 500us | explain", 300_000);
    let rows = factors(&answer);
    // The selected calls split as before; the baseline's 300,004 calls are
    // all counted, and those split are on the CPU but for the slow ones
    // the stretches happened to hold.
    let run_queue = rows.iter().find(|r| r.0 == "run-queue wait").unwrap();
    assert_eq!(run_queue.3, 175_000.0, "{rows:?}");
    assert!(run_queue.2 < 0.01, "{rows:?}");
    assert!(
        rows.iter()
            .any(|r| r.0 == "wall time (4 calls, 300004 in the baseline)"),
        "{rows:?}"
    );
    assert!(
        answer
            .plan
            .iter()
            .any(|l| l.contains("of 300004 calls, from 64 stretches")),
        "{:?}",
        answer.plan
    );
}

#[test]
fn explain_without_a_threshold_compares_the_selection_with_itself() {
    let answer = ask("syscalls where tid = 7 | explain");
    let rows = factors(&answer);
    assert!(rows.iter().all(|r| r.1 == r.2), "{rows:?}");
    assert!(
        answer
            .plan
            .iter()
            .any(|l| l.contains("no threshold to drop")),
        "{:?}",
        answer.plan
    );
}

#[test]
fn explain_refuses_other_stages_and_sources_without_threads() {
    let dir_free = |q: &str| {
        std::panic::catch_unwind(|| ask(q))
            .err()
            .and_then(|e| e.downcast_ref::<String>().cloned())
            .unwrap_or_default()
    };
    assert!(
        dir_free("syscalls | count | explain").contains("`explain` is the only stage"),
        "an aggregate before it"
    );
    assert!(
        dir_free("block | explain").contains("no `tid`"),
        "block records here have no thread"
    );
}
