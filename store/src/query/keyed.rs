//! Aggregates and exact quantiles of one index's values per value of
//! another index's field (a thread's id, or what it stands for: its
//! process, its name): "p99 latency by process" from summaries.
//!
//! A chunk (or a run of chunks the groups log merged) whose key index saw
//! one value alone belongs wholly to that key's group, so its value bins
//! count for the group as they stand; so does a chunk whose keys, as its
//! values-log entry lists them, all stand for one group (two threads of a
//! process). Only chunks that mix groups are read:
//! once to count their values per group and bin, and once more for the
//! values of the bins the groups' quantiles fall in. Each pass runs on
//! both cores, the first over the two halves of the window. Memory is the
//! groups' bin counts (twice, while the halves are apart) and at most
//! [`FIT`] values.

use std::collections::{BTreeMap, HashMap};

use super::{
    Aggregate, ChunkRef, QueryStats, Target, both, parallel,
    quantile::{FIT, Gathered, Held, gather_plan, quantile_bins},
};
use crate::{
    error::{Error, Result},
    schema::{IndexId, SourceId},
    shared::{ChunkMeta, Snapshot},
    values,
};

/// One group's quantile picks (global bin, the bin's count, rank within
/// it) and the values gathered of those bins.
type Picked = (Vec<(u32, u64, u64)>, HashMap<u32, Gathered>);

/// Groups held at once (each its bin counts, about 2 KB for a latency
/// index); past this the caller scans. A query's key may have millions of
/// values (`by ret`), and a pass must not grow with them.
const MAX_GROUPS: usize = 1 << 12;

/// Chunks a window must hold for its first pass to run in two halves.
const PASS_HALF_MIN: u64 = 64;

/// What the first pass over chunks finds: the groups, the chunks that mix
/// them whose values the values log keeps apart per key (each with the
/// count of its values), and the other chunks that mix them.
#[derive(Default)]
struct Pass {
    groups: BTreeMap<i64, Group>,
    mixed: Vec<ChunkRef>,
    split: Vec<(ChunkRef, u64)>,
    stats: QueryStats,
}

impl Pass {
    /// Adds what a pass over later chunks found.
    fn absorb(&mut self, other: Self, bins: usize) {
        for (key, more) in other.groups {
            let g = self.groups.entry(key).or_insert_with(|| Group::new(bins));
            g.absorb(more);
        }
        self.mixed.extend(other.mixed);
        self.split.extend(other.split);
        self.stats.absorb(&other.stats);
    }
}

/// One group of [`Snapshot::aggregate_by_key`].
#[derive(Clone, Debug, PartialEq)]
pub struct KeyAnswer {
    /// The group: what the key's value stands for.
    pub key: i64,
    /// Count, sum, min and max of the group's values.
    pub aggregate: Aggregate,
    /// The asked quantiles of the group's values, in the order asked.
    pub quantiles: Vec<Option<i64>>,
}

/// What one group gathers: its values' aggregate and count per value
/// bin, and the chunks (and runs) that belong to it alone.
struct Group {
    aggregate: Aggregate,
    counts: Vec<u64>,
    held: Held,
}

impl Group {
    fn new(bins: usize) -> Self {
        Self {
            aggregate: Aggregate::default(),
            counts: vec![0; bins],
            held: Held::default(),
        }
    }

    /// Adds `other`'s counts and what it holds alone (of later chunks).
    fn absorb(&mut self, other: Self) {
        self.aggregate.absorb(&other.aggregate);
        for (count, n) in self.counts.iter_mut().zip(other.counts) {
            *count = count.saturating_add(n);
        }
        self.held.chunks.extend(other.held.chunks);
        self.held.runs.extend(other.held.runs);
    }

    /// Counts `meta`'s summaries of `target`'s index: the bins they hold.
    fn count(&mut self, meta: &ChunkMeta, target: &Target) -> Result<Vec<u32>> {
        let mut here = Vec::new();
        let bins = self.counts.len();
        for s in meta.summaries.iter().filter(|s| target.wants(s)) {
            let count = self.counts.get_mut(s.bin as usize).ok_or_else(|| {
                Error::Invalid(format!(
                    "chunk {}: summary names bin {} of an index with {bins} bins",
                    s.chunk, s.bin
                ))
            })?;
            // Saturating: a forged summary must not overflow the count.
            *count = count.saturating_add(s.count);
            self.aggregate.merge(s);
            here.push(s.bin);
        }
        Ok(here)
    }
}

/// The last key looked up and what it gave: a chunk's records of one
/// thread come in runs, and its group is found once per run.
struct Memo<T> {
    last: Option<(i64, T)>,
}

