//! Answers over deleted chunks from the summaries kept of them
//! ([`crate::Config::retain_summaries`]). Counts, sums, minima and maxima
//! of whole summaries are what the records gave; what splits a summary is
//! estimated and its error bound kept in the stats: a summary across a
//! window's or bucket's edge counts where the middle of its time lies (the
//! answer's time resolution is the longest such summary), one across a
//! value bound where the middle of its values lies, and a quantile inside a
//! bin is interpolated between the bin's edges (its error bound the bin's
//! width). Where records remain, they answer as before, exactly.

use std::{collections::BTreeMap, ops::RangeInclusive};

use super::{Aggregate, QueryStats, Target};
use crate::{
    error::Result,
    format::{Summary, TimeEntry},
    schema::{Bins, SourceId},
    shared::{ChunkMeta, Snapshot},
};

/// Per part, the aggregate and the count per value bin, as
/// [`Snapshot::rolled_bins`] and the exact bin counts have them.
pub(super) type PartBins = BTreeMap<u32, (Aggregate, Vec<u64>)>;

impl Snapshot {
    /// The kept summaries that count for `target`, one [`ChunkMeta`] per
    /// rollup entry (its time entry the entry's span): those whose records
    /// arrived, by the middle of their span, in the target's window and,
    /// for a time bucket, whose own times' middle lies in the bucket.
    pub(super) fn rolled(&self, target: &Target, stats: &mut QueryStats) -> Result<Vec<ChunkMeta>> {
        let rollups = self.rollups();
        let window = &target.window;
        let from = (rollups.entries).partition_point(|(e, _)| e.last_ts < *window.start());
        let keys = target.keys();
        let mut metas = Vec::new();
        for (i, (entry, _)) in rollups.entries.iter().enumerate().skip(from) {
            if entry.first_ts > *window.end() {
                break;
            }
            if !window.contains(&middle(entry.first_ts, entry.last_ts)) {
                continue;
            }
            let summaries = match rollups.summaries(self.dir(), i, Some(&keys)) {
                // Skipping damage, a damaged entry is left out like the
                // records it stands for.
                Err(_) if self.skips_damage() => continue,
                summaries => summaries?,
            };
            let meta = ChunkMeta {
                time: TimeEntry {
                    chunk: entry.first_chunk,
                    first_ts: entry.first_ts,
                    last_ts: entry.last_ts,
                    ..TimeEntry::default()
                },
                summaries,
            };
            let Some(all) = meta.all(target.source) else {
                continue;
            };
            let own = middle(all.min.cast_unsigned(), all.max.cast_unsigned());
            if target
                .own
                .as_ref()
                .is_some_and(|bucket| !bucket.contains(&own))
            {
                continue;
            }
            stats.chunks_rolled_up += u64::from(entry.chunks);
            // A window places it by its records' arrival; a time bucket by
            // their own times (a call that began long before it ended
            // widens those).
            let span = match target.own {
                Some(_) => all.max.abs_diff(all.min),
                None => entry.last_ts.saturating_sub(entry.first_ts),
            };
            stats.rolled_up_span = stats.rolled_up_span.max(span);
            metas.push(meta);
        }
        Ok(metas)
    }

    /// How many of `source`'s deleted records the kept summaries count,
    /// and the arrival times they span (`weft info`).
    pub fn kept_summaries(&self, source: SourceId) -> Result<(u64, Option<(u64, u64)>)> {
        let target = self.target(source, 0, None, 0..=u64::MAX)?;
        let metas = self.rolled(&target, &mut QueryStats::default())?;
        let records = (metas.iter())
            .filter_map(|m| m.all(source))
            .map(|all| all.count)
            .sum();
        let span = (metas.first()).zip(metas.last());
        Ok((
            records,
            span.map(|(a, b)| (a.time.first_ts, b.time.last_ts)),
        ))
    }

    /// [`Snapshot::rolled`]'s summaries of the target's index, per part:
    /// the aggregate and the count per value bin.
    pub(super) fn rolled_bins(&self, target: &Target, stats: &mut QueryStats) -> Result<PartBins> {
        let per_part = target.value_bins();
        let mut by_part = PartBins::new();
        for meta in self.rolled(target, stats)? {
            for s in meta.summaries.iter().filter(|s| target.wants(s)) {
                let (aggregate, counts) = (by_part.entry(s.bin / per_part))
                    .or_insert_with(|| (Aggregate::default(), vec![0; per_part as usize]));
                aggregate.merge(s);
                let count = &mut counts[(s.bin % per_part) as usize];
                *count = count.saturating_add(s.count);
            }
        }
        Ok(by_part)
    }

