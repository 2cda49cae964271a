//! Start times kept in the kernel: bpftrace's latency idiom,
//!
//! ```text
//! tracepoint:raw_syscalls:sys_enter { @start[tid] = nsecs; }
//! tracepoint:raw_syscalls:sys_exit /@start[tid]/ {
//!     @ns = hist(nsecs - @start[tid]); delete(@start[tid]);
//! }
//! ```
//!
//! sends every event of both probes to user space only to pair them there.
//! When the kernel can read the key itself (tid, pid, an integer field or
//! argument), it keeps such a map instead: the storing probe writes the
//! time into the kernel's map and sends nothing when that was all it did;
//! the reading probe takes the time out (dropping the event where the
//! predicate asks for a start and there is none, deleting it where the
//! probe deletes it) and hands it to the event, where `@start[key]` now
//! reads it (`Builtin::KernelStart`). What it then measures is an
//! aggregation the kernel may keep too (`kernel_agg.rs`), so the idiom
//! sends no events at all. The starts no probe took are printed at exit
//! as bpftrace prints them (`Runtime::take_kernel_starts`).
//!
//! A map qualifies when every probe the kernel fires uses it in one of
//! these ways only, and END, which runs after the kernel's map is read
//! back, in any way:
//! - the store, `@m[key] = nsecs`, a statement of its own at the top of a
//!   probe whose predicate the kernel tests whole, and which uses `@m` in
//!   no other way;
//! - reads of `@m[key]`, all with the same key, and at most one
//!   `delete(@m[key])`, a statement of its own at the top after every
//!   read, in a probe that
//!   neither stores it nor calls `exit()` (which would leave the start in
//!   the map to be printed), and whose predicate, but for `@m[key]`
//!   itself, the kernel tests whole when it deletes (else the kernel would
//!   delete where user space's predicate fails).

use crate::{
    ast::{BinOp, Builtin, Expr, ExprKind, Item, Stmt, for_each_expr, for_each_map_target},
    expand::Target,
    plan::{Attach, KeptStart, MapKind, Plan, Subject},
    push_down::{split_and, subject},
    value::Type,
};

/// Keeps the maps of start times the kernel can keep there, rewriting the
/// probes that use them.
pub(crate) fn keep_in_kernel(plan: &mut Plan) {
    // A probe stores or takes one start at most.
    let mut claimed = vec![false; plan.program.items.len()];
    for map in 0..plan.maps.len() {
        let info = &plan.maps[map];
        if info.kind != MapKind::Value(Type::Int) || info.keys != [Type::Int] {
            continue;
        }
        if let Some(uses) = uses(plan, map, &claimed) {
            for (item, use_) in uses {
                claimed[item] = true;
                apply(plan, map, item, &use_);
            }
        }
    }
}

/// How one probe uses a map of starts, with the key at each of its
/// attach points.
struct Use {
    keys: Vec<Subject>,
    how: How,
}

enum How {
    /// The statement at this index stores the start.
    Store(usize),
    /// The probe takes the start; `delete`: the statement at this index
    /// deletes it.
    Take {
        required: bool,
        delete: Option<usize>,
    },
}

/// Every probe's use of map `map`, when the kernel can keep it.
fn uses(plan: &Plan, map: usize, claimed: &[bool]) -> Option<Vec<(usize, Use)>> {
    let name = &plan.maps[map].name;
    let mut uses = Vec::new();
    for (index, item) in plan.program.items.iter().enumerate() {
        let seen = mentions(item, name);
        if seen.none() {
            continue;
        }
        let attaches: Vec<&Attach> = plan.attaches.iter().filter(|a| a.item == index).collect();
        if attaches.iter().all(|a| a.target == Target::End) {
            continue;
        }
        if seen.other || claimed[index] || attaches.iter().any(|a| !a.in_kernel()) {
            return None;
        }
        uses.push((index, probe_use(item, name, &attaches, &seen)?));
    }
    let stores = uses.iter().any(|(_, u)| matches!(u.how, How::Store(_)));
    let takes = uses.iter().any(|(_, u)| matches!(u.how, How::Take { .. }));
    (stores && takes).then_some(uses)
}

