//! Query operators over a [`Snapshot`]: raw and indexed scans, aggregates and
//! exact percentiles.
//!
//! Every operator first finds the chunks whose time span meets the window by
//! binary search over the time index. Chunks that lie wholly inside the
//! window and are covered by the index are answered from their summaries;
//! the others (the window's edges, the unsealed tail, chunks older than the
//! index) are scanned record by record. A source's records in a chunk are
//! reached through its back-pointers when it is a small share of the chunk,
//! so rare sources cost little to read.
//!
//! By read path: `scan` reads records, `aggregate` counts from summaries
//! where they answer, `quantile` finds exact quantiles and value bins; this
//! module holds what they share (a window's chunks, reading a chunk's
//! records, what a query reads from each record).
#![expect(
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "range arithmetic moves between i64 values and u128 spans on purpose"
)]

mod aggregate;
mod buckets;
mod keyed;
mod quantile;
mod rolled;
mod scan;

pub use buckets::OwnTimes;
pub use keyed::KeyAnswer;
pub use quantile::{PartAnswer, ValueCounts};

use std::ops::{Range, RangeInclusive};

use crate::{
    error::{Error, Result},
    format::{
        BLOCK_HEADER_LEN, BlockHeader, FormatVersion, RecordHeader, Summary, back_chain, get_varint,
    },
    keys::KeyRange,
    schema::{Index, IndexId, SourceId},
    shared::{ChunkMeta, Snapshot},
    values::COPIED_RECORDS,
};

/// The record framed at `*pos` of `bytes` (a block, or copies of its
/// records), whose address is `addr`, in a block based at `base_ts`;
/// `*pos` moves past it. `None` if it does not decode.
fn decode_record<'a>(
    bytes: &'a [u8],
    pos: &mut usize,
    addr: u64,
    base_ts: u64,
) -> Option<RecordRef<'a>> {
    let header = RecordHeader::decode(bytes, pos, addr, base_ts)?;
    let payload = bytes.get(*pos..pos.checked_add(header.len as usize)?)?;
    *pos += payload.len();
    Some(RecordRef {
        addr,
        source: header.source,
        ts: header.ts,
        producer_ts: header.producer_ts,
        payload,
    })
}

/// One record as read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Byte address in the record log.
    pub addr: u64,
    /// The record's source.
    pub source: SourceId,
    /// Arrival time, ns.
    pub ts: u64,
    /// The producer's own timestamp, if it gave one.
    pub producer_ts: Option<u64>,
    /// The bytes appended.
    pub payload: Vec<u8>,
}

/// A record lent to a scan's visitor, valid for the call: scans visit
/// millions of records, and owning each would cost an allocation apiece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Byte address in the record log.
    pub addr: u64,
    /// The record's source.
    pub source: SourceId,
    /// Arrival time, ns.
    pub ts: u64,
    /// The producer's own timestamp, if it gave one.
    pub producer_ts: Option<u64>,
    /// The bytes appended.
    pub payload: &'a [u8],
}

impl RecordView<'_> {
    /// The record, owned.
    pub fn to_owned(&self) -> Record {
        Record {
            addr: self.addr,
            source: self.source,
            ts: self.ts,
            producer_ts: self.producer_ts,
            payload: self.payload.to_vec(),
        }
    }
}

/// How a query was answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryStats {
    /// Chunks answered from their summaries alone.
    pub chunks_summarized: u64,
    /// Chunks whose records were read.
    pub chunks_scanned: u64,
    /// Chunks skipped because their summaries showed nothing to find.
    pub chunks_skipped: u64,
    /// Chunks in the window deleted by the disk budget (not in the answer).
    pub chunks_expired: u64,
    /// Chunks in the window left out as damaged (`--skip-damaged`).
    pub chunks_damaged: u64,
    /// Chunks read for the values in the bins exact quantiles fall in
    /// (after their summaries had named the bins).
    pub chunks_read_for_bins: u64,
    /// Chunks whose values in those bins an earlier query had gathered.
    pub chunks_cached_for_bins: u64,
    /// Chunks whose values in those bins came from the values log.
    pub chunks_valued_for_bins: u64,
    /// Of the chunks answered or skipped by summaries, those decided by
    /// their group's merged summaries (format 3), without reading their own.
    pub chunks_in_groups: u64,
    /// Deleted chunks answered from the summaries kept of them
    /// (`Config::retain_summaries`): the answer is approximate.
    pub chunks_rolled_up: u64,
    /// The longest span of records' times one of those summaries covers:
    /// where it meets a window's or bucket's edge, it counts wholly on the
    /// side of its middle, so this is the answer's time resolution (ns).
    pub rolled_up_span: u64,
    /// Where one of those summaries was split by value (a quantile or a
    /// bound inside its bin), the widest such bin: the answer's error bound
    /// in the units of the values.
    pub rolled_up_error: u64,
}

