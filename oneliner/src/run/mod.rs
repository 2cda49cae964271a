//! Runs a checked program on events: predicates, actions, maps. Pure: the
//! agent decodes kernel records into [`Event`]s and supplies the output.

pub mod cgroups;
pub mod format;
pub mod helper_errors;
pub mod json;
pub mod output;
pub(crate) mod signal;
pub mod stack;

use std::{cell::RefCell, collections::HashMap, io::Write};

use weft_abi::oneliner::{
    AggKey, AggValue, JOIN_ARG_LEN, JOIN_ARGS, SUBJECT_COMM, SUBJECT_FUNC, SUBJECT_NONE,
    SUBJECT_PROBE, StartKey,
};

use crate::{
    ast::{BinOp, Builtin, Expr, ExprKind, MapRef, Stmt},
    check::{Attach, MapKind, Plan},
    error::Span,
    kernel::FieldKind,
    limits::Limits,
    output::{Agg, OutputFormat},
    plan::{MemberRead, ReadKind, Start},
    stack::{Stack, StackMode},
    value::{Type, Value, c_string},
};

/// One event as the kernel delivered it, or a user-space probe firing
/// (BEGIN, END, intervals).
#[derive(Debug, Clone, Copy, Default)]
pub struct Event<'a> {
    /// Index into [`Plan::attaches`].
    pub attach: usize,
    /// `CLOCK_MONOTONIC` ns (the kernel's `bpf_ktime_get_ns`).
    pub ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub uid: u32,
    pub gid: u32,
    pub cpu: u32,
    /// The task name, NUL-padded.
    pub comm: &'a [u8],
    /// The copied context: the tracepoint record, registers or arguments.
    pub raw: &'a [u8],
    /// Strings the kernel read, in [`Attach::strings`] order, NUL-padded.
    pub strings: &'a [&'a [u8]],
    /// What `join()` reads: [`JOIN_ARGS`] NUL-padded slots of
    /// [`JOIN_ARG_LEN`] bytes, an empty one ending them; empty when the
    /// probe joins nothing.
    pub join: &'a [u8],
    /// The kernel stack, when the probe records it.
    pub kstack: Option<&'a Stack>,
    /// The user stack, likewise.
    pub ustack: Option<&'a Stack>,
    /// The start time the kernel took for the probe
    /// ([`crate::plan::KeptStart::Take`]), else 0.
    pub start: u64,
    /// The packet the kernel copied for `skboutput()`
    /// ([`crate::plan::Attach::skb`]); empty where it copied none.
    pub packet: &'a [u8],
}

/// Reads what the kernel aggregated for probes whose aggregations run
/// there ([`Attach::agg`]), and the start times it keeps
/// ([`Attach::start`]).
pub trait KernelAggs {
    /// Every entry of the kernel's map so far, all CPUs told.
    fn entries(&mut self) -> Vec<(AggKey, AggValue)>;
    /// Every entry of the kernel's map of start times, 0 for a start taken
    /// where the map keeps them by thread.
    fn starts(&mut self) -> Vec<(StartKey, u64)>;
}

/// Names code addresses for `usym()` and `ksym()`: the caller knows the
/// processes' files and the kernel's symbols.
pub trait Names {
    /// The function holding `addr` in process `pid`.
    fn user(&mut self, pid: u32, addr: u64) -> Option<String>;
    /// The kernel function holding `addr`.
    fn kernel(&mut self, addr: u64) -> Option<String>;
}

/// Reads kernel memory for `*address` where weft runs the probe.
pub trait KernelMemory {
    /// The 64-bit word at kernel address `address`.
    fn word(&mut self, address: u64) -> Option<u64>;
}

/// Writes the packets `skboutput()` asks for: the caller opens the files.
pub trait Packets {
    /// Appends `packet`, taken at `wall_ns` (ns since the epoch), to pcap
    /// file `path`.
    fn write(&mut self, path: &str, wall_ns: i128, packet: &[u8]) -> std::io::Result<()>;
}

/// Whether to go on after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// `exit()` ran.
    Exit,
}

/// The state of a running program: its maps.
pub struct Runtime<'p> {
    plan: &'p Plan,
    /// What names code addresses for `usym()` and `ksym()`.
    names: Option<RefCell<Box<dyn Names>>>,
    /// What reads kernel memory for `*address`.
    memory: Option<RefCell<Box<dyn KernelMemory>>>,
    /// The maps' elements, by their keys. hashbrown's map hashes with
    /// foldhash: with std's `SipHash`, hashing keys took a sixth of the
    /// runtime's time per event.
    maps: Vec<hashbrown::HashMap<Vec<Value>, Agg>>,
    /// Per map, the new keys dropped because it held `map_keys_max`.
    dropped: Vec<u64>,
    limits: Limits,
    /// A key's values while it is looked up, reused from event to event.
    key: Vec<Value>,
    /// What reads the aggregations the kernel keeps (`Attach::agg`).
    kernel: Option<RefCell<Box<dyn KernelAggs>>>,
    format: OutputFormat,
    /// `nsecs` when the program started, for `elapsed`.
    start_ns: u64,
    /// The `-c` command's pid (`cpid`), 0 without one.
    cpid: u32,
    /// Addresses `unwatch()` asked to stop watching, until taken.
    unwatched: Vec<u64>,
    /// Watchpoints a function's call asked to set, until taken.
    watches: Vec<Watch>,
    /// `-k` (1) or `-kk` (2): which failures of bpftrace's map helpers to
    /// warn of (`helper_errors.rs`), and where the program's text is.
    helper_errors: (u8, helper_errors::Source),
    /// Warnings not yet written, in the order they came.
    warnings: String,
    /// What writes `skboutput()`'s packets.
    packets: Option<Box<dyn Packets>>,
    /// After `exit()` or Ctrl-C: events still to come run no command.
    exited: bool,
}

/// A watchpoint to set where a function's argument points
/// (`watchpoint:FUNCTION+argN`), asked by the function's call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watch {
    /// The watchpoint's attach point.
    pub attach: usize,
    pub address: u64,
    /// The process whose task the kernel stopped until the watchpoint is
    /// set, if it did (not for `asyncwatchpoint`).
    pub stopped: Option<u32>,
}

/// What actions of one event see.
struct Scope<'e, 'a> {
    event: &'e Event<'a>,
    attach: &'e Attach,
    vars: HashMap<String, Value>,
    flow: Flow,
    /// A `break` or `continue` on its way to its loop.
    jump: Option<Jump>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Jump {
    Break,
    Continue,
}

/// Rounds one run of a `while` may make. The kernel's verifier bounds
/// bpftrace's loops; weft runs them in user space, where a loop that never
/// ends would stop every probe, so it ends them here and says so.
const MAX_ROUNDS: u64 = 1 << 20;

impl<'p> Runtime<'p> {
    pub fn new(plan: &'p Plan, format: OutputFormat, start_ns: u64) -> Self {
        Self {
            plan,
            maps: vec![hashbrown::HashMap::new(); plan.maps.len()],
            dropped: vec![0; plan.maps.len()],
            limits: Limits::default(),
            key: Vec::new(),
            format,
            start_ns,
            cpid: 0,
            unwatched: Vec::new(),
            watches: Vec::new(),
            helper_errors: (0, helper_errors::Source::default()),
            warnings: String::new(),
            names: None,
            memory: None,
            kernel: None,
            packets: None,
            exited: false,
        }
    }

    /// Writes `skboutput()`'s packets with `packets` (without, they are
    /// dropped and it returns an error).
    pub fn set_packets(&mut self, packets: Box<dyn Packets>) {
        self.packets = Some(packets);
    }

    /// Holds the program to `limits` (bpftrace's defaults without).
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The maps that were full, and how many new keys each dropped.
    pub fn dropped_keys(&self) -> impl Iterator<Item = (&str, u64)> {
        (self.plan.maps.iter().zip(&self.dropped))
            .filter(|(_, n)| **n > 0)
            .map(|(map, n)| (map.name.as_str(), *n))
    }

    /// Names addresses for `usym()` and `ksym()` with `names` (without,
    /// they print as hex addresses).
    pub fn set_names(&mut self, names: Box<dyn Names>) {
        self.names = Some(RefCell::new(names));
    }

    /// Reads kernel memory for `*address` with `memory` (without, it
    /// reads 0).
    pub fn set_kernel_memory(&mut self, memory: Box<dyn KernelMemory>) {
        self.memory = Some(RefCell::new(memory));
    }

    /// Reads the aggregations the kernel keeps with `kernel` when
    /// printing the maps they belong to.
    pub fn set_kernel_aggs(&mut self, kernel: Box<dyn KernelAggs>) {
        self.kernel = Some(RefCell::new(kernel));
    }

    /// Sets `cpid`.
    /// Warns of failures of bpftrace's map helpers, as `-k` (`level` 1)
    /// or `-kk` (2) has bpftrace warn, pointing into `source`.
    pub fn set_helper_errors(&mut self, level: u8, source: helper_errors::Source) {
        self.helper_errors = (level, source);
    }

    /// Notes a warning that `helper` failed with `retcode` at `span`, if
    /// `-k` given `level` times or more asks for it.
    fn helper_error(&mut self, level: u8, helper: &str, retcode: i32, span: Span) {
        if self.helper_errors.0 >= level {
            let (_, source) = &self.helper_errors;
            let warning = helper_errors::render(self.format, source, helper, retcode, span);
            self.warnings.push_str(&warning);
        }
    }

    /// Writes the warnings noted so far.
    fn write_warnings(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        if !self.warnings.is_empty() {
            out.write_all(self.warnings.as_bytes())?;
            self.warnings.clear();
        }
        Ok(())
    }

    pub fn set_cpid(&mut self, pid: u32) {
        self.cpid = pid;
    }

