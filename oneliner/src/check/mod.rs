//! Checks a parsed program against the running kernel, in three stages:
//! its probes expand to attach points with their fields (`expand.rs`),
//! every expression gets a type and every map a kind, and the simple parts
//! of each predicate go to the kernel (`push_down.rs`). The result is a
//! [`Plan`] (`plan.rs`): what the kernel must copy per probe and which
//! predicate parts it can test itself.
//!
//! The checker walks each item once, split by job: here the program's maps
//! and statements, `exprs.rs` the types of expressions (operators,
//! builtins, functions), `reads.rs` what the kernel reads for them (fields,
//! strings, struct members, memory); `tests.rs` holds the unit tests.

use std::collections::{HashMap, HashSet};

use crate::{
    ast::{BinOp, Builtin, Expr, ExprKind, MapRef, Program, SizeOf, Stmt, UnOp},
    error::{Error, Result, Span},
    expand::expand,
    format,
    kernel::{Element, Field, FieldKind, Kernel, KernelType},
    kernel_agg::aggregate_in_kernel,
    members::Bound,
    plan::Start,
    push_down::push_down,
    saved::Saved,
    stack::StackMode,
    value::Type,
};

/// Bytes of `struct pt_regs` on x86-64.
pub const PT_REGS_SIZE: u16 = 168;
/// Strings the kernel reads per event at most.
pub use weft_abi::oneliner::MAX_STRINGS;
/// Context bytes the kernel copies per event at most.
pub const MAX_RAW: u16 = 256;

pub use crate::{
    expand::Target,
    plan::{Attach, Filter, MapInfo, MapKind, Operand, Plan, Subject},
};

/// Checks `program` against `kernel`: what the kernel can keep (start
/// times) and aggregate, it does.
pub fn check(program: Program, kernel: &dyn Kernel) -> Result<Plan> {
    alone_with_iterators(&program)?;
    let raw = !program.all_fields;
    let mut plan = check_items(program, kernel, raw)?;
    // Before the aggregations: a probe that takes a start may then
    // aggregate what it measures.
    crate::starts::keep_in_kernel(&mut plan);
    aggregate_in_kernel(&mut plan);
    Ok(plan)
}

/// An error where an iterator shares the program with a probe other than
/// BEGIN and END: its probe runs once over the kernel's objects and the
/// program then ends, as bpftrace's does (which takes no other probe).
fn alone_with_iterators(program: &Program) -> Result<()> {
    let probes = || program.items.iter().flat_map(|item| &item.probes);
    let Some(iterator) = probes().find(|p| matches!(p.kind, Target::Iter { .. })) else {
        return Ok(());
    };
    let other = probes()
        .find(|p| !matches!(p.kind, Target::Begin | Target::End) && p.span != iterator.span);
    match other {
        Some(other) => Err(Error::new(
            other.span,
            format!(
                "an iterator ({}) runs alone, with BEGIN and END at most",
                iterator.kind.name()
            ),
        )),
        None => Ok(()),
    }
}

/// Checks `program` against `kernel` to run wholly in weft, every event
/// sent and nothing kept in the kernel: over a capture, where the events
/// come from the store.
pub fn check_in_weft(program: Program, kernel: &dyn Kernel) -> Result<Plan> {
    check_items(program, kernel, false)
}

