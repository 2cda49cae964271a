//! Opening an existing capture directory: find the last complete chunk,
//! cut anything after it (when writable), and say what was cut.
//!
//! A chunk is complete when its time entry, summaries and values (format
//! 2) pass their checksums and, for the newest chunk, its block does too. Writes append,
//! so a crash tears only the newest chunks: every time entry is checked,
//! but summaries and blocks only at the tail, reading no more than that
//! (older ones are verified when read). Foreign files are left alone.

use std::{fs::File, os::unix::fs::FileExt as _};

use crate::{
    dir::Dir,
    error::{Error, Result, io},
    format::{
        BlockHeader, FILE_HEADER_LEN, FileKind, FormatVersion, GROUP_ENTRY_LEN, GroupEntry,
        SUMMARY_LEN, Summary, TimeEntry, check_file_header, closed_whole,
    },
    reclaim::GroupWalk,
    schema::{Closed, Meta, SourceId},
    segment_name, segment_number, values,
};

/// What opening a store found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Complete chunks kept.
    pub chunks: u64,
    /// Chunks whose writing was cut short (lost).
    pub cut_chunks: u64,
    /// Records in the cut chunks whose time entries are intact (chunks
    /// whose time entry is torn too are not counted).
    pub cut_records: u64,
    /// Bytes removed from the ends of files (0 when opened read-only).
    pub cut_bytes: u64,
    /// Record segments deleted by the disk budget.
    pub deleted_segments: Vec<u64>,
    /// One line per problem found: file, offset, what.
    pub notes: Vec<String>,
    pub(crate) last_ts: u64,
    pub(crate) prev: Vec<Option<u64>>,
    pub(crate) next_summary: u64,
    /// Where the values log's next entry goes (format 2).
    pub(crate) values_end: u64,
    /// The end of the groups log's intact entries (format 3).
    pub(crate) groups_end: u64,
}

/// How a capture is opened, for what recovery may do about damage.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Open {
    /// To append: a crashed capture's torn tail is cut off the files.
    Write,
    /// To read: nothing changes on disk; damage to a closed capture fails.
    /// A capture that closed cleanly is taken as its close recorded it
    /// (its newest chunk and its files' lengths checked); queries check
    /// the rest as they read it.
    Read,
    /// As `Read`, with every time entry and group walked at open, as
    /// `weft check` reports what opening finds.
    Verify,
    /// To read a closed capture despite damage: all its chunks are kept,
    /// and the snapshot leaves out those `check` finds damaged.
    SkipDamaged,
}

pub(crate) fn recover(dir: &Dir, open: Open) -> Result<(Meta, Recovery)> {
    let mut meta = Meta::load(dir)?;
    let mut notes = Vec::new();
    let segments = segments_on_disk(dir, &mut notes)?;
    if open == Open::Read
        && let Some(recovery) = closed_as_recorded(dir, &mut meta, &segments)
    {
        return Ok((meta, Recovery { notes, ..recovery }));
    }
    let recovery = Recovery {
        notes,
        ..Recovery::default()
    };
    walk(dir, open, meta, recovery, &segments)
}

