//! Which store operator answers: the index, part of a partitioned index,
//! and value range whose chunk summaries hold an aggregate's or a
//! condition's values (`dur` where `name = "sendto"` is sendto's part of
//! the latency index). The engine asks; nothing here reads the store.

use std::ops::RangeInclusive;

use weft_store::IndexId;

use crate::{
    aggregate::AggSpec,
    ast::{Func, Op},
    bind::Pred,
    catalog::{Kind, Read, SourceColumns},
};

/// The part of a partitioned index over `column` that `pred` selects, when
/// `pred` is the single condition `P = v` (or `P in (v)`) on the index's
/// partition field: "p99 of `dur` where `name` = sendto" is then read from
/// the summaries of sendto's part.
pub(crate) fn part_for(
    source: &SourceColumns,
    column: usize,
    pred: &Pred,
) -> Option<(IndexId, u32)> {
    let (by, value) = match pred {
        Pred::Compare {
            column,
            op: Op::Eq,
            value,
        } => (*column, *value),
        Pred::In { column, values } if values.len() == 1 => (*column, values[0]),
        Pred::And(all) if all.len() == 1 => return part_for(source, column, &all[0]),
        _ => return None,
    };
    let Read::Field(field) = &source.columns[by].read else {
        return None;
    };
    let part = u32::try_from(value).ok()?;
    source.columns[column]
        .partitioned
        .iter()
        .find(|(_, f, count)| f == field && part < *count)
        .map(|(id, _, _)| (*id, part))
}

/// The partitioned index (and its count of parts) over every column that
/// `specs` aggregate whose partition field is column `by`'s field, if
/// there is one and every spec can come from summaries.
pub(crate) fn part_index(
    source: &SourceColumns,
    specs: &[AggSpec],
    by: usize,
) -> Option<(IndexId, u32)> {
    let Read::Field(field) = &source.columns[by].read else {
        return None;
    };
    let over = |c: usize| {
        let col = &source.columns[c];
        matches!(col.read, Read::Field(_))
            .then(|| col.partitioned.iter().find(|(_, f, _)| f == field))
            .flatten()
            .map(|(id, _, count)| (*id, *count))
    };
    let mut chosen: Option<(IndexId, u32)> = None;
    for spec in specs {
        let pick = match (spec.func, spec.column) {
            (Func::Hist, _) => return None,
            (Func::Count, _) => continue,
            (_, Some(c)) => over(c)?,
            (_, None) => return None,
        };
        if chosen.is_some_and(|c| c != pick) {
            return None;
        }
        chosen = Some(pick);
    }
    // Counts alone: any partitioned index by that field counts them.
    chosen.or_else(|| (0..source.columns.len()).find_map(over))
}

/// Whether every part of `answers` is a group of its own when grouping
/// by column `by` of a partitioned index with `count` parts: values past
/// the count share one part, and a name may stand for several values.
pub(crate) fn parts_are_groups(
    source: &SourceColumns,
    by: usize,
    count: u32,
    mut parts: impl Iterator<Item = u32>,
) -> bool {
    let named = |part: u32| match &source.columns[by].kind {
        Kind::Named(names) => names.group_of(i64::from(part)) == i64::from(part),
        _ => true,
    };
    parts.all(|part| part < count && named(part))
}

/// The store index (and part) that answers each aggregate from chunk
/// summaries, if every one can be: with no condition, any indexed field
/// (and `count` from index 0); with one condition picking a part of a
/// partitioned index, that part.
pub(crate) fn summary_picks(
    source: &SourceColumns,
    pred: Option<&Pred>,
    specs: &[AggSpec],
) -> Option<Vec<Pick>> {
    whole_picks(source, pred, specs).or_else(|| {
        // Values in a range: counts and totals of that column only.
        let (column, index, part, range) = ranged_pick(source, pred?)?;
        specs
            .iter()
            .map(|spec| match spec.func {
                Func::Count => Some((index, part, range.clone())),
                Func::Sum | Func::Min | Func::Max | Func::Avg if spec.column == Some(column) => {
                    Some((index, part, range.clone()))
                }
                _ => None,
            })
            .collect()
    })
}

/// The index (and part) whose summaries hold column `c`'s values: with
/// no condition, the index over the stored field; with one condition
/// picking a part of a partitioned index over `c`, that part.
pub(crate) fn column_pick(
    source: &SourceColumns,
    pred: Option<&Pred>,
    c: usize,
) -> Option<(IndexId, Option<u32>)> {
    match pred {
        None => {
            let column = &source.columns[c];
            matches!(column.read, Read::Field(_))
                .then_some(column.index)
                .flatten()
                .map(|index| (index, None))
        }
        Some(pred) => part_for(source, c, pred).map(|(index, part)| (index, Some(part))),
    }
}

/// Picks over whole indexes (or one part), when the condition is absent
/// or only picks the part.
fn whole_picks(
    source: &SourceColumns,
    pred: Option<&Pred>,
    specs: &[AggSpec],
) -> Option<Vec<Pick>> {
    const ALL: RangeInclusive<i64> = i64::MIN..=i64::MAX;
    specs
        .iter()
        .map(|spec| match (pred, spec.func, spec.column) {
            (_, Func::Hist, _) => None,
            (None, Func::Count, _) => Some((0, None, ALL)),
            (Some(pred), Func::Count, _) => (0..source.columns.len())
                .find_map(|c| part_for(source, c, pred))
                .map(|(index, part)| (index, Some(part), ALL)),
            (pred, _, Some(c)) => {
                column_pick(source, pred, c).map(|(index, part)| (index, part, ALL))
            }
            (_, _, None) => None,
        })
        .collect()
}

/// The store index, part and value range of a summary operator.
pub(crate) type Pick = (IndexId, Option<u32>, RangeInclusive<i64>);

/// A condition that is a value range on one indexed column, alone
/// (`dur > 1ms`) or with the condition picking a part of a partitioned
/// index over it (`name = "read" and dur > 1ms`): the column and its pick.
fn ranged_pick(
    source: &SourceColumns,
    pred: &Pred,
) -> Option<(usize, IndexId, Option<u32>, RangeInclusive<i64>)> {
    let conjuncts = pred.clone().conjuncts();
    for (i, bound) in conjuncts.iter().enumerate() {
        let mut columns = Vec::new();
        bound.columns(&mut columns);
        let &[column] = &columns[..] else { continue };
        let Some((lo, hi)) = bound.exact_range_of(column) else {
            continue;
        };
        let others: Vec<&Pred> = conjuncts
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .map(|(_, p)| p)
            .collect();
        let pick = match others[..] {
            [] => source.columns[column].index.map(|index| (index, None)),
            [picker] => part_for(source, column, picker).map(|(index, part)| (index, Some(part))),
            _ => None,
        };
        if let Some((index, part)) = pick {
            return Some((column, index, part, lo..=hi));
        }
    }
    None
}
