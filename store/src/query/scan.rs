//! Scans: every record of a source in a window, or those an index finds.

use std::{
    ops::{Range, RangeInclusive},
    sync::{Mutex, PoisonError},
};

use super::{ChunkRef, QueryStats, Record, RecordRef, RecordView, SCAN_BATCH, Target, parallel};

use crate::{
    error::Result,
    schema::{IndexId, SourceId},
    shared::Snapshot,
};

/// Records a scan's thread kept from its chunks: their payloads end to
/// end in one buffer, so that keeping a record costs no allocation.
#[derive(Default)]
struct Kept {
    payloads: Vec<u8>,
    /// Each record with an empty payload and where its payload ends in
    /// `payloads` (it starts where the one before ends).
    records: Vec<(RecordView<'static>, usize)>,
}

impl Kept {
    fn push(&mut self, record: &RecordRef<'_>) {
        self.payloads.extend_from_slice(record.payload);
        let view = RecordView {
            addr: record.addr,
            source: record.source,
            ts: record.ts,
            producer_ts: record.producer_ts,
            payload: &[],
        };
        self.records.push((view, self.payloads.len()));
    }

    fn clear(&mut self) {
        self.payloads.clear();
        self.records.clear();
    }

    fn visit(&self, visit: &mut impl FnMut(RecordView<'_>)) {
        let mut start = 0;
        for (view, end) in &self.records {
            visit(RecordView {
                payload: &self.payloads[start..*end],
                ..*view
            });
            start = *end;
        }
    }
}

impl Snapshot {
    /// Every record of `source` with arrival time in `window`, oldest first.
    pub fn raw_scan(
        &self,
        source: SourceId,
        window: RangeInclusive<u64>,
    ) -> Result<(Vec<Record>, QueryStats)> {
        let mut records = Vec::new();
        let stats = self.raw_scan_each(source, window, |r| {
            records.push(r.to_owned());
        })?;
        Ok((records, stats))
    }

    /// Streaming form of [`Snapshot::raw_scan`]: memory is one chunk.
    pub fn raw_scan_each(
        &self,
        source: SourceId,
        window: RangeInclusive<u64>,
        mut visit: impl FnMut(RecordView<'_>),
    ) -> Result<QueryStats> {
        let target = self.target(source, 0, None, window)?;
        self.scan_chunks(&target, None, &mut visit)
    }

    /// [`Snapshot::raw_scan_each`] over the chunks numbered `chunks` (as
    /// [`Snapshot::chunks`] counts them), whatever their times: a reader
    /// that has read the chunks before `chunks.start` reads only what came
    /// since. Records arrive in the order written.
    pub fn raw_scan_chunks(
        &self,
        source: SourceId,
        chunks: Range<u64>,
        mut visit: impl FnMut(RecordView<'_>),
    ) -> Result<QueryStats> {
        let target = self.target(source, 0, None, 0..=u64::MAX)?;
        let chunks = chunks.start.min(self.chunks())..chunks.end.min(self.chunks());
        self.scan_range(&target, chunks, None, &mut visit)
    }

    /// Records of `source` in `window` whose `index` value lies in `values`.
    pub fn indexed_scan(
        &self,
        source: SourceId,
        index: IndexId,
        window: RangeInclusive<u64>,
        values: RangeInclusive<i64>,
    ) -> Result<(Vec<Record>, QueryStats)> {
        let mut records = Vec::new();
        let stats = self.indexed_scan_each(source, index, window, values, |r| {
            records.push(r.to_owned());
        })?;
        Ok((records, stats))
    }

    /// Streaming form of [`Snapshot::indexed_scan`].
    pub fn indexed_scan_each(
        &self,
        source: SourceId,
        index: IndexId,
        window: RangeInclusive<u64>,
        values: RangeInclusive<i64>,
        mut visit: impl FnMut(RecordView<'_>),
    ) -> Result<QueryStats> {
        self.indexed_scan_part_each(source, index, None, window, values, &mut visit)
    }

    /// [`Snapshot::indexed_scan_each`] within one part of a partitioned
    /// index (records whose partition field has that value), or all parts.
    pub fn indexed_scan_part_each(
        &self,
        source: SourceId,
        index: IndexId,
        part: Option<u32>,
        window: RangeInclusive<u64>,
        values: RangeInclusive<i64>,
        mut visit: impl FnMut(RecordView<'_>),
    ) -> Result<QueryStats> {
        let target = self.target(source, index, part, window)?;
        self.scan_chunks(&target, Some(&values), &mut visit)
    }

    fn scan_chunks(
        &self,
        target: &Target,
        values: Option<&RangeInclusive<i64>>,
        visit: &mut impl FnMut(RecordView<'_>),
    ) -> Result<QueryStats> {
        let range = self.chunks_in(&target.window)?;
        self.scan_range(target, range, values, visit)
    }

    /// [`Snapshot::scan_chunks`] over the chunks numbered `range`.
    fn scan_range(
        &self,
        target: &Target,
        range: Range<u64>,
        values: Option<&RangeInclusive<i64>>,
        visit: &mut impl FnMut(RecordView<'_>),
    ) -> Result<QueryStats> {
        let mut stats = QueryStats::default();
        let mut wanted = Vec::new();
        self.for_each_span(range, &target.keys(), |meta, run| {
            if let Some(run) = run {
                // A run whose merged summaries rule it out is skipped whole.
                let skip = !self.run_may_hold(meta, &run, target, values);
                if skip {
                    stats.chunks_skipped += run.end - run.start;
                    stats.chunks_in_groups += run.end - run.start;
                }
                return Ok(skip);
            }
            match ChunkRef::of(meta, target.source) {
                _ if self.is_gone(meta.time.chunk) => {
                    stats.leave_out(self.is_damaged(meta.time.chunk));
                }
                Some(at) if self.may_hold(meta, &at, target, values) => wanted.push(at),
                _ => stats.chunks_skipped += 1,
            }
            Ok(true)
        })?;
        stats.chunks_scanned = wanted.len() as u64;
        // Batches keep memory bounded and the output in order while both
        // cores decode.
        // Buffers go back to a pool after each batch: fresh ones of
        // megabytes would be mapped and zeroed by the kernel every time.
        let pool: Mutex<Vec<Kept>> = Mutex::default();
        for batch in wanted.chunks(SCAN_BATCH) {
            let parts = parallel(batch, |part| {
                let mut kept = pool
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .pop()
                    .unwrap_or_default();
                for at in part {
                    self.visit_chunk(at, target, |record| {
                        let keep = match (&target.index, values) {
                            (Some(spec), Some(values)) => spec
                                .field
                                .read(record.payload)
                                .is_some_and(|v| values.contains(&v)),
                            _ => true,
                        };
                        if keep {
                            kept.push(&record);
                        }
                    })?;
                }
                Ok(kept)
            })?;
            for mut kept in parts {
                kept.visit(visit);
                kept.clear();
                pool.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(kept);
            }
        }
        Ok(stats)
    }
}
