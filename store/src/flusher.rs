//! The background thread that writes sealed chunks to the capture directory
//! and enforces the disk budget.
//!
//! Per chunk it writes, in order: the block into its segment file, the
//! chunk's values into `values.log` (format 2), its summaries into
//! `chunks.log`, then its time entry into `time.log`. The time entry is the
//! commit point: recovery keeps a chunk only when its time entry, summaries,
//! values and block are all intact. After the last chunk of a run of
//! `group_chunks` (format 3), the run's merged summaries go into
//! `groups.log`; recovery drops an entry that names a chunk it did not keep.

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    fs::File,
    os::unix::fs::FileExt as _,
    sync::{Arc, mpsc},
    time::{Duration, Instant},
};

use crate::{
    config::{Config, Durability},
    dir::Dir,
    error::{Result, io},
    format::{
        FILE_HEADER_LEN, FileKind, FormatVersion, GroupEntry, Merged, SUMMARY_LEN, Summary,
        TimeEntry, file_header,
    },
    reclaim::{self, GroupWalk},
    roller::Roller,
    schema::Meta,
    segment_name, segment_number,
    shared::{Sealed, Shared, Snapshot},
    values::{self, Wide},
};

/// How often the budget and retention are applied within a segment.
const RETIRE_EVERY: Duration = Duration::from_secs(1);

/// Bytes of written blocks left in the page cache; older ones are dropped
/// from it once on the disk. A capture is written once and read rarely, so
/// its pages would only push the traced machine's own out of memory; and a
/// growing cache takes memory never touched before, which a VM's host must
/// fault in: 20 s into a 60 s flood the flusher's CPU tripled, nearly all
/// of it the copy into new page-cache pages, and the drain, sharing the one
/// other core, fell behind and lost records. Recycling the same pages keeps
/// that cost flat. A block is not waited for: on a disk slower than the
/// records, the ones not yet written stay cached, and the page cache
/// absorbs the burst as before rather than the drain stalling on the disk.
const CACHED_BEHIND: u64 = 32 << 20;

/// Creates `chunks.log`, `values.log`, `groups.log` and `time.log` with
/// their headers, in the current format.
pub(crate) fn create_logs(dir: &Dir) -> Result<()> {
    for (name, kind) in [
        ("chunks.log", FileKind::Chunks),
        ("values.log", FileKind::Values),
        ("groups.log", FileKind::Groups),
        ("time.log", FileKind::Time),
    ] {
        let file = dir.create(name)?;
        file.write_all_at(&file_header(kind, FormatVersion::CURRENT, 0), 0)
            .map_err(io("write", &dir.join(name)))?;
    }
    dir.sync()
}

struct Files {
    dir: Arc<Dir>,
    /// The segment a reopened capture goes on writing, which exists; every
    /// other segment is new and made with `O_EXCL`.
    resume: Option<u64>,
    format: FormatVersion,
    chunks: File,
    /// The values log and where its next entry goes (format 2 on).
    values: Option<(File, u64)>,
    /// The groups log and where its next entry goes (format 3).
    groups: Option<(File, u64)>,
    /// Where each groups-log entry not yet freed lies, by first chunk:
    /// its bytes and the end of its chunks (kept only under a budget or
    /// retention, which free them).
    group_at: BTreeMap<u64, (std::ops::Range<u64>, u64)>,
    time: File,
    segments: BTreeMap<u64, Arc<File>>,
    /// Every segment written to since the store opened, to sync at close.
    written: BTreeSet<u64>,
    /// Blocks written whose pages may still be cached, oldest first:
    /// file, offset, length.
    cached: VecDeque<(Arc<File>, u64, usize)>,
    /// Where deleted segments' summaries go, when they are kept.
    roller: Option<Roller>,
}

impl Files {
    fn open(
        dir: &Arc<Dir>,
        format: FormatVersion,
        (values_end, groups_end): (u64, u64),
        resume: u64,
        reclaims: bool,
    ) -> Result<Self> {
        let open = |name: &str| dir.open_file_rw(name);
        let values = if format.has_values() {
            Some((open("values.log")?, values_end))
        } else {
            None
        };
        let groups = if format.has_groups() {
            Some((open("groups.log")?, groups_end))
        } else {
            None
        };
        let group_at = match &groups {
            Some((file, end)) if reclaims => (GroupWalk::new(file, *end))
                .map(|(at, e)| (e.first_chunk, (at..at + e.len() as u64, e.range().end)))
                .collect(),
            _ => BTreeMap::new(),
        };
        Ok(Self {
            dir: Arc::clone(dir),
            resume: Some(resume).filter(|s| dir.contains(&segment_name(*s))),
            format,
            chunks: open("chunks.log")?,
            values,
            groups,
            group_at,
            time: open("time.log")?,
            segments: BTreeMap::new(),
            written: BTreeSet::new(),
            cached: VecDeque::new(),
            roller: None,
        })
    }

