//! `str()` of a pointer saved in a map: bpftrace's idiom for a syscall's
//! input string, saved at its entry and printed at its exit
//! (`@filename[tid] = args.filename;` … `str(@filename[tid])`, in
//! opensnoop, statsnoop and gethostlatency).
//!
//! weft reads strings in the kernel when an event happens; user space
//! cannot read another process's memory later. So such a map keeps the
//! string itself, read where the pointer is saved: the assignment becomes
//! `@filename[tid] = str(args.filename)`. That is the same text wherever
//! the pointer names an input (`const char *`, or an untyped `argN`); the
//! checker refuses a pointer to data the kernel may still write (a
//! `char *buf` that a read fills), whose string only exists at the exit.

use std::collections::HashSet;

use crate::ast::{Expr, ExprKind, Program, Stmt, for_each_expr};
use crate::error::Span;

/// Rewrites `program` so maps read through `str()` hold strings; returns
/// the spans of the pointers whose string is now read where they are saved.
pub(crate) fn read_where_saved(program: &mut Program) -> HashSet<Span> {
    let mut read = HashSet::new();
    for item in &program.items {
        item.predicate
            .iter()
            .for_each(|e| maps_read_as_strings(e, &mut read));
        for_each_expr(&item.body, &mut |e| maps_read_as_strings(e, &mut read));
    }
    let mut saved = HashSet::new();
    for item in &mut program.items {
        save_strings(&mut item.body, &read, &mut saved);
    }
    saved
}

/// Names of maps that `str(@map[...])` reads in `expr`.
fn maps_read_as_strings(expr: &Expr, out: &mut HashSet<String>) {
    if let ExprKind::Call(name, args) = &expr.kind
        && name == "str"
        && let Some(Expr {
            kind: ExprKind::Map(map),
            ..
        }) = args.first()
    {
        out.insert(map.name.clone());
    }
    for child in expr.children() {
        maps_read_as_strings(child, out);
    }
}

/// Turns `@map[k] = POINTER` into `@map[k] = str(POINTER)` for the maps in
/// `read`, noting each pointer's span in `saved`.
fn save_strings(stmts: &mut [Stmt], read: &HashSet<String>, saved: &mut HashSet<Span>) {
    for stmt in stmts {
        match stmt {
            Stmt::MapAssign { map, value } if read.contains(&map.name) => {
                if matches!(value.kind, ExprKind::Field(_) | ExprKind::Arg(_)) {
                    let span = value.span;
                    saved.insert(span);
                    let placeholder = Expr {
                        kind: ExprKind::Int(0),
                        span,
                    };
                    let pointer = std::mem::replace(value, placeholder);
                    value.kind = ExprKind::Call("str".into(), vec![pointer]);
                }
            }
            Stmt::If {
                then, otherwise, ..
            } => {
                save_strings(then, read, saved);
                save_strings(otherwise, read, saved);
            }
            _ => {}
        }
    }
}
