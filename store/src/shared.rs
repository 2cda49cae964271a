//! State shared by the writer, the flusher and readers, and [`Snapshot`], the
//! reader's consistent view.
//!
//! The writer and flusher hold the lock only to publish (a chunk sealed, a
//! chunk committed, the tail published); readers hold it only to clone a few
//! `Arc`s. Nobody does I/O under it, so readers never stall the writer.

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    fs::File,
    os::unix::fs::FileExt as _,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering},
    },
};

use crate::{
    cache::BinCache,
    dir::Dir,
    error::{Error, Result, io},
    format::{
        BlockHeader, FILE_HEADER_LEN, GROUP_ENTRY_LEN, GroupEntry, SUMMARY_LEN, Summary, TimeEntry,
    },
    keys::{KeyRange, entry_summaries, found, wanted},
    recovery::Recovery,
    rollup::Rollups,
    schema::{IndexId, Meta, SourceId},
    segment_name, values,
};

/// A chunk ready to be written (or the published prefix of the active one).
pub(crate) struct Sealed {
    pub block: Vec<u8>,
    pub summaries: Vec<Summary>,
    pub time: TimeEntry,
}

pub(crate) struct Shared {
    pub dir: Arc<Dir>,
    /// Values of sealed chunks' bins, kept between queries.
    pub bins: BinCache,
    poisoned: AtomicBool,
    /// Segments deleted so far: a snapshot that saw fewer looks again
    /// before it trusts a chunk to be on disk (see [`Snapshot::is_deleted`]).
    deletions: AtomicU64,
    /// An OS error every later write of the flusher fails with (0: none),
    /// set by tests to fail writes as a dying disk does.
    failing: AtomicI32,
    state: Mutex<State>,
}

struct State {
    meta: Arc<Meta>,
    /// Chunks `[0, committed)` have their time entry on disk.
    committed: u64,
    /// Bytes of the groups log whose entries are written whole.
    groups_end: u64,
    /// Segments deleted by the disk budget.
    deleted: BTreeSet<u64>,
    /// The summaries of deleted segments kept (`rollups.log`).
    rollups: Arc<Rollups>,
    /// Start times of the pins the disk budget released.
    released: BTreeSet<u64>,
    /// Sealed chunks not yet committed, oldest first.
    sealed: VecDeque<Arc<Sealed>>,
    /// The published prefix of the active chunk.
    partial: Option<Arc<Sealed>>,
    poison_reason: Option<String>,
}