    /// Syncs everything written since the store opened (a closed capture
    /// must be whole on disk): the logs, the segments that still exist,
    /// the directory.
    fn sync_all(&self) -> Result<()> {
        let mut logs = vec![(&self.chunks, "chunks.log"), (&self.time, "time.log")];
        logs.extend(self.values.as_ref().map(|(file, _)| (file, "values.log")));
        logs.extend(self.groups.as_ref().map(|(file, _)| (file, "groups.log")));
        for (file, name) in logs {
            file.sync_data()
                .map_err(io("fdatasync", &self.dir.join(name)))?;
        }
        for segment in &self.written {
            let name = segment_name(*segment);
            // The disk budget may have deleted it since.
            if let Ok(file) = self.dir.open_file(&name) {
                file.sync_data()
                    .map_err(io("fdatasync", &self.dir.join(&name)))?;
            }
        }
        self.dir.sync()
    }

    /// The file of `segment`, made with its header if new. `durability`
    /// says whether its name must reach the disk now: with `Buffered` the
    /// close syncs the directory once. An fsync here, every few hundred ms
    /// of a flood, is a journal commit that can wait for other files' data,
    /// and while the flusher waits the drain's hand-off fills.
    fn segment(
        &mut self,
        segment: u64,
        block_size: u32,
        durability: Durability,
    ) -> Result<Arc<File>> {
        if !self.segments.contains_key(&segment) {
            let name = segment_name(segment);
            let file = if self.resume == Some(segment) {
                self.dir.open_file_rw(&name)?
            } else {
                let file = self.dir.create(&name)?;
                file.write_all_at(&file_header(FileKind::Records, self.format, block_size), 0)
                    .map_err(io("write", &self.dir.join(&name)))?;
                if durability == Durability::Sync {
                    self.dir.sync()?;
                }
                file
            };
            // Only the newest segment is written to; drop older handles.
            self.segments.retain(|s, _| *s > segment.saturating_sub(1));
            self.segments.insert(segment, Arc::new(file));
        }
        Ok(Arc::clone(&self.segments[&segment]))
    }

    /// Notes a block just written, and drops the oldest from the page cache
    /// once more than [`CACHED_BEHIND`] bytes are.
    fn cache_behind(&mut self, file: Arc<File>, offset: u64, len: usize) {
        self.cached.push_back((file, offset, len));
        let mut bytes: u64 = self.cached.iter().map(|(_, _, len)| *len as u64).sum();
        while bytes > CACHED_BEHIND {
            let Some((file, offset, len)) = self.cached.pop_front() else {
                break;
            };
            bytes -= len as u64;
            drop_from_cache(&file, offset, len);
        }
    }

