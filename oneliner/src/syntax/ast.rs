//! The parsed program. Every node keeps its span for error messages.

use std::collections::HashMap;

use crate::error::Span;

/// A whole program: probes with their actions.
#[derive(Debug, Clone)]
pub struct Program {
    pub items: Vec<Item>,
    /// `#define NAME VALUE`: each name's value, put in place of the name
    /// where it is used (`constants.rs`).
    pub defines: HashMap<String, Expr>,
    /// The program's own `struct`, `union` and `enum` definitions, which
    /// casts, `->` and constants see before the kernel's BTF (`types.rs`).
    pub definitions: Definitions,
    /// Whether `system()` and `signal()` may run (`--unsafe`, as bpftrace's).
    pub unsafe_calls: bool,
    /// The process of `-p PID`, whose files a USDT probe without a path
    /// names.
    pub pid: Option<u32>,
    /// The program `-c` runs, as written (its first word), whose
    /// functions `watchpoint:FUNCTION+argN` names where there is no `-p`.
    pub command: Option<String>,
    /// Every field of each event is kept (`weft trace --store`), whether
    /// the program reads it or not.
    pub all_fields: bool,
}

/// C type definitions written before (or between) the probes, as
/// bpftrace takes them: `struct NAME { ... };`, `union`, `enum`.
#[derive(Debug, Clone, Default)]
pub struct Definitions {
    /// Every struct and union, named or not, nested ones too; a member's
    /// inline definition is [`Base::Inline`] of its index here.
    pub records: Vec<RecordDef>,
    /// Each enum's enumerators in the order written, with their values as
    /// written (none: the previous one's plus 1, or 0 for the first).
    pub enums: Vec<Vec<Enumerator>>,
}

/// `NAME` or `NAME = VALUE` in an enum.
#[derive(Debug, Clone)]
pub struct Enumerator {
    pub name: String,
    pub value: Option<Expr>,
    pub span: Span,
}

/// `struct NAME { members }` or `union NAME { members }`.
#[derive(Debug, Clone)]
pub struct RecordDef {
    /// `struct NAME` or `union NAME`; none for an anonymous one.
    pub name: Option<String>,
    pub union: bool,
    /// None for a declaration alone (`struct NAME;`).
    pub members: Option<Vec<MemberDef>>,
    /// Its size where a file's DWARF gives it (a uprobe's argument's
    /// struct), rather than as C lays it out.
    pub size: Option<u32>,
    pub span: Span,
}

/// One member as declared: `unsigned long *p[4]`, `int flags : 3`.
#[derive(Debug, Clone)]
pub struct MemberDef {
    /// None for an anonymous struct or union, whose members are the
    /// enclosing record's (C11), or an unnamed bit-field.
    pub name: Option<String>,
    pub ty: TypeRef,
    /// A bit-field's width.
    pub bits: Option<u32>,
    /// Its byte offset where a file's DWARF gives it (a packed struct's
    /// members are where the compiler put them, not where C's rules would).
    pub at: Option<u32>,
    pub span: Span,
}

/// A C type as a declaration spells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeRef {
    pub base: Base,
    /// How many `*`.
    pub pointers: u8,
    /// Array lengths, outermost first (`[2][3]`).
    pub dims: Vec<u32>,
}

/// What a declaration names before its `*` and `[N]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    Int {
        size: u8,
        signed: bool,
    },
    Float(u8),
    Void,
    /// An enum: an `int`.
    Enum,
    /// `struct NAME` or `union NAME`: the program's, else the kernel's.
    Record(String),
    /// A struct or union defined in place: its index in
    /// [`Definitions::records`].
    Inline(usize),
    /// A type name (`u64`, `pid_t`): a fixed-width name or a kernel typedef.
    Named(String),
}

/// `probe, probe /predicate/ { actions }`.
#[derive(Debug, Clone)]
pub struct Item {
    pub probes: Vec<Probe>,
    pub predicate: Option<Expr>,
    pub body: Vec<Stmt>,
}

/// One probe as written, before globs are expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub kind: ProbeKind,
    pub span: Span,
}