impl<T> Default for Memo<T> {
    fn default() -> Self {
        Self { last: None }
    }
}

impl<T: Copy> Memo<T> {
    fn get(&mut self, key: i64, f: impl FnOnce(i64) -> T) -> T {
        match self.last {
            Some((last, found)) if last == key => found,
            _ => self.last.insert((key, f(key))).1,
        }
    }
}

/// Each group's answer, from its aggregate and its quantiles' picks and
/// gathered values.
fn answers(groups: BTreeMap<i64, Group>, values: Vec<Picked>) -> Result<Vec<KeyAnswer>> {
    let mut answers = Vec::with_capacity(groups.len());
    for ((key, g), (picks, mut values)) in groups.into_iter().zip(values) {
        let mut quantiles = Vec::with_capacity(picks.len());
        for (bin, _, k) in picks {
            let value = match values.get_mut(&bin) {
                Some(gathered) if g.aggregate.count > 0 => Some(gathered.nth(k)?),
                _ => None,
            };
            quantiles.push(value);
        }
        answers.push(KeyAnswer {
            key,
            aggregate: g.aggregate,
            quantiles,
        });
    }
    Ok(answers)
}

/// Adds the groups `found` counted to `groups`.
fn merge_groups(groups: &mut BTreeMap<i64, Group>, found: BTreeMap<i64, Group>, bins: usize) {
    for (key, more) in found {
        let g = groups.entry(key).or_insert_with(|| Group::new(bins));
        g.aggregate.absorb(&more.aggregate);
        for (count, n) in g.counts.iter_mut().zip(more.counts) {
            *count = count.saturating_add(n);
        }
    }
}

/// The one value `keyed`'s index saw in `meta`, if it saw only one.
fn sole_key(meta: &ChunkMeta, keyed: &Target) -> Option<i64> {
    let mut seen = meta
        .summaries
        .iter()
        .filter(|s| keyed.wants(s) && s.count > 0);
    let first = seen.next()?;
    let one = (first.min == first.max).then_some(first.min)?;
    seen.all(|s| s.min == one && s.max == one).then_some(one)
}

impl Snapshot {
    /// [`Snapshot::aggregate_parts`] with groups given by `key`'s index
    /// instead of parts: per group (`group` of each value of `key`'s field;
    /// `None` for a value makes the answer `None`), the aggregate of
    /// `index`'s values and their exact `qs` quantiles, in group order.
    /// `None` too when the groups are too many to hold, or a quantile's
    /// bin too large to gather in one pass: the caller scans.
    pub fn aggregate_by_key(
        &self,
        (source, index, key): (SourceId, IndexId, IndexId),
        group: &(dyn Fn(i64) -> Option<i64> + Sync),
        window: std::ops::RangeInclusive<u64>,
        qs: &[f64],
    ) -> Result<(Option<Vec<KeyAnswer>>, QueryStats)> {
        if let Some(q) = qs.iter().find(|q| !(0.0..=1.0).contains(*q)) {
            return Err(Error::Invalid(format!(
                "quantile {q} is not between 0 and 1"
            )));
        }
        self.settled(|snapshot| {
            let target = snapshot.target(source, index, None, window.clone())?;
            let keyed = snapshot.target(source, key, None, window.clone())?;
            snapshot.aggregate_by_key_in(&target, &keyed, group, qs)
        })
    }

    fn aggregate_by_key_in(
        &self,
        target: &Target,
        keyed: &Target,
        group: &(dyn Fn(i64) -> Option<i64> + Sync),
        qs: &[f64],
    ) -> Result<(Option<Vec<KeyAnswer>>, QueryStats)> {
        let (Some(spec), Some(_)) = (&target.index, &keyed.index) else {
            return Err(Error::Invalid(
                "aggregates by key need two value indexes, not index 0".into(),
            ));
        };
        if spec.parts() != 1 {
            return Err(Error::Invalid(format!(
                "aggregates by key need an index without parts; `{}` has {}",
                spec.name,
                spec.parts()
            )));
        }
        let range = self.target_chunks(target)?;
        // The summaries of a long window's chunks, on both cores: each
        // half's groups, then the other's added (the halves meet inside
        // one group run at most, read chunk by chunk).
        let pass = |chunks| self.first_pass(chunks, (target, keyed), group);
        let passes = if range.end - range.start < 2 * PASS_HALF_MIN {
            vec![pass(range)?]
        } else {
            let mid = range.start + (range.end - range.start) / 2;
            let (left, right) = both(|| pass(range.start..mid), || pass(mid..range.end))?;
            vec![left, right]
        };
        let mut all = Pass::default();
        for pass in passes {
            all.absorb(pass, target.value_bins() as usize);
        }
        let Pass {
            mut groups,
            mut mixed,
            split,
            mut stats,
        } = all;
        let Some(split) = self.count_split((target, keyed), group, &split, &mut groups)? else {
            return Ok((None, stats));
        };
        // The chunks whose entries lack the split values are read.
        let (split, unsplit): (Vec<_>, Vec<_>) = split.into_iter().partition(|(_, done)| *done);
        stats.chunks_summarized += split.len() as u64;
        mixed.extend(unsplit.into_iter().map(|(at, _)| at));
        stats.chunks_scanned += mixed.len() as u64;
        if !self.count_mixed((target, keyed), group, &mixed, &mut groups)? {
            return Ok((None, stats));
        }
        let split: Vec<ChunkRef> = split.into_iter().map(|(at, _)| at).collect();
        let Some(values) = self.group_values(
            (target, keyed),
            group,
            &groups,
            (&mixed, &split),
            qs,
            &mut stats,
        )?
        else {
            return Ok((None, stats));
        };
        Ok((Some(answers(groups, values)?), stats))
    }