impl Shared {
    pub fn new(dir: Arc<Dir>, meta: Meta, recovery: &Recovery) -> Self {
        // Rollups only add approximate answers over deleted chunks: a log
        // that does not open is read as none.
        let rollups = Rollups::load(&dir).map(|(r, _)| r).unwrap_or_default();
        Self {
            dir,
            bins: BinCache::default(),
            poisoned: AtomicBool::new(false),
            deletions: AtomicU64::new(0),
            failing: AtomicI32::new(0),
            state: Mutex::new(State {
                meta: Arc::new(meta),
                committed: recovery.chunks,
                groups_end: recovery.groups_end,
                deleted: recovery.deleted_segments.iter().copied().collect(),
                rollups: Arc::new(rollups),
                released: BTreeSet::new(),
                sealed: VecDeque::new(),
                partial: None,
                poison_reason: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere cannot leave State inconsistent: every update is
        // a single assignment or push/pop.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The fast check on the append path.
    #[inline]
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    pub fn poisoned(&self) -> Option<String> {
        if !self.poisoned.load(Ordering::Acquire) {
            return None;
        }
        self.lock().poison_reason.clone()
    }

    pub fn poison(&self, reason: String) {
        self.lock().poison_reason.get_or_insert(reason);
        self.poisoned.store(true, Ordering::Release);
    }

    /// Makes every later write of the flusher fail with `errno`.
    pub fn fail_writes(&self, errno: i32) {
        self.failing.store(errno, Ordering::Release);
    }

    /// The error the flusher's writes fail with, if set.
    pub fn failing(&self) -> Option<std::io::Error> {
        let errno = self.failing.load(Ordering::Acquire);
        (errno != 0).then(|| std::io::Error::from_raw_os_error(errno))
    }

    pub fn set_meta(&self, meta: Meta) {
        self.lock().meta = Arc::new(meta);
    }

    pub fn meta(&self) -> Arc<Meta> {
        Arc::clone(&self.lock().meta)
    }

    pub fn push_sealed(&self, sealed: Arc<Sealed>) {
        let mut state = self.lock();
        state.sealed.push_back(sealed);
        state.partial = None;
    }

    pub fn set_partial(&self, partial: Option<Arc<Sealed>>) {
        self.lock().partial = partial;
    }

    /// The flusher wrote chunk `chunk` and its time entry.
    pub fn commit(&self, chunk: u64) {
        let mut state = self.lock();
        state.committed = chunk + 1;
        while state.sealed.front().is_some_and(|s| s.time.chunk <= chunk) {
            state.sealed.pop_front();
        }
    }

    /// The flusher wrote the groups log whole up to `end`.
    pub fn commit_groups(&self, end: u64) {
        self.lock().groups_end = end;
    }

    /// Where the groups log's whole entries end.
    pub fn groups_end(&self) -> u64 {
        self.lock().groups_end
    }

    /// Notes that `segment` is deleted, before its file and its index-log
    /// entries go: a reader that finds them gone then knows why.
    /// Publishes rollups rewritten (aged) with no segment deleted.
    pub fn set_rollups(&self, rollups: Arc<Rollups>) {
        self.lock().rollups = rollups;
    }

    /// Marks `segment` deleted; with the rollups that now hold its
    /// summaries, in one step, so no snapshot counts its chunks twice.
    pub fn mark_deleted(&self, segment: u64, rollups: Option<Arc<Rollups>>) {
        let mut state = self.lock();
        state.deleted.insert(segment);
        if let Some(rollups) = rollups {
            state.rollups = rollups;
        }
        drop(state);
        self.deletions.fetch_add(1, Ordering::Release);
    }

    /// Records of the sealed chunks not yet on disk.
    pub fn sealed_records(&self) -> u64 {
        (self.lock().sealed.iter())
            .map(|s| u64::from(s.time.records))
            .sum()
    }

    /// Notes that the budget released the pin starting at `start`.
    pub fn release_pin(&self, start: u64) {
        self.lock().released.insert(start);
    }

    /// How many pins the budget released.
    pub fn pins_released(&self) -> u64 {
        self.lock().released.len() as u64
    }

    /// Whether the budget released the pin starting at `start`.
    pub fn is_released(&self, start: u64) -> bool {
        self.lock().released.contains(&start)
    }

    /// Segments deleted by the budget or retention, ascending.
    pub fn deleted(&self) -> Vec<u64> {
        self.lock().deleted.iter().copied().collect()
    }

    pub fn snapshot(self: &Arc<Self>) -> Snapshot {
        let deletions = self.deletions.load(Ordering::Acquire);
        let state = self.lock();
        let mut memory: Vec<Arc<Sealed>> = state.sealed.iter().cloned().collect();
        let next = state.committed + memory.len() as u64;
        let partial = state.partial.as_ref().filter(|p| p.time.chunk == next);
        if let Some(partial) = partial {
            memory.push(Arc::clone(partial));
        }
        Snapshot {
            shared: Arc::clone(self),
            meta: Arc::clone(&state.meta),
            committed: state.committed,
            groups_end: state.groups_end,
            deleted: state.deleted.clone(),
            rollups: Arc::clone(&state.rollups),
            deletions,
            damaged: None,
            memory,
            partial: partial.is_some(),
            files: Arc::new(Files::new(Arc::clone(&self.dir))),
        }
    }
}

/// A handle that takes snapshots of a store being written, from any
/// thread, without touching the writer.
#[derive(Clone)]
pub struct Reader(pub(crate) Arc<Shared>);

impl Reader {
    /// A consistent view of everything published so far.
    pub fn snapshot(&self) -> Snapshot {
        self.0.snapshot()
    }
}

/// A consistent, immutable view of a store: every chunk published when it
/// was taken. Cheap to clone and to send to another thread.
#[derive(Clone)]
pub struct Snapshot {
    shared: Arc<Shared>,
    meta: Arc<Meta>,
    committed: u64,
    /// Bytes of the groups log this snapshot may read.
    groups_end: u64,
    deleted: BTreeSet<u64>,
    /// The summaries of deleted segments this snapshot may read.
    rollups: Arc<Rollups>,
    /// [`Shared::deletions`] when the snapshot was taken.
    deletions: u64,
    /// When opened to skip damage: the damaged chunks, left out of every
    /// answer like deleted ones, with their time entries (made up from
    /// their neighbours' where their own is damaged).
    damaged: Option<Arc<BTreeMap<u64, TimeEntry>>>,
    /// Chunks `committed..` still in memory, the last possibly partial.
    memory: Vec<Arc<Sealed>>,
    /// Whether the last chunk of `memory` is the active chunk's prefix.
    partial: bool,
    files: Arc<Files>,
}

/// One chunk's bytes and where they came from.
pub(crate) enum Block {
    Memory(Arc<Sealed>),
    Disk(Vec<u8>),
}

impl Block {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Self::Memory(sealed) => &sealed.block,
            Self::Disk(bytes) => bytes,
        }
    }
}

impl Snapshot {
    /// The schema as of this snapshot.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Chunks visible in this snapshot (numbered from 0; the oldest may have
    /// been deleted by the disk budget).
    pub fn chunks(&self) -> u64 {
        self.committed + self.memory.len() as u64
    }

    /// Records visible in this snapshot: those of chunks the disk budget
    /// deleted are gone with their index entries and not counted.
    pub fn records(&self) -> Result<u64> {
        let mut total = 0;
        self.for_each_meta(0..self.chunks(), &[], |meta| {
            total += u64::from(meta.time.records);
            Ok(())
        })?;
        Ok(total)
    }

    /// Whether chunk `chunk` is sealed: its records will not change.
    pub(crate) fn is_sealed(&self, chunk: u64) -> bool {
        chunk + u64::from(self.partial) < self.chunks()
    }

    pub(crate) fn bin_cache(&self) -> &BinCache {
        &self.shared.bins
    }

    /// Whether chunk `chunk` is left out of answers: deleted by the
    /// budget, or damaged and skipped.
    pub(crate) fn is_gone(&self, chunk: u64) -> bool {
        self.is_damaged(chunk) || self.is_deleted(chunk)
    }

    /// Whether the budget deleted chunk `chunk`'s segment: when this
    /// snapshot was taken, or since (its file and index entries may be gone
    /// by the time a query reaches them).
    pub(crate) fn is_deleted(&self, chunk: u64) -> bool {
        let segment = chunk / u64::from(self.meta.blocks_per_segment);
        self.deleted.contains(&segment)
            || (self.freed_since() && self.shared.lock().deleted.contains(&segment))
    }

    /// The summaries of deleted segments this snapshot may read.
    pub(crate) fn rollups(&self) -> &Rollups {
        &self.rollups
    }

    /// Whether the snapshot leaves damage out of its answers
    /// (`--skip-damaged`) rather than failing on it.
    pub(crate) fn skips_damage(&self) -> bool {
        self.damaged.is_some()
    }

    /// The capture's directory.
    pub(crate) fn dir(&self) -> &Dir {
        &self.shared.dir
    }

    pub(crate) fn is_damaged(&self, chunk: u64) -> bool {
        self.damaged
            .as_ref()
            .is_some_and(|d| d.contains_key(&chunk))
    }

    /// `query`'s answer on this snapshot; when it fails after the budget
    /// deleted chunks it was reading (a percentile's counts, from
    /// summaries, then disagree with the records left), its answer on a
    /// fresh snapshot, up to a few times.
    pub(crate) fn settled<T>(&self, query: impl Fn(&Self) -> Result<T>) -> Result<T> {
        let mut answer = query(self);
        let mut snapshot = self;
        let mut fresh;
        for _ in 0..3 {
            if answer.is_ok() || !snapshot.freed_since() {
                break;
            }
            fresh = self.shared.snapshot();
            snapshot = &fresh;
            answer = query(snapshot);
        }
        answer
    }

    /// Whether the budget deleted a segment since this snapshot was taken.
    fn freed_since(&self) -> bool {
        self.shared.deletions.load(Ordering::Acquire) != self.deletions
    }

    /// This snapshot leaving out `damaged` chunks (with their time entries).
    pub(crate) fn skipping(mut self, damaged: BTreeMap<u64, TimeEntry>) -> Self {
        self.damaged = Some(Arc::new(damaged));
        self
    }

    fn memory(&self, chunk: u64) -> Option<&Arc<Sealed>> {
        let i = chunk.checked_sub(self.committed)?;
        self.memory.get(usize::try_from(i).ok()?)
    }

    pub(crate) fn time_entry(&self, chunk: u64) -> Result<TimeEntry> {
        if let Some(sealed) = self.memory(chunk) {
            return Ok(sealed.time);
        }
        if let Some(entry) = self.damaged.as_ref().and_then(|d| d.get(&chunk)) {
            return Ok(*entry);
        }
        if self.is_deleted(chunk) {
            return self.deleted_entry(chunk);
        }
        let len = TimeEntry::len(self.meta.format);
        let offset = (FILE_HEADER_LEN + chunk as usize * len) as u64;
        let bytes = read_at(&self.files, "time.log", offset, len)?;
        self.decode_time(&bytes, chunk, offset)
    }

    /// The time entry of `chunk` in `bytes` (read at `offset` of the time
    /// log); a stand-in when the chunk was deleted while being read.
    fn decode_time(&self, bytes: &[u8], chunk: u64, offset: u64) -> Result<TimeEntry> {
        match TimeEntry::decode(bytes, self.meta.format).filter(|e| e.chunk == chunk) {
            Some(entry) => Ok(entry),
            None if self.is_deleted(chunk) => self.deleted_entry(chunk),
            None => Err(Error::Corrupt {
                path: self.shared.dir.join("time.log"),
                offset,
                what: format!("time entry of chunk {chunk} fails its checksum"),
            }),
        }
    }

    /// What stands in for the time entry of `chunk`, whose segment the
    /// budget deleted: the flusher frees the index-log entries of deleted
    /// segments, so the entry is made from the first chunk kept after it:
    /// no records and no summaries, at that chunk's time and log
    /// positions, which keeps the time index ordered and the logs'
    /// positions ascending.
    fn deleted_entry(&self, chunk: u64) -> Result<TimeEntry> {
        let per_segment = u64::from(self.meta.blocks_per_segment);
        let mut next = (chunk / per_segment + 1) * per_segment;
        while next < self.chunks() && self.is_deleted(next) && self.memory(next).is_none() {
            next += per_segment;
        }
        // All after it deleted too (the budget moved past this snapshot):
        // it ends the time index.
        let after = if next < self.chunks() {
            self.time_entry(next)?
        } else {
            TimeEntry {
                first_ts: u64::MAX,
                ..TimeEntry::default()
            }
        };
        Ok(TimeEntry {
            chunk,
            first_ts: after.first_ts,
            last_ts: after.first_ts,
            first_summary: after.first_summary,
            summaries: 0,
            records: 0,
            values_at: after.values_at,
            values_len: 0,
        })
    }

    pub(crate) fn block(&self, chunk: u64) -> Result<Block> {
        if let Some(sealed) = self.memory(chunk) {
            return Ok(Block::Memory(Arc::clone(sealed)));
        }
        if self.is_gone(chunk) {
            return Err(Error::Expired { chunk });
        }
        let per_segment = u64::from(self.meta.blocks_per_segment);
        let name = segment_name(chunk / per_segment);
        let path = self.shared.dir.join(&name);
        let size = self.meta.block_size as usize;
        let offset = (FILE_HEADER_LEN + (chunk % per_segment) as usize * size) as u64;
        let bytes = match read_at(&self.files, &name, offset, size) {
            // Deleted by the budget since this snapshot was taken.
            Err(_) if self.is_deleted(chunk) => return Err(Error::Expired { chunk }),
            bytes => bytes?,
        };
        match BlockHeader::open(&bytes) {
            Ok(header) if header.number == chunk => Ok(Block::Disk(bytes)),
            Ok(header) => Err(Error::Corrupt {
                path,
                offset,
                what: format!("block {} found where chunk {chunk} belongs", header.number),
            }),
            Err(what) => Err(Error::Corrupt {
                path,
                offset,
                what: format!("chunk {chunk}: {what}"),
            }),
        }
    }
}

impl Snapshot {
    /// The runs of global bins `bins` of `index` that the values log holds
    /// for `chunk`, whose entry lies at `(offset, len)` (from its time
    /// entry); `None` when it holds none for the chunk or not all of them.
    pub(crate) fn stored_runs(
        &self,
        chunk: u64,
        values: (u64, u32),
        index: IndexId,
        bins: &[u32],
    ) -> Result<Option<Vec<crate::cache::Runs>>> {
        let Some(entry) = self.values_entry(chunk, values)? else {
            return Ok(None);
        };
        Ok(values::runs_of(
            &entry[values::ENTRY_HEADER_LEN..],
            index,
            bins,
        ))
    }

    /// The copies of `source`'s records in chunk `chunk`'s values entry
    /// (at `values`): how many, and the section's body (see
    /// `values::copies`); `None` when the entry holds none.
    pub(crate) fn stored_copies(
        &self,
        chunk: u64,
        values: (u64, u32),
        source: SourceId,
    ) -> Result<Option<(u64, Vec<u8>)>> {
        let Some(entry) = self.values_entry(chunk, values)? else {
            return Ok(None);
        };
        let copies = values::copies_of(&entry[values::ENTRY_HEADER_LEN..], source);
        Ok(copies.map(|(records, body)| (records, body.to_vec())))
    }

    /// Calls `f` with each chunk of `range` and its values entry's
    /// sections, checked, reading the time entries and the values entries
    /// of the whole range in one `pread` each (a run's entries lie end to
    /// end in the values log); `false`, without calling `f`, when a chunk
    /// there has no entry (a capture from before the values log, a chunk
    /// not yet committed, gone).
    pub(crate) fn for_each_values(
        &self,
        range: std::ops::Range<u64>,
        f: impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<bool> {
        if range.is_empty() || range.end > self.committed {
            return Ok(false);
        }
        let times = self.read_times(range)?;
        if times
            .iter()
            .any(|t| t.values_len == 0 || self.is_gone(t.chunk))
        {
            return Ok(false);
        }
        let (first, last) = (&times[0], &times[times.len() - 1]);
        let start = first.values_at;
        let end = last.values_at.saturating_add(u64::from(last.values_len));
        let span = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX);
        // Into this thread's buffer of the last call: a fresh one for each
        // run of chunks cost more in zeroed pages than the copy itself.
        let mut bytes = SCRATCH.take();
        match read_into(&self.files, "values.log", start, span, &mut bytes) {
            // Freed by the budget while being read: the caller reads the
            // chunks, which then say they are gone.
            Err(_) if times.iter().any(|t| self.is_deleted(t.chunk)) => return Ok(false),
            read => read?,
        }
        let entries = self.each_values_entry(&times, start, &bytes, f);
        if bytes.capacity() <= SCRATCH_MAX {
            SCRATCH.set(bytes);
        }
        entries.map(|()| true)
    }

    /// Calls `f` with each chunk of `times` and its entry's sections, from
    /// `bytes`, the values log read from `start`.
    fn each_values_entry(
        &self,
        times: &[TimeEntry],
        start: u64,
        bytes: &[u8],
        mut f: impl FnMut(u64, &[u8]) -> Result<()>,
    ) -> Result<()> {
        let corrupt = |time: &TimeEntry, what: String| Error::Corrupt {
            path: self.shared.dir.join("values.log"),
            offset: time.values_at,
            what,
        };
        for time in times {
            let entry = usize::try_from(time.values_at.saturating_sub(start))
                .ok()
                .and_then(|at| bytes.get(at..at.checked_add(time.values_len as usize)?))
                .ok_or_else(|| {
                    corrupt(
                        time,
                        format!("values of chunk {} are out of order", time.chunk),
                    )
                })?;
            let sections = values::check(entry, time.chunk).map_err(|what| corrupt(time, what))?;
            f(time.chunk, sections)?;
        }
        Ok(())
    }

    /// Chunk `chunk`'s values entry at `(offset, len)`, checked; `None`
    /// when it has none, or it was freed by the budget while being read
    /// (the caller then reads the chunk, which says it is gone).
    pub(crate) fn values_entry(
        &self,
        chunk: u64,
        (offset, len): (u64, u32),
    ) -> Result<Option<Vec<u8>>> {
        if len == 0 {
            return Ok(None);
        }
        let path = self.shared.dir.join("values.log");
        let bytes = read_at(&self.files, "values.log", offset, len as usize)?;
        match values::check(&bytes, chunk) {
            Ok(_) => Ok(Some(bytes)),
            Err(_) if self.is_deleted(chunk) => Ok(None),
            Err(what) => Err(Error::Corrupt { path, offset, what }),
        }
    }
}

/// Open read handles of one snapshot, so queries do not reopen a file per
/// read, and its map of the chunk log.
struct Files {
    dir: Arc<Dir>,
    handles: Mutex<std::collections::HashMap<String, Arc<File>>>,
    chunk_log: std::sync::OnceLock<Option<memmap2::Mmap>>,
    group_log: std::sync::OnceLock<Option<memmap2::Mmap>>,
    /// The block of each log the last read ended in, plus one (0: none):
    /// kept mapped for the next read, dropped once a read goes elsewhere.
    chunk_block: AtomicUsize,
    group_block: AtomicUsize,
    /// The groups log's entries this snapshot may use, by first chunk.
    groups: std::sync::OnceLock<Vec<Group>>,
}

/// One entry of the groups log and where its summaries lie.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Group {
    pub entry: GroupEntry,
    /// Offset of its first summary in the groups log.
    at: u64,
}

impl Files {
    fn new(dir: Arc<Dir>) -> Self {
        Self {
            dir,
            handles: Mutex::default(),
            chunk_log: std::sync::OnceLock::new(),
            group_log: std::sync::OnceLock::new(),
            chunk_block: AtomicUsize::new(0),
            group_block: AtomicUsize::new(0),
            groups: std::sync::OnceLock::new(),
        }
    }

