//! The single writer: frames records into the active chunk, keeps per-chunk
//! summaries, seals full chunks and hands them to the flusher thread.
//!
//! Memory is fixed: the active chunk buffer, the sealed chunk the flusher is
//! writing and at most [`FLUSH_QUEUE`] more waiting for it (the hand-off is a
//! bounded channel, so a slow disk slows the writer down instead of growing a
//! queue, while the flusher's short stalls do not). Readers may keep a sealed
//! chunk alive a little longer through their snapshots.

use std::{
    path::Path,
    sync::{Arc, mpsc},
    thread,
};

use crate::{
    config::Config,
    dir::Dir,
    error::{Error, Result},
    flusher,
    format::{
        BLOCK_HEADER_LEN, BlockHeader, FILE_HEADER_LEN, MAX_RECORD_HEADER, RecordHeader, Summary,
        TimeEntry,
    },
    recovery::{self, Recovery},
    schema::{
        Bins, Closed, Field, Index, IndexId, Meta, Partition, Source, SourceId, check_layout,
        check_name,
    },
    shared::{Reader, Sealed, Shared, Snapshot},
    values::{BinValues, Keyed, Wide},
};

/// Sealed chunks that may wait for the flusher before `seal` blocks: about
/// 4 ms of a 4 M records/s flood, 1 MiB of 256 KiB blocks.
const FLUSH_QUEUE: usize = 4;

/// Running totals of one (source, index, bin) in the active chunk.
#[derive(Clone, Copy, Debug)]
struct Acc {
    count: u64,
    sum: i128,
    min: i64,
    max: i64,
    first_ts: u64,
    last_ts: u64,
    last_addr: u64,
}

impl Acc {
    const EMPTY: Self = Self {
        count: 0,
        sum: 0,
        min: i64::MAX,
        max: i64::MIN,
        first_ts: 0,
        last_ts: 0,
        last_addr: 0,
    };

    /// A record of the per-source index 0, whose values are all 0: its
    /// min and max keep instead the span of the records' own times (the
    /// producer's timestamp, else arrival `ts`), so that counts per bucket
    /// of own time come from summaries (format 2).
    #[inline]
    fn add_own_time(&mut self, own: u64, ts: u64, addr: u64) {
        let own = own.cast_signed();
        if self.count == 0 {
            (self.first_ts, self.min, self.max) = (ts, own, own);
        }
        self.min = self.min.min(own);
        self.max = self.max.max(own);
        self.count += 1;
        self.last_ts = ts;
        self.last_addr = addr;
    }

    fn add_run(&mut self, run: &Run) {
        if self.count == 0 {
            self.first_ts = run.first_ts;
        }
        self.count += run.n;
        // Most runs are of one record (a latency, a call number): no
        // 128-bit product for them.
        self.sum += if run.n == 1 {
            i128::from(run.value)
        } else {
            i128::from(run.value) * i128::from(run.n)
        };
        self.min = self.min.min(run.value);
        self.max = self.max.max(run.value);
        self.last_ts = run.last_ts;
        self.last_addr = run.last_addr;
    }

    /// Adds the totals of `other`, records of the same chunk (whose times
    /// and addresses grow together).
    fn merge(&mut self, other: &Self) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.first_ts = self.first_ts.min(other.first_ts);
        self.last_ts = self.last_ts.max(other.last_ts);
        self.last_addr = self.last_addr.max(other.last_addr);
    }

    fn summary(&self, chunk: u64, source: SourceId, index: IndexId, bin: u32) -> Summary {
        let Self {
            count,
            sum,
            min,
            max,
            first_ts,
            last_ts,
            last_addr,
        } = *self;
        Summary {
            chunk,
            source,
            index,
            bin,
            count,
            sum,
            min,
            max,
            first_ts,
            last_ts,
            last_addr,
        }
    }
}

