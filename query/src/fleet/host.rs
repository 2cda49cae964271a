//! One host's side of a fleet query: its groups' mergeable aggregates, or
//! its values inside the ranges the asker wants.

use std::{collections::HashMap, ops::RangeInclusive};

use weft_store::Snapshot;

use crate::{
    Cell,
    aggregate::{AggSpec, Groups},
    ast::Query,
    bind::Pred,
    bind::column,
    catalog::{Catalog, SourceColumns},
    engine::{Engine, Near, Selection},
    error::{Error, Result},
    exec::aggregate_stage,
    fleet::wire::{Ask, Group, Key, MAX_VALUES, PIECES, Part, Reply, Shown, Slice, Want, piece_of},
    shape::cell,
    summarize::GroupedVisit,
};

/// Answers `ask` about `query` on `snapshot`, naming things through
/// `catalog`. Each ask scans the window's records again: a host keeps no
/// state between a query's phases.
pub fn reply(snapshot: &Snapshot, catalog: &Catalog, query: &Query, ask: &Ask) -> Result<Reply> {
    if let Some(span) = query.threshold() {
        return Err(Error::spanned(
            span,
            "a percentile in `where` would be each host's own: a fleet query cannot use one yet (ask for the fleet's percentile first, then use its value)",
        ));
    }
    let mut engine = Engine::new(snapshot, catalog)?;
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
    let scan = Scan {
        source,
        window,
        pred,
        near,
        by: &by,
        every: stage.every,
        specs: &specs,
        keys: &keys,
    };
    match ask {
        Ask::Partials => reply.groups = scan.partials(&mut engine, &mut reply)?,
        Ask::Values(wants) => reply.slices = scan.values(&mut engine, &mut reply, wants)?,
    }
    Ok(reply)
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
}

impl Scan<'_> {
    /// Each group's mergeable aggregates.
    fn partials(self, engine: &mut Engine, reply: &mut Reply) -> Result<Vec<Group>> {
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

    /// The values inside each want's range.
    fn values(self, engine: &mut Engine, reply: &mut Reply, wants: &[Want]) -> Result<Vec<Slice>> {
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
