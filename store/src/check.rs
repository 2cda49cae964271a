//! Verifying a whole capture (`weft check`): every checksum of every file,
//! every damage listed. Opening stops at the first damage and queries
//! verify only what they read; this reads everything once.

use std::{fs, path::Path};

use crate::{
    dir::Dir,
    error::{Error, Result},
    format::{FILE_HEADER_LEN, FileKind, FormatVersion, SUMMARY_LEN, TimeEntry},
    reclaim::GroupWalk,
    recovery::{
        self, TimeLog, first_on_disk, follows, group_summaries_intact, is_deleted, open_log,
        read_block, summaries_of, values_of,
    },
    rollup::{ROLLUPS, Rollups},
    schema::Meta,
    segment_name,
};

/// What [`check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Chunks whose time entry is intact, or was freed with the segment
    /// the disk budget deleted.
    pub chunks: u64,
    /// Records those chunks hold, of segments still on disk.
    pub records: u64,
    /// Chunks whose segment the disk budget deleted (not read).
    pub deleted: u64,
    /// One line per damage: file, offset, what.
    pub problems: Vec<String>,
    /// The same for the unfinished chunks at the end of a capture that did
    /// not close cleanly (what a crash tears, and reads leave out).
    pub unfinished: Vec<String>,
    /// Chunks with any damage (time entry, summaries, values or block),
    /// ascending, the unfinished tail of a crash apart: what
    /// `--skip-damaged` leaves out.
    pub damaged_chunks: Vec<u64>,
}

/// Verifies every part of the capture at `dir`. An error only when there
/// is nothing to check against (no readable `meta` or `time.log`); damage
/// is listed in the report.
pub fn check(path: &Path) -> Result<Report> {
    check_dir(&Dir::open(path)?)
}

/// [`check`] of an open capture directory.
pub(crate) fn check_dir(dir: &Dir) -> Result<Report> {
    if !dir.contains("meta") {
        return Err(Error::Invalid(format!(
            "{} is not a weft capture (no meta file)",
            dir.path().display()
        )));
    }
    let meta = Meta::load(dir)?;
    let mut report = Report::default();
    // What opening finds: where a crashed capture's unfinished tail
    // begins, or a closed capture's missing and extra parts.
    let (kept, opening) = match recovery::recover(dir, recovery::Open::Verify) {
        Ok((_, recovery)) => (recovery.chunks, None),
        Err(Error::Damaged { what, .. }) => (u64::MAX, Some(what)),
        Err(error @ Error::Corrupt { .. }) => (u64::MAX, Some(error.to_string())),
        Err(error) => return Err(error),
    };
    let per_segment = u64::from(meta.blocks_per_segment);
    let segments = recovery::segments_on_disk(dir, &mut Vec::new())?;
    let base = first_on_disk(&segments, per_segment);
    (report.chunks, report.deleted) = (base, base);
    let time = TimeLog::read(dir, base)?;
    let format = time.format;
    let chunks = open_log(dir, "chunks.log", FileKind::Chunks, format)?;
    let values = (format.has_values())
        .then(|| open_log(dir, "values.log", FileKind::Values, format))
        .transpose()?;
    let deleted = meta.closed.as_ref().map(|c| c.deleted.clone());
    let len = TimeEntry::len(format);
    let mut on_disk = base;
    // The previous chunk's time entry (`None` before chunk 0), while every
    // entry so far is intact enough to say where this one's parts begin.
    let mut previous: Option<Option<TimeEntry>> = (base == 0).then_some(None);
    for (chunk, raw) in (base..).zip(time.entries.chunks(len)) {
        on_disk = chunk + 1;
        let offset = FILE_HEADER_LEN as u64 + chunk * len as u64;
        let before = report.problems.len();
        let mut lost = false;
        let segment = chunk / per_segment;
        if is_deleted(&segments, segment) && raw.iter().all(|b| *b == 0) {
            // A deleted segment's entry, freed.
            report.chunks += 1;
            report.deleted += 1;
            previous = None;
            continue;
        }
        'chunk: {
            let problems = if chunk >= kept {
                &mut report.unfinished
            } else {
                &mut report.problems
            };
            let Some(entry) = TimeEntry::decode(raw, format).filter(|e| e.chunk == chunk) else {
                previous = None;
                let what = "time entry fails its checksum";
                problems.push(format!(
                    "time.log at offset {offset}: chunk {chunk}'s {what}"
                ));
                break 'chunk;
            };
            report.chunks += 1;
            // Only an intact neighbour tells where this chunk's parts begin.
            if let Some(Err(what)) = previous.map(|p| follows(p.as_ref(), &entry, format)) {
                problems.push(format!("time.log at offset {offset}: {what}"));
            }
            previous = Some(Some(entry));
            if !dir.contains(&segment_name(segment)) {
                // A closed capture lists what its budget deleted (opening
                // reported any other loss); a crashed one cannot tell. Its
                // summaries and values may be freed: not read.
                if deleted.as_ref().is_none_or(|d| d.contains(&segment)) {
                    report.deleted += 1;
                } else {
                    lost = true;
                }
                break 'chunk;
            }
            report.records += u64::from(entry.records);
            if summaries_of(&chunks, &entry, format).is_none() {
                let at = (entry.first_summary.saturating_mul(SUMMARY_LEN as u64))
                    .saturating_add(FILE_HEADER_LEN as u64);
                problems.push(format!(
                    "chunks.log at offset {at}: summaries of chunk {chunk} fail their checksum"
                ));
            }
            if let Some(Err(what)) = values.as_ref().map(|v| values_of(v, &entry)) {
                problems.push(format!("values.log at offset {}: {what}", entry.values_at));
            }
            if let Err(what) = read_block(dir, &meta, chunk) {
                problems.push(what);
            }
        }
        if lost || report.problems.len() > before {
            report.damaged_chunks.push(chunk);
        }
    }
    // A closed capture's chunks past the end of a cut time log.
    if let Some(closed) = &meta.closed {
        report.damaged_chunks.extend(on_disk..closed.chunks);
    }
    check_merged(dir, format, kept, meta.closed.is_none(), &mut report)?;
    // Opening's complaint, unless a damage above is what it stopped at.
    // Lines name their place ("file at offset N") before the first ": ".
    let place = |line: &str| line.split(": ").next().unwrap_or_default().to_owned();
    if let Some(what) = opening
        && !report.problems.iter().any(|p| place(p) == place(&what))
    {
        report.problems.insert(0, what);
    }
    Ok(report)
}

