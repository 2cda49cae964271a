//! Time buckets of `pN(x) every T`: where a source's records' own times
//! lie, span by span of chunks, read once for the whole series, so that
//! each bucket's operators ([`Snapshot::aggregate_bucket`],
//! [`Snapshot::percentile_bucket`]) visit only the chunks that may hold
//! its records rather than every chunk of the window.

use std::ops::{Range, RangeInclusive};

use super::Target;
use crate::{
    error::Result,
    format::FormatVersion,
    schema::{IndexId, SourceId},
    shared::Snapshot,
};

/// A source's records' own times (the producer's timestamp, else
/// arrival) over a window, per span of chunks: a chunk, or a run of them
/// its group's summaries merge.
pub struct OwnTimes {
    source: SourceId,
    window: RangeInclusive<u64>,
    /// In chunk order: each span, and the first and last own time of the
    /// source's records there (`None`: none; all times where the
    /// summaries do not say).
    spans: Vec<Span>,
    /// The source's records there, as the summaries count them.
    records: u64,
}

/// A span of chunks, and the first and last own time of its records.
type Span = (Range<u64>, Option<(u64, u64)>);

impl OwnTimes {
    /// How many chunks the spans cover.
    pub fn chunks(&self) -> u64 {
        self.spans
            .iter()
            .map(|(span, _)| span.end - span.start)
            .sum()
    }

    /// How many of the source's records the spans hold.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The starts of the `step`-long buckets (starting where `(time +
    /// offset) % step == 0`) that may hold records: those the spans' own
    /// times reach, at most `max` of them. `None` where the summaries do
    /// not say (a format-1 capture, a chunk gone) or past `max`: the
    /// caller counts records per bucket instead.
    pub fn bucket_starts(&self, step: u64, offset: u64, max: usize) -> Option<Vec<u64>> {
        if step == 0 {
            return None;
        }
        let bucket = |time: u64| time.wrapping_sub(time.wrapping_add(offset) % step);
        let mut starts = std::collections::BTreeSet::new();
        for (_, own) in &self.spans {
            let Some((first, last)) = *own else {
                continue;
            };
            if (first, last) == (0, u64::MAX) {
                return None;
            }
            let (mut at, end) = (bucket(first), bucket(last));
            while at <= end {
                starts.insert(at);
                if starts.len() > max {
                    return None;
                }
                at = at.checked_add(step)?;
            }
        }
        Some(starts.into_iter().collect())
    }

    /// The chunks that may hold records whose own time lies in `bucket`:
    /// from the first span that does to the last (those between that hold
    /// none are skipped by their summaries).
    pub(super) fn chunks_for(&self, bucket: &RangeInclusive<u64>) -> Range<u64> {
        let mut holding = (self.spans.iter())
            .filter(|(_, own)| {
                own.is_some_and(|(first, last)| last >= *bucket.start() && first <= *bucket.end())
            })
            .map(|(span, _)| span);
        let Some(first) = holding.next() else {
            return 0..0;
        };
        let end = holding.next_back().map_or(first.end, |last| last.end);
        first.start..end
    }
}

impl Snapshot {
    /// The target of `index` (and `part`) in a bucket: the records of
    /// `own`'s window whose own time lies in `bucket`, in the chunks that
    /// may hold them.
    pub(super) fn bucket_target(
        &self,
        (index, part): (IndexId, Option<u32>),
        own: &OwnTimes,
        bucket: RangeInclusive<u64>,
    ) -> Result<Target> {
        let mut target = self.target(own.source, index, part, own.window.clone())?;
        target.chunks = Some(own.chunks_for(&bucket));
        target.own = Some(bucket);
        Ok(target)
    }

    /// Where `source`'s records that arrived in `window` lie by their own
    /// time, from the chunk summaries (one pass, for the buckets of a
    /// series).
    pub fn own_times(&self, source: SourceId, window: RangeInclusive<u64>) -> Result<OwnTimes> {
        let target = self.target(source, 0, None, window.clone())?;
        // Index 0's summaries hold the records' own times from format 2.
        let said = self.meta().format != FormatVersion::V1;
        let mut spans = Vec::new();
        let mut records = 0;
        self.for_each_span(self.chunks_in(&window)?, &target.keys(), |meta, run| {
            records += meta.all(source).map_or(0, |all| all.count);
            let span = run.unwrap_or(meta.time.chunk..meta.time.chunk + 1);
            // A damaged chunk stays in every bucket's range, to be counted
            // as left out; a deleted one holds no record (its summaries,
            // where kept, are spans of their own below).
            let own = if !said || span.clone().any(|c| self.is_damaged(c)) {
                Some((0, u64::MAX))
            } else if span.clone().any(|c| self.is_deleted(c)) {
                None
            } else {
                (meta.all(source)).map(|all| (all.min.cast_unsigned(), all.max.cast_unsigned()))
            };
            spans.push((span, own));
            Ok(true)
        })?;
        for meta in self.rolled(&target, &mut super::QueryStats::default())? {
            let chunks = meta.time.chunk..meta.time.chunk + 1;
            // Counted wholly in the bucket of its middle (see `rolled`).
            let own = (meta.all(source)).map(|a| a.min.midpoint(a.max).cast_unsigned());
            records += meta.all(source).map_or(0, |all| all.count);
            spans.push((chunks, own.map(|t| (t, t))));
        }
        spans.sort_by_key(|(span, _)| span.start);
        Ok(OwnTimes {
            source,
            window,
            spans,
            records,
        })
    }
}
