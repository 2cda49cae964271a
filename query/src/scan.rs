//! Execution: the records a scan fetches, tested against its condition
//! and the anchors of a correlation, visited in place or kept for a
//! listing's `sort` and `limit`.

use std::ops::RangeInclusive;

use weft_store::RecordView;

use crate::{
    ast::{Name, Stage},
    bind::{Pred, column, listed_column},
    catalog::SourceColumns,
    engine::{Engine, Near, Scan, merge},
    error::Result,
    shape::Hit,
};

/// How far a record's arrival may trail its producer's timestamp: scans
/// for records by their own time read this much further in arrival time.
const ARRIVAL_SLACK: u64 = 2_000_000_000;

/// The source's columns that record listings show.
pub(crate) fn visible(source: &SourceColumns) -> Vec<usize> {
    (0..source.columns.len())
        .filter(|c| !source.columns[*c].hidden)
        .collect()
}

/// The columns `fields a, b` names.
pub(crate) fn fields(source: &SourceColumns, names: &[Name]) -> Result<Vec<usize>> {
    names
        .iter()
        .map(|n| listed_column(source, n).map(|(c, _)| c))
        .collect()
}

impl Engine<'_> {
    /// Visits each record of `source` in `window` that passes the scan's
    /// condition and, if given, lies near an anchor.
    pub(crate) fn scan(
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
            // Merged again once widened by the slack: a record in two
            // overlapping spans would be visited twice.
            Some(near) => merge(
                near.all
                    .iter()
                    .map(|(lo, hi)| {
                        let slack = if near.by_arrival { 0 } else { ARRIVAL_SLACK };
                        (
                            (*lo).max(*window.start()),
                            hi.saturating_add(slack.max(late)).min(reach),
                        )
                    })
                    .filter(|(lo, hi)| lo <= hi)
                    .collect(),
            )
            .into_iter()
            .map(|(lo, hi)| lo..=hi)
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
    pub(crate) fn records(
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
                Stage::Aggregate { .. } | Stage::Top { .. } | Stage::Explain(_) => {
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
}
