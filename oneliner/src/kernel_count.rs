//! `count()` kept in the kernel: a probe whose only action is
//! `@map[key] = count()` (key `comm`, `pid`, `tid`, `cpu` or none), whose
//! predicate the kernel tests whole, counts in a kernel map and sends no
//! event. What user space would have done with the event is exactly that
//! increment, so the printed map is the same; bpftrace aggregates there
//! too.
//!
//! Only maps whose values nothing reads qualify: they are printed
//! (`print(@map)`, or at the end), never read in an expression, cleared,
//! zeroed or deleted from, since user space holds only what it counted
//! itself until it asks the kernel for the rest.

use std::collections::HashSet;

use crate::{
    ast::{Builtin, Expr, ExprKind, Stmt, for_each_expr},
    plan::{CountKey, KernelCount, MapKind, Plan},
    push_down::split_and,
};

/// Marks the probes the kernel can count for.
pub(crate) fn count_in_kernel(plan: &mut Plan) {
    let read = maps_read(plan);
    for attach in plan.attaches.iter_mut().filter(|a| a.in_kernel()) {
        let item = &plan.program.items[attach.item];
        let [Stmt::MapAssign { map, value }] = item.body.as_slice() else {
            continue;
        };
        let Some(index) = plan.maps.iter().position(|m| m.name == map.name) else {
            continue;
        };
        let counts =
            matches!(&value.kind, ExprKind::Call(name, args) if name == "count" && args.is_empty());
        if !counts || plan.maps[index].kind != MapKind::Count || read.contains(&map.name) {
            continue;
        }
        let key = match map.keys.as_slice() {
            [] => CountKey::None,
            [
                Expr {
                    kind: ExprKind::Builtin(builtin),
                    ..
                },
            ] => match builtin {
                Builtin::Comm => CountKey::Comm,
                Builtin::Pid => CountKey::Pid,
                Builtin::Tid => CountKey::Tid,
                Builtin::Cpu => CountKey::Cpu,
                _ => continue,
            },
            _ => continue,
        };
        let pushed = attach.filters.len() + usize::from(attach.comm.is_some());
        let mut conjuncts = Vec::new();
        if let Some(predicate) = &item.predicate {
            split_and(predicate, &mut conjuncts);
        }
        if conjuncts.len() != pushed {
            continue;
        }
        attach.count = Some(KernelCount { map: index, key });
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