    /// While `exited` (after `exit()` or Ctrl-C), events run no command and
    /// write no packet; what they print is the caller's to keep or drop
    /// (END, after, runs in full).
    pub fn set_exited(&mut self, exited: bool) {
        self.exited = exited;
    }

    /// The addresses `unwatch()` asked since the last call, whose
    /// watchpoints the caller removes.
    pub fn take_unwatched(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.unwatched)
    }

    /// The watchpoints functions' calls asked to set since the last call
    /// (`watchpoint:FUNCTION+argN`): the caller sets each, then lets its
    /// stopped task go on.
    pub fn take_watches(&mut self) -> Vec<Watch> {
        std::mem::take(&mut self.watches)
    }

    /// Runs the actions of `event`'s probe when its predicate holds.
    pub fn event(&mut self, event: &Event<'_>, out: &mut dyn Write) -> std::io::Result<Flow> {
        self.fire(event, out).map(|(flow, _)| flow)
    }

    /// [`Runtime::event`], saying too whether the predicate held (true
    /// without one). Evaluated once: a predicate may change a map
    /// (`/@n++ < 10/`).
    pub fn fire(
        &mut self,
        event: &Event<'_>,
        out: &mut dyn Write,
    ) -> std::io::Result<(Flow, bool)> {
        let plan = self.plan;
        let attach = &plan.attaches[event.attach];
        let item = &plan.program.items[attach.item];
        let mut scope = Scope {
            event,
            attach,
            vars: HashMap::new(),
            flow: Flow::Continue,
            jump: None,
        };
        // A function's call that sets a watchpoint runs no actions.
        if let Some(watch) = attach.watch
            && let crate::Target::WatchArg { arg, sync, .. } = &plan.attaches[watch].target
        {
            self.watches.push(Watch {
                attach: watch,
                address: field(&scope, &format!("arg{arg}")).int().cast_unsigned(),
                stopped: sync.then_some(event.pid),
            });
            return Ok((Flow::Continue, false));
        }
        if let Some(predicate) = &item.predicate {
            let holds = self.eval(predicate, &mut scope).truthy();
            self.write_warnings(out)?;
            if !holds {
                return Ok((Flow::Continue, false));
            }
        }
        self.stmts(&item.body, &mut scope, out)?;
        Ok((scope.flow, true))
    }

    /// Takes the start times the kernel still keeps into their maps, for
    /// END and the printing at exit to see (as bpftrace prints a start no
    /// probe took); call once the probes are detached.
    pub fn take_kernel_starts(&mut self) {
        let kept = self.plan.attaches.iter().any(|a| a.start.is_some());
        let Some(kernel) = self.kernel.as_ref().filter(|_| kept) else {
            return;
        };
        for (key, ns) in kernel.borrow_mut().starts() {
            // A start taken is left as 0 where starts are kept by thread
            // (`weft_abi::oneliner::Starts::tombstone`): none is kept.
            if ns == 0 {
                continue;
            }
            if let Some(map) = self.maps.get_mut(usize::from(key.map).wrapping_sub(1)) {
                map.insert(vec![Value::Int(key.key)], Agg::Value(Value::Int(ns as i64)));
            }
        }
    }

    /// Prints every map, as bpftrace does on exit: after two empty lines,
    /// in JSON too (not in folded stacks, which flame graph tools read).
    pub fn print_all(&self, out: &mut dyn Write) -> std::io::Result<()> {
        if self.format != OutputFormat::Folded {
            out.write_all(b"\n\n")?;
        }
        self.print_maps(out)
    }

    /// Prints every map, sorted by name, as bpftrace does on exit and on
    /// SIGUSR1.
    pub fn print_maps(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let mut order: Vec<usize> = (0..self.maps.len()).collect();
        order.sort_by(|a, b| self.plan.maps[*a].name.cmp(&self.plan.maps[*b].name));
        // One read of the kernel's map serves every map printed.
        let kernel = self.kernel_entries(&order);
        for index in order {
            self.print_map(index, 0, 1, &kernel, out)?;
        }
        Ok(())
    }

    /// The kernel's aggregation entries, read when one of `maps` is
    /// aggregated there (empty otherwise).
    fn kernel_entries(&self, maps: &[usize]) -> Vec<(AggKey, AggValue)> {
        let aggregated = self
            .plan
            .attaches
            .iter()
            .filter_map(|a| a.agg.as_ref())
            .any(|agg| maps.contains(&agg.map));
        match &self.kernel {
            Some(kernel) if aggregated => kernel.borrow_mut().entries(),
            _ => Vec::new(),
        }
    }

    /// Prints map `index` with what the kernel aggregated for it among
    /// `kernel`'s entries.
    fn print_map(
        &self,
        index: usize,
        top: usize,
        div: i64,
        kernel: &[(AggKey, AggValue)],
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let info = &self.plan.maps[index];
        let mut mine = kernel
            .iter()
            .filter(|(key, value)| usize::from(key.map) == index + 1 && value.count > 0)
            .peekable();
        if mine.peek().is_none() {
            return output::print_map(self.format, info, &self.maps[index], top, div, out);
        }
        let mut map = self.maps[index].clone();
        for (key, value) in mine {
            map.entry(self.key_values(key))
                .or_insert_with(|| Agg::new(info.kind))
                .merge(key.slot as usize, value);
        }
        output::print_map(self.format, info, &map, top, div, out)
    }

    /// The map key a key of the kernel's map stands for, as the runtime
    /// keys its maps.
    fn key_values(&self, key: &AggKey) -> Vec<Value> {
        let attach_name = |bytes: &[u8], func: bool| {
            let index = integer(bytes, 0, 8, true) as usize;
            let target = self.plan.attaches.get(index).map(|a| &a.target);
            Value::Str(match target {
                Some(t) if func => t.function().to_string(),
                Some(t) => t.name(),
                None => String::new(),
            })
        };
        key.parts
            .iter()
            .zip(&key.key)
            .take_while(|(part, _)| **part != SUBJECT_NONE)
            .map(|(part, bytes)| match *part {
                SUBJECT_COMM => Value::Str(c_string(bytes)),
                SUBJECT_PROBE => attach_name(bytes, false),
                SUBJECT_FUNC => attach_name(bytes, true),
                _ => Value::Int(integer(bytes, 0, 8, true)),
            })
            .collect()
    }

    fn stmts(
        &mut self,
        stmts: &[Stmt],
        scope: &mut Scope<'_, '_>,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        for stmt in stmts {
            if scope.flow == Flow::Exit || scope.jump.is_some() {
                break;
            }
            self.stmt(stmt, scope, out)?;
            self.write_warnings(out)?;
        }
        Ok(())
    }

    fn stmt(
        &mut self,
        stmt: &Stmt,
        scope: &mut Scope<'_, '_>,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        match stmt {
            Stmt::MapAssign { map, value } => {
                let index = self.plan.map(&map.name).expect("checked");
                let key = self.keys(map, scope);
                let kind = self.plan.maps[index].kind;
                if let MapKind::Value(_) = kind {
                    let value = self.eval(value, scope);
                    if let Some(slot) = self.element(index, &key, || Agg::Value(Value::Int(0))) {
                        *slot = Agg::Value(value);
                    }
                } else {
                    let ExprKind::Call(_, args) = &value.kind else {
                        unreachable!("checked: aggregations are calls")
                    };
                    let sample = args.first().map_or(0, |a| self.eval(a, scope).int());
                    if let Some(agg) = self.element(index, &key, || Agg::new(kind)) {
                        agg.add(kind, sample);
                    }
                }
                self.key = key;
            }
            Stmt::MapUpdate { map, op, value } => {
                let index = self.plan.map(&map.name).expect("checked");
                let key = self.keys(map, scope);
                let by = self.eval(value, scope).int();
                if let Some(Agg::Value(Value::Int(n))) =
                    self.element(index, &key, || Agg::Value(Value::Int(0)))
                {
                    *n = op.apply(*n, by);
                }
                self.key = key;
            }
            Stmt::VarAssign { name, value, .. } => {
                let value = self.eval(value, scope);
                scope.vars.insert(name.clone(), value);
            }
            Stmt::VarUpdate {
                name, op, value, ..
            } => {
                let by = self.eval(value, scope).int();
                let old = scope.vars.get(name).map_or(0, Value::int);
                scope
                    .vars
                    .insert(name.clone(), Value::Int(op.apply(old, by)));
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                let branch = if self.eval(cond, scope).truthy() {
                    then
                } else {
                    otherwise
                };
                self.stmts(branch, scope, out)?;
            }
            Stmt::While { cond, body } => self.loop_stmt(cond, body, scope, out)?,
            Stmt::Break => scope.jump = Some(Jump::Break),
            Stmt::Continue => scope.jump = Some(Jump::Continue),
            Stmt::Expr(expr) => self.call_stmt(expr, scope, out)?,
        }
        Ok(())
    }

    fn loop_stmt(
        &mut self,
        cond: &Expr,
        body: &[Stmt],
        scope: &mut Scope<'_, '_>,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        for _ in 0..MAX_ROUNDS {
            if scope.flow == Flow::Exit || !self.eval(cond, scope).truthy() {
                return Ok(());
            }
            self.stmts(body, scope, out)?;
            if scope.jump.take() == Some(Jump::Break) {
                return Ok(());
            }
        }
        log::warn!("weft: a while loop ran {MAX_ROUNDS} rounds and was ended there");
        Ok(())
    }

