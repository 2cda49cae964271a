//! One host's side of a fleet query: its groups' mergeable aggregates, or
//! its values inside the ranges the asker wants.

use std::{collections::HashMap, ops::RangeInclusive};

use weft_store::{IndexId, Snapshot};

use crate::{
    Cell,
    aggregate::{AggSpec, Groups},
    ast::{Correlate, Op, Query},
    bind::{Pred, column},
    catalog::{Catalog, SourceColumns},
    engine::{Engine, Near, Selection},
    error::{Error, Result},
    exec::aggregate_stage,
    fleet::wire::{
        Anchor, Ask, Group, Key, MAX_ANCHORS, MAX_VALUES, PIECES, Part, Reply, Request, Shown,
        Slice, Want, piece_of,
    },
    picks::{part_index, parts_are_groups, summary_picks},
    shape::cell,
    summarize::GroupedVisit,
};

/// Answers `request` about its parsed `query` on `snapshot`, naming
/// things through `catalog`. A whole window's aggregates come from the
/// chunk summaries where they can (a quantile's values then counted in
/// its index's own bins), else each ask reads the window's records again:
/// a host keeps no state between a query's phases.
pub fn reply(
    snapshot: &Snapshot,
    catalog: &Catalog,
    query: &Query,
    request: &Request,
) -> Result<Reply> {
    let ask = &request.ask;
    if let Some(span) = query.threshold() {
        return Err(Error::spanned(
            span,
            "a percentile in `where` would be each host's own: a fleet query cannot use one yet (ask for the fleet's percentile first, then use its value)",
        ));
    }
    let mut engine = Engine::new(snapshot, catalog)?;
    if let Some(correlate) = &query.correlate {
        let offset = || {
            catalog.wall_offset.ok_or_else(|| {
                Error::spanned(
                    correlate.span,
                    "this capture has no wall-clock reference, which a correlation across hosts needs",
                )
            })
        };
        if *ask == Ask::Anchors {
            return anchors(&mut engine, correlate, offset()?);
        }
        if let Some(given) = &request.anchors {
            let offset = offset()?;
            // On this capture's clock; what ends before its epoch is dropped.
            let here = |wall: i64| u64::try_from(wall.saturating_sub(offset)).ok();
            engine.given = Some(
                given
                    .iter()
                    .filter_map(|(start, end)| Some((here(*start).unwrap_or(0), here(*end)?)))
                    .collect(),
            );
        }
    }
    let Selection {
        source,
        window,
        near,
        pred,
    } = engine.select(query, false)?;
    let Some(stage) = aggregate_stage(source, query)? else {
        return Err(Error::spanned(
            query.source.span,
            "a fleet query aggregates (`| count by comm`, `| p99(dur)`): listing records across hosts is not supported",
        ));
    };
    let specs = Engine::specs(source, &stage.aggs)?;
    let by: Vec<usize> = stage
        .by
        .iter()
        .map(|n| column(source, n).map(|(c, _)| c))
        .collect::<Result<_>>()?;
    let wall_offset = match (stage.every, catalog.wall_offset) {
        (Some(_), None) => {
            return Err(Error::spanned(
                query.source.span,
                "this capture has no wall-clock reference, which `every` across hosts needs to line up its buckets",
            ));
        }
        (_, offset) => offset.unwrap_or(0),
    };
    let mut reply = Reply {
        columns: columns(source, &specs, &by, stage.every.is_some()),
        keys: by.len() + usize::from(stage.every.is_some()),
        ..Reply::default()
    };
    let keys = KeyCells {
        source,
        by: &by,
        every: stage.every.is_some(),
        wall_offset,
    };
    let plain = !request.scan
        && near.is_none()
        && stage.every.is_none()
        && source.late.is_none()
        && !catalog.full_scan;
    let summaries = match (&by[..], plain) {
        ([], true) => Summaries::Whole,
        ([by], true) if pred.is_none() => part_index(source, &specs, *by)
            .map_or(Summaries::No, |(index, parts)| {
                Summaries::Parts(index, parts, *by)
            }),
        _ => Summaries::No,
    };
    let scan = Scan {
        source,
        window,
        pred,
        near,
        by: &by,
        every: stage.every,
        specs: &specs,
        keys: &keys,
        summaries,
    };
    match ask {
        Ask::Partials => reply.groups = scan.partials(&mut engine, &mut reply)?,
        Ask::Values(wants) => reply.slices = scan.values(&mut engine, &mut reply, wants)?,
        Ask::Anchors => unreachable!("answered before the selection"),
    }
    Ok(reply)
}