/// What a probe attaches to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeKind {
    Begin,
    End,
    /// `tracepoint:CATEGORY:NAME`; both may hold `*` globs.
    Tracepoint {
        category: String,
        name: String,
    },
    /// `rawtracepoint:NAME`.
    RawTracepoint {
        name: String,
    },
    /// `fentry:[MODULE:]FUNC` (also `kfunc:`), or `fexit:` (`kretfunc:`)
    /// when `exit`.
    Fentry {
        function: String,
        exit: bool,
        /// The module written (`vmlinux` for the kernel proper), if any.
        module: Option<String>,
    },
    /// `kprobe:FUNC`, or `kretprobe:` when `exit`.
    Kprobe {
        function: String,
        exit: bool,
    },
    /// `uprobe:PATH:SYMBOL`, or `uretprobe:` when `exit`.
    Uprobe {
        path: String,
        symbol: String,
        exit: bool,
    },
    /// `usdt:PATH:[PROVIDER:]PROBE`: a static probe (an SDT note)
    /// of a program or library. A probe may have several sites, each with
    /// its own arguments' places: one target per site, at `offset` in the
    /// file, with its probe's `semaphore` (0: none) to count.
    Usdt {
        path: String,
        provider: String,
        name: String,
        offset: u64,
        semaphore: u64,
    },
    /// `profile:UNIT:N`: every CPU, N times a second (`hz`), or once
    /// every N seconds, milliseconds or microseconds (`s`, `ms`, `us`) of
    /// its clock.
    Profile {
        unit: &'static str,
        n: u64,
    },
    /// `software:EVENT:N` / `hardware:EVENT:N`: every CPU, once every N
    /// of its events; `alias` is the event's name as written (`cs`, `faults`).
    PerfEvent {
        event: PerfEvent,
        alias: &'static str,
        period: u64,
    },
    /// `iter:task`, `iter:task_file`: each task (each open file of each
    /// task) once, then the program ends.
    Iter {
        name: String,
    },
    /// `watchpoint:ADDR:LEN:MODE` (also `asyncwatchpoint:`): a hardware
    /// breakpoint on `len` bytes at `address` of the `-p`/`-c` process
    /// (of every process without one), firing on writes (`w`), reads and
    /// writes (`rw`) or execution (`x`).
    Watchpoint {
        address: u64,
        len: u8,
        mode: &'static str,
    },
    /// `watchpoint:FUNCTION+argN:LEN:MODE` (`asyncwatchpoint:` too): a
    /// watchpoint as above on the address argument `arg` of the `-p`/`-c`
    /// process's `function` holds, set each time the function is called
    /// with a new one. The task is stopped until weft has set it, but for
    /// `asyncwatchpoint`, which may miss the first accesses.
    /// `path` is the process's file, once expanded.
    WatchArg {
        path: String,
        function: String,
        arg: u8,
        len: u8,
        mode: &'static str,
        sync: bool,
    },
    /// `interval:UNIT:N` (`s`, `ms`, `us`, or `hz`: N times a second): one
    /// CPU, periodically.
    Interval {
        unit: &'static str,
        n: u64,
    },
}

/// The perf events `software:` and `hardware:` probes sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfEvent {
    CpuClock,
    TaskClock,
    PageFaults,
    ContextSwitches,
    CpuMigrations,
    MinorFaults,
    MajorFaults,
    AlignmentFaults,
    EmulationFaults,
    CpuCycles,
    Instructions,
    CacheReferences,
    CacheMisses,
    BranchInstructions,
    BranchMisses,
    BusCycles,
    FrontendStalls,
    BackendStalls,
    RefCycles,
}

/// Each event, whether it is a hardware one, the names bpftrace takes for
/// it (its own first) and the period bpftrace samples it at when the
/// probe gives none.
/// The units of `profile` and `interval` probes, and the nanoseconds of
/// each (none for `hz`, a rate).
pub const TIME_UNITS: &[(&str, Option<u64>)] = &[
    ("hz", None),
    ("s", Some(1_000_000_000)),
    ("ms", Some(1_000_000)),
    ("us", Some(1_000)),
];

/// The period of N of `unit` (one of `TIME_UNITS`), in nanoseconds: N
/// units, or for `hz` a second over N.
pub fn period_ns(unit: &str, n: u64) -> u64 {
    match TIME_UNITS.iter().find(|(name, _)| *name == unit) {
        Some((_, Some(ns))) => n.saturating_mul(*ns),
        _ => (1_000_000_000 / n.max(1)).max(1),
    }
}

