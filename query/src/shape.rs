//! Shapes what the engine found into an [`Answer`]: cells in each column's
//! kind, listings of records, grouped rows, and the stages after the
//! aggregate (`sort`, `limit`, `fields`).

use crate::{
    aggregate::{AggSpec, Groups},
    answer::{Answer, Cell, Header, duration},
    ast::{Func, Name, Stage},
    catalog::{Addresses, Column, Kind, SourceColumns},
    error::{Error, Result},
};

/// A record that passed the filters: its time and payload.
pub(crate) struct Hit {
    pub time: u64,
    /// When weft received it: what `around` and windows compare.
    pub arrival: u64,
    pub payload: Vec<u8>,
}

/// A value of a column's kind, for plans.
pub(crate) fn show(kind: &Kind, value: i64) -> String {
    match (kind, value) {
        (_, i64::MIN) => "min".into(),
        (_, i64::MAX) => "max".into(),
        (Kind::Duration, v) => duration(v as f64),
        (Kind::Named(names), v) => names.name_of(v),
        (Kind::Addr(table), v) => address(table, v),
        (Kind::Hex | Kind::Id(_), v) => hex_id(kind, v),
        (_, v) => v.to_string(),
    }
}

/// An id's hex digits: a 64-bit id's 16, a 128-bit id's 32 (its high
/// half `?`s when the table had no room for it).
pub(crate) fn hex_id(kind: &Kind, value: i64) -> String {
    match kind {
        Kind::Id(table) => table.id(value).map_or_else(
            || format!("{}{:016x}", "?".repeat(16), value.cast_unsigned()),
            |id| format!("{id:032x}"),
        ),
        _ => format!("{:016x}", value.cast_unsigned()),
    }
}

/// A column's value as a cell: names for named columns.
pub(crate) fn cell(kind: &Kind, value: Option<i64>) -> Cell {
    match (kind, value) {
        (_, None | Some(i64::MIN)) => Cell::Null,
        (Kind::Named(names), Some(v)) => Cell::Text(names.name_of(v)),
        (Kind::Addr(table), Some(v)) => Cell::Text(address(table, v)),
        (Kind::Hex | Kind::Id(_), Some(v)) => Cell::Text(hex_id(kind, v)),
        (_, Some(v)) => Cell::Int(v),
    }
}

/// `10.0.0.1` or `::1` from its value.
pub(crate) fn address(table: &Addresses, value: i64) -> String {
    table
        .address(value)
        .map_or_else(|| value.to_string(), |a| a.to_string())
}

/// A column's cell in a record.
pub(crate) fn record_cell(column: &Column, time: u64, payload: &[u8]) -> Cell {
    if let Some(bytes) = column.bytes(payload) {
        return Cell::Text(bytes.escape_ascii().to_string());
    }
    // A record shows its whole id, whatever the table remembers.
    match column.id(payload) {
        Some(id) => Cell::Text(format!("{id:032x}")),
        None => cell(&column.kind, column.value(time, payload)),
    }
}

/// The rows of a record listing.
pub(crate) fn listing(source: &SourceColumns, hits: &[Hit], columns: &[usize]) -> Answer {
    Answer {
        columns: columns
            .iter()
            .map(|c| Header {
                name: source.columns[*c].name.clone(),
                kind: source.columns[*c].kind.clone(),
            })
            .collect(),
        rows: hits
            .iter()
            .map(|hit| {
                columns
                    .iter()
                    .map(|c| record_cell(&source.columns[*c], hit.time, &hit.payload))
                    .collect()
            })
            .collect(),
        ..Answer::default()
    }
}

/// The rows of an aggregate: series by time, other groups by their first
/// aggregate, largest first.
pub(crate) fn group_answer(
    source: &SourceColumns,
    specs: &[AggSpec],
    by: &[usize],
    every: Option<i64>,
    groups: Groups,
) -> Answer {
    let mut groups = groups.groups;
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    if specs.first().is_some_and(|s| s.func == Func::Hist) {
        let rows = groups
            .iter()
            .flat_map(|(key, accs)| accs[0].hist_rows().into_iter().map(|r| (key.clone(), r)))
            .collect();
        return keyed_answer(source, specs, by, every, rows);
    }
    let rows = groups
        .into_iter()
        .map(|(key, mut accs)| {
            let cells = accs
                .iter_mut()
                .zip(specs)
                .flat_map(|(acc, spec)| acc.cells(spec))
                .collect();
            (key, cells)
        })
        .collect();
    keyed_answer(source, specs, by, every, rows)
}

