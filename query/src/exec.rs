//! Runs a parsed query on a store snapshot. Aggregates without filters are
//! answered from chunk summaries; filters use the store's indexed scans
//! where a condition narrows an indexed field, and the rest is evaluated on
//! the records the scan returns. Every step is written to the answer's plan.

use std::{collections::HashMap, ops::RangeInclusive};

use weft_store::{IndexId, QueryStats, RecordView, Snapshot};

use crate::{
    aggregate::{Acc, AggSpec, Groups, PERCENTILES, hist_edges, quantile_name, select},
    answer::{Answer, Cell, Header, duration},
    ast::{Agg, Correlate, Func, Name, Nearness, Op, Query, Stage, Time, Window},
    bind::{Pred, bind, column, listed_column},
    catalog::{Catalog, Kind, SourceColumns},
    error::{Error, Result},
    picks::{Pick, column_pick, part_for, part_index, summary_picks},
    shape::{Hit, group_answer, keyed_answer, listing, record_cell, reshape, show},
};

/// How far a record's arrival may trail its producer's timestamp: scans
/// for records by their own time read this much further in arrival time.
const ARRIVAL_SLACK: u64 = 2_000_000_000;

/// Runs `query` on `snapshot`, naming things through `catalog`.
pub fn run(snapshot: &Snapshot, catalog: &Catalog, query: &Query) -> Result<Answer> {
    let mut engine = Engine::new(snapshot, catalog)?;
    let mut answer = engine.query(query)?;
    answer.plan = engine.plan;
    answer.stats = engine.stats;
    Ok(answer)
}

/// Calls `visit` with each record `query` selects, as the cells of the
/// answer's columns, without holding them: for exports of any size. The
/// query may pick `fields` but not aggregate, sort or limit. Returns the
/// columns, plan and stats, with no rows.
pub fn stream(
    snapshot: &Snapshot,
    catalog: &Catalog,
    query: &Query,
    visit: &mut dyn FnMut(&[Header], Vec<Cell>),
) -> Result<Answer> {
    let mut engine = Engine::new(snapshot, catalog)?;
    let Selection {
        source,
        window,
        near,
        pred,
    } = engine.select(query, false)?;
    let mut columns = visible(source);
    for stage in &query.stages {
        let Stage::Fields(names) = stage else {
            return Err(Error::spanned(
                query.source.span,
                format!(
                    "`{}` cannot be streamed: only `fields` may follow",
                    stage_word(stage)
                ),
            ));
        };
        columns = fields(source, names)?;
    }
    let scan = engine.plan_scan(source, pred, "stream");
    let mut answer = listing(source, &[], &columns);
    let headers = std::mem::take(&mut answer.columns);
    let mut each = |time: u64, _arrival: u64, payload: &[u8]| {
        let cells = columns
            .iter()
            .map(|c| record_cell(&source.columns[*c], time, payload))
            .collect();
        visit(&headers, cells);
    };
    engine.scan(source, &window, &scan, near.as_ref(), &mut each)?;
    answer.columns = headers;
    answer.plan = engine.plan;
    answer.stats = engine.stats;
    Ok(answer)
}

struct Engine<'a> {
    snapshot: &'a Snapshot,
    catalog: &'a Catalog,
    /// Arrival time of the capture's first record.
    first: u64,
    /// "now": arrival time of the capture's last record.
    now: u64,
    plan: Vec<String>,
    stats: QueryStats,
    /// Conditions made from percentile thresholds: the most selective.
    thresholds: Vec<Pred>,
}

/// What a query's head picks: its source, window, anchors and condition.
struct Selection<'a> {
    source: &'a SourceColumns,
    window: RangeInclusive<u64>,
    near: Option<Near>,
    pred: Option<Pred>,
}

/// The source's columns that record listings show.
fn visible(source: &SourceColumns) -> Vec<usize> {
    (0..source.columns.len())
        .filter(|c| !source.columns[*c].hidden)
        .collect()
}

/// The columns `fields a, b` names.
fn fields(source: &SourceColumns, names: &[Name]) -> Result<Vec<usize>> {
    names
        .iter()
        .map(|n| listed_column(source, n).map(|(c, _)| c))
        .collect()
}