const PERF_EVENTS: &[(PerfEvent, bool, &[&str], u64)] = &[
    (PerfEvent::CpuClock, false, &["cpu-clock", "cpu"], 1_000_000),
    (PerfEvent::TaskClock, false, &["task-clock"], 1_000_000),
    (
        PerfEvent::PageFaults,
        false,
        &["page-faults", "faults"],
        100,
    ),
    (
        PerfEvent::ContextSwitches,
        false,
        &["context-switches", "cs"],
        1_000,
    ),
    (PerfEvent::CpuMigrations, false, &["cpu-migrations"], 1),
    (PerfEvent::MinorFaults, false, &["minor-faults"], 100),
    (PerfEvent::MajorFaults, false, &["major-faults"], 1),
    (PerfEvent::AlignmentFaults, false, &["alignment-faults"], 1),
    (PerfEvent::EmulationFaults, false, &["emulation-faults"], 1),
    (
        PerfEvent::CpuCycles,
        true,
        &["cpu-cycles", "cycles"],
        1_000_000,
    ),
    (PerfEvent::Instructions, true, &["instructions"], 1_000_000),
    (
        PerfEvent::CacheReferences,
        true,
        &["cache-references"],
        1_000_000,
    ),
    (PerfEvent::CacheMisses, true, &["cache-misses"], 1_000_000),
    (
        PerfEvent::BranchInstructions,
        true,
        &["branch-instructions", "branches"],
        100_000,
    ),
    (PerfEvent::BranchMisses, true, &["branch-misses"], 100_000),
    (PerfEvent::BusCycles, true, &["bus-cycles"], 100_000),
    (
        PerfEvent::FrontendStalls,
        true,
        &["frontend-stalls"],
        1_000_000,
    ),
    (
        PerfEvent::BackendStalls,
        true,
        &["backend-stalls"],
        1_000_000,
    ),
    (PerfEvent::RefCycles, true, &["ref-cycles"], 1_000_000),
];

impl PerfEvent {
    /// The event `name` names among the hardware or software ones, the
    /// name as the table spells it, and the event's default period.
    pub fn find(hardware: bool, name: &str) -> Option<(Self, &'static str, u64)> {
        PERF_EVENTS.iter().find_map(|(event, h, names, period)| {
            let alias = names.iter().find(|n| **n == name)?;
            (*h == hardware).then_some((*event, *alias, *period))
        })
    }

    /// The names of the hardware or software events, for messages.
    pub fn names(hardware: bool) -> Vec<&'static str> {
        PERF_EVENTS
            .iter()
            .filter(|(_, h, ..)| *h == hardware)
            .map(|(_, _, names, _)| names[0])
            .collect()
    }

    fn entry(self) -> &'static (PerfEvent, bool, &'static [&'static str], u64) {
        PERF_EVENTS
            .iter()
            .find(|(event, ..)| *event == self)
            .expect("every event is in the table")
    }

    pub fn name(self) -> &'static str {
        self.entry().2[0]
    }

    pub fn hardware(self) -> bool {
        self.entry().1
    }
}

impl ProbeKind {
    /// The name the `probe` builtin gives, as bpftrace spells it.
    pub fn name(&self) -> String {
        match self {
            Self::Begin => "BEGIN".into(),
            Self::End => "END".into(),
            Self::Tracepoint { category, name } => format!("tracepoint:{category}:{name}"),
            Self::RawTracepoint { name } => format!("rawtracepoint:{name}"),
            Self::Fentry {
                function,
                exit,
                module,
            } => {
                let kind = if *exit { "fexit" } else { "fentry" };
                match module {
                    Some(module) => format!("{kind}:{module}:{function}"),
                    None => format!("{kind}:{function}"),
                }
            }
            Self::Kprobe { function, exit } => {
                format!("{}:{function}", if *exit { "kretprobe" } else { "kprobe" })
            }
            Self::Uprobe { path, symbol, exit } => {
                format!(
                    "{}:{path}:{symbol}",
                    if *exit { "uretprobe" } else { "uprobe" }
                )
            }
            Self::Usdt {
                path,
                provider,
                name,
                ..
            } => format!("usdt:{path}:{provider}:{name}"),
            Self::Profile { unit, n } => format!("profile:{unit}:{n}"),
            Self::PerfEvent {
                event,
                alias,
                period,
            } => {
                let kind = if event.hardware() {
                    "hardware"
                } else {
                    "software"
                };
                format!("{kind}:{alias}:{period}")
            }
            Self::Interval { unit, n } => format!("interval:{unit}:{n}"),
            Self::Watchpoint { address, len, mode } => {
                format!("watchpoint:0x{address:x}:{len}:{mode}")
            }
            // As bpftrace names it: argument 0 leaves its number out.
            Self::WatchArg {
                path,
                function,
                arg,
                len,
                mode,
                sync,
            } => {
                let kind = if *sync {
                    "watchpoint"
                } else {
                    "asyncwatchpoint"
                };
                let arg = if *arg == 0 {
                    String::new()
                } else {
                    format!(":{arg}")
                };
                format!("{kind}:{path}:{function}{arg}:{len}:{mode}")
            }
            Self::Iter { name } => format!("iter:{name}"),
        }
    }