/// [`recover`] by walking every time entry and group from the first
/// segment on disk.
fn walk(
    dir: &Dir,
    open: Open,
    mut meta: Meta,
    mut recovery: Recovery,
    segments: &[u64],
) -> Result<(Meta, Recovery)> {
    let writable = open == Open::Write;
    let per_segment = u64::from(meta.blocks_per_segment);
    let base = first_on_disk(segments, per_segment);
    let time = TimeLog::read(dir, base)?;
    let format = time.format;
    meta.format = format;
    let chunks = open_log(dir, "chunks.log", FileKind::Chunks, format)?;
    let values = (format.has_values())
        .then(|| open_log(dir, "values.log", FileKind::Values, format))
        .transpose()?;
    let groups = (format.has_groups())
        .then(|| open_log(dir, "groups.log", FileKind::Groups, format))
        .transpose()?;
    // What would be cut from a crashed capture: damage in a closed one.
    let mut damage = Vec::new();
    let deleted = |chunk| is_deleted(segments, chunk / per_segment);
    let entries = valid_time_entries(&time, deleted, &mut damage);
    let whole = whole_entries(&entries, (&chunks, format), values.as_ref(), &mut damage);
    let mut kept = base + whole as u64;
    // The newest block must be intact too; older ones are checked on read.
    while let Some(last) = kept.checked_sub(1) {
        let segment = last / per_segment;
        if !segments.contains(&segment) {
            break;
        }
        match read_block(dir, &meta, last) {
            Ok(()) => break,
            Err(note) => {
                damage.push(note);
                kept = last;
            }
        }
    }
    let entry_len = TimeEntry::len(format) as u64;
    let on_disk_chunks = time.size.saturating_sub(FILE_HEADER_LEN as u64) / entry_len;
    recovery.chunks = kept;
    recovery.cut_chunks = on_disk_chunks.max(base + whole as u64) - kept;
    recovery.cut_records = (entries
        .get((kept - base) as usize..)
        .unwrap_or_default()
        .iter())
    .map(|e| u64::from(e.records))
    .sum();
    recovery.deleted_segments = (0..=kept.saturating_sub(1) / per_segment)
        .filter(|s| kept > 0 && is_deleted(segments, *s))
        .collect();
    recovery.values_end = FILE_HEADER_LEN as u64;
    let newest = kept.checked_sub(1).filter(|i| *i >= base);
    if let Some(last) = newest.and_then(|i| entries.get((i - base) as usize)) {
        recovery.last_ts = last.last_ts;
        // The first entry read after deleted segments follows no other:
        // its offsets are only as good as its summaries' checksums.
        recovery.next_summary = last.first_summary.saturating_add(u64::from(last.summaries));
        recovery.values_end = recovery
            .values_end
            .max(last.values_at.saturating_add(u64::from(last.values_len)));
    }
    let groups_end = |kept, damage: &mut Vec<String>| {
        (groups.as_ref()).map_or(FILE_HEADER_LEN as u64, |g| {
            intact_groups((g, format), kept, damage)
        })
    };
    recovery.groups_end = groups_end(kept, &mut damage);
    if let Some(closed) = &meta.closed {
        let whole = Whole {
            dir,
            meta: &meta,
            recovery: &recovery,
            time_len: time.size,
            segments,
        };
        let checked = (damage.first().cloned()).map_or_else(|| whole.check(closed), Err);
        match checked {
            Ok(()) => {}
            Err(_) if open == Open::SkipDamaged => {
                recovery.chunks = closed.chunks;
                recovery.cut_chunks = 0;
                recovery.cut_records = 0;
                recovery.deleted_segments.clone_from(&closed.deleted);
                recovery.groups_end = groups_end(closed.chunks, &mut damage);
            }
            Err(what) => {
                return Err(Error::Damaged {
                    dir: dir.path().to_owned(),
                    what: what.trim_end_matches("; cut here").to_owned(),
                });
            }
        }
    }
    recovery.notes.extend(damage);
    if writable {
        // Only a writer continues the per-source back-pointer chains.
        recovery.prev = last_addresses(&meta, &entries[..(kept - base) as usize], &chunks);
        recovery.cut_bytes = truncate(dir, &meta, &recovery, segments)?;
    }
    Ok((meta, recovery))
}

/// A capture that closed cleanly, opened without walking its logs: its
/// close recorded how many chunks it holds and where the groups log ends,
/// so only the newest chunk's time entry, summaries and values are read
/// (they say where the logs end) and every file's length is held against
/// the close. Everything else is checked when a query reads it (a closed
/// capture has no torn tail to find), so opening costs the same on a
/// capture of any length. `None` where anything differs: the full walk
/// then finds and names it.
fn closed_as_recorded(dir: &Dir, meta: &mut Meta, segments: &[u64]) -> Option<Recovery> {
    let closed = meta.closed.as_ref()?;
    let groups_end = closed.groups_end?;
    let last = closed.chunks.checked_sub(1)?;
    let per_segment = u64::from(meta.blocks_per_segment);
    if !segments.contains(&(last / per_segment)) {
        return None;
    }
    let time = TimeLog::read(dir, last).ok()?;
    let format = time.format;
    meta.format = format;
    let meta = &*meta;
    let entry = TimeEntry::decode(&time.entries, format).filter(|e| e.chunk == last)?;
    let chunks = open_log(dir, "chunks.log", FileKind::Chunks, format).ok()?;
    summaries_of(&chunks, &entry, format)?;
    if format.has_values() {
        let values = open_log(dir, "values.log", FileKind::Values, format).ok()?;
        values_of(&values, &entry).ok()?;
    }
    let groups_end = if format.has_groups() {
        let groups = open_log(dir, "groups.log", FileKind::Groups, format).ok()?;
        (groups.metadata().ok()?.len() == groups_end).then_some(groups_end)?
    } else {
        FILE_HEADER_LEN as u64
    };
    let recovery = Recovery {
        chunks: closed.chunks,
        deleted_segments: (0..=last / per_segment)
            .filter(|s| is_deleted(segments, *s))
            .collect(),
        last_ts: entry.last_ts,
        next_summary: entry
            .first_summary
            .saturating_add(u64::from(entry.summaries)),
        values_end: (FILE_HEADER_LEN as u64)
            .max(entry.values_at.saturating_add(u64::from(entry.values_len))),
        groups_end,
        ..Recovery::default()
    };
    let whole = Whole {
        dir,
        meta,
        recovery: &recovery,
        time_len: time.size,
        segments,
    };
    whole.check(closed).ok()?;
    Some(recovery)
}