    /// The store file `name` (in the capture directory), opened once.
    fn get(&self, name: &str) -> Result<Arc<File>> {
        let mut files = self
            .handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(file) = files.get(name) {
            return Ok(Arc::clone(file));
        }
        let file = Arc::new(self.dir.open_file(name)?);
        if files.len() > 16 {
            files.clear();
        }
        files.insert(name.to_owned(), Arc::clone(&file));
        Ok(file)
    }

    /// `len` bytes at `offset` of the chunk log at `path`, in place: a
    /// query touches only the summaries it wants of the hundreds a chunk
    /// may hold, where a `pread` would copy them all. `None` when the file
    /// cannot be mapped or the range lies past the mapped length.
    fn mapped(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.map(&self.chunk_log, "chunks.log", offset, len)
    }

    /// Drops the chunk log's pages around `len` bytes at `offset` from this
    /// process's resident set, once their summaries are decoded: a question
    /// over a long capture walks the summaries of tens of thousands of
    /// chunks (126 MB on 60 M records), and each page touched stayed
    /// resident. They stay in the page cache; a later read maps them again.
    /// The range is widened to whole 2 MiB blocks: the page cache holds a
    /// file in folios of up to that size, and a fault maps the whole folio,
    /// so the next batch's first read mapped this one's tail again (half the
    /// chunk log stayed resident on a 100 M-record capture).
    fn release(&self, offset: u64, len: usize) {
        Self::release_in((&self.chunk_log, &self.chunk_block), offset, len);
    }