/// How records are fetched: which index narrows the scan, and what is then
/// tested on each record.
struct Scan {
    /// The index, the part of a partitioned one, and the value range.
    index: Option<(IndexId, Option<u32>, RangeInclusive<i64>)>,
    pred: Option<Pred>,
}

/// Time intervals around anchor records, per value of the `same` fields.
struct Near {
    /// Merged intervals of all anchors, for scanning.
    all: Vec<(u64, u64)>,
    /// Merged intervals per `same` key.
    by_key: HashMap<Vec<i64>, Vec<(u64, u64)>>,
    /// Columns of the scanned source that make the key.
    same: Vec<usize>,
    /// Intervals are in arrival time (`around`, like windows, so that the
    /// store's summaries can answer them), else in the records' own time
    /// (`during`, which needs the precision of the producer's clock).
    by_arrival: bool,
}

impl Near {
    fn holds(&self, source: &SourceColumns, time: u64, arrival: u64, payload: &[u8]) -> bool {
        let key: Vec<i64> = self
            .same
            .iter()
            .map(|c| source.columns[*c].value(time, payload).unwrap_or(i64::MIN))
            .collect();
        // A late source's records are placed by their own time.
        let at = if self.by_arrival && source.late.is_none() {
            arrival
        } else {
            time
        };
        self.by_key.get(&key).is_some_and(|spans| within(spans, at))
    }
}

/// Whether `t` lies in one of the sorted, disjoint `spans`.
fn within(spans: &[(u64, u64)], t: u64) -> bool {
    let i = spans.partition_point(|(lo, _)| *lo <= t);
    i > 0 && spans[i - 1].1 >= t
}

