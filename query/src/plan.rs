//! Planning: a query's head resolved into a source, a window, anchors and
//! a condition (percentile thresholds replaced by their values), and the
//! scan that fetches its records: which index narrows it, and what is
//! tested on each record.

use std::ops::RangeInclusive;

use weft_store::IndexId;

use crate::{
    aggregate::{quantile_name, select},
    answer::duration,
    ast::{Func, Op, Query, Stage},
    bind::{Pred, bind, column},
    catalog::SourceColumns,
    engine::{Engine, Scan, Selection},
    error::Result,
    picks::part_for,
    shape::show,
};

impl<'a> Engine<'a> {
    /// Resolves a query's source, window, correlation and condition (with
    /// `extreme`, also "at p100 (p0) of x" for a lone `max(x)` (`min(x)`)
    /// stage: summaries find the value, an indexed scan the record).
    pub(crate) fn select(&mut self, q: &Query, extreme: bool) -> Result<Selection<'a>> {
        let source = self.source(&q.source)?;
        let window = self.window(q.window.as_ref(), &q.source)?;
        if let Some(late) = source.late {
            self.plan.push(format!(
                "`{}`: records arrive up to {} after their own time, which selects them",
                source.name,
                duration(late as f64)
            ));
        }
        let near = q
            .correlate
            .as_ref()
            .map(|c| self.near(source, c))
            .transpose()?;
        let mut pred = q
            .filter
            .as_ref()
            .map(|cond| bind(source, cond))
            .transpose()?;
        if let (true, [Stage::Aggregate { aggs, .. }]) = (extreme, &q.stages[..])
            && let Some(field) = &aggs[0].field
        {
            let max = aggs[0].func == Func::Max;
            let at = Pred::Threshold {
                column: column(source, field)?.0,
                op: if max { Op::Ge } else { Op::Le },
                q: if max { 1.0 } else { 0.0 },
                span: aggs[0].span,
            };
            pred = Some(match pred {
                Some(p) => Pred::And(vec![p, at]),
                None => at,
            });
        }
        let pred = match pred {
            Some(p) => self.resolve(source, p, &window)?,
            None => None,
        };
        Ok(Selection {
            source,
            window,
            near,
            pred,
        })
    }

    /// Replaces percentile thresholds with their values, computed over
    /// the records the other top-level conditions select in the window.
    pub(crate) fn resolve(
        &mut self,
        source: &SourceColumns,
        pred: Pred,
        window: &RangeInclusive<u64>,
    ) -> Result<Option<Pred>> {
        let (thresholds, mut rest): (Vec<Pred>, Vec<Pred>) = pred
            .conjuncts()
            .into_iter()
            .partition(|p| matches!(p, Pred::Threshold { .. }));
        let others = (!rest.is_empty()).then(|| Pred::And(rest.clone()));
        for threshold in thresholds {
            let Pred::Threshold { column, op, q, .. } = threshold else {
                unreachable!("partitioned above")
            };
            let value = self.quantile(source, column, q, window, others.clone())?;
            let name = &source.columns[column].name;
            if let Some(value) = value {
                self.plan.push(format!(
                    "threshold: {}({name}) = {} over the window{}",
                    quantile_name(q),
                    show(&source.columns[column].kind, value),
                    if others.is_some() {
                        " where the rest holds"
                    } else {
                        ""
                    }
                ));
                let resolved = Pred::Compare { column, op, value };
                self.thresholds.push(resolved.clone());
                rest.push(resolved);
            } else {
                self.plan.push(format!(
                    "threshold: {}({name}) has no values in the window: nothing matches",
                    quantile_name(q)
                ));
                // An empty `or` never holds.
                rest.push(Pred::Or(Vec::new()));
            }
        }
        Ok(Some(Pred::And(rest)))
    }

    /// The exact `q`-quantile of `column` over the records `pred` selects.
    fn quantile(
        &mut self,
        source: &SourceColumns,
        column: usize,
        q: f64,
        window: &RangeInclusive<u64>,
        pred: Option<Pred>,
    ) -> Result<Option<i64>> {
        let col = &source.columns[column];
        let summarized = match &pred {
            _ if source.late.is_some() => None,
            None => col.index.map(|index| (index, None)),
            Some(pred) => part_for(source, column, pred).map(|(index, part)| (index, Some(part))),
        };
        if let Some((index, part)) = summarized {
            let (value, stats) =
                self.snapshot
                    .percentile_part(source.id, index, part, window.clone(), q)?;
            self.add(stats);
            return Ok(value);
        }
        let scan = self.plan_scan(source, pred, "threshold scan");
        let mut values = Vec::new();
        self.scan(source, window, &scan, None, &mut |time, _, payload| {
            if let Some(v) = col.value(time, payload) {
                values.push(v);
            }
        })?;
        Ok(select(&mut values, q))
    }

    /// Picks the index that narrows the scan most, by rule: a condition on
    /// a percentile threshold (rare by construction), then equality or set
    /// membership, then any range.
    pub(crate) fn plan_scan(
        &mut self,
        source: &SourceColumns,
        pred: Option<Pred>,
        what: &str,
    ) -> Scan {
        let conjuncts = pred.clone().map(Pred::conjuncts).unwrap_or_default();
        if let Some(scan) = self.plan_part_scan(source, &conjuncts, what) {
            return Scan {
                index: Some(scan),
                pred,
            };
        }
        let mut best: Option<(u8, IndexId, usize, (i64, i64))> = None;
        for p in &conjuncts {
            let mut columns = Vec::new();
            p.columns(&mut columns);
            let [column] = columns[..] else { continue };
            let (Some(index), Some(range)) = (source.columns[column].index, p.range_of(column))
            else {
                continue;
            };
            let score = match p {
                _ if self.thresholds.contains(p) => 0,
                Pred::In { .. } | Pred::Compare { op: Op::Eq, .. } => 1,
                _ => 2,
            };
            if best.is_none_or(|b| score < b.0) {
                best = Some((score, index, column, range));
            }
        }
        let index = best.map(|(_, index, column, (lo, hi))| {
            self.plan.push(format!(
                "{what}: indexed scan of `{}` on `{}` for values {}..={}",
                source.name,
                source.columns[column].name,
                show(&source.columns[column].kind, lo),
                show(&source.columns[column].kind, hi)
            ));
            (index, None, lo..=hi)
        });
        if index.is_none() {
            self.plan.push(format!(
                "{what}: full scan of `{}` (no index applies)",
                source.name
            ));
        }
        if pred.is_some() {
            self.plan.push(format!(
                "{what}: then each record is tested against the condition"
            ));
        }
        Scan { index, pred }
    }

    /// `sort x desc | limit k` of an indexed `x` without a condition: the
    /// `k`-th largest value, found from the summaries' counts and the
    /// values of its bin, bounds the `k` largest from below, so only chunks
    /// whose summaries reach it are read (the slowest syscall of a window,
    /// for the UI's timeline).
    pub(crate) fn plan_top_scan(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        column: usize,
        k: usize,
    ) -> Result<Option<Scan>> {
        let Some(index) = source.columns[column].index else {
            return Ok(None);
        };
        let (bound, stats) = self
            .snapshot
            .top_bound(source.id, index, window.clone(), k as u64)?;
        self.add(stats);
        let Some(bound) = bound else {
            return Ok(None);
        };
        let field = &source.columns[column];
        self.plan.push(format!(
            "records: the {k} largest `{}` are {} or more (the summaries and the values log say); indexed scan of the chunks that hold them",
            field.name,
            show(&field.kind, bound)
        ));
        Ok(Some(Scan {
            index: Some((index, None, bound..=i64::MAX)),
            pred: None,
        }))
    }

    /// A scan of one part of a partitioned index: when one condition picks
    /// the part (`name = "pread64"`) and another bounds the indexed field
    /// (`dur > 1ms`), chunks are skipped by the summaries of that part.
    fn plan_part_scan(
        &mut self,
        source: &SourceColumns,
        conjuncts: &[Pred],
        what: &str,
    ) -> Option<(IndexId, Option<u32>, RangeInclusive<i64>)> {
        for (i, picker) in conjuncts.iter().enumerate() {
            for (j, bound) in conjuncts.iter().enumerate() {
                let mut columns = Vec::new();
                bound.columns(&mut columns);
                let (&[column], true) = (&columns[..], i != j) else {
                    continue;
                };
                let (Some((index, part)), Some((lo, hi))) =
                    (part_for(source, column, picker), bound.range_of(column))
                else {
                    continue;
                };
                let col = &source.columns[column];
                self.plan.push(format!(
                    "{what}: indexed scan of `{}` on `{}` for values {}..={}, in one part of the index",
                    source.name,
                    col.name,
                    show(&col.kind, lo),
                    show(&col.kind, hi)
                ));
                self.plan.push(format!(
                    "{what}: then each record is tested against the condition"
                ));
                return Some((index, Some(part), lo..=hi));
            }
        }
        None
    }
}