    fn call_stmt(
        &mut self,
        expr: &Expr,
        scope: &mut Scope<'_, '_>,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let ExprKind::Call(name, args) = &expr.kind else {
            return Ok(());
        };
        match name.as_str() {
            "printf" => {
                let ExprKind::Str(text) = &args[0].kind else {
                    unreachable!("checked")
                };
                let values: Vec<Value> = args[1..].iter().map(|a| self.eval(a, scope)).collect();
                // A read's warning comes before the line, as bpftrace's.
                self.write_warnings(out)?;
                let text = format::render(text, &values);
                output::text(self.format, "printf", &text, out)?;
            }
            "cat" | "system" => self.outside(name, args, scope, out)?,
            "time" => {
                let pattern = match args.first().map(|a| &a.kind) {
                    Some(ExprKind::Str(s)) => s.as_str(),
                    _ => "%H:%M:%S\n",
                };
                // SAFETY: time(NULL) only returns the time.
                let now = unsafe { libc::time(std::ptr::null_mut()) };
                output::text(self.format, "time", &local_time(pattern, now), out)?;
            }
            "join" => {
                let separator = match args.get(1).map(|a| &a.kind) {
                    Some(ExprKind::Str(s)) => s.as_str(),
                    _ => " ",
                };
                let mut line = joined(scope.event.join, separator);
                // bpftrace ends the line in text; JSON's data has no newline.
                if !matches!(self.format, OutputFormat::Json) {
                    line.push('\n');
                }
                output::text(self.format, "join", &line, out)?;
            }
            "exit" => scope.flow = Flow::Exit,
            "unwatch" => {
                let address = self.eval(&args[0], scope).int().cast_unsigned();
                self.unwatched.push(address);
            }
            // The kernel sent it at the event.
            "signal" => {}
            "print" => match args.as_slice() {
                [
                    Expr {
                        kind: ExprKind::Map(map),
                        ..
                    },
                    rest @ ..,
                ] if map.keys.is_empty() => {
                    let index = self.plan.map(&map.name).expect("checked");
                    let top = rest
                        .first()
                        .map_or(0, |e| self.eval(e, scope).int().max(0) as usize);
                    let div = rest.get(1).map_or(1, |e| self.eval(e, scope).int().max(1));
                    let kernel = self.kernel_entries(&[index]);
                    self.print_map(index, top, div, &kernel, out)?;
                }
                [printed] => {
                    let value = self.eval(printed, scope);
                    match value {
                        // An unsigned value prints as bpftrace prints it.
                        Value::Int(n) if self.plan.unsigned_prints.contains(&printed.span) => {
                            output::unsigned(self.format, n.cast_unsigned(), out)?;
                        }
                        value => output::value(self.format, &value, out)?,
                    }
                }
                _ => {}
            },
            "clear" | "zero" | "delete" => self.empty(name, args, expr.span, scope),
            _ => {
                self.eval(expr, scope);
            }
        }
        Ok(())
    }

    /// `clear(@m)`, `zero(@m)`, `delete(@m[key])` (at `span`).
    fn empty(&mut self, name: &str, args: &[Expr], span: Span, scope: &mut Scope<'_, '_>) {
        let Some(Expr {
            kind: ExprKind::Map(map),
            ..
        }) = args.first()
        else {
            return;
        };
        let index = self.plan.map(&map.name).expect("checked");
        match name {
            "clear" => self.maps[index].clear(),
            "zero" => {
                let kind = self.plan.maps[index].kind;
                for agg in self.maps[index].values_mut() {
                    *agg = match agg {
                        Agg::Value(Value::Str(_)) => Agg::Value(Value::Str(String::new())),
                        Agg::Value(Value::Int(_)) => Agg::Value(Value::Int(0)),
                        _ => Agg::new(kind),
                    };
                }
            }
            _ => {
                let key = self.keys(map, scope);
                if self.maps[index].remove(key.as_slice()).is_none() {
                    self.helper_error(1, "map_delete_elem", helper_errors::NO_ENTRY, span);
                }
                self.key = key;
            }
        }
    }

    /// The values of `map`'s keys at this event, in the runtime's reused
    /// buffer: hand it back (`self.key = key`) when done, so that looking
    /// up an element allocates nothing.
    fn keys(&mut self, map: &MapRef, scope: &mut Scope<'_, '_>) -> Vec<Value> {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        for k in &map.keys {
            let value = self.eval(k, scope);
            key.push(value);
        }
        key
    }

    /// Map `index`'s element under `key`, made by `new` when it has none:
    /// only a new element copies the key. None where the map holds
    /// `map_keys_max` keys already, as bpftrace's map refuses the update
    /// (counted here).
    fn element(
        &mut self,
        index: usize,
        key: &[Value],
        new: impl FnOnce() -> Agg,
    ) -> Option<&mut Agg> {
        let map = &mut self.maps[index];
        if map.len() >= self.limits.map_keys_max && !map.contains_key(key) {
            self.dropped[index] += 1;
            return None;
        }
        Some(map.entry_ref(key).or_insert_with(new))
    }

    fn eval(&mut self, expr: &Expr, scope: &mut Scope<'_, '_>) -> Value {
        match &expr.kind {
            ExprKind::Int(n) => Value::Int(*n),
            ExprKind::Str(s) => Value::Str(s.clone()),
            ExprKind::Builtin(b) if *b != Builtin::Curtask => self.builtin(*b, scope),
            ExprKind::Field(name) => field(scope, name),
            // A USDT argument in memory, `*address` or a variable holding
            // curtask's address, which the kernel read.
            ExprKind::Arg(_) | ExprKind::Deref(_) | ExprKind::Var(_)
                if scope.attach.member(expr.span).is_some() =>
            {
                member(scope, expr)
            }
            ExprKind::Arg(n) => field(scope, &format!("arg{n}")),
            // curtask as a value: its address, read as a member's bytes.
            // `$s.name` of a struct read whole.
            ExprKind::Member {
                base,
                name,
                arrow: false,
            } if base.may_be_bytes() && scope.attach.member(expr.span).is_none() => {
                member_of(self.eval(base, scope), name)
            }
            ExprKind::Member { .. } => self.member(expr, scope),
            ExprKind::Builtin(_) => member(scope, expr),
            ExprKind::StructCast(_, inner) => self.eval(inner, scope),
            ExprKind::Var(name) => scope.vars.get(name).cloned().unwrap_or(Value::Int(0)),
            ExprKind::Map(map) => self.map_value(map, expr.span, scope),
            ExprKind::Unary(op, operand) => Value::Int(op.apply(self.eval(operand, scope).int())),
            ExprKind::Deref(address) => self.deref(address, scope),
            ExprKind::Binary(op, left, right) => self.binary(*op, left, right, scope),
            ExprKind::Ternary(cond, then, otherwise) => {
                if self.eval(cond, scope).truthy() {
                    self.eval(then, scope)
                } else {
                    self.eval(otherwise, scope)
                }
            }
            ExprKind::Call(name, args) if name == "str" => {
                let value = match &args[0].kind {
                    // A string saved where its pointer was (`saved.rs`).
                    ExprKind::Map(_) => self.eval(&args[0], scope),
                    ExprKind::Member { .. }
                    | ExprKind::Deref(_)
                    | ExprKind::Binary(..)
                    | ExprKind::Unary(..) => self.member(&args[0], scope),
                    ExprKind::Field(n) => string_of(scope, n),
                    ExprKind::Arg(_) if scope.attach.member(args[0].span).is_some() => {
                        member(scope, &args[0])
                    }
                    ExprKind::Arg(n) => string_of(scope, &format!("arg{n}")),
                    _ => string_of(scope, "retval"),
                };
                let Value::Str(text) = value else {
                    unreachable!("str() reads strings")
                };
                let len = args.get(1).map(|len| self.eval(len, scope).int());
                Value::Str(bounded(text, len, self.limits.strlen))
            }
            ExprKind::Call(name, args) if name == "usym" || name == "ksym" => {
                // As bpftrace's: the function's name without offset, or the
                // address in hex where none holds it (C++'s `showbase`,
                // which writes zero as `0`).
                let addr = self.eval(&args[0], scope).int().cast_unsigned();
                let named = self.names.as_ref().and_then(|names| {
                    let mut names = names.borrow_mut();
                    if name == "usym" {
                        names.user(scope.event.pid, addr)
                    } else {
                        names.kernel(addr)
                    }
                });
                Value::Str(named.unwrap_or_else(|| match addr {
                    0 => "0".into(),
                    _ => format!("0x{addr:x}"),
                }))
            }
            ExprKind::Call(name, args) if name == "kstack" || name == "ustack" => {
                let stack = if name == "kstack" {
                    scope.event.kstack
                } else {
                    scope.event.ustack
                };
                let (mode, count) = match args.first().map(|a| &a.kind) {
                    Some(ExprKind::Str(word)) => (StackMode::named(word), &args[1..]),
                    _ => (Some(StackMode::Bpftrace), &args[..]),
                };
                let mode = mode.expect("checked");
                let frames = crate::check::stack_frames(count).expect("checked");
                Value::Str(stack_text(stack, mode, frames))
            }
            ExprKind::Step { target, op, post } => self.step(target, *op, *post, scope),
            ExprKind::Tuple(elements) => {
                Value::Tuple(elements.iter().map(|e| self.eval(e, scope)).collect())
            }
            ExprKind::Element { tuple, index } => match self.eval(tuple, scope) {
                Value::Tuple(mut elements) if *index < elements.len() => {
                    elements.swap_remove(*index)
                }
                _ => unreachable!("checked: an element of a tuple"),
            },
            ExprKind::Call(name, args) => self.function(name, args, scope),
            // Constants are values by now (`constants.rs`).
            // The checker puts their values in their place.
            ExprKind::Constant(_) | ExprKind::SizeOf(_) => Value::Int(0),
        }
    }