    /// Adds the kept summaries' count, sum, min and max of the values in
    /// `values` to `total` (the target's index; index 0's values are 0).
    pub(super) fn add_rolled(
        &self,
        target: &Target,
        values: &RangeInclusive<i64>,
        total: &mut Aggregate,
        stats: &mut QueryStats,
    ) -> Result<()> {
        for meta in self.rolled(target, stats)? {
            for s in meta.summaries.iter().filter(|s| target.wants(s)) {
                let s = match target.index {
                    Some(_) => *s,
                    None => Summary {
                        min: 0,
                        max: 0,
                        ..*s
                    },
                };
                if s.max < *values.start() || s.min > *values.end() {
                    continue;
                }
                if s.min < *values.start() || s.max > *values.end() {
                    // Across a bound: all or nothing, by its middle.
                    stats.rolled_up_error = stats.rolled_up_error.max(width(s.min, s.max));
                    if !values.contains(&s.min.midpoint(s.max)) {
                        continue;
                    }
                }
                total.merge(&Summary {
                    min: s.min.max(*values.start()),
                    max: s.max.min(*values.end()),
                    ..s
                });
            }
        }
        Ok(())
    }
}

/// Adds `more` into `into`, part by part.
pub(super) fn add_parts(into: &mut PartBins, more: PartBins) {
    for (part, bins) in more {
        match into.get_mut(&part) {
            Some(into) => merge_part(into, bins),
            None => {
                into.insert(part, bins);
            }
        }
    }
}

/// Adds one part's aggregate and counts per bin into another's.
pub(super) fn merge_part(
    (into_aggregate, into_counts): &mut (Aggregate, Vec<u64>),
    (aggregate, counts): (Aggregate, Vec<u64>),
) {
    if let (Some(min), Some(max)) = (aggregate.min, aggregate.max) {
        into_aggregate.merge(&Summary {
            count: aggregate.count,
            sum: aggregate.sum,
            min,
            max,
            ..Summary::default()
        });
    }
    for (into, n) in into_counts.iter_mut().zip(counts) {
        *into = into.saturating_add(n);
    }
}

/// The `rank`-th smallest (1-based, at most the total) of values counted
/// per bin of `bins` (`counts`), all within `[min, max]`: estimated inside
/// its bin by linear interpolation between the bin's edges narrowed to
/// `[min, max]`; and that narrowed bin's width, the estimate's error bound.
pub(super) fn estimate(
    bins: &Bins,
    counts: &[u64],
    (min, max): (i64, i64),
    rank: u64,
) -> (i64, u64) {
    let (mut before, mut bin) = (0u64, 0usize);
    while bin + 1 < counts.len() && before.saturating_add(counts[bin]) < rank {
        before += counts[bin];
        bin += 1;
    }
    let (lo, hi) = narrowed(bins, bin as u32, (Some(min), Some(max)));
    let within = rank.saturating_sub(before).max(1) as f64 / counts[bin].max(1) as f64;
    let value = lo as f64 + (hi as f64 - lo as f64) * within;
    (value.round() as i64, width(lo, hi))
}

/// The values bin `bin` of `bins` can hold, narrowed to the smallest and
/// largest value where known: inclusive.
pub(super) fn narrowed(
    bins: &Bins,
    bin: u32,
    (min, max): (Option<i64>, Option<i64>),
) -> (i64, i64) {
    let (lo, hi) = bins.range(bin);
    let lo = min.map_or(lo, |min| lo.max(min));
    let hi = hi.map_or(i64::MAX, |h| h.saturating_sub(1));
    (lo, max.map_or(hi, |max| hi.min(max)).max(lo))
}

/// `hi - lo` for `lo <= hi`.
fn width(lo: i64, hi: i64) -> u64 {
    hi.abs_diff(lo)
}

/// The middle of a span of times.
fn middle(first: u64, last: u64) -> u64 {
    first.midpoint(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_interpolate_inside_the_bin() {
        let bins = Bins::new(vec![100, 200, 300]).unwrap();
        // 10 values below 100, 10 in [100, 200), none above.
        let counts = [10, 10, 0, 0];
        assert_eq!(estimate(&bins, &counts, (5, 190), 20), (190, 90));
        assert_eq!(estimate(&bins, &counts, (5, 190), 15), (145, 90));
        assert_eq!(estimate(&bins, &counts, (5, 190), 1), (14, 94));
    }
}