/// How many of `entries` count: the newest are left out while their
/// summaries or values are torn (each noted in `damage`).
fn whole_entries(
    entries: &[TimeEntry],
    (chunks, format): (&File, FormatVersion),
    values: Option<&File>,
    damage: &mut Vec<String>,
) -> usize {
    let mut whole = entries.len();
    while let Some(last) = entries[..whole].last() {
        let torn = if summaries_of(chunks, last, format).is_none() {
            format!(
                "chunks.log at offset {}: summaries of chunk {} are torn or corrupt; cut here",
                (last.first_summary.saturating_mul(SUMMARY_LEN as u64))
                    .saturating_add(FILE_HEADER_LEN as u64),
                last.chunk
            )
        } else if let Some(Err(what)) = values.map(|v| values_of(v, last)) {
            format!("values.log at offset {}: {what}; cut here", last.values_at)
        } else {
            break;
        };
        damage.push(torn);
        whole -= 1;
    }
    whole
}

/// What recovery found of a capture that closed cleanly, to hold against
/// what its close recorded: nothing may be missing or past the end.
struct Whole<'a> {
    dir: &'a Dir,
    meta: &'a Meta,
    recovery: &'a Recovery,
    time_len: u64,
    segments: &'a [u64],
}

impl Whole<'_> {
    fn check(&self, closed: &Closed) -> std::result::Result<(), String> {
        let (meta, recovery) = (self.meta, self.recovery);
        if recovery.chunks != closed.chunks {
            return Err(format!(
                "time.log: {} intact chunks where the capture closed with {}",
                recovery.chunks, closed.chunks
            ));
        }
        let entries = FILE_HEADER_LEN as u64 + closed.chunks * TimeEntry::len(meta.format) as u64;
        let mut ends = vec![
            ("time.log", entries, self.time_len),
            (
                "chunks.log",
                FILE_HEADER_LEN as u64 + recovery.next_summary * SUMMARY_LEN as u64,
                size(self.dir, "chunks.log"),
            ),
        ];
        if meta.format.has_values() {
            ends.push((
                "values.log",
                recovery.values_end,
                size(self.dir, "values.log"),
            ));
        }
        if meta.format.has_groups() {
            ends.push((
                "groups.log",
                recovery.groups_end,
                size(self.dir, "groups.log"),
            ));
        }
        for (name, end, size) in ends {
            if size > end {
                return Err(format!(
                    "{name} at offset {end}: {} bytes past its end",
                    size - end
                ));
            }
        }
        if recovery.deleted_segments != closed.deleted {
            let lost = (recovery.deleted_segments.iter()).find(|s| !closed.deleted.contains(s));
            return Err(lost.map_or_else(
                || "a segment the disk budget deleted is back".to_owned(),
                |s| format!("{} is missing", self.dir.join(&segment_name(*s)).display()),
            ));
        }
        self.check_segments(closed.chunks)
    }

    /// Every segment on disk holds its blocks and nothing past them.
    fn check_segments(&self, chunks: u64) -> std::result::Result<(), String> {
        let per_segment = u64::from(self.meta.blocks_per_segment);
        let block = u64::from(self.meta.block_size);
        for &segment in self.segments {
            let name = segment_name(segment);
            let path = self.dir.join(&name);
            let blocks = chunks
                .saturating_sub(segment * per_segment)
                .min(per_segment);
            if blocks == 0 {
                return Err(format!("{}: past the capture's last chunk", path.display()));
            }
            let end = FILE_HEADER_LEN as u64 + blocks * block;
            let size = size(self.dir, &name);
            if size != end {
                return Err(format!(
                    "{}: {size} bytes where its {blocks} blocks end at {end}",
                    path.display()
                ));
            }
        }
        Ok(())
    }
}