/// A correlation's anchors on this host, wall-clock (`wall_offset` from
/// this capture's clock), at most [`MAX_ANCHORS`].
fn anchors(engine: &mut Engine, correlate: &Correlate, wall_offset: i64) -> Result<Reply> {
    let spans = engine.anchor_spans(correlate)?;
    if spans.len() > MAX_ANCHORS {
        return Err(Error::spanned(
            correlate.anchors.source.span,
            format!(
                "the sub-query selects {} records here, more than the {MAX_ANCHORS} a correlation across hosts takes: narrow it",
                spans.len()
            ),
        ));
    }
    let wall = |t: u64| {
        i64::try_from(t)
            .unwrap_or(i64::MAX)
            .saturating_add(wall_offset)
    };
    Ok(Reply {
        anchors: spans
            .into_iter()
            .map(|(start, end, value)| Anchor {
                start: wall(start),
                end: wall(end),
                value,
            })
            .collect(),
        ..Reply::default()
    })
}

/// What one host's scan for a fleet query reads and groups by.
struct Scan<'a> {
    source: &'a SourceColumns,
    window: RangeInclusive<u64>,
    pred: Option<Pred>,
    near: Option<Near>,
    by: &'a [usize],
    every: Option<i64>,
    specs: &'a [AggSpec],
    keys: &'a KeyCells<'a>,
    /// What the chunk summaries may answer.
    summaries: Summaries,
}

/// What the chunk summaries can answer of a stage.
#[derive(Clone, Copy)]
enum Summaries {
    /// Nothing: the records are read.
    No,
    /// A whole window with no groups.
    Whole,
    /// Groups that are the parts of a partitioned index (`by name` over
    /// the latency index kept per syscall): the index, its count of parts
    /// and the group-by column.
    Parts(IndexId, u32, usize),
}

