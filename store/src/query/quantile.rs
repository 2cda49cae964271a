//! Exact quantiles and value bins: counted from the summaries, then the
//! values of only the chunks that hold the bin a quantile falls in.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    ops::{Range, RangeInclusive},
};

use super::{
    Aggregate, ChunkRef, OwnTimes, QueryStats, Target, parallel,
    rolled::{PartBins, add_parts, estimate, merge_part, narrowed},
};

use crate::{
    cache::{Runs, runs},
    error::{Error, Result},
    schema::{Bins, Index, IndexId, SourceId},
    shared::{ChunkMeta, Snapshot},
    values,
};

/// What [`Snapshot::bin_counts`] finds: per part, the aggregate and the
/// count per value bin; which chunks hold which bins; and how the chunks
/// were answered.
type BinCounts = (BTreeMap<u32, (Aggregate, Vec<u64>)>, Held, QueryStats);

/// Values of a rank at most this far from either end of its bin are
/// gathered from the holders whose summaries reach that end alone.
const NEAR_END: u64 = 4096;

/// What [`Snapshot::near_end`] leaves to gather: how many values at most,
/// and the rank sought from the top of those gathered, if from the top.
struct NearEnd {
    count: u64,
    from_top: Option<u64>,
}

/// A run of chunks or a chunk holding a bin, by its first chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Holder {
    Run(u64),
    Chunk(u64),
}

/// Which global bins the chunks of a window hold, after their summaries
/// were counted: per chunk (`None`: its records were read, any bin), and
/// per run of chunks answered by a group's summaries, which
/// [`Snapshot::expand`] turns into chunks when a wanted bin is there.
#[derive(Default)]
pub(super) struct Held {
    pub(super) chunks: Vec<(ChunkRef, Option<Vec<u32>>)>,
    pub(super) runs: Vec<(Range<u64>, Vec<u32>)>,
}

/// Each part of a partitioned index with values in a range, and how many
/// ([`Snapshot::count_parts_in`]).
pub type PartCounts = Vec<(u32, u64)>;

/// Each distinct value and how many times it occurs, ascending
/// ([`Snapshot::value_counts`]).
pub type ValueCounts = Vec<(i64, u64)>;

/// One part of a partitioned index, from [`Snapshot::aggregate_parts`].
#[derive(Clone, Debug, PartialEq)]
pub struct PartAnswer {
    /// The part: the partition field's value (or the count of parts, for
    /// every other value).
    pub part: u32,
    /// Count, sum, min and max of the part's values.
    pub aggregate: Aggregate,
    /// The asked quantiles of the part's values, in the order asked.
    pub quantiles: Vec<Option<i64>>,
}

impl Snapshot {
    /// The exact `q`-quantile (nearest rank: the smallest value with at least
    /// `ceil(q * n)` values at or below it) of `index`'s values for `source`
    /// in `window`; `None` when there are no values.
    ///
    /// Cumulative bin counts from the summaries pick the bin holding that
    /// rank; then only chunks holding that bin (and the window's edges) are
    /// read, narrowing the value range until the candidates fit in memory.
    pub fn percentile(
        &self,
        source: SourceId,
        index: IndexId,
        window: RangeInclusive<u64>,
        q: f64,
    ) -> Result<(Option<i64>, QueryStats)> {
        self.percentile_part(source, index, None, window, q)
    }

    /// [`Snapshot::percentile`] within one part of a partitioned index:
    /// the p99 latency of one syscall from summaries, like that of all.
    pub fn percentile_part(
        &self,
        source: SourceId,
        index: IndexId,
        part: Option<u32>,
        window: RangeInclusive<u64>,
        q: f64,
    ) -> Result<(Option<i64>, QueryStats)> {
        let target = self.target(source, index, part, window)?;
        self.percentile_of(&target, q)
    }

    /// [`Snapshot::percentile_part`] of the records whose own time (the
    /// producer's timestamp, else arrival) lies in `bucket`, of those that
    /// arrived in `own`'s window (see [`Snapshot::aggregate_bucket`]).
    pub fn percentile_bucket(
        &self,
        pick: (IndexId, Option<u32>),
        own: &OwnTimes,
        bucket: RangeInclusive<u64>,
        q: f64,
    ) -> Result<(Option<i64>, QueryStats)> {
        let target = self.bucket_target(pick, own, bucket)?;
        self.percentile_of(&target, q)
    }

    /// [`Snapshot::percentile_part`] of `target`.
    fn percentile_of(&self, target: &Target, q: f64) -> Result<(Option<i64>, QueryStats)> {
        let index = target.index_id();
        if !(0.0..=1.0).contains(&q) {
            return Err(Error::Invalid(format!(
                "quantile {q} is not between 0 and 1"
            )));
        }
        if index == 0 {
            return Err(Error::Invalid(
                "percentiles need a value index, not index 0".into(),
            ));
        }
        let rank = |n: u64| (n > 0).then(|| ((q * n as f64).ceil() as u64).clamp(1, n));
        self.settled(|snapshot| snapshot.nth_in(target, rank, true))
    }

    /// The `rank`-th smallest (1-based) of the target's values, `rank`
    /// given the count of values (`None`: there is no such value), for a
    /// value index; with the summaries kept of deleted chunks if `rolled`
    /// (then estimated, when there are any).
    fn nth_in(
        &self,
        target: &Target,
        rank: impl Fn(u64) -> Option<u64>,
        rolled: bool,
    ) -> Result<(Option<i64>, QueryStats)> {
        let bins = self.meta().index(target.index_id())?.bins.clone();
        let (mut by_part, held, mut stats) = self.bin_counts(target)?;
        let kept = if rolled {
            self.rolled_bins(target, &mut stats)?
        } else {
            PartBins::new()
        };
        if !kept.is_empty() {
            add_parts(&mut by_part, kept);
            let counts = across_parts(&by_part, bins.len());
            let n = counts.iter().fold(0u64, |n, c| n.saturating_add(*c));
            let Some(rank) = rank(n).filter(|r| (1..=n).contains(r)) else {
                return Ok((None, stats));
            };
            let (value, error) = estimate(&bins, &counts, span_of(&by_part), rank);
            stats.rolled_up_error = stats.rolled_up_error.max(error);
            return Ok((Some(value), stats));
        }
        let per_part = target.value_bins();
        let counts = across_parts(&by_part, bins.len());
        let n = counts.iter().fold(0u64, |n, c| n.saturating_add(*c));
        let Some(rank) = rank(n).filter(|r| (1..=n).contains(r)) else {
            return Ok((None, stats));
        };
        let (mut before, mut bin) = (0u64, 0usize);
        while before.saturating_add(counts[bin]) < rank {
            before += counts[bin];
            bin += 1;
        }
        // One part (or an index without parts): its bin is one global bin,
        // gathered in a single pass (counted per value when a flood
        // fills it). Across parts, or when it is wide and huge, narrow.
        let part = target
            .part
            .or((target.index.as_ref().map_or(1, Index::parts) == 1).then_some(0));
        if let Some(part) = part {
            let global = part * per_part + bin as u32;
            let (near, end) = self.near_end(&held, target, global, (counts[bin], rank - before))?;
            let held_here = near.as_ref().unwrap_or(&held);
            let wanted = [vec![(global, end.count, rank - before)]];
            let mut values = self.bin_values((held_here, &by_part), target, &wanted, &mut stats)?;
            if let Some(gathered) = values.get_mut(&global) {
                let k = match end.from_top {
                    Some(m) => (gathered.total() + 1).checked_sub(m).ok_or_else(|| {
                        Error::Invalid(
                            "summaries and records disagree; the capture is corrupt".into(),
                        )
                    })?,
                    None => rank - before,
                };
                return Ok((Some(gathered.nth(k)?), stats));
            }
        }
        let in_parts = by_part.keys().map(|part| part * per_part + bin as u32);
        let held = self.expand(held, target, &in_parts.collect())?;
        // Only chunks that hold the bin (in any part, by summary) or were
        // scanned matter now.
        let relevant: Vec<ChunkRef> = held
            .into_iter()
            .filter(|(_, here)| {
                here.as_ref()
                    .is_none_or(|b| b.iter().any(|g| g % per_part == bin as u32))
            })
            .map(|(at, _)| at)
            .collect();
        let (lo, hi) = bins.range(bin as u32);
        stats.chunks_read_for_bins += relevant.len() as u64;
        let value = self.select(&relevant, target, (lo, hi, counts[bin]), rank - before)?;
        Ok((Some(value), stats))
    }