/// Records of one value in a row, in one bin, not yet added to the bin's
/// totals: a flood's thread id (its CPU, its return value) repeats for
/// thousands of records, each then a compare and a count, and the run is
/// handed to the values log whole.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    part: u32,
    bin: u32,
    value_bin: u32,
    value: i64,
    n: u64,
    first_ts: u64,
    last_ts: u64,
    last_addr: u64,
}

struct IndexAcc {
    spec: Index,
    per_bin: Vec<Acc>,
    /// How each value bin's values reach the values log.
    ways: Vec<BinValues>,
    /// Bins with records in the active chunk, in first-use order: sealing
    /// visits and resets only these (a partitioned index has many bins).
    touched: Vec<u32>,
    /// The latest records, while they repeat one value (none: `n` is 0).
    run: Run,
    /// For a key index that splits another's values, the pairs read so far.
    split: Option<Split>,
    /// Where the source has a partitioned index over the same field and
    /// bins (latency per call beside latency), this index is the sum of
    /// its parts: it reads no record, its summaries are the parts' added
    /// up (see [`IndexAcc::summaries_of_parts`]) and the partitioned
    /// index hands its values over under this one's id too. This is the
    /// position of the partitioned one in the source's indexes.
    parts_of: Option<usize>,
    /// On a partitioned index, the id of the index that is the sum of its
    /// parts.
    copies_to: Option<IndexId>,
}

/// A key index's (key, value) pairs of the active chunk, for the values
/// log's split sections (see [`Keyed`]).
struct Split {
    values: Field,
    pairs: Vec<(i64, i64)>,
    complete: bool,
}

impl IndexAcc {
    /// The accumulator of `spec`, which splits the values of `split`'s
    /// field when it is a key index.
    fn new(spec: &Index, split: Option<&Index>) -> Self {
        Self {
            spec: spec.clone(),
            per_bin: vec![Acc::EMPTY; spec.bins.len() * spec.parts() as usize],
            ways: BinValues::of(&spec.bins),
            touched: Vec::new(),
            run: Run::default(),
            split: split.map(|values| Split {
                values: values.field.clone(),
                pairs: Vec::new(),
                complete: true,
            }),
            parts_of: None,
            copies_to: None,
        }
    }

    #[inline]
    fn add(&mut self, payload: &[u8], ts: u64, addr: u64, wide: &mut Wide) {
        let key = self.spec.field.read(payload);
        if let Some(split) = &mut self.split
            && let Some(value) = split.values.read(payload)
        {
            match key {
                Some(key) => split.pairs.push((key, value)),
                None => split.complete = false,
            }
        }
        let Some(value) = key else {
            return;
        };
        let part = self.spec.part_of(payload);
        let run = &mut self.run;
        if run.n > 0 && run.value == value && run.part == part {
            run.n += 1;
            run.last_ts = ts;
            run.last_addr = addr;
            return;
        }
        if run.n > 0 {
            self.settle(wide);
        }
        let value_bin = self.spec.bins.bin_of(value);
        self.run = Run {
            part,
            bin: self.spec.bin(part, value_bin),
            value_bin,
            value,
            n: 1,
            first_ts: ts,
            last_ts: ts,
            last_addr: addr,
        };
    }