/// What one probe does with the map, when the kernel can do it.
fn probe_use(item: &Item, name: &str, attaches: &[&Attach], seen: &Mentions) -> Option<Use> {
    let mut conjuncts = Vec::new();
    if let Some(predicate) = &item.predicate {
        split_and(predicate, &mut conjuncts);
    }
    // Whether the kernel tests every conjunct but `skip` of them.
    let whole = |skip: usize| {
        attaches
            .iter()
            .all(|a| conjuncts.len() - skip == a.filters.len() + usize::from(a.comm.is_some()))
    };
    match (seen.stores.as_slice(), seen.reads.is_empty(), &seen.delete) {
        ([(at, key)], true, None) => {
            let keys = same_key(&[key], attaches)?;
            whole(0).then_some(Use {
                keys,
                how: How::Store(*at),
            })
        }
        ([], _, delete) => {
            let mut all: Vec<&Expr> = seen.reads.iter().collect();
            all.extend(delete.as_ref().map(|(_, key)| key));
            let keys = same_key(&all, attaches)?;
            // `/@start[key]/`: its key is among the reads, all one.
            let required = conjuncts.iter().any(|c| asks_for_start(c, name));
            if let Some((at, _)) = delete
                && (seen.last_read.is_some_and(|read| read > *at)
                    || calls_exit(&item.body)
                    || !whole(usize::from(required)))
            {
                return None;
            }
            Some(Use {
                keys,
                how: How::Take {
                    required,
                    delete: delete.as_ref().map(|(at, _)| *at),
                },
            })
        }
        _ => None,
    }
}

/// The subject every key in `keys` is at each attach point, when they are
/// all one and the kernel reads it.
fn same_key(keys: &[&Expr], attaches: &[&Attach]) -> Option<Vec<Subject>> {
    attaches
        .iter()
        .map(|attach| {
            let first = subject(&keys.first()?.kind, attach)?;
            keys.iter()
                .all(|key| subject(&key.kind, attach) == Some(first))
                .then_some(first)
        })
        .collect()
}

fn calls_exit(body: &[Stmt]) -> bool {
    let mut exits = false;
    for_each_expr(body, &mut |e| {
        e.visit(&mut |e| exits |= matches!(&e.kind, ExprKind::Call(name, _) if name == "exit"));
    });
    exits
}

/// Where a probe mentions a map.
#[derive(Default)]
struct Mentions {
    /// Top-level `@m[key] = nsecs`: the statement's index and the key.
    stores: Vec<(usize, Expr)>,
    /// Keys of `@m[key]` read as values, in the predicate or the body.
    reads: Vec<Expr>,
    /// The top-level `delete(@m[key])`: its index and key.
    delete: Option<(usize, Expr)>,
    /// The index of the last statement that reads `@m[key]`.
    last_read: Option<usize>,
    /// Any other mention: another assignment, an update, a whole-map call,
    /// a store or delete inside a block, a second delete.
    other: bool,
}

impl Mentions {
    fn none(&self) -> bool {
        self.stores.is_empty() && self.reads.is_empty() && self.delete.is_none() && !self.other
    }
}

fn mentions(item: &Item, name: &str) -> Mentions {
    let mut seen = Mentions::default();
    if let Some(predicate) = &item.predicate {
        reads(predicate, name, &mut seen);
    }
    for (at, stmt) in item.body.iter().enumerate() {
        let before = seen.reads.len();
        match stmt {
            Stmt::MapAssign { map, value } if map.name == name => match map.keys.as_slice() {
                [key] if matches!(value.kind, ExprKind::Builtin(Builtin::Nsecs)) => {
                    seen.stores.push((at, key.clone()));
                    reads(key, name, &mut seen);
                }
                _ => seen.other = true,
            },
            Stmt::Expr(Expr {
                kind: ExprKind::Call(call, args),
                ..
            }) if call == "delete" => match args.as_slice() {
                [
                    Expr {
                        kind: ExprKind::Map(map),
                        ..
                    },
                ] if map.name == name => {
                    if seen.delete.is_some() || map.keys.len() != 1 {
                        seen.other = true;
                    } else {
                        seen.delete = Some((at, map.keys[0].clone()));
                        reads(&map.keys[0], name, &mut seen);
                    }
                }
                _ => args.iter().for_each(|a| reads(a, name, &mut seen)),
            },
            _ => {
                for_each_map_target(std::slice::from_ref(stmt), &mut |m| {
                    seen.other |= m.name == name;
                });
                for_each_expr(std::slice::from_ref(stmt), &mut |e| {
                    reads(e, name, &mut seen);
                });
            }
        }
        if seen.reads.len() > before {
            seen.last_read = Some(at);
        }
    }
    seen
}