/// The logs of merged summaries: the groups log's (chunks from `kept` on
/// are unfinished) and the rollups log's.
fn check_merged(
    dir: &Dir,
    format: FormatVersion,
    kept: u64,
    crashed: bool,
    report: &mut Report,
) -> Result<()> {
    if format.has_groups() {
        let groups = open_log(dir, "groups.log", FileKind::Groups, format)?;
        check_groups((&groups, format), kept, crashed, report);
    }
    check_rollups(dir, crashed, report);
    Ok(())
}

/// Every rollups-log entry's header and summaries, up to the first entry
/// that cannot be read; in a `crashed` capture that one is unfinished (an
/// append a crash tore).
fn check_rollups(dir: &Dir, crashed: bool, report: &mut Report) {
    let (rollups, end) = match Rollups::load(dir) {
        Ok(loaded) => loaded,
        Err(error) => return report.problems.push(error.to_string()),
    };
    let size = dir
        .stat(ROLLUPS)
        .map_or(0, |s| u64::try_from(s.st_size).unwrap_or(0));
    if end < size {
        let problems = if crashed {
            &mut report.unfinished
        } else {
            &mut report.problems
        };
        problems.push(format!(
            "rollups.log at offset {end}: an entry that fails its checksum, is out of order or is cut short"
        ));
    }
    for i in 0..rollups.entries.len() {
        if let Err(error) = rollups.summaries(dir, i, None) {
            report.problems.push(error.to_string());
        }
    }
}

/// Every groups-log entry's header and summaries, up to the first entry
/// that cannot be read (the ones after it cannot be found); in a
/// `crashed` capture, an entry of chunks from `kept` on, or one that
/// cannot be read, is unfinished.
fn check_groups(
    (groups, format): (&fs::File, FormatVersion),
    kept: u64,
    crashed: bool,
    report: &mut Report,
) {
    let size = groups.metadata().map_or(0, |m| m.len());
    let mut walk = GroupWalk::new(groups, size);
    loop {
        let Some((at, entry)) = walk.next() else {
            if walk.at >= size {
                return;
            }
            // A crash may tear the entry being written after its last
            // chunk committed; a closed capture has no such excuse.
            let problems = if crashed {
                &mut report.unfinished
            } else {
                &mut report.problems
            };
            problems.push(format!(
                "groups.log at offset {}: an entry that fails its checksum or is cut short",
                walk.at
            ));
            return;
        };
        if !group_summaries_intact((groups, format), at, &entry) {
            let problems = if entry.range().end > kept {
                &mut report.unfinished
            } else {
                &mut report.problems
            };
            problems.push(format!(
                "groups.log at offset {at}: summaries of chunks {:?} fail their checksum",
                entry.range()
            ));
        }
    }
}