    /// Adds the run under way to its bin's totals and hands its values to
    /// `wide`; none is under way after.
    #[expect(
        clippy::inline_always,
        reason = "called 3.5 times a record; as a call its register saves were 15 \
                  instructions each (callgrind)"
    )]
    #[inline(always)]
    fn settle(&mut self, wide: &mut Wide) {
        let run = &self.run;
        let acc = &mut self.per_bin[run.bin as usize];
        if acc.count == 0 {
            self.touched.push(run.bin);
        }
        acc.add_run(run);
        let way = self.ways[run.value_bin as usize];
        wide.add(self.spec.id, run.bin, way, run.value, run.n);
        if let Some(sum) = self.copies_to {
            wide.add(sum, run.value_bin, way, run.value, run.n);
        }
        // Read in place, not taken: the next record's run overwrites it.
        self.run.n = 0;
    }

    /// Settles the run under way and hands over the split's pairs (before
    /// sealing).
    fn flush(&mut self, wide: &mut Wide) {
        if self.run.n > 0 {
            self.settle(wide);
        }
        if let Some(split) = &mut self.split {
            let room = Vec::with_capacity(split.pairs.len());
            wide.keyed.push(Keyed {
                index: self.spec.id,
                pairs: std::mem::replace(&mut split.pairs, room),
                complete: std::mem::replace(&mut split.complete, true),
            });
        }
    }

    /// The summaries of the bins with records, in bin order, the run under
    /// way counted in (a published chunk's summaries are read before it
    /// seals).
    fn summaries(&self, chunk: u64, source: SourceId, out: &mut Vec<Summary>) {
        let run = &self.run;
        let mut bins = self.touched.clone();
        if run.n > 0 && self.per_bin[run.bin as usize].count == 0 {
            bins.push(run.bin);
        }
        bins.sort_unstable();
        out.extend(bins.iter().map(|bin| {
            let mut acc = self.per_bin[*bin as usize];
            if run.n > 0 && run.bin == *bin {
                acc.add_run(run);
            }
            acc.summary(chunk, source, self.spec.id, *bin)
        }));
    }

    /// The summaries of an index that is the sum of `parts`'s parts (see
    /// [`IndexAcc::parts_of`]), in bin order, its run under way counted in.
    fn summaries_of_parts(
        &self,
        parts: &Self,
        chunk: u64,
        source: SourceId,
        out: &mut Vec<Summary>,
    ) {
        let bins = self.spec.bins.len();
        let mut per_bin = vec![Acc::EMPTY; bins];
        for bin in &parts.touched {
            per_bin[*bin as usize % bins].merge(&parts.per_bin[*bin as usize]);
        }
        let run = &parts.run;
        if run.n > 0 {
            let mut acc = Acc::EMPTY;
            acc.add_run(run);
            per_bin[run.value_bin as usize].merge(&acc);
        }
        out.extend(
            (per_bin.iter().zip(0..))
                .filter(|(acc, _)| acc.count > 0)
                .map(|(acc, bin)| acc.summary(chunk, source, self.spec.id, bin)),
        );
    }

    fn reset(&mut self) {
        self.run = Run::default();
        for bin in self.touched.drain(..) {
            self.per_bin[bin as usize] = Acc::EMPTY;
        }
    }
}

struct SourceAcc {
    /// The implicit index 0: every record of the source, value 0 (empty
    /// while its count is 0).
    all: Acc,
    indexes: Vec<IndexAcc>,
}

impl Default for SourceAcc {
    fn default() -> Self {
        Self {
            all: Acc::EMPTY,
            indexes: Vec::new(),
        }
    }
}

/// A writable capture directory.
pub struct Store {
    shared: Arc<Shared>,
    meta: Meta,
    block: Vec<u8>,
    used: usize,
    chunk: u64,
    base_ts: u64,
    last_ts: u64,
    records: u32,
    prev: Vec<Option<u64>>,
    acc: Vec<SourceAcc>,
    /// The active chunk's values in wide bins, for the values log.
    wide: Wide,
    /// The indexes changed while a chunk was active: the next chunk
    /// rebuilds the accumulators instead of resetting them.
    acc_stale: bool,
    next_summary: u64,
    to_flusher: Option<mpsc::SyncSender<(Arc<Sealed>, Wide)>>,
    /// Buffers the flusher has written and handed back.
    spare: mpsc::Receiver<Vec<u8>>,
    flusher: Option<thread::JoinHandle<()>>,
    recovery: Recovery,
}