/// Checks every item of `program`; with `raw`, a `raw_syscalls` probe
/// that reads what a raw tracepoint holds is attached as one.
fn check_items(mut program: Program, kernel: &dyn Kernel, raw: bool) -> Result<Plan> {
    without_child(&program)?;
    let uprobe_args = crate::uprobe_args::read(&mut program, kernel)?;
    let defined = crate::types::Defined::new(&program.definitions, kernel)?;
    let kernel: &dyn Kernel = &defined;
    crate::constants::resolve(&mut program, kernel)?;
    aliases::inline_in_str(&mut program);
    let saved = crate::saved::read_where_saved(&mut program);
    let (mut maps, mut guessed) = collect_maps(&program)?;
    let kept = kept_pointers(&saved, &maps, kernel);
    let mut tuples = Vec::new();
    let mut composites = Vec::new();
    let mut keys = HashMap::new();
    let mut pointer_keys = HashMap::new();
    let mut attaches = Vec::new();
    let mut swaps = HashMap::new();
    // Whether each map's first assignment is unsigned, and which printed
    // values are (`sign.rs`).
    let mut unsigned_maps = HashMap::new();
    let mut unsigned_prints = HashSet::new();
    let mut sizes = HashMap::new();
    let mut steps = HashMap::new();
    for index in 0..program.items.len() {
        let targets = expand(&program.items[index], kernel, &program, &uprobe_args)?;
        if let Some((target, fields)) = targets.first() {
            let unsigned =
                crate::sign::compare_as_bpftrace(&mut program.items[index], kernel, target, fields);
            for (map, unsigned) in unsigned.maps {
                unsigned_maps.entry(map).or_insert(unsigned);
            }
            unsigned_prints.extend(unsigned.prints);
        }
        let item = &program.items[index];
        let mut group: Vec<Attach> = (targets.into_iter())
            .map(|(target, fields)| Attach::new(index, item, target, fields, raw))
            .collect();
        let bound = vec![Bound::new(kept.clone()); group.len()];
        let mut checker = Checker {
            kernel,
            maps: &mut maps,
            guessed: &mut guessed,
            tuples: &mut tuples,
            composites: &mut composites,
            keys: &mut keys,
            pointer_keys: &mut pointer_keys,
            pointer_vars: HashSet::new(),
            attaches: &mut group,
            vars: HashMap::new(),
            bound,
            task_vars: HashSet::new(),
            saved: &saved,
            widths: HashMap::new(),
            tuple_shapes: HashMap::new(),
            swaps: &mut swaps,
            sizes: &mut sizes,
            steps: &mut steps,
            unsafe_calls: program.unsafe_calls,
        };
        if let Some(predicate) = &item.predicate {
            // A string is true where it is not empty (a map of saved
            // strings, as `/@filename[tid]/`).
            checker.expr(predicate)?;
        }
        checker.stmts(&item.body)?;
        let whole = item
            .predicate
            .as_ref()
            .is_none_or(|predicate| push_down(predicate, &mut group));
        crate::signal::attach(item, &mut group, whole)?;
        let first = attaches.len();
        attaches.extend(group);
        watch::add_setups(&mut attaches, first, index, item, program.pid);
    }
    for map in &mut maps {
        map.keys = keys.remove(&map.name).unwrap_or_default();
        map.pointer_keys = pointer_keys.remove(&map.name).unwrap_or_default();
        map.unsigned = unsigned_maps.get(&map.name).copied().unwrap_or(false);
    }
    widen_swaps(&mut program, &swaps);
    put_sizes(&mut program, &sizes, steps);
    Ok(Plan {
        program,
        attaches,
        maps,
        unsigned_prints,
        string_len: weft_abi::oneliner::STRING_LEN,
        packet_pages: crate::limits::Limits::default().perf_rb_pages,
    })
}

/// Gives each `bswap(x)` the bytes it swaps as a second argument,
/// `bswap(x, 2)`: the width of `x`'s type, which the runtime's values lack.
/// Puts each `sizeof` in place, and multiplies the integer each pointer
/// in `steps` is moved by by its pointee's size.
fn put_sizes(program: &mut Program, sizes: &HashMap<Span, u32>, mut steps: HashMap<Span, u32>) {
    program.rewrite(&mut |expr| {
        let span = expr.span;
        match &mut expr.kind {
            ExprKind::SizeOf(_) if let Some(size) = sizes.get(&span) => {
                expr.kind = ExprKind::Int(i64::from(*size));
            }
            // Once: the rewrite goes on into what it made.
            ExprKind::Binary(BinOp::Add | BinOp::Sub, _, n)
                if let Some(size) = steps.remove(&span) =>
            {
                let by = Expr {
                    kind: ExprKind::Int(i64::from(size)),
                    span: n.span,
                };
                let moved = std::mem::replace(n.as_mut(), by.clone());
                **n = Expr {
                    kind: ExprKind::Binary(BinOp::Mul, Box::new(moved), Box::new(by)),
                    span: n.span,
                };
            }
            _ => {}
        }
    });
}