    /// [`Files::release`] for the groups log: walked whole once per
    /// snapshot, then read a group at a time.
    fn release_groups(&self, offset: u64, len: usize) {
        Self::release_in((&self.group_log, &self.group_block), offset, len);
    }

    /// Drops the pages of a read in whole 2 MiB blocks (a fault maps a
    /// large folio whole): those the read passed, and the one the last
    /// read ended in if this one is elsewhere. The block it ends in stays
    /// mapped for the next read, which mostly starts there: dropping it
    /// per read (a group's summaries are a few KB) cost a `madvise` and
    /// the faults back each time.
    fn release_in(
        (cell, last): (&std::sync::OnceLock<Option<memmap2::Mmap>>, &AtomicUsize),
        offset: u64,
        len: usize,
    ) {
        const FOLIO: usize = 2 << 20;
        let Some(Some(map)) = cell.get() else {
            return;
        };
        let Ok(start) = usize::try_from(offset) else {
            return;
        };
        let (first, current) = (start / FOLIO, start.saturating_add(len) / FOLIO);
        let drop = |blocks: std::ops::Range<usize>| {
            let start = blocks.start.saturating_mul(FOLIO).min(map.len());
            let end = blocks.end.saturating_mul(FOLIO).min(map.len());
            if end > start {
                // SAFETY: the map is shared and read-only, of a file whose
                // mapped bytes never change while it is mapped (see `map`):
                // a page dropped here and read again, by this or another
                // thread, reads back the same bytes from the page cache.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        start,
                        end - start,
                    )
                };
            }
        };
        drop(first..current);
        let previous = last.swap(current.saturating_add(1), Ordering::Relaxed);
        if let Some(previous) = previous.checked_sub(1)
            && previous != current
            && !(first..current).contains(&previous)
        {
            drop(previous..previous + 1);
        }
    }

    /// [`Files::mapped`] for the groups log.
    fn mapped_groups(&self, offset: u64, len: usize) -> Option<&[u8]> {
        self.map(&self.group_log, "groups.log", offset, len)
    }

    fn map<'a>(
        &'a self,
        cell: &'a std::sync::OnceLock<Option<memmap2::Mmap>>,
        name: &str,
        offset: u64,
        len: usize,
    ) -> Option<&'a [u8]> {
        let map = cell.get_or_init(|| {
            let file = self.get(name).ok()?;
            // SAFETY: the chunk and groups logs are only appended to while
            // readers run. Only recovery truncates them, and only past the
            // last chunk whose time entry (written after its summaries) is
            // intact and the last whole group of such chunks: never what a
            // snapshot has seen committed, which is all it reads here,
            // within the length mapped when it first read.
            unsafe { memmap2::Mmap::map(&*file) }.ok()
        });
        let start = usize::try_from(offset).ok()?;
        map.as_ref()?.get(start..start.checked_add(len)?)
    }
}