impl Store {
    /// Creates a store in `dir` (which must not hold one), or reopens and
    /// recovers the store there: everything up to the last complete chunk is
    /// kept, and [`Store::recovery`] says what was cut.
    pub fn open(path: &Path, config: &Config) -> Result<Self> {
        check_layout(config.block_size, config.blocks_per_segment).map_err(Error::Invalid)?;
        let dir = Dir::open_to_write(path)?;
        let (meta, recovery) = if dir.contains("meta") {
            let (mut meta, recovery) = recovery::recover(&dir, recovery::Open::Write)?;
            // Open for writing, the capture is no longer closed: a crash
            // from here on leaves a tail to cut, not damage.
            if meta.closed.take().is_some() {
                meta.save(&dir)?;
            }
            (meta, recovery)
        } else {
            let meta = Meta {
                block_size: config.block_size,
                blocks_per_segment: config.blocks_per_segment,
                ..Meta::default()
            };
            meta.save(&dir)?;
            flusher::create_logs(&dir)?;
            (meta, Recovery::default())
        };
        let shared = Arc::new(Shared::new(Arc::new(dir), meta.clone(), &recovery));
        // A few sealed chunks may wait for the flusher: with none, every
        // stall of the flusher (a group to merge, a segment to retire, a
        // core lent to another thread) stalled the writer too.
        let (tx, rx) = mpsc::sync_channel(FLUSH_QUEUE);
        let (spare_tx, spare) = mpsc::channel();
        let flusher = {
            let shared = Arc::clone(&shared);
            let config = config.clone();
            // A new capture's values log holds only its header.
            let ends = (
                recovery.values_end.max(FILE_HEADER_LEN as u64),
                recovery.groups_end.max(FILE_HEADER_LEN as u64),
            );
            let resume = recovery.chunks / u64::from(meta.blocks_per_segment);
            thread::Builder::new()
                .name("weft-store-flush".into())
                .spawn(move || flusher::run(&shared, &rx, &spare_tx, &config, ends, resume))
                .map_err(crate::error::io("spawn flusher for", path))?
        };
        let mut store = Self {
            block: vec![0; meta.block_size as usize],
            used: BLOCK_HEADER_LEN,
            chunk: recovery.chunks,
            base_ts: 0,
            last_ts: recovery.last_ts,
            records: 0,
            prev: recovery.prev.clone(),
            acc: Vec::new(),
            wide: Wide::default(),
            acc_stale: false,
            next_summary: recovery.next_summary,
            to_flusher: Some(tx),
            spare,
            flusher: Some(flusher),
            shared,
            meta,
            recovery,
        };
        store.prev.resize(store.meta.sources.len(), None);
        store.rebuild_accumulators();
        Ok(store)
    }

    /// The capture directory, open: files beside the store's go in
    /// through it (see [`Dir`]).
    pub fn dir(&self) -> &Arc<Dir> {
        &self.shared.dir
    }

    /// What reopening found and cut.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// The store's schema.
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Defines a source; its id is stable across reopening.
    pub fn define_source(&mut self, name: &str, fields: Vec<Field>) -> Result<SourceId> {
        check_name(name)?;
        for field in &fields {
            check_name(&field.name)?;
        }
        if let Some(existing) = self.meta.sources.iter().find(|s| s.name == name) {
            if existing.fields != fields {
                return Err(Error::Invalid(format!(
                    "source `{name}` exists with other fields"
                )));
            }
            return Ok(existing.id);
        }
        // The last id is the key of the summary that closes a chunk's.
        let id = (SourceId::try_from(self.meta.sources.len()).ok())
            .filter(|id| *id < SourceId::MAX)
            .ok_or_else(|| Error::Invalid("too many sources".into()))?;
        self.meta.sources.push(Source {
            id,
            name: name.to_owned(),
            fields,
        });
        self.save_meta()?;
        self.prev.push(None);
        // Rebuilding would drop the active chunk's totals of other sources.
        self.acc.push(SourceAcc::default());
        Ok(id)
    }