impl Scan<'_> {
    /// Each group's mergeable aggregates.
    fn partials(self, engine: &mut Engine, reply: &mut Reply) -> Result<Vec<Group>> {
        match self.summaries {
            Summaries::Whole => {
                if let Some(parts) = self.summarized(engine)? {
                    return Ok(vec![Group {
                        key: Vec::new(),
                        parts,
                    }]);
                }
            }
            Summaries::Parts(index, count, by) => {
                if let Some(groups) = self.summarized_parts(engine, (index, count), by)? {
                    return Ok(groups);
                }
            }
            Summaries::No => {}
        }
        let Self { source, specs, .. } = self;
        let mut groups = Groups::<Part>::default();
        self.each(engine, reply, &mut |key, time, payload| {
            let parts = groups.get(key, specs.len());
            for (part, spec) in parts.iter_mut().zip(specs) {
                match spec.column {
                    Some(c) => {
                        if let Some(v) = source.columns[c].value(time, payload) {
                            part.add(spec.func, v);
                        }
                    }
                    None => part.add(spec.func, 0),
                }
            }
        })?;
        if reply.keys == 0 {
            // One row even over nothing, as on one host.
            groups.get(&[], specs.len());
        }
        Ok(groups
            .groups
            .into_iter()
            .map(|(key, parts)| Group {
                key: self.keys.of(&key),
                parts,
            })
            .collect())
    }

    /// The aggregates of a whole window from the chunk summaries, when
    /// each is an index's (or one part's): counts, sums and extremes as
    /// one host answers them, a quantile's values counted per bin of its
    /// index (the bins every host of one weft version draws alike).
    fn summarized(&self, engine: &mut Engine) -> Result<Option<Vec<Part>>> {
        let Some(picks) = summary_picks(self.source, self.pred.as_ref(), self.specs) else {
            return Ok(None);
        };
        let snapshot = engine.snapshot;
        let mut parts = Vec::new();
        for (spec, (index, part, range)) in self.specs.iter().zip(picks) {
            let (agg, stats) =
                snapshot.aggregate_part(self.source.id, index, part, self.window.clone(), range)?;
            engine.add(stats);
            let mut answer = Part::of(&agg);
            if spec.keeps_values() {
                let edges = snapshot.meta().index(index)?.bins.boundaries().to_vec();
                let Some(counts) = self.bin_counts(engine, index, part, &edges)? else {
                    return Ok(None);
                };
                answer.count_in(&edges, &counts);
            }
            parts.push(answer);
        }
        Ok(Some(parts))
    }

    /// The window's values of `index` (of its part `part`) counted between
    /// `edges`, from the summaries; `None` where they cannot say.
    fn bin_counts(
        &self,
        engine: &mut Engine,
        index: IndexId,
        part: Option<u32>,
        edges: &[i64],
    ) -> Result<Option<Vec<u64>>> {
        let (counts, stats) = (engine.snapshot).bucket_counts(
            self.source.id,
            index,
            part,
            self.window.clone(),
            edges,
        )?;
        engine.add(stats);
        Ok(counts)
    }

    /// Each part's aggregates from the summaries of its part of `index`
    /// (with `count` parts), the groups of `by`; `None` where a group is
    /// not one part (values past the partition's count share one, a name
    /// may stand for several).
    fn summarized_parts(
        &self,
        engine: &mut Engine,
        (index, count): (IndexId, u32),
        by: usize,
    ) -> Result<Option<Vec<Group>>> {
        let snapshot = engine.snapshot;
        let (answers, stats) =
            snapshot.aggregate_parts(self.source.id, index, self.window.clone(), &[])?;
        engine.add(stats);
        if !parts_are_groups(self.source, by, count, answers.iter().map(|a| a.part)) {
            return Ok(None);
        }
        let edges = snapshot.meta().index(index)?.bins.boundaries().to_vec();
        let mut groups = Vec::new();
        for answer in answers {
            let agg = answer.aggregate;
            let mut counted: Option<Vec<u64>> = None;
            let mut parts = Vec::new();
            for spec in self.specs {
                let mut part = Part::of(&agg);
                if spec.keeps_values() {
                    if counted.is_none() {
                        let part = Some(answer.part);
                        let Some(counts) = self.bin_counts(engine, index, part, &edges)? else {
                            return Ok(None);
                        };
                        counted = Some(counts);
                    }
                    part.count_in(&edges, counted.as_deref().unwrap_or_default());
                }
                parts.push(part);
            }
            groups.push(Group {
                key: self.keys.of(&[i64::from(answer.part)]),
                parts,
            });
        }
        Ok(Some(groups))
    }

    /// The values inside each want's range.
    fn values(self, engine: &mut Engine, reply: &mut Reply, wants: &[Want]) -> Result<Vec<Slice>> {
        match self.summaries {
            Summaries::Whole if wants.iter().all(|w| w.key.is_empty()) => {
                // One group: each want read through its column's index,
                // only the chunks whose summaries reach its range.
                return wants
                    .iter()
                    .map(|want| self.narrowed(engine, reply, want, None))
                    .collect();
            }
            Summaries::Parts(index, _, by) => {
                // Each group is one part: its records picked by the part's
                // value and the want's range.
                let (answers, stats) = engine.snapshot.aggregate_parts(
                    self.source.id,
                    index,
                    self.window.clone(),
                    &[],
                )?;
                engine.add(stats);
                let part_of: HashMap<Vec<Key>, i64> = answers
                    .iter()
                    .map(|a| (self.keys.of(&[i64::from(a.part)]), i64::from(a.part)))
                    .collect();
                return wants
                    .iter()
                    .map(|want| match part_of.get(&want.key) {
                        Some(part) => {
                            let pick = Pred::Compare {
                                column: by,
                                op: Op::Eq,
                                value: *part,
                            };
                            self.narrowed(engine, reply, want, Some(pick))
                        }
                        None => Ok(Slice::Values(Vec::new())),
                    })
                    .collect();
            }
            _ => {}
        }
        let Self {
            source,
            specs,
            keys,
            ..
        } = self;
        let mut gathered: Vec<Gathered> = wants.iter().map(|_| Gathered::default()).collect();
        // The wants each of this host's keys is in, found once per key.
        let mut wanted: HashMap<Vec<i64>, Vec<usize>> = HashMap::new();
        self.each(engine, reply, &mut |key, time, payload| {
            if !wanted.contains_key(key) {
                let cells = keys.of(key);
                let mine = (0..wants.len())
                    .filter(|w| wants[*w].key == cells)
                    .collect();
                wanted.insert(key.to_vec(), mine);
            }
            for w in &wanted[key] {
                let want = &wants[*w];
                let value = specs
                    .get(want.agg)
                    .and_then(|s| s.column)
                    .and_then(|c| source.columns[c].value(time, payload));
                if let Some(v) = value.filter(|v| (want.lo..=want.hi).contains(v)) {
                    gathered[*w].add(want, v);
                }
            }
        })?;
        Ok(gathered.into_iter().map(Gathered::slice).collect())
    }

    /// The values of one want of a window with no groups (or of the group
    /// `pick` selects), read with its range as a condition (which the
    /// column's index narrows).
    fn narrowed(
        &self,
        engine: &mut Engine,
        reply: &mut Reply,
        want: &Want,
        pick: Option<Pred>,
    ) -> Result<Slice> {
        let Some(column) = self.specs.get(want.agg).and_then(|s| s.column) else {
            return Ok(Slice::Values(Vec::new()));
        };
        let bound = |op: Op, value: i64| Pred::Compare { column, op, value };
        let mut conjuncts = vec![bound(Op::Ge, want.lo), bound(Op::Le, want.hi)];
        conjuncts.extend(self.pred.clone());
        conjuncts.extend(pick);
        let mut gathered = Gathered::default();
        let source = self.source;
        engine.grouped(
            source,
            &self.window,
            Some(Pred::And(conjuncts)),
            None,
            &[],
            None,
            &mut |_, time, payload| {
                reply.scanned += 1;
                reply.scanned_bytes += payload.len() as u64;
                if let Some(v) = source.columns[column].value(time, payload) {
                    gathered.add(want, v);
                }
            },
        )?;
        Ok(gathered.slice())
    }

    /// Scans, calling `visit` with each record's group key, and counts
    /// what the scan visited into `reply`.
    fn each(
        &self,
        engine: &mut Engine,
        reply: &mut Reply,
        visit: &mut GroupedVisit<'_>,
    ) -> Result<()> {
        let pred = self.pred.clone();
        engine.grouped(
            self.source,
            &self.window,
            pred,
            self.near.as_ref(),
            self.by,
            self.every,
            &mut |key, time, payload| {
                reply.scanned += 1;
                reply.scanned_bytes += payload.len() as u64;
                visit(key, time, payload);
            },
        )
    }
}