    /// The function the `func` builtin gives.
    pub fn function(&self) -> &str {
        match self {
            Self::Fentry { function, .. } | Self::Kprobe { function, .. } => function,
            Self::Uprobe { symbol, .. } => symbol,
            _ => "",
        }
    }
}

/// A statement.
#[derive(Debug, Clone)]
pub enum Stmt {
    /// `@m[k] = value` (value may be an aggregation such as `count()`).
    MapAssign {
        map: MapRef,
        value: Expr,
    },
    /// `@m[k] += value`, `@m[k]++` (value 1) and friends.
    MapUpdate {
        map: MapRef,
        op: BinOp,
        value: Expr,
    },
    /// `$v = value`.
    VarAssign {
        name: String,
        span: Span,
        value: Expr,
    },
    /// `$v += value`, `$v++`.
    VarUpdate {
        name: String,
        span: Span,
        op: BinOp,
        value: Expr,
    },
    /// A call for its effect: `printf(...)`, `clear(@m)`, `exit()`.
    Expr(Expr),
    /// `if (cond) { ... } else { ... }`; `unroll(n) { ... }` is one with a
    /// true condition and n copies of the block, as bpftrace unrolls it.
    If {
        cond: Expr,
        then: Vec<Stmt>,
        otherwise: Vec<Stmt>,
    },
    /// `while (cond) { ... }`.
    While {
        cond: Expr,
        body: Vec<Stmt>,
    },
    /// `break` and `continue`, inside a `while` only.
    Break,
    Continue,
}

/// `@name[key, ...]`.
#[derive(Debug, Clone)]
pub struct MapRef {
    pub name: String,
    pub keys: Vec<Expr>,
    pub span: Span,
}

/// An expression and where it was written.
#[derive(Debug, Clone)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub enum ExprKind {
    Int(i64),
    Str(String),
    Builtin(Builtin),
    /// `args.NAME` or `args->NAME`.
    Field(String),
    /// `argN` of kprobes and uprobes.
    Arg(u8),
    /// `base->name` or `base.name`: a member of a kernel struct, read in
    /// the kernel through its BTF.
    Member {
        base: Box<Expr>,
        name: String,
        arrow: bool,
    },
    /// `(struct NAME *)expr`: the integer as a pointer to a kernel struct
    /// (the name includes `struct ` or `union `).
    StructCast(String, Box<Expr>),
    Var(String),
    /// A name that is no builtin: a constant, which `constants.rs` turns
    /// into its value before the checker runs.
    Constant(String),
    Map(MapRef),
    Unary(UnOp, Box<Expr>),
    /// `*address`: the 64-bit word at a kernel address (`kaddr()`'s),
    /// read from `/proc/kcore` where weft runs the probe.
    Deref(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `(a, b, ...)`: two or more values as one.
    Tuple(Vec<Expr>),
    /// `tuple.N`: element N of a tuple, from 0.
    Element {
        tuple: Box<Expr>,
        index: usize,
    },
    /// `$x++`, `++@m[k]`, `$x--`, `--@m`: adds or subtracts 1 (`op`) from a
    /// variable or map element (`target`), and is its value from before
    /// (`post`) or after.
    Step {
        target: Box<Expr>,
        op: BinOp,
        post: bool,
    },
    Call(String, Vec<Expr>),
    /// `sizeof(TYPE)` or `sizeof(expr)`: the checker puts the size in its
    /// place, and nothing evaluates the operand.
    SizeOf(SizeOf),
}