    /// When the `k`-th smallest of the `count` values of global bin `bin`
    /// lies within [`NEAR_END`] of either end of the bin (the 10 slowest
    /// calls, a p99.99), the holders of `held` that can hold it: each
    /// holder's summary of the bin names its largest (smallest) value
    /// there, and the `m`-th largest value of the bin is at least the
    /// `m`-th largest of those, so a holder whose largest is below that
    /// holds none of the `m` largest. A busy server's 50 ms waits fill the
    /// top bin of every chunk; the 10 largest lie in about 10 of them.
    /// `None` (every holder) when the rank lies deep inside the bin.
    fn near_end(
        &self,
        held: &Held,
        target: &Target,
        bin: u32,
        (count, k): (u64, u64),
    ) -> Result<(Option<Held>, NearEnd)> {
        let all = NearEnd {
            count,
            from_top: None,
        };
        let from_top = count.saturating_sub(k) + 1;
        if k.min(from_top) > NEAR_END {
            return Ok((None, all));
        }
        let top = from_top < k;
        let m = if top { from_top } else { k };
        // Each holder names one end: with fewer holders than the rank,
        // none can be left out (a p99 per second over a few hundred chunks).
        if m > (held.runs.len() + held.chunks.len()) as u64 {
            return Ok((None, all));
        }
        let runs: BTreeSet<u64> = held.runs.iter().map(|(run, _)| run.start).collect();
        let chunks: BTreeSet<u64> = (held.chunks.iter())
            .filter(|(_, here)| here.is_some())
            .map(|(at, _)| at.chunk)
            .collect();
        // Each summarized holder's end of the bin, and its count there.
        let mut ends: Vec<(i64, u64, Holder)> = Vec::new();
        self.for_each_span(self.target_chunks(target)?, &target.keys(), |meta, run| {
            let holder = match run {
                Some(run) if runs.contains(&run.start) => Holder::Run(run.start),
                Some(_) => return Ok(false),
                None if chunks.contains(&meta.time.chunk) => Holder::Chunk(meta.time.chunk),
                None => return Ok(true),
            };
            let here = meta
                .summaries
                .iter()
                .find(|s| target.wants(s) && s.bin == bin);
            if let Some(s) = here {
                // Largest first from the top, smallest first from the bottom.
                ends.push((
                    if top { s.max } else { s.min.saturating_neg() },
                    s.count,
                    holder,
                ));
            }
            Ok(true)
        })?;
        let Some(at) = usize::try_from(m - 1).ok().filter(|at| *at < ends.len()) else {
            return Ok((None, all));
        };
        let bound = ends.select_nth_unstable_by(at, |a, b| b.0.cmp(&a.0)).1.0;
        ends.retain(|(end, ..)| *end >= bound);
        let kept: BTreeSet<Holder> = ends.iter().map(|(_, _, h)| *h).collect();
        let near = Held {
            chunks: (held.chunks.iter())
                .filter(|(at, here)| here.is_none() || kept.contains(&Holder::Chunk(at.chunk)))
                .cloned()
                .collect(),
            runs: (held.runs.iter())
                .filter(|(run, _)| kept.contains(&Holder::Run(run.start)))
                .cloned()
                .collect(),
        };
        // What the kept holders count in the bin, and the records of those
        // read whole, at most: the room gathering them takes.
        let summarized = ends.iter().fold(0u64, |n, (_, c, _)| n.saturating_add(*c));
        let read = (near.chunks.iter())
            .filter(|(_, here)| here.is_none())
            .fold(0u64, |n, (at, _)| n.saturating_add(u64::from(at.records)));
        let end = NearEnd {
            count: summarized.saturating_add(read).min(count),
            from_top: top.then_some(from_top),
        };
        Ok((Some(near), end))
    }

    /// How many values of `index` (in one part, or all) in `window` fall
    /// in each bucket that `edges` (ascending) bound: bucket `j` holds
    /// `[edges[j-1], edges[j])`, the first everything below `edges[0]`,
    /// the last everything from the last edge. Value bins that lie in one
    /// bucket are counted from the summaries; only the values of bins
    /// that straddle an edge are read. `None` when a straddling bin holds
    /// too many distinct values to gather in one pass.
    pub fn bucket_counts(
        &self,
        source: SourceId,
        index: IndexId,
        part: Option<u32>,
        window: RangeInclusive<u64>,
        edges: &[i64],
    ) -> Result<(Option<Vec<u64>>, QueryStats)> {
        if index == 0 {
            return Err(Error::Invalid(
                "bucket counts need a value index, not index 0".into(),
            ));
        }
        let target = self.target(source, index, part, window)?;
        self.bucket_counts_of(&target, edges)
    }

    /// [`Snapshot::bucket_counts`] of the records whose own time lies in
    /// `bucket`, of those that arrived in `own`'s window (see
    /// [`Snapshot::aggregate_bucket`]): one time bucket of `hist(x) every T`.
    pub fn bucket_counts_in_bucket(
        &self,
        pick: (IndexId, Option<u32>),
        own: &OwnTimes,
        bucket: RangeInclusive<u64>,
        edges: &[i64],
    ) -> Result<(Option<Vec<u64>>, QueryStats)> {
        let target = self.bucket_target(pick, own, bucket)?;
        self.bucket_counts_of(&target, edges)
    }

