//! Runs a parsed query on a store snapshot: plans it (`plan.rs`), runs its
//! scans (`scan.rs`), correlations (`correlate.rs`) and aggregates
//! (`summarize.rs`) on one [`Engine`], and shapes the answer (`shape.rs`).
//! Aggregates without filters are answered from chunk summaries; filters
//! use the store's indexed scans where a condition narrows an indexed
//! field, and the rest is evaluated on the records the scan returns. Every
//! step is written to the answer's plan.

use weft_store::Snapshot;

use crate::{
    answer::{Answer, Cell, Header},
    ast::{Agg, Name, Query, Stage},
    catalog::{Catalog, SourceColumns},
    engine::{Engine, Selection},
    error::{Error, Result},
    scan::{fields, visible},
    shape::{listing, record_cell, reshape},
};

/// Runs `query` on `snapshot`, naming things through `catalog`.
pub fn run(snapshot: &Snapshot, catalog: &Catalog, query: &Query) -> Result<Answer> {
    let mut engine = Engine::new(snapshot, catalog)?;
    let mut answer = engine.query(query)?;
    answer.lost = lost_in(&mut engine, query)?;
    if answer.lost > 0 {
        engine.plan.push(format!(
            "losses: {} `{}` records were lost in this window; the answer lacks them",
            answer.lost, query.source.text
        ));
    }
    answer.stats = engine.stats;
    answer.approximate = answer.approximation();
    if let Some(note) = &answer.approximate {
        engine.plan.push(format!("approximate: {note}"));
    }
    answer.plan = engine.plan;
    Ok(answer)
}

/// The source whose records say what each source lost, when.
const LOSSES: &str = "losses";

/// How many records of `query`'s source the `losses` source counts in its
/// window (by arrival, as losses are noted when they are read).
fn lost_in(engine: &mut Engine, query: &Query) -> Result<u64> {
    let catalog = engine.catalog;
    let (Some(losses), Some(source)) = (catalog.source(LOSSES), catalog.source(&query.source.text))
    else {
        return Ok(0);
    };
    if source.name == LOSSES {
        return Ok(0);
    }
    let window = engine.window(query.window.as_ref(), &query.source)?;
    let (Some((of, _)), Some((count, _))) = (losses.column("source"), losses.column("lost")) else {
        return Ok(0);
    };
    let mut lost = 0u64;
    engine
        .snapshot
        .raw_scan_each(losses.id, window, |record| {
            let column = |i: usize| losses.columns[i].value(record.ts, record.payload);
            if column(of) == Some(i64::from(source.id)) {
                lost += column(count).map_or(0, i64::unsigned_abs);
            }
        })
        .map_err(Error::from)?;
    Ok(lost)
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
    answer.stats = engine.stats;
    answer.approximate = answer.approximation();
    if let Some(note) = &answer.approximate {
        engine.plan.push(format!("approximate: {note}"));
    }
    answer.plan = engine.plan;
    Ok(answer)
}

impl Engine<'_> {
    pub(crate) fn query(&mut self, q: &Query) -> Result<Answer> {
        if let Some(span) = q.stages.iter().find_map(|s| match s {
            Stage::Explain(span) => Some(*span),
            _ => None,
        }) {
            return self.explain(q, span);
        }
        let Selection {
            source,
            window,
            near,
            pred,
        } = self.select(q, false)?;
        let Some(stage) = aggregate_stage(source, q)? else {
            let (hits, columns) = self.records(source, &window, pred, near.as_ref(), &q.stages)?;
            return Ok(listing(source, &hits, &columns));
        };
        let AggregateStage {
            aggs,
            by,
            every,
            after,
        } = stage;
        let mut answer = self.aggregate(source, &window, pred, near.as_ref(), &aggs, &by, every)?;
        for stage in &after {
            reshape(&mut answer, stage)?;
        }
        Ok(answer)
    }
}

/// A query's aggregate stage, and the stages after it (a `top`'s sort and
/// limit first).
pub(crate) struct AggregateStage {
    pub(crate) aggs: Vec<Agg>,
    pub(crate) by: Vec<Name>,
    pub(crate) every: Option<i64>,
    pub(crate) after: Vec<Stage>,
}

/// The aggregate stage of `q` on `source`; `None` when it lists records.
pub(crate) fn aggregate_stage(source: &SourceColumns, q: &Query) -> Result<Option<AggregateStage>> {
    let split = q
        .stages
        .iter()
        .position(|s| matches!(s, Stage::Aggregate { .. } | Stage::Top { .. }));
    let Some(at) = split else {
        return Ok(None);
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
            let key = Engine::specs(source, std::slice::from_ref(agg))?[0].headers()[0]
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
    Ok(Some(AggregateStage {
        aggs,
        by,
        every,
        after,
    }))
}

fn stage_word(stage: &Stage) -> &'static str {
    match stage {
        Stage::Aggregate { .. } => "aggregate",
        Stage::Top { .. } => "top",
        Stage::Sort { .. } => "sort",
        Stage::Limit(_) => "limit",
        Stage::Fields(_) => "fields",
        Stage::Explain(_) => "explain",
    }
}