    /// `cat(fmt, ...)` and `system(fmt, ...)`: the file the format names,
    /// or the output of the command it writes, printed.
    /// `skboutput(file, skb, length, offset)`: the packet's bytes from
    /// `offset` to `length` (those the kernel copied) into the pcap file;
    /// 0, or `-ENOSPC` where the kernel had no room for the packet, as
    /// `bpf_skb_output` returns, or `-EIO` where the file cannot be written.
    fn skb_output(&mut self, args: &[Expr], scope: &mut Scope<'_, '_>) -> i64 {
        let (ExprKind::Str(file), ExprKind::Int(offset)) = (&args[0].kind, &args[3].kind) else {
            unreachable!("checked: literals")
        };
        let length = self.eval(&args[2], scope).int();
        let packet = if self.exited {
            &[][..]
        } else {
            scope.event.packet
        };
        if packet.is_empty() {
            return -i64::from(libc::ENOSPC);
        }
        let end = usize::try_from(length).unwrap_or(0).min(packet.len());
        let start = usize::try_from(*offset).unwrap_or(0).min(end);
        let wall = wall_ns(i64::try_from(scope.event.ns).unwrap_or(i64::MAX));
        let Some(packets) = self.packets.as_mut() else {
            return -i64::from(libc::EIO);
        };
        match packets.write(file, wall, &packet[start..end]) {
            Ok(()) => 0,
            Err(error) => {
                log::warn!("weft: skboutput(): {file}: {error}");
                -i64::from(libc::EIO)
            }
        }
    }

    fn outside(
        &mut self,
        name: &str,
        args: &[Expr],
        scope: &mut Scope<'_, '_>,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        let ExprKind::Str(text) = &args[0].kind else {
            unreachable!("checked")
        };
        if self.exited {
            return Ok(());
        }
        let values: Vec<Value> = args[1..].iter().map(|a| self.eval(a, scope)).collect();
        let what = format::render(text, &values);
        let read = if name == "cat" {
            cat(&what, self.limits.cat_bytes_max)
        } else {
            // As bpftrace: through the shell, waited for, its output in
            // line with the program's.
            std::process::Command::new("sh")
                .args(["-c", &what])
                .stdin(std::process::Stdio::null())
                .output()
                .map(|done| done.stdout)
        };
        match read {
            Ok(bytes) => {
                // bpftrace's JSON names system()'s output "syscall".
                let kind = if name == "system" { "syscall" } else { name };
                output::text(self.format, kind, &String::from_utf8_lossy(&bytes), out)
            }
            Err(error) => {
                log::warn!("weft: {name}(): {what}: {error}");
                Ok(())
            }
        }
    }

    /// `$x++`, `--@m[k]`, ...: the variable or map element `op` 1, and its
    /// value before (`post`) or after.
    /// A map element's keys are evaluated once (`@m[$i++]++`).
    fn step(&mut self, target: &Expr, op: BinOp, post: bool, scope: &mut Scope<'_, '_>) -> Value {
        let (old, new) = match &target.kind {
            ExprKind::Var(name) => {
                let old = scope.vars.get(name).map_or(0, Value::int);
                let new = op.apply(old, 1);
                scope.vars.insert(name.clone(), Value::Int(new));
                (old, new)
            }
            ExprKind::Map(map) => {
                let index = self.plan.map(&map.name).expect("checked");
                let key = self.keys(map, scope);
                let slot = self.element(index, &key, || Agg::Value(Value::Int(0)));
                let old = slot.as_ref().map_or(0, |slot| slot.read().int());
                let new = op.apply(old, 1);
                if let Some(slot) = slot {
                    *slot = Agg::Value(Value::Int(new));
                }
                self.key = key;
                (old, new)
            }
            _ => unreachable!("parsed: variables and maps only"),
        };
        Value::Int(if post { old } else { new })
    }

    /// The value of a call of `ntop`, `buf`, `reg`, `bswap` and the like (statements and
    /// the functions `eval` reads above have none).
    fn function(&mut self, name: &str, args: &[Expr], scope: &mut Scope<'_, '_>) -> Value {
        match name {
            "ntop" => {
                let addr = args.last().expect("checked: ntop() has an address");
                let bytes = array_bytes(scope, addr).unwrap_or_else(|| {
                    match self.eval(addr, scope) {
                        Value::Bytes(bytes) => bytes,
                        // An IPv4 address as an integer read from memory.
                        value => (value.int() as u32).to_le_bytes().to_vec(),
                    }
                });
                Value::Str(crate::format::inet(&bytes))
            }
            "pton" => {
                let ExprKind::Str(text) = &args[0].kind else {
                    unreachable!("checked: a literal")
                };
                Value::Bytes(crate::format::address_bytes(text).unwrap_or_default())
            }
            "strcontains" => {
                let haystack = self.eval(&args[0], scope).to_string();
                let needle = self.eval(&args[1], scope).to_string();
                Value::Int(i64::from(haystack.contains(&needle)))
            }
            "macaddr" => {
                let bytes = array_bytes(scope, &args[0]).unwrap_or_default();
                Value::Str(crate::format::mac(&bytes))
            }
            "path" => {
                let (bytes, _) = member_bytes(scope, &args[0]).unwrap_or_default();
                Value::Str(bounded(c_string(bytes), None, self.limits.strlen))
            }
            "buf" => {
                // A literal's bytes are its text and a NUL, then zeros.
                if let ExprKind::Str(text) = &args[0].kind {
                    let len = args.get(1).map_or(text.len() + 1, |len| {
                        usize::try_from(self.eval(len, scope).int()).unwrap_or(0)
                    });
                    let mut bytes = text.as_bytes().to_vec();
                    bytes.resize(len.min(self.limits.strlen), 0);
                    return Value::Buf(bytes);
                }
                let (bytes, _) = member_bytes(scope, &args[0]).unwrap_or_default();
                let len = args.get(1).map_or(bytes.len(), |len| {
                    usize::try_from(self.eval(len, scope).int()).unwrap_or(0)
                });
                // At most BPFTRACE_STRLEN bytes, as bpftrace reads.
                let len = len.min(bytes.len()).min(self.limits.strlen);
                Value::Buf(bytes[..len].to_vec())
            }
            "strftime" => {
                let ExprKind::Str(pattern) = &args[0].kind else {
                    unreachable!("checked: a literal")
                };
                let ns = self.eval(&args[1], scope).int();
                Value::Str(local_time(pattern, wall_second(ns)))
            }
            "strncmp" => {
                let left = self.eval(&args[0], scope).to_string();
                let right = self.eval(&args[1], scope).to_string();
                let ExprKind::Int(len) = args[2].kind else {
                    unreachable!("checked: a literal")
                };
                Value::Int(i64::from(!same_prefix(&left, &right, len)))
            }
            "reg" => {
                let ExprKind::Str(register) = &args[0].kind else {
                    unreachable!("checked: a literal")
                };
                field(scope, &format!("reg_{register}"))
            }
            "strerror" => Value::Str(strerror(self.eval(&args[0], scope).int())),
            "skboutput" => Value::Int(self.skb_output(args, scope)),
            "cgroup_path" => {
                let id = self.eval(&args[0], scope).int().cast_unsigned();
                let filter = match args.get(1).map(|a| &a.kind) {
                    Some(ExprKind::Str(filter)) => filter.as_str(),
                    _ => "*",
                };
                Value::Str(crate::cgroups::cgroup_path(id, filter))
            }
            "bswap" => {
                let value = self.eval(&args[0], scope).int();
                // The width the checker added (`widen_swaps`).
                Value::Int(match args.get(1).map(|a| &a.kind) {
                    Some(ExprKind::Int(2)) => i64::from((value as u16).swap_bytes()),
                    Some(ExprKind::Int(4)) => i64::from((value as u32).swap_bytes()),
                    Some(ExprKind::Int(1)) => value & 0xff,
                    _ => value.swap_bytes(),
                })
            }
            _ => Value::Int(0),
        }
    }

    /// `*address` in a probe weft runs: read from /proc/kcore.
    /// `@map[keys]` read: its value, or 0 ("" for strings) where unset.
    /// Member `expr`, as the kernel read it; nothing where it read through
    /// a pointer kept for the thread (`Start::Saved`) that the map no
    /// longer holds (deleted or zeroed since): bpftrace then reads through
    /// 0 and finds nothing.
    fn member(&mut self, expr: &Expr, scope: &mut Scope<'_, '_>) -> Value {
        let attach = scope.attach;
        let Some(m) = attach.member(expr.span) else {
            return Value::Int(0);
        };
        if matches!(attach.reads[m.read].start, Start::Saved(_)) {
            let mut base = expr;
            while let ExprKind::Member { base: inner, .. } | ExprKind::StructCast(_, inner) =
                &base.kind
            {
                base = inner;
            }
            if matches!(base.kind, ExprKind::Map(_) | ExprKind::Var(_))
                && self.eval(base, scope).int() == 0
            {
                return member_value(attach, m, &[]);
            }
        }
        member_value(attach, m, read_bytes(scope, m))
    }

    fn map_value(&mut self, map: &MapRef, span: Span, scope: &mut Scope<'_, '_>) -> Value {
        let index = self.plan.map(&map.name).expect("checked");
        let key = self.keys(map, scope);
        let value = if let Some(agg) = self.maps[index].get(key.as_slice()) {
            kept_string(scope, index).unwrap_or_else(|| agg.read())
        } else {
            self.helper_error(2, "map_lookup_elem", 0, span);
            match self.plan.maps[index].kind {
                MapKind::Value(Type::Str) => Value::Str(String::new()),
                _ => Value::Int(0),
            }
        };
        self.key = key;
        value
    }