    fn bucket_counts_of(
        &self,
        target: &Target,
        edges: &[i64],
    ) -> Result<(Option<Vec<u64>>, QueryStats)> {
        let bins = &self.meta().index(target.index_id())?.bins;
        let per_part = target.value_bins();
        let bucket = |v: i64| edges.partition_point(|e| *e <= v);
        let (by_part, held, mut stats) = self.bin_counts(target)?;
        let mut buckets = vec![0u64; edges.len() + 1];
        let mut straddling = Vec::new();
        for (part, (_, counts)) in &by_part {
            for (bin, count) in (0u32..).zip(counts).filter(|(_, n)| **n > 0) {
                let (lo, hi) = bins.range(bin);
                let last = hi.map_or(i64::MAX, |h| h - 1);
                if bucket(lo) == bucket(last) {
                    buckets[bucket(lo)] += count;
                } else {
                    straddling.push((part * per_part + bin, *count, 0));
                }
            }
        }
        let wanted = [straddling];
        let values = self.bin_values((&held, &by_part), target, &wanted, &mut stats)?;
        for (bin, _, _) in &wanted[0] {
            let Some(gathered) = values.get(bin) else {
                return Ok((None, stats));
            };
            gathered.for_each(|value, n| buckets[bucket(value)] += n);
        }
        for (aggregate, counts) in self.rolled_bins(target, &mut stats)?.values() {
            for (bin, count) in (0u32..).zip(counts).filter(|(_, n)| **n > 0) {
                let (lo, hi) = narrowed(bins, bin, (aggregate.min, aggregate.max));
                if bucket(lo) != bucket(hi) {
                    // Its values are gone: counted where its middle lies.
                    stats.rolled_up_error = stats.rolled_up_error.max(hi.abs_diff(lo));
                }
                buckets[bucket(lo.midpoint(hi))] += count;
            }
        }
        Ok((Some(buckets), stats))
    }

    /// The `k`-th largest value of `index` in `window`: the `k` largest
    /// values are at least this (more, when it repeats). `None` when the
    /// window holds fewer than `k` values. `sort x desc | limit k` then
    /// reads only the chunks whose summaries reach that far. Exact, from
    /// the values of the one bin it lies in: the bin's lower edge let a
    /// flood of 50 ms timeouts send a top-10 to 1,204 chunks.
    pub fn top_bound(
        &self,
        source: SourceId,
        index: IndexId,
        window: RangeInclusive<u64>,
        k: u64,
    ) -> Result<(Option<i64>, QueryStats)> {
        let target = self.target(source, index, None, window)?;
        if index == 0 {
            return Err(Error::Invalid(
                "the largest values need a value index, not index 0".into(),
            ));
        }
        let rank = |n: u64| n.checked_sub(k).map(|below| below + 1);
        // The records of the bound's chunks are read next: the summaries of
        // deleted ones must not move it.
        self.settled(|snapshot| snapshot.nth_in(&target, rank, false))
    }

    /// One pass over the summaries of `target` (an index with value bins)
    /// in its window: per part, the values' aggregate and count per bin;
    /// per chunk, the global bins its summaries hold (`None`: no summary
    /// answers for it, and its records were counted instead).
    fn bin_counts(&self, target: &Target) -> Result<BinCounts> {
        let Some(spec) = &target.index else {
            return Err(Error::Invalid(
                "percentiles need a value index, not index 0".into(),
            ));
        };
        let (per_part, parts) = (target.value_bins(), spec.parts());
        let mut by_part: BTreeMap<u32, (Aggregate, Vec<u64>)> = BTreeMap::new();
        let mut stats = QueryStats::default();
        let mut held = Held::default();
        let fresh = || (Aggregate::default(), vec![0; per_part as usize]);
        let count_bins = |by_part: &mut BTreeMap<u32, (Aggregate, Vec<u64>)>,
                          meta: &ChunkMeta|
         -> Result<Vec<u32>> {
            let mut here = Vec::new();
            for s in meta.summaries.iter().filter(|s| target.wants(s)) {
                if s.bin / per_part >= parts {
                    return Err(Error::Invalid(format!(
                        "chunk {}: summary names bin {} of an index with {} bins",
                        s.chunk,
                        s.bin,
                        u64::from(per_part) * u64::from(parts)
                    )));
                }
                let (total, counts) = by_part.entry(s.bin / per_part).or_insert_with(fresh);
                total.merge(s);
                // Saturating: a forged summary must not overflow the count.
                let count = &mut counts[(s.bin % per_part) as usize];
                *count = count.saturating_add(s.count);
                here.push(s.bin);
            }
            Ok(here)
        };
        self.for_each_span(self.target_chunks(target)?, &target.keys(), |meta, run| {
            if self.outside_bucket(meta, target) {
                stats.chunks_skipped += run.as_ref().map_or(1, |r| r.end - r.start);
                return Ok(true);
            }
            if let Some(run) = run {
                if !self.summarizes_run(meta, &run, target) {
                    return Ok(false);
                }
                stats.add_run(&run);
                held.runs.push((run, count_bins(&mut by_part, meta)?));
                return Ok(true);
            }
            if self.is_damaged(meta.time.chunk) {
                stats.leave_out(true);
                return Ok(true);
            }
            let Some(at) = ChunkRef::of(meta, target.source) else {
                return Ok(true);
            };
            if self.is_gone(at.chunk) {
                stats.leave_out(self.is_damaged(at.chunk));
            } else if self.summarizes(meta, target) {
                stats.chunks_summarized += 1;
                held.chunks
                    .push((at, Some(count_bins(&mut by_part, meta)?)));
            } else {
                stats.chunks_scanned += 1;
                self.visit_chunk(&at, target, |record| {
                    let Some(value) = spec.field.read(record.payload) else {
                        return;
                    };
                    let (total, counts) = by_part
                        .entry(spec.part_of(record.payload))
                        .or_insert_with(fresh);
                    total.add(value);
                    counts[spec.bins.bin_of(value) as usize] += 1;
                })?;
                held.chunks.push((at, None));
            }
            Ok(true)
        })?;
        Ok((by_part, held, stats))
    }

    /// The chunks of `held`, with those of each run whose group holds one
    /// of the global bins `wanted` read out of the chunk log: the values of
    /// those bins are in them. Only the summaries of those bins are read
    /// (a chunk holds a hundred latency bins, each checksummed when read).
    fn expand(
        &self,
        held: Held,
        target: &Target,
        wanted: &BTreeSet<u32>,
    ) -> Result<Vec<(ChunkRef, Option<Vec<u32>>)>> {
        let mut keys = vec![(target.source, 0, 0..=u32::MAX)];
        for bin in wanted {
            match keys.last_mut() {
                Some((_, index, bins)) if *index != 0 && *bins.end() + 1 == *bin => {
                    *bins = *bins.start()..=*bin;
                }
                _ => keys.push((target.source, target.index_id(), *bin..=*bin)),
            }
        }
        let mut chunks = held.chunks;
        for (run, bins) in held.runs {
            if !bins.iter().any(|b| wanted.contains(b)) {
                continue;
            }
            self.for_each_meta(run, &keys, |meta| {
                if let Some(at) = ChunkRef::of(meta, target.source) {
                    let here = (meta.summaries.iter())
                        .filter(|s| target.wants(s))
                        .map(|s| s.bin)
                        .collect();
                    chunks.push((at, Some(here)));
                }
                Ok(())
            })?;
        }
        chunks.sort_by_key(|(at, _)| at.chunk);
        Ok(chunks)
    }