/// The length of the file `name`, 0 if it cannot be read.
fn size(dir: &Dir, name: &str) -> u64 {
    dir.stat(name)
        .map_or(0, |s| u64::try_from(s.st_size).unwrap_or(0))
}

/// Opens the log `name` and checks that its header is `kind` in `format`.
pub(crate) fn open_log(
    dir: &Dir,
    name: &str,
    kind: FileKind,
    format: FormatVersion,
) -> Result<File> {
    let path = dir.join(name);
    let file = dir.open_file(name)?;
    let mut header = [0u8; FILE_HEADER_LEN];
    file.read_exact_at(&mut header, 0)
        .map_err(io("read", &path))?;
    let (found, _) = check_file_header(&header, kind, &path)?;
    if found != format {
        return Err(Error::Corrupt {
            path,
            offset: 0,
            what: format!(
                "format {} where time.log is format {}",
                found as u8, format as u8
            ),
        });
    }
    Ok(file)
}

/// The most of the time log read at once: entries of 18 million chunks
/// kept (4.5 TiB of records at the default 256 KiB), where a forged capture
/// (a sparse file of any length) must not make weft allocate without bound.
const TIME_READ_LIMIT: u64 = 1 << 30;

/// The time log from the first chunk recovery reads on.
pub(crate) struct TimeLog {
    pub format: FormatVersion,
    /// The chunk of the first entry in `entries`.
    pub base: u64,
    /// The entries from `base` on.
    pub entries: Vec<u8>,
    /// The file's size.
    pub size: u64,
}

impl TimeLog {
    /// Reads `dir`'s time log from chunk `base` on (the entries before it
    /// are of deleted segments).
    pub fn read(dir: &Dir, base: u64) -> Result<Self> {
        let path = dir.join("time.log");
        let file = dir.open_file("time.log")?;
        let size = file.metadata().map_err(io("stat", &path))?.len();
        let mut header = [0u8; FILE_HEADER_LEN];
        let head = usize::try_from(size).map_or(FILE_HEADER_LEN, |s| s.min(FILE_HEADER_LEN));
        file.read_exact_at(&mut header[..head], 0)
            .map_err(io("read", &path))?;
        let (format, _) = check_file_header(&header[..head], FileKind::Time, &path)?;
        let from = (FILE_HEADER_LEN as u64)
            .saturating_add(base.saturating_mul(TimeEntry::len(format) as u64));
        let len = size.saturating_sub(from);
        if len > TIME_READ_LIMIT {
            return Err(Error::Corrupt {
                path,
                offset: from,
                what: format!(
                    "{len} bytes of entries past the deleted segments, more than the {TIME_READ_LIMIT} a store writes"
                ),
            });
        }
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let mut entries = vec![0u8; len];
        file.read_exact_at(&mut entries, from)
            .map_err(io("read", &path))?;
        Ok(Self {
            format,
            base,
            entries,
            size,
        })
    }
}

/// Time entries from the log's base on that are valid and chained. An
/// entry of a `deleted` chunk may be zeros (freed); one stands in for it
/// with no summaries, and the chain starts again after it.
fn valid_time_entries(
    time: &TimeLog,
    deleted: impl Fn(u64) -> bool,
    notes: &mut Vec<String>,
) -> Vec<TimeEntry> {
    let format = time.format;
    let len = TimeEntry::len(format);
    let mut entries: Vec<TimeEntry> = Vec::new();
    // Whether the last entry is a real one the next must follow.
    let mut chained = time.base == 0;
    for (chunk, raw) in (time.base..).zip(time.entries.chunks(len)) {
        let offset = FILE_HEADER_LEN as u64 + chunk * len as u64;
        if deleted(chunk) && raw.iter().all(|b| *b == 0) {
            entries.push(TimeEntry {
                chunk,
                ..TimeEntry::default()
            });
            chained = false;
            continue;
        }
        let Some(entry) = TimeEntry::decode(raw, format).filter(|e| e.chunk == chunk) else {
            notes.push(format!(
                "time.log at offset {offset}: torn or corrupt time entry; cut here"
            ));
            break;
        };
        if chained && let Err(what) = follows(entries.last(), &entry, format) {
            notes.push(format!("time.log at offset {offset}: {what}; cut here"));
            break;
        }
        chained = true;
        entries.push(entry);
    }
    entries
}