    fn deref(&mut self, address: &Expr, scope: &mut Scope<'_, '_>) -> Value {
        // `$a[i]` of an array of bytes, or of an array read whole (checked).
        if let ExprKind::Binary(BinOp::Add, base, index) = &address.kind
            && base.may_be_bytes()
        {
            let at = |runtime: &mut Self, scope: &mut Scope<'_, '_>| {
                usize::try_from(runtime.eval(index, scope).int()).ok()
            };
            match self.eval(base, scope) {
                Value::Bytes(bytes) => {
                    let at = at(self, scope);
                    return Value::Int(
                        at.and_then(|at| bytes.get(at)).map_or(0, |b| i64::from(*b)),
                    );
                }
                Value::Array(elements) => {
                    let at = at(self, scope);
                    return at
                        .and_then(|at| elements.get(at).cloned())
                        .unwrap_or(Value::Int(0));
                }
                _ => {}
            }
        }
        let pointee = address.pointee();
        let address = self.eval(address, scope).int() as u64;
        let word = self
            .memory
            .as_ref()
            .and_then(|memory| memory.borrow_mut().word(address));
        Value::Int(pointee.apply(word.unwrap_or(0) as i64))
    }

    fn binary(&mut self, op: BinOp, left: &Expr, right: &Expr, scope: &mut Scope<'_, '_>) -> Value {
        match op {
            BinOp::LogicalAnd => {
                return Value::Int(i64::from(
                    self.eval(left, scope).truthy() && self.eval(right, scope).truthy(),
                ));
            }
            BinOp::LogicalOr => {
                return Value::Int(i64::from(
                    self.eval(left, scope).truthy() || self.eval(right, scope).truthy(),
                ));
            }
            _ => {}
        }
        let l = self.eval(left, scope);
        let r = self.eval(right, scope);
        match (op, &l, &r) {
            (BinOp::Eq, _, _) => Value::Int(i64::from(l == r)),
            (BinOp::Ne, _, _) => Value::Int(i64::from(l != r)),
            _ => Value::Int(op.apply(l.int(), r.int())),
        }
    }

    fn builtin(&mut self, builtin: Builtin, scope: &mut Scope<'_, '_>) -> Value {
        let event = scope.event;
        match builtin {
            Builtin::Pid => Value::Int(event.pid.into()),
            Builtin::Tid => Value::Int(event.tid.into()),
            Builtin::Uid => Value::Int(event.uid.into()),
            Builtin::Gid => Value::Int(event.gid.into()),
            Builtin::Cpu => Value::Int(event.cpu.into()),
            Builtin::Numaid => Value::Int(numa_node(event.cpu)),
            Builtin::Nsecs => Value::Int(event.ns as i64),
            // Each `RandomState` has new keys, so hashing one value with
            // it gives a new pseudo-random number (bpftrace's is the
            // kernel's `bpf_get_prandom_u32`).
            Builtin::Rand => Value::Int(i64::from(std::hash::BuildHasher::hash_one(
                &std::collections::hash_map::RandomState::new(),
                0,
            ) as u32)),
            Builtin::Elapsed => Value::Int(event.ns.saturating_sub(self.start_ns) as i64),
            Builtin::Comm => Value::Str(c_string(event.comm)),
            Builtin::Username => Value::Str(user_name(event.uid)),
            Builtin::Probe => Value::Str(scope.attach.target.name()),
            Builtin::Func => Value::Str(scope.attach.target.function().to_string()),
            Builtin::Retval => field(scope, "retval"),
            Builtin::Cpid => Value::Int(self.cpid.into()),
            Builtin::Kstack => {
                Value::Str(stack_text(event.kstack, StackMode::Bpftrace, usize::MAX))
            }
            Builtin::Ustack => {
                Value::Str(stack_text(event.ustack, StackMode::Bpftrace, usize::MAX))
            }
            // Read as a member's bytes (`eval`), never here.
            Builtin::Curtask => Value::Int(0),
            // 0 where there was none, as a map reads a missing key.
            Builtin::KernelStart => Value::Int(event.start as i64),
        }
    }
}

/// The name of user `uid` in `/etc/passwd`, read once, as bpftrace names
/// it (not through NSS, whose lookups may block on the network); empty for
/// a uid it does not list, as in bpftrace.
fn user_name(uid: u32) -> String {
    static USERS: std::sync::OnceLock<HashMap<u32, String>> = std::sync::OnceLock::new();
    let users = USERS.get_or_init(|| {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let mut users = HashMap::new();
        for line in passwd.lines() {
            let mut fields = line.split(':');
            if let (Some(name), Some(Ok(uid))) = (fields.next(), fields.nth(1).map(str::parse)) {
                // The first line of a uid names it, as getpwuid() finds it.
                users.entry(uid).or_insert_with(|| name.to_string());
            }
        }
        users
    });
    users.get(&uid).cloned().unwrap_or_default()
}

/// An error number's text, as `strerror(3)` gives it (bpftrace's
/// `strerror()`): "No such file or directory" for 2.
pub(crate) fn strerror(errno: i64) -> String {
    let errno = i32::try_from(errno).unwrap_or(i32::MAX);
    // SAFETY: strerror returns a NUL-terminated string that stays valid
    // until the next call on this thread, which the copy precedes.
    unsafe { std::ffi::CStr::from_ptr(libc::strerror(errno)) }
        .to_string_lossy()
        .into_owned()
}

/// What `str(x, len)` keeps of `text`, as bpftrace 0.17: `len`
/// characters (it reads `len + 1` bytes, the last for the NUL), and
/// `BPFTRACE_STRLEN` (`strlen`), which counts the NUL, bounds every string.
fn bounded(mut text: String, len: Option<i64>, strlen: usize) -> String {
    let bytes = len.map_or(usize::MAX, |n| {
        usize::try_from(n).map_or(0, |n| n.saturating_add(1))
    });
    // Cut in place: most strings are shorter, and this runs per event.
    if let Some((cut, _)) = text.char_indices().nth(bytes.min(strlen).max(1) - 1) {
        text.truncate(cut);
    }
    text
}

/// The first `limit` bytes of the file at `path`, as bpftrace's `cat()`
/// prints them: opened without blocking (a FIFO with no writer, a
/// device), read once, so that no file a program names can hold weft or
/// fill its memory.
fn cat(path: &str, limit: usize) -> std::io::Result<Vec<u8>> {
    use std::{io::Read as _, os::unix::fs::OpenOptionsExt as _};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let mut bytes = Vec::new();
    file.take(limit as u64).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The NUMA node holding `cpu`, as the kernel's `bpf_get_numa_node_id`
/// gives it where the event fires: a CPU's node does not change, so it is
/// read once from sysfs (`/sys/devices/system/node/nodeN/cpuM`); 0 on a
/// kernel without NUMA.
fn numa_node(cpu: u32) -> i64 {
    static NODES: std::sync::OnceLock<HashMap<u32, i64>> = std::sync::OnceLock::new();
    let nodes = NODES.get_or_init(|| {
        let number = |name: &str, prefix: &str| name.strip_prefix(prefix)?.parse().ok();
        let mut nodes = HashMap::new();
        let Ok(dirs) = std::fs::read_dir("/sys/devices/system/node") else {
            return nodes;
        };
        for dir in dirs.flatten() {
            let Some(node) = number(&dir.file_name().to_string_lossy(), "node") else {
                continue;
            };
            for entry in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                if let Some(cpu) = number(&entry.file_name().to_string_lossy(), "cpu") {
                    nodes.insert(u32::try_from(cpu).unwrap_or(u32::MAX), node);
                }
            }
        }
        nodes
    });
    nodes.get(&cpu).copied().unwrap_or(0)
}

/// The wall-clock second of `ns`, a time of the clock `nsecs` reads
/// (`CLOCK_MONOTONIC`, as the kernel's `bpf_ktime_get_ns`).
fn wall_second(ns: i64) -> libc::time_t {
    libc::time_t::try_from(wall_ns(ns).div_euclid(1_000_000_000)).unwrap_or_default()
}

/// The wall-clock time, in ns since the epoch, of `CLOCK_MONOTONIC` `ns`.
fn wall_ns(ns: i64) -> i128 {
    clock_ns(libc::CLOCK_REALTIME) - clock_ns(libc::CLOCK_MONOTONIC) + i128::from(ns)
}

/// Nanoseconds on `clock` now.
fn clock_ns(clock: libc::clockid_t) -> i128 {
    let mut at = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(clock, &raw mut at) };
    i128::from(at.tv_sec) * 1_000_000_000 + i128::from(at.tv_nsec)
}

/// A stack's innermost `frames` frames in `mode`; empty, as bpftrace
/// prints it, when the kernel could not record it.
fn stack_text(stack: Option<&Stack>, mode: StackMode, frames: usize) -> String {
    stack.map(|s| s.text(mode, frames)).unwrap_or_default()
}

/// Whether `a` and `b` agree in their first `len` bytes as C's `strncmp`
/// compares them: a string ends at a NUL, which the other must have there.
fn same_prefix(a: &str, b: &str, len: i64) -> bool {
    let byte = |s: &str, i: usize| s.as_bytes().get(i).copied().unwrap_or(0);
    for i in 0..usize::try_from(len).unwrap_or(0) {
        let (x, y) = (byte(a, i), byte(b, i));
        if x != y {
            return false;
        }
        if x == 0 {
            break;
        }
    }
    true
}

/// `join()`'s strings with `separator` between them, up to the first
/// empty slot, as bpftrace prints them.
fn joined(block: &[u8], separator: &str) -> String {
    block
        .chunks(JOIN_ARG_LEN)
        .take(JOIN_ARGS)
        .take_while(|slot| slot.first().is_some_and(|b| *b != 0))
        .map(c_string)
        .collect::<Vec<_>>()
        .join(separator)
}

/// The value of field `name` of the event's record.
fn field(scope: &Scope<'_, '_>, name: &str) -> Value {
    let Some(f) = scope.attach.field(name) else {
        return Value::Int(0);
    };
    match f.kind {
        FieldKind::Chars => Value::Str(c_string(field_bytes(scope, name))),
        FieldKind::DataLoc => string_of(scope, name),
        FieldKind::Int | FieldKind::Pointer { .. } => {
            Value::Int(integer(scope.event.raw, f.offset, f.size, f.signed))
        }
        FieldKind::Const(n) => Value::Int(n),
        // Read as a member (`eval`), or refused by the checker.
        FieldKind::Memory { .. } | FieldKind::Unread => Value::Int(0),
    }
}