    /// Defines an index over `field` of `source` with the given bin
    /// boundaries. It summarises chunks from the next one on; queries over
    /// older data scan instead (and say so in their stats).
    pub fn define_index(
        &mut self,
        source: SourceId,
        name: &str,
        field: Field,
        bins: Bins,
    ) -> Result<IndexId> {
        self.define_partitioned_index(source, name, field, bins, None)
    }

    /// Defines an index like [`Store::define_index`] whose bins are kept
    /// apart per part of `partition` (at most 2^20 bins in all).
    pub fn define_partitioned_index(
        &mut self,
        source: SourceId,
        name: &str,
        field: Field,
        bins: Bins,
        partition: Option<Partition>,
    ) -> Result<IndexId> {
        check_name(name)?;
        self.meta.source(source)?;
        let parts = partition.as_ref().map_or(1, |p| u64::from(p.count) + 1);
        if bins.len() as u64 * parts > 1 << 20 {
            return Err(Error::Invalid(format!(
                "index `{name}` would have {} bins; at most 2^20 are allowed",
                bins.len() as u64 * parts
            )));
        }
        let id = IndexId::try_from(self.meta.indexes.len() + 1)
            .map_err(|_| Error::Invalid("too many indexes".into()))?;
        let from_chunk = if self.records == 0 {
            self.chunk
        } else {
            self.chunk + 1
        };
        self.meta.indexes.push(Index {
            id,
            source,
            name: name.to_owned(),
            field,
            bins,
            from_chunk,
            until_chunk: None,
            partition,
            splits: None,
        });
        self.save_meta()?;
        if self.records == 0 {
            // The active chunk is empty: the index starts with it.
            self.rebuild_accumulators();
        } else {
            self.acc_stale = true;
        }
        Ok(id)
    }

    /// Keeps the values of index `values` apart per value of index `key`
    /// in the values log, in each chunk sealed from now on whose records
    /// `key` sees several values of (see [`crate::schema::Index::splits`]).
    /// Both are open indexes of one source, and `values` has no parts.
    pub fn split_values(&mut self, key: IndexId, values: IndexId) -> Result<()> {
        let (k, v) = (self.meta.index(key)?, self.meta.index(values)?);
        if k.source != v.source || v.parts() != 1 || k.until_chunk.or(v.until_chunk).is_some() {
            return Err(Error::Invalid(format!(
                "index `{}` cannot split `{}`: both must be open indexes of one source, \
                 the second without parts",
                k.name, v.name
            )));
        }
        if let Some(index) = self.meta.indexes.get_mut(usize::from(key) - 1) {
            index.splits = Some(values);
        }
        self.save_meta()
    }

    /// The open index of `source` called `name`, if there is one (so a
    /// reopened capture reuses its indexes instead of defining them twice).
    pub fn index_named(&self, source: SourceId, name: &str) -> Option<IndexId> {
        self.meta
            .indexes
            .iter()
            .find(|i| i.source == source && i.name == name && i.until_chunk.is_none())
            .map(|i| i.id)
    }

    /// Stops maintaining an index after the active chunk.
    pub fn close_index(&mut self, id: IndexId) -> Result<()> {
        self.meta.index(id)?;
        let until = self.chunk + u64::from(self.records > 0);
        if let Some(index) = self.meta.indexes.get_mut(usize::from(id) - 1) {
            index.until_chunk.get_or_insert(until);
        }
        self.save_meta()?;
        if self.records == 0 {
            self.rebuild_accumulators();
        } else {
            self.acc_stale = true;
        }
        Ok(())
    }