    /// How many values of each part of a partitioned index lie in
    /// `values`, in `window`: "how many calls of each syscall took over
    /// 80 us". Bins wholly inside `values` count from the summaries; only
    /// the values of the bins across its bounds are read (from the values
    /// log where a chunk has one). Parts with none are left out; `None`
    /// when a bin across a bound holds too many distinct values to gather
    /// in one pass.
    pub fn count_parts_in(
        &self,
        source: SourceId,
        index: IndexId,
        window: RangeInclusive<u64>,
        values: &RangeInclusive<i64>,
    ) -> Result<(Option<PartCounts>, QueryStats)> {
        let target = self.target(source, index, None, window)?;
        let Some(spec) = target.index.clone() else {
            return Err(Error::Invalid(
                "counts by part need a value index, not index 0".into(),
            ));
        };
        let per_part = target.value_bins();
        let (by_part, held, mut stats) = self.bin_counts(&target)?;
        let mut counts = Vec::with_capacity(by_part.len());
        let mut across = Vec::with_capacity(by_part.len());
        for (part, (_, bins)) in &by_part {
            let (mut inside, mut straddling) = (0u64, Vec::new());
            for (bin, count) in (0u32..).zip(bins).filter(|(_, n)| **n > 0) {
                let (lo, hi) = spec.bins.range(bin);
                let last = hi.map_or(i64::MAX, |h| h - 1);
                if lo >= *values.start() && last <= *values.end() {
                    inside = inside.saturating_add(*count);
                } else if last >= *values.start() && lo <= *values.end() {
                    straddling.push((part * per_part + bin, *count, 0));
                }
            }
            counts.push((*part, inside));
            across.push(straddling);
        }
        let gathered = self.bin_values((&held, &by_part), &target, &across, &mut stats)?;
        for ((_, count), straddling) in counts.iter_mut().zip(&across) {
            for (bin, _, _) in straddling {
                let Some(bin_values) = gathered.get(bin) else {
                    return Ok((None, stats));
                };
                bin_values.for_each(|value, n| {
                    if values.contains(&value) {
                        *count += n;
                    }
                });
            }
        }
        for (part, (aggregate, bins)) in self.rolled_bins(&target, &mut stats)? {
            let mut inside = 0u64;
            for (bin, count) in (0u32..).zip(bins).filter(|(_, n)| *n > 0) {
                let (lo, hi) = narrowed(&spec.bins, bin, (aggregate.min, aggregate.max));
                if !(values.contains(&lo) && values.contains(&hi)) {
                    stats.rolled_up_error = stats.rolled_up_error.max(hi.abs_diff(lo));
                }
                if values.contains(&lo.midpoint(hi)) {
                    inside = inside.saturating_add(count);
                }
            }
            match counts.iter_mut().find(|(p, _)| *p == part) {
                Some((_, count)) => *count = count.saturating_add(inside),
                None => counts.push((part, inside)),
            }
        }
        counts.retain(|(_, count)| *count > 0);
        counts.sort_unstable_by_key(|(part, _)| *part);
        Ok((Some(counts), stats))
    }

    /// How many of `index`'s values in `window` are each value, ascending:
    /// `count by tid` from the values log, reading the records only of the
    /// window's edges and of chunks without a values entry. `None` when
    /// they hold more than 4 M distinct values.
    ///
    pub fn value_counts(
        &self,
        source: SourceId,
        index: IndexId,
        window: RangeInclusive<u64>,
    ) -> Result<(Option<ValueCounts>, QueryStats)> {
        let target = self.target(source, index, None, window)?;
        let (by_part, held, mut stats) = self.bin_counts(&target)?;
        let per_part = target.value_bins();
        let held_bins: BTreeSet<u32> = by_part
            .iter()
            .flat_map(|(part, (_, counts))| {
                (0u32..)
                    .zip(counts)
                    .filter(|(_, n)| **n > 0)
                    .map(move |(bin, _)| part * per_part + bin)
            })
            .collect();
        let plan = (held_bins.iter())
            .map(|bin| (*bin, Gathered::tally()))
            .collect();
        let gathered = self.gather_held(&held, &target, plan, &mut stats)?;
        let mut tally = Gathered::tally();
        for (_, bin) in gathered {
            tally.merge(bin);
        }
        let Gathered::Tally(counts, false) = tally else {
            return Ok((None, stats));
        };
        let mut counts: Vec<(i64, u64)> = counts.into_iter().collect();
        counts.sort_unstable();
        Ok((Some(counts), stats))
    }

    /// [`Snapshot::aggregate_part`] and the exact `qs` quantiles
    /// ([`Snapshot::percentile_part`]) of every part of a partitioned index
    /// at once, in one pass over the summaries and one over the chunks that
    /// hold the bins the quantiles fall in: "count, p50 and p99 of latency
    /// by syscall" without reading the rest. Parts without values are left
    /// out; the answer is in part order.
    pub fn aggregate_parts(
        &self,
        source: SourceId,
        index: IndexId,
        window: RangeInclusive<u64>,
        qs: &[f64],
    ) -> Result<(Vec<PartAnswer>, QueryStats)> {
        if let Some(q) = qs.iter().find(|q| !(0.0..=1.0).contains(*q)) {
            return Err(Error::Invalid(format!(
                "quantile {q} is not between 0 and 1"
            )));
        }
        self.settled(|snapshot| snapshot.aggregate_parts_in(source, index, window.clone(), qs))
    }

