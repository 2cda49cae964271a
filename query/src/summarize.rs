//! Aggregation: from the store's chunk summaries where they can answer
//! (whole windows, one part of a partitioned index, hist bins, counts per
//! bucket, groups that are parts), else over the records a scan visits.

use std::{collections::HashMap, ops::RangeInclusive};

use weft_store::OwnTimes;

use crate::{
    aggregate::{Acc, AggSpec, Groups, PERCENTILES, hist_edges},
    answer::{Answer, Cell},
    ast::{Agg, Func, Name},
    bind::{Pred, column},
    catalog::{Column, Kind, Read, SourceColumns},
    engine::{Engine, Near},
    error::{Error, Result},
    picks::{Pick, column_pick, part_index, parts_are_groups, summary_picks},
    shape::{group_answer, keyed_answer},
};

/// How the buckets of a series are answered from the summaries.
enum PerBucket {
    /// Aggregates, each over the index a pick names.
    Aggregates(Vec<Pick>),
    /// `hist(x)`, over this index (and part).
    Hist((weft_store::IndexId, Option<u32>)),
}

/// How `specs` per bucket can be answered from the summaries: a `hist` of
/// an indexed field, or aggregates the summary operators answer, with no
/// condition or one that picks a part; `None` otherwise.
fn per_bucket(source: &SourceColumns, pred: Option<&Pred>, specs: &[AggSpec]) -> Option<PerBucket> {
    match specs {
        [spec] if spec.func == Func::Hist => {
            column_pick(source, pred, spec.column?).map(PerBucket::Hist)
        }
        _ => summary_picks(source, pred, specs).map(PerBucket::Aggregates),
    }
}

/// Buckets of `every` always answered from summaries, one at a time, when
/// the summaries can (measured: 61 buckets of 10 M records took 0.10 s
/// where a scan took 0.59 s, 4,049 took 2.9 s where it took 0.42 s).
const FEW_BUCKETS: u64 = 256;

/// Past [`FEW_BUCKETS`], the chunks per bucket from which the summaries
/// still cost less than a scan: a bucket costs about what a scan of three
/// chunks does, and a scan holds every value a percentile needs (p99 every
/// 100 ms over 104.7 M records: 6.9 s and 830 MiB scanned, 0.66 s and
/// 17 MiB from the summaries).
const CHUNKS_PER_BUCKET: u64 = 4;

/// Values a series' scan may hold for its percentiles (8 bytes each).
const SCAN_VALUES: u64 = 4 << 20;

/// Most buckets a series answers from summaries.
const MAX_BUCKETS: usize = 1 << 16;

/// Where [`Engine::quantile_of`] reads: the source, the arrival window,
/// the time bucket (with the window's own times), the index and its part.
/// Rows of an answer, each under its key (here a bucket's start).
type KeyedRows = Vec<(Vec<i64>, Vec<Cell>)>;

type QuantileAt<'a> = (
    weft_store::SourceId,
    &'a RangeInclusive<u64>,
    Option<(&'a OwnTimes, &'a RangeInclusive<u64>)>,
    weft_store::IndexId,
    Option<u32>,
);

/// What [`Engine::grouped`] calls with each record: its group key, time
/// and payload.
pub(crate) type GroupedVisit<'a> = dyn FnMut(&[i64], u64, &[u8]) + 'a;