/// The first chunk of the oldest of `segments` (ascending): those before
/// it are all deleted, their index entries freed, and not read.
pub(crate) fn first_on_disk(segments: &[u64], per_segment: u64) -> u64 {
    segments.first().map_or(0, |s| s * per_segment)
}

/// Whether `segment` is gone the way the disk budget deletes: not among
/// `segments` (ascending) yet older than one that is (a newer one is lost
/// instead), or none is left at all (the budget never deletes the newest,
/// so a closed capture that says it deleted none is then damaged).
pub(crate) fn is_deleted(segments: &[u64], segment: u64) -> bool {
    segments.binary_search(&segment).is_err() && segments.last().is_none_or(|n| segment < *n)
}

/// The record segments in `dir`, ascending; a note for each file that is
/// not the store's.
pub(crate) fn segments_on_disk(dir: &Dir, notes: &mut Vec<String>) -> Result<Vec<u64>> {
    let mut segments = Vec::new();
    for name in dir.names()? {
        match segment_number(&name) {
            Some(segment) => segments.push(segment),
            None if [
                "meta",
                "chunks.log",
                "values.log",
                "groups.log",
                "time.log",
                crate::rollup::ROLLUPS,
            ]
            .contains(&name.as_ref()) => {}
            None => notes.push(format!(
                "{}: not a store file; left alone",
                dir.join(&name).display()
            )),
        }
    }
    segments.sort_unstable();
    Ok(segments)
}

pub(crate) fn read_block(dir: &Dir, meta: &Meta, chunk: u64) -> std::result::Result<(), String> {
    let per_segment = u64::from(meta.blocks_per_segment);
    let name = segment_name(chunk / per_segment);
    let path = dir.join(&name);
    let file = dir.open_file(&name).map_err(|e| e.to_string())?;
    let mut header = [0u8; FILE_HEADER_LEN];
    file.read_exact_at(&mut header, 0)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    check_file_header(&header, FileKind::Records, &path).map_err(|e| e.to_string())?;
    let size = meta.block_size as usize;
    let offset = FILE_HEADER_LEN + (chunk % per_segment) as usize * size;
    let mut block = vec![0u8; size];
    file.read_exact_at(&mut block, offset as u64).map_err(|_| {
        format!(
            "{} at offset {offset}: block of chunk {chunk} is cut short",
            path.display()
        )
    })?;
    match BlockHeader::open(&block) {
        Ok(header) if header.number == chunk => Ok(()),
        Ok(header) => Err(format!(
            "{} at offset {offset}: holds block {}, not {chunk}",
            path.display(),
            header.number
        )),
        Err(what) => Err(format!("{} at offset {offset}: {what}", path.display())),
    }
}

/// The summaries of `entry`'s chunk, if they are all there and intact.
pub(crate) fn summaries_of(
    chunks: &File,
    entry: &TimeEntry,
    format: FormatVersion,
) -> Option<Vec<Summary>> {
    let len = u64::from(entry.summaries) * SUMMARY_LEN as u64;
    let offset = (entry.first_summary.checked_mul(SUMMARY_LEN as u64))
        .and_then(|at| at.checked_add(FILE_HEADER_LEN as u64))?;
    let bytes = read_exact(chunks, offset, len)?;
    if format.closes_summaries() && !closed_whole(&bytes, entry.chunk) {
        return None;
    }
    bytes
        .chunks(SUMMARY_LEN)
        .map(|raw| Summary::decode(raw).filter(|s| s.chunk == entry.chunk))
        .collect()
}

/// Where the groups log's intact entries end: each in chunk order, of
/// kept chunks only, the newest with every summary intact (a torn write
/// is cut like a torn chunk; older damage is found when read).
fn intact_groups(
    (groups, format): (&File, FormatVersion),
    kept: u64,
    notes: &mut Vec<String>,
) -> u64 {
    let size = groups.metadata().map_or(0, |m| m.len());
    let mut walk = GroupWalk::new(groups, size);
    let mut last = None;
    let mut at = loop {
        match walk.next() {
            Some((start, entry)) if entry.range().end > kept => break start,
            Some((start, entry)) => last = Some((start, entry)),
            None => break walk.at,
        }
    };
    if let Some((start, entry)) = last
        && !group_summaries_intact((groups, format), start, &entry)
    {
        notes.push(format!(
            "groups.log at offset {start}: summaries of chunks {:?} are torn or corrupt; cut here",
            entry.range()
        ));
        at = start;
    }
    if at < size {
        notes.push(format!(
            "groups.log at offset {at}: {} bytes past the last intact entry are ignored",
            size - at
        ));
    }
    at
}