    /// Keeps the records of `[start_ts, end_ts]` from the disk budget and
    /// retention, within the pins' share of the budget ([`Config::pin_percent`]).
    /// A pin that starts at `start_ts` already (the same window, grown) is
    /// extended; any other is a pin of its own, released on its own.
    pub fn pin(&mut self, start_ts: u64, end_ts: u64) -> Result<()> {
        let same = (self.meta.pins.iter_mut().rev()).find(|(start, _)| *start == start_ts);
        match same {
            Some(pin) => pin.1 = pin.1.max(end_ts),
            None => self.meta.pins.push((start_ts, end_ts)),
        }
        self.save_meta()
    }

    /// Records appended but not yet written to disk: the sealed chunks the
    /// flusher has not committed and the active chunk. After a write
    /// failure (a full disk) they never will be: the caller counts them
    /// as lost.
    pub fn records_not_on_disk(&self) -> u64 {
        self.shared.sealed_records() + u64::from(self.records)
    }

    /// Makes every later write of the flusher fail with the OS error
    /// `errno` (`EIO`, `ENOSPC`), as a failing disk's would: for tests of
    /// what the store and its callers do then, where the kernel offers no
    /// device-mapper `error` or `flakey` target to fail a real disk.
    #[doc(hidden)]
    pub fn fail_writes(&self, errno: i32) {
        self.shared.fail_writes(errno);
    }

    /// Pins the disk budget has released since the store opened: the
    /// oldest, when the pins together passed their share of it.
    pub fn pins_released(&self) -> u64 {
        self.shared.pins_released()
    }

    fn save_meta(&mut self) -> Result<()> {
        self.meta.save(&self.shared.dir)?;
        self.shared.set_meta(self.meta.clone());
        Ok(())
    }

    /// Index accumulators for the active chunk, after a schema change.
    fn rebuild_accumulators(&mut self) {
        self.acc_stale = false;
        let chunk = self.chunk;
        self.acc = self
            .meta
            .sources
            .iter()
            .map(|source| SourceAcc {
                all: Acc::EMPTY,
                indexes: self.source_accumulators(source.id, chunk),
            })
            .collect();
    }

    /// The accumulators of `source`'s indexes in `chunk`, an index that
    /// is the sum of another's parts marked so.
    fn source_accumulators(&self, source: SourceId, chunk: u64) -> Vec<IndexAcc> {
        let mut indexes: Vec<IndexAcc> = (self.meta.indexes.iter())
            .filter(|index| index.source == source && index.covers(chunk))
            .map(|index| IndexAcc::new(index, self.split_of(index)))
            .collect();
        for at in 0..indexes.len() {
            let sum = &indexes[at];
            if sum.spec.partition.is_some() || sum.split.is_some() {
                continue;
            }
            let parts = indexes.iter().position(|p| {
                p.spec.partition.is_some()
                    && p.copies_to.is_none()
                    && p.spec.field == sum.spec.field
                    && p.spec.bins == sum.spec.bins
            });
            if let Some(parts) = parts {
                indexes[parts].copies_to = Some(indexes[at].spec.id);
                indexes[at].parts_of = Some(parts);
            }
        }
        indexes
    }

    /// The index whose values key index `index` splits in the active
    /// chunk, as the values log's [`Keyed`] sections take them.
    fn split_of(&self, index: &Index) -> Option<&Index> {
        let values = self.meta.index(index.splits?).ok()?;
        (values.covers(self.chunk) && values.parts() == 1).then_some(values)
    }

    /// Appends a record stamped with the current `CLOCK_MONOTONIC` time.
    pub fn append(&mut self, source: SourceId, payload: &[u8]) -> Result<u64> {
        self.append_at(source, crate::now_ns(), None, payload)
    }