    /// [`Snapshot::aggregate_parts`] of valid quantiles.
    fn aggregate_parts_in(
        &self,
        source: SourceId,
        index: IndexId,
        window: RangeInclusive<u64>,
        qs: &[f64],
    ) -> Result<(Vec<PartAnswer>, QueryStats)> {
        let target = self.target(source, index, None, window)?;
        let Some(spec) = target.index.clone() else {
            return Err(Error::Invalid(
                "aggregates by part need a value index, not index 0".into(),
            ));
        };
        let per_part = target.value_bins();
        let (mut by_part, held, mut stats) = self.bin_counts(&target)?;
        // Parts with deleted records' summaries are estimated; the others
        // stay exact.
        let mut kept = self.rolled_bins(&target, &mut stats)?;
        for (part, bins) in &mut kept {
            if let Some(exact) = by_part.remove(part) {
                merge_part(bins, exact);
            }
        }
        let estimated = estimate_parts(&spec.bins, kept, qs, &mut stats);
        let wanted = quantile_bins(&by_part, qs, per_part);
        let mut values = self.bin_values((&held, &by_part), &target, &wanted, &mut stats)?;
        // Bins too large to gather are narrowed in passes over the chunks
        // that hold them.
        let narrowed = wanted
            .iter()
            .flatten()
            .filter(|(b, _, _)| !values.contains_key(b));
        let narrowed: BTreeSet<u32> = narrowed.map(|(b, _, _)| *b).collect();
        let held = if narrowed.is_empty() {
            Vec::new()
        } else {
            self.expand(held, &target, &narrowed)?
        };
        let mut answers = Vec::with_capacity(by_part.len());
        for ((part, (aggregate, _)), picks) in by_part.into_iter().zip(wanted) {
            let mut quantiles = Vec::with_capacity(picks.len());
            for (bin, count, k) in picks {
                let value = match values.get_mut(&bin) {
                    Some(gathered) if aggregate.count > 0 => Some(gathered.nth(k)?),
                    _ if aggregate.count == 0 => None,
                    _ => {
                        // Too many values to hold at once: narrow in passes.
                        let relevant = relevant_chunks(&held, bin);
                        let one = Target {
                            part: Some(part),
                            ..target.clone()
                        };
                        let (lo, hi) = spec.bins.range(bin % per_part);
                        stats.chunks_read_for_bins += relevant.len() as u64;
                        Some(self.select(&relevant, &one, (lo, hi, count), k)?)
                    }
                };
                quantiles.push(value);
            }
            answers.push(PartAnswer {
                part,
                aggregate,
                quantiles,
            });
        }
        answers.extend(estimated);
        answers.sort_by_key(|a| a.part);
        Ok((answers, stats))
    }

    /// What one pass over the chunks that hold any wanted bin (global bin
    /// numbers of `target`'s index) gathers of each: its values while
    /// their total fits in memory, else a count per value when the bin is
    /// narrow (a flood's durations: a few hundred distinct values held
    /// millions of times). Bins left out are wide and too large: the caller
    /// narrows them in passes.
    fn bin_values(
        &self,
        (held, by_part): (&Held, &PartBins),
        target: &Target,
        wanted: &[Vec<(u32, u64, u64)>],
        stats: &mut QueryStats,
    ) -> Result<HashMap<u32, Gathered>> {
        let Some(spec) = &target.index else {
            return Ok(HashMap::new());
        };
        let mut room = FIT;
        let plan = gather_plan(
            spec,
            target.value_bins(),
            wanted,
            span_of(by_part),
            &mut room,
        );
        self.gather_held(held, target, plan, stats)
    }

    /// `plan`'s bins gathered from the chunks of `held` that hold them.
    /// A run of chunks that the groups log answered is read from its time
    /// and values entries alone (one `pread` each): a sealed chunk's values
    /// entry holds a section for every bin its summaries hold, so neither
    /// its summaries nor its records are read. Other chunks (a window's
    /// edges, runs without values entries) are read one by one.
    pub(super) fn gather_held(
        &self,
        held: &Held,
        target: &Target,
        mut plan: HashMap<u32, Gathered>,
        stats: &mut QueryStats,
    ) -> Result<HashMap<u32, Gathered>> {
        let index = target.index_id();
        let mut rest = Held {
            chunks: held.chunks.clone(),
            runs: Vec::new(),
        };
        // Runs cut into pieces, so that both threads have work where a
        // window holds only a few long runs (a second of a busy capture).
        let runs: Vec<(Range<u64>, &Vec<u32>)> = (held.runs.iter())
            .filter(|(_, bins)| bins.iter().any(|b| plan.contains_key(b)))
            .flat_map(|(run, bins)| {
                (run.clone())
                    .step_by(PIECE as usize)
                    .map(move |start| (start..(start + PIECE).min(run.end), bins))
            })
            .collect();
        // Values go straight into the plan's room, made for exactly what
        // the summaries count: per-thread copies merged after would hold
        // them twice. Counts and tallies are small: two threads, each over
        // half the runs, as copying the entries out of the page cache is
        // most of the work.
        if plan.values().any(|g| matches!(g, Gathered::Values(_))) {
            rest.runs = self.gather_runs(&runs, index, &mut plan)?;
        } else {
            let empty: HashMap<u32, Gathered> = (plan.iter())
                .map(|(bin, gathered)| (*bin, gathered.empty_like()))
                .collect();
            let parts = parallel(&runs, |part| {
                let mut found = empty.clone();
                let unread = self.gather_runs(part, index, &mut found)?;
                Ok((found, unread))
            })?;
            for (found, unread) in parts {
                for (bin, more) in found {
                    if let Some(gathered) = plan.get_mut(&bin) {
                        gathered.merge(more);
                    }
                }
                rest.runs.extend(unread);
            }
        }
        let valued: u64 = (runs.iter())
            .map(|(run, _)| run.end - run.start)
            .sum::<u64>()
            - (rest.runs.iter())
                .map(|(run, _)| run.end - run.start)
                .sum::<u64>();
        stats.chunks_valued_for_bins += valued;
        let wanted = plan.keys().copied().collect();
        let rest = self.expand(rest, target, &wanted)?;
        self.gather(&rest, target, plan, stats)
    }

    /// Adds to `found` its bins' runs from the values log of the chunks of
    /// `runs`; the runs whose entries it lacks, to be read.
    fn gather_runs(
        &self,
        runs: &[(Range<u64>, &Vec<u32>)],
        index: IndexId,
        found: &mut HashMap<u32, Gathered>,
    ) -> Result<Vec<(Range<u64>, Vec<u32>)>> {
        let mut unread = Vec::new();
        for (run, bins) in runs {
            let read = self.for_each_values(run.clone(), |chunk, sections| {
                let wanted = |bin| found.contains_key(&bin);
                let runs = values::sections_of(sections, index, wanted).ok_or_else(|| {
                    Error::Invalid(format!("values of chunk {chunk} do not decode"))
                })?;
                for (bin, runs) in runs {
                    if let Some(gathered) = found.get_mut(&bin) {
                        gathered.add_runs(&runs);
                    }
                }
                Ok(())
            })?;
            if !read {
                unread.push((run.clone(), (*bins).clone()));
            }
        }
        Ok(unread)
    }

