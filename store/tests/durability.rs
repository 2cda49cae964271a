//! Concurrency, crashes, corruption and the disk budget.

use std::{
    io::{BufRead as _, BufReader},
    os::unix::fs::MetadataExt as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
};

use weft_store::{Bins, Config, Error, Field, FieldKind, Snapshot, Store};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn small() -> Config {
    Config {
        block_size: 4096,
        blocks_per_segment: 8,
        ..Config::default()
    }
}

/// A store with one source whose records hold their sequence number, indexed.
fn counting_store(dir: &Path, config: &Config) -> (Store, u16, u16) {
    let mut store = Store::open(dir, config).unwrap();
    let field = Field::new("seq", 0, FieldKind::U64);
    let source = store.define_source("seq", vec![field.clone()]).unwrap();
    let bins = Bins::new((1..64).map(|i| i * 50_000).collect()).unwrap();
    let index = store.define_index(source, "seq", field, bins).unwrap();
    (store, source, index)
}

fn sequence(snapshot: &Snapshot, source: u16) -> Vec<u64> {
    let (records, _) = snapshot.raw_scan(source, 0..=u64::MAX).unwrap();
    records
        .iter()
        .map(|r| u64::from_le_bytes(r.payload[..8].try_into().unwrap()))
        .collect()
}

/// Checks a snapshot of a counting store against the reference 0..n.
fn check_prefix(snapshot: &Snapshot, source: u16, index: u16) -> u64 {
    let n = snapshot.records().unwrap();
    let (agg, _) = snapshot.aggregate(source, index, 0..=u64::MAX).unwrap();
    assert_eq!(agg.count, n);
    assert_eq!(agg.sum, i128::from(n) * i128::from(n.saturating_sub(1)) / 2);
    if n > 0 {
        let (p50, _) = snapshot
            .percentile(source, index, 0..=u64::MAX, 0.5)
            .unwrap();
        assert_eq!(p50, Some(i64::try_from(n.div_ceil(2) - 1).unwrap()));
    }
    n
}

#[test]
fn readers_during_ingest_see_consistent_prefixes() {
    let dir = temp_dir("concurrent");
    let (mut store, source, index) = counting_store(
        &dir,
        &Config {
            block_size: 64 << 10,
            ..Config::default()
        },
    );
    store.publish();
    let slot = Arc::new(Mutex::new(store.snapshot()));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (slot, done) = (Arc::clone(&slot), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                while !done.load(Ordering::Acquire) {
                    let snapshot = slot.lock().unwrap().clone();
                    seen.push(check_prefix(&snapshot, source, index));
                }
                seen
            })
        })
        .collect();
    for seq in 0u64..2_000_000 {
        store
            .append_at(source, seq, None, &seq.to_le_bytes())
            .unwrap();
        if seq % 50_000 == 0 {
            store.publish();
            *slot.lock().unwrap() = store.snapshot();
        }
    }
    done.store(true, Ordering::Release);
    for reader in readers {
        let seen = reader.join().unwrap();
        assert!(
            seen.windows(2).all(|w| w[0] <= w[1]),
            "snapshots went back in time"
        );
        assert!(
            seen.iter().any(|n| *n > 0),
            "readers never saw data while ingest ran"
        );
    }
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Not a test on its own: the child process of `recover_after_kill_9`.
#[test]
#[ignore = "run by recover_after_kill_9 as a child process"]
fn crash_child() {
    let Some(dir) = std::env::var_os("WEFT_STORE_CRASH_DIR") else {
        return;
    };
    let (mut store, source, _) = counting_store(Path::new(&dir), &small());
    for seq in 0u64.. {
        store
            .append_at(source, seq, None, &seq.to_le_bytes())
            .unwrap();
        if seq % 5_000 == 0 {
            println!("appended {seq}");
        }
    }
}