/// The bytes of an array member or field (`u8 addr[16]`), as the kernel
/// copied them.
fn array_bytes(scope: &Scope<'_, '_>, expr: &Expr) -> Option<Vec<u8>> {
    match (&expr.kind, member_bytes(scope, expr)) {
        (_, Some((bytes, true))) => Some(bytes.to_vec()),
        (ExprKind::Field(name), _)
            if scope
                .attach
                .field(name)
                .is_some_and(|f| f.kind == FieldKind::Chars) =>
        {
            Some(field_bytes(scope, name).to_vec())
        }
        _ => None,
    }
}

/// The bytes of field `name` in the event's record.
fn field_bytes<'a>(scope: &Scope<'_, 'a>, name: &str) -> &'a [u8] {
    scope
        .attach
        .field(name)
        .and_then(|f| {
            scope
                .event
                .raw
                .get(usize::from(f.offset)..usize::from(f.offset + f.size))
        })
        .unwrap_or_default()
}

/// The string the kernel read again for the thread's pointer saved in map
/// `map`, when it read one (`saved.rs`): fresher than the one read where
/// the pointer was saved, which may be empty.
fn kept_string(scope: &Scope<'_, '_>, map: usize) -> Option<Value> {
    let slot = scope.attach.saved_slot(map)?;
    let text = c_string(scope.event.strings.get(slot).copied()?);
    (!text.is_empty()).then_some(Value::Str(text))
}

/// The kernel struct member `expr` names, from the slot the kernel read
/// it into.
fn member(scope: &Scope<'_, '_>, expr: &Expr) -> Value {
    match scope.attach.member(expr.span) {
        Some(m) => member_value(scope.attach, m, read_bytes(scope, m)),
        None => Value::Int(0),
    }
}

/// Member `m` of `attach` made of `bytes` (zeros where they are short).
fn member_value(attach: &Attach, m: &MemberRead, bytes: &[u8]) -> Value {
    let chars = m.chars;
    if let Some(layout) = m.layout.and_then(|i| attach.layouts.get(usize::from(i))) {
        return layout.value(bytes);
    }
    if chars {
        Value::Str(c_string(bytes))
    } else if let Some((shift, width)) = m.bits {
        // Not sign-extended, signed or not, as bpftrace 0.17 reads one.
        Value::Int(bit_field(integer(bytes, 0, m.size, false), shift, width))
    } else {
        Value::Int(integer(bytes, 0, m.size, m.signed))
    }
}

/// Member `name` of a struct read whole (0 of anything else: checked).
fn member_of(value: Value, name: &str) -> Value {
    match value {
        Value::Record(members) => (members.into_iter())
            .find(|(n, _)| n == name)
            .map_or(Value::Int(0), |(_, value)| value),
        _ => Value::Int(0),
    }
}

/// The bytes the kernel read for member `expr`, and whether they are a
/// `char` array.
fn member_bytes<'a>(scope: &Scope<'_, 'a>, expr: &Expr) -> Option<(&'a [u8], bool)> {
    let m = scope.attach.member(expr.span)?;
    Some((read_bytes(scope, m), m.chars))
}

/// The bytes the kernel read for member read `m`.
fn read_bytes<'a>(scope: &Scope<'_, 'a>, m: &MemberRead) -> &'a [u8] {
    let attach = scope.attach;
    let read = &attach.reads[m.read];
    let slot = scope
        .event
        .strings
        .get(attach.read_slot(m.read))
        .copied()
        .unwrap_or_default();
    let start = (m.at - read.at) as usize;
    // A string or path read fills its slot, as long as BPFTRACE_STRLEN
    // made it; a member's bytes are its own.
    let end = match read.kind {
        ReadKind::Bytes => start + usize::from(m.size),
        ReadKind::String | ReadKind::Path => slot.len(),
    };
    slot.get(start..end).unwrap_or_default()
}

/// The string the kernel read for field `name`, or a `char[]` field.
fn string_of(scope: &Scope<'_, '_>, name: &str) -> Value {
    if let Some(slot) = scope.attach.string_slot(name) {
        return Value::Str(c_string(
            scope.event.strings.get(slot).copied().unwrap_or_default(),
        ));
    }
    match field(scope, name) {
        Value::Str(s) => Value::Str(s),
        Value::Int(_)
        | Value::Tuple(_)
        | Value::Bytes(_)
        | Value::Buf(_)
        | Value::Array(_)
        | Value::Record(_) => Value::Str(String::new()),
    }
}

/// The `width` bits from bit `shift` of `raw`.
fn bit_field(raw: i64, shift: u8, width: u8) -> i64 {
    let up = 64 - u32::from(width);
    (raw.cast_unsigned() >> shift << up >> up).cast_signed()
}

/// A little-endian integer of `size` bytes at `offset`, sign-extended when signed.
pub fn integer(raw: &[u8], offset: u16, size: u16, signed: bool) -> i64 {
    let start = usize::from(offset);
    let Some(bytes) = raw.get(start..start + usize::from(size.min(8))) else {
        return 0;
    };
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    let value = u64::from_le_bytes(buf);
    let bits = bytes.len() as u32 * 8;
    if signed && bits < 64 {
        let shift = 64 - bits;
        ((value << shift) as i64) >> shift
    } else {
        value as i64
    }
}