    fn write(&mut self, sealed: &Sealed, wide: Wide, config: &Config, meta: &Meta) -> Result<()> {
        let (block_size, per_segment) = (meta.block_size, u64::from(meta.blocks_per_segment));
        let chunk = sealed.time.chunk;
        let segment = chunk / per_segment;
        let offset = (FILE_HEADER_LEN as u64) + (chunk % per_segment) * u64::from(block_size);
        let path = self.dir.join(&segment_name(segment));
        self.written.insert(segment);
        let file = self.segment(segment, block_size, config.durability)?;
        file.write_all_at(&sealed.block, offset)
            .map_err(io("write", &path))?;
        if config.durability == Durability::Sync {
            file.sync_data().map_err(io("fdatasync", &path))?;
        } else {
            start_writeback(&file, offset, sealed.block.len());
        }
        self.cache_behind(file, offset, sealed.block.len());
        let mut time = sealed.time;
        if let Some((values_file, end)) = &mut self.values {
            let entry = values::entry(meta, chunk, wide, &sealed.summaries, &sealed.block);
            let path = self.dir.join("values.log");
            values_file
                .write_all_at(&entry, *end)
                .map_err(io("write", &path))?;
            if config.durability == Durability::Sync {
                values_file.sync_data().map_err(io("fdatasync", &path))?;
            }
            time.values_at = *end;
            time.values_len = u32::try_from(entry.len()).unwrap_or(u32::MAX);
            *end += entry.len() as u64;
        }
        let mut summaries: Vec<u8> = sealed.summaries.iter().flat_map(Summary::encode).collect();
        if self.format.closes_summaries() {
            summaries.extend(Summary::closing(chunk, &summaries).encode());
        }
        let at = FILE_HEADER_LEN as u64 + sealed.time.first_summary * SUMMARY_LEN as u64;
        let chunks_path = self.dir.join("chunks.log");
        self.chunks
            .write_all_at(&summaries, at)
            .map_err(io("write", &chunks_path))?;
        if config.durability == Durability::Sync {
            self.chunks
                .sync_data()
                .map_err(io("fdatasync", &chunks_path))?;
        }
        let time_path = self.dir.join("time.log");
        let len = TimeEntry::len(self.format);
        let at = (FILE_HEADER_LEN + chunk as usize * len) as u64;
        self.time
            .write_all_at(&time.encode(self.format)[..len], at)
            .map_err(io("write", &time_path))?;
        if config.durability == Durability::Sync {
            self.time.sync_data().map_err(io("fdatasync", &time_path))?;
        }
        Ok(())
    }
}

impl Files {
    /// Appends a groups-log entry (after its chunks' time entries);
    /// returns where the log's intact entries now end.
    fn write_group(&mut self, entry: &[u8], config: &Config) -> Result<u64> {
        let Some((file, end)) = &mut self.groups else {
            return Ok(0);
        };
        let path = self.dir.join("groups.log");
        file.write_all_at(entry, *end).map_err(io("write", &path))?;
        if config.durability == Durability::Sync {
            file.sync_data().map_err(io("fdatasync", &path))?;
        }
        let reclaims = config.disk_budget.is_some() || config.retain.is_some();
        if reclaims
            && self.format.frees_entries()
            && let Some(group) = GroupEntry::decode(entry)
        {
            let bytes = *end..*end + entry.len() as u64;
            self.group_at
                .insert(group.first_chunk, (bytes, group.range().end));
        }
        *end += entry.len() as u64;
        Ok(*end)
    }

    /// Frees the index-log entries of the deleted segment `gone`, whose
    /// first and last time entries are `gone_entries` (read before it was
    /// marked deleted); returns the bytes freed. What lies between the last
    /// chunk kept before it and the first kept after it is all of deleted
    /// chunks, so the holes reach over it to free the blocks they share.
    fn reclaim(
        &mut self,
        snapshot: &Snapshot,
        gone: u64,
        (first, last): (TimeEntry, TimeEntry),
    ) -> Result<u64> {
        let per_segment = u64::from(snapshot.meta().blocks_per_segment);
        let kept = |chunk: u64| !snapshot.is_deleted(chunk);
        let before = (0..gone).rev().map(|s| s * per_segment).find(|c| kept(*c));
        let before = before
            .map(|c| snapshot.time_entry(c + per_segment - 1))
            .transpose()?;
        let newest = snapshot.chunks() / per_segment;
        let after = (gone + 1..=newest)
            .map(|s| s * per_segment)
            .find(|c| kept(*c));
        let after = after.map(|c| snapshot.time_entry(c)).transpose()?;
        let len = TimeEntry::len(self.format) as u64;
        let header = FILE_HEADER_LEN as u64;
        let summary = |n: u64| n.saturating_mul(SUMMARY_LEN as u64).saturating_add(header);
        let ends = |e: &TimeEntry| {
            (
                header + (e.chunk + 1) * len,
                summary(e.first_summary.saturating_add(u64::from(e.summaries))),
                e.values_at.saturating_add(u64::from(e.values_len)),
            )
        };
        let starts = |e: &TimeEntry| {
            (
                header + e.chunk * len,
                summary(e.first_summary),
                e.values_at,
            )
        };
        let freed = before.as_ref().map_or((header, header, header), ends);
        let (own_start, own_end) = (starts(&first), ends(&last));
        let to = after.as_ref().map_or(own_end, starts);
        // The time entries first: recovery and `check` take a zeroed
        // entry for a freed one and read nothing more of its chunk, so a
        // crash part way through leaves nothing that looks damaged.
        let mut bytes = 0;
        if self.format.frees_entries() {
            bytes += reclaim::free(&self.time, freed.0, (own_start.0, to.0));
            bytes += reclaim::free(&self.chunks, freed.1, (own_start.1, to.1));
            bytes += self.reclaim_groups(snapshot);
        }
        if let Some((values, _)) = &self.values {
            bytes += reclaim::free(values, freed.2, (own_start.2, to.2));
        }
        Ok(bytes)
    }