/// `cpid` is the `-c` command's pid: without one, bpftrace refuses it.
fn without_child(program: &Program) -> Result<()> {
    match program.first_use(&[Builtin::Cpid]) {
        Some((span, _)) if program.command.is_none() => {
            Err(Error::new(span, "cpid cannot be used without a -c command"))
        }
        _ => Ok(()),
    }
}

/// The maps of struct pointers the kernel keeps per thread (`saved.rs`):
/// each one's index, and the struct its assignment casts to, if known.
fn kept_pointers(
    saved: &Saved,
    maps: &[MapInfo],
    kernel: &dyn Kernel,
) -> HashMap<String, (usize, Option<u32>)> {
    (saved.pointers.iter())
        .filter(|(name, _)| saved.by_thread.contains(*name))
        .filter_map(|(name, record)| {
            // The kernel's id is a byte, the index plus one.
            let index = maps.iter().position(|m| m.name == *name)?;
            let record = record.as_ref().and_then(|r| kernel.record(r).ok());
            (index < usize::from(u8::MAX)).then(|| (name.clone(), (index, record)))
        })
        .collect()
}

fn widen_swaps(program: &mut Program, swaps: &HashMap<Span, u16>) {
    program.rewrite(&mut |expr| {
        if let ExprKind::Call(name, args) = &mut expr.kind
            && name == "bswap"
            && let Some(width) = swaps.get(&expr.span)
        {
            args.push(Expr {
                kind: ExprKind::Int(i64::from(*width)),
                span: expr.span,
            });
        }
    });
}

/// Every map's kind, from its assignments, and the maps whose values'
/// type only the checker can tell, as every assignment of theirs is of a
/// variable, a map, a member or a tuple (`assigned_kind`): the first it
/// checks types them.
fn collect_maps(program: &Program) -> Result<(Vec<MapInfo>, HashSet<String>)> {
    let mut maps: Vec<MapInfo> = Vec::new();
    let mut guessed = HashSet::new();
    let mut visit = |map: &MapRef, kind: Option<MapKind>| -> Result<()> {
        let clash = |known: MapKind, other: &str| {
            Err(Error::new(
                map.span,
                format!(
                    "@{} holds {} elsewhere and cannot also hold {other}",
                    map.name,
                    known.describe(),
                ),
            ))
        };
        let Some(known) = maps.iter_mut().find(|m| m.name == map.name) else {
            if kind.is_none() {
                guessed.insert(map.name.clone());
            }
            maps.push(MapInfo {
                name: map.name.clone(),
                kind: kind.unwrap_or(MapKind::Value(Type::Int)),
                keys: Vec::new(),
                unsigned: false,
                pointer_keys: Vec::new(),
            });
            return Ok(());
        };
        match kind {
            None if !matches!(known.kind, MapKind::Value(_)) => clash(known.kind, "a value"),
            Some(kind) if guessed.contains(&map.name) => {
                if !matches!(kind, MapKind::Value(_)) {
                    return Err(Error::new(
                        map.span,
                        format!(
                            "@{} holds a value elsewhere and cannot also hold {}",
                            map.name,
                            kind.describe()
                        ),
                    ));
                }
                guessed.remove(&map.name);
                known.kind = kind;
                Ok(())
            }
            Some(kind) if known.kind != kind => clash(known.kind, &kind.describe()),
            None | Some(_) => Ok(()),
        }
    };
    for item in &program.items {
        walk(&item.body, &mut visit)?;
        let mut stepped = Vec::new();
        let mut steps = |e: &Expr| {
            // The maps `++` and `--` update inside expressions.
            if let ExprKind::Step { target, .. } = &e.kind
                && let ExprKind::Map(map) = &target.kind
            {
                stepped.push(map.clone());
            }
        };
        item.for_each_expr(&mut |e| e.visit(&mut steps));
        for map in &stepped {
            visit(map, Some(MapKind::Value(Type::Int)))?;
        }
    }
    Ok((maps, guessed))
}