impl QueryStats {
    /// Adds what `other` counted: two passes over parts of one window.
    pub fn absorb(&mut self, other: &Self) {
        let Self {
            chunks_summarized,
            chunks_scanned,
            chunks_skipped,
            chunks_expired,
            chunks_damaged,
            chunks_read_for_bins,
            chunks_cached_for_bins,
            chunks_valued_for_bins,
            chunks_in_groups,
            chunks_rolled_up,
            rolled_up_span,
            rolled_up_error,
        } = *other;
        self.chunks_summarized += chunks_summarized;
        self.chunks_scanned += chunks_scanned;
        self.chunks_skipped += chunks_skipped;
        self.chunks_expired += chunks_expired;
        self.chunks_damaged += chunks_damaged;
        self.chunks_read_for_bins += chunks_read_for_bins;
        self.chunks_cached_for_bins += chunks_cached_for_bins;
        self.chunks_valued_for_bins += chunks_valued_for_bins;
        self.chunks_in_groups += chunks_in_groups;
        self.chunks_rolled_up += chunks_rolled_up;
        self.rolled_up_span = self.rolled_up_span.max(rolled_up_span);
        self.rolled_up_error = self.rolled_up_error.max(rolled_up_error);
    }

    /// A chunk left out of the answer: damaged, or deleted by the budget.
    fn leave_out(&mut self, damaged: bool) {
        if damaged {
            self.chunks_damaged += 1;
        } else {
            self.chunks_expired += 1;
        }
    }

    /// A run of chunks answered by its group's merged summaries.
    fn add_run(&mut self, run: &Range<u64>) {
        self.chunks_summarized += run.end - run.start;
        self.chunks_in_groups += run.end - run.start;
    }
}

/// Count, sum, min and max of an index's values in a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Aggregate {
    /// Values counted.
    pub count: u64,
    /// Their sum.
    pub sum: i128,
    /// The smallest, if any.
    pub min: Option<i64>,
    /// The largest, if any.
    pub max: Option<i64>,
}

impl Aggregate {
    fn add(&mut self, value: i64) {
        self.count += 1;
        self.sum += i128::from(value);
        self.min = Some(self.min.map_or(value, |m| m.min(value)));
        self.max = Some(self.max.map_or(value, |m| m.max(value)));
    }

    fn merge(&mut self, s: &Summary) {
        self.count = self.count.saturating_add(s.count);
        self.sum = self.sum.saturating_add(s.sum);
        self.min = Some(self.min.map_or(s.min, |m| m.min(s.min)));
        self.max = Some(self.max.map_or(s.max, |m| m.max(s.max)));
    }

    /// Adds the values `other` counted.
    fn absorb(&mut self, other: &Self) {
        self.count = self.count.saturating_add(other.count);
        self.sum = self.sum.saturating_add(other.sum);
        self.min = self.min.into_iter().chain(other.min).min();
        self.max = self.max.into_iter().chain(other.max).max();
    }

    /// The mean, if there are values.
    pub fn avg(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum as f64 / self.count as f64)
    }
}

/// A record borrowed from a chunk while it is visited.
struct RecordRef<'a> {
    addr: u64,
    source: SourceId,
    ts: u64,
    producer_ts: Option<u64>,
    payload: &'a [u8],
}

/// What a scan or aggregate reads from each record.
#[derive(Clone)]
struct Target {
    source: SourceId,
    window: RangeInclusive<u64>,
    index: Option<Index>,
    /// Only this part of a partitioned index.
    part: Option<u32>,
    /// Only records whose own time (the producer's timestamp, else
    /// arrival) lies here: one time bucket of `every`.
    own: Option<RangeInclusive<u64>>,
    /// Only these chunks of the window: those that may hold the bucket's
    /// records ([`OwnTimes`]).
    chunks: Option<Range<u64>>,
}