/// Sorts and merges overlapping intervals.
fn merge(mut spans: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (lo, hi) in spans {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

impl<'a> Engine<'a> {
    fn new(snapshot: &'a Snapshot, catalog: &'a Catalog) -> Result<Self> {
        let range = snapshot.time_range()?;
        Ok(Self {
            snapshot,
            catalog,
            first: range.as_ref().map_or(0, |r| *r.start()),
            now: catalog.now.unwrap_or_else(|| range.map_or(0, |r| *r.end())),
            plan: Vec::new(),
            stats: QueryStats::default(),
            thresholds: Vec::new(),
        })
    }

    /// Resolves a query's source, window, correlation and condition (with
    /// `extreme`, also "at p100 (p0) of x" for a lone `max(x)` (`min(x)`)
    /// stage: summaries find the value, an indexed scan the record).
    fn select(&mut self, q: &Query, extreme: bool) -> Result<Selection<'a>> {
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

    fn query(&mut self, q: &Query) -> Result<Answer> {
        let Selection {
            source,
            window,
            near,
            pred,
        } = self.select(q, false)?;
        let split = q
            .stages
            .iter()
            .position(|s| matches!(s, Stage::Aggregate { .. } | Stage::Top { .. }));
        let Some(at) = split else {
            let (hits, columns) = self.records(source, &window, pred, near.as_ref(), &q.stages)?;
            return Ok(listing(source, &hits, &columns));
        };
        if let Some(early) = q.stages[..at].first() {
            return Err(Error::spanned(
                q.source.span,
                format!("`{}` must come after the aggregate", stage_word(early)),
            ));
        }
        let (aggs, by, every, mut after) = match &q.stages[at] {
            Stage::Aggregate { aggs, by, every } => (aggs.clone(), by.clone(), *every, Vec::new()),
            Stage::Top { n, agg, by } => {
                let key = Self::specs(source, std::slice::from_ref(agg))?[0].headers()[0]
                    .name
                    .clone();
                let sort = Stage::Sort {
                    key: Name {
                        text: key,
                        span: agg.span,
                    },
                    descending: true,
                };
                (
                    vec![agg.clone()],
                    by.clone(),
                    None,
                    vec![sort, Stage::Limit(*n)],
                )
            }
            _ => unreachable!("found as an aggregate above"),
        };
        after.extend(q.stages[at + 1..].iter().cloned());
        let mut answer = self.aggregate(source, &window, pred, near.as_ref(), &aggs, &by, every)?;
        for stage in &after {
            reshape(&mut answer, stage)?;
        }
        Ok(answer)
    }

    fn source(&self, name: &Name) -> Result<&'a SourceColumns> {
        self.catalog.source(&name.text).ok_or_else(|| {
            let names: Vec<&str> = self
                .catalog
                .sources
                .iter()
                .map(|s| s.name.as_str())
                .collect();
            Error::spanned(
                name.span,
                format!(
                    "no source `{}` in this capture (sources: {})",
                    name.text,
                    names.join(", ")
                ),
            )
        })
    }

    fn add(&mut self, stats: QueryStats) {
        let QueryStats {
            chunks_summarized,
            chunks_scanned,
            chunks_skipped,
            chunks_expired,
            chunks_damaged,
            chunks_read_for_bins,
            chunks_cached_for_bins,
            chunks_valued_for_bins,
            chunks_in_groups,
        } = stats;
        self.stats.chunks_summarized += chunks_summarized;
        self.stats.chunks_scanned += chunks_scanned;
        self.stats.chunks_skipped += chunks_skipped;
        self.stats.chunks_expired += chunks_expired;
        self.stats.chunks_damaged += chunks_damaged;
        self.stats.chunks_read_for_bins += chunks_read_for_bins;
        self.stats.chunks_cached_for_bins += chunks_cached_for_bins;
        self.stats.chunks_valued_for_bins += chunks_valued_for_bins;
        self.stats.chunks_in_groups += chunks_in_groups;
    }

    /// The window in arrival time.
    fn window(&mut self, window: Option<&Window>, at: &Name) -> Result<RangeInclusive<u64>> {
        let shift = |base: u64, by: i64| base.saturating_add_signed(by);
        let range = match window {
            None => 0..=u64::MAX,
            Some(Window::Last(ns)) => shift(self.now, -ns)..=self.now,
            Some(Window::Range(from, to)) => {
                let (from, to) = (self.time(from)?, self.time(to)?);
                if from > to {
                    return Err(Error::spanned(at.span, "the window ends before it starts"));
                }
                from..=to
            }
        };
        if window.is_some() {
            let rel = |t: u64| duration(t as f64 - self.first as f64);
            self.plan.push(format!(
                "window: start+{} .. start+{} of the capture",
                rel(*range.start()),
                rel(*range.end())
            ));
        }
        Ok(range)
    }

    fn time(&self, time: &Time) -> Result<u64> {
        let shift = |base: u64, by: i64| base.saturating_add_signed(by);
        Ok(match time {
            Time::Now(by) => shift(self.now, *by),
            Time::Start(by) => shift(self.first, *by),
            Time::Monotonic(t) => *t,
            Time::Wall(wall, span) => {
                let offset = self.catalog.wall_offset.ok_or_else(|| {
                    Error::spanned(*span, "this capture has no wall-clock reference; use `now-…`, `start+…` or monotonic ns")
                })?;
                u64::try_from(wall - offset).unwrap_or(0)
            }
        })
    }

    /// Replaces percentile thresholds with their values, computed over
    /// the records the other top-level conditions select in the window.
    fn resolve(
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
    fn plan_scan(&mut self, source: &SourceColumns, pred: Option<Pred>, what: &str) -> Scan {
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
    /// summaries' counts bound the `k` largest values from below, so only
    /// chunks whose summaries reach that bound are read (the slowest
    /// syscall of a window, for the UI's timeline).
    fn plan_top_scan(
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
            "records: the summaries put the {k} largest `{}` at {} or more; indexed scan of the chunks that hold them",
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

    /// Visits each record of `source` in `window` that passes the scan's
    /// condition and, if given, lies near an anchor.
    fn scan(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        scan: &Scan,
        near: Option<&Near>,
        visit: &mut dyn FnMut(u64, u64, &[u8]),
    ) -> Result<()> {
        let late = source.late;
        let mut each = |record: RecordView<'_>| {
            let time = record.producer_ts.unwrap_or(record.ts);
            if late.is_some() && !window.contains(&time) {
                return;
            }
            let payload = record.payload;
            let passes = scan
                .pred
                .as_ref()
                .is_none_or(|p| p.matches(&source.columns, time, payload))
                && near.is_none_or(|n| n.holds(source, time, record.ts, payload));
            if passes {
                visit(time, record.ts, payload);
            }
        };
        // A late source's records of the window arrive up to `late` after it.
        let late = late.unwrap_or(0);
        let reach = window.end().saturating_add(late);
        // Near anchors, only the spans around them are read.
        let spans: Vec<RangeInclusive<u64>> = match near {
            None => vec![*window.start()..=reach],
            Some(near) => near
                .all
                .iter()
                .map(|(lo, hi)| {
                    let slack = if near.by_arrival { 0 } else { ARRIVAL_SLACK };
                    (*lo).max(*window.start())..=hi.saturating_add(slack.max(late)).min(reach)
                })
                .filter(|r| !r.is_empty())
                .collect(),
        };
        for span in spans {
            let stats = match &scan.index {
                Some((index, part, values)) => self.snapshot.indexed_scan_part_each(
                    source.id,
                    *index,
                    *part,
                    span,
                    values.clone(),
                    &mut each,
                )?,
                None => self.snapshot.raw_scan_each(source.id, span, &mut each)?,
            };
            self.add(stats);
        }
        Ok(())
    }

    /// The records a query without aggregates selects, after its `sort`
    /// and `limit`, and the columns `fields` keeps.
    fn records(
        &mut self,
        source: &SourceColumns,
        window: &RangeInclusive<u64>,
        pred: Option<Pred>,
        near: Option<&Near>,
        stages: &[Stage],
    ) -> Result<(Vec<Hit>, Vec<usize>)> {
        let mut columns = visible(source);
        let mut sort: Option<(usize, bool)> = None;
        let mut limit: Option<usize> = None;
        for stage in stages {
            match stage {
                Stage::Sort { key, descending } => {
                    sort = Some((column(source, key)?.0, *descending));
                    limit = None;
                }
                Stage::Limit(n) => limit = Some(limit.map_or(*n, |l| l.min(*n))),
                Stage::Fields(names) => columns = fields(source, names)?,
                Stage::Aggregate { .. } | Stage::Top { .. } => {
                    unreachable!("split off by the caller")
                }
            }
        }
        // A late source's window is in its own time, which the summaries'
        // arrival-time counts do not bound.
        let top = match (sort, limit, &pred, near, source.late) {
            (Some((column, true)), Some(k), None, None, None) => {
                self.plan_top_scan(source, window, column, k)?
            }
            _ => None,
        };
        let scan = match top {
            Some(scan) => scan,
            None => self.plan_scan(source, pred, "records"),
        };
        let key = |hit: &Hit, (c, desc): (usize, bool)| {
            let v = source.columns[c]
                .value(hit.time, &hit.payload)
                .unwrap_or(i64::MIN);
            // `!v` orders i64 backwards without overflow.
            if desc { !v } else { v }
        };
        let mut hits: Vec<Hit> = Vec::new();
        // With `sort | limit`, keep only the best `limit` as we go.
        let keep = limit.map(|l| l.max(1));
        self.scan(
            source,
            window,
            &scan,
            near,
            &mut |time, arrival, payload| {
                if sort.is_none() && keep.is_some_and(|k| hits.len() >= k) {
                    return;
                }
                hits.push(Hit {
                    time,
                    arrival,
                    payload: payload.to_vec(),
                });
                if let (Some(s), Some(k)) = (sort, keep)
                    && hits.len() >= 2 * k + 1024
                {
                    hits.select_nth_unstable_by_key(k - 1, |h| key(h, s));
                    hits.truncate(k);
                }
            },
        )?;
        if let Some(s) = sort {
            hits.sort_by_key(|h| key(h, s));
            self.plan.push(format!(
                "records: sorted by `{}`{}",
                source.columns[s.0].name,
                if s.1 { " descending" } else { "" }
            ));
        }
        if let Some(k) = limit {
            hits.truncate(k);
        }
        Ok((hits, columns))
    }

    /// Anchor intervals of a correlation.
    /// The anchor records of a correlation and their source.
    fn anchors(&mut self, c: &Correlate) -> Result<(&'a SourceColumns, Vec<Hit>)> {
        let q = &c.anchors;
        let stages = anchor_stages(&q.stages).ok_or_else(|| {
            Error::spanned(
                c.span,
                "the sub-query must select records: no aggregate, or one `max(x)` or `min(x)`",
            )
        })?;
        let Selection {
            source,
            window,
            near,
            pred,
        } = self.select(q, true)?;
        let (hits, _) = self.records(source, &window, pred, near.as_ref(), &stages)?;
        Ok((source, hits))
    }

    fn near(&mut self, outer: &SourceColumns, c: &Correlate) -> Result<Near> {
        let (source, hits) = self.anchors(c)?;
        let mut same = Vec::new();
        for name in &c.same {
            let (inner, _) = column(source, name)?;
            let (outer_col, _) = column(outer, name)?;
            same.push((inner, outer_col));
        }
        let span_of = match c.kind {
            Nearness::Around(_) => None,
            Nearness::During => {
                let name = source.span.as_ref().ok_or_else(|| {
                    Error::spanned(
                        c.span,
                        format!("`{}` records have no duration to be `during`", source.name),
                    )
                })?;
                source.column(name).map(|(i, _)| i)
            }
        };
        let mut by_key: HashMap<Vec<i64>, Vec<(u64, u64)>> = HashMap::new();
        let mut all = Vec::with_capacity(hits.len());
        for hit in &hits {
            let interval = match (c.kind, span_of) {
                (Nearness::Around(w), _) => {
                    let w = w.unsigned_abs();
                    let at = if source.late.is_some() {
                        hit.time
                    } else {
                        hit.arrival
                    };
                    (at.saturating_sub(w), at.saturating_add(w))
                }
                (Nearness::During, Some(col)) => {
                    let d = source.columns[col]
                        .value(hit.time, &hit.payload)
                        .unwrap_or(0);
                    (hit.time.saturating_sub(d.unsigned_abs()), hit.time)
                }
                (Nearness::During, None) => (hit.time, hit.time),
            };
            let key = same
                .iter()
                .map(|(inner, _)| {
                    source.columns[*inner]
                        .value(hit.time, &hit.payload)
                        .unwrap_or(i64::MIN)
                })
                .collect();
            by_key.entry(key).or_default().push(interval);
            all.push(interval);
        }
        self.plan.push(format!(
            "correlate: {} anchor record(s) of `{}`{}",
            hits.len(),
            source.name,
            if same.is_empty() {
                String::new()
            } else {
                format!(
                    ", matched on {}",
                    c.same
                        .iter()
                        .map(|n| n.text.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ));
        Ok(Near {
            all: merge(all),
            by_key: by_key.into_iter().map(|(k, v)| (k, merge(v))).collect(),
            same: same.into_iter().map(|(_, o)| o).collect(),
            by_arrival: matches!(c.kind, Nearness::Around(_)),
        })
    }

    fn specs(source: &SourceColumns, aggs: &[Agg]) -> Result<Vec<AggSpec>> {
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
    fn aggregate(
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
        let whole = near.is_none()
            && by.is_empty()
            && every.is_none()
            && source.late.is_none()
            && !self.catalog.full_scan;
        if let Some(picks) = whole
            .then(|| summary_picks(source, pred.as_ref(), &specs))
            .flatten()
        {
            return self.summarize(source, window, &specs, &picks);
        }
        if whole && let Some(answer) = self.summarize_hist(source, window, pred.as_ref(), &specs)? {
            return Ok(answer);
        }
        let timeline = near.is_none()
            && pred.is_none()
            && by.is_empty()
            && source.late.is_none()
            && !self.catalog.full_scan
            && specs.iter().all(|s| s.func == Func::Count);
        if let Some(step) = every.filter(|_| timeline) {
            return self.count_every(source, window, &specs, step);
        }
        let by_part = near.is_none()
            && pred.is_none()
            && every.is_none()
            && source.late.is_none()
            && !self.catalog.full_scan;
        if let ([by], true) = (&by[..], by_part)
            && let Some(answer) = self.summarize_by_part(source, window, &specs, *by)?
        {
            return Ok(answer);
        }
        let scan = self.plan_scan(source, pred, "aggregate");
        let wall_offset = self.catalog.wall_offset.unwrap_or(0);
        let mut groups = Groups::default();
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
            let accs = groups.get(&key, specs.len());
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
        })?;
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
        let mut row = Vec::new();
        for (spec, (index, part, range)) in specs.iter().zip(picks) {
            let (index, part) = (*index, *part);
            let (agg, stats) = self.snapshot.aggregate_part(
                source.id,
                index,
                part,
                window.clone(),
                range.clone(),
            )?;
            self.add(stats);
            let int = |v: Option<i64>| v.map_or(Cell::Null, Cell::Int);
            let mut quantile = |q: f64| -> Result<Cell> {
                let (value, stats) =
                    self.snapshot
                        .percentile_part(source.id, index, part, window.clone(), q)?;
                self.add(stats);
                Ok(int(value))
            };
            match spec.func {
                Func::Count => row.push(Cell::Int(agg.count.cast_signed())),
                Func::Sum => row.push(Cell::Int(i64::try_from(agg.sum).unwrap_or(i64::MAX))),
                Func::Min => row.push(int(agg.min)),
                Func::Max => row.push(int(agg.max)),
                Func::Avg => row.push(agg.avg().map_or(Cell::Null, Cell::Float)),
                Func::Quantile(q) => row.push(quantile(q)?),
                Func::Percentiles => {
                    for q in PERCENTILES {
                        row.push(quantile(q)?);
                    }
                    row.push(int(agg.max));
                }
                Func::Hist => unreachable!("hist is never summarized"),
            }
        }
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
}

impl Engine<'_> {
    /// Aggregates grouped by `by` when it is the partition field of one
    /// partitioned index over every aggregated column: each group is a
    /// part, answered by the store from its summaries (reading only chunks
    /// that hold a quantile's bin). `None` when that does not hold: the
    /// caller scans.
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
        let mut qs = Vec::new();
        for spec in specs {
            match spec.func {
                Func::Quantile(q) => qs.push(q),
                Func::Percentiles => qs.extend(PERCENTILES),
                _ => {}
            }
        }
        let (answers, stats) =
            self.snapshot
                .aggregate_parts(source.id, index, window.clone(), &qs)?;
        // Values past the partition's count share one part, and names
        // that stand for several values make one group of several parts:
        // neither is a group of its own here.
        let named = |part: u32| match &source.columns[by].kind {
            Kind::Named(names) => names.group_of(i64::from(part)) == i64::from(part),
            _ => true,
        };
        if answers.iter().any(|a| a.part >= parts || !named(a.part)) {
            return Ok(None);
        }
        self.add(stats);
        let rows = answers
            .into_iter()
            .map(|answer| (vec![i64::from(answer.part)], part_cells(specs, &answer)))
            .collect();
        self.plan.push(format!(
            "aggregate: from the store's chunk summaries of `{}`, one part of a partitioned index per `{}`",
            source.name, source.columns[by].name
        ));
        Ok(Some(keyed_answer(source, specs, &[by], None, rows)))
    }
}

/// One part's cells, as many as the specs' headers.
fn part_cells(specs: &[AggSpec], answer: &weft_store::PartAnswer) -> Vec<Cell> {
    let agg = &answer.aggregate;
    let int = |v: Option<i64>| v.map_or(Cell::Null, Cell::Int);
    let mut quantiles = answer.quantiles.iter().copied();
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

/// A sub-query's stages as record stages: as they are, or `max(x)` as
/// `sort x desc | limit 1`; `None` if it aggregates otherwise.
fn anchor_stages(stages: &[Stage]) -> Option<Vec<Stage>> {
    match stages {
        [
            Stage::Aggregate {
                aggs,
                by,
                every: None,
            },
        ] if by.is_empty() && aggs.len() == 1 => {
            let agg = &aggs[0];
            let descending = match agg.func {
                Func::Max => true,
                Func::Min => false,
                _ => return None,
            };
            Some(vec![
                Stage::Sort {
                    key: agg.field.clone()?,
                    descending,
                },
                Stage::Limit(1),
            ])
        }
        stages
            if stages
                .iter()
                .all(|s| !matches!(s, Stage::Aggregate { .. } | Stage::Top { .. })) =>
        {
            Some(stages.to_vec())
        }
        _ => None,
    }
}

fn stage_word(stage: &Stage) -> &'static str {
    match stage {
        Stage::Aggregate { .. } => "aggregate",
        Stage::Top { .. } => "top",
        Stage::Sort { .. } => "sort",
        Stage::Limit(_) => "limit",
        Stage::Fields(_) => "fields",
    }
}