/// Calls `visit` on every map assignment of `stmts` with the kind it gives
/// (none where the checker must tell).
fn walk(
    stmts: &[Stmt],
    visit: &mut dyn FnMut(&MapRef, Option<MapKind>) -> Result<()>,
) -> Result<()> {
    for stmt in stmts {
        match stmt {
            Stmt::MapAssign { map, value } => visit(map, assigned_kind(value)?)?,
            Stmt::MapUpdate { map, .. } => visit(map, Some(MapKind::Value(Type::Int)))?,
            Stmt::If {
                then, otherwise, ..
            } => {
                walk(then, visit)?;
                walk(otherwise, visit)?;
            }
            Stmt::While { body, .. } => walk(body, visit)?,
            _ => {}
        }
    }
    Ok(())
}

/// The kind an assignment gives a map, where it is plain without the
/// kernel: strings are told apart by their obvious sources, and the type of
/// a variable, a map, a member or a tuple is left to the checker (none).
fn assigned_kind(value: &Expr) -> Result<Option<MapKind>> {
    let ExprKind::Call(name, args) = &value.kind else {
        return Ok(shallow_type(value).map(MapKind::Value));
    };
    let literal = |i: usize| match args.get(i).map(|a| &a.kind) {
        Some(ExprKind::Int(n)) => Ok(*n),
        Some(ExprKind::Unary(UnOp::Neg, inner)) => match inner.kind {
            ExprKind::Int(n) => Ok(-n),
            _ => Err(Error::new(
                args[i].span,
                "lhist() bounds must be integer literals",
            )),
        },
        Some(_) => Err(Error::new(
            args[i].span,
            "lhist() bounds must be integer literals",
        )),
        None => Err(Error::new(
            value.span,
            "lhist() takes (value, min, max, step)",
        )),
    };
    Ok(Some(match name.as_str() {
        "count" => MapKind::Count,
        "sum" => MapKind::Sum,
        "avg" => MapKind::Avg,
        "min" => MapKind::Min,
        "max" => MapKind::Max,
        "stats" => MapKind::Stats,
        "hist" => MapKind::Hist,
        "percentiles" => MapKind::Percentiles,
        "lhist" => {
            let (min, max, step) = (literal(1)?, literal(2)?, literal(3)?);
            // bpftrace 0.17's checks, in its order and words.
            let wrong = if min < 0 {
                Some(format!("min must be non-negative (provided min {min})"))
            } else if min > max {
                Some(format!(
                    "min must be less than max (provided min {min} and max {max})"
                ))
            } else if max - min < step {
                Some(format!(
                    "step is too large for the given range (provided step {step} for range {})",
                    max - min
                ))
            } else if step < 1 {
                Some(format!("step must be >= 1 ({step} provided)"))
            } else {
                None
            };
            if let Some(wrong) = wrong {
                return Err(Error::new(value.span, format!("lhist() {wrong}")));
            }
            MapKind::Lhist { min, max, step }
        }
        name if STRING_CALLS.contains(&name) => MapKind::Value(Type::Str),
        // Its array's size is the checker's to tell.
        "pton" => return Ok(None),
        _ => MapKind::Value(Type::Int),
    }))
}

/// The functions whose value is a string.
const STRING_CALLS: &[&str] = &[
    "str",
    "usym",
    "ksym",
    "ntop",
    "kstack",
    "ustack",
    "strftime",
    "macaddr",
    "buf",
    "path",
    "cgroup_path",
    "strerror",
];

/// The type of an expression where it is obvious without the kernel or
/// the types of variables and maps.
fn shallow_type(expr: &Expr) -> Option<Type> {
    match &expr.kind {
        ExprKind::Str(_)
        | ExprKind::Builtin(
            Builtin::Comm
            | Builtin::Probe
            | Builtin::Func
            | Builtin::Kstack
            | Builtin::Ustack
            | Builtin::Username,
        ) => Some(Type::Str),
        ExprKind::Call(name, _) if STRING_CALLS.contains(&name.as_str()) => Some(Type::Str),
        ExprKind::Ternary(_, then, _) => shallow_type(then),
        ExprKind::Var(_)
        | ExprKind::Map(_)
        | ExprKind::Member { .. }
        | ExprKind::Tuple(_)
        | ExprKind::Element { .. }
        // `*p` of a struct pointer is the struct.
        | ExprKind::Deref(_) => None,
        _ => Some(Type::Int),
    }
}