impl Target {
    fn index_id(&self) -> IndexId {
        self.index.as_ref().map_or(0, |spec| spec.id)
    }

    /// The summary keys a chunk's reader should decode: the source's
    /// index-0 summary (its place in the chunk) and the target's own.
    fn keys(&self) -> Vec<KeyRange> {
        let mut keys = vec![(self.source, 0, 0..=u32::MAX)];
        if let Some(spec) = &self.index {
            let bins = match self.part {
                Some(part) => part * self.value_bins()..=(part + 1) * self.value_bins() - 1,
                None => 0..=u32::MAX,
            };
            keys.push((self.source, spec.id, bins));
        }
        keys
    }

    /// Whether summary `s` counts for the target.
    fn wants(&self, s: &Summary) -> bool {
        s.source == self.source
            && s.index == self.index_id()
            && self.part.is_none_or(|p| s.bin / self.value_bins() == p)
    }

    /// Value bins per part.
    fn value_bins(&self) -> u32 {
        self.index.as_ref().map_or(1, |spec| spec.bins.len() as u32)
    }

    /// Whether a record with these times is in the target's time bucket.
    fn owns(&self, ts: u64, producer_ts: Option<u64>) -> bool {
        (self.own.as_ref()).is_none_or(|own| own.contains(&producer_ts.unwrap_or(ts)))
    }

    /// Whether a record of the source belongs to the target's part.
    fn keeps(&self, payload: &[u8]) -> bool {
        match (&self.index, self.part) {
            (Some(spec), Some(part)) => spec.part_of(payload) == part,
            _ => true,
        }
    }

    /// The indexed value of a record (0 for the implicit index 0).
    fn value(&self, payload: &[u8]) -> Option<i64> {
        match &self.index {
            Some(spec) => spec.field.read(payload),
            None => Some(0),
        }
    }
}

/// Chunks decoded per parallel batch of a scan.
const SCAN_BATCH: usize = 32;

/// What visiting one chunk needs: its number, record count and the
/// target source's per-source summary.
#[derive(Clone, Copy)]
struct ChunkRef {
    chunk: u64,
    records: u32,
    all: Summary,
    /// Where its values-log entry lies, and how long it is (0: none).
    values: (u64, u32),
}

impl ChunkRef {
    /// The chunk's reference for `source`, if the source has records there.
    fn of(meta: &ChunkMeta, source: SourceId) -> Option<Self> {
        let all = *meta.all(source)?;
        Some(Self {
            chunk: meta.time.chunk,
            records: meta.time.records,
            all,
            values: (meta.time.values_at, meta.time.values_len),
        })
    }
}

impl Snapshot {
    /// The chunks a target reads: those whose time span meets its window,
    /// of those it is given.
    fn target_chunks(&self, target: &Target) -> Result<Range<u64>> {
        let range = self.chunks_in(&target.window)?;
        Ok(match &target.chunks {
            Some(only) => range.start.max(only.start)..range.end.min(only.end).max(range.start),
            None => range,
        })
    }

    /// Chunks whose time span meets `window`.
    fn chunks_in(&self, window: &RangeInclusive<u64>) -> Result<Range<u64>> {
        let n = self.chunks();
        let start = partition(n, |c| Ok(self.time_entry(c)?.last_ts < *window.start()))?;
        let end = partition(n, |c| Ok(self.time_entry(c)?.first_ts <= *window.end()))?;
        Ok(start..end.max(start))
    }

    fn target(
        &self,
        source: SourceId,
        index: IndexId,
        part: Option<u32>,
        window: RangeInclusive<u64>,
    ) -> Result<Target> {
        self.meta().source(source)?;
        let index = if index == 0 {
            None
        } else {
            let spec = self.meta().index(index)?;
            if spec.source != source {
                return Err(Error::Invalid(format!(
                    "index {index} is not an index of source {source}"
                )));
            }
            Some(spec.clone())
        };
        let parts = index.as_ref().map_or(1, Index::parts);
        if let Some(part) = part.filter(|p| *p >= parts || parts == 1) {
            return Err(Error::Invalid(format!(
                "index {} has no part {part} (it has {parts})",
                index.as_ref().map_or(0, |s| s.id)
            )));
        }
        Ok(Target {
            source,
            window,
            index,
            part,
            own: None,
            chunks: None,
        })
    }