/// One chunk's time entry and summaries.
pub(crate) struct ChunkMeta {
    pub time: TimeEntry,
    pub summaries: Vec<Summary>,
}

impl ChunkMeta {
    /// A damaged chunk's meta: its summaries are not read.
    fn without_summaries(time: TimeEntry) -> Self {
        Self {
            time,
            summaries: Vec::new(),
        }
    }

    /// The index-0 summary of `source`: all its records here, if any.
    pub fn all(&self, source: SourceId) -> Option<&Summary> {
        self.summaries
            .iter()
            .find(|s| s.source == source && s.index == 0)
    }
}

/// Chunks whose metadata is read with one `pread` per log.
const META_BATCH: u64 = 256;

impl Snapshot {
    /// Calls `f` with the time entry and the summaries of each chunk of
    /// `range`, oldest first, keeping only summaries whose key lies in one
    /// of `keys`. A chunk's summaries ascend by (source, index, bin), so
    /// each key range is found by binary search and the others are never
    /// touched: a query wants a few of the hundreds a chunk may hold.
    pub(crate) fn for_each_meta(
        &self,
        range: std::ops::Range<u64>,
        keys: &[KeyRange],
        mut f: impl FnMut(&ChunkMeta) -> Result<()>,
    ) -> Result<()> {
        let mut chunk = range.start;
        while chunk < range.end {
            if let Some(sealed) = self.memory(chunk) {
                f(&ChunkMeta {
                    time: sealed.time,
                    summaries: sealed
                        .summaries
                        .iter()
                        .filter(|s| wanted(keys, (s.source, s.index, s.bin)))
                        .copied()
                        .collect(),
                })?;
                chunk += 1;
                continue;
            }
            let end = range.end.min(self.committed).min(chunk + META_BATCH);
            for meta in self.read_metas(chunk..end, keys)? {
                f(&meta)?;
            }
            chunk = end;
        }
        Ok(())
    }