/// Notes the mentions of map `name` in `expr`.
fn reads(expr: &Expr, name: &str, seen: &mut Mentions) {
    match &expr.kind {
        ExprKind::Map(map) if map.name == name => match map.keys.as_slice() {
            [key] => seen.reads.push(key.clone()),
            // The whole map: clear(@m), print(@m), ...
            _ => seen.other = true,
        },
        // Deleting inside a block or an expression.
        ExprKind::Call(call, args)
            if call == "delete"
                && matches!(args.first(), Some(Expr { kind: ExprKind::Map(m), .. }) if m.name == name) =>
        {
            seen.other = true;
        }
        _ => {}
    }
    for child in expr.children() {
        reads(child, name, seen);
    }
}

/// Rewrites item `item` for the kernel to keep map `map`, and tells its
/// attach points what to do.
fn apply(plan: &mut Plan, map: usize, item: usize, use_: &Use) {
    let name = plan.maps[map].name.clone();
    let probe = &mut plan.program.items[item];
    let starts = match use_.how {
        How::Store(at) => {
            probe.body.remove(at);
            let send = !probe.body.is_empty();
            use_.keys
                .iter()
                .map(|&key| KeptStart::Store { map, key, send })
                .collect::<Vec<_>>()
        }
        How::Take { required, delete } => {
            if let Some(at) = delete {
                probe.body.remove(at);
            }
            if required {
                probe.predicate = probe.predicate.take().and_then(|p| without_read(p, &name));
            }
            probe.rewrite(&mut |e| {
                if matches!(&e.kind, ExprKind::Map(m) if m.name == name) {
                    e.kind = ExprKind::Builtin(Builtin::KernelStart);
                }
            });
            use_.keys
                .iter()
                .map(|&key| KeptStart::Take {
                    map,
                    key,
                    required,
                    delete: delete.is_some(),
                })
                .collect()
        }
    };
    let attaches = plan.attaches.iter_mut().filter(|a| a.item == item);
    for (attach, start) in attaches.zip(starts) {
        attach.start = Some(start);
    }
}

/// Whether `conjunct` asks for a start in map `name`: `@start[key]`, or
/// `@start[key] != 0`.
fn asks_for_start(conjunct: &Expr, name: &str) -> bool {
    let is_map = |e: &Expr| matches!(&e.kind, ExprKind::Map(m) if m.name == name);
    match &conjunct.kind {
        ExprKind::Binary(BinOp::Ne, left, right) => {
            (is_map(left) && matches!(right.kind, ExprKind::Int(0)))
                || (is_map(right) && matches!(left.kind, ExprKind::Int(0)))
        }
        _ => is_map(conjunct),
    }
}

/// The predicate without its conjuncts that ask for a start in map `name`
/// (`/@start[tid]/`), which the kernel now tests; `None` when nothing is
/// left.
fn without_read(predicate: Expr, name: &str) -> Option<Expr> {
    match predicate.kind {
        ExprKind::Binary(BinOp::LogicalAnd, left, right) => {
            match (without_read(*left, name), without_read(*right, name)) {
                (Some(left), Some(right)) => Some(Expr {
                    kind: ExprKind::Binary(BinOp::LogicalAnd, Box::new(left), Box::new(right)),
                    span: predicate.span,
                }),
                (one, other) => one.or(other),
            }
        }
        _ if asks_for_start(&predicate, name) => None,
        _ => Some(predicate),
    }
}