impl Engine<'_> {
    pub(crate) fn specs(source: &SourceColumns, aggs: &[Agg]) -> Result<Vec<AggSpec>> {
        aggs.iter()
            .map(|agg| {
                let (column, field, kind) = match &agg.field {
                    Some(name) => {
                        let (at, col) = column(source, name)?;
                        (Some(at), col.name.clone(), col.kind.clone())
                    }
                    None => (None, String::new(), Kind::Int),
                };
                Ok(AggSpec {
                    func: agg.func,
                    column,
                    field,
                    kind,
                })
            })
            .collect()
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "one call site; the parts of one stage"
    )]
    pub(crate) fn aggregate(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        pred: Option<Pred>,
        near: Option<&Near>,
        aggs: &[Agg],
        by: &[Name],
        every: Option<i64>,
    ) -> Result<Answer> {
        let specs = Self::specs(source, aggs)?;
        if let Some(i) = specs.iter().position(|s| s.func == Func::Hist)
            && specs.len() > 1
        {
            return Err(Error::spanned(
                aggs[i].span,
                "`hist` must be the only aggregate of its stage",
            ));
        }
        let by: Vec<usize> = by
            .iter()
            .map(|n| column(source, n).map(|(c, _)| c))
            .collect::<Result<_>>()?;
        // Around one anchor (or overlapping ones), with no `same`, the
        // correlation is just a narrower window: summaries can answer it.
        let narrowed;
        let (window, near) = match near {
            Some(n) if n.by_arrival && n.same.is_empty() && n.all.len() == 1 => {
                let (lo, hi) = n.all[0];
                narrowed = (*window.start()).max(lo)..=(*window.end()).min(hi);
                (&narrowed, None)
            }
            other => (window, other),
        };
        let summarized = near.is_none() && source.late.is_none() && !self.catalog.full_scan;
        if summarized
            && let Some(answer) =
                self.answer_from_summaries(source, window, pred.as_ref(), &specs, &by, every)?
        {
            return Ok(answer);
        }
        let mut groups = Groups::<Acc>::default();
        self.grouped(
            source,
            window,
            pred,
            near,
            &by,
            every,
            &mut |key, time, payload| {
                let accs = groups.get(key, specs.len());
                for (acc, spec) in accs.iter_mut().zip(&specs) {
                    match spec.column {
                        Some(c) => {
                            if let Some(v) = source.columns[c].value(time, payload) {
                                acc.add(spec, v);
                            }
                        }
                        None => acc.add(spec, 0),
                    }
                }
            },
        )?;
        if by.is_empty() && every.is_none() {
            // One row even over nothing: `count` is 0, the rest empty.
            groups.get(&[], specs.len());
        }
        self.plan.push(format!(
            "aggregate: {} group(s) in memory",
            groups.groups.len()
        ));
        Ok(group_answer(source, &specs, &by, every, groups))
    }

    /// The aggregate answered from the store's summaries, where one of
    /// their forms fits (no correlation, no late source, indexes in use);
    /// `None`: the records are scanned.
    fn answer_from_summaries(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        pred: Option<&Pred>,
        specs: &[AggSpec],
        by: &[usize],
        every: Option<i64>,
    ) -> Result<Option<Answer>> {
        let counts = specs.iter().all(|s| s.func == Func::Count);
        match (by, every) {
            ([], None) => {
                if let Some(picks) = summary_picks(source, pred, specs) {
                    return self.summarize(source, window, specs, &picks).map(Some);
                }
                self.summarize_hist(source, window, pred, specs)
            }
            // Counts alone, of every record, have their own path.
            ([], Some(step)) if counts && pred.is_none() => {
                self.count_every(source, window, specs, step).map(Some)
            }
            ([], Some(step)) => match per_bucket(source, pred, specs) {
                Some(how) => self.summarize_every(source, window, specs, &how, step),
                None => Ok(None),
            },
            ([by], None) => match pred {
                None if counts => match self.summarize_by_part(source, window, specs, *by)? {
                    None => self.count_by_values(source, window, specs, *by),
                    answer => Ok(answer),
                },
                None => match self.summarize_by_part(source, window, specs, *by)? {
                    None => self.summarize_by_key(source, window, specs, *by),
                    answer => Ok(answer),
                },
                Some(pred) if counts => self.count_by_part_within(source, window, specs, *by, pred),
                Some(_) => Ok(None),
            },
            _ => Ok(None),
        }
    }

    /// Scans the records the selection keeps and calls `visit` with each
    /// one's group key (its time bucket if `every`, then the `by` values:
    /// a named value's group), time and payload.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of one aggregate stage, as `aggregate` takes them"
    )]
    pub(crate) fn grouped(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        pred: Option<Pred>,
        near: Option<&Near>,
        by: &[usize],
        every: Option<i64>,
        visit: &mut GroupedVisit<'_>,
    ) -> Result<()> {
        let scan = self.plan_scan(source, pred, "aggregate");
        let wall_offset = self.catalog.wall_offset.unwrap_or(0);
        let mut key = Vec::with_capacity(by.len() + 1);
        self.scan(source, window, &scan, near, &mut |time, _, payload| {
            key.clear();
            if let Some(step) = every {
                // Buckets start on whole wall-clock multiples (12:00:01, not
                // some ns since boot) when the capture knows the wall clock.
                let step = step.unsigned_abs();
                let phase = (time.wrapping_add_signed(wall_offset)) % step;
                key.push(time.wrapping_sub(phase).cast_signed());
            }
            key.extend(by.iter().map(|c| {
                let column = &source.columns[*c];
                match (column.value(time, payload), &column.kind) {
                    (Some(v), Kind::Named(names)) => names.group_of(v),
                    (v, _) => v.unwrap_or(i64::MIN),
                }
            }));
            visit(&key, time, payload);
        })
    }

    /// `hist(x)` of an indexed `x`, with no condition or one that picks a
    /// part of a partitioned index: value bins inside one power-of-two
    /// bucket are counted from the chunk summaries, and only the values of
    /// bins that straddle a bucket's edge are read.
    fn summarize_hist(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        pred: Option<&Pred>,
        specs: &[AggSpec],
    ) -> Result<Option<Answer>> {
        let [spec] = specs else {
            return Ok(None);
        };
        let (Func::Hist, Some(c)) = (spec.func, spec.column) else {
            return Ok(None);
        };
        let Some((index, part)) = column_pick(source, pred, c) else {
            return Ok(None);
        };
        let column = &source.columns[c];
        let (counts, stats) =
            self.snapshot
                .bucket_counts(source.id, index, part, window.clone(), &hist_edges())?;
        let Some(counts) = counts else {
            return Ok(None);
        };
        self.add(stats);
        self.plan.push(format!(
            "aggregate: hist of `{}` from the store's chunk summaries of `{}`; only value bins across a bucket's edge are read",
            column.name, source.name
        ));
        let rows = Acc::with_hist(counts)
            .hist_rows()
            .into_iter()
            .map(|row| (Vec::new(), row))
            .collect();
        Ok(Some(keyed_answer(source, specs, &[], None, rows)))
    }

    /// Aggregates over a whole source answered by the store's summary
    /// operators (chunk summaries, exact percentile selection).
    fn summarize(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        specs: &[AggSpec],
        picks: &[Pick],
    ) -> Result<Answer> {
        let (row, _) = self.summary_row(source, window, None, specs, picks)?;
        let how = if picks.iter().any(|(_, part, _)| part.is_some()) {
            "of one part of a partitioned index (the condition picks the part)"
        } else {
            "(no record filter)"
        };
        self.plan.push(format!(
            "aggregate: from the store's chunk summaries of `{}` {how}",
            source.name
        ));
        Ok(Answer {
            columns: specs.iter().flat_map(AggSpec::headers).collect(),
            rows: vec![row],
            ..Answer::default()
        })
    }

    /// `specs` over the records that arrived in `window` (whose own time
    /// lies in a bucket, when one is given with the own times of the
    /// window's records), from the store's summary operators: the row's
    /// cells, and how many records the first pick counted.
    fn summary_row(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        bucket: Option<(&OwnTimes, &RangeInclusive<u64>)>,
        specs: &[AggSpec],
        picks: &[Pick],
    ) -> Result<(Vec<Cell>, u64)> {
        let mut row = Vec::new();
        let mut counted = None;
        for (spec, (index, part, range)) in specs.iter().zip(picks) {
            let (index, part) = (*index, *part);
            let int = |v: Option<i64>| v.map_or(Cell::Null, Cell::Int);
            let at = (source.id, window, bucket, index, part);
            // A percentile alone needs no pass for the aggregate: in a
            // series, that pass decoded each bucket's edge chunks once more.
            if let Func::Quantile(q) = spec.func {
                let value = self.quantile_of(at, q)?;
                counted.get_or_insert(u64::from(value.is_some()));
                row.push(int(value));
                continue;
            }
            let (agg, stats) = match bucket {
                Some((own, bucket)) => (self.snapshot).aggregate_bucket(
                    (index, part),
                    own,
                    bucket.clone(),
                    range.clone(),
                )?,
                None => (self.snapshot).aggregate_part(
                    source.id,
                    index,
                    part,
                    window.clone(),
                    range.clone(),
                )?,
            };
            self.add(stats);
            counted.get_or_insert(agg.count);
            match spec.func {
                Func::Count => row.push(Cell::Int(agg.count.cast_signed())),
                Func::Sum => row.push(Cell::Int(i64::try_from(agg.sum).unwrap_or(i64::MAX))),
                Func::Min => row.push(int(agg.min)),
                Func::Max => row.push(int(agg.max)),
                Func::Avg => row.push(agg.avg().map_or(Cell::Null, Cell::Float)),
                Func::Quantile(_) => unreachable!("answered above"),
                Func::Percentiles => {
                    for q in PERCENTILES {
                        row.push(int(self.quantile_of(at, q)?));
                    }
                    row.push(int(agg.max));
                }
                Func::Hist => unreachable!("hist is never summarized"),
            }
        }
        Ok((row, counted.unwrap_or(0)))
    }

    /// The exact `q`-quantile of one index (and part) over the records
    /// that arrived in `window` (whose own time lies in `bucket`, when one
    /// is given), from the store's summary operators.
    fn quantile_of(
        &mut self,
        (source, window, bucket, index, part): QuantileAt<'_>,
        q: f64,
    ) -> Result<Option<i64>> {
        let (value, stats) = match bucket {
            Some((own, bucket)) => {
                (self.snapshot).percentile_bucket((index, part), own, bucket.clone(), q)?
            }
            None => (self.snapshot).percentile_part(source, index, part, window.clone(), q)?,
        };
        self.add(stats);
        Ok(value)
    }

    /// Aggregates per time bucket from the store's summary operators, a
    /// bucket at a time in each thread, so that memory does not grow with
    /// the records:
    /// the buckets that hold records come from the chunk summaries'
    /// counts; in each, chunks whose records' own times all lie there
    /// answer from their summaries, chunks with none there are skipped,
    /// and percentiles read only the chunks holding their bin.
    fn summarize_every(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        specs: &[AggSpec],
        how: &PerBucket,
        step: i64,
    ) -> Result<Option<Answer>> {
        let offset = self.catalog.wall_offset.unwrap_or(0).cast_unsigned();
        let step = step.unsigned_abs();
        // Each bucket visits the summaries of its chunks, at a cost of its
        // own: past so many buckets of so few chunks one scan costs less.
        let span = self.snapshot.time_range()?.map_or(0, |stored| {
            let end = (*stored.end()).min(*window.end());
            end.saturating_sub((*stored.start()).max(*window.start()))
        });
        let buckets = span / step;
        if buckets >= MAX_BUCKETS as u64 {
            return Ok(None);
        }
        let own = self.snapshot.own_times(source.id, window.clone())?;
        // A scan holds every value a percentile needs: past so many, the
        // summaries answer however slowly, in bounded memory.
        let holds = specs.iter().any(AggSpec::keeps_values) && own.records() > SCAN_VALUES;
        if buckets > FEW_BUCKETS
            && own.chunks() < buckets.saturating_mul(CHUNKS_PER_BUCKET)
            && !holds
        {
            return Ok(None);
        }
        // The buckets the summaries' own times reach (an empty one gives no
        // row); where they cannot say, those the records are counted in.
        let buckets: Vec<u64> = if let Some(reached) = own.bucket_starts(step, offset, MAX_BUCKETS)
        {
            reached
        } else {
            let (counts, stats) =
                (self.snapshot).count_every(source.id, window.clone(), step, offset)?;
            self.add(stats);
            counts.into_keys().collect()
        };
        let rows = match how {
            PerBucket::Aggregates(picks) => {
                let at = (source, window, &own, step);
                self.bucket_rows(at, &buckets, specs, picks)?
            }
            PerBucket::Hist(pick) => {
                let Some(rows) = self.hist_per_bucket(*pick, &own, &buckets, step)? else {
                    return Ok(None);
                };
                rows
            }
        };
        self.plan.push(format!(
            "aggregate: per bucket from the store's chunk summaries of `{}`, one bucket at a time in each of two threads; chunks across a bucket's edge are read",
            source.name
        ));
        Ok(Some(keyed_answer(
            source,
            specs,
            &[],
            Some(step.cast_signed()),
            rows,
        )))
    }

    /// The rows of aggregates per bucket, in bucket order. Buckets are
    /// independent and most of each is one thread's work (its few chunks'
    /// summaries, a few runs of values, its edge chunks): two threads take
    /// every other bucket.
    fn bucket_rows(
        &mut self,
        (source, window, own, step): (&SourceColumns, &RangeInclusive<u64>, &OwnTimes, u64),
        buckets: &[u64],
        specs: &[AggSpec],
        picks: &[Pick],
    ) -> Result<KeyedRows> {
        let answer = |engine: &mut Engine<'_>, starts: &mut dyn Iterator<Item = &u64>| {
            let mut rows = Vec::new();
            for &start in starts {
                let bucket = start..=start.saturating_add(step - 1);
                let (cells, counted) =
                    engine.summary_row(source, window, Some((own, &bucket)), specs, picks)?;
                // A condition that picks a part may leave a bucket empty.
                if counted > 0 {
                    rows.push((vec![start.cast_signed()], cells));
                }
            }
            Ok::<_, Error>(rows)
        };
        let mut other = self.helper();
        let (mine, theirs) = std::thread::scope(|scope| {
            let theirs = scope.spawn(|| answer(&mut other, &mut buckets.iter().skip(1).step_by(2)));
            let mine = answer(self, &mut buckets.iter().step_by(2));
            (mine, theirs.join())
        });
        let theirs = theirs.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let (mine, theirs) = (mine?, theirs?);
        self.add(other.stats);
        let mut rows: Vec<_> = mine.into_iter().chain(theirs).collect();
        rows.sort_by_key(|(key, _)| key[0]);
        Ok(rows)
    }

    /// `hist` rows per bucket; `None` where a bin across a bucket's edge is
    /// too wide to gather (the caller then scans).
    fn hist_per_bucket(
        &mut self,
        pick: (weft_store::IndexId, Option<u32>),
        own: &OwnTimes,
        buckets: &[u64],
        step: u64,
    ) -> Result<Option<KeyedRows>> {
        let mut rows = Vec::new();
        for &start in buckets {
            let bucket = start..=start.saturating_add(step - 1);
            let (counts, stats) =
                (self.snapshot).bucket_counts_in_bucket(pick, own, bucket, &hist_edges())?;
            self.add(stats);
            let Some(counts) = counts else {
                return Ok(None);
            };
            // A bucket the own times reach but no record lies in.
            if counts.iter().all(|n| *n == 0) {
                continue;
            }
            let key = vec![start.cast_signed()];
            let hist = Acc::with_hist(counts).hist_rows();
            rows.extend(hist.into_iter().map(|row| (key.clone(), row)));
        }
        Ok(Some(rows))
    }

    /// `count by F` where the condition is a value range of one column
    /// alone (`syscalls where dur > p99.99 | count by name`, its threshold
    /// resolved) and a partitioned index over that column is partitioned
    /// by `F`: each group is a part, counted from the summaries' value
    /// bins, reading only the values of the bins across the range's
    /// bounds. `None` where that does not hold: the caller scans.
    fn count_by_part_within(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        specs: &[AggSpec],
        by: usize,
        pred: &Pred,
    ) -> Result<Option<Answer>> {
        let Read::Field(by_field) = &source.columns[by].read else {
            return Ok(None);
        };
        let [bound] = &pred.clone().conjuncts()[..] else {
            return Ok(None);
        };
        let mut columns = Vec::new();
        bound.columns(&mut columns);
        let &[column] = &columns[..] else {
            return Ok(None);
        };
        let Some((lo, hi)) = bound.exact_range_of(column) else {
            return Ok(None);
        };
        let Some(&(index, _, count)) =
            (source.columns[column].partitioned.iter()).find(|(_, field, _)| field == by_field)
        else {
            return Ok(None);
        };
        let (counts, stats) =
            (self.snapshot).count_parts_in(source.id, index, window.clone(), &(lo..=hi))?;
        let Some(counts) = counts else {
            return Ok(None);
        };
        if !parts_are_groups(source, by, count, counts.iter().map(|(part, _)| *part)) {
            return Ok(None);
        }
        self.add(stats);
        let rows = counts
            .into_iter()
            .map(|(part, n)| {
                let cells = vec![Cell::Int(n.cast_signed()); specs.len()];
                (vec![i64::from(part)], cells)
            })
            .collect();
        self.plan.push(format!(
            "aggregate: counted from the store's chunk summaries of `{}`, one part of a partitioned index per `{}`; only values in bins across the range's bounds are read",
            source.name, source.columns[by].name
        ));
        Ok(Some(keyed_answer(source, specs, &[by], None, rows)))
    }

    /// `count by F` where `F`'s field has an index of its own (`tid`, and
    /// `comm`, which shows it by name): each value's count from the values
    /// log, reading only the records of the window's edges; values that
    /// share a name are one group. `None` where there is no such index, or
    /// too many distinct values to hold: the caller scans.
    fn count_by_values(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        specs: &[AggSpec],
        by: usize,
    ) -> Result<Option<Answer>> {
        let column = &source.columns[by];
        let Some((counted, index, map)) = key_index(source, column) else {
            return Ok(None);
        };
        let (counts, stats) = (self.snapshot).value_counts(source.id, index, window.clone())?;
        let Some(counts) = counts else {
            return Ok(None);
        };
        self.add(stats);
        let mut groups = Groups::<Acc>::default();
        for (value, n) in counts {
            // A value without one of the column's: the records decide.
            let Some(key) = group_of(column, map, value) else {
                return Ok(None);
            };
            for acc in groups.get(&[key], specs.len()) {
                acc.add_count(n);
            }
        }
        let through = map.map_or(String::new(), |_| format!(" through `{}`", counted.name));
        self.plan.push(format!(
            "aggregate: counted per `{}`{through} from the values log of `{}`; only the window's edges are read",
            column.name, source.name
        ));
        Ok(Some(group_answer(source, specs, &[by], None, groups)))
    }

    /// `count every step` from the store's per-bucket counts: chunks whose
    /// records lie in one bucket count from their summaries.
    fn count_every(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        specs: &[AggSpec],
        step: i64,
    ) -> Result<Answer> {
        let offset = self.catalog.wall_offset.unwrap_or(0).cast_unsigned();
        let (counts, stats) =
            self.snapshot
                .count_every(source.id, window.clone(), step.unsigned_abs(), offset)?;
        self.add(stats);
        let mut groups = Groups::default();
        for (start, n) in counts {
            for acc in groups.get(&[start.cast_signed()], specs.len()) {
                *acc = Acc::counted(n);
            }
        }
        self.plan.push(format!(
            "aggregate: counts per bucket from the chunk summaries of `{}`; chunks across a bucket's edge are read",
            source.name
        ));
        Ok(group_answer(source, specs, &[], Some(step), groups))
    }

    /// Aggregates of one indexed column grouped by `by` when `by`'s field,
    /// or the one it follows from (a thread's id, for its process and its
    /// name), has an index of its own: each group from the summaries of
    /// the chunks that hold one key alone, reading only the chunks that
    /// mix keys. `None` where that does not hold: the caller scans.
    fn summarize_by_key(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        specs: &[AggSpec],
        by: usize,
    ) -> Result<Option<Answer>> {
        let column = &source.columns[by];
        let (Some(index), Some((counted, key, map))) =
            (one_index(source, specs), key_index(source, column))
        else {
            return Ok(None);
        };
        // Named in the plan by the indexed field: `comm` is a thread's id
        // shown by name.
        let Read::Field(field) = &counted.read else {
            return Ok(None);
        };
        let group = |value| group_of(column, map, value);
        let (answers, stats) = self.snapshot.aggregate_by_key(
            (source.id, index, key),
            &group,
            window.clone(),
            &quantiles(specs),
        )?;
        let Some(answers) = answers else {
            return Ok(None);
        };
        self.add(stats);
        let rows = answers
            .into_iter()
            .map(|a| (vec![a.key], cells(specs, &a.aggregate, &a.quantiles)))
            .collect();
        self.plan.push(format!(
            "aggregate: per `{}` from the store's chunk summaries of `{}`, a chunk whose records are of one `{}` counted for it; chunks that mix them are read unless the values log keeps their values apart per `{}`",
            column.name, source.name, field.name, field.name
        ));
        Ok(Some(keyed_answer(source, specs, &[by], None, rows)))
    }

    /// Aggregates grouped by `by` when it is the partition field of one
    /// partitioned index over every aggregated column: each group is a
    /// part, answered by the store from its summaries (reading only chunks
    /// that hold a quantile's bin). `None` when that does not hold: the
    /// caller scans.
    fn summarize_by_part(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        specs: &[AggSpec],
        by: usize,
    ) -> Result<Option<Answer>> {
        let Some((index, parts)) = part_index(source, specs, by) else {
            return Ok(None);
        };
        let qs = quantiles(specs);
        let (answers, stats) =
            self.snapshot
                .aggregate_parts(source.id, index, window.clone(), &qs)?;
        // Values past the partition's count share one part, and names
        // that stand for several values make one group of several parts:
        // neither is a group of its own here.
        if !parts_are_groups(source, by, parts, answers.iter().map(|a| a.part)) {
            return Ok(None);
        }
        self.add(stats);
        let rows = answers
            .into_iter()
            .map(|answer| {
                let cells = cells(specs, &answer.aggregate, &answer.quantiles);
                (vec![i64::from(answer.part)], cells)
            })
            .collect();
        self.plan.push(format!(
            "aggregate: from the store's chunk summaries of `{}`, one part of a partitioned index per `{}`",
            source.name, source.columns[by].name
        ));
        Ok(Some(keyed_answer(source, specs, &[by], None, rows)))
    }
}

