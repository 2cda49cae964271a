//! What a capture holds (`weft info`): its sources with their records and
//! losses, its sessions, triggers and size, as JSON and as text.

use std::{fmt::Write as _, path::Path};

use crate::error::{Error, Result};
use serde::Serialize;
use weft_store::{Snapshot, Source};

use crate::{
    capture,
    metadata::{self, PeerLog, Session, TriggerLog},
};

/// Everything `info` reports (`--json` prints it as it is).
#[derive(Debug, Serialize)]
pub struct Summary {
    pub dir: String,
    /// The first and last record's time, `CLOCK_MONOTONIC` ns.
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub sources: Vec<SourceSummary>,
    pub sessions: Vec<Session>,
    /// Bytes on disk.
    pub bytes: u64,
    /// Unfinished chunks at the end (a crash), and what opening found.
    pub torn_chunks: u64,
    pub notes: Vec<String>,
}

/// One source of a capture.
#[derive(Debug, Serialize)]
pub struct SourceSummary {
    pub name: String,
    pub records: u64,
    pub fields: Vec<String>,
    /// Chunks the disk budget deleted.
    pub chunks_expired: u64,
    /// Deleted records whose summaries are kept (`--retain-summaries`),
    /// and the arrival times they span.
    pub summarized: u64,
    pub summarized_ns: Option<(u64, u64)>,
}

/// Everything `info` reports.
pub fn summarise(dir: &Path) -> Result<Summary> {
    let metadata = metadata::read_metadata(dir)?;
    let (snapshot, recovery) = weft_store::open_read_only(dir).map_err(|error| Error::Open {
        dir: dir.to_owned(),
        error,
    })?;
    let sources = records(&snapshot)?
        .into_iter()
        .map(
            |(source, records, expired, (summarized, summarized_ns))| SourceSummary {
                name: source.name.clone(),
                records,
                fields: source.fields.iter().map(|f| f.name.clone()).collect(),
                chunks_expired: expired,
                summarized,
                summarized_ns,
            },
        )
        .collect();
    let range = snapshot.time_range()?;
    Ok(Summary {
        dir: dir.display().to_string(),
        first_ns: range.as_ref().map(|r| *r.start()),
        last_ns: range.as_ref().map(|r| *r.end()),
        sources,
        sessions: metadata.sessions,
        bytes: capture::size_on_disk(dir),
        torn_chunks: recovery.cut_chunks,
        notes: recovery.notes,
    })
}

/// The deleted records whose summaries are kept, and the times they span.
type Kept = (u64, Option<(u64, u64)>);

/// Each source of a capture with the records it holds, how many of its
/// chunks retention deleted, and the deleted records whose summaries are
/// kept (a count over the whole capture includes those: not held, they
/// are taken out).
pub fn records(snapshot: &Snapshot) -> Result<Vec<(&Source, u64, u64, Kept)>> {
    snapshot
        .meta()
        .sources
        .iter()
        .map(|source| {
            let (count, stats) = snapshot.aggregate(source.id, 0, 0..=u64::MAX)?;
            let kept = snapshot.kept_summaries(source.id)?;
            let held = count.count.saturating_sub(kept.0);
            Ok((source, held, stats.chunks_expired, kept))
        })
        .collect()
}

pub fn render(dir: &Path, s: &Summary) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_summary(&mut out, dir, s);
    out
}

/// A session's triggers that fired or were asked for, and the notes of
/// its manual ones.
fn write_triggers(out: &mut String, triggers: &TriggerLog) -> std::fmt::Result {
    for rule in (triggers.rules.iter()).filter(|rule| rule.fired > 0 || rule.id != 0) {
        writeln!(
            out,
            "trigger   {}: {}: fired {}, merged {}, capped {}, suppressed {}",
            rule.id, rule.condition, rule.fired, rule.merged, rule.capped, rule.suppressed
        )?;
    }
    for rule in &triggers.rules {
        for trace in &rule.traces {
            writeln!(
                out,
                "trace     {}: fired at {:.3}s on trace {}",
                rule.id,
                trace.time_ns as f64 / 1e9,
                trace.trace_id
            )?;
        }
    }
    for note in &triggers.notes {
        writeln!(
            out,
            "note      {:.3}s: {}",
            note.time_ns as f64 / 1e9,
            note.note
        )?;
    }
    match &triggers.peers {
        Some(peers) => write_peers(out, peers),
        None => Ok(()),
    }
}