    /// One pass over the chunks of `held` that hold a bin of `plan`,
    /// gathering each bin's values as the plan says.
    fn gather(
        &self,
        held: &[(ChunkRef, Option<Vec<u32>>)],
        target: &Target,
        plan: HashMap<u32, Gathered>,
        stats: &mut QueryStats,
    ) -> Result<HashMap<u32, Gathered>> {
        let Some(spec) = &target.index else {
            return Ok(HashMap::new());
        };
        let per_part = target.value_bins();
        // Each record's bin is looked up in a table rather than hashed:
        // the pass visits millions of records.
        let (bins, mut gathered): (Vec<u32>, Vec<Gathered>) = plan.into_iter().unzip();
        let empty: Vec<Gathered> = gathered.iter().map(Gathered::empty_like).collect();
        let mut slot_of = vec![u32::MAX; (per_part * spec.parts()) as usize];
        for (slot, bin) in (0u32..).zip(&bins) {
            slot_of[*bin as usize] = slot;
        }
        let slot = |bin: u32| slot_of.get(bin as usize).filter(|s| **s != u32::MAX);
        // Per chunk, the slots its summaries hold (`None`: scanned, any).
        let chunks: Vec<(ChunkRef, Option<Vec<u32>>)> = held
            .iter()
            .filter_map(|(at, here)| match here {
                None => Some((*at, None)),
                Some(here) => {
                    let slots: Vec<u32> = here.iter().filter_map(|b| slot(*b)).copied().collect();
                    (!slots.is_empty()).then_some((*at, Some(slots)))
                }
            })
            .collect();
        let index = target.index_id();
        let cache = self.bin_cache();
        let parts = parallel(&chunks, |part| {
            let mut found = empty.clone();
            let (mut cached_chunks, mut valued_chunks) = (0, 0);
            let mut values: Vec<Vec<i64>> = vec![Vec::new(); found.len()];
            for (at, slots) in part {
                // A sealed chunk wholly in the window: its bins' values are
                // those of an earlier query, when one gathered them, or
                // those the values log holds.
                let sealed = slots.as_ref().filter(|_| self.is_sealed(at.chunk));
                if let Some(slots) = sealed {
                    let wanted: Vec<u32> = slots.iter().map(|s| bins[*s as usize]).collect();
                    if let Some((runs, cached)) = self.known_runs(at, index, &wanted)? {
                        if cached {
                            cached_chunks += 1;
                        } else {
                            valued_chunks += 1;
                        }
                        for (s, runs) in slots.iter().zip(runs) {
                            found[*s as usize].add_runs(&runs);
                        }
                        continue;
                    }
                }
                self.visit_chunk(at, target, |record| {
                    let Some(value) = spec.field.read(record.payload) else {
                        return;
                    };
                    let bin = spec.part_of(record.payload) * per_part + spec.bins.bin_of(value);
                    if let Some(s) = slot(bin) {
                        values[*s as usize].push(value);
                    }
                })?;
                if let Some(slots) = sealed {
                    for s in slots {
                        let runs = runs(&mut values[*s as usize]);
                        found[*s as usize].add_runs(&runs);
                        cache.put(at.chunk, index, bins[*s as usize], runs);
                    }
                } else {
                    for (found, values) in found.iter_mut().zip(&values) {
                        for value in values {
                            found.add(*value);
                        }
                    }
                }
                values.iter_mut().for_each(Vec::clear);
            }
            Ok((found, cached_chunks, valued_chunks))
        })?;
        let cached: u64 = parts.iter().map(|(_, n, _)| n).sum();
        let valued: u64 = parts.iter().map(|(_, _, n)| n).sum();
        stats.chunks_cached_for_bins += cached;
        stats.chunks_valued_for_bins += valued;
        stats.chunks_read_for_bins += chunks.len() as u64 - cached - valued;
        for (found, _, _) in parts {
            for (gathered, more) in gathered.iter_mut().zip(found) {
                gathered.merge(more);
            }
        }
        Ok(bins.into_iter().zip(gathered).collect())
    }

    /// The runs of global bins `bins` of `index` in the sealed chunk `at`
    /// without reading its records: from the cache (`true`), else from the
    /// values log (then cached for the next query).
    fn known_runs(
        &self,
        at: &ChunkRef,
        index: IndexId,
        bins: &[u32],
    ) -> Result<Option<(Vec<Runs>, bool)>> {
        let cache = self.bin_cache();
        let cached: Option<Vec<Runs>> = bins
            .iter()
            .map(|bin| cache.get(at.chunk, index, *bin))
            .collect();
        if let Some(cached) = cached {
            return Ok(Some((cached, true)));
        }
        let Some(stored) = self.stored_runs(at.chunk, at.values, index, bins)? else {
            return Ok(None);
        };
        for (bin, runs) in bins.iter().zip(&stored) {
            cache.put(at.chunk, index, *bin, std::sync::Arc::clone(runs));
        }
        Ok(Some((stored, false)))
    }

    /// The `k`-th smallest (1-based) value in `[lo, hi)` (`hi = None`: no
    /// upper bound) among the target's records in `chunks`, given that
    /// `count` values lie in that range. Collects values when few enough,
    /// else narrows the range with 64-way counting passes.
    fn select(
        &self,
        chunks: &[ChunkRef],
        target: &Target,
        range: (i64, Option<i64>, u64),
        mut k: u64,
    ) -> Result<i64> {
        const FIT: u64 = 1 << 20;
        const WAYS: u128 = 64;
        let (mut lo, mut hi, mut count) = range;
        let contains = move |v: i64, lo: i64, hi: Option<i64>| v >= lo && hi.is_none_or(|h| v < h);
        loop {
            if hi.is_some_and(|h| i128::from(h) - i128::from(lo) == 1) {
                // One value left, held more than FIT times (a flood of
                // equal durations): that value is the answer.
                return Ok(lo);
            }
            if count <= FIT {
                let parts = parallel(chunks, |part| {
                    let mut values = Vec::new();
                    for at in part {
                        self.visit_values(at, target, |v| {
                            if contains(v, lo, hi) {
                                values.push(v);
                            }
                        })?;
                    }
                    Ok(values)
                })?;
                let mut values: Vec<i64> = parts.into_iter().flatten().collect();
                values.sort_unstable();
                return values.get(k as usize - 1).copied().ok_or_else(|| {
                    Error::Invalid("summaries and records disagree; the capture is corrupt".into())
                });
            }
            // Split [lo, hi) into WAYS equal parts and keep the one holding rank k.
            let span = (i128::from(hi.unwrap_or(i64::MAX)) - i128::from(lo)) as u128
                + u128::from(hi.is_none());
            let step = span.div_ceil(WAYS).max(1);
            let per_thread = parallel(chunks, |part| {
                let mut parts = vec![0u64; WAYS as usize];
                for at in part {
                    self.visit_values(at, target, |v| {
                        if contains(v, lo, hi) {
                            parts[((i128::from(v) - i128::from(lo)) as u128 / step) as usize] += 1;
                        }
                    })?;
                }
                Ok(parts)
            })?;
            let mut parts = vec![0u64; WAYS as usize];
            for thread in per_thread {
                for (total, n) in parts.iter_mut().zip(thread) {
                    *total += n;
                }
            }
            let mut part = 0;
            while k > parts[part] {
                k -= parts[part];
                part += 1;
                if part == parts.len() {
                    // The records hold fewer values than the summaries counted.
                    return Err(Error::Invalid(
                        "summaries and records disagree; the capture is corrupt".into(),
                    ));
                }
            }
            count = parts[part];
            let new_lo = i128::from(lo) + (part as u128 * step) as i128;
            let new_hi = new_lo + step as i128;
            lo = new_lo as i64;
            hi = if new_hi > i128::from(i64::MAX) {
                hi
            } else {
                Some(new_hi as i64)
            };
        }
    }
}