/// Type checks the actions of one item over all its attach points.
struct Checker<'a> {
    kernel: &'a dyn Kernel,
    maps: &'a mut [MapInfo],
    /// Maps whose values' type the first assignment checked sets
    /// (`collect_maps`).
    guessed: &'a mut HashSet<String>,
    /// The element types of each tuple type (`Type::Tuple`'s number).
    tuples: &'a mut Vec<Vec<Type>>,
    /// The layout of each struct or array type (`Type::Composite`'s
    /// number).
    composites: &'a mut Vec<plan::Layout>,
    /// Key types of each map, fixed by its first use in any item.
    keys: &'a mut HashMap<String, Vec<Type>>,
    /// Which key parts of each map some use makes a pointer.
    pointer_keys: &'a mut HashMap<String, Vec<bool>>,
    /// Variables holding a pointer (`pointers.rs`).
    pointer_vars: HashSet<String>,
    attaches: &'a mut [Attach],
    vars: HashMap<String, Type>,
    /// Kernel struct pointers held in variables, per attach point.
    bound: Vec<Bound>,
    /// Variables holding curtask, whose address only the kernel knows: it
    /// copies it where one is used as a value.
    task_vars: HashSet<String>,
    /// Pointers whose string is read where they are saved in a map.
    saved: &'a Saved,
    /// The bytes of the integer each variable holds, for `bswap`.
    widths: HashMap<String, u16>,
    /// The bytes and alignment of the tuple each variable holds, for
    /// `sizeof`.
    tuple_shapes: HashMap<String, (u32, u32)>,
    /// Each `bswap` call, by span, and how many bytes it swaps.
    swaps: &'a mut HashMap<Span, u16>,
    /// Each `sizeof(expr)`, by span, and its size.
    sizes: &'a mut HashMap<Span, u32>,
    /// Each `P + N` or `P - N` whose pointer P bpftrace moves by whole
    /// pointees (a struct pointer, a typed field), by span, and the
    /// pointee's size, by which N is multiplied.
    steps: &'a mut HashMap<Span, u32>,
    /// Whether `system()` may run commands (`--unsafe`).
    unsafe_calls: bool,
}

mod aliases;
pub(crate) mod constants;
pub(crate) mod expand;
mod exprs;
pub mod kernel;
pub(crate) mod kernel_agg;
pub mod lower;
pub(crate) mod members;
pub mod plan;
mod pointers;
pub(crate) mod push_down;
pub(crate) mod raw_syscalls;
mod reads;
pub(crate) mod registers;
pub(crate) mod saved;
pub(crate) mod sign;
pub(crate) mod starts;
pub(crate) mod types;
mod uapi;
pub(crate) mod uprobe_args;
pub(crate) mod usdt;
mod watch;