/// Whether `entry`'s summaries and values start where those of the chunk
/// before it, `previous` (`None`: there is none), ended: both logs are
/// appended chunk after chunk.
pub(crate) fn follows(
    previous: Option<&TimeEntry>,
    entry: &TimeEntry,
    format: FormatVersion,
) -> std::result::Result<(), String> {
    let first = previous.map_or(0, |e| {
        e.first_summary.saturating_add(u64::from(e.summaries))
    });
    if entry.first_summary != first {
        return Err(format!(
            "chunk {} claims summaries from {} where {first} was next",
            entry.chunk, entry.first_summary
        ));
    }
    let values = previous.map_or(FILE_HEADER_LEN as u64, |e| {
        e.values_at.saturating_add(u64::from(e.values_len))
    });
    if format.has_values() && entry.values_at != values {
        return Err(format!(
            "chunk {} claims values at {} where {values} was next",
            entry.chunk, entry.values_at
        ));
    }
    Ok(())
}

/// Whether the summaries of the groups-log entry `entry`, whose header is
/// at `at`, can all be read and pass their checksums.
pub(crate) fn group_summaries_intact(
    (groups, format): (&File, FormatVersion),
    at: u64,
    entry: &GroupEntry,
) -> bool {
    let len = u64::from(entry.summaries) * SUMMARY_LEN as u64;
    read_exact(groups, at + GROUP_ENTRY_LEN as u64, len).is_some_and(|bytes| {
        (!format.closes_summaries() || closed_whole(&bytes, entry.first_chunk))
            && bytes
                .chunks(SUMMARY_LEN)
                .all(|raw| Summary::decode(raw).is_some_and(|s| s.chunk == entry.first_chunk))
    })
}

/// `len` bytes of `file` from `offset`; `None` when the file ends first.
/// The size is checked before allocating: a length read from a damaged
/// (or forged) entry must not exhaust memory.
pub(crate) fn read_exact(file: &File, offset: u64, len: u64) -> Option<Vec<u8>> {
    if offset.checked_add(len)? > file.metadata().ok()?.len() {
        return None;
    }
    let mut bytes = vec![0u8; usize::try_from(len).ok()?];
    file.read_exact_at(&mut bytes, offset).ok()?;
    Some(bytes)
}

/// Checks the values-log entry of `entry`'s chunk.
pub(crate) fn values_of(values: &File, entry: &TimeEntry) -> std::result::Result<(), String> {
    let bytes = read_exact(values, entry.values_at, u64::from(entry.values_len))
        .ok_or_else(|| format!("values of chunk {} are cut short", entry.chunk))?;
    values::check(&bytes, entry.chunk).map(|_| ())
}

/// Each source's newest record address, from the per-source summaries of
/// the newest chunks back.
fn last_addresses(meta: &Meta, entries: &[TimeEntry], chunks: &File) -> Vec<Option<u64>> {
    let mut prev: Vec<Option<u64>> = vec![None; meta.sources.len()];
    for entry in entries.iter().rev() {
        if prev.iter().all(Option::is_some) {
            break;
        }
        for summary in summaries_of(chunks, entry, meta.format).unwrap_or_default() {
            if summary.index == 0
                && let Some(slot) = prev.get_mut(usize::from(summary.source as SourceId))
            {
                slot.get_or_insert(summary.last_addr);
            }
        }
    }
    prev
}