    /// Frees the groups-log entries whose chunks are all deleted.
    fn reclaim_groups(&mut self, snapshot: &Snapshot) -> u64 {
        let Some((file, end)) = &self.groups else {
            return 0;
        };
        let gone: Vec<u64> = (self.group_at.iter())
            .filter(|(first, (_, until))| (**first..*until).all(|c| snapshot.is_deleted(c)))
            .map(|(first, _)| *first)
            .collect();
        let mut bytes = 0;
        for first in gone {
            let Some((own, _)) = self.group_at.remove(&first) else {
                continue;
            };
            let freed = (self.group_at.range(..first).next_back())
                .map_or(FILE_HEADER_LEN as u64, |(_, (bytes, _))| bytes.end);
            let to =
                (self.group_at.range(first..).next()).map_or(*end, |(_, (bytes, _))| bytes.start);
            bytes += reclaim::free(file, freed, (own.start, to));
        }
        bytes
    }
}

/// The run of chunks being merged into the next groups-log entry. A run
/// starts at a multiple of its length and must see every chunk of it: a
/// capture reopened mid-run gets no entry for that run.
struct Grouper {
    size: u64,
    format: FormatVersion,
    /// The run so far (`chunks` 0: none).
    run: Merged,
}

impl Grouper {
    fn new(size: u32, format: FormatVersion) -> Self {
        Self {
            size: u64::from(size),
            format,
            run: Merged::new(0, (0, 0)),
        }
    }

    /// Adds a written chunk; returns the encoded entry when it ends a run.
    fn add(&mut self, sealed: &Sealed) -> Option<Vec<u8>> {
        let time = &sealed.time;
        let run = &mut self.run.entry;
        if time.chunk.is_multiple_of(self.size) {
            self.run = Merged::new(time.chunk, (time.first_ts, time.last_ts));
        } else if run.chunks == 0 || run.range().end != time.chunk {
            run.chunks = 0;
            return None;
        }
        let run = &mut self.run.entry;
        run.chunks += 1;
        run.first_ts = run.first_ts.min(time.first_ts);
        run.last_ts = run.last_ts.max(time.last_ts);
        self.run.add(&sealed.summaries);
        if u64::from(self.run.entry.chunks) < self.size {
            return None;
        }
        let done = std::mem::replace(&mut self.run, Merged::new(0, (0, 0)));
        done.encode(self.format.closes_summaries())
            .ok()
            .map(|(_, bytes)| bytes)
    }
}

/// A block's place in its file as the kernel's `off64_t`s.
fn file_range(offset: u64, len: usize) -> Option<(libc::off64_t, libc::off64_t)> {
    Some((offset.try_into().ok()?, len.try_into().ok()?))
}

/// Starts writing a block's pages to the disk now, without waiting. With
/// much memory the kernel would otherwise keep them dirty until the final
/// fsync and write the whole capture then: the disk stayed idle while
/// records came, and closing took as long as writing everything.
fn start_writeback(file: &File, offset: u64, len: usize) {
    use std::os::fd::AsRawFd as _;
    let Some((offset, len)) = file_range(offset, len) else {
        return;
    };
    // SAFETY: the call only reads its integer arguments; an error (an
    // old kernel, a file system without it) leaves writeback to the kernel
    // as before, and write errors still come back at fsync.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

/// Drops a block's pages from the page cache if they are on the disk (the
/// kernel keeps dirty pages and pages being written; see
/// [`CACHED_BEHIND`]). A file system without the call keeps them all.
fn drop_from_cache(file: &File, offset: u64, len: usize) {
    use std::os::fd::AsRawFd as _;
    let Some((offset, len)) = file_range(offset, len) else {
        return;
    };
    // SAFETY: the call only reads its integer arguments.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED);
    }
}