impl Checker<'_> {
    fn stmts(&mut self, stmts: &[Stmt]) -> Result<()> {
        for stmt in stmts {
            self.stmt(stmt)?;
        }
        Ok(())
    }

    fn stmt(&mut self, stmt: &Stmt) -> Result<()> {
        match stmt {
            Stmt::MapAssign { map, value } => {
                self.keys(map)?;
                self.keep_pointer(map, value)?;
                let info = self.map_info(map)?;
                match (info.kind, &value.kind) {
                    // The type of a variable, map, member or tuple is known
                    // only now (`collect_maps`): the first such assignment
                    // checked types the map.
                    (MapKind::Value(_), _) if self.guessed.remove(&map.name) => {
                        let found = self.expr(value)?;
                        if let Some(info) = self.maps.iter_mut().find(|m| m.name == map.name) {
                            info.kind = MapKind::Value(found);
                        }
                        Ok(())
                    }
                    (MapKind::Value(t), _) => self.want(value, t, &format!("@{}", map.name)),
                    (_, ExprKind::Call(name, args)) => self.aggregation(name, args, value.span),
                    _ => unreachable!("aggregating maps are assigned calls"),
                }
            }
            Stmt::MapUpdate { map, value, .. } => {
                self.keys(map)?;
                self.want(value, Type::Int, "an increment")
            }
            Stmt::VarAssign { name, span, value } => {
                if self.is_pointer(value) {
                    self.pointer_vars.insert(name.clone());
                } else {
                    self.pointer_vars.remove(name);
                }
                if self.bind(name, value) {
                    self.vars.insert(name.clone(), Type::Int);
                    return Ok(());
                }
                let found = self.expr(value)?;
                let width = self.width(value);
                self.widths.insert(name.clone(), width);
                if let Type::Tuple(_) = found {
                    let shape = self.shape(value)?;
                    self.tuple_shapes.insert(name.clone(), shape);
                }
                match self.vars.get(name) {
                    Some(t) if *t != found => Err(Error::new(
                        *span,
                        format!(
                            "${name} holds {} and cannot also hold {}",
                            self.type_name(*t),
                            self.type_name(found)
                        ),
                    )),
                    _ => {
                        self.vars.insert(name.clone(), found);
                        Ok(())
                    }
                }
            }
            Stmt::VarUpdate {
                name, span, value, ..
            } => {
                if self.vars.get(name) != Some(&Type::Int) {
                    return Err(Error::new(
                        *span,
                        format!("${name} must be assigned an integer before it is updated"),
                    ));
                }
                self.want(value, Type::Int, "an increment")
            }
            Stmt::Expr(expr) => self.statement_call(expr),
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                self.want(cond, Type::Int, "a condition")?;
                self.stmts(then)?;
                self.stmts(otherwise)
            }
            Stmt::While { cond, body } => {
                self.want(cond, Type::Int, "a condition")?;
                self.stmts(body)
            }
            Stmt::Break | Stmt::Continue => Ok(()),
        }
    }

    /// Notes the kernel struct pointer `$name = value` holds at each attach
    /// point, if it is one; true when the value is curtask's address,
    /// which only the kernel has: the kernel copies it where the variable
    /// is used as a value.
    fn bind(&mut self, name: &str, value: &Expr) -> bool {
        let mut task = false;
        for (attach, bound) in self.attaches.iter().zip(&mut self.bound) {
            match members::pointer(self.kernel, attach, bound, value) {
                Ok(p) => {
                    task = p.start == Start::Task && p.hops.is_empty();
                    bound.insert(name.to_string(), p);
                }
                Err(_) => {
                    bound.remove(name);
                }
            }
        }
        if task {
            self.task_vars.insert(name.to_string());
        } else {
            self.task_vars.remove(name);
        }
        task
    }

    fn map_info(&self, map: &MapRef) -> Result<&MapInfo> {
        self.maps
            .iter()
            .find(|m| m.name == map.name)
            .ok_or_else(|| {
                Error::new(
                    map.span,
                    format!("@{} is read but never assigned", map.name),
                )
            })
    }

    /// Checks a map's keys; key types must agree across all uses.
    fn keys(&mut self, map: &MapRef) -> Result<()> {
        let pointers: Vec<bool> = map.keys.iter().map(|k| self.is_pointer(k)).collect();
        let known = self.pointer_keys.entry(map.name.clone()).or_default();
        known.resize(known.len().max(pointers.len()), false);
        known.iter_mut().zip(pointers).for_each(|(k, p)| *k |= p);
        let mut types = Vec::new();
        for key in &map.keys {
            let found = self.expr(key)?;
            if let Type::Tuple(_) = found {
                // As bpftrace 0.17.
                return Err(Error::new(
                    key.span,
                    "a tuple cannot be a map key: key the map by its parts, as in @map[$a, $b]",
                ));
            }
            types.push(found);
        }
        match self.keys.get(&map.name) {
            Some(known) if *known != types => Err(Error::new(
                map.span,
                format!(
                    "@{} is keyed by [{}] elsewhere, not [{}]",
                    map.name,
                    type_list(known),
                    type_list(&types)
                ),
            )),
            Some(_) => Ok(()),
            None => {
                self.keys.insert(map.name.clone(), types);
                Ok(())
            }
        }
    }

    fn aggregation(&mut self, name: &str, args: &[Expr], span: Span) -> Result<()> {
        let arity = match name {
            "count" => 0,
            "lhist" => 4,
            _ => 1,
        };
        if args.len() != arity {
            return Err(Error::new(
                span,
                format!(
                    "{name}() takes {arity} argument{}",
                    if arity == 1 { "" } else { "s" }
                ),
            ));
        }
        if let Some(value) = args.first() {
            self.want(value, Type::Int, &format!("the value of {name}()"))?;
        }
        Ok(())
    }

    /// A call used as a statement.
    fn statement_call(&mut self, expr: &Expr) -> Result<()> {
        let ExprKind::Call(name, args) = &expr.kind else {
            return Err(Error::new(
                expr.span,
                "this expression does nothing: a statement is an assignment or a call such as printf()",
            ));
        };
        let span = expr.span;
        match name.as_str() {
            "printf" => self.printf("printf", args, span),
            "time" => match args.as_slice() {
                []
                | [
                    Expr {
                        kind: ExprKind::Str(_),
                        ..
                    },
                ] => Ok(()),
                _ => Err(Error::new(span, "time() takes an optional format string")),
            },
            "join" => self.join(args, span),
            "cat" => self.printf("cat", args, span),
            "system" if self.unsafe_calls => self.printf("system", args, span),
            "system" => Err(Error::new(
                span,
                "system() runs commands: it needs --unsafe, as in bpftrace",
            )),
            "signal" if self.unsafe_calls => crate::signal::number(args, span).map(|_| ()),
            "signal" => Err(Error::new(
                span,
                "signal() is an unsafe function being used in safe mode: it needs --unsafe",
            )),
            "override" if !self.unsafe_calls => Err(Error::new(
                span,
                "override() is an unsafe function being used in safe mode: it needs --unsafe",
            )),
            // bpf_override_return needs CONFIG_BPF_KPROBE_OVERRIDE, which
            // none of the kernels weft is tested on has (Debian's are built
            // without function error injection): refused, not untested.
            "override" => Err(Error::new(
                span,
                "weft does not override a function's return value: bpftrace's override() needs a kernel built with CONFIG_BPF_KPROBE_OVERRIDE, and weft has no kernel with it to test on",
            )),
            "unwatch" => match args.as_slice() {
                [address] => self.want(address, Type::Int, "unwatch()'s address"),
                _ => Err(Error::new(span, "unwatch() takes one address")),
            },
            "exit" if args.is_empty() => Ok(()),
            "exit" => Err(Error::new(span, "exit() takes no arguments")),
            "print" => match args.as_slice() {
                [
                    Expr {
                        kind: ExprKind::Map(map),
                        ..
                    },
                    rest @ ..,
                ] if map.keys.is_empty() && rest.len() <= 2 => {
                    self.map_info(map)?;
                    for n in rest {
                        self.want(n, Type::Int, "print()'s top and divisor")?;
                    }
                    Ok(())
                }
                [value] => self.expr(value).map(drop),
                _ => Err(Error::new(
                    span,
                    "print() takes a map (print(@m), print(@m, top)) or one value",
                )),
            },
            "clear" | "zero" => match args.as_slice() {
                [
                    Expr {
                        kind: ExprKind::Map(map),
                        ..
                    },
                ] if map.keys.is_empty() => self.map_info(map).map(drop),
                _ => Err(Error::new(
                    span,
                    format!("{name}() takes a whole map: {name}(@name)"),
                )),
            },
            "delete" => match args.as_slice() {
                [
                    Expr {
                        kind: ExprKind::Map(map),
                        ..
                    },
                ] => {
                    self.map_info(map)?;
                    self.keys(map)
                }
                _ => Err(Error::new(
                    span,
                    "delete() takes a map element: delete(@name[key])",
                )),
            },
            _ => self.expr(expr).map(drop),
        }
    }

    /// `printf(format, values...)`, and `cat(format, values...)`, whose
    /// format names a file.
    fn printf(&mut self, name: &str, args: &[Expr], span: Span) -> Result<()> {
        let Some(Expr {
            kind: ExprKind::Str(text),
            span: format_span,
        }) = args.first()
        else {
            return Err(Error::new(
                span,
                format!("{name}() needs a format string first"),
            ));
        };
        let wanted = format::conversions(text).map_err(|e| Error::new(*format_span, e))?;
        let values = &args[1..];
        if wanted.len() != values.len() {
            return Err(Error::new(
                span,
                format!(
                    "{name}() format has {} conversion{} but {} {} follow{}",
                    wanted.len(),
                    if wanted.len() == 1 { "" } else { "s" },
                    values.len(),
                    if values.len() == 1 { "value" } else { "values" },
                    if values.len() == 1 { "s" } else { "" },
                ),
            ));
        }
        for (value, want) in values.iter().zip(wanted) {
            let found = self.expr(value)?;
            if let Type::Tuple(_) = found {
                return Err(Error::new(
                    value.span,
                    "this value is a tuple: print it with print(), or its elements ($t.0)",
                ));
            }
            if want == Type::Int && found == Type::Str {
                return Err(Error::new(
                    value.span,
                    "this value is a string: print it with %s",
                ));
            }
            if want == Type::Str && found == Type::Int {
                return Err(Error::new(
                    value.span,
                    "this value is an integer: print it with %d (bpftrace refuses %s too)",
                ));
            }
        }
        Ok(())
    }
}