    /// The first pass of [`Snapshot::aggregate_by_key`] over `range`: the
    /// chunks and runs of one group counted for it from their summaries,
    /// the others listed to be read (split per key in the values log, or
    /// mixed).
    fn first_pass(
        &self,
        range: std::ops::Range<u64>,
        (target, keyed): (&Target, &Target),
        group: &(dyn Fn(i64) -> Option<i64> + Sync),
    ) -> Result<Pass> {
        let bins = target.value_bins() as usize;
        let Pass {
            mut groups,
            mut mixed,
            mut split,
            mut stats,
        } = Pass::default();
        let mut keys = target.keys();
        keys.extend(keyed.keys().into_iter().skip(1));
        // Whether the values log keeps the values apart per key where
        // chunks mix keys (see `Index::splits`).
        let splits = keyed.index.as_ref().and_then(|k| k.splits) == Some(target.index_id());
        let whole = |meta: &ChunkMeta, run: &std::ops::Range<u64>| {
            self.summarizes_run(meta, run, target) && self.summarizes_run(meta, run, keyed)
        };
        self.for_each_span(range, &keys, |meta, run| {
            let sole = sole_key(meta, keyed).map(group);
            if let Some(run) = run {
                let Some(Some(key)) = sole.filter(|_| whole(meta, &run)) else {
                    return Ok(false);
                };
                let g = groups.entry(key).or_insert_with(|| Group::new(bins));
                let here = g.count(meta, target)?;
                g.held.runs.push((run.clone(), here));
                stats.add_run(&run);
                return Ok(true);
            }
            let chunk = meta.time.chunk;
            if self.is_damaged(chunk) {
                stats.leave_out(true);
                return Ok(true);
            }
            let Some(at) = ChunkRef::of(meta, target.source) else {
                return Ok(true);
            };
            if self.is_gone(chunk) {
                stats.leave_out(false);
                return Ok(true);
            }
            let whole_chunk = whole(meta, &(chunk..chunk + 1));
            let one = match sole {
                _ if !whole_chunk => None,
                Some(one) => one,
                None => self.one_group(&at, meta, keyed, group)?,
            };
            if let Some(key) = one {
                let g = groups.entry(key).or_insert_with(|| Group::new(bins));
                let here = g.count(meta, target)?;
                g.held.chunks.push((at, Some(here)));
                stats.chunks_summarized += 1;
            } else if whole_chunk && splits {
                let values = meta.summaries.iter().filter(|s| target.wants(s));
                split.push((at, values.map(|s| s.count).fold(0, u64::saturating_add)));
            } else {
                mixed.push(at);
            }
            Ok(groups.len() <= MAX_GROUPS)
        })?;
        Ok(Pass {
            groups,
            mixed,
            split,
            stats,
        })
    }

