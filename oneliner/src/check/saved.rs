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
//!
//! The kernel cannot read a page the process has not touched yet (it may
//! not fault at a probe), and an input's page often is not touched before
//! the syscall runs: its string read at the entry comes back empty, where
//! bpftrace reads it at the exit. So for a map always keyed by `[tid]`
//! the kernel also keeps the pointer per thread where it is saved, and
//! reads its string again where the map is read (`STRING_SAVED`); weft
//! takes that string when it is there.
//!
//! A map of struct pointers so kept is read as one where its members are
//! (`@sk[tid] = arg0;` … `((struct sock *)@sk[tid])->sk_state`, the idiom
//! of a function's exit, whose arguments are gone): the kernel keeps the
//! pointer per thread where it is saved (an argument or field), and reads
//! the members through it at the later event (`Start::Saved`). The map
//! itself still holds the address.

use std::collections::{HashMap, HashSet};

use crate::ast::{Builtin, Expr, ExprKind, MapRef, Program, Stmt, for_each_map_target};
use crate::error::Span;

/// The maps whose pointers' strings are read where they are saved.
#[derive(Debug, Default)]
pub(crate) struct Saved {
    /// The pointers saved, by span.
    pub spans: HashSet<Span>,
    /// Those maps always keyed by `[tid]`: the kernel keeps their pointers
    /// per thread too.
    pub by_thread: HashSet<String>,
    /// The maps whose values are read as struct pointers, with the struct
    /// their assignment casts to (`@sk[tid] = (struct sock *)arg0`), if it
    /// does; those in `by_thread` are kept per thread.
    pub pointers: HashMap<String, Option<String>>,
}

/// Rewrites `program` so maps read through `str()` hold strings.
pub(crate) fn read_where_saved(program: &mut Program) -> Saved {
    let mut read = HashSet::new();
    let mut pointers = HashMap::new();
    for item in &program.items {
        item.for_each_expr(&mut |e| {
            maps_read_as_strings(e, &mut read);
            maps_read_as_pointers(e, &mut pointers);
        });
    }
    // A map read through str() holds strings.
    pointers.retain(|map, _| !read.contains(map));
    for item in &program.items {
        pointee_casts(&item.body, &mut pointers);
    }
    let mut by_thread: HashSet<String> = read.iter().chain(pointers.keys()).cloned().collect();
    for item in &program.items {
        let mut check = |e: &Expr| {
            if let ExprKind::Map(map) = &e.kind {
                keyed_by_tid(map, &mut by_thread);
            }
        };
        item.for_each_expr(&mut |e| e.visit(&mut check));
        for_each_map_target(&item.body, &mut |map| keyed_by_tid(map, &mut by_thread));
    }
    let mut spans = HashSet::new();
    for item in &mut program.items {
        save_strings(&mut item.body, &read, &mut spans);
    }
    Saved {
        spans,
        by_thread,
        pointers,
    }
}

/// Names of maps whose values `expr` reads as struct pointers:
/// `(struct T *)@map[...]`, `@map[...]->member`.
fn maps_read_as_pointers(expr: &Expr, out: &mut HashMap<String, Option<String>>) {
    expr.visit(&mut |e| {
        let map = match &e.kind {
            ExprKind::StructCast(_, inner) => inner,
            ExprKind::Member {
                base, arrow: true, ..
            } => base,
            _ => return,
        };
        if let ExprKind::Map(map) = &map.kind {
            out.entry(map.name.clone()).or_insert(None);
        }
    });
}

/// Notes the struct each map of `pointers` is assigned a cast to.
fn pointee_casts(stmts: &[Stmt], pointers: &mut HashMap<String, Option<String>>) {
    for stmt in stmts {
        match stmt {
            Stmt::MapAssign { map, value } => {
                if let (Some(record @ None), ExprKind::StructCast(name, _)) =
                    (pointers.get_mut(&map.name), &value.kind)
                {
                    *record = Some(name.clone());
                }
            }
            Stmt::If {
                then, otherwise, ..
            } => {
                pointee_casts(then, pointers);
                pointee_casts(otherwise, pointers);
            }
            Stmt::While { body, .. } => pointee_casts(body, pointers),
            _ => {}
        }
    }
}

/// Drops `map` from `maps` unless this use is keyed by `[tid]`, or names
/// the whole map (`clear(@filename)`: a keyed map has no value without
/// a key).
fn keyed_by_tid(map: &MapRef, maps: &mut HashSet<String>) {
    if !map.keys.is_empty()
        && !matches!(
            map.keys.as_slice(),
            [Expr {
                kind: ExprKind::Builtin(Builtin::Tid),
                ..
            }]
        )
    {
        maps.remove(&map.name);
    }
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
/// `read`, noting each field's or argument's span in `saved`.
fn save_strings(stmts: &mut [Stmt], read: &HashSet<String>, saved: &mut HashSet<Span>) {
    for stmt in stmts {
        match stmt {
            Stmt::MapAssign { map, value } if read.contains(&map.name) => {
                if matches!(
                    value.kind,
                    ExprKind::Field(_) | ExprKind::Arg(_) | ExprKind::Member { .. }
                ) {
                    let span = value.span;
                    // A member's string is read where it is saved, as ever
                    // (dcsnoop's `@fname[tid] = $name->name`); a field's
                    // pointer may be kept to read it again (`keep_pointer`).
                    if !matches!(value.kind, ExprKind::Member { .. }) {
                        saved.insert(span);
                    }
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
            Stmt::While { body, .. } => save_strings(body, read, saved),
            _ => {}
        }
    }
}
