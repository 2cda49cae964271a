//! Aggregates: count, sum, min and max from the chunks' summaries where
//! they answer, and counts per time bucket.

use std::{collections::BTreeMap, ops::RangeInclusive};

use super::{Aggregate, ChunkRef, OwnTimes, QueryStats, Target};

use crate::{
    error::{Error, Result},
    format::{FormatVersion, Summary},
    schema::{IndexId, SourceId},
    shared::Snapshot,
};

impl Snapshot {
    /// Count, sum, min and max of `index`'s values for `source` in `window`.
    pub fn aggregate(
        &self,
        source: SourceId,
        index: IndexId,
        window: RangeInclusive<u64>,
    ) -> Result<(Aggregate, QueryStats)> {
        self.aggregate_part(source, index, None, window, i64::MIN..=i64::MAX)
    }

    /// [`Snapshot::aggregate`] of the values in `values` only, within one
    /// part of a partitioned index (or all parts): "how many pread64 took
    /// over 80 us". A chunk whose summaries each lie wholly inside or
    /// outside `values` is answered by them; the others (holding the bin
    /// that straddles a bound) are read.
    pub fn aggregate_part(
        &self,
        source: SourceId,
        index: IndexId,
        part: Option<u32>,
        window: RangeInclusive<u64>,
        values: RangeInclusive<i64>,
    ) -> Result<(Aggregate, QueryStats)> {
        let target = self.target(source, index, part, window)?;
        self.aggregate_in(&target, values)
    }

    /// [`Snapshot::aggregate_part`] of the records whose own time (the
    /// producer's timestamp, else arrival) lies in `bucket`, of those that
    /// arrived in `own`'s window: one bucket of `pN(x) every T`, read by
    /// its own time as a scan groups it. Chunks whose summaries put all their
    /// records in the bucket answer from them; those with none there are
    /// skipped; the rest are read.
    pub fn aggregate_bucket(
        &self,
        pick: (IndexId, Option<u32>),
        own: &OwnTimes,
        bucket: RangeInclusive<u64>,
        values: RangeInclusive<i64>,
    ) -> Result<(Aggregate, QueryStats)> {
        let target = self.bucket_target(pick, own, bucket)?;
        self.aggregate_in(&target, values)
    }

    fn aggregate_in(
        &self,
        target: &Target,
        values: RangeInclusive<i64>,
    ) -> Result<(Aggregate, QueryStats)> {
        let mut total = Aggregate::default();
        let mut stats = QueryStats::default();
        let range = self.target_chunks(target)?;
        let inside = |s: &Summary| s.min >= *values.start() && s.max <= *values.end();
        let outside = |s: &Summary| s.max < *values.start() || s.min > *values.end();
        // Index 0's values are all 0; its summaries' min and max hold the
        // records' own times instead.
        let values_of = |s: &Summary| match target.index {
            Some(_) => *s,
            None => Summary {
                min: 0,
                max: 0,
                ..*s
            },
        };
        self.for_each_span(range, &target.keys(), |meta, run| {
            if self.outside_bucket(meta, target) {
                stats.chunks_skipped += run.as_ref().map_or(1, |r| r.end - r.start);
                return Ok(true);
            }
            let wanted = || {
                meta.summaries
                    .iter()
                    .filter(|s| target.wants(s))
                    .map(values_of)
            };
            if let Some(run) = run {
                let whole = self.summarizes_run(meta, &run, target)
                    && wanted().all(|s| inside(&s) || outside(&s));
                if whole {
                    stats.add_run(&run);
                    wanted().filter(inside).for_each(|s| total.merge(&s));
                }
                return Ok(whole);
            }
            if self.is_gone(meta.time.chunk) {
                stats.leave_out(self.is_damaged(meta.time.chunk));
            } else if self.summarizes(meta, target) && wanted().all(|s| inside(&s) || outside(&s)) {
                stats.chunks_summarized += 1;
                wanted().filter(inside).for_each(|s| total.merge(&s));
            } else if let Some(at) = ChunkRef::of(meta, target.source) {
                stats.chunks_scanned += 1;
                self.visit_values(&at, target, |v| {
                    if values.contains(&v) {
                        total.add(v);
                    }
                })?;
            }
            Ok(true)
        })?;
        self.add_rolled(target, &values, &mut total, &mut stats)?;
        Ok((total, stats))
    }

    /// How many records of `source` in `window` fall in each `step`-long
    /// bucket of their own time (the producer's timestamp, else arrival),
    /// buckets starting where `(time + offset) % step == 0`; keyed by the
    /// bucket's start. A chunk whose records' own times lie in one bucket
    /// counts from its summary (format 2 keeps their span there), so a
    /// timeline reads only the chunks that straddle a bucket's edge.
    pub fn count_every(
        &self,
        source: SourceId,
        window: RangeInclusive<u64>,
        step: u64,
        offset: u64,
    ) -> Result<(BTreeMap<u64, u64>, QueryStats)> {
        if step == 0 {
            return Err(Error::Invalid("buckets must be longer than 0 ns".into()));
        }
        let target = self.target(source, 0, None, window)?;
        // A bucket that starts before time 0 wraps, like the scan's key: the
        // query reads it back as a negative start.
        let bucket = |time: u64| time.wrapping_sub(time.wrapping_add(offset) % step);
        let own_times = self.meta().format != FormatVersion::V1;
        let mut counts = BTreeMap::new();
        let mut stats = QueryStats::default();
        self.for_each_span(
            self.chunks_in(&target.window)?,
            &target.keys(),
            |meta, run| {
                let all = meta.all(source);
                if let Some(run) = run {
                    let Some(all) = all else {
                        // No record of the source in the whole run.
                        return Ok(self.summarizes_run(meta, &run, &target));
                    };
                    let (first, last) = (all.min.cast_unsigned(), all.max.cast_unsigned());
                    let whole = own_times
                        && self.summarizes_run(meta, &run, &target)
                        && bucket(first) == bucket(last);
                    if whole {
                        stats.add_run(&run);
                        *counts.entry(bucket(first)).or_insert(0) += all.count;
                    }
                    return Ok(whole);
                }
                if self.is_damaged(meta.time.chunk) {
                    stats.leave_out(true);
                    return Ok(true);
                }
                let Some(at) = ChunkRef::of(meta, source) else {
                    return Ok(true);
                };
                let (first, last) = (at.all.min.cast_unsigned(), at.all.max.cast_unsigned());
                if self.is_gone(at.chunk) {
                    stats.leave_out(self.is_damaged(at.chunk));
                } else if own_times
                    && self.summarizes(meta, &target)
                    && bucket(first) == bucket(last)
                {
                    stats.chunks_summarized += 1;
                    *counts.entry(bucket(first)).or_insert(0) += at.all.count;
                } else {
                    stats.chunks_scanned += 1;
                    self.visit_chunk(&at, &target, |record| {
                        let time = record.producer_ts.unwrap_or(record.ts);
                        *counts.entry(bucket(time)).or_insert(0) += 1;
                    })?;
                }
                Ok(true)
            },
        )?;
        for meta in self.rolled(&target, &mut stats)? {
            if let Some(all) = meta.all(source) {
                let own = all.min.midpoint(all.max).cast_unsigned();
                *counts.entry(bucket(own)).or_insert(0) += all.count;
            }
        }
        Ok((counts, stats))
    }
}