/// The flusher thread's body: write each chunk, commit it, apply the budget.
/// `ends` are where the values and groups logs' next entries go, `resume`
/// the segment a reopened capture goes on in. A failure poisons the store
/// and stops the thread.
pub(crate) fn run(
    shared: &Arc<Shared>,
    chunks: &mpsc::Receiver<(Arc<Sealed>, Wide)>,
    spare: &mpsc::Sender<Vec<u8>>,
    config: &Config,
    ends: (u64, u64),
    resume: u64,
) {
    let meta = shared.meta();
    let per_segment = meta.blocks_per_segment;
    let reclaims =
        (config.disk_budget.is_some() || config.retain.is_some()) && meta.format.frees_entries();
    let mut files = match Files::open(&shared.dir, meta.format, ends, resume, reclaims) {
        Ok(files) => files,
        Err(error) => return shared.poison(error.to_string()),
    };
    let deletes = config.disk_budget.is_some() || config.retain.is_some();
    if let Some(retain) = config.retain_summaries.filter(|_| deletes) {
        match Roller::open(&shared.dir, retain) {
            Ok(roller) => files.roller = Some(roller),
            Err(error) => return shared.poison(error.to_string()),
        }
    }
    // No runs at all with `group_chunks` 0 (not runs of one chunk each).
    let mut grouper =
        (config.group_chunks > 0).then(|| Grouper::new(config.group_chunks, meta.format));
    let mut retired = Instant::now();
    // The segment of the last chunk written, and its newest time.
    let mut last = None;
    for (sealed, wide) in chunks {
        // The schema as it was when the chunk sealed (indexes come and go).
        let meta = shared.meta();
        let written = match shared.failing() {
            Some(error) => {
                let segment = sealed.time.chunk / u64::from(per_segment);
                Err(io("write", &files.dir.join(&segment_name(segment)))(error))
            }
            None => files.write(&sealed, wide, config, &meta),
        };
        if let Err(error) = written {
            return shared.poison(error.to_string());
        }
        shared.commit(sealed.time.chunk);
        if let Some(entry) = grouper.as_mut().and_then(|g| g.add(&sealed)) {
            match files.write_group(&entry, config) {
                Ok(end) => shared.commit_groups(end),
                Err(error) => return shared.poison(error.to_string()),
            }
        }
        let (chunk, newest) = (sealed.time.chunk, sealed.time.last_ts);
        // Hand the buffer back unless a reader's snapshot still holds it, so
        // the writer reuses a few buffers instead of allocating per chunk.
        if let Ok(sealed) = Arc::try_unwrap(sealed) {
            let _ = spare.send(sealed.block);
        }
        let segment = chunk / u64::from(per_segment);
        last = Some((segment, newest));
        // Retiring lists the directory: once per segment begun (deletion
        // works in segments) and once a second for retention, not per
        // chunk, where a large budget's hundreds of segments cost more
        // than writing the chunk.
        if chunk.is_multiple_of(u64::from(per_segment)) || retired.elapsed() >= RETIRE_EVERY {
            retired = Instant::now();
            if let Err(error) = retire(shared, config, &mut files, segment, newest) {
                return shared.poison(error.to_string());
            }
        }
    }
    // Closing: the capture ends within its budget, and on disk.
    let closed = last
        .map_or(Ok(()), |(segment, newest)| {
            retire(shared, config, &mut files, segment, newest)
        })
        .and_then(|()| files.sync_all());
    if let Err(error) = closed {
        shared.poison(error.to_string());
    }
}