/// Cuts every file back to the kept chunks; returns the bytes removed.
fn truncate(dir: &Dir, meta: &Meta, recovery: &Recovery, segments: &[u64]) -> Result<u64> {
    let chunks = recovery.chunks;
    let mut cut = cut_to(
        dir,
        "time.log",
        (FILE_HEADER_LEN + chunks as usize * TimeEntry::len(meta.format)) as u64,
    )?;
    cut += cut_to(
        dir,
        "chunks.log",
        FILE_HEADER_LEN as u64 + recovery.next_summary * SUMMARY_LEN as u64,
    )?;
    if meta.format.has_values() {
        cut += cut_to(dir, "values.log", recovery.values_end)?;
    }
    if meta.format.has_groups() {
        cut += cut_to(dir, "groups.log", recovery.groups_end)?;
    }
    let per_segment = u64::from(meta.blocks_per_segment);
    let active = chunks / per_segment;
    for segment in segments.iter().copied().filter(|s| *s >= active) {
        let name = segment_name(segment);
        // The active segment keeps its blocks. One that would keep none
        // goes, as later ones do: a crash between creating it and writing
        // its header leaves it empty, and the flusher would reopen it
        // without writing the header again.
        if segment == active && !chunks.is_multiple_of(per_segment) {
            cut += cut_to(
                dir,
                &name,
                FILE_HEADER_LEN as u64 + (chunks % per_segment) * u64::from(meta.block_size),
            )?;
        } else {
            let size = size(dir, &name);
            dir.remove(&name)?;
            cut += size;
        }
    }
    if cut > 0 {
        dir.sync()?;
    }
    Ok(cut)
}

/// Truncates the file `name` to `len` bytes if longer; returns the bytes removed.
fn cut_to(dir: &Dir, name: &str, len: u64) -> Result<u64> {
    let path = &dir.join(name);
    let file = dir.open_file_rw(name)?;
    let size = file.metadata().map_err(io("stat", path))?.len();
    if size <= len {
        return Ok(0);
    }
    file.set_len(len).map_err(io("truncate", path))?;
    file.sync_all().map_err(io("fsync", path))?;
    Ok(size - len)
}

/// Opens a store read-only: the same checks, nothing changed on disk.
/// Each chunk's time entry in `dir`'s time log, `None` where it is damaged.
pub(crate) fn time_entries(dir: &Dir, meta: &Meta) -> Result<Vec<Option<TimeEntry>>> {
    let time = dir.read("time.log", TIME_READ_LIMIT)?;
    let len = TimeEntry::len(meta.format);
    let raw = time.get(FILE_HEADER_LEN..).unwrap_or_default().chunks(len);
    Ok((0u64..)
        .zip(raw)
        .map(|(chunk, raw)| TimeEntry::decode(raw, meta.format).filter(|e| e.chunk == chunk))
        .collect())
}

/// Time entries for the `damaged` chunks (ascending): their own where it
/// is intact, else one that stands in for it between its neighbours, so
/// the time index stays ordered: its span from the last time before to
/// the first after (`u64::MAX` when none is), no summaries, no records.
pub(crate) fn stand_ins(
    entries: &[Option<TimeEntry>],
    damaged: &[u64],
) -> std::collections::BTreeMap<u64, TimeEntry> {
    let mut out = std::collections::BTreeMap::new();
    let mut previous: Option<TimeEntry> = None;
    let mut next_intact = 0;
    for &chunk in damaged {
        let at = chunk as usize;
        // The last entry before `chunk`, intact or standing in.
        if let Some(before) = at.checked_sub(1) {
            previous = out
                .get(&(chunk - 1))
                .copied()
                .or_else(|| entries.get(before).copied().flatten())
                .or(previous);
        }
        if let Some(entry) = entries.get(at).copied().flatten() {
            out.insert(chunk, entry);
            continue;
        }
        next_intact = next_intact.max(at + 1);
        while next_intact < entries.len() && entries[next_intact].is_none() {
            next_intact += 1;
        }
        let after = entries.get(next_intact).copied().flatten();
        let start = previous.map_or(after.map_or(0, |a| a.first_ts), |p| p.last_ts);
        let stand_in = TimeEntry {
            chunk,
            first_ts: start,
            // Past the last intact entry, the chunk's end is unknown.
            last_ts: after.map_or(u64::MAX, |a| a.first_ts.max(start)),
            first_summary: previous.map_or(0, |p| {
                p.first_summary.saturating_add(u64::from(p.summaries))
            }),
            summaries: 0,
            records: 0,
            values_at: previous.map_or(FILE_HEADER_LEN as u64, |p| {
                p.values_at.saturating_add(u64::from(p.values_len))
            }),
            values_len: 0,
        };
        out.insert(chunk, stand_in);
    }
    out
}

pub(crate) fn open_read_only(dir: &Dir, open: Open) -> Result<(Meta, Recovery)> {
    if !dir.contains("meta") {
        return Err(Error::Invalid(format!(
            "{} is not a weft capture (no meta file)",
            dir.path().display()
        )));
    }
    recover(dir, open)
}