#[test]
fn recover_after_kill_9() {
    let dir = temp_dir("crash");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["crash_child", "--exact", "--ignored", "--nocapture"])
        .env("WEFT_STORE_CRASH_DIR", &dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.map_while(Result::ok) {
        if line.starts_with("appended 200000") {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL, mid-flush or mid-append
    child.wait().unwrap();
    for reopen in 0..3 {
        let (mut store, source, index) = counting_store(&dir, &small());
        let recovery = store.recovery().clone();
        assert!(recovery.chunks > 0, "{recovery:?}");
        store.publish();
        let snapshot = store.snapshot();
        let seq = sequence(&snapshot, source);
        let expected: Vec<u64> = (0..seq.len() as u64).collect();
        assert_eq!(
            seq, expected,
            "reopen {reopen}: not a prefix of what was written"
        );
        assert!(
            seq.len() >= 200_000 - 4096,
            "reopen {reopen}: only {} records survived",
            seq.len()
        );
        check_prefix(&snapshot, source, index);
        // Keep writing after recovery, as a restarted agent would.
        let next = seq.len() as u64;
        for s in next..next + 1000 {
            store.append_at(source, s, None, &s.to_le_bytes()).unwrap();
        }
        store.close().unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn write_closed_store(dir: &Path, n: u64) {
    let (mut store, source, _) = counting_store(dir, &small());
    for seq in 0..n {
        store
            .append_at(source, seq, None, &seq.to_le_bytes())
            .unwrap();
    }
    store.close().unwrap();
}

#[test]
fn recover_after_torn_tail() {
    let dir = temp_dir("torn");
    write_closed_store(&dir, 10_000);
    // A half-written time entry and block, as a crash mid-flush leaves
    // them, in a capture whose writer never closed it.
    as_if_never_closed(&dir);
    append(&dir, "time.log", &[7; 20]);
    append(&dir, "records-0000000000.log", &[9; 1000]);
    let (store, source, index) = counting_store(&dir, &small());
    let recovery = store.recovery().clone();
    assert!(recovery.cut_bytes >= 20, "{recovery:?}");
    assert!(
        recovery.notes.iter().any(|n| n.contains("time.log")),
        "{recovery:?}"
    );
    let snapshot = store.snapshot();
    assert_eq!(
        sequence(&snapshot, source),
        (0..10_000).collect::<Vec<u64>>()
    );
    check_prefix(&snapshot, source, index);
    drop(snapshot);
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A crash between creating the next segment and writing its header
/// leaves an empty file where the next chunk goes. Recovery removes it, so
/// the flusher creates it again with its header, and the capture reopens
/// after more appends (it did not: the flusher reused the file headerless).
#[test]
fn recover_a_segment_left_without_its_header() {
    let dir = temp_dir("headerless");
    write_closed_store(&dir, 20_000);
    as_if_never_closed(&dir);
    let last = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with("records-"))
        .max()
        .unwrap();
    std::fs::File::create(dir.join(&last)).unwrap();
    for reopen in 0..2 {
        let (mut store, source, index) = counting_store(&dir, &small());
        store.publish();
        let snapshot = store.snapshot();
        let seq = sequence(&snapshot, source);
        assert_eq!(
            seq,
            (0..seq.len() as u64).collect::<Vec<_>>(),
            "reopen {reopen}"
        );
        check_prefix(&snapshot, source, index);
        drop(snapshot);
        // A chunk or two: the capture's last block lands in that segment.
        let next = seq.len() as u64;
        for s in next..next + 300 {
            store.append_at(source, s, None, &s.to_le_bytes()).unwrap();
        }
        store.close().unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Appends `bytes` to the file `name` of `dir`.
fn append(dir: &Path, name: &str, bytes: &[u8]) {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join(name))
        .unwrap();
    file.write_all(bytes).unwrap();
}

/// Takes the clean-close mark out of `dir`'s meta, as a crash leaves it.
fn as_if_never_closed(dir: &Path) {
    let mut meta = weft_store::Meta::load(&weft_store::Dir::open(dir).unwrap()).unwrap();
    assert!(meta.closed.is_some(), "{meta:?}");
    meta.closed = None;
    meta.save(&weft_store::Dir::open(dir).unwrap()).unwrap();
}

#[test]
fn a_closed_capture_with_a_damaged_tail_is_an_error_not_a_crash() {
    for (name, bytes) in [
        ("time.log", [7u8; 20].as_slice()),
        ("chunks.log", &[1; 3]),
        ("records-0000000000.log", &[9; 1000]),
    ] {
        let dir = temp_dir("closed-tail");
        write_closed_store(&dir, 10_000);
        append(&dir, name, bytes);
        let Err(error) = weft_store::open_read_only(&dir) else {
            panic!("{name}: a damaged closed capture opened");
        };
        let text = error.to_string();
        assert!(matches!(error, Error::Damaged { .. }), "{text}");
        assert!(text.contains(name), "{text}");
        // A writer may not continue it either; nothing is cut.
        let before = std::fs::metadata(dir.join(name)).unwrap().len();
        assert!(Store::open(&dir, &small()).is_err());
        assert_eq!(std::fs::metadata(dir.join(name)).unwrap().len(), before);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// A capture that closed cleanly opens from its newest chunk and its
/// files' lengths, as its close recorded them: the same as walking every
/// entry, without the walk; damage to an older time entry is found by the
/// read that meets it, and by `weft check`.
#[test]
fn a_closed_capture_opens_as_its_close_recorded_it() {
    let dir = temp_dir("closed-recorded");
    let config = Config {
        group_chunks: 8,
        ..small()
    };
    let (mut store, source, _) = counting_store(&dir, &config);
    for seq in 0..30_000u64 {
        store
            .append_at(source, seq, None, &seq.to_le_bytes())
            .unwrap();
    }
    store.close().unwrap();
    let (_, recorded) = weft_store::open_read_only(&dir).unwrap();
    assert!(recorded.chunks > 16, "{recorded:?}");
    // The same capture as if closed before the groups log's end was kept:
    // opening walks every entry.
    let store_dir = weft_store::Dir::open(&dir).unwrap();
    let meta = weft_store::Meta::load(&store_dir).unwrap();
    let mut walked_meta = meta.clone();
    walked_meta.closed.as_mut().unwrap().groups_end = None;
    walked_meta.save(&store_dir).unwrap();
    let (_, walked) = weft_store::open_read_only(&dir).unwrap();
    assert_eq!(recorded, walked);
    meta.save(&store_dir).unwrap();
    // Chunk 3's time entry damaged: opening walks no further than the
    // newest chunk, and the scan that reads chunk 3 names the file.
    let time = dir.join("time.log");
    let mut bytes = std::fs::read(&time).unwrap();
    let entry = (bytes.len() - 16) / recorded.chunks as usize;
    bytes[16 + 3 * entry + 2] ^= 0xff;
    std::fs::write(&time, &bytes).unwrap();
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    let error = snapshot.raw_scan(source, 0..=u64::MAX).unwrap_err();
    assert!(
        matches!(error, Error::Corrupt { .. }) && error.to_string().contains("time.log"),
        "{error}"
    );
    let report = weft_store::check(&dir).unwrap();
    let at = format!("time.log at offset {}", 16 + 3 * entry);
    assert!(
        report.problems.iter().any(|p| p.starts_with(&at)),
        "{report:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_closed_capture_missing_a_segment_says_which() {
    let dir = temp_dir("closed-lost");
    write_closed_store(&dir, 10_000);
    std::fs::remove_file(dir.join("records-0000000000.log")).unwrap();
    let Err(error) = weft_store::open_read_only(&dir) else {
        panic!("a closed capture missing a segment opened");
    };
    let text = error.to_string();
    assert!(text.contains("records-0000000000.log is missing"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reopening_a_closed_capture_to_append_and_closing_it_again() {
    let dir = temp_dir("reopen");
    write_closed_store(&dir, 10_000);
    let (mut store, source, _) = counting_store(&dir, &small());
    // While open for writing, the capture is not closed.
    assert_eq!(
        weft_store::Meta::load(&weft_store::Dir::open(&dir).unwrap())
            .unwrap()
            .closed,
        None
    );
    for seq in 10_000u64..12_000 {
        store.append(source, &seq.to_le_bytes()).unwrap();
    }
    store.close().unwrap();
    let (snapshot, recovery) = weft_store::open_read_only(&dir).unwrap();
    assert_eq!(recovery.cut_chunks, 0);
    assert_eq!(
        sequence(&snapshot, source),
        (0..12_000).collect::<Vec<u64>>()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corrupt_block_names_file_and_offset() {
    let dir = temp_dir("corrupt");
    write_closed_store(&dir, 10_000);
    let segment = dir.join("records-0000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    bytes[16 + 4096 * 2 + 100] ^= 0xff; // inside chunk 2
    std::fs::write(&segment, &bytes).unwrap();
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    let error = snapshot.raw_scan(0, 0..=u64::MAX).unwrap_err();
    let text = error.to_string();
    assert!(
        matches!(error, Error::Corrupt { offset: 8208, .. }),
        "{text}"
    );
    assert!(
        text.contains("records-0000000000.log") && text.contains("checksum"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Values repeated in a row (a flood's thread id) reach the values log
/// once per run with their count: counts per value and percentiles stay
/// exact across runs that span chunks and runs cut by other values.
#[test]
fn values_repeated_in_a_row_are_counted_exactly() {
    let dir = temp_dir("repeats");
    // Runs of 2 chunks, so that some are counted from their values entries
    // alone and the window's edges from records.
    let config = Config {
        group_chunks: 2,
        ..small()
    };
    let mut store = Store::open(&dir, &config).unwrap();
    let field = Field::new("tid", 0, FieldKind::U64);
    let source = store.define_source("calls", vec![field.clone()]).unwrap();
    let bins = Bins::new(vec![0, 1 << 36]).unwrap();
    let index = store.define_index(source, "tid", field, bins).unwrap();
    let mut expected = std::collections::BTreeMap::<i64, u64>::new();
    for (tid, run) in [
        (7i64, 1_000u64),
        (9, 1),
        (7, 500),
        (8, 3),
        (8, 2),
        (7, 2_000),
        (11, 1),
    ] {
        for _ in 0..run {
            store.append(source, &tid.to_le_bytes()).unwrap();
        }
        *expected.entry(tid).or_default() += run;
    }
    store.close().unwrap();
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    let (counts, stats) = snapshot.value_counts(source, index, 0..=u64::MAX).unwrap();
    assert_eq!(counts.unwrap(), expected.into_iter().collect::<Vec<_>>());
    assert!(stats.chunks_in_groups > 4, "{stats:?}");
    assert!(stats.chunks_valued_for_bins > 5, "{stats:?}");
    // A window that cuts chunks: the same counts as its records give.
    let (records, _) = snapshot.raw_scan(source, 0..=u64::MAX).unwrap();
    let window = records[700].ts..=records[3_000].ts;
    let mut expected = std::collections::BTreeMap::<i64, u64>::new();
    for r in records.iter().filter(|r| window.contains(&r.ts)) {
        *expected
            .entry(i64::from_le_bytes(r.payload[..8].try_into().unwrap()))
            .or_default() += 1;
    }
    let (counts, _) = snapshot.value_counts(source, index, window).unwrap();
    assert_eq!(counts.unwrap(), expected.into_iter().collect::<Vec<_>>());
    let (p999, _) = snapshot
        .percentile(source, index, 0..=u64::MAX, 0.999)
        .unwrap();
    assert_eq!(p999, Some(8), "rank 3504 of 3507: after 3500 sevens");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A source with a few records per chunk is read from their copies in the
/// values log: whole, in order, with their times and addresses, even with
/// every block but the newest damaged (the flood beside it is then an
/// error, as it must be).
#[test]
fn a_sources_few_records_are_read_from_their_copies() {
    let dir = temp_dir("copies");
    let mut store = Store::open(&dir, &small()).unwrap();
    let field = Field::new("seq", 0, FieldKind::U64);
    let flood = store.define_source("flood", vec![field.clone()]).unwrap();
    let names = store.define_source("names", vec![field]).unwrap();
    for i in 0..20_000u64 {
        store
            .append_at(flood, 1_000 + i, None, &i.to_le_bytes())
            .unwrap();
        if i % 97 == 0 {
            let name = [&i.to_le_bytes()[..], b"thread-name"].concat();
            store
                .append_at(names, 1_000 + i, Some(900 + i), &name)
                .unwrap();
        }
    }
    store.close().unwrap();
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    let (before, _) = snapshot.raw_scan(names, 0..=u64::MAX).unwrap();
    assert_eq!(before.len(), 20_000usize.div_ceil(97));
    let chunks = snapshot.chunks();
    assert!(chunks > 20, "{chunks} chunks");
    drop(snapshot);
    // Every block but the newest (checked at open) fails its checksum.
    for chunk in 0..chunks - 1 {
        let segment = dir.join(format!("records-{:010}.log", chunk / 8));
        let mut bytes = std::fs::read(&segment).unwrap();
        bytes[16 + (chunk as usize % 8) * 4096 + 4000] ^= 0xff;
        std::fs::write(&segment, &bytes).unwrap();
    }
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    let (after, _) = snapshot.raw_scan(names, 0..=u64::MAX).unwrap();
    assert_eq!(after, before);
    let (window, _) = snapshot
        .raw_scan(names, 1_000 + 5_000..=1_000 + 6_000)
        .unwrap();
    assert_eq!(window.len(), 10, "records 5044..=5917 of every 97th");
    let error = snapshot.raw_scan(flood, 0..=u64::MAX).unwrap_err();
    assert!(error.to_string().contains("checksum"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_headers_are_rejected_with_clear_errors() {
    let dir = temp_dir("headers");
    write_closed_store(&dir, 100);
    let time = dir.join("time.log");
    let good = std::fs::read(&time).unwrap();
    let mut future = good.clone();
    future[7] = 9;
    std::fs::write(&time, &future).unwrap();
    let error = weft_store::open_read_only(&dir).err().unwrap();
    assert!(
        matches!(error, Error::UnsupportedVersion { version: 9, .. }),
        "{error}"
    );
    let mut foreign = good.clone();
    foreign[0] = b'X';
    std::fs::write(&time, &foreign).unwrap();
    let error = weft_store::open_read_only(&dir).err().unwrap();
    assert!(
        error.to_string().contains("bad magic") && error.to_string().contains("time.log"),
        "{error}"
    );
    std::fs::write(&time, &good[..5]).unwrap();
    let error = weft_store::open_read_only(&dir).err().unwrap();
    assert!(
        error.to_string().contains("shorter than its header"),
        "{error}"
    );
    std::fs::write(dir.join("meta"), "not a meta file\n").unwrap();
    let error = weft_store::open_read_only(&dir).err().unwrap();
    assert!(error.to_string().contains("meta at offset 1"), "{error}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Appends sequence numbers 0..200,000 at those times, pinning 0..=999.
fn append_with_pinned_start(store: &mut Store, source: weft_store::SourceId) {
    for seq in 0u64..200_000 {
        if seq == 1_000 {
            store.pin(0, 999).unwrap();
        }
        store
            .append_at(source, seq, None, &seq.to_le_bytes())
            .unwrap();
    }
}

#[test]
fn disk_budget_deletes_oldest_and_keeps_pins() {
    let dir = temp_dir("budget");
    // The budget holds the index logs too (their entries of deleted
    // segments are freed). Its one pin may take the whole budget the
    // index logs leave.
    let config = Config {
        disk_budget: Some(224 << 10),
        pin_percent: 100,
        ..small()
    };
    let (mut store, source, index) = counting_store(&dir, &config);
    append_with_pinned_start(&mut store, source);
    store.close().unwrap();
    let (snapshot, recovery) = weft_store::open_read_only(&dir).unwrap();
    assert!(!recovery.deleted_segments.is_empty(), "{recovery:?}");
    assert!(
        dir.join("records-0000000000.log").exists(),
        "the pinned segment was deleted"
    );
    // Disk use: the index logs keep their length with holes where the
    // deleted segments' entries were.
    let size: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            let metadata = e.unwrap().metadata().unwrap();
            metadata.len().min(metadata.blocks() * 512)
        })
        .sum();
    assert!(size <= 224 << 10, "store uses {size} bytes");
    // The pinned window still answers exactly; a window over deleted data says so.
    let (agg, _) = snapshot.aggregate(source, index, 0..=999).unwrap();
    assert_eq!((agg.count, agg.min, agg.max), (1000, Some(0), Some(999)));
    let (records, stats) = snapshot.raw_scan(source, 0..=u64::MAX).unwrap();
    assert!(stats.chunks_expired > 0, "{stats:?}");
    assert_eq!(records.last().map(|r| r.ts), Some(199_999));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pins_never_take_more_than_their_share_of_the_budget() {
    // Large enough for this tiny store's index logs (entries of deleted
    // segments are freed, but those of pinned ones stay), so that pins,
    // not the logs, are what the budget has to hold back.
    const BUDGET: u64 = 512 << 10;
    let dir = temp_dir("pin-share");
    let config = Config {
        disk_budget: Some(BUDGET),
        ..small()
    };
    let segment = u64::from(config.block_size) * u64::from(config.blocks_per_segment);
    let (mut store, source, _) = counting_store(&dir, &config);
    // A trigger that fires all the time: a window pinned every 500 records.
    let mut most = 0;
    for seq in 0u64..200_000 {
        if seq % 500 == 0 {
            store.pin(seq.saturating_sub(200), seq + 200).unwrap();
        }
        store
            .append_at(source, seq, None, &seq.to_le_bytes())
            .unwrap();
        if seq % 5_000 == 0 {
            most = most.max(disk_use(&dir));
        }
    }
    let released = store.pins_released();
    store.close().unwrap();
    most = most.max(disk_use(&dir));
    // The budget may be passed by the segment being written and the index
    // entries written since the last retire (a real store retires at each
    // segment begun): here about 8 KiB a segment (per 4 KiB chunk a values
    // entry of ~670 bytes, summaries of ~250, a time entry), and a block
    // at each index log's holes that the entries freed share with kept
    // ones. A slack of 8 KiB in all failed once in a loaded test run, 6 KiB
    // past it (a normal run peaks 4 KiB under it).
    let slack = 10 << 10;
    let blocks = 4 << 10;
    let logs = (std::fs::read_dir(&dir).unwrap())
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("records-")
        })
        .count() as u64;
    assert!(
        most <= BUDGET + segment + slack + logs * blocks,
        "{most} bytes on disk, past the budget, a segment and {logs} index logs' slack"
    );
    assert!(released > 300, "only {released} of 400 pins released");
    // The newest records are all there, pinned or not.
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    let (records, _) = snapshot.raw_scan(source, 199_000..=u64::MAX).unwrap();
    assert_eq!(records.len(), 1_000);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_rings_index_logs_are_freed_with_its_segments() {
    // A ring over 40,000 tiny chunks: unfreed, its chunk and time logs
    // alone would pass 2 MiB, eight times the budget.
    const BUDGET: u64 = 256 << 10;
    let dir = temp_dir("ring-logs");
    let config = Config {
        disk_budget: Some(BUDGET),
        group_chunks: 4,
        ..small()
    };
    let segment = u64::from(config.block_size) * u64::from(config.blocks_per_segment);
    let (mut store, source, index) = counting_store(&dir, &config);
    // Records kept a quarter into the run and near its end.
    let (mut most, mut kept) = (0, Vec::new());
    for seq in 0u64..1_200_000 {
        store
            .append_at(source, seq, None, &seq.to_le_bytes())
            .unwrap();
        if seq % 20_000 == 0 {
            most = most.max(disk_use(&dir));
        }
        if seq == 300_000 || seq == 1_100_000 {
            store.publish();
            kept.push(store.snapshot().records().unwrap());
        }
    }
    store.close().unwrap();
    most = most.max(disk_use(&dir));
    let (snapshot, recovery) = weft_store::open_read_only(&dir).unwrap();
    let kept_late = snapshot.records().unwrap();
    // Past the budget: the segment being written, and the index entries
    // written since the last retire, each log's partly used 4 KiB blocks
    // (a large share of a store this small; nothing of a real one).
    let slack = segment + (64 << 10);
    assert!(
        most <= BUDGET + slack,
        "{most} bytes on disk, past the budget and a segment"
    );
    // The window kept does not shrink as the run goes on.
    assert!(kept[1] * 10 >= kept[0] * 9, "records kept: {kept:?}");
    // Reopened, the capture is whole and answers from what it kept: the
    // newest records, all of them, in order.
    let report = weft_store::check(&dir).unwrap();
    assert_eq!(report.problems, Vec::<String>::new());
    assert_eq!(report.records, kept_late);
    assert_eq!(report.chunks, snapshot.chunks());
    let seqs = sequence(&snapshot, source);
    let first = 1_200_000 - kept_late;
    assert_eq!(seqs, (first..1_200_000).collect::<Vec<_>>());
    assert_eq!(snapshot.time_range().unwrap(), Some(first..=1_199_999));
    let (agg, _) = snapshot.aggregate(source, index, 0..=u64::MAX).unwrap();
    assert_eq!((agg.count, agg.min), (kept_late, Some(first.cast_signed())));
    drop(snapshot);
    assert!(recovery.deleted_segments.len() > 100, "{recovery:?}");
    // Opened again to append, it goes on within its budget.
    let mut store = Store::open(&dir, &config).unwrap();
    for seq in 1_200_000u64..1_300_000 {
        store
            .append_at(source, seq, None, &seq.to_le_bytes())
            .unwrap();
    }
    store.close().unwrap();
    assert!(disk_use(&dir) <= BUDGET + slack);
    assert_eq!(
        weft_store::check(&dir).unwrap().problems,
        Vec::<String>::new()
    );
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    assert_eq!(sequence(&snapshot, source).last(), Some(&1_299_999));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn readers_of_a_ring_never_fail_while_it_frees_what_they_read() {
    // Queries over everything race the budget deleting the oldest
    // segments and freeing their index entries under them: what goes
    // while a query runs is left out of its answer, never an error.
    let dir = temp_dir("ring-readers");
    let config = Config {
        disk_budget: Some(256 << 10),
        group_chunks: 4,
        ..small()
    };
    let (mut store, source, index) = counting_store(&dir, &config);
    let reader = store.reader();
    let done = Arc::new(AtomicBool::new(false));
    let queries = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut answered = 0;
            while !done.load(Ordering::Acquire) {
                let snapshot = reader.snapshot();
                let (records, _) = snapshot.raw_scan(source, 0..=u64::MAX).unwrap();
                assert!(records.windows(2).all(|w| w[0].ts < w[1].ts));
                snapshot.aggregate(source, index, 0..=u64::MAX).unwrap();
                snapshot
                    .percentile(source, index, 0..=u64::MAX, 0.5)
                    .unwrap();
                snapshot.time_range().unwrap();
                answered += 1;
            }
            answered
        })
    };
    for seq in 0u64..600_000 {
        store
            .append_at(source, seq, None, &seq.to_le_bytes())
            .unwrap();
        if seq % 2_000 == 0 {
            store.publish();
        }
    }
    done.store(true, Ordering::Release);
    let answered = queries.join().unwrap();
    assert!(answered > 10, "only {answered} rounds of queries");
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_io_error_keeps_what_was_committed_and_counts_what_was_not() {
    // This kernel has no device-mapper (no `error` or `flakey` target to
    // fail a real disk with EIO), so the store's own hook fails the
    // flusher's writes from here on, as a dying disk does.
    const EIO: i32 = 5;
    let dir = temp_dir("eio");
    let (mut store, source, index) = counting_store(&dir, &small());
    for seq in 0u64..50_000 {
        store
            .append_at(source, seq, None, &seq.to_le_bytes())
            .unwrap();
    }
    store.seal().unwrap();
    let waited = std::time::Instant::now();
    while store.records_not_on_disk() > 0 && waited.elapsed().as_secs() < 10 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    store.fail_writes(EIO);
    let mut accepted = 0;
    let error = (50_000u64..10_000_000)
        .find_map(
            |seq| match store.append_at(source, seq, None, &seq.to_le_bytes()) {
                Ok(_) => {
                    accepted += 1;
                    None
                }
                Err(error) => Some(error),
            },
        )
        .expect("appends go on failing silently");
    assert!(error.to_string().contains("Input/output error"), "{error}");
    // Every record accepted after the failure is known not to be stored.
    assert_eq!(store.records_not_on_disk(), accepted);
    let closed = store.close().unwrap_err();
    assert!(
        closed.to_string().contains("Input/output error"),
        "{closed}"
    );
    // What was committed before is whole.
    let (snapshot, recovery) = weft_store::open_read_only(&dir).unwrap();
    assert_eq!(recovery.cut_chunks, 0, "{recovery:?}");
    assert_eq!(check_prefix(&snapshot, source, index), 50_000);
    let report = weft_store::check(&dir).unwrap();
    assert_eq!(report.problems, Vec::<String>::new());
    assert_eq!(report.unfinished, Vec::<String>::new());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_forged_sparse_time_log_is_refused_not_read_into_memory() {
    let dir = temp_dir("sparse-time");
    write_closed_store(&dir, 1_000);
    // Two GiB that take no disk: reading them whole would take the memory.
    let time = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("time.log"))
        .unwrap();
    time.set_len(2 << 30).unwrap();
    let error = weft_store::open_read_only(&dir).err().unwrap().to_string();
    assert!(
        error.contains("time.log") && error.contains("more than"),
        "{error}"
    );
    assert!(weft_store::check(&dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Bytes the files of `dir` take on disk (holes not counted).
fn disk_use(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len().min(m.blocks() * 512))
        .sum()
}

#[test]
fn retention_keeps_a_time_ring_and_pins() {
    let dir = temp_dir("retain");
    let config = Config {
        retain: Some(50_000),
        ..small()
    };
    let (mut store, source, index) = counting_store(&dir, &config);
    append_with_pinned_start(&mut store, source);
    store.close().unwrap();
    let (snapshot, recovery) = weft_store::open_read_only(&dir).unwrap();
    assert!(!recovery.deleted_segments.is_empty(), "{recovery:?}");
    // The pinned window stays; everything else older than the ring is gone,
    // and the whole last 50,000 ns (plus at most a segment) remains.
    let (agg, _) = snapshot.aggregate(source, index, 0..=999).unwrap();
    assert_eq!(agg.count, 1000);
    let (records, stats) = snapshot.raw_scan(source, 1_000..=u64::MAX).unwrap();
    assert!(stats.chunks_expired > 0, "{stats:?}");
    // Beyond the pinned segment's own tail, nothing from the first half.
    let middle = records.iter().filter(|r| r.ts < 100_000).count();
    assert!(middle < 2_000, "{middle} old records were kept");
    let recent = records.iter().filter(|r| r.ts >= 150_000).count();
    assert_eq!(recent, 50_000, "the ring lost recent data");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn files_are_private() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = temp_dir("mode");
    write_closed_store(&dir, 100);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        let mode = entry.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", entry.path().display());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn record_sizes_near_the_chunk_limit() {
    let dir = temp_dir("sizes");
    let mut store = Store::open(&dir, &small()).unwrap();
    let source = store.define_source("s", vec![]).unwrap();
    // The documented limit: a chunk minus its header minus the largest record header.
    let limit = 4096 - 24 - 50;
    let mut sizes = Vec::new();
    for (ts, size) in [100, limit, 7, limit - 3, 4000 - 24 - 60, 1, limit]
        .into_iter()
        .enumerate()
    {
        store
            .append_at(source, ts as u64, None, &vec![size as u8; size])
            .unwrap();
        sizes.push(size);
    }
    assert!(matches!(
        store.append_at(source, 99, None, &vec![0; limit + 1]),
        Err(Error::RecordTooLarge { size, .. }) if size == limit + 1
    ));
    store.publish();
    let (records, _) = store.snapshot().raw_scan(source, 0..=u64::MAX).unwrap();
    let got: Vec<usize> = records.iter().map(|r| r.payload.len()).collect();
    assert_eq!(got, sizes);
    assert!(
        records
            .iter()
            .all(|r| r.payload.iter().all(|b| *b == r.payload.len() as u8))
    );
    store.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn check_lists_every_damage_and_tells_a_crash_from_it() {
    let dir = temp_dir("check");
    write_closed_store(&dir, 10_000);
    let whole = weft_store::check(&dir).unwrap();
    assert!(
        whole.problems.is_empty() && whole.unfinished.is_empty(),
        "{whole:?}"
    );
    assert_eq!(whole.records, 10_000);
    // Two blocks and one chunk's summaries damaged, far from the end.
    let flip = |name: &str, at: usize| {
        let path = dir.join(name);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[at] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
    };
    flip("records-0000000000.log", 16 + 4096 + 200);
    flip("records-0000000000.log", 16 + 4096 * 3 + 200);
    flip("chunks.log", 16 + 40);
    let damaged = weft_store::check(&dir).unwrap();
    assert_eq!(damaged.problems.len(), 3, "{damaged:?}");
    assert!(
        damaged.problems[0].contains("chunks.log at offset 16"),
        "{damaged:?}"
    );
    assert!(
        damaged.problems[1].contains("at offset 4112"),
        "{damaged:?}"
    );
    assert!(
        damaged.problems[2].contains("at offset 12304"),
        "{damaged:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();

    // A crash's torn tail is unfinished, not damage.
    write_closed_store(&dir, 10_000);
    as_if_never_closed(&dir);
    append(&dir, "time.log", &[7; 20]);
    let crashed = weft_store::check(&dir).unwrap();
    assert!(crashed.problems.is_empty(), "{crashed:?}");
    assert_eq!(crashed.unfinished.len(), 1, "{crashed:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Opens `dir` skipping damage and checks the answers against what is
/// left of the sequence 0..n: every answer agrees with the records kept,
/// every record missing lies in a span said to be left out, and none kept
/// lies inside one.
fn check_skipping(dir: &Path, n: u64) -> weft_store::Skipped {
    let (snapshot, _, skipped) = weft_store::open_skipping_damaged(dir).unwrap();
    let kept = sequence(&snapshot, 0);
    assert!(kept.windows(2).all(|w| w[0] < w[1]), "{skipped:?}");
    let inside = |s: u64, span: &std::ops::RangeInclusive<u64>| span.contains(&s);
    let strictly =
        |s: u64, span: &std::ops::RangeInclusive<u64>| s > *span.start() && s < *span.end();
    for s in (0..n).filter(|s| kept.binary_search(s).is_err()) {
        assert!(
            skipped.spans.iter().any(|sp| inside(s, sp)),
            "{s} {skipped:?}"
        );
    }
    for s in &kept {
        assert!(
            !skipped.spans.iter().any(|sp| strictly(*s, sp)),
            "{s} {skipped:?}"
        );
    }
    let (agg, stats) = snapshot.aggregate(0, 1, 0..=u64::MAX).unwrap();
    assert_eq!(agg.count, kept.len() as u64);
    assert_eq!(agg.sum, kept.iter().map(|s| i128::from(*s)).sum::<i128>());
    assert_eq!(stats.chunks_damaged, skipped.chunks, "{stats:?}");
    let (p50, _) = snapshot.percentile(0, 1, 0..=u64::MAX, 0.5).unwrap();
    let rank = kept.len().div_ceil(2) - 1;
    assert_eq!(p50, Some(i64::try_from(kept[rank]).unwrap()));
    let (parts, _) = snapshot
        .aggregate_parts(0, 1, 0..=u64::MAX, &[0.99])
        .unwrap();
    assert_eq!(
        parts.iter().map(|p| p.aggregate.count).sum::<u64>(),
        agg.count
    );
    assert!(n - kept.len() as u64 >= skipped.records, "{skipped:?}");
    if skipped.uncounted == 0 {
        assert_eq!(n - kept.len() as u64, skipped.records, "{skipped:?}");
    }
    skipped
}

#[test]
fn skipping_damage_answers_exactly_from_the_rest() {
    let dir = temp_dir("skip");
    let n = 10_000;
    write_closed_store(&dir, n);
    let flip = |name: &str, at: u64| {
        let path = dir.join(name);
        let mut bytes = std::fs::read(&path).unwrap();
        let at = at as usize % bytes.len();
        bytes[at] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
    };
    // Blocks in two segments, one chunk's summaries, and the time log's
    // last entry cut in half: a closed capture that no longer opens.
    flip("records-0000000000.log", 16 + 4096 + 200);
    flip("records-0000000002.log", 16 + 4096 * 3 + 200);
    let chunks_log = std::fs::metadata(dir.join("chunks.log")).unwrap().len();
    flip("chunks.log", chunks_log / 2);
    let time = dir.join("time.log");
    let len = std::fs::metadata(&time).unwrap().len();
    std::fs::File::options()
        .write(true)
        .open(&time)
        .unwrap()
        .set_len(len - 20)
        .unwrap();
    assert!(weft_store::open_read_only(&dir).is_err());
    let skipped = check_skipping(&dir, n);
    assert_eq!(skipped.chunks, 4, "{skipped:?}");
    assert_eq!(skipped.uncounted, 1, "{skipped:?}");
    std::fs::remove_dir_all(&dir).unwrap();

    // A time entry in the middle: its chunk stands in between neighbours.
    write_closed_store(&dir, n);
    flip("time.log", 16 + 56 * 10 + 5);
    let skipped = check_skipping(&dir, n);
    assert_eq!((skipped.chunks, skipped.uncounted), (1, 1), "{skipped:?}");
    std::fs::remove_dir_all(&dir).unwrap();

    // A lost segment: its eight chunks, counted from their time entries.
    write_closed_store(&dir, n);
    std::fs::remove_file(dir.join("records-0000000001.log")).unwrap();
    let skipped = check_skipping(&dir, n);
    assert_eq!((skipped.chunks, skipped.uncounted), (8, 0), "{skipped:?}");
    assert_eq!(skipped.spans.len(), 1, "{skipped:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A reader that reads on from the chunks it read before (the last of
/// them again, as it may have grown) sees each record, in the order
/// written, and needs no pass over the older chunks.
#[test]
fn raw_scan_chunks_reads_on_from_where_a_reader_stopped() {
    let dir = temp_dir("scan-chunks");
    let (mut store, source, _) = counting_store(&dir, &small());
    let reader = store.reader();
    let (mut seen, mut read) = (std::collections::BTreeSet::new(), 0u64);
    for round in 0..5u64 {
        for seq in round * 1_000..(round + 1) * 1_000 {
            store
                .append_at(source, seq, None, &seq.to_le_bytes())
                .unwrap();
        }
        store.publish();
        let snapshot = reader.snapshot();
        let mut order = Vec::new();
        let stats = snapshot
            .raw_scan_chunks(source, read.saturating_sub(1)..snapshot.chunks(), |r| {
                order.push(u64::from_le_bytes(r.payload[..8].try_into().unwrap()));
            })
            .unwrap();
        assert!(order.is_sorted(), "round {round}: out of order");
        // The new chunks, and the last one read before again.
        let new = snapshot.chunks() - read;
        assert!(
            stats.chunks_scanned <= new + 1,
            "round {round}: {new} new, {stats:?}"
        );
        seen.extend(order);
        read = snapshot.chunks();
    }
    assert_eq!(seen, (0..5_000).collect());
    assert!(
        read >= 10,
        "{read} chunks, too few to tell a pass over them all"
    );
    // Past the end: nothing, and no error.
    let snapshot = reader.snapshot();
    let end = snapshot.chunks();
    let mut none = 0;
    snapshot
        .raw_scan_chunks(source, end..end + 5, |_| none += 1)
        .unwrap();
    assert_eq!(none, 0);
    drop(store);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A store of `n` records, one each 10 ms, holding their sequence number,
/// kept 100 s with the summaries of deleted segments kept for a day.
fn store_with_rollups(dir: &Path, n: u64, config: &Config) -> (u16, u16) {
    let (mut store, source, index) = counting_store(dir, config);
    for i in 0..n {
        store
            .append_at(source, i * 10_000_000, None, &i.to_le_bytes())
            .unwrap();
    }
    store.close().unwrap();
    (source, index)
}

fn rolling() -> Config {
    Config {
        blocks_per_segment: 2,
        retain: Some(100_000_000_000),
        retain_summaries: Some(86_400_000_000_000),
        ..small()
    }
}

#[test]
fn summaries_answer_for_deleted_records_approximately() {
    let dir = temp_dir("rollups");
    let n = 400_000u64;
    let (source, index) = store_with_rollups(&dir, n, &rolling());
    let (snapshot, recovery) = weft_store::open_read_only(&dir).unwrap();
    assert!(recovery.deleted_segments.len() > 100, "{recovery:?}");
    // Only the last 100 s of records remain...
    let (records, _) = snapshot.raw_scan(source, 0..=u64::MAX).unwrap();
    assert!(records.len() < 12_000, "{} records kept", records.len());
    // ...but over the whole capture, count and sum are what they were.
    let (all, stats) = snapshot.aggregate(source, index, 0..=u64::MAX).unwrap();
    assert_eq!(all.count, n);
    assert_eq!(all.sum, i128::from(n) * i128::from(n - 1) / 2);
    assert_eq!((all.min, all.max), (Some(0), Some(n.cast_signed() - 1)));
    assert!(stats.chunks_rolled_up > 0, "{stats:?}");
    // Aged summaries were merged into buckets (10 s, past 10 minutes)
    // wider than a segment (5 s).
    assert!(stats.rolled_up_span >= 10_000_000_000, "{stats:?}");
    // A window of deleted time: within its edges' summaries (100 records
    // a second).
    let second = 1_000_000_000;
    let (part, stats) = snapshot
        .aggregate(source, index, 1000 * second..=2000 * second)
        .unwrap();
    let slack = 2 * 100 * (stats.rolled_up_span / second + 1);
    assert!(part.count.abs_diff(100_000) <= slack, "{part:?} {stats:?}");
    // The median, within the bound the stats give.
    let (p50, stats) = snapshot
        .percentile(source, index, 0..=u64::MAX, 0.5)
        .unwrap();
    let error = p50.unwrap().abs_diff(199_999);
    assert!(
        error <= stats.rolled_up_error && stats.rolled_up_error <= 50_000,
        "{p50:?} {stats:?}"
    );
    // A timeline counts every record once, each bucket within its edges.
    let (buckets, stats) = snapshot
        .count_every(source, 0..=u64::MAX, 500 * second, 0)
        .unwrap();
    assert_eq!(buckets.values().sum::<u64>(), n);
    for (start, count) in &buckets {
        let expected = (n - (start / 10_000_000).min(n)).min(50_000);
        let slack = 2 * 100 * (stats.rolled_up_span / second + 1);
        assert!(
            count.abs_diff(expected) <= slack,
            "bucket {start}: {count} {stats:?}"
        );
    }
    // Where the records remain, the answer is exact and says so.
    let recent = (n - 1000) * 10_000_000..=u64::MAX;
    let (last, stats) = snapshot.aggregate(source, index, recent).unwrap();
    assert_eq!((last.count, stats.chunks_rolled_up), (1000, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn kept_summaries_stay_within_their_share_and_retention() {
    let dir = temp_dir("rollups-share");
    let budget = 200 << 10;
    let config = Config {
        disk_budget: Some(budget),
        summaries_percent: 5,
        ..rolling()
    };
    let (source, index) = store_with_rollups(&dir, 400_000, &config);
    let size = std::fs::metadata(dir.join("rollups.log")).unwrap().len();
    assert!(size <= budget * 5 / 100, "rollups.log is {size} bytes");
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    // The oldest summaries went first: the newest remain.
    let (all, stats) = snapshot.aggregate(source, index, 0..=u64::MAX).unwrap();
    assert!(
        stats.chunks_rolled_up > 0 && all.count < 400_000,
        "{all:?} {stats:?}"
    );
    let (old, _) = snapshot
        .aggregate(source, index, 0..=100_000_000_000)
        .unwrap();
    assert_eq!(old.count, 0);

    // Past their retention, summaries go too.
    let dir2 = temp_dir("rollups-retention");
    let config = Config {
        retain_summaries: Some(1_000_000_000_000),
        ..rolling()
    };
    let (source, index) = store_with_rollups(&dir2, 400_000, &config);
    let (snapshot, _) = weft_store::open_read_only(&dir2).unwrap();
    let (old, _) = snapshot
        .aggregate(source, index, 0..=2_000_000_000_000)
        .unwrap();
    assert_eq!(old.count, 0, "summaries older than their retention");
    let (kept, stats) = snapshot
        .aggregate(source, index, 3_500_000_000_000..=3_800_000_000_000)
        .unwrap();
    assert!(kept.count > 0 && stats.chunks_rolled_up > 0, "{stats:?}");
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_dir_all(&dir2).unwrap();
}

#[test]
fn damaged_kept_summaries_are_found_and_can_be_left_out() {
    let dir = temp_dir("rollups-damage");
    let (source, index) = store_with_rollups(&dir, 100_000, &rolling());
    // A byte inside the first entry's summaries (after the file header and
    // the entry's 36-byte header): the first summary, at 52.
    let path = dir.join("rollups.log");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[16 + 36 + 30] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let report = weft_store::check(&dir).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("rollups.log at offset 52")),
        "{report:?}"
    );
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    let error = snapshot
        .aggregate(source, index, 0..=u64::MAX)
        .unwrap_err()
        .to_string();
    assert!(error.contains("rollups.log at offset 52"), "{error}");
    // Skipping damage, the damaged entry is left out and the rest answer.
    let (snapshot, _, _) = weft_store::open_skipping_damaged(&dir).unwrap();
    let (all, stats) = snapshot.aggregate(source, index, 0..=u64::MAX).unwrap();
    assert!(
        all.count < 100_000 && stats.chunks_rolled_up > 0,
        "{all:?} {stats:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_summary_copied_over_its_neighbour_is_found() {
    // Chunk 1's first summary over its second (each intact on its own,
    // both of chunk 1); the groups log's first entry's likewise.
    for (log, first) in [("chunks.log", 16 + 3 * 84), ("groups.log", 16 + 36)] {
        let dir = temp_dir("copied-summary");
        write_closed_store(&dir, 30_000);
        let path = dir.join(log);
        let mut bytes = std::fs::read(&path).unwrap();
        let copy = bytes[first..first + 84].to_vec();
        assert_ne!(copy, bytes[first + 84..first + 168], "{log}");
        bytes[first + 84..first + 168].copy_from_slice(&copy);
        std::fs::write(&path, &bytes).unwrap();
        let report = weft_store::check(&dir).unwrap();
        assert!(
            report.problems.iter().any(|p| p.contains(log)),
            "{log}: {report:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn by_part_only_parts_with_deleted_records_are_estimated() {
    // Part 0's records all arrive early (deleted, summarized); part 1's
    // all in the last 100 s (held): part 1's quantiles stay exact.
    let dir = temp_dir("rollups-parts");
    let mut store = Store::open(&dir, &rolling()).unwrap();
    let value = Field::new("value", 0, FieldKind::U64);
    let part = Field::new("part", 8, FieldKind::U32);
    let source = store
        .define_source("s", vec![value.clone(), part.clone()])
        .unwrap();
    let bins = Bins::new(vec![1_000, 1_000_000]).unwrap();
    let partition = Some(weft_store::Partition {
        field: part,
        count: 2,
    });
    let index = (store.define_partitioned_index(source, "by", value, bins, partition)).unwrap();
    let second = 1_000_000_000u64;
    for i in 0..100_000u64 {
        let (part, ts) = if i < 90_000 {
            (0u32, i * 10_000_000)
        } else {
            (1, 900 * second + (i - 90_000) * 5_000_000)
        };
        let mut payload = (i * 7 % 500_000).to_le_bytes().to_vec();
        payload.extend(part.to_le_bytes());
        store.append_at(source, ts, None, &payload).unwrap();
    }
    store.close().unwrap();
    let (snapshot, _) = weft_store::open_read_only(&dir).unwrap();
    let (parts, stats) = snapshot
        .aggregate_parts(source, index, 0..=u64::MAX, &[0.5])
        .unwrap();
    assert!(stats.chunks_rolled_up > 0, "{stats:?}");
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert_eq!(
        (parts[0].aggregate.count, parts[1].aggregate.count),
        (90_000, 10_000)
    );
    // Part 1 exact: the median of its 10,000 values.
    let mut values: Vec<i64> = (90_000..100_000i64).map(|i| i * 7 % 500_000).collect();
    values.sort_unstable();
    assert_eq!(parts[1].quantiles[0], Some(values[4_999]));
    // Part 0 within the bound the stats give.
    let mut values: Vec<i64> = (0..90_000i64).map(|i| i * 7 % 500_000).collect();
    values.sort_unstable();
    let error = parts[0].quantiles[0].unwrap().abs_diff(values[44_999]);
    assert!(error <= stats.rolled_up_error, "{parts:?} {stats:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