/// A group's cells (a part's, a key's), as many as the specs' headers,
/// from its aggregate and its quantiles in the order [`quantiles`] asks.
fn cells(specs: &[AggSpec], agg: &weft_store::Aggregate, quantiles: &[Option<i64>]) -> Vec<Cell> {
    let int = |v: Option<i64>| v.map_or(Cell::Null, Cell::Int);
    let mut quantiles = quantiles.iter().copied();
    let mut cells = Vec::new();
    for spec in specs {
        match spec.func {
            Func::Count => cells.push(Cell::Int(agg.count.cast_signed())),
            Func::Sum => cells.push(Cell::Int(
                i64::try_from(agg.sum).unwrap_or(if agg.sum < 0 { i64::MIN } else { i64::MAX }),
            )),
            Func::Min => cells.push(int(agg.min)),
            Func::Max => cells.push(int(agg.max)),
            Func::Avg => cells.push(agg.avg().map_or(Cell::Null, Cell::Float)),
            Func::Quantile(_) => cells.push(int(quantiles.next().flatten())),
            Func::Percentiles => {
                cells.extend(PERCENTILES.iter().map(|_| int(quantiles.next().flatten())));
                cells.push(int(agg.max));
            }
            Func::Hist => unreachable!("hist is never summarized"),
        }
    }
    cells
}