    /// Appends a record with arrival time `ts` (raised to the last arrival
    /// time if earlier, so arrival times never go back) and optionally the
    /// producer's own timestamp. Returns the record's address.
    pub fn append_at(
        &mut self,
        source: SourceId,
        ts: u64,
        producer_ts: Option<u64>,
        payload: &[u8],
    ) -> Result<u64> {
        if self.shared.is_poisoned() {
            let reason = self.shared.poisoned().unwrap_or_default();
            return Err(Error::Poisoned(reason));
        }
        if usize::from(source) >= self.acc.len() {
            return Err(Error::Unknown {
                what: "source",
                id: u32::from(source),
            });
        }
        let ts = ts.max(self.last_ts);
        let len = u32::try_from(payload.len()).map_err(|_| self.too_large(payload.len()))?;
        if self.used + MAX_RECORD_HEADER + payload.len() > self.block.len() {
            self.make_room(source, len, ts, producer_ts)?;
        }
        if self.records == 0 {
            self.base_ts = ts;
        }
        let addr = self.chunk * u64::from(self.meta.block_size) + self.used as u64;
        let prev = &mut self.prev[usize::from(source)];
        let header = RecordHeader {
            source,
            len,
            ts,
            prev: *prev,
            producer_ts,
        };
        // Fast path: the header goes straight into the block.
        let end = if self.used + MAX_RECORD_HEADER <= self.block.len() {
            self.used + header.encode_into(&mut self.block[self.used..], addr, self.base_ts)
        } else {
            let encoded = header.encode(addr, self.base_ts);
            let end = self.used + encoded.as_slice().len();
            self.block[self.used..end].copy_from_slice(encoded.as_slice());
            end
        };
        *prev = Some(addr);
        self.block[end..end + payload.len()].copy_from_slice(payload);
        self.used = end + payload.len();
        self.records += 1;
        self.last_ts = ts;
        let acc = &mut self.acc[usize::from(source)];
        acc.all.add_own_time(producer_ts.unwrap_or(ts), ts, addr);
        for index in &mut acc.indexes {
            if index.parts_of.is_none() {
                index.add(payload, ts, addr, &mut self.wide);
            }
        }
        Ok(addr)
    }

    /// Seals the active chunk if this record's exact size does not fit the
    /// rest of it; fails if it would not fit even an empty chunk.
    #[cold]
    fn make_room(
        &mut self,
        source: SourceId,
        len: u32,
        ts: u64,
        producer_ts: Option<u64>,
    ) -> Result<()> {
        let base_ts = if self.records == 0 { ts } else { self.base_ts };
        let addr = self.chunk * u64::from(self.meta.block_size) + self.used as u64;
        let prev = self.prev[usize::from(source)];
        let header = RecordHeader {
            source,
            len,
            ts,
            prev,
            producer_ts,
        }
        .encode(addr, base_ts);
        if self.used + header.as_slice().len() + len as usize <= self.block.len() {
            return Ok(());
        }
        if self.records > 0 {
            self.seal()?;
        }
        // In an empty chunk the header is at its largest when `prev` points
        // to an older chunk; check against the worst case.
        if BLOCK_HEADER_LEN + MAX_RECORD_HEADER + len as usize > self.block.len() {
            return Err(self.too_large(len as usize));
        }
        Ok(())
    }

    fn too_large(&self, size: usize) -> Error {
        Error::RecordTooLarge {
            size,
            block_size: self.meta.block_size,
        }
    }

    /// Makes everything appended so far visible to new snapshots, including
    /// the unsealed tail (one copy of the active chunk's used bytes).
    pub fn publish(&mut self) {
        if self.records > 0 {
            let partial = self.sealed_view(self.block[..self.used].to_vec());
            self.shared.set_partial(Some(Arc::new(partial)));
        }
    }

    /// A consistent view of everything published so far.
    pub fn snapshot(&self) -> Snapshot {
        self.shared.snapshot()
    }

    /// A handle that takes snapshots from other threads (live queries).
    pub fn reader(&self) -> Reader {
        Reader(Arc::clone(&self.shared))
    }