/// The local time formatted with strftime `pattern`.
fn local_time(pattern: &str, at: libc::time_t) -> String {
    let Ok(pattern) = std::ffi::CString::new(pattern) else {
        return String::new();
    };
    let mut buf = [0u8; 256];
    // SAFETY: localtime_r into a zeroed tm is always valid; strftime
    // writes at most buf.len() bytes.
    let len = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&raw const at, &raw mut tm);
        libc::strftime(
            buf.as_mut_ptr().cast(),
            buf.len(),
            pattern.as_ptr(),
            &raw const tm,
        )
    };
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bit_field_is_its_bits() {
        use super::bit_field;
        // 0b1_0110_1000: bits 3..8 are 0b101101.
        assert_eq!(bit_field(0b1_0110_1000, 3, 6), 0b10_1101);
        assert_eq!(bit_field(0b1_0110_1000, 3, 1), 1);
        assert_eq!(bit_field(-1, 0, 64), -1);
        assert_eq!(bit_field(0xff, 4, 4), 15);
    }

    use super::*;
    use crate::check::tests::checked;
    use weft_abi::oneliner::SUBJECT_PID;

    /// A `sys_exit_read` record returning `ret`, as the kernel copies it.
    fn exit_read(ret: i64) -> Vec<u8> {
        let mut raw = vec![0u8; 24];
        raw[16..24].copy_from_slice(&ret.to_le_bytes());
        raw
    }

    fn run(text: &str, events: &[(u32, &[u8], i64)]) -> String {
        run_limited(text, events, Limits::default()).0
    }

    /// What `text` prints over `events` held to `limits`, and the maps'
    /// dropped keys.
    fn run_limited(
        text: &str,
        events: &[(u32, &[u8], i64)],
        limits: Limits,
    ) -> (String, Vec<(String, u64)>) {
        let plan = checked(text);
        let mut runtime = Runtime::new(&plan, OutputFormat::Text, 0);
        runtime.set_limits(limits);
        let mut out = Vec::new();
        for (pid, comm, ret) in events {
            let raw = exit_read(*ret);
            let index = plan
                .attaches
                .iter()
                .position(|a| a.target.name().ends_with("sys_exit_read"))
                .unwrap();
            let event = Event {
                attach: index,
                pid: *pid,
                tid: *pid,
                comm,
                raw: &raw,
                ..Event::default()
            };
            if runtime.event(&event, &mut out).unwrap() == Flow::Exit {
                break;
            }
        }
        runtime.print_all(&mut out).unwrap();
        let dropped = (runtime.dropped_keys())
            .map(|(map, n)| (map.to_owned(), n))
            .collect();
        (String::from_utf8(out).unwrap(), dropped)
    }

    /// bpftrace's comparisons are unsigned unless both sides are signed:
    /// `pid > -1` never holds, a signed field below 0 does, and `(uint64)`
    /// makes a negative number the largest.
    #[test]
    fn comparisons_are_unsigned_unless_both_sides_are_signed() {
        let out = run(
            "tracepoint:syscalls:sys_exit_read { if (pid > -1) { @never = count(); } \
             if (args.ret < 0) { @negative = count(); } if ((uint64)args.ret > 1000) { @huge = count(); } \
             if (pid > 0 && (int64)args.ret >= -5) { @both = count(); } }",
            &[(1, b"cat\0", -5)],
        );
        assert_eq!(out, "\n\n@both: 1\n@huge: 1\n@negative: 1\n@never: 0\n");
    }

    #[test]
    fn maps_hold_at_most_map_keys_max_keys() {
        let limits = Limits {
            map_keys_max: 2,
            ..Limits::default()
        };
        let events: Vec<(u32, &[u8], i64)> = (1..=5).map(|pid| (pid, &b"cat\0"[..], 1)).collect();
        let (out, dropped) = run_limited(
            "tracepoint:syscalls:sys_exit_read { @c[pid] = count(); @v[pid] = 1; @n[pid]++; @k[1] = count(); }",
            &events,
            limits,
        );
        // The first two keys stay; a key already held is still updated.
        assert_eq!(
            out,
            "\n\n@c[1]: 1\n@c[2]: 1\n@k[1]: 5\n@n[1]: 1\n@n[2]: 1\n@v[1]: 1\n@v[2]: 1\n"
        );
        let dropped: Vec<_> = dropped.iter().map(|(m, n)| (m.as_str(), *n)).collect();
        assert_eq!(dropped, [("c", 3), ("v", 3), ("n", 3)]);
    }

    #[test]
    fn strings_are_as_long_as_strlen_allows() {
        let text = || "abcdef".to_owned();
        assert_eq!(bounded(text(), None, 64), "abcdef");
        assert_eq!(bounded(text(), None, 4), "abc");
        // As bpftrace 0.17 prints `str(args->filename, 3)`: "/et".
        assert_eq!(bounded(text(), Some(3), 64), "abc");
        assert_eq!(bounded(text(), Some(30), 4), "abc");
        assert_eq!(bounded(text(), Some(0), 64), "");
        assert_eq!(bounded(text(), Some(-1), 64), "");
    }

    #[test]
    fn predicates_maps_and_printf() {
        let out = run(
            r#"tracepoint:syscalls:sys_exit_read /pid != 9 && args.ret >= 0/ { @bytes[comm] = sum(args.ret); @n++; if (args.ret == 0) { printf("eof %s %d\n", comm, pid); } }"#,
            &[
                (1, b"cat\0", 4096),
                (1, b"cat\0", 0),
                (2, b"dd\0", 512),
                (9, b"skip\0", 7),
                (2, b"dd\0", -11),
            ],
        );
        assert_eq!(
            out,
            "eof cat 1\n\n\n@bytes[dd]: 512\n@bytes[cat]: 4096\n@n: 3\n"
        );
    }

    #[test]
    fn exit_stops_at_once_and_variables_are_per_event() {
        let out = run(
            "tracepoint:syscalls:sys_exit_read { $x = 0; $x += 1; @max = max($x); @c = count(); if (@c == 2) { exit(); } }",
            &[(1, b"a\0", 1), (1, b"a\0", 2), (1, b"a\0", 3)],
        );
        assert_eq!(out, "\n\n@c: 2\n@max: 1\n");
    }

    /// Tuples: made of any values, tuples too; their elements read as
    /// `.N`; printed, kept in maps and compared.
    #[test]
    fn tuples_as_bpftrace() {
        // bpftrace 0.17 printed these lines for the same values, and the
        // same JSON but for its spaces.
        let program = r#"tracepoint:syscalls:sys_exit_read { $t = (pid, comm, (args.ret, "x")); print($t); @t[pid] = $t; printf("%d %s %d\n", $t.2.0, $t.1, $t == (1, "cat", (5, "x"))); $s = comm; @s = $s; }"#;
        let out = run(program, &[(1, b"cat\0", 5)]);
        assert_eq!(
            out,
            "(1, cat, (5, x))\n5 cat 1\n\n\n@s: cat\n@t[1]: (1, cat, (5, x))\n"
        );
        let plan = checked(program);
        let mut runtime = Runtime::new(&plan, OutputFormat::Json, 0);
        let raw = exit_read(5);
        let event = Event {
            pid: 1,
            comm: b"cat\0",
            raw: &raw,
            ..Event::default()
        };
        let mut out = Vec::new();
        runtime.event(&event, &mut out).unwrap();
        runtime.print_all(&mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.contains(r#"{"type": "value", "data": [1,"cat",[5,"x"]]}"#)
                && out.contains(r#"{"type": "map", "data": {"@t": {"1": [1,"cat",[5,"x"]]}}}"#),
            "{out}"
        );
    }

    /// `++` and `--` inside expressions update their variable or map and
    /// are worth its value before (after the target) or after (before it),
    /// as bpftrace 0.17 printed `1 3 3` for the first three; in a
    /// predicate they count every event tested.
    #[test]
    fn increments_in_expressions_as_bpftrace() {
        let out = run(
            r#"tracepoint:syscalls:sys_exit_read /@tested++ < 2/ { $i = 1; printf("%d %d %d %d\n", $i++, ++$i, $i--, --@m[comm]); ++$i; --@m[comm]; $k = 0; $old = @k[$k++]++; printf("%d %d %d\n", $i, $k, $old); }"#,
            &[(1, b"a\0", 1), (1, b"a\0", 2), (1, b"a\0", 3)],
        );
        assert_eq!(
            out,
            "1 3 3 -1\n3 1 0\n1 3 3 -3\n3 1 1\n\n\n@k[0]: 2\n@m[a]: -4\n@tested: 3\n"
        );
    }

    /// A pointer moves by whole pointees whichever side the integer is
    /// on, and takes no other arithmetic, as in bpftrace.
    #[test]
    fn pointers_move_by_their_pointee_and_only_so() {
        let out = run(
            r#"tracepoint:syscalls:sys_exit_read { $p = (uint64 *)8; printf("%d %d %d %d %d\n", 2 + $p, $p + 2, $p - 1, $p > 0, curtask >= 0); }"#,
            &[(1, b"a\0", 1)],
        );
        assert_eq!(out, "24 24 0 1 1\n\n\n");
        for refused in [
            "$p * 2",
            "$p - $p",
            "$p + $p",
            "1 - $p",
            "$p & 1",
            "curtask / 2",
        ] {
            let program = format!("BEGIN {{ $p = (uint64 *)8; @ = {refused}; }}");
            assert!(
                crate::check::tests::refused(&program).contains("does not apply to a pointer"),
                "{refused}"
            );
        }
    }

    /// `strcontains(haystack, needle)`, bpftrace 0.20's: 1 where the needle
    /// is in the haystack (the empty one is in every string).
    #[test]
    fn strcontains_finds_a_substring() {
        let out = run(
            r#"tracepoint:syscalls:sys_exit_read /strcontains(comm, "at")/ { printf("%s %d\n", comm, strcontains(comm, "")); }"#,
            &[(1, b"cat\0", 1), (2, b"dd\0", 1), (3, b"bat\0", 1)],
        );
        assert_eq!(out, "cat 1\nbat 1\n\n\n");
    }

    /// `username` is the user's name in /etc/passwd (uid 0 is root), or
    /// empty for a uid it does not list, as in bpftrace.
    #[test]
    fn username_names_the_uid() {
        let plan = checked(
            r#"tracepoint:syscalls:sys_exit_read { printf("[%s]\n", username); @[username] = count(); }"#,
        );
        let mut runtime = Runtime::new(&plan, OutputFormat::Text, 0);
        let raw = exit_read(0);
        let mut out = Vec::new();
        for uid in [0, 4_000_000_000] {
            let event = Event {
                uid,
                raw: &raw,
                ..Event::default()
            };
            runtime.event(&event, &mut out).unwrap();
        }
        assert_eq!(String::from_utf8(out).unwrap(), "[root]\n[]\n");
    }

    /// `strftime`'s time is one of `nsecs`' clock, the monotonic one.
    #[test]
    fn strftime_takes_the_monotonic_clock_to_the_wall_clock() {
        let ns = i64::try_from(clock_ns(libc::CLOCK_MONOTONIC)).unwrap();
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let second = wall_second(ns).cast_unsigned();
        assert!(second.abs_diff(wall) <= 1, "{second} {wall}");
        assert_eq!(local_time("%s", wall_second(ns)), second.to_string());
    }

    /// `rand` is a new 32-bit number at each use.
    #[test]
    fn rand_is_new_each_time() {
        let out = run(
            "tracepoint:syscalls:sys_exit_read { @[rand == rand] = count(); @max = max(rand > 0xffffffff); }",
            &[(1, b"a\0", 1), (1, b"a\0", 2), (1, b"a\0", 3)],
        );
        // rand is never above u32::MAX: max() of 0 each time, which
        // bpftrace 0.17 writes (samples below 0 it never does).
        assert_eq!(out, "\n\n@[0]: 3\n@max: 0\n");
    }

    /// `strncmp` compares up to its length, a string's end included.
    #[test]
    fn strncmp_compares_a_prefix() {
        let out = run(
            r#"tracepoint:syscalls:sys_exit_read { printf("%d %d %d %d %d\n", strncmp(comm, "cab", 2), strncmp(comm, "cab", 3), strncmp(comm, "cat", 9), strncmp(comm, "ca", 3), strncmp(comm, "x", 0)); }"#,
            &[(1, b"cat\0", 1)],
        );
        assert_eq!(out, "0 1 0 1 0\n\n\n");
    }

    /// `while` with `break` and `continue`, and `unroll`, nested: run as
    /// bpftrace runs them, once per event.
    #[test]
    fn loops() {
        let out = run(
            "tracepoint:syscalls:sys_exit_read { $i = 0; while ($i < args.ret) { $i++; if ($i == 2) { continue; } if ($i > 4) { break; } @seen[$i] = count(); } unroll(2) { @u++; unroll(3) { @v++; } } }",
            &[(1, b"a\0", 9), (1, b"a\0", 3)],
        );
        assert_eq!(
            out,
            "\n\n@seen[4]: 1\n@seen[1]: 2\n@seen[3]: 2\n@u: 4\n@v: 12\n"
        );
    }

    /// A loop that would never end is ended after `MAX_ROUNDS`, and the
    /// probe goes on.
    #[test]
    fn a_loop_without_end_is_ended() {
        let out = run(
            "tracepoint:syscalls:sys_exit_read { $i = 0; while (1) { $i++; } @i = max($i); }",
            &[(1, b"a\0", 1)],
        );
        assert_eq!(out, format!("\n\n@i: {MAX_ROUNDS}\n"));
    }

    /// Constants become their values (a macro weft knows, an enumerator of
    /// the kernel's BTF); `bswap` swaps as many bytes as its value's type
    /// has; `ntop` writes an IPv4 integer as it lies in memory.
    #[test]
    fn constants_bswap_and_ntop() {
        let out = run(
            r#"tracepoint:syscalls:sys_exit_read { $port = (uint16)args.ret; printf("%d %d %d %x %x %s %s\n", AF_INET, AF_INET6, TCP_FIN_WAIT1, bswap($port), bswap((uint32)1), ntop(args.ret), ntop(AF_INET, 0)); }"#,
            &[(1, b"a\0", 0x0100_007f)],
        );
        assert_eq!(out, "2 10 4 7f00 1000000 127.0.0.1 0.0.0.0\n\n\n");
    }

    /// Kernel memory with one word at the fake kernel's `avenrun`.
    struct Avenrun;

    impl KernelMemory for Avenrun {
        fn word(&mut self, address: u64) -> Option<u64> {
            (address == 0xffff_ffff_8300_0008).then_some(2048 + 1024)
        }
    }

    /// `*$a` of an address that is no constant to the checker (here a
    /// variable set twice; one set once to `kaddr()` the kernel reads) in a
    /// probe weft runs reads the kernel's word there; where nothing can be
    /// read, 0.
    #[test]
    fn a_kernel_word_by_its_symbol() {
        let plan = checked(
            r#"BEGIN { $a = 0; $a = kaddr("avenrun"); printf("%d %d\n", *($a + 8) >> 11, *$a); }"#,
        );
        let mut runtime = Runtime::new(&plan, OutputFormat::Text, 0);
        runtime.set_kernel_memory(Box::new(Avenrun));
        let mut out = Vec::new();
        runtime.event(&Event::default(), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "1 0\n");
    }

    /// The kernel's maps as fixed lists of entries: aggregations, starts.
    struct Entries(Vec<(AggKey, AggValue)>, Vec<(StartKey, u64)>);

    impl KernelAggs for Entries {
        fn entries(&mut self) -> Vec<(AggKey, AggValue)> {
            self.0.clone()
        }

        fn starts(&mut self) -> Vec<(StartKey, u64)> {
            self.1.clone()
        }
    }

    /// What the kernel aggregated adds to what weft did, key by key, bucket
    /// by bucket, and its keys read as weft's own: comm, probe and ints.
    #[test]
    fn kernel_aggregations_merge_into_the_maps() {
        let plan = checked(
            "tracepoint:syscalls:sys_exit_read { @h[comm, probe] = hist(args.ret); } tracepoint:syscalls:sys_exit_read { @m[pid] = min(args.ret); }",
        );
        assert!(plan.attaches.iter().all(|a| a.agg.is_some()));
        let mut runtime = Runtime::new(&plan, OutputFormat::Text, 0);
        let raw = exit_read(5);
        let event = Event {
            attach: 0,
            pid: 7,
            comm: b"cat\0",
            raw: &raw,
            ..Event::default()
        };
        let mut out = Vec::new();
        runtime.event(&event, &mut out).unwrap();
        // One the kernel sent rather than kept.
        let sent = Event {
            attach: 1,
            pid: 8,
            ..event
        };
        runtime.event(&sent, &mut out).unwrap();
        let key = |map: u16, parts: [u8; 2], slot: u32, first: [u8; 16], second: i64| AggKey {
            map,
            parts,
            slot,
            key: [first, {
                let mut bytes = [0; 16];
                bytes[..8].copy_from_slice(&second.to_le_bytes());
                bytes
            }],
        };
        let mut cat = [0; 16];
        cat[..3].copy_from_slice(b"cat");
        let mut pid = [0; 16];
        pid[..8].copy_from_slice(&7i64.to_le_bytes());
        let value = |count, min| AggValue {
            count,
            sum: 0,
            min,
            max: 0,
        };
        runtime.set_kernel_aggs(Box::new(Entries(
            vec![
                // Two more in 5's bucket [4, 8), one in [1]; an empty slot.
                (
                    key(1, [SUBJECT_COMM, SUBJECT_PROBE], 4, cat, 0),
                    value(2, 5),
                ),
                (
                    key(1, [SUBJECT_COMM, SUBJECT_PROBE], 2, cat, 0),
                    value(1, 1),
                ),
                (
                    key(1, [SUBJECT_COMM, SUBJECT_PROBE], 3, cat, 0),
                    value(0, 0),
                ),
                (key(2, [SUBJECT_PID, SUBJECT_NONE], 0, pid, 0), value(3, -2)),
            ],
            Vec::new(),
        )));
        runtime.print_all(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\n\n@h[cat, tracepoint:syscalls:sys_exit_read]: \n\
             [1]                    1 |@@@@@@@@@@@@@@@@@                                   |\n\
             [2, 4)                 0 |                                                    |\n\
             [4, 8)                 3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n\
             \n@m[7]: -2\n@m[8]: 5\n"
        );
    }

    /// A start the kernel took reads where the probe read its map: the
    /// time since it, or 0 where there was none; the starts no probe took
    /// are printed at exit, unless END clears them.
    #[test]
    fn a_start_the_kernel_kept_reads_as_the_map_did() {
        let text = "tracepoint:syscalls:sys_enter_read { @start[tid] = nsecs; } \
             tracepoint:syscalls:sys_exit_read { printf(\"%d %d\\n\", nsecs - @start[tid], @start[tid]); delete(@start[tid]); }";
        let plan = checked(text);
        assert!(plan.attaches[1].start.is_some());
        let mut runtime = Runtime::new(&plan, OutputFormat::Text, 0);
        let mut out = Vec::new();
        for start in [1000, 0] {
            let event = Event {
                attach: 1,
                ns: 5000,
                start,
                ..Event::default()
            };
            runtime.event(&event, &mut out).unwrap();
        }
        let left = |tid| StartKey {
            map: 1,
            reserved: [0; 6],
            key: tid,
        };
        runtime.set_kernel_aggs(Box::new(Entries(
            Vec::new(),
            vec![(left(7), 300), (left(8), 0), (left(9), 400)],
        )));
        runtime.take_kernel_starts();
        runtime.print_all(&mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "4000 1000\n5000 0\n\n\n@start[7]: 300\n@start[9]: 400\n"
        );

        let plan = checked(&format!("{text} END {{ clear(@start); }}"));
        let mut runtime = Runtime::new(&plan, OutputFormat::Text, 0);
        runtime.set_kernel_aggs(Box::new(Entries(Vec::new(), vec![(left(7), 300)])));
        runtime.take_kernel_starts();
        let mut out = Vec::new();
        runtime
            .event(
                &Event {
                    attach: 2,
                    ..Event::default()
                },
                &mut out,
            )
            .unwrap();
        runtime.print_all(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "\n\n\n");
    }

    /// Names that know one function in process 1 and one in the kernel.
    struct OneEach;

    impl Names for OneEach {
        fn user(&mut self, pid: u32, addr: u64) -> Option<String> {
            (pid == 1 && (0x1000..0x1100).contains(&addr)).then(|| "worker".into())
        }

        fn kernel(&mut self, addr: u64) -> Option<String> {
            (addr == 0x8100).then(|| "vfs_read".into())
        }
    }

    #[test]
    fn usym_and_ksym_name_the_function_or_print_the_address() {
        let plan = checked(
            r#"tracepoint:syscalls:sys_exit_read { printf("%s %s %s %s\n", usym(args.ret), usym(args.ret + 0x1000), ksym(0x8100), ksym(0)); }"#,
        );
        let mut runtime = Runtime::new(&plan, OutputFormat::Text, 0);
        runtime.set_names(Box::new(OneEach));
        let raw = exit_read(0x1010);
        let event = Event {
            pid: 1,
            comm: b"a\0",
            raw: &raw,
            ..Event::default()
        };
        let mut out = Vec::new();
        runtime.event(&event, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "worker 0x2010 vfs_read 0\n"
        );
    }

    #[test]
    fn join_prints_the_strings_up_to_the_first_empty_slot() {
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_execve { join(args.argv); join(args.argv, ","); }"#,
        );
        let mut block = vec![0u8; JOIN_ARGS * JOIN_ARG_LEN];
        for (i, arg) in ["ls", "-l", "two words"].iter().enumerate() {
            block[i * JOIN_ARG_LEN..][..arg.len()].copy_from_slice(arg.as_bytes());
        }
        // After the empty slot: not printed.
        block[4 * JOIN_ARG_LEN] = b'x';
        let run = |format: OutputFormat, block: &[u8]| {
            let mut runtime = Runtime::new(&plan, format, 0);
            let event = Event {
                join: block,
                ..Event::default()
            };
            let mut out = Vec::new();
            runtime.event(&event, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            run(OutputFormat::Text, &block),
            "ls -l two words\nls,-l,two words\n"
        );
        assert_eq!(
            run(OutputFormat::Json, &block),
            "{\"type\": \"join\", \"data\": \"ls -l two words\"}\n{\"type\": \"join\", \"data\": \"ls,-l,two words\"}\n"
        );
        // Every slot full: all sixteen, each cut at its length.
        let full = vec![b'a'; JOIN_ARGS * JOIN_ARG_LEN];
        let line = run(OutputFormat::Text, &full);
        let first = line.lines().next().unwrap();
        assert_eq!(first.split(' ').count(), JOIN_ARGS);
        assert!(first.split(' ').all(|arg| arg.len() == JOIN_ARG_LEN));
    }

    #[test]
    fn integer_casts_keep_the_low_bits_as_bpftrace_does() {
        // ssllatency's `(int8)retval`: 255 is -1 as an int8, 257 is 1; 257 *
        // 128 = 32896 is -32640 as an int16.
        let out = run(
            "tracepoint:syscalls:sys_exit_read { if ((int8)args.ret >= 1) { @ok = count(); } @u = max((uint8)args.ret); @s = min((int16)(args.ret * 128)); @w = max((uint32)-1 + (int64)args.ret * 0); }",
            &[(1, b"a\0", 255), (1, b"a\0", 257)],
        );
        assert_eq!(out, "\n\n@ok: 1\n@s: -32640\n@u: 255\n@w: 4294967295\n");
    }
}