/// What `sizeof` measures.
#[derive(Debug, Clone)]
pub enum SizeOf {
    /// `struct NAME`, `union NAME`, or an integer type (`uint16`).
    Type(String),
    Expr(Box<Expr>),
}

/// Values every probe offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Builtin {
    Pid,
    Tid,
    Uid,
    Gid,
    Comm,
    Cpu,
    Nsecs,
    Elapsed,
    Probe,
    Func,
    Retval,
    Kstack,
    Ustack,
    /// The pid of the `-c` command.
    Cpid,
    /// The current task's `struct task_struct *`, for `->` only.
    Curtask,
    /// A pseudo-random 32-bit number, new at each use.
    Rand,
    /// The NUMA node of the CPU the event fired on.
    Numaid,
    /// The name of the user `uid` is.
    Username,
    /// The start time the kernel took for this event: what the probe's
    /// `@start[key]` reads once the kernel keeps that map (`starts.rs`).
    /// It has no name in the language.
    KernelStart,
}

impl Builtin {
    pub const ALL: [(&'static str, Self); 18] = [
        ("pid", Self::Pid),
        ("tid", Self::Tid),
        ("uid", Self::Uid),
        ("gid", Self::Gid),
        ("comm", Self::Comm),
        ("cpu", Self::Cpu),
        ("nsecs", Self::Nsecs),
        ("elapsed", Self::Elapsed),
        ("probe", Self::Probe),
        ("func", Self::Func),
        ("retval", Self::Retval),
        ("kstack", Self::Kstack),
        ("ustack", Self::Ustack),
        ("cpid", Self::Cpid),
        ("curtask", Self::Curtask),
        ("rand", Self::Rand),
        ("numaid", Self::Numaid),
        ("username", Self::Username),
    ];

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
    }

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, b)| *b == self)
            .map_or("?", |(n, _)| n)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Not,
    Neg,
    BitNot,
    /// `(int8)x`, `(uint32)x`, ...: keep the low `bits` bits, sign-extended
    /// when `signed`, as bpftrace's integer casts do.
    Cast {
        bits: u8,
        signed: bool,
    },
    /// `(int32 *)x`: the address `x` holds, unchanged, as a pointer to an
    /// integer of `bits` bits, which `*` reads and `+` and `-` step over.
    Pointer {
        bits: u8,
        signed: bool,
    },
}

impl UnOp {
    /// The cast a type name in parentheses asks for (`int8` ... `uint64`).
    pub fn cast(name: &str) -> Option<Self> {
        let (signed, bits) = match name.strip_prefix('u') {
            Some(rest) => (false, rest.strip_prefix("int")?),
            None => (true, name.strip_prefix("int")?),
        };
        let bits = match bits {
            "8" => 8,
            "16" => 16,
            "32" => 32,
            "64" => 64,
            _ => return None,
        };
        Some(UnOp::Cast { bits, signed })
    }