/// The quantiles `specs` ask, in order.
fn quantiles(specs: &[AggSpec]) -> Vec<f64> {
    let mut qs = Vec::new();
    for spec in specs {
        match spec.func {
            Func::Quantile(q) => qs.push(q),
            Func::Percentiles => qs.extend(PERCENTILES),
            _ => {}
        }
    }
    qs
}

/// What keys a grouping by a column: the column whose index holds the
/// keys, that index, and how its values map to the grouped column's.
type KeyIndex<'a> = (
    &'a Column,
    weft_store::IndexId,
    Option<&'a HashMap<i64, i64>>,
);

/// The column whose index keys a grouping by `column`, that index, and how
/// its values map to `column`'s: `column` itself when it has an index, or
/// the indexed column it follows from (a thread's process from its id).
fn key_index<'a>(source: &'a SourceColumns, column: &'a Column) -> Option<KeyIndex<'a>> {
    let (counted, map) = match &column.derived {
        Some(derived) => (source.column(&derived.from)?.1, Some(&*derived.map)),
        None => (column, None),
    };
    match (&counted.read, counted.index) {
        (Read::Field(_), Some(index)) => Some((counted, index, map)),
        _ => None,
    }
}

/// The group of `column` that a value of its key's index stands for
/// ([`key_index`]): mapped through `map` (`None` where it has no value
/// there), then by name where `column` shows names.
fn group_of(column: &Column, map: Option<&HashMap<i64, i64>>, value: i64) -> Option<i64> {
    let value = match map {
        Some(map) => *map.get(&value)?,
        None => value,
    };
    Some(match &column.kind {
        Kind::Named(names) => names.group_of(value),
        _ => value,
    })
}

/// The one index every aggregate of `specs` over a column reads (counts
/// read none), when there are such aggregates, all over one indexed
/// field, and no `hist`.
fn one_index(source: &SourceColumns, specs: &[AggSpec]) -> Option<weft_store::IndexId> {
    let mut chosen = None;
    for spec in specs {
        let index = match (spec.func, spec.column) {
            (Func::Hist, _) => return None,
            (Func::Count, _) => continue,
            (_, Some(c)) => match &source.columns[c] {
                Column {
                    read: Read::Field(_),
                    index: Some(index),
                    ..
                } => *index,
                _ => return None,
            },
            (_, None) => return None,
        };
        if chosen.is_some_and(|c| c != index) {
            return None;
        }
        chosen = Some(index);
    }
    chosen
}