/// The firings peers asked this host to keep, and those it asked them to.
fn write_peers(out: &mut String, peers: &PeerLog) -> std::fmt::Result {
    for got in &peers.received {
        writeln!(
            out,
            "from peer {} (hop {}, fired on {}: {}): {}; its clock {} ({})",
            got.from,
            got.hop,
            got.origin,
            got.condition,
            got.note,
            clock_ms(
                got.clock_offset_ns.unwrap_or(0) as f64,
                got.clock_error_ns.unwrap_or(0) as f64
            ),
            got.clock_from.as_deref().unwrap_or("unmeasured"),
        )?;
    }
    for sent in &peers.sent {
        let clock_from = match sent.clock_from.as_str() {
            "" => "exchange",
            from => from,
        };
        writeln!(
            out,
            "to peer   {} (hop {}, firing {}): {} in {:.1} ms; its clock {} ({clock_from})",
            sent.to,
            sent.hop,
            sent.id,
            match (sent.kept, sent.note.as_str()) {
                (true, _) => "kept",
                (false, "") => "not kept",
                (false, note) => note,
            },
            sent.ms,
            clock_ms(sent.clock_offset_ns as f64, sent.clock_error_ns as f64),
        )?;
    }
    Ok(())
}

/// A peer's clock offset and its error bound (ns), in ms.
fn clock_ms(offset_ns: f64, error_ns: f64) -> String {
    format!("{:+.3} ms (±{:.3} ms)", offset_ns / 1e6, error_ns / 1e6)
}

fn write_summary(out: &mut String, dir: &Path, s: &Summary) -> std::fmt::Result {
    writeln!(out, "capture   {}", dir.display())?;
    let complete = s.sessions.iter().filter(|x| x.complete).count();
    writeln!(out, "sessions  {} ({complete} complete)", s.sessions.len())?;
    if let (Some(first), Some(last)) = (s.first_ns, s.last_ns) {
        let secs = |ns: u64| ns as f64 / 1e9;
        writeln!(
            out,
            "time      {:.3}s .. {:.3}s (CLOCK_MONOTONIC), {:.3}s",
            secs(first),
            secs(last),
            secs(last - first)
        )?;
    }
    for source in &s.sources {
        let lost = metadata::lost_in(&s.sessions, &source.name);
        writeln!(
            out,
            "source    {}: {} records, lost {lost}",
            source.name, source.records
        )?;
        if let Some((first, last)) = source.summarized_ns {
            writeln!(
                out,
                "          and the summaries of {} deleted records, {:.3}s .. {:.3}s",
                source.summarized,
                first as f64 / 1e9,
                last as f64 / 1e9
            )?;
        }
    }
    for session in &s.sessions {
        if let Some(triggers) = &session.triggers {
            write_triggers(out, triggers)?;
        }
        let released = session.pins_released.unwrap_or(0);
        if released > 0 {
            writeln!(
                out,
                "released  {released} kept windows, the oldest, past their share of the disk budget"
            )?;
        }
        if let Some(error) = &session.store_error {
            writeln!(
                out,
                "stopped   by a store error: {error}; {} records held in memory were not \
                 written (the sources' losses count those received after it)",
                session.unflushed.unwrap_or(0)
            )?;
        }
    }
    let mib = s.bytes as f64 / f64::from(1 << 20);
    writeln!(out, "size      {mib:.1} MiB")?;
    if s.torn_chunks > 0 {
        writeln!(
            out,
            "torn      {} unfinished chunks at the end (a crash); they are ignored",
            s.torn_chunks
        )?;
    }
    Ok(())
}