    /// The one group every key in chunk `at` stands for, from the key
    /// index's section of its values-log entry (the threads of one process
    /// share a chunk: it belongs to that process); `None` when its keys
    /// stand for several, or it has no entry.
    fn one_group(
        &self,
        at: &ChunkRef,
        meta: &ChunkMeta,
        keyed: &Target,
        group: &(dyn Fn(i64) -> Option<i64> + Sync),
    ) -> Result<Option<i64>> {
        let summaries = || meta.summaries.iter().filter(|s| keyed.wants(s));
        // The smallest and largest key already in different groups: no
        // entry need be read (a grouping by the key itself, always).
        let min = summaries().map(|s| s.min).min().and_then(group);
        let max = summaries().map(|s| s.max).max().and_then(group);
        if min.is_none() || min != max {
            return Ok(None);
        }
        let bins: Vec<u32> = summaries().map(|s| s.bin).collect();
        let Some(runs) = self.stored_runs(at.chunk, at.values, keyed.index_id(), &bins)? else {
            return Ok(None);
        };
        let mut one = None;
        for (key, _) in runs.iter().flat_map(|runs| runs.iter()) {
            match (group(*key), one) {
                (None, _) => return Ok(None),
                (Some(g), Some(o)) if g != o => return Ok(None),
                (g, _) => one = g,
            }
        }
        Ok(one)
    }

    /// Counts the values of the chunks that mix keys per group and bin,
    /// on both cores; `false` when a record's key has no group, or the
    /// groups grow past [`MAX_GROUPS`] (the answer is left to a scan).
    fn count_mixed(
        &self,
        (target, keyed): (&Target, &Target),
        group: &(dyn Fn(i64) -> Option<i64> + Sync),
        mixed: &[ChunkRef],
        groups: &mut BTreeMap<i64, Group>,
    ) -> Result<bool> {
        let (Some(spec), Some(key_spec)) = (&target.index, &keyed.index) else {
            return Ok(true);
        };
        let bins = target.value_bins() as usize;
        let counted = parallel(mixed, |part| {
            let mut found: BTreeMap<i64, Group> = BTreeMap::new();
            let mut answerable = true;
            for at in part {
                let mut memo = Memo::default();
                self.visit_chunk(at, target, |record| {
                    let value = spec.field.read(record.payload);
                    let key = (key_spec.field.read(record.payload)).map(|k| memo.get(k, group));
                    let (Some(value), Some(Some(key))) = (value, key) else {
                        answerable &= value.is_none();
                        return;
                    };
                    if found.len() >= MAX_GROUPS && !found.contains_key(&key) {
                        answerable = false;
                        return;
                    }
                    let g = found.entry(key).or_insert_with(|| Group::new(bins));
                    g.aggregate.add(value);
                    g.counts[spec.bins.bin_of(value) as usize] += 1;
                })?;
                if !answerable {
                    break;
                }
            }
            Ok((found, answerable))
        })?;
        let mut answerable = true;
        for (found, answerable_here) in counted {
            answerable &= answerable_here;
            merge_groups(groups, found, bins);
        }
        Ok(answerable && groups.len() <= MAX_GROUPS)
    }

    /// Counts the values of the chunks that mix keys per group and bin
    /// from the sections of their values-log entries that keep them apart
    /// per key, on both cores. Each chunk comes with the count of its
    /// values its summaries hold, and goes back with whether its entry had
    /// them all (else it is left uncounted, to be read); `None` when a key
    /// has no group or the groups grow past [`MAX_GROUPS`].
    fn count_split(
        &self,
        (target, keyed): (&Target, &Target),
        group: &(dyn Fn(i64) -> Option<i64> + Sync),
        split: &[(ChunkRef, u64)],
        groups: &mut BTreeMap<i64, Group>,
    ) -> Result<Option<Vec<(ChunkRef, bool)>>> {
        let bins = target.value_bins() as usize;
        let (key, index) = (keyed.index_id(), target.index_id());
        let counted = parallel(split, |part| {
            let mut found: BTreeMap<i64, Group> = BTreeMap::new();
            let mut done = Vec::with_capacity(part.len());
            for (at, expected) in part {
                let entry = self.values_entry(at.chunk, at.values)?;
                let sections = (entry.as_deref())
                    .and_then(|e| values::keyed_of(&e[values::ENTRY_HEADER_LEN..], key, index))
                    .and_then(|found| {
                        (found.iter())
                            .filter(|b| (b.bin as usize) < bins)
                            .map(|b| Some((b.key, b.bin, b.totals()?)))
                            .collect::<Option<Vec<_>>>()
                            .filter(|totals| totals.len() == found.len())
                    })
                    .filter(|totals| {
                        totals
                            .iter()
                            .map(|(.., t)| t.count)
                            .fold(0, u64::saturating_add)
                            == *expected
                    });
                done.push((*at, sections.is_some()));
                let mut memo = Memo::default();
                for (k, bin, t) in sections.iter().flatten() {
                    let Some(key) = memo.get(*k, group) else {
                        return Ok(None);
                    };
                    if found.len() >= MAX_GROUPS && !found.contains_key(&key) {
                        return Ok(None);
                    }
                    let g = found.entry(key).or_insert_with(|| Group::new(bins));
                    g.aggregate.absorb(&Aggregate {
                        count: t.count,
                        sum: t.sum,
                        min: Some(t.min),
                        max: Some(t.max),
                    });
                    let count = &mut g.counts[*bin as usize];
                    *count = count.saturating_add(t.count);
                }
            }
            Ok(Some((found, done)))
        })?;
        let mut all = Vec::with_capacity(split.len());
        for part in counted {
            let Some((found, done)) = part else {
                return Ok(None);
            };
            merge_groups(groups, found, bins);
            all.extend(done);
        }
        Ok((groups.len() <= MAX_GROUPS).then_some(all))
    }