/// Deletes the oldest segments (never the one being written, never one that
/// overlaps a pin the budget honours: see [`honoured_pins`]) while the store exceeds its disk budget or
/// they are older than its retention before `newest`, and frees their
/// chunks' entries in the values log.
fn retire(
    shared: &Arc<Shared>,
    config: &Config,
    files: &mut Files,
    current: u64,
    newest: u64,
) -> Result<()> {
    if config.disk_budget.is_none() && config.retain.is_none() {
        return Ok(());
    }
    let budget = config.disk_budget.unwrap_or(u64::MAX);
    let mut sizes = BTreeMap::new();
    let mut total = 0;
    for name in shared.dir.names()? {
        let size = shared.dir.bytes_on_disk(&name);
        total += size;
        if let Some(segment) = segment_number(&name) {
            sizes.insert(segment, size);
        }
    }
    let snapshot = shared.snapshot();
    let per_segment = u64::from(snapshot.meta().blocks_per_segment);
    let span_of = |(&segment, &size): (&u64, &u64)| -> Result<Span> {
        let first = snapshot.time_entry(segment * per_segment)?;
        let last = snapshot.time_entry(segment * per_segment + per_segment - 1)?;
        Ok(Span {
            segment,
            size,
            time: (first.first_ts, last.last_ts),
            entries: (first, last),
        })
    };
    // Only pins need every segment's span; without them the oldest are
    // read until the budget fits, as before pins had a share.
    let pins = &snapshot.meta().pins;
    let honoured = if pins.is_empty() {
        Vec::new()
    } else {
        let spans: Vec<Span> = sizes.range(..current).map(span_of).collect::<Result<_>>()?;
        let older = sizes.range(..current).map(|(s, n)| (*s, *n)).collect();
        honoured_pins(shared, pins, &spans, pin_share(config, total, &older))
    };
    for entry in sizes.range(..current) {
        let span = span_of(entry)?;
        let old = config
            .retain
            .is_some_and(|retain| span.time.1.saturating_add(retain) < newest);
        if total <= budget && !old {
            break;
        }
        if honoured.iter().any(|pin| overlaps(*pin, span.time)) {
            continue;
        }
        let first = span.segment * per_segment;
        let rolled = match &mut files.roller {
            Some(roller) => {
                roller.roll(&snapshot, first..first + per_segment, span.time, config)?;
                Some(roller.published())
            }
            None => None,
        };
        shared.mark_deleted(span.segment, rolled);
        shared.dir.remove(&segment_name(span.segment))?;
        total -= span.size;
        let freed = files.reclaim(&snapshot, span.segment, span.entries)?;
        total = total.saturating_sub(freed);
    }
    if let Some(roller) = &mut files.roller {
        let share = (config.disk_budget).map_or(u64::MAX, |b| {
            b.saturating_mul(config.summaries_percent.min(100)) / 100
        });
        roller.age(newest, share, config.durability)?;
        shared.set_rollups(roller.published());
    }
    Ok(())
}

/// A record segment on disk, the arrival times its chunks span and its
/// first and last chunks' time entries.
#[derive(Clone, Copy)]
struct Span {
    segment: u64,
    size: u64,
    time: (u64, u64),
    /// Its first and last chunks' time entries.
    entries: (TimeEntry, TimeEntry),
}

/// The bytes pins may keep: [`Config::pin_percent`] of what the budget
/// leaves the segments retirement may delete (`older`) once what it never
/// deletes, the index logs and the segment being written (all of `total`
/// that is not in `older`), is counted.
fn pin_share(config: &Config, total: u64, older: &BTreeMap<u64, u64>) -> u64 {
    let segments: u64 = older.values().sum();
    config.disk_budget.map_or(u64::MAX, |budget| {
        let room = budget.saturating_sub(total.saturating_sub(segments));
        room.saturating_mul(config.pin_percent.min(100)) / 100
    })
}

/// Whether the time windows `a` and `b` (inclusive) overlap.
fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// The pins the budget still honours: the newest first, while the
/// segments they keep take no more than `share` bytes together. From the
/// first that does not fit on, the older ones are released (noted in
/// `shared`, and never honoured again), so pinned windows never crowd out
/// the newest data however often triggers fire.
fn honoured_pins(
    shared: &Shared,
    pins: &[(u64, u64)],
    spans: &[Span],
    share: u64,
) -> Vec<(u64, u64)> {
    let mut pins: Vec<(u64, u64)> = (pins.iter().copied())
        .filter(|(start, _)| !shared.is_released(*start))
        .collect();
    pins.sort_by_key(|pin| std::cmp::Reverse(pin.1));
    let mut kept = BTreeSet::new();
    let mut bytes = 0u64;
    let mut honoured = Vec::new();
    let mut full = false;
    for pin in pins {
        let more: u64 = (spans.iter())
            .filter(|s| overlaps(pin, s.time) && !kept.contains(&s.segment))
            .map(|s| s.size)
            .sum();
        full = full || bytes.saturating_add(more) > share;
        if full {
            shared.release_pin(pin.0);
            continue;
        }
        bytes += more;
        kept.extend((spans.iter().filter(|s| overlaps(pin, s.time))).map(|s| s.segment));
        honoured.push(pin);
    }
    honoured
}