    /// Seals the active chunk (if it holds records), publishes it and waits
    /// until the flusher has taken it.
    pub fn seal(&mut self) -> Result<()> {
        if self.records == 0 {
            return Ok(());
        }
        self.block[self.used..].fill(0);
        let size = self.meta.block_size as usize;
        // A reused buffer needs no clearing: records overwrite it from the
        // header on, and sealing zeroes everything past the last record.
        for index in self.acc.iter_mut().flat_map(|acc| &mut acc.indexes) {
            index.flush(&mut self.wide);
        }
        let next = self.spare.try_recv().unwrap_or_else(|_| vec![0; size]);
        let block = std::mem::replace(&mut self.block, next);
        // Sealed there (its header and checksum), once.
        let sealed = Arc::new(self.sealed_view(block));
        self.next_summary += u64::from(sealed.time.summaries);
        self.shared.push_sealed(Arc::clone(&sealed));
        let sender = self
            .to_flusher
            .as_ref()
            .ok_or_else(|| Error::Poisoned("store is closed".into()))?;
        if sender.send((sealed, self.wide.take())).is_err() {
            // Its records are the sealed chunk's now, which counts them
            // as not on disk; the active chunk must not count them again.
            self.records = 0;
            return Err(Error::Poisoned(
                self.shared
                    .poisoned()
                    .unwrap_or_else(|| "the flusher stopped".into()),
            ));
        }
        self.chunk += 1;
        self.used = BLOCK_HEADER_LEN;
        self.records = 0;
        if self.acc_stale {
            self.rebuild_accumulators();
        } else {
            for acc in &mut self.acc {
                acc.all = Acc::EMPTY;
                acc.indexes.iter_mut().for_each(IndexAcc::reset);
            }
        }
        Ok(())
    }

    /// The active chunk as a [`Sealed`] value over `block`, with its summaries.
    fn sealed_view(&self, mut block: Vec<u8>) -> Sealed {
        BlockHeader {
            used: self.used as u32,
            number: self.chunk,
            base_ts: self.base_ts,
        }
        .seal(&mut block);
        let mut summaries = Vec::new();
        for (source, acc) in self.acc.iter().enumerate() {
            let source = source as SourceId;
            if acc.all.count > 0 {
                summaries.push(acc.all.summary(self.chunk, source, 0, 0));
            }
            for index in &acc.indexes {
                match index.parts_of.and_then(|at| acc.indexes.get(at)) {
                    Some(parts) => {
                        index.summaries_of_parts(parts, self.chunk, source, &mut summaries);
                    }
                    None => index.summaries(self.chunk, source, &mut summaries),
                }
            }
        }
        let time = TimeEntry {
            chunk: self.chunk,
            first_ts: self.base_ts,
            last_ts: self.last_ts,
            first_summary: self.next_summary,
            // On disk, the summary closing them follows (version 5).
            summaries: summaries.len() as u32 + u32::from(self.meta.format.closes_summaries()),
            records: self.records,
            // The flusher places the values when it writes them.
            ..TimeEntry::default()
        };
        Sealed {
            block,
            summaries,
            time,
        }
    }

    /// Seals the active chunk, waits for the flusher to write everything and
    /// stops it. Errors that happened in the background are returned here.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        let sealed = self.seal();
        self.to_flusher = None;
        if let Some(flusher) = self.flusher.take() {
            let _ = flusher.join();
        }
        sealed?;
        if let Some(reason) = self.shared.poisoned() {
            return Err(Error::Poisoned(reason));
        }
        // Everything is on disk (the flusher synced it before it stopped).
        self.meta.closed = Some(Closed {
            chunks: self.chunk,
            deleted: self.shared.deleted(),
            groups_end: Some(self.shared.groups_end().max(FILE_HEADER_LEN as u64)),
        });
        self.save_meta()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if self.flusher.is_some()
            && let Err(error) = self.shutdown()
        {
            log::warn!(
                "weft-store: closing {} failed: {error}",
                self.shared.dir.path().display()
            );
        }
    }
}