    /// Per group (in order): where its quantiles fall (bin, the bin's
    /// count, rank within it) and the values of those bins, from the
    /// values log of the chunks it holds alone and one pass over the
    /// `mixed` chunks. `None` when a bin is too large to gather.
    fn group_values(
        &self,
        (target, keyed): (&Target, &Target),
        group: &(dyn Fn(i64) -> Option<i64> + Sync),
        groups: &BTreeMap<i64, Group>,
        (mixed, split): (&[ChunkRef], &[ChunkRef]),
        qs: &[f64],
        stats: &mut QueryStats,
    ) -> Result<Option<Vec<Picked>>> {
        let (Some(spec), Some(key_spec)) = (&target.index, &keyed.index) else {
            return Ok(None);
        };
        let min = groups.values().filter_map(|g| g.aggregate.min).min();
        let max = groups.values().filter_map(|g| g.aggregate.max).max();
        let span = (min.unwrap_or(0), max.unwrap_or(0));
        let per_part = target.value_bins();
        let mut room = FIT;
        let mut out = Vec::with_capacity(groups.len());
        for g in groups.values() {
            let by_part = BTreeMap::from([(0, (g.aggregate, g.counts.clone()))]);
            let picks = quantile_bins(&by_part, qs, per_part);
            let plan = gather_plan(spec, per_part, &picks, span, &mut room);
            if picks
                .iter()
                .flatten()
                .any(|(bin, _, _)| !plan.contains_key(bin))
            {
                return Ok(None);
            }
            let values = self.gather_held(&g.held, target, plan, stats)?;
            out.push((picks.into_iter().next().unwrap_or_default(), values));
        }
        let slots: HashMap<i64, usize> = (groups.keys().copied()).zip(0..).collect();
        let slot = |k| group(k).and_then(|g| slots.get(&g).copied());
        let empty: Vec<HashMap<u32, Gathered>> = (out.iter())
            .map(|(_, bins)| bins.iter().map(|(b, g)| (*b, g.empty_like())).collect())
            .collect();
        stats.chunks_read_for_bins += mixed.len() as u64;
        let found = parallel(mixed, |part| {
            let mut found = empty.clone();
            for at in part {
                let mut memo = Memo::default();
                self.visit_chunk(at, target, |record| {
                    let value = spec.field.read(record.payload);
                    let key = key_spec.field.read(record.payload);
                    let (Some(value), Some(slot)) = (value, key.and_then(|k| memo.get(k, slot)))
                    else {
                        return;
                    };
                    if let Some(gathered) = found[slot].get_mut(&spec.bins.bin_of(value)) {
                        gathered.add(value);
                    }
                })?;
            }
            Ok(found)
        })?;
        stats.chunks_valued_for_bins += split.len() as u64;
        let (key, index) = (keyed.index_id(), target.index_id());
        let valued = parallel(split, |part| {
            let mut found = empty.clone();
            for at in part {
                let entry = self.values_entry(at.chunk, at.values)?;
                let changed = || {
                    Error::Invalid(format!(
                        "the values-log entry of chunk {} no longer decodes",
                        at.chunk
                    ))
                };
                let sections = (entry.as_deref())
                    .and_then(|e| values::keyed_of(&e[values::ENTRY_HEADER_LEN..], key, index))
                    .ok_or_else(changed)?;
                let mut memo = Memo::default();
                for b in sections {
                    let Some(slot) = memo.get(b.key, slot) else {
                        continue;
                    };
                    if let Some(gathered) = found[slot].get_mut(&b.bin) {
                        gathered.add_runs(&b.runs().ok_or_else(changed)?);
                    }
                }
            }
            Ok(found)
        })?;
        for found in found.into_iter().chain(valued) {
            for ((_, values), bins) in out.iter_mut().zip(found) {
                for (bin, more) in bins {
                    if let Some(gathered) = values.get_mut(&bin) {
                        gathered.merge(more);
                    }
                }
            }
        }
        Ok(Some(out))
    }
}
