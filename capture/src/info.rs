//! What a capture holds (`weft info`): its sources with their records and
//! losses, its sessions, triggers and size, as JSON and as text.

use std::{fmt::Write as _, path::Path};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};
use weft_store::{Snapshot, Source};

use crate::capture;

/// Everything `info` reports, as JSON.
pub fn summarise(dir: &Path) -> Result<Value> {
    let metadata = capture::read_metadata(dir)?;
    let (snapshot, recovery) = weft_store::open_read_only(dir)
        .with_context(|| format!("failed to open {}", dir.display()))?;
    let sources: Vec<Value> = records(&snapshot)?
        .into_iter()
        .map(|(source, records, expired)| {
            json!({
                "name": source.name,
                "records": records,
                "fields": source.fields.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
                "chunks_expired": expired,
            })
        })
        .collect();
    let range = snapshot.time_range()?;
    let bytes = capture::size_on_disk(dir);
    Ok(json!({
        "dir": dir.display().to_string(),
        "first_ns": range.as_ref().map(|r| *r.start()),
        "last_ns": range.as_ref().map(|r| *r.end()),
        "sources": sources,
        "sessions": metadata["sessions"],
        "bytes": bytes,
        "torn_chunks": recovery.cut_chunks,
        "notes": recovery.notes,
    }))
}

/// Each source of a capture with the records it holds and how many of its
/// chunks retention deleted.
pub fn records(snapshot: &Snapshot) -> Result<Vec<(&Source, u64, u64)>> {
    snapshot
        .meta()
        .sources
        .iter()
        .map(|source| {
            let (count, stats) = snapshot.aggregate(source.id, 0, 0..=u64::MAX)?;
            Ok((source, count.count, stats.chunks_expired))
        })
        .collect()
}

/// Records of `source` lost over all `sessions` of a capture's metadata.
pub fn lost(sessions: &Value, source: &str) -> u64 {
    sessions
        .as_array()
        .into_iter()
        .flatten()
        .map(|x| x["lost"][source]["lost"].as_u64().unwrap_or(0))
        .sum()
}

pub fn render(dir: &Path, s: &Value) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_summary(&mut out, dir, s);
    out
}

/// A session's triggers that fired or were asked for, and the notes of
/// its manual ones.
fn write_triggers(out: &mut String, triggers: &Value) -> std::fmt::Result {
    let list = |key: &str| triggers[key].as_array().cloned().unwrap_or_default();
    for rule in list("rules") {
        if rule["fired"].as_u64().unwrap_or(0) > 0 || rule["id"] != 0 {
            writeln!(
                out,
                "trigger   {}: {}: fired {}, merged {}, capped {}, suppressed {}",
                rule["id"],
                rule["condition"].as_str().unwrap_or_default(),
                rule["fired"],
                rule["merged"],
                rule["capped"].as_u64().unwrap_or(0),
                rule["suppressed"]
            )?;
        }
    }
    for note in list("notes") {
        writeln!(
            out,
            "note      {:.3}s: {}",
            note["time_ns"].as_u64().unwrap_or(0) as f64 / 1e9,
            note["note"].as_str().unwrap_or_default()
        )?;
    }
    write_peers(out, &triggers["peers"])
}

/// The firings peers asked this host to keep, and those it asked them to.
fn write_peers(out: &mut String, peers: &Value) -> std::fmt::Result {
    let list = |key: &str| peers[key].as_array().cloned().unwrap_or_default();
    for got in list("received") {
        writeln!(
            out,
            "from peer {} (hop {}, fired on {}: {}): {}; its clock {} ({})",
            got["from"].as_str().unwrap_or_default(),
            got["hop"],
            got["origin"].as_str().unwrap_or_default(),
            got["condition"].as_str().unwrap_or_default(),
            got["note"].as_str().unwrap_or_default(),
            clock_ms(&got),
            got["clock_from"].as_str().unwrap_or("unmeasured"),
        )?;
    }
    for sent in list("sent") {
        writeln!(
            out,
            "to peer   {} (hop {}, firing {}): {} in {:.1} ms; its clock {} ({})",
            sent["to"].as_str().unwrap_or_default(),
            sent["hop"],
            sent["id"].as_str().unwrap_or_default(),
            if sent["kept"] == true {
                "kept"
            } else {
                sent["note"].as_str().unwrap_or("not kept")
            },
            sent["ms"].as_f64().unwrap_or(0.0),
            clock_ms(&sent),
            sent["clock_from"].as_str().unwrap_or("exchange"),
        )?;
    }
    Ok(())
}

/// A peer's clock offset and its error bound, in ms.
fn clock_ms(entry: &Value) -> String {
    let ms = |key: &str| entry[key].as_f64().unwrap_or(0.0) / 1e6;
    format!(
        "{:+.3} ms (±{:.3} ms)",
        ms("clock_offset_ns"),
        ms("clock_error_ns")
    )
}

fn write_summary(out: &mut String, dir: &Path, s: &Value) -> std::fmt::Result {
    writeln!(out, "capture   {}", dir.display())?;
    let sessions = s["sessions"].as_array().cloned().unwrap_or_default();
    let complete = sessions.iter().filter(|x| x["complete"] == true).count();
    writeln!(out, "sessions  {} ({complete} complete)", sessions.len())?;
    if let (Some(first), Some(last)) = (s["first_ns"].as_u64(), s["last_ns"].as_u64()) {
        let secs = |ns: u64| ns as f64 / 1e9;
        writeln!(
            out,
            "time      {:.3}s .. {:.3}s (CLOCK_MONOTONIC), {:.3}s",
            secs(first),
            secs(last),
            secs(last - first)
        )?;
    }
    for source in s["sources"].as_array().into_iter().flatten() {
        let name = source["name"].as_str().unwrap_or_default();
        let lost = lost(&s["sessions"], name);
        writeln!(
            out,
            "source    {name}: {} records, lost {lost}",
            source["records"]
        )?;
    }
    for session in &sessions {
        write_triggers(out, &session["triggers"])?;
        let released = session["pins_released"].as_u64().unwrap_or(0);
        if released > 0 {
            writeln!(
                out,
                "released  {released} kept windows, the oldest, past their share of the disk budget"
            )?;
        }
        if let Some(error) = session["store_error"].as_str() {
            writeln!(
                out,
                "stopped   by a store error: {error}; {} records held in memory were not \
                 written (the sources' losses count those received after it)",
                session["unflushed"].as_u64().unwrap_or(0)
            )?;
        }
    }
    let mib = s["bytes"].as_u64().unwrap_or(0) as f64 / f64::from(1 << 20);
    writeln!(out, "size      {mib:.1} MiB")?;
    if s["torn_chunks"].as_u64().unwrap_or(0) > 0 {
        writeln!(
            out,
            "torn      {} unfinished chunks at the end (a crash); they are ignored",
            s["torn_chunks"]
        )?;
    }
    Ok(())
}
