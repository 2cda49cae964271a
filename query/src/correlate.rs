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

    pub(crate) fn near(&mut self, outer: &SourceColumns, c: &Correlate) -> Result<Near> {
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