    /// The operator applied to an integer.
    pub fn apply(self, n: i64) -> i64 {
        match self {
            UnOp::Not => i64::from(n == 0),
            UnOp::Neg => n.wrapping_neg(),
            UnOp::BitNot => !n,
            UnOp::Cast { bits: 64, .. } | UnOp::Pointer { .. } => n,
            UnOp::Cast { bits, signed: true } => {
                let shift = 64 - u32::from(bits);
                (n << shift) >> shift
            }
            UnOp::Cast {
                bits,
                signed: false,
            } => n & ((1i64 << bits) - 1),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    And,
    Or,
    Xor,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LogicalAnd,
    LogicalOr,
}

impl BinOp {
    pub fn is_comparison(self) -> bool {
        matches!(
            self,
            Self::Eq | Self::Ne | Self::Lt | Self::Le | Self::Gt | Self::Ge
        )
    }

    /// Integer arithmetic as in BPF and bpftrace 0.17: wrapping; `/`, `%`
    /// and `>>` unsigned, as BPF's only division and bpftrace's logical
    /// shift are (`-6 / 2` is 2^63 - 3); division by zero gives 0.
    pub fn apply(self, l: i64, r: i64) -> i64 {
        let (ul, ur) = (l as u64, r as u64);
        match self {
            BinOp::Add => l.wrapping_add(r),
            BinOp::Sub => l.wrapping_sub(r),
            BinOp::Mul => l.wrapping_mul(r),
            BinOp::Div => ul.checked_div(ur).unwrap_or(0) as i64,
            BinOp::Rem => ul.checked_rem(ur).unwrap_or(0) as i64,
            BinOp::And => l & r,
            BinOp::Or => l | r,
            BinOp::Xor => l ^ r,
            BinOp::Shl => l.wrapping_shl(r as u32),
            BinOp::Shr => ul.wrapping_shr(r as u32) as i64,
            BinOp::Lt => i64::from(l < r),
            BinOp::Le => i64::from(l <= r),
            BinOp::Gt => i64::from(l > r),
            BinOp::Ge => i64::from(l >= r),
            BinOp::Eq => i64::from(l == r),
            BinOp::Ne => i64::from(l != r),
            BinOp::LogicalAnd => i64::from(l != 0 && r != 0),
            BinOp::LogicalOr => i64::from(l != 0 || r != 0),
        }
    }
}

/// Calls `f` on every expression of `stmts` (not their subexpressions).
pub(crate) fn for_each_expr(stmts: &[Stmt], f: &mut dyn FnMut(&Expr)) {
    for stmt in stmts {
        match stmt {
            Stmt::MapAssign { map, value } | Stmt::MapUpdate { map, value, .. } => {
                map.keys.iter().for_each(&mut *f);
                f(value);
            }
            Stmt::VarAssign { value, .. } | Stmt::VarUpdate { value, .. } | Stmt::Expr(value) => {
                f(value);
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                f(cond);
                for_each_expr(then, f);
                for_each_expr(otherwise, f);
            }
            Stmt::While { cond, body } => {
                f(cond);
                for_each_expr(body, f);
            }
            Stmt::Break | Stmt::Continue => {}
        }
    }
}

/// Calls `f` on every map that `stmts` assign or update, nested ones too.
pub(crate) fn for_each_map_target(stmts: &[Stmt], f: &mut dyn FnMut(&MapRef)) {
    for stmt in stmts {
        match stmt {
            Stmt::MapAssign { map, .. } | Stmt::MapUpdate { map, .. } => f(map),
            Stmt::If {
                then, otherwise, ..
            } => {
                for_each_map_target(then, f);
                for_each_map_target(otherwise, f);
            }
            Stmt::While { body, .. } => for_each_map_target(body, f),
            _ => {}
        }
    }
}

/// Calls `f` on every expression of `stmts` and on every map key they
/// assign (not their subexpressions), to rewrite them.
pub(crate) fn for_each_expr_mut(stmts: &mut [Stmt], f: &mut dyn FnMut(&mut Expr)) {
    for stmt in stmts {
        match stmt {
            Stmt::MapAssign { map, value } | Stmt::MapUpdate { map, value, .. } => {
                map.keys.iter_mut().for_each(&mut *f);
                f(value);
            }
            Stmt::VarAssign { value, .. } | Stmt::VarUpdate { value, .. } | Stmt::Expr(value) => {
                f(value);
            }
            Stmt::If {
                cond,
                then,
                otherwise,
            } => {
                f(cond);
                for_each_expr_mut(then, f);
                for_each_expr_mut(otherwise, f);
            }
            Stmt::While { cond, body } => {
                f(cond);
                for_each_expr_mut(body, f);
            }
            Stmt::Break | Stmt::Continue => {}
        }
    }
}

impl Program {
    /// Calls `f` on every expression of the program, predicates and
    /// `#define` values included, and then on its subexpressions (as `f`
    /// left them), to rewrite them.
    pub(crate) fn rewrite(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        for item in &mut self.items {
            item.rewrite(f);
        }
        self.defines.values_mut().for_each(|e| e.rewrite(f));
    }

    /// The first use of one of `builtins` in the probes' predicates and
    /// actions, and where it is.
    pub fn first_use(&self, builtins: &[Builtin]) -> Option<(Span, Builtin)> {
        let mut found = None;
        let mut look = |expr: &Expr| {
            expr.visit(&mut |e| {
                if let ExprKind::Builtin(b) = e.kind
                    && builtins.contains(&b)
                    && found.is_none()
                {
                    found = Some((e.span, b));
                }
            });
        };
        for item in &self.items {
            item.for_each_expr(&mut look);
        }
        found
    }
}

impl Item {
    /// Calls `f` on its predicate and on every expression of its actions
    /// (not their subexpressions).
    pub(crate) fn for_each_expr(&self, f: &mut dyn FnMut(&Expr)) {
        if let Some(predicate) = &self.predicate {
            f(predicate);
        }
        for_each_expr(&self.body, f);
    }

    /// Calls `f` on every expression of the item, its predicate included,
    /// and then on its subexpressions (as `f` left them), to rewrite them.
    pub(crate) fn rewrite(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        self.predicate.iter_mut().for_each(|e| e.rewrite(f));
        for_each_expr_mut(&mut self.body, &mut |e| e.rewrite(f));
    }
}

impl Expr {
    /// Calls `f` on it and then on its subexpressions (as `f` left them),
    /// to rewrite them.
    pub(crate) fn rewrite(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        f(self);
        for child in self.children_mut() {
            child.rewrite(f);
        }
    }

    /// The integer `*self` reads: a pointer cast's (`*(int32 *)p`), else a
    /// `uint64`, as bpftrace reads through a plain integer.
    pub(crate) fn pointee(&self) -> UnOp {
        match self.kind {
            ExprKind::Unary(UnOp::Pointer { bits, signed }, _) => UnOp::Cast { bits, signed },
            _ => UnOp::Cast {
                bits: 64,
                signed: false,
            },
        }
    }

    /// Whether it may give an array of bytes: `pton()`, or a variable
    /// (which may hold one). Reading these has no side effect, so the
    /// checker and runtime may look at their value before indexing them.
    pub(crate) fn may_be_bytes(&self) -> bool {
        match &self.kind {
            ExprKind::Var(_) | ExprKind::Map(_) => true,
            ExprKind::Call(name, _) => name == "pton",
            // An element of an array of arrays held so (`$a[1][0]`).
            ExprKind::Deref(address) => {
                matches!(&address.kind, ExprKind::Binary(BinOp::Add, base, _) if base.may_be_bytes())
            }
            _ => false,
        }
    }

    /// Calls `f` on it and on everything in it.
    pub(crate) fn visit(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        for child in self.children() {
            child.visit(f);
        }
    }

    /// Its direct subexpressions.
    pub(crate) fn children(&self) -> Vec<&Expr> {
        match &self.kind {
            ExprKind::Map(map) => map.keys.iter().collect(),
            ExprKind::Unary(_, e)
            | ExprKind::Deref(e)
            | ExprKind::StructCast(_, e)
            | ExprKind::Member { base: e, .. }
            | ExprKind::Step { target: e, .. }
            | ExprKind::Element { tuple: e, .. } => vec![e],
            ExprKind::Binary(_, a, b) => vec![a, b],
            ExprKind::Ternary(a, b, c) => vec![a, b, c],
            ExprKind::Call(_, args) | ExprKind::Tuple(args) => args.iter().collect(),
            ExprKind::Int(_)
            | ExprKind::Str(_)
            | ExprKind::Builtin(_)
            | ExprKind::Field(_)
            | ExprKind::Arg(_)
            | ExprKind::Var(_)
            | ExprKind::Constant(_)
            | ExprKind::SizeOf(_) => Vec::new(),
        }
    }

    /// Its direct subexpressions, to rewrite: `sizeof(x)`'s `x` too,
    /// which is typed but never run (its names must still resolve).
    pub(crate) fn children_mut(&mut self) -> Vec<&mut Expr> {
        match &mut self.kind {
            ExprKind::Map(map) => map.keys.iter_mut().collect(),
            ExprKind::SizeOf(SizeOf::Expr(e))
            | ExprKind::Unary(_, e)
            | ExprKind::Deref(e)
            | ExprKind::StructCast(_, e)
            | ExprKind::Member { base: e, .. }
            | ExprKind::Step { target: e, .. }
            | ExprKind::Element { tuple: e, .. } => vec![e],
            ExprKind::Binary(_, a, b) => vec![a, b],
            ExprKind::Ternary(a, b, c) => vec![a, b, c],
            ExprKind::Call(_, args) | ExprKind::Tuple(args) => args.iter_mut().collect(),
            ExprKind::Int(_)
            | ExprKind::Str(_)
            | ExprKind::Builtin(_)
            | ExprKind::Field(_)
            | ExprKind::Arg(_)
            | ExprKind::Var(_)
            | ExprKind::Constant(_)
            | ExprKind::SizeOf(SizeOf::Type(_)) => Vec::new(),
        }
    }
}