    fn covered(&self, index: IndexId, chunk: u64) -> bool {
        index == 0
            || self
                .meta()
                .index(index)
                .is_ok_and(|spec| spec.covers(chunk))
    }

    /// Whether summaries alone answer for this chunk: all its records lie in
    /// the window and the index covers it.
    fn summarizes(&self, meta: &ChunkMeta, target: &Target) -> bool {
        let chunk = meta.time.chunk;
        self.summarizes_run(meta, &(chunk..chunk + 1), target)
    }

    /// [`Snapshot::summarizes`] for a run of chunks merged in the groups
    /// log: all its records lie in the window, and the index covers every
    /// chunk of it.
    fn summarizes_run(&self, meta: &ChunkMeta, run: &Range<u64>, target: &Target) -> bool {
        target.window.contains(&meta.time.first_ts)
            && target.window.contains(&meta.time.last_ts)
            && self.covered(target.index_id(), run.start)
            && self.covered(target.index_id(), run.end - 1)
            && match (self.own_span(meta, target), &target.own) {
                (Some((first, last)), Some(own)) => own.contains(&first) && own.contains(&last),
                _ => true,
            }
    }

    /// The first and last own time of the target's records in a chunk (or
    /// run), by its summaries, when the target has a time bucket; `(0,
    /// u64::MAX)` where the summaries do not say (format 1, or no record).
    fn own_span(&self, meta: &ChunkMeta, target: &Target) -> Option<(u64, u64)> {
        target.own.as_ref()?;
        // Index 0's summaries hold the records' own times (format 2 on).
        match meta.all(target.source) {
            Some(all) if self.meta().format != FormatVersion::V1 => {
                Some((all.min.cast_unsigned(), all.max.cast_unsigned()))
            }
            _ => Some((0, u64::MAX)),
        }
    }

    /// Whether a chunk (or run) holds none of the target's time bucket, by
    /// its summaries.
    fn outside_bucket(&self, meta: &ChunkMeta, target: &Target) -> bool {
        match (self.own_span(meta, target), &target.own) {
            (Some((first, last)), Some(own)) => last < *own.start() || first > *own.end(),
            _ => false,
        }
    }

    /// Calls `visit` with each record of `target.source` in the chunk and in
    /// the window, oldest first, borrowed from the chunk's bytes (or from
    /// their copies in its values entry, where a few records of the source
    /// were copied there).
    fn visit_chunk(
        &self,
        at: &ChunkRef,
        target: &Target,
        mut visit: impl FnMut(RecordRef<'_>),
    ) -> Result<()> {
        let chunk = at.chunk;
        let base = chunk * u64::from(self.meta().block_size);
        let keep = |r: &RecordRef<'_>| {
            r.source == target.source
                && target.window.contains(&r.ts)
                && target.owns(r.ts, r.producer_ts)
                && target.keeps(r.payload)
        };
        if at.all.count <= COPIED_RECORDS
            && self.is_sealed(chunk)
            && let Some((records, body)) = self.stored_copies(chunk, at.values, target.source)?
        {
            let corrupt = || {
                Error::Invalid(format!(
                    "chunk {chunk}: bad copied record in values.log at offset {}",
                    at.values.0
                ))
            };
            let mut pos = 0;
            let base_ts = get_varint(&body, &mut pos).ok_or_else(corrupt)?;
            for _ in 0..records {
                let offset = get_varint(&body, &mut pos).ok_or_else(corrupt)?;
                let addr = base.checked_add(offset).ok_or_else(corrupt)?;
                let record = decode_record(&body, &mut pos, addr, base_ts).ok_or_else(corrupt)?;
                if keep(&record) {
                    visit(record);
                }
            }
            return Ok(());
        }
        let block = match self.block(chunk) {
            // Deleted by the budget since its summaries were read: left
            // out, as if it had gone before the query began.
            Err(Error::Expired { .. }) => return Ok(()),
            block => block?,
        };
        let bytes = block.bytes();
        let header = BlockHeader::open(bytes).map_err(Error::Invalid)?;
        let decode = |offset: usize| -> Result<(RecordRef<'_>, usize)> {
            let mut pos = offset;
            let record = decode_record(bytes, &mut pos, base + offset as u64, header.base_ts)
                .ok_or_else(|| {
                    Error::Invalid(format!(
                        "chunk {chunk}: bad record framing at offset {offset}"
                    ))
                })?;
            Ok((record, pos))
        };
        if at.all.count.saturating_mul(4) < u64::from(at.records) {
            // A small share of the chunk: follow the back-pointers.
            let spans =
                back_chain(bytes, base, header.base_ts, at.all.last_addr).map_err(|offset| {
                    Error::Invalid(format!(
                        "chunk {chunk}: bad record framing at offset {offset}"
                    ))
                })?;
            for (start, _, _) in spans.into_iter().rev() {
                let (record, _) = decode(start)?;
                if keep(&record) {
                    visit(record);
                }
            }
        } else {
            let mut offset = BLOCK_HEADER_LEN;
            while offset < header.used as usize {
                let (record, next) = decode(offset)?;
                offset = next;
                if keep(&record) {
                    visit(record);
                }
            }
        }
        Ok(())
    }

