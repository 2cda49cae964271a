//! Checks a parsed program against the running kernel, in three stages:
//! its probes expand to attach points with their fields (`expand.rs`),
//! every expression gets a type and every map a kind (here), and the
//! simple parts of each predicate go to the kernel (`push_down.rs`). The
//! result is a [`Plan`] (`plan.rs`): what the kernel must copy per probe
//! and which predicate parts it can test itself.

use std::collections::{HashMap, HashSet};

use crate::{
    ast::{BinOp, Builtin, Expr, ExprKind, MapRef, Program, SizeOf, Stmt, UnOp, for_each_expr},
    error::{Error, Result, Span},
    expand::expand,
    format,
    kernel::{Field, FieldKind, Kernel, KernelType},
    kernel_agg::aggregate_in_kernel,
    members::{self, Bound},
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
    let mut plan = check_in_weft(program, kernel)?;
    // Before the aggregations: a probe that takes a start may then
    // aggregate what it measures.
    crate::starts::keep_in_kernel(&mut plan);
    aggregate_in_kernel(&mut plan);
    Ok(plan)
}

/// Checks `program` against `kernel` to run wholly in weft, every event
/// sent and nothing kept in the kernel: over a capture, where the events
/// come from the store.
pub fn check_in_weft(mut program: Program, kernel: &dyn Kernel) -> Result<Plan> {
    let uprobe_args = crate::uprobe_args::read(&mut program, kernel)?;
    let defined = crate::types::Defined::new(&program.definitions, kernel)?;
    let kernel: &dyn Kernel = &defined;
    crate::constants::resolve(&mut program, kernel)?;
    let saved = crate::saved::read_where_saved(&mut program);
    let (mut maps, mut guessed) = collect_maps(&program)?;
    let mut tuples = Vec::new();
    let mut keys = HashMap::new();
    let mut attaches = Vec::new();
    let mut swaps = HashMap::new();
    // Whether each map's first assignment is unsigned, and which printed
    // values are (`sign.rs`).
    let mut unsigned_maps = HashMap::new();
    let mut unsigned_prints = HashSet::new();
    let mut sizes = HashMap::new();
    for index in 0..program.items.len() {
        let targets = expand(&program.items[index], kernel, program.pid, &uprobe_args)?;
        if let Some((target, fields)) = targets.first() {
            let unsigned =
                crate::sign::compare_as_bpftrace(&mut program.items[index], target, fields);
            for (map, unsigned) in unsigned.maps {
                unsigned_maps.entry(map).or_insert(unsigned);
            }
            unsigned_prints.extend(unsigned.prints);
        }
        let item = &program.items[index];
        let mut group: Vec<Attach> = targets
            .into_iter()
            .map(|(target, fields)| Attach {
                item: index,
                target,
                fields,
                raw_len: 0,
                strings: Vec::new(),
                saved: Vec::new(),
                reads: Vec::new(),
                members: Vec::new(),
                save: None,
                join: None,
                agg: None,
                start: None,
                filters: Vec::new(),
                comm: None,
                kstack: false,
                ustack: false,
                signal: None,
            })
            .collect();
        let bound = vec![Bound::new(); group.len()];
        let mut checker = Checker {
            kernel,
            maps: &mut maps,
            guessed: &mut guessed,
            tuples: &mut tuples,
            keys: &mut keys,
            attaches: &mut group,
            vars: HashMap::new(),
            bound,
            task_vars: HashSet::new(),
            saved: &saved,
            widths: HashMap::new(),
            tuple_shapes: HashMap::new(),
            swaps: &mut swaps,
            sizes: &mut sizes,
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
        attaches.extend(group);
    }
    for map in &mut maps {
        map.keys = keys.remove(&map.name).unwrap_or_default();
        map.unsigned = unsigned_maps.get(&map.name).copied().unwrap_or(false);
    }
    widen_swaps(&mut program, &swaps);
    program.rewrite(&mut |expr| {
        if let ExprKind::SizeOf(_) = expr.kind
            && let Some(size) = sizes.get(&expr.span)
        {
            expr.kind = ExprKind::Int(i64::from(*size));
        }
    });
    Ok(Plan {
        program,
        attaches,
        maps,
        unsigned_prints,
        string_len: weft_abi::oneliner::STRING_LEN,
    })
}

/// Gives each `bswap(x)` the bytes it swaps as a second argument,
/// `bswap(x, 2)`: the width of `x`'s type, which the runtime's values lack.
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
        item.predicate.iter().for_each(|e| e.visit(&mut steps));
        for_each_expr(&item.body, &mut |e| e.visit(&mut steps));
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
            if step <= 0 || max <= min {
                return Err(Error::new(
                    value.span,
                    "lhist(value, min, max, step) needs min < max and step > 0",
                ));
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
    "str", "usym", "ksym", "ntop", "kstack", "ustack", "strftime", "macaddr",
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
        | ExprKind::Element { .. } => None,
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
    /// Key types of each map, fixed by its first use in any item.
    keys: &'a mut HashMap<String, Vec<Type>>,
    attaches: &'a mut [Attach],
    vars: HashMap<String, Type>,
    /// Kernel struct pointers held in variables, per attach point.
    bound: Vec<Bound>,
    /// Variables holding curtask, whose address only the kernel knows.
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
    /// Whether `system()` may run commands (`--unsafe`).
    unsafe_calls: bool,
}

impl Checker<'_> {
    fn want(&mut self, expr: &Expr, want: Type, what: &str) -> Result<()> {
        let found = self.expr(expr)?;
        self.want_type(expr, found, want, what)
    }

    /// An error unless `found`, the type of `expr`, is `want`.
    fn want_type(&self, expr: &Expr, found: Type, want: Type, what: &str) -> Result<()> {
        if found != want {
            return Err(Error::new(
                expr.span,
                format!(
                    "{what} must be {}, not {}",
                    self.type_name(want),
                    self.type_name(found)
                ),
            ));
        }
        Ok(())
    }

    /// `t` in words; a tuple with its elements' types, `a tuple (int,
    /// string)`.
    fn type_name(&self, t: Type) -> String {
        match t {
            Type::Tuple(id) => format!("a tuple ({})", self.elements(id)),
            Type::Bytes(n) => format!("an array of {n} bytes"),
            other => other.name().to_string(),
        }
    }

    /// The element types of tuple type `id`, as `int, string, (int, int)`.
    fn elements(&self, id: u16) -> String {
        self.tuples[usize::from(id)]
            .iter()
            .map(|t| match t {
                Type::Int => "int".to_string(),
                Type::Str => "string".to_string(),
                Type::Tuple(inner) => format!("({})", self.elements(*inner)),
                Type::Bytes(n) => format!("int8[{n}]"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The tuple type of elements of `types`: the same number for the same
    /// types.
    fn tuple_type(&mut self, types: Vec<Type>) -> Type {
        let id = if let Some(at) = self.tuples.iter().position(|t| *t == types) {
            at
        } else {
            self.tuples.push(types);
            self.tuples.len() - 1
        };
        Type::Tuple(u16::try_from(id).unwrap_or(u16::MAX))
    }

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
                self.keep_pointer(map, value);
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
    /// which only the kernel has: the variable is then for `->` only.
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

    /// A member expression (`a->b`, `a.b`) at every attach point; its
    /// string when `string` (`str(a->b)`).
    fn member(&mut self, expr: &Expr, string: bool) -> Result<Type> {
        self.kernel_reads(expr.span, "kernel struct members")?;
        let read = if string {
            members::read_string
        } else {
            members::read
        };
        let mut found = None;
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            let ty = read(self.kernel, attach, bound, expr)?;
            if found.is_some_and(|t| t != ty) {
                return Err(Error::new(
                    expr.span,
                    "this member has different types across the matched probes",
                ));
            }
            found = Some(ty);
        }
        found.ok_or_else(|| Error::new(expr.span, "a member needs a probe the kernel fires"))
    }

    /// Refuses `what`, at `span`, in probes weft runs itself: the kernel
    /// reads it at the event.
    fn kernel_reads(&self, span: Span, what: &str) -> Result<()> {
        match self.attaches.iter().find(|a| !a.in_kernel()) {
            Some(attach) => Err(Error::new(
                span,
                format!(
                    "{what} are read in the kernel at the event, and {} runs in weft: read them \
                     in a probe the kernel fires",
                    attach.target.name()
                ),
            )),
            None => Ok(()),
        }
    }

    /// `@map[tid] = str(POINTER)`, a pointer saved for its string: the
    /// kernel keeps the pointer per thread too, so that where the map is
    /// read it reads the string again (`saved.rs`). One per probe.
    fn keep_pointer(&mut self, map: &MapRef, value: &Expr) {
        let Some(index) = self.kept_map(map) else {
            return;
        };
        let ExprKind::Call(_, args) = &value.kind else {
            return;
        };
        let name = match args.first().map(|a| (&a.kind, a.span)) {
            Some((ExprKind::Field(n), span)) if self.saved.spans.contains(&span) => n.clone(),
            Some((ExprKind::Arg(n), span)) if self.saved.spans.contains(&span) => format!("arg{n}"),
            _ => return,
        };
        for attach in self.attaches.iter_mut() {
            if attach.save.is_none()
                && let Some(field) = attach.field(&name)
            {
                attach.save = Some((field.clone(), index));
            }
        }
    }

    /// `@map[tid]` read where the kernel keeps its pointers: the kernel
    /// reads the string of the thread's pointer into a slot, if one is free.
    fn read_kept(&mut self, map: &MapRef) {
        let Some(index) = self.kept_map(map) else {
            return;
        };
        for attach in self.attaches.iter_mut() {
            if attach.in_kernel() && !attach.saved.contains(&index) && attach.slots() < MAX_STRINGS
            {
                attach.saved.push(index);
            }
        }
    }

    /// The index of `map` when the kernel keeps its pointers per thread.
    fn kept_map(&self, map: &MapRef) -> Option<usize> {
        if !self.saved.by_thread.contains(&map.name) {
            return None;
        }
        // The kernel's id is a byte, the index plus one.
        self.maps
            .iter()
            .position(|m| m.name == map.name)
            .filter(|i| *i < usize::from(u8::MAX))
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

    /// The field `name` in every attach point, or an error naming one that lacks it.
    fn field(&mut self, name: &str, span: Span) -> Result<Field> {
        let mut found: Option<Field> = None;
        for attach in self.attaches.iter() {
            if let Some(f) = attach.field(name) {
                if let Some(known) = &found
                    && known.kind != f.kind
                    && !(known.kind.integer() && f.kind.integer())
                {
                    return Err(Error::new(
                        span,
                        format!("`{name}` has different types across the matched probes"),
                    ));
                }
                found = Some(f.clone());
            } else {
                {
                    let names: Vec<&str> = attach.fields.iter().map(|f| f.name.as_str()).collect();
                    let has = if names.is_empty() {
                        "it has no fields".to_string()
                    } else {
                        format!("it has {}", names.join(", "))
                    };
                    return Err(Error::new(
                        span,
                        format!("{} has no field `{name}`: {has}", attach.target.name()),
                    ));
                }
            }
        }
        let field =
            found.ok_or_else(|| Error::new(span, format!("`{name}` needs a probe with fields")))?;
        Ok(field)
    }

    /// Notes that the kernel must copy `field`'s bytes.
    fn copy(&mut self, name: &str) {
        for attach in self.attaches.iter_mut() {
            // A USDT argument in memory or a constant is not in the record.
            if let Some(f) = attach.field(name)
                && !matches!(
                    f.kind,
                    FieldKind::Memory { .. } | FieldKind::Const(_) | FieldKind::Unread
                )
            {
                let end = (f.offset + f.size).next_multiple_of(8);
                attach.raw_len = attach.raw_len.max(end);
            }
        }
    }

    /// `join(array [, separator])`: the kernel reads the strings of a
    /// pointer array field (`args.argv`, `argN`) when the event happens.
    fn join(&mut self, args: &[Expr], span: Span) -> Result<()> {
        let usage = "join() takes a field holding an array of string pointers and an optional separator: join(args.argv), join(arg1, \",\")";
        let (array, separator) = match args {
            [array] => (array, None),
            [array, separator] => (array, Some(separator)),
            _ => return Err(Error::new(span, usage)),
        };
        if let Some(separator) = separator
            && !matches!(separator.kind, ExprKind::Str(_))
        {
            return Err(Error::new(
                separator.span,
                "join()'s separator must be a string literal",
            ));
        }
        let name = match &array.kind {
            ExprKind::Field(n) => n.clone(),
            ExprKind::Arg(n) => format!("arg{n}"),
            _ => return Err(Error::new(array.span, usage)),
        };
        let field = self.field(&name, array.span)?.clone();
        // argN is a register or argument slot: any 64-bit value.
        let pointer = match field.kind {
            FieldKind::Pointer { .. } => true,
            FieldKind::Int => matches!(array.kind, ExprKind::Arg(_)),
            _ => false,
        };
        if !pointer || field.size != 8 {
            return Err(Error::new(
                array.span,
                format!("join() reads an array of pointers: `{name}` is not a pointer"),
            ));
        }
        for attach in self.attaches.iter_mut() {
            let field = attach.field(&name).expect("checked").clone();
            match &attach.join {
                Some(joined) if joined.name != name => {
                    return Err(Error::new(
                        span,
                        format!(
                            "a probe can join() one array: it already joins `{}`",
                            joined.name
                        ),
                    ));
                }
                _ => attach.join = Some(field),
            }
        }
        Ok(())
    }

    /// Notes that the kernel must read `field`'s string.
    fn capture(&mut self, name: &str, span: Span) -> Result<()> {
        for attach in self.attaches.iter_mut() {
            if attach.string_slot(name).is_some() {
                continue;
            }
            if attach.slots() == MAX_STRINGS {
                return Err(Error::new(
                    span,
                    format!("a probe can read at most {MAX_STRINGS} strings and struct regions"),
                ));
            }
            let field = attach.field(name).expect("checked").clone();
            // A USDT argument in memory has a read of its own
            // (`usdt_memory`); a constant is no pointer.
            if matches!(field.kind, FieldKind::Memory { .. } | FieldKind::Const(_)) {
                continue;
            }
            attach.strings.push(field);
        }
        Ok(())
    }

    /// A value field (`args.x`, `argN`, `retval`): its type, copying it.
    fn value_field(&mut self, name: &str, span: Span) -> Result<Type> {
        let field = self.field(name, span)?;
        match field.kind {
            FieldKind::DataLoc => {
                self.capture(name, span)?;
                Ok(Type::Str)
            }
            FieldKind::Chars => {
                self.copy(name);
                Ok(Type::Str)
            }
            FieldKind::Int
            | FieldKind::Pointer { .. }
            | FieldKind::Const(_)
            | FieldKind::Memory { .. } => {
                self.integer(name, span)?;
                Ok(Type::Int)
            }
            FieldKind::Unread => Err(unread(name, span)),
        }
    }

    /// Integer field `name`: copied where the record holds it, read by the
    /// kernel where it is in memory (a USDT argument), nothing where it is
    /// a constant.
    fn integer(&mut self, name: &str, span: Span) -> Result<()> {
        self.copy(name);
        self.usdt_memory(name, span, false)
    }

    /// Has the kernel read USDT argument `name` (its value, or with
    /// `string` the string it points to) where it is in memory; an error
    /// where weft cannot read it.
    fn usdt_memory(&mut self, name: &str, span: Span, string: bool) -> Result<()> {
        for attach in self.attaches.iter_mut() {
            let Some(field) = attach.field(name).cloned() else {
                continue;
            };
            match field.kind {
                FieldKind::Memory { at } => members::memory_arg(attach, &field, at, span, string)?,
                FieldKind::Unread => return Err(unread(name, span)),
                _ => {}
            }
        }
        Ok(())
    }

    fn expr(&mut self, expr: &Expr) -> Result<Type> {
        let span = expr.span;
        match &expr.kind {
            // Constants are values by now (`constants.rs`).
            // Types' sizes are constants, like names, resolved before the
            // checker runs.
            ExprKind::Int(_) | ExprKind::Constant(_) | ExprKind::SizeOf(SizeOf::Type(_)) => {
                Ok(Type::Int)
            }
            ExprKind::Str(_) => Ok(Type::Str),
            ExprKind::Builtin(b) => self.builtin(*b, span),
            ExprKind::Field(name) => self.named_field(name, span),
            ExprKind::Arg(n) => {
                if self
                    .attaches
                    .iter()
                    .any(|a| matches!(a.target, Target::Tracepoint { .. } | Target::Fentry { .. }))
                {
                    return Err(Error::new(
                        span,
                        format!(
                            "arg{n} exists in kprobes, uprobes and raw tracepoints; this probe names its fields: args.NAME"
                        ),
                    ));
                }
                self.value_field(&format!("arg{n}"), span)
            }
            ExprKind::Var(name) if self.task_vars.contains(name) => Err(Error::new(
                span,
                format!(
                    "${name} holds curtask, whose address weft does not copy: read its members (${name}->pid)"
                ),
            )),
            ExprKind::Member { .. } => self.member(expr, false),
            ExprKind::StructCast(name, inner) => {
                self.kernel.record(name).map_err(|e| Error::new(span, e))?;
                self.want(inner, Type::Int, "what a pointer cast converts")?;
                Ok(Type::Int)
            }
            ExprKind::Var(name) => {
                self.vars.get(name).copied().ok_or_else(|| {
                    Error::new(span, format!("${name} is used before it is assigned"))
                })
            }
            ExprKind::Map(map) => self.map_read(map, span),
            ExprKind::Deref(address) => self.deref(address, span),
            ExprKind::Unary(op, operand) => {
                let what = match op {
                    UnOp::Not => "the operand of `!`",
                    UnOp::Neg => "the operand of `-`",
                    UnOp::BitNot => "the operand of `~`",
                    UnOp::Cast { .. } => "what an integer cast converts",
                    UnOp::Pointer { .. } => "the address a pointer cast holds",
                };
                self.want(operand, Type::Int, what)?;
                Ok(Type::Int)
            }
            ExprKind::Binary(op, left, right) => self.binary(*op, left, right, span),
            ExprKind::Ternary(cond, then, otherwise) => {
                self.want(cond, Type::Int, "a condition")?;
                let t = self.expr(then)?;
                self.want(otherwise, t, "both branches of `?:`")?;
                Ok(t)
            }
            ExprKind::Tuple(elements) => {
                let mut types = Vec::new();
                for element in elements {
                    types.push(self.expr(element)?);
                }
                Ok(self.tuple_type(types))
            }
            ExprKind::Element { tuple, index } => self.element(tuple, *index, span),
            ExprKind::Step { target, .. } => {
                self.want(target, Type::Int, "what `++` and `--` update")?;
                Ok(Type::Int)
            }
            ExprKind::Call(name, args) => self.call(name, args, span),
            ExprKind::SizeOf(SizeOf::Expr(measured)) => {
                let size = self.size_of(measured)?;
                self.sizes.insert(span, size);
                Ok(Type::Int)
            }
        }
    }

    /// `args.NAME`.
    fn named_field(&mut self, name: &str, span: Span) -> Result<Type> {
        if self.attaches.iter().any(|a| {
            matches!(
                a.target,
                Target::Kprobe { .. } | Target::Usdt { .. } | Target::RawTracepoint { .. }
            )
        }) {
            return Err(Error::new(
                span,
                "kprobes, usdt and raw tracepoints have no named fields: use arg0, arg1, ...",
            ));
        }
        if let Some(attach) = self.attaches.iter().find(|a| {
            matches!(a.target, Target::Uprobe { exit: false, .. }) && a.field(name).is_none()
        }) {
            return Err(Error::new(
                span,
                format!(
                    "{} has no argument `{name}`: {}",
                    attach.target.name(),
                    uprobe_arguments(attach)
                ),
            ));
        }
        if self
            .attaches
            .iter()
            .any(|a| matches!(a.target, Target::Uprobe { exit: true, .. }))
        {
            return Err(Error::new(
                span,
                "a uretprobe has no arguments by name (they are gone when the function returns): save them in its uprobe, `@a[tid] = args->NAME`",
            ));
        }
        self.value_field(name, span)
    }

    fn builtin(&mut self, builtin: Builtin, span: Span) -> Result<Type> {
        match builtin {
            Builtin::Comm | Builtin::Probe | Builtin::Username => Ok(Type::Str),
            Builtin::Func => {
                if self.attaches.iter().any(|a| a.target.function().is_empty()) {
                    return Err(Error::new(
                        span,
                        "`func` exists only in kprobe, uprobe and fentry probes",
                    ));
                }
                Ok(Type::Str)
            }
            Builtin::Retval => {
                if self.attaches.iter().any(|a| a.field("retval").is_none()) {
                    return Err(Error::new(
                        span,
                        "`retval` exists only in kretprobe, uretprobe and fexit probes (tracepoint sys_exit_* has args.ret)",
                    ));
                }
                self.value_field("retval", span)
            }
            Builtin::Curtask => Err(Error::new(
                span,
                "weft does not copy curtask's address: read its members (curtask->pid)",
            )),
            Builtin::Kstack | Builtin::Ustack => {
                if self.attaches.iter().any(|a| !a.in_kernel()) {
                    return Err(Error::new(
                        span,
                        format!(
                            "`{}` exists only in probes the kernel fires",
                            builtin.name()
                        ),
                    ));
                }
                for attach in self.attaches.iter_mut() {
                    if builtin == Builtin::Kstack {
                        attach.kstack = true;
                    } else {
                        attach.ustack = true;
                    }
                }
                Ok(Type::Str)
            }
            _ => Ok(Type::Int),
        }
    }

    /// `reg("NAME")`: a register at the probe, which the kernel copies with
    /// the rest of `struct pt_regs` up to it.
    fn register(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let [
            Expr {
                kind: ExprKind::Str(name),
                ..
            },
        ] = args
        else {
            return Err(Error::new(
                span,
                "reg() takes a register's name: reg(\"ip\")",
            ));
        };
        let field = crate::expand::register_field(name).ok_or_else(|| {
            Error::new(
                args[0].span,
                format!(
                    "`{name}` is not an x86-64 register of struct pt_regs (ip, sp, ax, di, r8, ...)"
                ),
            )
        })?;
        for attach in self.attaches.iter_mut() {
            if !matches!(
                attach.target,
                Target::Kprobe { .. } | Target::Uprobe { .. } | Target::Usdt { .. }
            ) {
                return Err(Error::new(
                    span,
                    "reg() exists in kprobes and uprobes, whose context is the registers",
                ));
            }
            if attach.field(&field.name).is_none() {
                attach.fields.push(field.clone());
            }
        }
        self.value_field(&field.name, span)
    }

    /// `left op right`: an integer, of integers, or of two strings or
    /// tuples of one type where `op` compares them.
    fn binary(&mut self, op: BinOp, left: &Expr, right: &Expr, span: Span) -> Result<Type> {
        let l = self.expr(left)?;
        let r = self.expr(right)?;
        if matches!(op, BinOp::Eq | BinOp::Ne) {
            if l != r {
                return Err(Error::new(
                    span,
                    format!(
                        "cannot compare {} with {}",
                        self.type_name(l),
                        self.type_name(r)
                    ),
                ));
            }
        } else if let Some(tuple) = [(l, left), (r, right)]
            .iter()
            .find(|(t, _)| matches!(t, Type::Tuple(_)))
        {
            return Err(Error::new(
                tuple.1.span,
                "this is a tuple: only == and != apply to tuples (compare an element, $t.0)",
            ));
        } else if let Some(array) = [(l, left), (r, right)]
            .iter()
            .find(|(t, _)| matches!(t, Type::Bytes(_)))
        {
            return Err(Error::new(
                array.1.span,
                "this is an array of bytes: only == and != apply to it (or index it, $a[0])",
            ));
        } else if (l == Type::Str || r == Type::Str)
            && !matches!(op, BinOp::LogicalAnd | BinOp::LogicalOr)
        {
            // `&&` and `||` take a string as true where it is not
            // empty, as a predicate does (`/pid == 42 && @name[tid]/`).
            let bad = if l == Type::Str { left } else { right };
            return Err(Error::new(
                bad.span,
                "this is a string: only ==, != and the logical && and || apply to strings",
            ));
        }
        Ok(Type::Int)
    }

    /// `tuple.index`: the type of that element.
    fn element(&mut self, tuple: &Expr, index: usize, span: Span) -> Result<Type> {
        let found = self.expr(tuple)?;
        let Type::Tuple(id) = found else {
            return Err(Error::new(
                span,
                format!(
                    "`.{index}` takes an element of a tuple; this is {}",
                    self.type_name(found)
                ),
            ));
        };
        let elements = &self.tuples[usize::from(id)];
        elements.get(index).copied().ok_or_else(|| {
            Error::new(
                span,
                format!(
                    "this tuple has {} elements, .0 to .{}",
                    elements.len(),
                    elements.len() - 1
                ),
            )
        })
    }

    /// `@map[keys]` in an expression: the type of its values.
    fn map_read(&mut self, map: &MapRef, span: Span) -> Result<Type> {
        self.keys(map)?;
        self.read_kept(map);
        let info = self.map_info(map)?;
        info.kind.read_type().ok_or_else(|| {
            Error::new(
                span,
                format!(
                    "@{} holds {} and cannot be read in an expression",
                    map.name,
                    info.kind.describe()
                ),
            )
        })
    }

    /// `kstack(N)`, `kstack(MODE[, N])` and their `ustack` forms: the
    /// stack's innermost N frames (`stack_frames`) in a mode of
    /// [`StackMode`].
    fn stack(&mut self, name: &str, args: &[Expr], span: Span) -> Result<Type> {
        let (mode, frames) = match args {
            [
                Expr {
                    kind: ExprKind::Str(mode),
                    ..
                },
                rest @ ..,
            ] => (Some(mode.as_str()), rest),
            _ => (None, args),
        };
        if let Some(mode) = mode.filter(|m| StackMode::named(m).is_none()) {
            return Err(Error::new(
                args[0].span,
                format!("`{mode}` is not a stack mode: bpftrace, perf or raw"),
            ));
        }
        if stack_frames(frames).is_none() {
            return Err(Error::new(
                span,
                format!(
                    "{name}() takes a mode and a frame count from 1 to 127: {name}(bpftrace, 5)"
                ),
            ));
        }
        let builtin = if name == "kstack" {
            Builtin::Kstack
        } else {
            Builtin::Ustack
        };
        self.builtin(builtin, span)
    }

    /// `str(field)`: a string the kernel reads as the event happens.
    fn string(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let (target, rest) = args
            .split_first()
            .ok_or_else(|| Error::new(span, "str() takes a field: str(args.NAME)"))?;
        if let Some(len) = rest.first()
            && (!matches!(len.kind, ExprKind::Int(_)) || rest.len() > 1)
        {
            return Err(Error::new(
                len.span,
                "str()'s length must be an integer literal",
            ));
        }
        let field = match &target.kind {
            ExprKind::Member { .. } => return self.member(target, true),
            ExprKind::Deref(address) => return self.deref_string(address, target),
            ExprKind::Field(n) => n.clone(),
            ExprKind::Arg(n) => format!("arg{n}"),
            ExprKind::Builtin(Builtin::Retval) => "retval".into(),
            // A map of strings saved where their pointers were
            // (`saved.rs`).
            ExprKind::Map(_) => {
                self.want(target, Type::Str, "the map str() reads")?;
                return Ok(Type::Str);
            }
            _ => {
                return Err(Error::new(
                    target.span,
                    "str() reads a field, argN, retval, a struct member or `*address`: weft reads the string in the kernel when the event happens",
                ));
            }
        };
        let kind = self.field(&field, target.span)?.kind;
        if self.saved.spans.contains(&target.span)
            && kind == (FieldKind::Pointer { constant: false })
        {
            return Err(Error::new(
                target.span,
                format!(
                    "`{field}` points to data the kernel may still write: weft reads a \
                     saved pointer's string where it is saved (in the kernel, as the \
                     event happens), so save `str(args.{field})` where the string is \
                     complete instead"
                ),
            ));
        }
        match kind {
            FieldKind::Chars => self.copy(&field),
            FieldKind::Int | FieldKind::Memory { .. }
                if field.starts_with("arg") || field == "retval" =>
            {
                self.usdt_memory(&field, target.span, true)?;
                self.capture(&field, target.span)?;
            }
            FieldKind::Int | FieldKind::Const(_) => {
                return Err(Error::new(
                    target.span,
                    format!("`{field}` is an integer, not a string pointer"),
                ));
            }
            FieldKind::Unread => return Err(unread(&field, target.span)),
            _ => self.capture(&field, target.span)?,
        }
        Ok(Type::Str)
    }

    /// `strftime(fmt, nsecs)`: a literal format and a time.
    fn strftime(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let [
            Expr {
                kind: ExprKind::Str(_),
                ..
            },
            ns,
        ] = args
        else {
            return Err(Error::new(
                span,
                "strftime() takes a format and a time: strftime(\"%H:%M:%S\", nsecs)",
            ));
        };
        self.want(ns, Type::Int, "strftime()'s time")?;
        Ok(Type::Str)
    }

    /// `strncmp(s1, s2, n)`: two strings and a literal length.
    fn strncmp(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let [left, right, len] = args else {
            return Err(Error::new(
                span,
                "strncmp() takes two strings and a length: strncmp(comm, \"bash\", 4)",
            ));
        };
        self.want(left, Type::Str, "strncmp()'s first string")?;
        self.want(right, Type::Str, "strncmp()'s second string")?;
        if !matches!(len.kind, ExprKind::Int(n) if n >= 0) {
            return Err(Error::new(
                len.span,
                "strncmp()'s length must be an integer literal",
            ));
        }
        Ok(Type::Int)
    }

    /// `ntop([family,] addr)`: an IPv4 integer, or the bytes of an
    /// address in a member or field (`__u8 daddr_v6[16]`).
    fn ntop(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let (family, addr) = match args {
            [addr] => (None, addr),
            [family, addr] => (Some(family), addr),
            _ => {
                return Err(Error::new(
                    span,
                    "ntop() takes an address, after its family if given: ntop(AF_INET, addr)",
                ));
            }
        };
        if let Some(family) = family {
            self.want(family, Type::Int, "ntop()'s address family")?;
        }
        // The sizes of the addresses given as bytes.
        let sizes = match self.array_sizes(addr)? {
            Some(sizes) => sizes,
            None if matches!(addr.kind, ExprKind::Member { .. } | ExprKind::Field(_)) => Vec::new(),
            // `pton()`'s bytes, or a variable holding them.
            None if addr.may_be_bytes() => match self.expr(addr)? {
                Type::Bytes(n) => vec![u16::from(n)],
                found => {
                    self.want_type(addr, found, Type::Int, "ntop()'s address")?;
                    Vec::new()
                }
            },
            None => {
                self.want(addr, Type::Int, "ntop()'s address")?;
                Vec::new()
            }
        };
        if sizes.iter().any(|size| ![4, 16].contains(size)) {
            return Err(Error::new(
                addr.span,
                "ntop() reads an address of 4 bytes (IPv4) or 16 (IPv6)",
            ));
        }
        Ok(Type::Str)
    }

    /// The size of the array `expr` is at each attach point, where it is an
    /// array member or field (`u8 daddr[16]`); none for anything else.
    fn array_sizes(&mut self, expr: &Expr) -> Result<Option<Vec<u16>>> {
        Ok(match &expr.kind {
            ExprKind::Member { .. } if self.member(expr, false)? == Type::Str => Some(
                self.attaches
                    .iter()
                    .filter_map(|a| a.member(expr.span).map(|m| m.size))
                    .collect(),
            ),
            ExprKind::Field(name) if self.expr(expr)? == Type::Str => Some(
                self.attaches
                    .iter()
                    .filter_map(|a| a.field(name).map(|f| f.size))
                    .collect(),
            ),
            _ => None,
        })
    }

    /// `macaddr(array)`: a 6-byte array member or field (`h_source` of
    /// `struct ethhdr`) as a MAC address.
    fn macaddr(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let [addr] = args else {
            return Err(Error::new(span, "macaddr() takes one 6-byte array"));
        };
        let sizes = self.array_sizes(addr)?.unwrap_or_else(|| vec![0]);
        if sizes.iter().any(|size| *size != 6) {
            return Err(Error::new(
                addr.span,
                "macaddr() reads a 6-byte array member or field, as in macaddr($eth->h_source)",
            ));
        }
        Ok(Type::Str)
    }

    /// `*address`, which weft reads where it runs the probe: in BEGIN, END
    /// and intervals from /proc/kcore, in probes the kernel fires the
    /// kernel at the event, following the pointers the address is from.
    fn deref(&mut self, address: &Expr, span: Span) -> Result<Type> {
        // `$a[i]` of an array of bytes (`pton()`'s): a byte, in weft.
        if let ExprKind::Binary(BinOp::Add, base, index) = &address.kind
            && base.may_be_bytes()
            && let Type::Bytes(_) = self.expr(base)?
        {
            self.want(index, Type::Int, "an array's index")?;
            return Ok(Type::Int);
        }
        if !self.attaches.iter().any(Attach::in_kernel) {
            self.want(address, Type::Int, "an address")?;
            return Ok(Type::Int);
        }
        self.kernel_reads(span, "`*address` values beside kernel events")?;
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            members::read_deref(self.kernel, attach, bound, address, span)?;
        }
        Ok(Type::Int)
    }

    /// `str(*address)`: the string the pointer at `address` points to.
    fn deref_string(&mut self, address: &Expr, target: &Expr) -> Result<Type> {
        self.kernel_reads(target.span, "strings behind `*address`")?;
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            members::read_deref_string(self.kernel, attach, bound, address, target)?;
        }
        Ok(Type::Str)
    }

    /// `buf(pointer[, length])`: the bytes a kernel struct member points
    /// to, up to 64, printed with `%r`.
    fn buf(&mut self, args: &[Expr], span: Span) -> Result<Type> {
        let (data, len) = match args {
            [data] => (data, None),
            [data, len] => (data, Some(len)),
            _ => {
                return Err(Error::new(
                    span,
                    "buf() takes a pointer and a length: buf($skb->data, $skb->len)",
                ));
            }
        };
        if let Some(len) = len {
            self.want(len, Type::Int, "buf()'s length")?;
        }
        let field = match &data.kind {
            ExprKind::Member { .. } => None,
            ExprKind::Field(name) => Some(name.clone()),
            ExprKind::Arg(n) => Some(format!("arg{n}")),
            ExprKind::Builtin(Builtin::Retval) => Some("retval".to_string()),
            _ => {
                return Err(Error::new(
                    data.span,
                    "buf() reads where a pointer field, argument or struct member points: buf(args.buf, args.count), buf($skb->data, $skb->len)",
                ));
            }
        };
        for (attach, bound) in self.attaches.iter_mut().zip(&self.bound) {
            match &field {
                Some(name) => members::read_field_bytes(attach, name, data)?,
                None => {
                    members::read_bytes(self.kernel, attach, bound, data)?;
                }
            }
        }
        Ok(Type::Str)
    }

    fn call(&mut self, name: &str, args: &[Expr], span: Span) -> Result<Type> {
        match name {
            "str" => self.string(args, span),
            "ntop" => self.ntop(args, span),
            "pton" => pton(args, span),
            "macaddr" => self.macaddr(args, span),
            "buf" => self.buf(args, span),
            "strncmp" => self.strncmp(args, span),
            "strcontains" => {
                let [haystack, needle] = args else {
                    return Err(Error::new(
                        span,
                        "strcontains() takes two strings: strcontains(str(args.filename), \"log\")",
                    ));
                };
                self.want(haystack, Type::Str, "strcontains()'s first string")?;
                self.want(needle, Type::Str, "strcontains()'s second string")?;
                Ok(Type::Int)
            }
            "strftime" => self.strftime(args, span),
            "kstack" | "ustack" => self.stack(name, args, span),
            "bswap" => {
                let [value] = args else {
                    return Err(Error::new(span, "bswap() takes one integer"));
                };
                self.want(value, Type::Int, "bswap()'s value")?;
                let width = self.width(value);
                self.swaps.insert(span, width);
                Ok(Type::Int)
            }
            "reg" => self.register(args, span),
            // bpftrace's address-space hints, gone before this with one
            // argument (`constants.rs`).
            "kptr" | "uptr" => Err(Error::new(span, format!("{name}() takes one address"))),
            "cgroup_path" => {
                let (id, filter) = match args {
                    [id] => (id, None),
                    [id, filter] => (id, Some(filter)),
                    _ => {
                        return Err(Error::new(
                            span,
                            "cgroup_path() takes a cgroup id and a filter of hierarchies: \
                             cgroup_path(cgroup [, \"unified\"])",
                        ));
                    }
                };
                self.want(id, Type::Int, "cgroup_path()'s cgroup id")?;
                if let Some(filter) = filter
                    && !matches!(filter.kind, ExprKind::Str(_))
                {
                    return Err(Error::new(
                        filter.span,
                        "cgroup_path()'s filter is a string literal (a glob over hierarchies)",
                    ));
                }
                Ok(Type::Str)
            }
            "strerror" => {
                let [errno] = args else {
                    return Err(Error::new(span, "strerror() takes an error number"));
                };
                self.want(errno, Type::Int, "strerror()'s error number")?;
                Ok(Type::Str)
            }
            "usym" | "ksym" => {
                let [addr] = args else {
                    return Err(Error::new(
                        span,
                        format!("{name}() takes one address: {name}(arg0)"),
                    ));
                };
                self.want(addr, Type::Int, &format!("{name}()'s address"))?;
                Ok(Type::Str)
            }
            "count" | "sum" | "avg" | "min" | "max" | "stats" | "hist" | "lhist"
            | "percentiles" => Err(Error::new(
                span,
                format!(
                    "{name}() is an aggregation: assign it to a map, as in @name[key] = {name}(...)"
                ),
            )),
            "printf" | "print" | "clear" | "zero" | "delete" | "exit" | "time" | "join" | "cat"
            | "system" | "signal" => Err(Error::new(
                span,
                format!("{name}() is a statement and has no value"),
            )),
            _ => Err(Error::new(span, format!("unknown function `{name}`"))),
        }
    }
}

impl Checker<'_> {
    /// The bytes of what `expr` gives, as bpftrace's `sizeof` counts them.
    fn size_of(&mut self, expr: &Expr) -> Result<u32> {
        Ok(self.shape(expr)?.0)
    }

    /// The bytes and alignment of what `expr` gives, as bpftrace lays it
    /// out: a string literal's bytes with its NUL, a task name's 16, any
    /// other string's 64 (as `str()` reads), each byte-aligned; a member's
    /// type's; an integer's width; a tuple as a C struct of its elements,
    /// each at its alignment, the whole a multiple of the widest.
    fn shape(&mut self, expr: &Expr) -> Result<(u32, u32)> {
        let ty = match &expr.kind {
            ExprKind::Str(text) => return Ok((text.len() as u32 + 1, 1)),
            ExprKind::Builtin(Builtin::Comm) => return Ok((16, 1)),
            ExprKind::Tuple(elements) => {
                let (mut size, mut align) = (0u32, 1u32);
                for element in elements {
                    let (bytes, aligned) = self.shape(element)?;
                    size = size.next_multiple_of(aligned) + bytes;
                    align = align.max(aligned);
                }
                return Ok((size.next_multiple_of(align), align));
            }
            ExprKind::Var(name) if self.tuple_shapes.contains_key(name) => {
                return Ok(self.tuple_shapes[name]);
            }
            ExprKind::Member { .. } => {
                let attach = self.attaches.first().ok_or_else(|| {
                    Error::new(expr.span, "a member needs a probe the kernel fires")
                })?;
                let bound = &self.bound[0];
                members::member_type(self.kernel, attach, bound, expr)?
            }
            _ => {
                // Typed, not evaluated: what typing it asked the kernel to
                // read at each event (a string, a field) is dropped again.
                let asked = self.attaches.to_vec();
                let ty = self.expr(expr)?;
                self.attaches.clone_from_slice(&asked);
                return match ty {
                    Type::Int => {
                        let width = u32::from(self.width(expr));
                        Ok((width, width))
                    }
                    Type::Str => Ok((weft_abi::oneliner::STRING_LEN as u32, 1)),
                    Type::Bytes(n) => Ok((u32::from(n), 1)),
                    Type::Tuple(_) => Err(Error::new(
                        expr.span,
                        "sizeof(): weft lays out a tuple written in place or held in a \
                         variable, not one read from a map",
                    )),
                };
            }
        };
        match ty {
            KernelType::Int { size, .. } => Ok((u32::from(size), u32::from(size))),
            KernelType::Pointer(_) => Ok((8, 8)),
            KernelType::Chars(n) => Ok((u32::from(n), 1)),
            KernelType::Record(id) => {
                Ok((self.kernel.record_size(id), self.kernel.record_align(id)))
            }
            KernelType::Other => Err(Error::new(
                expr.span,
                "sizeof(): weft does not know this member's type's size",
            )),
        }
    }

    /// The bytes of the integer `expr` gives, as bpftrace types it: its
    /// member's or field's size, its cast's, its variable's; else 8.
    fn width(&self, expr: &Expr) -> u16 {
        let first = self.attaches.first();
        match &expr.kind {
            ExprKind::Member { .. } => first
                .and_then(|a| a.member(expr.span))
                .map_or(8, |m| m.size),
            ExprKind::Field(name) => first.and_then(|a| a.field(name)).map_or(8, |f| f.size),
            ExprKind::Unary(UnOp::Cast { bits, .. }, _) => u16::from(*bits) / 8,
            ExprKind::Deref(address) => match first.zip(self.bound.first()).map_or_else(
                || address.pointee(),
                |(attach, bound)| members::pointee(self.kernel, attach, bound, address),
            ) {
                UnOp::Cast { bits, .. } => u16::from(bits) / 8,
                _ => 8,
            },
            ExprKind::Var(name) => self.widths.get(name).copied().unwrap_or(8),
            ExprKind::Call(name, args) if name == "bswap" => {
                args.first().map_or(8, |value| self.width(value))
            }
            _ => 8,
        }
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
pub(crate) mod tests {
    use super::*;
    use crate::{
        kernel::{KernelType, format_fields},
        parse,
        plan::{KeptStart, KeyPart, Read, Sample},
    };
    type Result<T> = std::result::Result<T, String>;

    /// Tracepoints as this kernel's tracefs describes them.
    pub struct FakeKernel;

    const OPENAT: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;\n\
        \tfield:int flags;\toffset:32;\tsize:8;\tsigned:0;\n";
    const EXIT_READ: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n";
    const ENTER_READ: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:unsigned int fd;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:char * buf;\toffset:24;\tsize:8;\tsigned:0;\n\
        \tfield:size_t count;\toffset:32;\tsize:8;\tsigned:0;\n";
    const EXECVE: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:const char * filename;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:const char *const * argv;\toffset:24;\tsize:8;\tsigned:0;\n";
    const EXEC: &str = "\tfield:__data_loc char[] filename;\toffset:8;\tsize:4;\tsigned:0;\n\
        \tfield:pid_t pid;\toffset:12;\tsize:4;\tsigned:1;\n";
    const NANOSLEEP: &str = "\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield:struct __kernel_timespec * rqtp;\toffset:16;\tsize:8;\tsigned:0;\n";

    /// Kernel structs: (id, name, members (name, offset, type)).
    type Members = &'static [(&'static str, u32, KernelType)];
    const RECORDS: &[(u32, &str, Members)] = &[
        (
            1,
            "struct task_struct",
            &[
                (
                    "pid",
                    4,
                    KernelType::Int {
                        size: 4,
                        signed: true,
                    },
                ),
                ("real_parent", 8, KernelType::Pointer(Some(1))),
                ("comm", 200, KernelType::Chars(16)),
                ("se", 40, KernelType::Record(2)),
                ("name", 64, KernelType::Pointer(None)),
            ],
        ),
        (
            2,
            "struct sched_entity",
            &[("cfs_rq", 16, KernelType::Pointer(Some(3)))],
        ),
        (
            3,
            "struct cfs_rq",
            &[(
                "nr_running",
                24,
                KernelType::Int {
                    size: 4,
                    signed: false,
                },
            )],
        ),
        (
            4,
            "struct __kernel_timespec",
            &[
                (
                    "tv_sec",
                    0,
                    KernelType::Int {
                        size: 8,
                        signed: true,
                    },
                ),
                (
                    "tv_nsec",
                    8,
                    KernelType::Int {
                        size: 8,
                        signed: true,
                    },
                ),
            ],
        ),
    ];

    impl Kernel for FakeKernel {
        fn tracepoints(&self, category: &str, name: &str) -> Vec<(String, String)> {
            [
                ("syscalls", "sys_enter_openat"),
                ("syscalls", "sys_enter_read"),
                ("syscalls", "sys_exit_read"),
                ("syscalls", "sys_enter_execve"),
                ("sched", "sched_process_exec"),
                ("syscalls", "sys_enter_nanosleep"),
            ]
            .into_iter()
            .filter(|(c, n)| {
                crate::kernel::glob_match(category, c) && crate::kernel::glob_match(name, n)
            })
            .map(|(c, n)| (c.to_string(), n.to_string()))
            .collect()
        }
        fn tracepoint_fields(&self, _: &str, name: &str) -> Result<Vec<Field>> {
            Ok(format_fields(match name {
                "sys_enter_openat" => OPENAT,
                "sys_enter_read" => ENTER_READ,
                "sys_exit_read" => EXIT_READ,
                "sys_enter_execve" => EXECVE,
                "sys_enter_nanosleep" => NANOSLEEP,
                _ => EXEC,
            }))
        }
        fn has_raw_tracepoint(&self, _: &str) -> bool {
            false
        }
        fn has_kprobes(&self) -> bool {
            true
        }
        fn functions(&self, glob: &str) -> Vec<String> {
            ["vfs_read", "vfs_write"]
                .into_iter()
                .filter(|f| crate::kernel::glob_match(glob, f))
                .map(str::to_string)
                .collect()
        }
        fn function(&self, _: &str) -> Result<crate::kernel::Signature> {
            Err("no BTF here".into())
        }
        fn record(&self, name: &str) -> Result<u32> {
            RECORDS
                .iter()
                .find(|r| r.1 == name)
                .map(|r| r.0)
                .ok_or_else(|| format!("no `{name}`"))
        }
        fn record_name(&self, id: u32) -> String {
            RECORDS
                .iter()
                .find(|r| r.0 == id)
                .map(|r| r.1.to_string())
                .unwrap_or_default()
        }
        fn record_size(&self, id: u32) -> u32 {
            id * 1000
        }
        fn member(&self, id: u32, name: &str) -> Result<crate::kernel::Member> {
            RECORDS
                .iter()
                .find(|r| r.0 == id)
                .and_then(|r| r.2.iter().find(|m| m.0 == name))
                .map(|m| crate::kernel::Member {
                    offset: m.1,
                    ty: m.2,
                })
                .ok_or_else(|| format!("no member `{name}`"))
        }
        fn enumerator(&self, name: &str) -> Option<i64> {
            (name == "TCP_FIN_WAIT1").then_some(4)
        }
        fn symbol(&self, name: &str) -> Option<u64> {
            (name == "avenrun").then_some(0xffff_ffff_8300_0000)
        }
        fn cgroup_id(&self, path: &str) -> Result<u64> {
            (path == "/sys/fs/cgroup/weft")
                .then_some(25)
                .ok_or_else(|| format!("{path} is not a cgroup v2 directory"))
        }
        fn record_align(&self, _: u32) -> u32 {
            8
        }
        fn typedef(&self, _: &str) -> Option<crate::kernel::Shape> {
            None
        }
        fn paths(&self, pattern: &str) -> Vec<String> {
            ["/usr/lib/libshop.so.1", "/usr/lib/libshop.so.2"]
                .into_iter()
                .filter(|p| crate::kernel::glob_match(pattern, p))
                .map(str::to_owned)
                .collect()
        }
        fn process_files(&self, pid: u32) -> Result<Vec<String>> {
            Err(format!("no process {pid} here"))
        }
        /// `add(int a, const char *name, struct point *p, struct
        /// holder *q, char c, char d, char e)` in any file; `struct
        /// holder` holds a struct the file only declares.
        fn uprobe_parameters(
            &self,
            _: &str,
            function: &str,
        ) -> Result<Option<crate::UserFunction>> {
            if function == "damaged" {
                return Err("prog: DWARF: a damaged unit".into());
            }
            if function != "add" {
                return Ok(None);
            }
            let types = parse(
                "struct point { int x; long y; struct point *next; }; \
                 struct opaque; struct holder { struct opaque o; int z; }; BEGIN {}",
            )
            .unwrap()
            .definitions
            .records;
            let int = |size, signed| crate::ast::TypeRef {
                base: crate::ast::Base::Int { size, signed },
                pointers: 0,
                dims: Vec::new(),
            };
            let pointer = |base| crate::ast::TypeRef {
                base,
                pointers: 1,
                dims: Vec::new(),
            };
            let record = |name: &str| crate::ast::Base::Record(name.into());
            let params = vec![
                ("a".into(), int(4, true)),
                (
                    "name".into(),
                    pointer(crate::ast::Base::Int {
                        size: 1,
                        signed: true,
                    }),
                ),
                ("p".into(), pointer(record("struct point"))),
                ("q".into(), pointer(record("struct holder"))),
                ("c".into(), int(1, false)),
                ("d".into(), int(1, false)),
                ("e".into(), int(1, false)),
            ];
            Ok(Some(crate::UserFunction {
                params,
                records: types,
            }))
        }
        fn uprobe_functions(&self, path: &str) -> Result<(String, Vec<String>)> {
            let functions = ["main", "readline", "readline_internal", "rl_read_key"];
            Ok((
                format!("/usr/bin/{path}"),
                functions.map(str::to_owned).to_vec(),
            ))
        }
        fn usdt(&self, path: &str) -> Result<(String, Vec<crate::kernel::UsdtSite>)> {
            let site = |provider: &str, name: &str, args: &str| crate::kernel::UsdtSite {
                provider: provider.into(),
                name: name.into(),
                args: args.into(),
                offset: 0,
                semaphore: 0,
            };
            // `tick` has two sites, which place their arguments apart.
            Ok((
                format!("/usr/bin/{path}"),
                vec![
                    site("app", "tick", "8@%rdi 4@$3"),
                    site("app", "start", "8@%rsi -4@-8(%rbp)"),
                    site("app", "tick", "8@%rax 8@sym(%rip)"),
                ],
            ))
        }
    }

    pub fn checked(text: &str) -> Plan {
        check(parse(text).unwrap(), &FakeKernel).unwrap()
    }

    /// Why the checker refuses `text`.
    fn refused(text: &str) -> String {
        check(parse(text).unwrap(), &FakeKernel)
            .unwrap_err()
            .message
    }

    /// Each attach point's start, with the map named.
    fn kept_starts(plan: &Plan) -> Vec<Option<(String, KeptStart)>> {
        plan.attaches
            .iter()
            .map(|a| {
                a.start.map(|s| {
                    let (KeptStart::Store { map, .. } | KeptStart::Take { map, .. }) = s;
                    (plan.maps[map].name.clone(), s)
                })
            })
            .collect()
    }

    /// `unsigned int fd` in its 8-byte slot, read whole as bpftrace reads it.
    const READ_FD: Subject = Subject::Field {
        offset: 16,
        size: 8,
        signed: false,
    };

    #[test]
    fn the_kernel_keeps_a_start_a_later_probe_takes() {
        // The idiom: nothing reaches user space, the latency aggregates in
        // the kernel, the predicate and the delete are gone from the probe.
        let plan = checked(
            "tracepoint:syscalls:sys_enter_read { @start[tid] = nsecs; } \
             tracepoint:syscalls:sys_exit_read /@start[tid]/ { @us[comm] = hist((nsecs - @start[tid]) / 1000); delete(@start[tid]); } \
             END { clear(@start); }",
        );
        let map = plan.map("start").unwrap();
        assert_eq!(
            kept_starts(&plan),
            [
                Some((
                    "start".to_owned(),
                    KeptStart::Store {
                        map,
                        key: Subject::Tid,
                        send: false
                    }
                )),
                Some((
                    "start".to_owned(),
                    KeptStart::Take {
                        map,
                        key: Subject::Tid,
                        required: true,
                        delete: true
                    }
                )),
                None,
            ]
        );
        assert_eq!(plan.program.items[0].body.len(), 0);
        assert!(plan.program.items[1].predicate.is_none());
        assert_eq!(plan.program.items[1].body.len(), 1);
        let agg = plan.attaches[1]
            .agg
            .as_ref()
            .expect("aggregated in the kernel");
        assert_eq!(agg.sample, Some(Sample::Elapsed { divisor: 1000 }));

        // Keyed by a field at the store; a store among other actions is
        // sent too; a take whose predicate user space finishes keeps the
        // rest of it, and the read stays where it is.
        let plan = checked(
            "tracepoint:syscalls:sys_enter_read { @start[args.fd] = nsecs; @n = count(); } \
             tracepoint:syscalls:sys_exit_read /@start[tid] && args.ret * 2 > 0/ { printf(\"%d\\n\", nsecs - @start[tid]); }",
        );
        assert_eq!(
            kept_starts(&plan),
            [
                Some((
                    "start".to_owned(),
                    KeptStart::Store {
                        map,
                        key: READ_FD,
                        send: true
                    }
                )),
                Some((
                    "start".to_owned(),
                    KeptStart::Take {
                        map,
                        key: Subject::Tid,
                        required: true,
                        delete: false
                    }
                )),
            ]
        );
        assert!(matches!(
            plan.program.items[1].predicate.as_ref().map(|p| &p.kind),
            Some(ExprKind::Binary(BinOp::Gt, ..))
        ));
        assert!(plan.attaches[1].agg.is_none());

        // sslsnoop's shape: `!= 0` asks for a start too, and the delete
        // may come before other statements once nothing reads it after.
        let plan = checked(
            "tracepoint:syscalls:sys_enter_read { @start[tid] = nsecs; @fd[tid] = args.fd; } \
             tracepoint:syscalls:sys_exit_read /@start[tid] != 0/ { printf(\"%d %d\\n\", (nsecs - @start[tid]) / 1000, @fd[tid]); delete(@start[tid]); delete(@fd[tid]); }",
        );
        assert_eq!(
            kept_starts(&plan)[1],
            Some((
                "start".to_owned(),
                KeptStart::Take {
                    map,
                    key: Subject::Tid,
                    required: true,
                    delete: true
                }
            ))
        );
        assert!(plan.program.items[1].predicate.is_none());
        assert_eq!(plan.program.items[1].body.len(), 2);
    }

    #[test]
    fn a_start_used_otherwise_stays_in_user_space() {
        let enter = "tracepoint:syscalls:sys_enter_read { @start[tid] = nsecs; } ";
        for exit in [
            // Read while the kernel would still hold it.
            "tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); } interval:s:1 { print(@start); }",
            // Deleted before it is read, or not last.
            "tracepoint:syscalls:sys_exit_read { delete(@start[tid]); @x = hist(nsecs - @start[tid]); }",
            // exit() leaves it to be printed.
            "tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); exit(); delete(@start[tid]); }",
            // Deleted where user space may find the predicate false.
            "tracepoint:syscalls:sys_exit_read /@start[tid] && args.ret * 2 > 0/ { @x = hist(nsecs - @start[tid]); delete(@start[tid]); }",
            // Two keys in one probe.
            "tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); delete(@start[pid]); }",
            // Stored and read in one probe; stored inside a block.
            "tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); @start[tid] = nsecs; }",
            "tracepoint:syscalls:sys_exit_read { if (args.ret > 0) { @start[tid] = nsecs; } @x = hist(nsecs - @start[tid]); }",
            // Changed otherwise.
            "tracepoint:syscalls:sys_exit_read { @start[tid] += 1; }",
        ] {
            let plan = checked(&format!("{enter}{exit}"));
            assert!(plan.attaches.iter().all(|a| a.start.is_none()), "{exit}");
        }
        // Not the time, and a predicate the kernel does not test whole.
        for program in [
            "tracepoint:syscalls:sys_enter_read { @start[tid] = 1; } tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); }",
            "tracepoint:syscalls:sys_enter_read /args.fd * 2 > 1/ { @start[tid] = nsecs; } tracepoint:syscalls:sys_exit_read { @x = hist(nsecs - @start[tid]); }",
        ] {
            let plan = checked(program);
            assert!(plan.attaches.iter().all(|a| a.start.is_none()), "{program}");
        }
    }

    #[test]
    fn the_kernel_aggregates_what_nothing_else_reads() {
        // Per attach point: the aggregation's map, key and sample.
        type Kept = Option<(usize, Vec<KeyPart>, Option<Sample>)>;
        let kept = |text: &str| -> Vec<Kept> {
            checked(text)
                .attaches
                .iter()
                .map(|a| {
                    a.agg
                        .as_ref()
                        .map(|agg| (agg.map, agg.keys.clone(), agg.sample))
                })
                .collect()
        };
        let count = Subject::Field {
            offset: 32,
            size: 8,
            signed: false,
        };
        // `unsigned int fd` in its 8-byte slot, read whole as bpftrace reads it.
        let fd = Subject::Field {
            offset: 16,
            size: 8,
            signed: false,
        };
        // Keyed by comm, tid, probe, a field or nothing; predicates the
        // kernel tests whole.
        assert_eq!(
            kept(
                "tracepoint:syscalls:sys_enter_read /pid == 42/ { @[comm] = count(); } tracepoint:syscalls:sys_exit_read { @n = count(); } tracepoint:syscalls:sys_enter_openat { @t[tid] = count(); }"
            ),
            [
                Some((0, vec![KeyPart::Comm], None)),
                Some((1, vec![], None)),
                Some((2, vec![KeyPart::Int(Subject::Tid)], None)),
            ]
        );
        assert_eq!(
            kept(
                "tracepoint:syscalls:sys_enter_read /args.fd == 3/ { @b[comm, args.fd] = sum(args.count); } tracepoint:syscalls:sys_enter_read { @h[probe] = hist(args.count); }"
            ),
            [
                Some((
                    0,
                    vec![KeyPart::Comm, KeyPart::Int(fd)],
                    Some(Sample::Int(count))
                )),
                Some((1, vec![KeyPart::Probe], Some(Sample::Int(count)))),
            ]
        );
        assert_eq!(
            kept("tracepoint:syscalls:sys_enter_read { @[cpu] = lhist(-3, 0, 10, 1); }"),
            [Some((
                0,
                vec![KeyPart::Int(Subject::Cpu)],
                Some(Sample::Const(-3))
            ))]
        );
        // Printing a map reads none of its values.
        assert_eq!(
            kept(
                "tracepoint:syscalls:sys_enter_read { @[comm] = count(); } interval:s:1 { print(@); }"
            )[0],
            Some((0, vec![KeyPart::Comm], None))
        );
        for text in [
            // Another action, a key or sample the kernel does not make,
            // percentiles, three keys, two aggregations, a predicate part
            // run in weft, a map read, cleared or deleted from.
            r#"tracepoint:syscalls:sys_enter_read { @[comm] = count(); printf("x"); }"#,
            "tracepoint:syscalls:sys_enter_read { @[args.fd + 1] = count(); }",
            "tracepoint:syscalls:sys_enter_read { @ = sum(args.count * 2); }",
            "tracepoint:syscalls:sys_enter_read { @ = percentiles(args.count); }",
            "tracepoint:syscalls:sys_enter_read { @[pid, tid, cpu] = count(); }",
            "tracepoint:syscalls:sys_enter_read { @a = count(); @b = count(); }",
            "tracepoint:syscalls:sys_enter_read /args.count * 2 > 10/ { @[comm] = count(); }",
            "tracepoint:syscalls:sys_enter_read { @[comm] = count(); } END { printf(\"%d\", @[\"a\"]); }",
            "tracepoint:syscalls:sys_enter_read { @[comm] = count(); } interval:s:1 { clear(@); }",
            "tracepoint:syscalls:sys_enter_read { @[pid] = count(); } tracepoint:syscalls:sys_exit_read { delete(@[pid]); }",
        ] {
            assert_eq!(kept(text)[0], None, "{text}");
        }
    }

    #[test]
    fn join_reads_one_pointer_array_per_probe() {
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_execve { join(args.argv); join(args.argv, ","); }"#,
        );
        let join = plan.attaches[0].join.as_ref().expect("a join");
        assert_eq!((join.name.as_str(), join.offset), ("argv", 24));
        assert!(
            refused("tracepoint:syscalls:sys_enter_openat { join(args.dfd); }")
                .contains("`dfd` is not a pointer")
        );
        assert!(
            refused("tracepoint:syscalls:sys_enter_execve { join(args.argv, 5); }")
                .contains("separator must be a string literal")
        );
        assert!(
            refused(
                "tracepoint:syscalls:sys_enter_execve { join(args.argv); join(args.filename); }"
            )
            .contains("a probe can join() one array")
        );
    }

    #[test]
    fn simple_predicate_parts_go_to_the_kernel() {
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_read /pid == 42 && 4096 < args.count && comm == "dd" && @x[tid]/ { @x[tid] = 1; }"#,
        );
        let attach = &plan.attaches[0];
        assert_eq!(attach.comm.as_deref(), Some("dd"));
        assert_eq!(
            attach.filters,
            vec![
                Filter {
                    subject: Subject::Pid,
                    op: BinOp::Eq,
                    value: Operand::Int(42)
                },
                Filter {
                    subject: Subject::Field {
                        offset: 32,
                        size: 8,
                        signed: false
                    },
                    op: BinOp::Gt,
                    value: Operand::Int(4096)
                },
            ]
        );
        // Only what the predicate and actions read is copied.
        assert_eq!(attach.raw_len, 40);
    }

    #[test]
    fn only_read_fields_and_strings_are_copied() {
        let plan = checked("tracepoint:syscalls:sys_enter_openat { @[comm] = count(); }");
        assert_eq!(plan.attaches[0].raw_len, 0);
        assert!(plan.attaches[0].strings.is_empty());
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_openat { printf("%s\n", str(args.filename)); } tracepoint:sched:sched_process_exec { printf("%s\n", str(args.filename)); }"#,
        );
        assert_eq!(plan.attaches[0].raw_len, 0);
        assert_eq!(
            plan.attaches[0].strings[0].kind,
            FieldKind::Pointer { constant: true }
        );
        assert_eq!(plan.attaches[1].strings[0].kind, FieldKind::DataLoc);
    }

    /// opensnoop's idiom: a pointer saved at the entry, `str()` of it at the
    /// exit. The map holds the string, read at the entry; a pointer the
    /// syscall writes through (read's buffer) is refused, saying why.
    #[test]
    fn a_saved_input_pointer_keeps_its_string() {
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_openat { @name[tid] = args.filename; }
               tracepoint:syscalls:sys_exit_read /@name[tid]/ { printf("%s\n", str(@name[tid], 8)); }"#,
        );
        assert_eq!(plan.maps[0].kind, MapKind::Value(Type::Str));
        assert_eq!(
            plan.attaches[0].strings[0].kind,
            FieldKind::Pointer { constant: true }
        );
        let err = check(
            parse(
                r#"tracepoint:syscalls:sys_enter_read { @buf[tid] = args.buf; }
                   tracepoint:syscalls:sys_exit_read { printf("%s\n", str(@buf[tid])); }"#,
            )
            .unwrap(),
            &FakeKernel,
        )
        .unwrap_err();
        assert!(
            err.message
                .starts_with("`buf` points to data the kernel may still write"),
            "{}",
            err.message
        );
        // Without str() of the map, a saved pointer stays a number.
        let plan = checked("tracepoint:syscalls:sys_enter_read { @buf[tid] = args.buf; }");
        assert_eq!(plan.maps[0].kind, MapKind::Value(Type::Int));
    }

    #[test]
    fn globs_expand_and_fields_must_exist_in_every_match() {
        let plan = checked("tracepoint:syscalls:sys_e*_read { @[probe] = count(); }");
        let names: Vec<String> = plan.attaches.iter().map(|a| a.target.name()).collect();
        assert_eq!(
            names,
            [
                "tracepoint:syscalls:sys_enter_read",
                "tracepoint:syscalls:sys_exit_read"
            ]
        );
        let err = check(
            parse("tracepoint:syscalls:sys_e*_read { @ = hist(args.ret); }").unwrap(),
            &FakeKernel,
        )
        .unwrap_err();
        assert_eq!(
            err.message,
            "tracepoint:syscalls:sys_enter_read has no field `ret`: it has __syscall_nr, fd, buf, count"
        );
    }

    /// A map assigned only variables, maps, members or tuples takes the
    /// type of the first assignment checked; tuple types are their
    /// elements', and misuse says what and where.
    #[test]
    fn maps_and_tuples_take_the_types_of_their_values() {
        let plan = checked(
            r#"BEGIN { $s = "a"; @s = $s; @t = (1, ("x", 2)); @c = @s; @u = @t; @n = count(); }"#,
        );
        let kind = |name: &str| plan.maps[plan.map(name).unwrap()].kind;
        assert_eq!(kind("s"), MapKind::Value(Type::Str));
        assert_eq!(kind("c"), MapKind::Value(Type::Str));
        assert!(matches!(kind("t"), MapKind::Value(Type::Tuple(_))));
        assert_eq!(kind("t"), kind("u"));
        for (program, message) in [
            (
                r#"BEGIN { @t = (1, "a"); @t = (1, 2); }"#,
                "@t must be a tuple (int, string), not a tuple (int, int)",
            ),
            (
                r#"BEGIN { $t = (1, (2, "a")); $t = (1, 2); }"#,
                "$t holds a tuple (int, (int, string)) and cannot also hold a tuple (int, int)",
            ),
            (
                r#"BEGIN { $t = (1, 2); printf("%d\n", $t.2); }"#,
                "this tuple has 2 elements, .0 to .1",
            ),
            (
                r#"BEGIN { $t = (1, 2); printf("%d\n", $t); }"#,
                "this value is a tuple: print it with print(), or its elements ($t.0)",
            ),
            (
                "BEGIN { @[(1, 2)] = count(); }",
                "a tuple cannot be a map key: key the map by its parts, as in @map[$a, $b]",
            ),
            (
                "BEGIN { $t = (1, 2); $x = $t * 2; }",
                "this is a tuple: only == and != apply to tuples (compare an element, $t.0)",
            ),
            (
                "BEGIN { $x = 1; @m = $x; @m = count(); }",
                "@m holds a value elsewhere and cannot also hold count()",
            ),
        ] {
            let err = check(parse(program).unwrap(), &FakeKernel).unwrap_err();
            assert_eq!(err.message, message, "{program}");
        }
    }

    #[test]
    fn usdt_sites_place_their_arguments_apart() {
        let plan = checked("usdt:app:tick { @[arg0] = count(); }");
        let sites: Vec<(String, u16)> = plan
            .attaches
            .iter()
            .map(|a| (a.target.name(), a.field("arg0").unwrap().offset))
            .collect();
        let tick = "usdt:/usr/bin/app:app:tick".to_string();
        assert_eq!(sites, [(tick.clone(), 112), (tick, 80)], "rdi, then rax");
        // A register argument is copied; one in memory is read by the
        // kernel, 8 bytes below the address in rbp.
        let plan = checked("usdt:app:app:s* { @ = sum(arg1); }");
        assert_eq!(plan.attaches.len(), 1);
        let read = &plan.attaches[0].reads[0];
        assert_eq!(
            (read.hops.as_slice(), read.at),
            (&[32][..], (-8i32).cast_unsigned())
        );
        let err = check(
            parse("usdt:app:tick { @ = sum(arg1); }").unwrap(),
            &FakeKernel,
        )
        .unwrap_err();
        assert!(
            err.message
                .starts_with("`arg1` of this USDT probe is in a place weft does not read"),
            "{}",
            err.message
        );
        let err = check(
            parse("usdt:app:nope { @ = count(); }").unwrap(),
            &FakeKernel,
        )
        .unwrap_err();
        assert_eq!(err.message, "/usr/bin/app has no USDT probe *:nope");
    }

    #[test]
    fn kprobes_name_registers() {
        let plan = checked("kretprobe:vfs_* { @[func, retval] = count(); }");
        assert_eq!(plan.attaches.len(), 2);
        assert!(plan.attaches[0].field("retval").is_some());
        assert_eq!(plan.attaches[0].raw_len, 88);
        // `reg()`: the kernel copies the registers up to the one read
        // (`ip` ends at byte 136 of `struct pt_regs`).
        let plan = checked(r#"kprobe:vfs_read { @[reg("ip")] = count(); }"#);
        assert_eq!(plan.attaches[0].raw_len, 136);
        for (program, message) in [
            (
                r#"kprobe:vfs_read { @[reg("eip")] = count(); }"#,
                "`eip` is not an x86-64 register of struct pt_regs (ip, sp, ax, di, r8, ...)",
            ),
            (
                r#"tracepoint:syscalls:sys_enter_read { @[reg("ip")] = count(); }"#,
                "reg() exists in kprobes and uprobes, whose context is the registers",
            ),
        ] {
            let err = check(parse(program).unwrap(), &FakeKernel).unwrap_err();
            assert_eq!(err.message, message);
        }
    }

    #[test]
    fn struct_members_are_read_in_the_kernel() {
        // naptime.bt's shape: members behind a tracepoint's pointer field
        // and behind curtask, near ones sharing a read.
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_nanosleep /args->rqtp->tv_sec + args->rqtp->tv_nsec/ {
                $task = (struct task_struct *)curtask;
                printf("%d %s %d\n", $task->real_parent->pid, $task->real_parent->comm, args->rqtp->tv_nsec);
            }"#,
        );
        let attach = &plan.attaches[0];
        assert_eq!(
            attach.reads,
            vec![
                Read {
                    start: Start::Context,
                    hops: vec![16],
                    at: 0,
                    len: 16,
                    string: false
                },
                Read {
                    start: Start::Task,
                    hops: vec![8],
                    at: 4,
                    len: 4,
                    string: false
                },
                Read {
                    start: Start::Task,
                    hops: vec![8],
                    at: 200,
                    len: 16,
                    string: false
                },
            ]
        );
        let members: Vec<_> = attach
            .members
            .iter()
            .map(|m| (m.read, m.at, m.size, m.signed, m.chars))
            .collect();
        assert_eq!(
            members,
            [
                (0, 0, 8, true, false),
                (0, 8, 8, true, false),
                (1, 4, 4, true, false),
                (2, 200, 16, false, true),
                (0, 8, 8, true, false),
            ]
        );
        // Nothing of the record itself is copied: the pointer is followed
        // in the kernel.
        assert_eq!(attach.raw_len, 0);
        // `.` into a member struct, then `->` on: one pointer followed
        // from curtask, through se.cfs_rq.
        let plan = checked(
            "tracepoint:syscalls:sys_enter_nanosleep { @[((struct task_struct *)curtask)->se.cfs_rq->nr_running] = count(); }",
        );
        assert_eq!(
            plan.attaches[0].reads,
            vec![Read {
                start: Start::Task,
                hops: vec![56],
                at: 24,
                len: 4,
                string: false
            }]
        );
    }

    #[test]
    fn a_dereference_in_a_kernel_probe_is_read_in_the_kernel() {
        // bpftrace's forms: a pointer cast (its size and sign), pointer
        // arithmetic (whole pointees), an address plus bytes, and a
        // pointer read through another and gone back from.
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_nanosleep {
                printf("%d %d %d %d\n", *(int64 *)args->rqtp, *((int32 *)args->rqtp + 3),
                    *(uint8 *)((uint64)args->rqtp + 9), *(int16 *)(*(uint64 *)args->rqtp - 4));
            }"#,
        );
        let attach = &plan.attaches[0];
        let reads: Vec<_> = (attach.reads.iter())
            .map(|r| (r.start, r.hops.as_slice(), r.at, r.len, r.string))
            .collect();
        let context = Start::Context;
        assert_eq!(
            reads,
            [
                (context, &[16][..], 0, 16, false),
                (context, &[16, 0][..], -4i32 as u32, 2, false),
            ]
        );
        let members: Vec<_> = attach
            .members
            .iter()
            .map(|m| (m.read, m.at, m.size, m.signed))
            .collect();
        assert_eq!(
            members,
            [
                (0, 0, 8, true),
                (0, 12, 4, true),
                (0, 9, 1, false),
                (1, -4i32 as u32, 2, true),
            ]
        );
        assert!(
            refused("tracepoint:syscalls:sys_enter_nanosleep { @ = *(args->rqtp + nsecs); }")
                .contains("weft follows pointers from")
        );
        assert!(
            refused("BEGIN, tracepoint:syscalls:sys_enter_nanosleep { @ = *kaddr(\"avenrun\"); }")
                .contains("BEGIN runs in weft")
        );
        // The string behind a pointer read through another: argv[1].
        let plan = checked(
            "tracepoint:syscalls:sys_enter_execve { @[str(*((uint64)args.argv + 8))] = count(); }",
        );
        let read = &plan.attaches[0].reads[0];
        assert_eq!(
            (read.hops.as_slice(), read.at, read.string),
            (&[24, 8][..], 0, true)
        );
        assert!(
            refused(
                "tracepoint:syscalls:sys_enter_execve { @[str(*(uint32 *)args.argv)] = count(); }"
            )
            .contains("8-byte pointer")
        );
        // A typed pointer steps by what it points to, as bpftrace steps
        // it, and `p[i]` is `*(p + i)`: argv's are pointers, a char
        // array member's chars.
        let plan = checked(
            "tracepoint:syscalls:sys_enter_execve { @[str(args->argv[1]), *(args.argv + 2), curtask->comm[1]] = count(); }",
        );
        let attach = &plan.attaches[0];
        let reads: Vec<_> = (attach.reads.iter())
            .map(|r| (r.start, r.hops.as_slice(), r.at, r.len, r.string))
            .collect();
        assert_eq!(
            reads,
            [
                (context, &[24, 8][..], 0, 64, true),
                (context, &[24][..], 16, 8, false),
                (Start::Task, &[][..], 201, 1, false),
            ]
        );
        let members: Vec<_> = (attach.members.iter())
            .map(|m| (m.read, m.at, m.size, m.signed))
            .collect();
        assert_eq!(
            members,
            [(0, 0, 64, false), (1, 16, 8, false), (2, 201, 1, true)]
        );
        // Bytes before the task's own are not the kernel's to read.
        assert!(
            refused("tracepoint:syscalls:sys_enter_nanosleep { @ = *((uint8 *)curtask - 1); }")
                .contains("out of reach")
        );
    }

    #[test]
    fn pointers_saved_per_thread_are_kept_in_the_kernel_too() {
        let program = |key: &str| {
            format!(
                "tracepoint:syscalls:sys_enter_openat {{ @f[{key}] = args.filename; }} \
                 tracepoint:syscalls:sys_exit_read /@f[{key}]/ {{ printf(\"%s\\n\", str(@f[{key}])); delete(@f[{key}]); }} \
                 END {{ clear(@f); }}"
            )
        };
        let plan = checked(&program("tid"));
        let save = plan.attaches[0].save.as_ref();
        assert_eq!(
            save.map(|(f, m)| (f.name.as_str(), *m)),
            Some(("filename", 0))
        );
        assert_eq!(plan.attaches[1].saved, [0]);
        assert_eq!(plan.attaches[1].saved_slot(0), Some(0));
        // Keyed otherwise, the string is the one read where it is saved.
        let plan = checked(&program("pid"));
        assert!(plan.attaches[0].save.is_none());
        assert!(plan.attaches[1].saved.is_empty());
    }

    #[test]
    fn str_of_a_pointer_member_reads_its_string_in_the_kernel() {
        let plan = checked(
            "tracepoint:syscalls:sys_enter_nanosleep { printf(\"%s %s\\n\", str(curtask->name), str(curtask->comm)); }",
        );
        assert_eq!(
            plan.attaches[0].reads,
            vec![
                Read {
                    start: Start::Task,
                    hops: vec![64],
                    at: 0,
                    len: 64,
                    string: true
                },
                Read {
                    start: Start::Task,
                    hops: vec![],
                    at: 200,
                    len: 16,
                    string: false
                },
            ]
        );
        let error = check(
            parse("tracepoint:syscalls:sys_enter_nanosleep { print(str(curtask->pid)); }").unwrap(),
            &FakeKernel,
        )
        .unwrap_err();
        assert_eq!(
            error.message,
            "str() reads a char array, or the string a pointer or address member points to"
        );
    }

    #[test]
    fn signal_is_sent_by_the_kernel_where_it_alone_decides() {
        let checked_unsafe = |text: &str| {
            let mut program = parse(text).unwrap();
            program.unsafe_calls = true;
            check(program, &FakeKernel)
        };
        let plan = checked_unsafe(
            r#"tracepoint:syscalls:sys_enter_openat /pid == 42 && comm == "x"/ { signal("SIGUSR1"); @ = count(); }"#,
        )
        .unwrap();
        assert_eq!(plan.attaches[0].signal, Some(10));
        let refused_unsafe =
            checked_unsafe("tracepoint:syscalls:sys_enter_openat { override(-1); }");
        assert!(
            refused_unsafe
                .unwrap_err()
                .message
                .contains("CONFIG_BPF_KPROBE_OVERRIDE")
        );
        assert_eq!(
            checked_unsafe("tracepoint:syscalls:sys_enter_openat { signal(9); }")
                .unwrap()
                .attaches[0]
                .signal,
            Some(9)
        );
        for (text, message) in [
            (
                r#"tracepoint:syscalls:sys_enter_openat /@m[tid]/ { signal("KILL"); @m[tid] = 1; }"#,
                "the kernel must test the whole predicate",
            ),
            (
                r#"tracepoint:syscalls:sys_enter_openat { if (pid == 1) { signal("KILL"); } }"#,
                "cannot be under an `if` or `while`",
            ),
            (
                r#"BEGIN { signal("KILL"); }"#,
                "can not be used with \"BEGIN\" probes",
            ),
            (
                r#"tracepoint:syscalls:sys_enter_openat { signal("FOO"); }"#,
                "FOO is not a valid signal",
            ),
            (
                "tracepoint:syscalls:sys_enter_openat { signal(99); }",
                "99 is not a valid signal, allowed range: [1,64]",
            ),
        ] {
            let error = checked_unsafe(text).unwrap_err();
            assert!(error.message.contains(message), "{text}: {}", error.message);
        }
        let error = check(
            parse(r#"tracepoint:syscalls:sys_enter_openat { signal("KILL"); }"#).unwrap(),
            &FakeKernel,
        )
        .unwrap_err();
        assert!(
            error.message.contains("needs --unsafe"),
            "{}",
            error.message
        );
    }

    #[test]
    fn sizeof_becomes_the_size_of_its_type_or_expression() {
        let mut plan = checked(
            r#"tracepoint:syscalls:sys_enter_openat { $x = (int16)1;
               @[sizeof(struct task_struct), sizeof(curtask->comm), sizeof(curtask->se),
                 sizeof(curtask->real_parent), sizeof("ab"), sizeof(uint16), sizeof(comm),
                 sizeof($x), sizeof(str(args.filename)), sizeof(pid)] = count(); }"#,
        );
        let mut sizes = Vec::new();
        plan.program.rewrite(&mut |expr| match &expr.kind {
            ExprKind::Int(n) => sizes.push(*n),
            ExprKind::SizeOf(_) => panic!("sizeof left: {expr:?}"),
            _ => {}
        });
        // (int16)1's 1, then the sizes in order.
        assert_eq!(sizes, [1, 1000, 16, 2000, 8, 3, 2, 16, 2, 64, 8]);
        // Not evaluated: the kernel reads no string for it.
        assert!(
            plan.attaches[0].strings.is_empty(),
            "{:?}",
            plan.attaches[0]
        );
        let error = check(
            parse("BEGIN { @ = sizeof(struct nosuch); }").unwrap(),
            &FakeKernel,
        )
        .unwrap_err();
        assert_eq!(error.message, "no `struct nosuch`");
        // A name inside resolves as anywhere else (this was 8, silently).
        assert!(refused("BEGIN { @ = sizeof(int); }").starts_with("unknown name `int`"));
    }

    #[test]
    fn pton_gives_an_address_s_bytes_or_says_why_not() {
        checked(
            r#"BEGIN { $a = pton("10.0.0.1"); @[$a[0], ntop($a)] = count(); @v = pton("::1"); }"#,
        );
        assert_eq!(
            refused(r#"BEGIN { @ = pton("10.0.0.256"); }"#),
            "pton(): `10.0.0.256` is not an IPv4 or IPv6 address"
        );
        assert!(refused(r#"BEGIN { $s = "1.2.3.4"; @ = pton($s); }"#).starts_with("pton() takes"));
        assert_eq!(
            refused(r#"BEGIN { @ = pton("1.2.3.4") + 1; }"#),
            "this is an array of bytes: only == and != apply to it (or index it, $a[0])"
        );
        assert_eq!(
            refused(r#"BEGIN { @ = pton("1.2.3.4") == pton("::1"); }"#),
            "cannot compare an array of 4 bytes with an array of 16 bytes"
        );
    }

    #[test]
    fn a_uprobe_path_glob_is_every_file_with_the_function() {
        let plan = checked("uprobe:/usr/lib/libshop.so.*:readline { @ = count(); }");
        let paths: Vec<String> = (plan.attaches.iter())
            .map(|a| match &a.target {
                Target::Uprobe { path, .. } => path.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(paths, ["/usr/lib/libshop.so.1", "/usr/lib/libshop.so.2"]);
        assert_eq!(
            refused("uprobe:/opt/nothing*:readline { @ = count(); }"),
            "no file matches `/opt/nothing*`"
        );
        assert_eq!(
            refused("uprobe:/usr/lib/libshop.so.*:nope { @ = count(); }"),
            "no function of the 2 files matching `/usr/lib/libshop.so.*` is `nope`"
        );
    }

    /// Sizes bpftrace 0.17 prints for the same tuples: C structs of their
    /// elements, strings byte-aligned.
    #[test]
    fn sizeof_a_tuple_is_bpftrace_s() {
        let mut plan = checked(
            r#"BEGIN { $t = ((int8)1, (int16)2); $u = (1, (2, "x"));
               @[sizeof((1, 2)), sizeof(((int8)1, (int16)2)), sizeof((1, "abc")),
                 sizeof(((int8)1, "abcdefghij")), sizeof(((int32)1, (int8)2, (int64)3)),
                 sizeof((comm, 1)), sizeof(("ab", (int8)1)), sizeof($t), sizeof($u),
                 sizeof(((int8)1, ((int8)2, (int32)3))), sizeof((pid, (int8)1))] = count(); }"#,
        );
        let mut sizes = Vec::new();
        plan.program.rewrite(&mut |expr| {
            if let (ExprKind::Int(n), true) = (&expr.kind, expr.span.len > 3) {
                sizes.push(*n);
            }
        });
        assert_eq!(sizes, [16, 4, 16, 12, 16, 24, 4, 4, 24, 12, 16]);
    }

    #[test]
    fn a_program_s_own_types_are_laid_out_as_c_lays_them_out() {
        let plan = checked(
            "struct ts { long sec; long nsec; };
             struct w { char c; struct ts t; unsigned int a : 3, b : 7; union { int i; long l; };
                        struct task_struct *task; char name[6]; }
             enum e { A = -1, B, C = 1 << 4, D }; enum { E = TCP_FIN_WAIT1 + C };
             tracepoint:syscalls:sys_enter_nanosleep { $w = (struct w *)args->rqtp;
               @[sizeof(struct w), sizeof(struct ts), A, B, C, D, E] = count();
               printf(\"%d %d %d %s\", $w->t.nsec, $w->l, $w->task->pid, $w->name); }",
        );
        let Stmt::MapAssign { map, .. } = &plan.program.items[0].body[1] else {
            panic!("{:?}", plan.program.items[0].body)
        };
        let keys: Vec<_> = map
            .keys
            .iter()
            .map(|k| match k.kind {
                ExprKind::Int(n) => n,
                _ => panic!("{k:?}"),
            })
            .collect();
        // c, then ts at 8, the bit-fields in one int at 24, the union at
        // 32, the pointer at 40, the name at 48: 54 bytes, 56 aligned.
        assert_eq!(keys, [56, 16, -1, 0, 16, 17, 20]);
        let members: Vec<_> = plan.attaches[0]
            .members
            .iter()
            .map(|m| {
                (
                    plan.attaches[0].reads[m.read].hops.clone(),
                    m.at,
                    m.size,
                    m.chars,
                )
            })
            .collect();
        assert_eq!(
            members,
            [
                (vec![16], 16, 8, false),
                (vec![16], 32, 8, false),
                (vec![16, 40], 4, 4, false),
                (vec![16], 48, 6, true)
            ]
        );
    }

    #[test]
    fn only_comparisons_whose_orders_differ_are_made_unsigned() {
        let predicate = |text: &str| {
            let plan = checked(text);
            let flipped = format!("{:?}", plan.program.items[0].predicate).contains("Xor");
            (flipped, plan.attaches[0].filters.len())
        };
        // A kprobe's retval is unsigned and may be 2^63 or more: flipped,
        // and left to weft.
        assert_eq!(
            predicate("kretprobe:vfs_read /retval < 0/ { @ = count(); }"),
            (true, 0)
        );
        assert_eq!(
            predicate("tracepoint:syscalls:sys_enter_read /pid > -1/ { @ = count(); }"),
            (true, 0)
        );
        // Both orders agree: unchanged, and tested in the kernel.
        assert_eq!(
            predicate("tracepoint:syscalls:sys_enter_read /pid > 100/ { @ = count(); }"),
            (false, 1)
        );
        assert_eq!(
            predicate("tracepoint:syscalls:sys_exit_read /args.ret < 0/ { @ = count(); }"),
            (false, 1)
        );
        assert_eq!(
            predicate("tracepoint:syscalls:sys_enter_read /args.count > 4096/ { @ = count(); }"),
            (false, 1)
        );
    }

    #[test]
    fn uprobe_places_as_bpftrace_writes_them() {
        let symbols = |text: &str| -> Vec<String> {
            let plan = checked(text);
            (plan.attaches.iter())
                .map(|a| match &a.target {
                    Target::Uprobe { symbol, .. } => symbol.clone(),
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        assert_eq!(
            symbols("uprobe:bash:readline* { @ = count(); }"),
            ["readline", "readline_internal"]
        );
        assert_eq!(symbols(r#"uprobe:bash:"main" { @ = count(); }"#), ["main"]);
        // An offset or an address is the kernel side's to place.
        assert_eq!(symbols("uprobe:bash:main+4 { @ = count(); }"), ["main+4"]);
        assert!(refused("uprobe:bash:nothing* { @ = count(); }").contains("matches `nothing*`"));
    }

    #[test]
    fn a_program_s_bad_types_say_why() {
        let probe = "tracepoint:syscalls:sys_enter_nanosleep";
        for (text, says) in [
            (
                "struct a { struct b x; }; struct b { struct a y; };",
                "struct a holds itself",
            ),
            (
                "struct a { int x; }; struct a { int y; };",
                "struct a is defined twice",
            ),
            ("struct a { pid_t p; };", "unknown type `pid_t`"),
            (
                "struct a { struct nope n; };",
                "struct nope is neither defined",
            ),
            ("struct a { void v; };", "cannot be `void`"),
            ("struct a { long x : 65; };", "no wider than its type"),
            ("enum { A, B = A + C };", "unknown constant `C`"),
            ("enum { A }; enum { A };", "enumerator `A` is defined twice"),
        ] {
            let text = format!("{text} {probe} {{ exit(); }}");
            let message = refused(&text);
            assert!(message.contains(says), "{text}: {message}");
        }
        assert_eq!(
            refused(&format!(
                "struct a {{ int x : 3; }}; {probe} {{ print(((struct a *)args->rqtp)->x); }}"
            )),
            "`x` of struct a is a bit-field, which weft does not read"
        );
    }

    #[test]
    fn struct_members_that_cannot_be_read_say_why() {
        let error = |text: &str| {
            check(parse(text).unwrap(), &FakeKernel)
                .unwrap_err()
                .message
        };
        let probe = "tracepoint:syscalls:sys_enter_nanosleep";
        assert_eq!(
            error(&format!("{probe} {{ print(curtask); }}")),
            "weft does not copy curtask's address: read its members (curtask->pid)"
        );
        assert_eq!(
            error(&format!(
                "{probe} {{ $t = (struct task_struct *)curtask; print($t); }}"
            )),
            "$t holds curtask, whose address weft does not copy: read its members ($t->pid)"
        );
        assert_eq!(
            error(&format!("{probe} {{ print(args->rqtp->tv_usec); }}")),
            "no member `tv_usec`"
        );
        assert_eq!(
            error(&format!("{probe} {{ print(curtask->se); }}")),
            "this is a struct sched_entity: read one of its members"
        );
        assert_eq!(
            error(&format!("{probe} {{ print(args->__syscall_nr->x); }}")),
            "not a pointer to a kernel struct: cast it, as in `(struct sock *)arg0`"
        );
        assert_eq!(
            error(&format!("{probe} {{ print((struct nope *)args->rqtp); }}")),
            "no `struct nope`"
        );
        // Eight regions: the task, three parents up, two run queues, the
        // timespec, and a parent's run queue.
        assert_eq!(
            error(&format!(
                "{probe} {{ printf(\"%d %d %d %d %d %d %d %d\", curtask->pid, curtask->real_parent->pid, \
                 curtask->real_parent->real_parent->pid, \
                 curtask->real_parent->real_parent->real_parent->pid, \
                 curtask->se.cfs_rq->nr_running, args->rqtp->tv_sec, \
                 curtask->real_parent->se.cfs_rq->nr_running, \
                 curtask->real_parent->real_parent->se.cfs_rq->nr_running); }}"
            )),
            "a probe can read at most 7 strings and struct regions"
        );
        for probe in ["BEGIN", "interval:s:1"] {
            assert_eq!(
                error(&format!("{probe} {{ @ = curtask->pid; }}")),
                format!(
                    "kernel struct members are read in the kernel at the event, and {probe} \
                     runs in weft: read them in a probe the kernel fires"
                )
            );
        }
    }

    #[test]
    fn cgroupid_is_the_cgroup_s_id_at_check_time() {
        let mut plan = checked(r#"BEGIN { @ = cgroupid("/sys/fs/cgroup/weft"); }"#);
        let mut ints = Vec::new();
        plan.program.rewrite(&mut |expr| {
            if let ExprKind::Int(n) = expr.kind {
                ints.push(n);
            }
        });
        assert_eq!(ints, [25]);
        let error = check(
            parse(r#"BEGIN { @ = cgroupid("/tmp"); }"#).unwrap(),
            &FakeKernel,
        )
        .unwrap_err();
        assert_eq!(
            error.message,
            "cgroupid(): /tmp is not a cgroup v2 directory"
        );
    }

    #[test]
    fn uprobe_arguments_by_name_from_dwarf() {
        let plan = checked(
            r#"uprobe:prog:add { printf("%d %s %d\n", args->a, str(args->name), args->p->next->x); }"#,
        );
        let fields = &plan.attaches[0].fields;
        let field = |name: &str| fields.iter().find(|f| f.name == name).unwrap();
        // Parameter N in argument register N (`di`, `si`, `dx`, ...).
        assert_eq!(
            (field("a").offset, field("a").size, field("a").signed),
            (112, 4, true)
        );
        assert_eq!(field("name").offset, 104);
        assert_eq!(field("name").element, Some((1, true)));
        assert_eq!(field("p").pointee.as_deref(), Some("struct point"));
        assert_eq!(field("d").offset, 64);
        assert_eq!(field("e").kind, FieldKind::Unread);
        assert_eq!(
            refused("uprobe:prog:add { @ = args->nope; }"),
            "uprobe:prog:add has no argument `nope`: it has a, name, p, q, c, d, e"
        );
        // The seventh is on the stack.
        assert!(
            refused("uprobe:prog:add { @ = args->d + args->e; }")
                .starts_with("`e` is not in one of the six integer argument registers")
        );
        // A struct holding one the file only declares cannot be laid out.
        assert_eq!(
            refused("uprobe:prog:add { @ = args->q->z; }"),
            "struct holder is declared but not defined (where a uprobe's file describes it, it holds a type weft does not read), and no `struct holder`"
        );
        // A file's DWARF is read only for an item that names an argument.
        checked("uprobe:prog:damaged { @ = count(); }");
        assert_eq!(
            refused("uprobe:prog:damaged { @ = args->a; }"),
            "prog: DWARF: a damaged unit"
        );
        // The program's own definition wins over the file's.
        checked("struct point { long z; }; uprobe:prog:add { @ = args->p->z; }");
        assert!(refused("uretprobe:prog:add { @ = args->a; }").starts_with("a uretprobe has no"));
        assert!(refused("uprobe:prog:main { @ = args->a; }").ends_with(
            "(build it with -g, or install its debug file); arg0, arg1, ... read the registers"
        ));
    }
}
