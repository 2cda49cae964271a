//! weft's hybrid-log store: every captured record, kept in fixed memory and
//! answerable by time window, value range and exact percentile.
//!
//! Depends on no other weft crate: it knows nothing of eBPF, the kernel, the
//! query language or the command line.
//!
//! # Overview
//!
//! A capture directory holds five append-only logs (the first three after
//! the Loom paper): the **record log** (records of all sources interleaved,
//! each pointing back to the previous record of its source), the **chunk
//! log** (one summary per source, index and bin of each fixed-size chunk),
//! the **values log** (per chunk, the distinct values of each bin and their
//! counts, so exact percentiles need not read records), the **groups log**
//! (each run of 64 chunks' summaries merged, so long windows read one
//! summary per run) and the **time log** (one entry per chunk, the commit
//! point). One writer appends; a background
//! thread writes sealed chunks; readers take [`Snapshot`]s that never block
//! the writer. See `docs/format.md` for the bytes.
//!
//! ```
//! use weft_store::{Bins, Config, Field, FieldKind, Store};
//!
//! let dir = std::env::temp_dir().join(format!("weft-store-doc-{}", std::process::id()));
//! let mut store = Store::open(&dir, &Config { block_size: 4096, ..Config::default() })?;
//! let lat = Field::new("latency_ns", 0, FieldKind::U64);
//! let source = store.define_source("requests", vec![lat.clone()])?;
//! let index = store.define_index(source, "latency", lat, Bins::new(vec![100, 1_000, 10_000])?)?;
//! for (ts, latency) in [(1, 50u64), (2, 700), (3, 20_000)] {
//!     store.append_at(source, ts, None, &latency.to_le_bytes())?;
//! }
//! store.publish();
//! let (p50, _) = store.snapshot().percentile(source, index, 0..=10, 0.5)?;
//! assert_eq!(p50, Some(700));
//! store.close()?;
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), weft_store::Error>(())
//! ```
//!
//! It is not: a general database (no updates or deletes of single records),
//! or aware of eBPF (sources are opaque byte payloads with integer fields).
#![deny(missing_docs)]

mod cache;
mod check;
mod config;
mod dir;
mod error;
mod flusher;
mod format;
mod keys;
mod query;
mod reclaim;
mod recovery;
mod roller;
mod rollup;
mod schema;
mod shared;
mod values;
mod writer;

use std::path::Path;

pub use check::{Report, check};
pub use config::{Config, Durability};
pub use dir::Dir;
pub use error::{Error, Result};
pub use format::FormatVersion;
pub use query::{
    Aggregate, KeyAnswer, OwnTimes, PartAnswer, QueryStats, Record, RecordView, ValueCounts,
};
pub use recovery::Recovery;
pub use schema::{
    Bins, Closed, Field, FieldKind, Index, IndexId, Meta, Partition, Source, SourceId,
};
pub use shared::{Reader, Snapshot};
pub use writer::Store;

/// Opens a capture directory read-only: the same answers as the writer's
/// snapshots, nothing changed on disk; the [`Recovery`] says what a torn
/// tail would cut.
pub fn open_read_only(path: &Path) -> Result<(Snapshot, Recovery)> {
    let dir = Dir::open(path)?;
    let (meta, recovery) = recovery::open_read_only(&dir, recovery::Open::Read)?;
    let shared = std::sync::Arc::new(shared::Shared::new(dir.into(), meta, &recovery));
    Ok((shared.snapshot(), recovery))
}

/// What [`open_skipping_damaged`] leaves out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Damaged chunks left out.
    pub chunks: u64,
    /// Records in those of them whose time entry is intact.
    pub records: u64,
    /// Of them, chunks whose record count was lost with their time entry.
    pub uncounted: u64,
    /// The arrival times they span (ns), neighbouring chunks merged.
    pub spans: Vec<std::ops::RangeInclusive<u64>>,
    /// What [`check`] found, one line per damage.
    pub problems: Vec<String>,
}

/// [`open_read_only`] that answers from the intact part of a damaged
/// capture: [`check`] finds every damaged chunk, and the snapshot leaves
/// them out of every answer (as if the budget had deleted them). A closed
/// capture keeps all the chunks it closed with; a crashed one is cut at
/// its unfinished tail as usual.
pub fn open_skipping_damaged(path: &Path) -> Result<(Snapshot, Recovery, Skipped)> {
    let dir = Dir::open(path)?;
    let report = check::check_dir(&dir)?;
    let (meta, recovery) = recovery::open_read_only(&dir, recovery::Open::SkipDamaged)?;
    let entries = recovery::time_entries(&dir, &meta)?;
    let damaged: Vec<u64> = (report.damaged_chunks.iter().copied())
        .filter(|c| *c < recovery.chunks)
        .collect();
    let left_out = recovery::stand_ins(&entries, &damaged);
    let mut skipped = Skipped {
        chunks: damaged.len() as u64,
        problems: report.problems,
        ..Skipped::default()
    };
    for chunk in &damaged {
        match entries.get(*chunk as usize).copied().flatten() {
            Some(entry) => skipped.records += u64::from(entry.records),
            None => skipped.uncounted += 1,
        }
        let entry = &left_out[chunk];
        match skipped.spans.last_mut() {
            Some(span)
                if chunk
                    .checked_sub(1)
                    .is_some_and(|c| left_out.contains_key(&c)) =>
            {
                *span = *span.start()..=entry.last_ts.max(*span.end());
            }
            _ => skipped.spans.push(entry.first_ts..=entry.last_ts),
        }
    }
    let shared = std::sync::Arc::new(shared::Shared::new(dir.into(), meta, &recovery));
    Ok((shared.snapshot().skipping(left_out), recovery, skipped))
}

/// The name of the record-log segment holding chunks `[segment * per_segment, ...)`.
pub(crate) fn segment_name(segment: u64) -> String {
    format!("records-{segment:010}.log")
}

/// Parses a segment number back from a file name; `None` for foreign files.
pub(crate) fn segment_number(name: &str) -> Option<u64> {
    name.strip_prefix("records-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

/// `CLOCK_MONOTONIC` now, in ns: the same clock as `bpf_ktime_get_ns`.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    // A monotonic clock is never negative.
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}