    /// Calls `visit` with the index value of each record of the target in
    /// the chunk (0 for the implicit index 0).
    fn visit_values(
        &self,
        at: &ChunkRef,
        target: &Target,
        mut visit: impl FnMut(i64),
    ) -> Result<()> {
        self.visit_chunk(at, target, |record| {
            if let Some(value) = target.value(record.payload) {
                visit(value);
            }
        })
    }

    /// Arrival times of the first and last record visible, if any.
    pub fn time_range(&self) -> Result<Option<RangeInclusive<u64>>> {
        let Some(last) = self.chunks().checked_sub(1) else {
            return Ok(None);
        };
        Ok(Some(
            self.time_entry(0)?.first_ts..=self.time_entry(last)?.last_ts,
        ))
    }

    /// Whether a chunk may hold records for the target, by its summaries.
    fn may_hold(
        &self,
        meta: &ChunkMeta,
        at: &ChunkRef,
        target: &Target,
        values: Option<&RangeInclusive<i64>>,
    ) -> bool {
        if at.all.last_ts < *target.window.start() || at.all.first_ts > *target.window.end() {
            return false;
        }
        match (&target.index, values) {
            (Some(spec), Some(values)) if self.covered(spec.id, at.chunk) => meta
                .summaries
                .iter()
                .any(|s| target.wants(s) && s.min <= *values.end() && s.max >= *values.start()),
            _ => true,
        }
    }

    /// [`Snapshot::may_hold`] for a run of chunks, by its merged summaries.
    fn run_may_hold(
        &self,
        meta: &ChunkMeta,
        run: &Range<u64>,
        target: &Target,
        values: Option<&RangeInclusive<i64>>,
    ) -> bool {
        let Some(all) = meta.all(target.source) else {
            return false;
        };
        if all.last_ts < *target.window.start() || all.first_ts > *target.window.end() {
            return false;
        }
        match (&target.index, values) {
            (Some(spec), Some(values))
                if self.covered(spec.id, run.start) && self.covered(spec.id, run.end - 1) =>
            {
                meta.summaries
                    .iter()
                    .any(|s| target.wants(s) && s.min <= *values.end() && s.max >= *values.start())
            }
            _ => true,
        }
    }
}

/// First index in `0..n` for which `pred` is false (`pred` is monotone).
fn partition(n: u64, pred: impl Fn(u64) -> Result<bool>) -> Result<u64> {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid)? {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Runs `work` over `chunks` on two threads (the machine's cores) and
/// returns the per-thread results in chunk order.
fn parallel<C: Sync, T: Send>(
    chunks: &[C],
    work: impl Fn(&[C]) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    if chunks.len() < 8 {
        return Ok(vec![work(chunks)?]);
    }
    let (left, right) = chunks.split_at(chunks.len() / 2);
    let (mine, other) = both(|| work(left), || work(right))?;
    Ok(vec![mine, other])
}

/// Runs `left` on this thread and `right` on another (the machine's two
/// cores), and returns both results.
fn both<A, B: Send>(
    left: impl FnOnce() -> Result<A>,
    right: impl FnOnce() -> Result<B> + Send,
) -> Result<(A, B)> {
    std::thread::scope(|scope| {
        let other = scope.spawn(right);
        let mine = left();
        let other = other
            .join()
            .map_err(|_| Error::Invalid("a query thread panicked".into()))?;
        Ok((mine?, other?))
    })
}