fn type_list(types: &[Type]) -> String {
    types
        .iter()
        .map(|t| match t {
            Type::Int => "int",
            Type::Str => "string",
            // Keys are never tuples (`Checker::keys`).
            Type::Tuple(_) => "tuple",
            Type::Bytes(_) => "bytes",
            Type::Composite(_) => "struct or array",
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The frame count of a call of `kstack`/`ustack` past its mode: all of
/// them without one, else a literal from 1 to 127 (the kernel's stack map
/// holds 127).
pub(crate) fn stack_frames(args: &[Expr]) -> Option<usize> {
    match args {
        [] => Some(usize::MAX),
        [
            Expr {
                kind: ExprKind::Int(n @ 1..=127),
                ..
            },
        ] => usize::try_from(*n).ok(),
        _ => None,
    }
}

/// `pton("ADDRESS")`: the address's 4 or 16 bytes.
fn pton(args: &[Expr], span: Span) -> Result<Type> {
    let [
        Expr {
            kind: ExprKind::Str(text),
            span: at,
        },
    ] = args
    else {
        return Err(Error::new(
            span,
            "pton() takes an IPv4 or IPv6 address written in place: pton(\"10.0.0.1\")",
        ));
    };
    let bytes = crate::format::address_bytes(text).ok_or_else(|| {
        Error::new(
            *at,
            format!("pton(): `{text}` is not an IPv4 or IPv6 address"),
        )
    })?;
    Ok(Type::Bytes(bytes.len() as u8))
}

/// Whether `name` is `arg0`, `arg1`, ...: a register, not a name.
fn is_register_arg(name: &str) -> bool {
    name.strip_prefix("arg")
        .is_some_and(|n| n.parse::<u8>().is_ok())
}

/// What a uprobe's named arguments are, for an error that names a missing
/// one.
fn uprobe_arguments(attach: &Attach) -> String {
    let named: Vec<&str> = (attach.fields.iter())
        .map(|f| f.name.as_str())
        .filter(|n| !is_register_arg(n) && !n.starts_with("reg_"))
        .collect();
    if named.is_empty() {
        "its file has no DWARF debug info describing the function (build it with -g, or \
         install its debug file); arg0, arg1, ... read the registers"
            .into()
    } else {
        format!("it has {}", named.join(", "))
    }
}

/// The error for reading USDT argument `name` from a place weft does not
/// read, or a uprobe's parameter `name` that is not in an argument
/// register.
fn unread(name: &str, span: Span) -> Error {
    if !is_register_arg(name) {
        return Error::new(
            span,
            format!(
                "`{name}` is not in one of the six integer argument registers (a parameter \
                 after the sixth, a float, or a struct or array passed by value): weft reads \
                 a uprobe's named arguments from those registers, as bpftrace does"
            ),
        );
    }
    Error::new(
        span,
        format!(
            "`{name}` of this USDT probe is in a place weft does not read: registers, constants and memory at a register plus an offset read; `sym(%rip)` and indexed places do not"
        ),
    )
}

#[cfg(test)]
pub(crate) mod tests;