/// Chunks whose values-log entries a thread reads at once.
const PIECE: u64 = 16;

/// Values a pass holds at once (8 bytes each), over every bin it gathers.
pub(super) const FIT: u64 = 1 << 22;

/// How a pass gathers each wanted bin (global bin numbers of `spec`): a
/// count per value when the bin is narrower than the values it holds, else
/// its values while their total fits in memory, smallest bins first, else
/// a count per value when the bin is narrow. A bin's values lie within
/// `span`, the smallest and largest the summaries saw, so an edge bin (all
/// below the first bound, or past the last) is as narrow as they are: a
/// flood of calls shorter than the first latency bound is counted per
/// value. Bins left out are wide and too large.
pub(super) fn gather_plan(
    spec: &Index,
    per_part: u32,
    wanted: &[Vec<(u32, u64, u64)>],
    (min, max): (i64, i64),
    room: &mut u64,
) -> HashMap<u32, Gathered> {
    /// Distinct values a bin may have to be counted per value.
    const NARROW: i128 = 1 << 16;
    let mut bins: Vec<(u32, u64)> = wanted
        .iter()
        .flatten()
        .map(|(bin, count, _)| (*bin, *count))
        .collect();
    bins.sort_unstable();
    bins.dedup();
    bins.sort_by_key(|(_, count)| *count);
    let mut plan: HashMap<u32, Gathered> = HashMap::new();
    for (bin, count) in bins {
        let (lo, hi) = spec.bins.range(bin % per_part);
        let lo = lo.max(min);
        let end = hi.map_or(i128::from(max) + 1, |hi| {
            i128::from(hi).min(i128::from(max) + 1)
        });
        let width = end - i128::from(lo);
        if (1..=NARROW).contains(&width) && width <= i128::from(count) {
            // Fewer values possible than values held (a latency bin of a
            // few hundred ns holds a flood's calls): a count per value is
            // smaller than the values, and needs no sorting.
            plan.insert(bin, Gathered::Counts(lo, vec![0; width as usize]));
        } else if count <= *room {
            *room -= count;
            // Room for exactly what the summaries count: no doubling past it.
            let count = usize::try_from(count).unwrap_or(0);
            plan.insert(bin, Gathered::Values(Vec::with_capacity(count)));
        } else if (1..=NARROW).contains(&width) {
            plan.insert(bin, Gathered::Counts(lo, vec![0; width as usize]));
        }
    }
    plan
}

/// Count per value bin, over every part.
/// The smallest and largest value of any part.
fn span_of(by_part: &PartBins) -> (i64, i64) {
    let min = by_part.values().filter_map(|(a, _)| a.min).min();
    let max = by_part.values().filter_map(|(a, _)| a.max).max();
    (min.unwrap_or(0), max.unwrap_or(0))
}

/// [`Snapshot::aggregate_parts`] estimated from counts per bin alone, where
/// deleted chunks' summaries count too: each quantile interpolated inside
/// its bin ([`estimate`]), the widest such bin kept in `stats`.
fn estimate_parts(
    bins: &Bins,
    by_part: PartBins,
    qs: &[f64],
    stats: &mut QueryStats,
) -> Vec<PartAnswer> {
    by_part
        .into_iter()
        .filter(|(_, (aggregate, _))| aggregate.count > 0)
        .map(|(part, (aggregate, counts))| {
            let n = aggregate.count;
            let span = (aggregate.min.unwrap_or(0), aggregate.max.unwrap_or(0));
            let quantiles = (qs.iter())
                .map(|q| {
                    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
                    let (value, error) = estimate(bins, &counts, span, rank);
                    stats.rolled_up_error = stats.rolled_up_error.max(error);
                    Some(value)
                })
                .collect();
            PartAnswer {
                part,
                aggregate,
                quantiles,
            }
        })
        .collect()
}

fn across_parts(by_part: &BTreeMap<u32, (Aggregate, Vec<u64>)>, bins: usize) -> Vec<u64> {
    let mut counts = vec![0u64; bins];
    for (_, part_counts) in by_part.values() {
        for (count, n) in counts.iter_mut().zip(part_counts) {
            *count = count.saturating_add(*n);
        }
    }
    counts
}

/// For each part (in order) and each of `qs`: the global bin holding the
/// quantile, that bin's count, and the quantile's rank within the bin.
pub(super) fn quantile_bins(
    by_part: &BTreeMap<u32, (Aggregate, Vec<u64>)>,
    qs: &[f64],
    per_part: u32,
) -> Vec<Vec<(u32, u64, u64)>> {
    by_part
        .iter()
        .map(|(part, (_, counts))| {
            let n = counts.iter().fold(0u64, |n, c| n.saturating_add(*c));
            qs.iter()
                .map(|q| {
                    let rank = ((q * n as f64).ceil() as u64).clamp(1, n.max(1));
                    let (mut before, mut bin) = (0u64, 0usize);
                    while bin + 1 < counts.len() && before.saturating_add(counts[bin]) < rank {
                        before += counts[bin];
                        bin += 1;
                    }
                    (part * per_part + bin as u32, counts[bin], rank - before)
                })
                .collect()
        })
        .collect()
}

/// Chunks that hold global bin `bin` by their summaries, or were scanned.
fn relevant_chunks(held: &[(ChunkRef, Option<Vec<u32>>)], bin: u32) -> Vec<ChunkRef> {
    held.iter()
        .filter(|(_, here)| here.as_ref().is_none_or(|b| b.contains(&bin)))
        .map(|(at, _)| *at)
        .collect()
}

/// Distinct values [`Snapshot::value_counts`] holds at once (a thread
/// id's bin can hold at most `pid_max`, 4 M, of them).
pub(crate) const MAX_DISTINCT: usize = 1 << 22;

/// The records of one bin that a pass gathered (see `Snapshot::bin_values`).
#[derive(Clone)]
pub(super) enum Gathered {
    /// Every value.
    Values(Vec<i64>),
    /// How many times each value `lo + i` occurred.
    Counts(i64, Vec<u64>),
    /// How many times each value occurred, while at most [`MAX_DISTINCT`]
    /// did (`true`: more did, and the rest were left out).
    Tally(HashMap<i64, u64>, bool),
}

impl Gathered {
    fn tally() -> Self {
        Self::Tally(HashMap::new(), false)
    }