    /// The groups log's entries this snapshot may use: whole, in chunk
    /// order, of committed chunks. Groups only save reading chunk
    /// summaries, so an entry that does not decode ends the list and the
    /// chunks after it answer one by one.
    fn groups(&self) -> &[Group] {
        self.files.groups.get_or_init(|| {
            let mut groups = Vec::new();
            if !self.meta.format.has_groups() {
                return groups;
            }
            let Ok(file) = self.files.get("groups.log") else {
                return groups;
            };
            let walk = crate::reclaim::GroupWalk::new(&file, self.groups_end);
            for (at, entry) in walk.take_while(|(_, e)| e.range().end <= self.committed) {
                groups.push(Group {
                    entry,
                    at: at + GROUP_ENTRY_LEN as u64,
                });
            }
            groups
        })
    }

    /// A group's merged summaries that `keys` want, as one chunk's meta
    /// (its time entry holds the group's span and first chunk).
    fn group_meta(&self, group: &Group, keys: &[KeyRange]) -> Result<ChunkMeta> {
        let path = self.shared.dir.join("groups.log");
        let entry = group.entry;
        let len = entry.summaries as usize * SUMMARY_LEN;
        let raw = self
            .files
            .mapped_groups(group.at, len)
            .ok_or_else(|| Error::Corrupt {
                path: path.clone(),
                offset: group.at,
                what: format!("summaries of chunks {:?} are cut short", entry.range()),
            })?;
        let bad = |i: usize| Error::Corrupt {
            path: path.clone(),
            offset: group.at.saturating_add((i * SUMMARY_LEN) as u64),
            what: format!("summary of chunks {:?} fails its checksum", entry.range()),
        };
        let summaries = entry_summaries(raw, &entry, Some(keys)).map_err(bad);
        self.files.release_groups(group.at, len);
        let summaries = summaries?;
        let time = TimeEntry {
            chunk: entry.first_chunk,
            first_ts: entry.first_ts,
            last_ts: entry.last_ts,
            ..TimeEntry::default()
        };
        Ok(ChunkMeta { time, summaries })
    }

