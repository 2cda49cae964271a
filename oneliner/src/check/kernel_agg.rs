//! Aggregations kept in the kernel: a probe whose only action is
//! `@map[keys] = f(sample)`, with `f` one of `count`, `sum`, `avg`, `min`,
//! `max`, `stats`, `hist` and `lhist`, whose keys and sample the kernel
//! reads itself (comm, probe, func, pid, tid, uid, cpu, an integer field
//! of the context, argN, retval; a sample may also be a constant, or the
//! time since a start the kernel keeps, `(nsecs - @start[tid]) / 1000`), and
//! whose predicate the kernel tests whole, aggregates in a kernel map and
//! sends no event. What user space would have done with the event is
//! exactly that update, so the printed map is the same; bpftrace
//! aggregates there too. `percentiles()` stays in user space, where it is
//! exact.
//!
//! Only maps whose values nothing reads qualify: they are printed
//! (`print(@map)`, or at the end), never read in an expression, cleared,
//! zeroed or deleted from, since user space holds only what it aggregated
//! itself until it asks the kernel for the rest.

use std::collections::HashSet;

use weft_abi::oneliner::KEY_PARTS;

use crate::{
    ast::{BinOp, Builtin, Expr, ExprKind, Stmt, UnOp, for_each_expr},
    plan::{Attach, KeptStart, KernelAgg, KeyPart, MapKind, Plan, Sample},
    push_down::{split_and, subject},
};

/// Marks the probes whose aggregation the kernel can keep.
pub(crate) fn aggregate_in_kernel(plan: &mut Plan) {
    let read = maps_read(plan);
    let chosen: Vec<Option<KernelAgg>> = plan
        .attaches
        .iter()
        .map(|attach| only_action(plan, attach, &read))
        .collect();
    for (attach, agg) in plan.attaches.iter_mut().zip(chosen) {
        attach.agg = agg;
    }
}

/// The probe's only action as an aggregation the kernel keeps. (One per
/// probe: a second doubles the kernel's verification time, see
/// `ProbeConfig::agg` in `weft_abi::oneliner`.)
fn only_action(plan: &Plan, attach: &Attach, read: &HashSet<String>) -> Option<KernelAgg> {
    let item = &plan.program.items[attach.item];
    let [stmt] = item.body.as_slice() else {
        return None;
    };
    if !attach.in_kernel() {
        return None;
    }
    let mut conjuncts = Vec::new();
    if let Some(predicate) = &item.predicate {
        split_and(predicate, &mut conjuncts);
    }
    // Every predicate part was pushed down, or user space would drop
    // events the kernel aggregated.
    if conjuncts.len() != attach.filters.len() + usize::from(attach.comm.is_some()) {
        return None;
    }
    kernel_agg(stmt, plan, attach, read)
}

/// The aggregation `stmt` is, when the kernel can keep it.
fn kernel_agg(
    stmt: &Stmt,
    plan: &Plan,
    attach: &Attach,
    read: &HashSet<String>,
) -> Option<KernelAgg> {
    let Stmt::MapAssign { map, value } = stmt else {
        return None;
    };
    let index = plan.map(&map.name)?;
    let ExprKind::Call(name, args) = &value.kind else {
        return None;
    };
    // percentiles() stays exact in user space.
    let aggregates = !matches!(
        plan.maps[index].kind,
        MapKind::Percentiles | MapKind::Value(_)
    );
    if !aggregates || read.contains(&map.name) || map.keys.len() > KEY_PARTS {
        return None;
    }
    let keys = map
        .keys
        .iter()
        .map(|key| key_part(key, attach))
        .collect::<Option<Vec<_>>>()?;
    let sample = match args.first() {
        Some(arg) if name != "count" => Some(sample(arg, attach)?),
        _ => None,
    };
    Some(KernelAgg {
        map: index,
        kind: plan.maps[index].kind,
        keys,
        sample,
    })
}

fn key_part(key: &Expr, attach: &Attach) -> Option<KeyPart> {
    match &key.kind {
        ExprKind::Builtin(Builtin::Comm) => Some(KeyPart::Comm),
        ExprKind::Builtin(Builtin::Probe) => Some(KeyPart::Probe),
        ExprKind::Builtin(Builtin::Func) => Some(KeyPart::Func),
        kind => subject(kind, attach).map(KeyPart::Int),
    }
}

fn sample(arg: &Expr, attach: &Attach) -> Option<Sample> {
    if let Some(divisor) = elapsed(arg, attach) {
        return Some(Sample::Elapsed { divisor });
    }
    match &arg.kind {
        ExprKind::Int(n) => Some(Sample::Const(*n)),
        ExprKind::Unary(UnOp::Neg, inner) => match inner.kind {
            ExprKind::Int(n) => Some(Sample::Const(n.wrapping_neg())),
            _ => None,
        },
        kind => subject(kind, attach).map(Sample::Int),
    }
}

/// The divisor of `(nsecs - @start[key]) / divisor` (1 without one), of
/// a start the probe takes in the kernel (`starts.rs`).
fn elapsed(arg: &Expr, attach: &Attach) -> Option<i64> {
    match &arg.kind {
        ExprKind::Binary(BinOp::Sub, now, start)
            if matches!(now.kind, ExprKind::Builtin(Builtin::Nsecs))
                && matches!(start.kind, ExprKind::Builtin(Builtin::KernelStart))
                && matches!(attach.start, Some(KeptStart::Take { .. })) =>
        {
            Some(1)
        }
        ExprKind::Binary(BinOp::Div, inner, divisor) => match divisor.kind {
            ExprKind::Int(d) if d > 0 && elapsed(inner, attach) == Some(1) => Some(d),
            _ => None,
        },
        _ => None,
    }
}

/// Maps whose values the program reads, clears, zeroes or deletes from:
/// every mention of a map in an expression but `print(@map, ...)`.
fn maps_read(plan: &Plan) -> HashSet<String> {
    let mut read = HashSet::new();
    for item in &plan.program.items {
        if let Some(predicate) = &item.predicate {
            mentions(predicate, &mut read);
        }
        for_each_expr(&item.body, &mut |expr| match &expr.kind {
            // Printing a whole map reads none of its values.
            ExprKind::Call(name, args) if name == "print" => match args.split_first() {
                Some((
                    Expr {
                        kind: ExprKind::Map(map),
                        ..
                    },
                    rest,
                )) => map
                    .keys
                    .iter()
                    .chain(rest)
                    .for_each(|e| mentions(e, &mut read)),
                _ => args.iter().for_each(|e| mentions(e, &mut read)),
            },
            _ => mentions(expr, &mut read),
        });
    }
    read
}

/// Adds the maps `expr` mentions to `out`.
fn mentions(expr: &Expr, out: &mut HashSet<String>) {
    if let ExprKind::Map(map) = &expr.kind {
        out.insert(map.name.clone());
    }
    for child in expr.children() {
        mentions(child, out);
    }
}