    /// Gathers the same way, nothing gathered yet.
    pub(super) fn empty_like(&self) -> Self {
        match self {
            Self::Values(_) => Self::Values(Vec::new()),
            Self::Counts(lo, counts) => Self::Counts(*lo, vec![0; counts.len()]),
            Self::Tally(..) => Self::tally(),
        }
    }

    pub(super) fn add(&mut self, value: i64) {
        self.add_n(value, 1);
    }

    /// Adds `value`, `n` times.
    fn add_n(&mut self, value: i64, n: u64) {
        match self {
            Self::Values(values) => values.extend(std::iter::repeat_n(value, n as usize)),
            Self::Counts(lo, counts) => {
                let at = (i128::from(value) - i128::from(*lo)) as usize;
                if let Some(count) = counts.get_mut(at) {
                    *count += n;
                }
            }
            Self::Tally(counts, over) => {
                if counts.len() < MAX_DISTINCT || counts.contains_key(&value) {
                    *counts.entry(value).or_default() += n;
                } else {
                    *over = true;
                }
            }
        }
    }

    /// Calls `f` with each value gathered and how often it occurred.
    fn for_each(&self, mut f: impl FnMut(i64, u64)) {
        match self {
            Self::Values(values) => values.iter().for_each(|v| f(*v, 1)),
            Self::Counts(lo, counts) => {
                for (value, n) in (*lo..).zip(counts).filter(|(_, n)| **n > 0) {
                    f(value, *n);
                }
            }
            Self::Tally(counts, _) => counts.iter().for_each(|(value, n)| f(*value, *n)),
        }
    }

    /// Adds `runs` of values (ascending, each with its count).
    pub(super) fn add_runs(&mut self, runs: &[(i64, u32)]) {
        for &(value, n) in runs {
            self.add_n(value, u64::from(n));
        }
    }

    pub(super) fn merge(&mut self, other: Self) {
        match (self, other) {
            (Self::Values(values), Self::Values(mut more)) => values.append(&mut more),
            (Self::Counts(_, counts), Self::Counts(_, more)) => {
                for (count, n) in counts.iter_mut().zip(more) {
                    *count += n;
                }
            }
            (this @ Self::Tally(..), Self::Tally(more, over)) => {
                for (value, n) in more {
                    this.add_n(value, n);
                }
                if let Self::Tally(_, was) = this {
                    *was |= over;
                }
            }
            _ => unreachable!("every thread gathers each bin the same way"),
        }
    }

    /// The `k`-th smallest (1-based) value gathered. Values held one by one
    /// are put in place for it (as a multiset they stay the same, for the
    /// next quantile of the bin), not copied: a bin may hold 2^22 of them.
    /// How many values it gathered.
    fn total(&self) -> u64 {
        match self {
            Self::Values(values) => values.len() as u64,
            Self::Counts(_, counts) => counts.iter().sum(),
            Self::Tally(counts, _) => counts.values().sum(),
        }
    }

    pub(super) fn nth(&mut self, k: u64) -> Result<i64> {
        let corrupt =
            || Error::Invalid("summaries and records disagree; the capture is corrupt".into());
        // Ranks count from 1: a rank 0 comes of summaries that disagree.
        if k == 0 {
            return Err(corrupt());
        }
        match self {
            Self::Values(values) => {
                let at = usize::try_from(k - 1).unwrap_or(usize::MAX);
                if at >= values.len() {
                    return Err(corrupt());
                }
                Ok(*values.select_nth_unstable(at).1)
            }
            Self::Counts(lo, counts) => {
                let mut left = k;
                for (i, count) in counts.iter().enumerate() {
                    if left <= *count {
                        return Ok(*lo + i as i64);
                    }
                    left -= count;
                }
                Err(corrupt())
            }
            Self::Tally(counts, _) => {
                let mut values: Vec<(i64, u64)> = counts.iter().map(|(v, n)| (*v, *n)).collect();
                values.sort_unstable();
                let mut left = k;
                for (value, count) in values {
                    if left <= count {
                        return Ok(value);
                    }
                    left -= count;
                }
                Err(corrupt())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Field, FieldKind};

    /// A latency index: bins from 100 ns, everything shorter in bin 0.
    fn latency() -> Index {
        Index {
            id: 1,
            source: 0,
            name: "dur".into(),
            field: Field::new("dur", 0, FieldKind::U64),
            bins: Bins::new(vec![100, 200, 400, 1 << 40]).unwrap(),
            from_chunk: 0,
            until_chunk: None,
            partition: None,
            splits: None,
        }
    }

    /// A flood of calls shorter than the first bound fills bin 0, whose
    /// range starts at `i64::MIN`: within the values the summaries saw it
    /// is narrow, so it is counted per value rather than left to a pass
    /// over every record (a hist or p50 of a getppid flood took 18 s on
    /// 100 M records).
    #[test]
    fn an_edge_bin_too_large_to_hold_is_counted_within_the_values_seen() {
        let index = latency();
        let wanted = [vec![(0, 20_000_000, 10_000_000), (1, 10, 1)]];
        let plan = gather_plan(&index, 5, &wanted, (41, 180), &mut FIT.clone());
        assert!(matches!(plan.get(&1), Some(Gathered::Values(_))));
        let Some(Gathered::Counts(lo, counts)) = plan.get(&0) else {
            panic!("bin 0 is not counted per value");
        };
        assert_eq!((*lo, counts.len()), (41, 59), "41..100");
        // The last bin ends at the largest value seen.
        let wanted = [vec![(4, 20_000_000, 1)]];
        let plan = gather_plan(&index, 5, &wanted, (41, (1 << 40) + 500), &mut FIT.clone());
        let Some(Gathered::Counts(lo, counts)) = plan.get(&4) else {
            panic!("the last bin is not counted per value");
        };
        assert_eq!((*lo, counts.len()), (1 << 40, 501));
        // A wide bin too large to hold is left to narrowing passes.
        let plan = gather_plan(&index, 5, &wanted, (41, 1 << 41), &mut FIT.clone());
        assert!(plan.is_empty());
    }

    /// A bin holding more values than it has possible values is counted
    /// per value even when its values would fit: 200 counts rather than a
    /// million values (a flood's p99 per second held 15 MB per bucket).
    /// The room is left for the other bins.
    #[test]
    fn a_bin_narrower_than_its_values_is_counted_per_value() {
        let index = latency();
        let wanted = [vec![(2, 1_000_000, 1_000_000), (1, 50, 1)]];
        let mut room = FIT;
        let plan = gather_plan(&index, 5, &wanted, (41, 1000), &mut room);
        let Some(Gathered::Counts(lo, counts)) = plan.get(&2) else {
            panic!("bin 2 is not counted per value");
        };
        assert_eq!((*lo, counts.len()), (200, 200), "200..400");
        // Bin 1 (100..200) holds fewer values than it has: values.
        assert!(matches!(plan.get(&1), Some(Gathered::Values(_))));
        assert_eq!(room, FIT - 50);
    }
}