    /// [`Snapshot::for_each_meta`] that first offers `f` each run of chunks
    /// in `range` that the groups log merges (none deleted): `f(meta,
    /// Some(run))` gets the run's merged summaries and says whether they
    /// answered for it. The chunks of a run it declines, and those in no
    /// run, come one by one as `f(meta, None)` (its answer then unused).
    pub(crate) fn for_each_span(
        &self,
        range: std::ops::Range<u64>,
        keys: &[KeyRange],
        mut f: impl FnMut(&ChunkMeta, Option<std::ops::Range<u64>>) -> Result<bool>,
    ) -> Result<()> {
        let groups = self.groups();
        let mut i = groups.partition_point(|g| g.entry.first_chunk < range.start);
        let mut chunk = range.start;
        while chunk < range.end {
            while groups.get(i).is_some_and(|g| g.entry.first_chunk < chunk) {
                i += 1;
            }
            let group = groups.get(i);
            let run = group.map_or(range.end..range.end, |g| g.entry.range());
            let whole =
                run.start == chunk && run.end <= range.end && run.clone().all(|c| !self.is_gone(c));
            let stop = if whole {
                // Skipping damage, a damaged group answers chunk by chunk;
                // so does one freed by the budget while being read.
                let meta = match self.group_meta(&groups[i], keys) {
                    Err(_) if self.damaged.is_some() || run.clone().any(|c| self.is_deleted(c)) => {
                        None
                    }
                    meta => Some(meta?),
                };
                if let Some(meta) = meta
                    && f(&meta, Some(run.clone()))?
                {
                    chunk = run.end;
                    continue;
                }
                run.end
            } else if run.start > chunk {
                run.start.min(range.end)
            } else {
                run.end.clamp(chunk + 1, range.end)
            };
            self.for_each_meta(chunk..stop, keys, |meta| f(meta, None).map(drop))?;
            chunk = stop;
        }
        Ok(())
    }

    fn read_metas(&self, range: std::ops::Range<u64>, keys: &[KeyRange]) -> Result<Vec<ChunkMeta>> {
        let times = self.read_times(range)?;
        // The intact chunks' summaries, read in one span.
        let mut intact = times.iter().filter(|t| !self.is_gone(t.chunk));
        let Some(first) = intact.next() else {
            return Ok(times
                .into_iter()
                .map(ChunkMeta::without_summaries)
                .collect());
        };
        let last = intact.next_back().unwrap_or(first);
        let start = first.first_summary;
        // Damaged entries may name any summary: the arithmetic saturates,
        // and a read past the file's end is an error, not an allocation.
        let offset =
            (FILE_HEADER_LEN as u64).saturating_add(start.saturating_mul(SUMMARY_LEN as u64));
        // Opening (or `check`, when skipping damage) made sure the intact
        // entries' summaries follow each other.
        let end = last.first_summary.saturating_add(u64::from(last.summaries));
        let count = usize::try_from(end.saturating_sub(start)).unwrap_or(usize::MAX / SUMMARY_LEN);
        let owned;
        let len = count.saturating_mul(SUMMARY_LEN);
        let bytes = if let Some(bytes) = self.files.mapped(offset, len) {
            bytes
        } else {
            owned = read_at(&self.files, "chunks.log", offset, len)?;
            &owned[..]
        };
        let mut hints = vec![0; keys.len()];
        let span = Span {
            bytes,
            start,
            offset,
        };
        let metas = times
            .into_iter()
            .map(|time| {
                if self.is_gone(time.chunk) {
                    return Ok(ChunkMeta::without_summaries(time));
                }
                match self.summaries(&span, &time, keys, &mut hints) {
                    Ok(summaries) => Ok(ChunkMeta { time, summaries }),
                    // Freed by the budget while being read.
                    Err(Error::Corrupt { .. }) if self.is_deleted(time.chunk) => Ok(
                        ChunkMeta::without_summaries(self.deleted_entry(time.chunk)?),
                    ),
                    Err(error) => Err(error),
                }
            })
            .collect();
        self.files.release(offset, len);
        metas
    }

    /// The summaries of the chunk of `time` that `keys` want, from `span`.
    fn summaries(
        &self,
        span: &Span<'_>,
        time: &TimeEntry,
        keys: &[KeyRange],
        hints: &mut [usize],
    ) -> Result<Vec<Summary>> {
        let path = self.shared.dir.join("chunks.log");
        let at =
            (time.first_summary.saturating_sub(span.start) as usize).saturating_mul(SUMMARY_LEN);
        let raw = (span.bytes)
            .get(at..at.saturating_add(time.summaries as usize * SUMMARY_LEN))
            .ok_or_else(|| Error::Corrupt {
                path: path.clone(),
                // A damaged entry may point anywhere: its offset saturates.
                offset: span.offset.saturating_add(at as u64),
                what: format!("summaries of chunk {} are cut short", time.chunk),
            })?;
        let bad = |i: usize| Error::Corrupt {
            path: path.clone(),
            offset: span
                .offset
                .saturating_add(at.saturating_add(i * SUMMARY_LEN) as u64),
            what: format!("summary of chunk {} fails its checksum", time.chunk),
        };
        let mut summaries = Vec::new();
        for (key, hint) in keys.iter().zip(hints.iter_mut()) {
            for i in found(raw, key, hint, time.chunk).map_err(bad)? {
                let summary = Summary::decode(&raw[i * SUMMARY_LEN..]);
                summaries.push(
                    summary
                        .filter(|s| s.chunk == time.chunk)
                        .ok_or_else(|| bad(i))?,
                );
            }
        }
        Ok(summaries)
    }

