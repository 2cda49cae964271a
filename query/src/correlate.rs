//! Correlation: the anchor records a sub-query selects, and the time
//! intervals around (or during) them that the outer query keeps records
//! in, per value of its `same` fields.

use std::collections::HashMap;

use crate::{
    ast::{Correlate, Func, Nearness, Stage},
    bind::column,
    catalog::SourceColumns,
    engine::{Engine, Near, Selection, merge},
    error::{Error, Result},
    shape::Hit,
};

impl<'a> Engine<'a> {
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

    /// A correlation's anchors for a fleet: each one's interval on this
    /// capture's clock and, for a `max(x)` or `min(x)` sub-query, its `x`
    /// (the asker keeps the fleet's extreme); `None` values otherwise.
    pub(crate) fn anchor_spans(&mut self, c: &Correlate) -> Result<Vec<(u64, u64, Option<i64>)>> {
        if let Some(name) = c.same.first() {
            return Err(Error::spanned(
                name.span,
                "`same` matches a field on one host: a fleet correlation cannot use it",
            ));
        }
        let (source, hits) = self.anchors(c)?;
        let extreme = match &c.anchors.stages[..] {
            [Stage::Aggregate { aggs, .. }] => aggs[0]
                .field
                .as_ref()
                .map(|field| column(source, field))
                .transpose()?
                .map(|(col, _)| col),
            _ => None,
        };
        let span_of = span_column(source, c)?;
        Ok(hits
            .iter()
            .map(|hit| {
                let (start, end) = interval(source, c, span_of, hit);
                let value =
                    extreme.and_then(|col| source.columns[col].value(hit.time, &hit.payload));
                (start, end, value)
            })
            .collect())
    }

    pub(crate) fn near(&mut self, outer: &SourceColumns, c: &Correlate) -> Result<Near> {
        if let Some(spans) = self.given.take() {
            return Ok(given_near(c, spans));
        }
        let (source, hits) = self.anchors(c)?;
        let mut same = Vec::new();
        for name in &c.same {
            let (inner, _) = column(source, name)?;
            let (outer_col, _) = column(outer, name)?;
            same.push((inner, outer_col));
        }
        let span_of = span_column(source, c)?;
        let mut by_key: HashMap<Vec<i64>, Vec<(u64, u64)>> = HashMap::new();
        let mut all = Vec::with_capacity(hits.len());
        for hit in &hits {
            let interval = interval(source, c, span_of, hit);
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
}

/// The anchors' column that holds their span, for `during`.
fn span_column(source: &SourceColumns, c: &Correlate) -> Result<Option<usize>> {
    match c.kind {
        Nearness::Around(_) => Ok(None),
        Nearness::During => {
            let name = source.span.as_ref().ok_or_else(|| {
                Error::spanned(
                    c.span,
                    format!("`{}` records have no duration to be `during`", source.name),
                )
            })?;
            Ok(source.column(name).map(|(i, _)| i))
        }
    }
}

/// The interval an anchor record makes: `around`'s window about its time
/// (its arrival, unless the source arrives late), or `during`'s span.
fn interval(
    source: &SourceColumns,
    c: &Correlate,
    span_of: Option<usize>,
    hit: &Hit,
) -> (u64, u64) {
    match (c.kind, span_of) {
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
    }
}

/// Intervals given from outside (a fleet's anchors, on this capture's
/// clock) as the correlation's, matched on no field.
fn given_near(c: &Correlate, spans: Vec<(u64, u64)>) -> Near {
    let all = merge(spans);
    Near {
        by_key: HashMap::from([(Vec::new(), all.clone())]),
        all,
        same: Vec::new(),
        by_arrival: matches!(c.kind, Nearness::Around(_)),
    }
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
            if stages.iter().all(|s| {
                !matches!(
                    s,
                    Stage::Aggregate { .. } | Stage::Top { .. } | Stage::Explain(_)
                )
            }) =>
        {
            Some(stages.to_vec())
        }
        _ => None,
    }
}