/// An aggregate's answer from its rows, each a group's key (the time
/// bucket if `every`, then the `by` values) and its cells, in key order.
pub(crate) fn keyed_answer(
    source: &SourceColumns,
    specs: &[AggSpec],
    by: &[usize],
    every: Option<i64>,
    keyed: Vec<(Vec<i64>, Vec<Cell>)>,
) -> Answer {
    let mut columns = Vec::new();
    if every.is_some() {
        columns.push(Header {
            name: "time".into(),
            kind: Kind::Time,
        });
    }
    for c in by {
        columns.push(Header {
            name: source.columns[*c].name.clone(),
            kind: source.columns[*c].kind.clone(),
        });
    }
    let key_cells = |key: &[i64]| -> Vec<Cell> {
        let (time, rest) = if every.is_some() {
            (Some(key[0]), &key[1..])
        } else {
            (None, key)
        };
        time.map(Cell::Int)
            .into_iter()
            .chain(
                rest.iter()
                    .zip(by)
                    .map(|(v, c)| cell(&source.columns[*c].kind, Some(*v))),
            )
            .collect()
    };
    columns.extend(specs.iter().flat_map(AggSpec::headers));
    let hist = specs.first().is_some_and(|s| s.func == Func::Hist);
    let mut rows: Vec<Vec<Cell>> = keyed
        .into_iter()
        .map(|(key, cells)| key_cells(&key).into_iter().chain(cells).collect())
        .collect();
    if !hist && every.is_none() && !by.is_empty() {
        let first = by.len();
        rows.sort_by(|a: &Vec<Cell>, b: &Vec<Cell>| compare_cells(&b[first], &a[first]));
    }
    Answer {
        columns,
        rows,
        ..Answer::default()
    }
}

/// Orders cells: numbers by value, text by text, nulls last.
pub(crate) fn compare_cells(a: &Cell, b: &Cell) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a, b) {
        (Cell::Int(x), Cell::Int(y)) => x.cmp(y),
        (Cell::Float(x), Cell::Float(y)) => x.total_cmp(y),
        (Cell::Int(x), Cell::Float(y)) => (*x as f64).total_cmp(y),
        (Cell::Float(x), Cell::Int(y)) => x.total_cmp(&(*y as f64)),
        (Cell::Text(x), Cell::Text(y)) => x.cmp(y),
        (Cell::Null, Cell::Null) => Ordering::Equal,
        (Cell::Null, _) => Ordering::Less,
        (_, Cell::Null) | (Cell::Text(_), _) => Ordering::Greater,
        (_, Cell::Text(_)) => Ordering::Less,
    }
}

/// Applies a stage after the aggregate to its rows.
pub(crate) fn reshape(answer: &mut Answer, stage: &Stage) -> Result<()> {
    let find = |name: &Name| {
        answer
            .columns
            .iter()
            .position(|h| h.name == name.text)
            .ok_or_else(|| {
                let names: Vec<&str> = answer.columns.iter().map(|h| h.name.as_str()).collect();
                Error::spanned(
                    name.span,
                    format!(
                        "no column `{}` after the aggregate (columns: {})",
                        name.text,
                        names.join(", ")
                    ),
                )
            })
    };
    match stage {
        Stage::Sort { key, descending } => {
            let at = find(key)?;
            answer.rows.sort_by(|a, b| {
                let order = compare_cells(&a[at], &b[at]);
                if *descending { order.reverse() } else { order }
            });
        }
        Stage::Limit(n) => answer.rows.truncate(*n),
        Stage::Fields(names) => {
            let keep: Vec<usize> = names.iter().map(&find).collect::<Result<_>>()?;
            answer.columns = keep.iter().map(|i| answer.columns[*i].clone()).collect();
            for row in &mut answer.rows {
                *row = keep.iter().map(|i| row[*i].clone()).collect();
            }
        }
        Stage::Aggregate { aggs, .. } => {
            return Err(Error::spanned(
                aggs[0].span,
                "a query has one aggregate stage",
            ));
        }
        Stage::Top { agg, .. } => {
            return Err(Error::spanned(agg.span, "a query has one aggregate stage"));
        }
        Stage::Explain(span) => {
            return Err(Error::spanned(
                *span,
                "`explain` is the only stage of its query: it takes the selected calls as they are",
            ));
        }
    }
    Ok(())
}