    /// The time entries of `range`: read from the time log in one span,
    /// stand-ins for damaged and deleted chunks.
    fn read_times(&self, range: std::ops::Range<u64>) -> Result<Vec<TimeEntry>> {
        let len = TimeEntry::len(self.meta.format);
        // Only the span of chunks that are neither damaged (those at the
        // end may lie past a cut time log) nor deleted (freed) is read.
        let mut on_disk = range.clone().filter(|c| !self.is_gone(*c));
        let (from, to) = match on_disk.next() {
            Some(first) => (first, on_disk.next_back().unwrap_or(first) + 1),
            None => (range.start, range.start),
        };
        let offset = (FILE_HEADER_LEN + from as usize * len) as u64;
        let bytes = read_at(&self.files, "time.log", offset, (to - from) as usize * len)?;
        let mut times = Vec::new();
        // The stand-in of the last deleted chunk, for the rest of its segment.
        let mut stand_in: Option<TimeEntry> = None;
        let per_segment = u64::from(self.meta.blocks_per_segment);
        for chunk in range {
            if let Some(entry) = self.damaged.as_ref().and_then(|d| d.get(&chunk)) {
                times.push(*entry);
            } else if (from..to).contains(&chunk) && !self.is_deleted(chunk) {
                let i = (chunk - from) as usize;
                let at = offset + (i * len) as u64;
                times.push(self.decode_time(&bytes[i * len..(i + 1) * len], chunk, at)?);
            } else {
                let same = stand_in.filter(|s| s.chunk / per_segment == chunk / per_segment);
                let entry = match same {
                    Some(s) => TimeEntry { chunk, ..s },
                    None => self.deleted_entry(chunk)?,
                };
                stand_in = Some(entry);
                times.push(entry);
            }
        }
        Ok(times)
    }
}

/// A span of the chunk log read at once: its bytes, from summary `start`
/// at file offset `offset`.
struct Span<'a> {
    bytes: &'a [u8],
    start: u64,
    offset: u64,
}

/// Reads up to this long allocate without checking the file's size first.
const UNCHECKED_READ: usize = 16 << 20;

fn read_at(files: &Files, name: &str, offset: u64, len: usize) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    read_into(files, name, offset, len, &mut bytes)?;
    Ok(bytes)
}

thread_local! {
    /// The values log's bytes [`Snapshot::for_each_values`] read last on
    /// this thread, kept for its next call.
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The largest buffer [`SCRATCH`] keeps.
const SCRATCH_MAX: usize = 4 << 20;

/// [`read_at`] into `bytes`, whose capacity is reused.
fn read_into(
    files: &Files,
    name: &str,
    offset: u64,
    len: usize,
    bytes: &mut Vec<u8>,
) -> Result<()> {
    let file = files.get(name)?;
    let path = &files.dir.join(name);
    let short = || Error::Corrupt {
        path: path.to_owned(),
        offset,
        what: format!("file ends before the {len} bytes expected here"),
    };
    // Lengths come from entries that may be damaged: one too large for any
    // read a query makes of intact files (a block, a batch of summaries)
    // is checked against the file before it is allocated. Smaller reads,
    // the hot path, skip the stat; their allocation is bounded anyway.
    if len > UNCHECKED_READ {
        let size = file.metadata().map_err(io("stat", path))?.len();
        if offset.saturating_add(len as u64) > size {
            return Err(short());
        }
    }
    bytes.clear();
    bytes.resize(len, 0);
    file.read_exact_at(bytes, offset)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => short(),
            _ => Error::Io {
                call: "read",
                path: path.to_owned(),
                error: e,
            },
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's resident KiB of the file at `path`, mapped.
    fn resident_kib(path: &std::path::Path) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut ours = false;
        let mut kib = 0;
        for line in smaps.lines() {
            if let Some(rss) = line.strip_prefix("Rss:") {
                if ours {
                    kib += rss.trim().trim_end_matches(" kB").parse::<u64>().unwrap();
                }
            } else if line.split(' ').next().is_some_and(|r| r.contains('-')) {
                // A mapping's first line: its range, then the file's path.
                ours = line.ends_with(path.to_str().unwrap());
            }
        }
        kib
    }

    /// Reading chunks' summaries here and there over the chunk log (the
    /// chunks no group answers for) leaves none of it resident: a fault maps
    /// a large folio whole, and dropping only the pages read left 15 MB of
    /// a 30 MB log resident.
    #[test]
    fn reads_over_the_chunk_log_leave_none_of_it_resident() {
        let dir = std::env::temp_dir().join(format!("weft-release-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("chunks.log");
        let len = 32 << 20;
        let bytes: Vec<u8> = (0..len).map(|i| (i / 4096) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        // Out of the page cache, as a capture recorded earlier: read back,
        // it comes in folios of many pages, each mapped whole by one fault.
        let file = File::open(&path).unwrap();
        file.sync_all().unwrap();
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        let files = Files::new(Arc::new(Dir::open(&dir).unwrap()));
        // One chunk's summaries (1.6 KB) in every 100 KB, then every byte
        // in batches of 256 chunks' summaries, as queries read them.
        let sparse = (0..len).step_by(100 << 10).map(|at| (at, 1600));
        let batches = (0..len).step_by(400 << 10).map(|at| (at, 400 << 10));
        for (walk, reads) in [sparse.collect::<Vec<_>>(), batches.collect()]
            .iter()
            .enumerate()
        {
            for &(at, n) in reads {
                let n = n.min(len - at);
                // Each page holds its number: what was dropped reads back.
                let span = files.mapped(at as u64, n).unwrap();
                assert_eq!(span[0], (at / 4096) as u8);
                assert_eq!(span[n - 1], ((at + n - 1) / 4096) as u8);
                files.release(at as u64, n);
            }
            // The block the last read ended in stays, for the next read.
            let resident = resident_kib(&path);
            assert!(
                resident <= 2048 + 64,
                "walk {walk}: {resident} KiB of the 32 MiB log stayed resident"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