/// The columns of the answer: the key's, then the aggregates'.
fn columns(
    source: &SourceColumns,
    specs: &[AggSpec],
    by: &[usize],
    every: bool,
) -> Vec<(String, Shown)> {
    let time = every.then(|| ("time".to_string(), Shown::Time));
    let keys = by.iter().map(|c| {
        (
            source.columns[*c].name.clone(),
            Shown::of(&source.columns[*c].kind),
        )
    });
    let aggs = specs
        .iter()
        .flat_map(AggSpec::headers)
        .map(|h| (h.name, Shown::of(&h.kind)));
    time.into_iter().chain(keys).chain(aggs).collect()
}

/// Turns a host's group keys into the cells every host writes alike.
struct KeyCells<'a> {
    source: &'a SourceColumns,
    by: &'a [usize],
    every: bool,
    wall_offset: i64,
}

impl KeyCells<'_> {
    fn of(&self, key: &[i64]) -> Vec<Key> {
        let (time, rest) = if self.every {
            (Some(key[0].saturating_add(self.wall_offset)), &key[1..])
        } else {
            (None, key)
        };
        let named = rest.iter().zip(self.by).map(|(v, c)| {
            match cell(&self.source.columns[*c].kind, Some(*v)) {
                Cell::Int(i) => Key::Int(i),
                Cell::Text(t) => Key::Text(t),
                Cell::Null | Cell::Float(_) => Key::Null,
            }
        });
        time.map(Key::Int).into_iter().chain(named).collect()
    }
}

/// The values of one want found so far: kept until there are too many to
/// send, then counted per piece of the want's range.
#[derive(Default)]
struct Gathered {
    values: Vec<i64>,
    counts: Option<Vec<u64>>,
}

impl Gathered {
    fn add(&mut self, want: &Want, value: i64) {
        if let Some(counts) = &mut self.counts {
            counts[piece_of(want.lo, want.hi, value)] += 1;
            return;
        }
        self.values.push(value);
        if self.values.len() > MAX_VALUES {
            let mut counts = vec![0u64; PIECES];
            for v in self.values.drain(..) {
                counts[piece_of(want.lo, want.hi, v)] += 1;
            }
            self.counts = Some(counts);
        }
    }

    fn slice(mut self) -> Slice {
        if let Some(counts) = self.counts {
            return Slice::Counts(counts);
        }
        self.values.sort_unstable();
        Slice::Values(self.values)
    }
}
