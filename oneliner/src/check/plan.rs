//! What checking a program yields: the maps and their kinds, and per
//! attach point the fields to copy and the predicate parts the kernel
//! tests. The runtime and the agent's loader read it; nothing here
//! inspects a program.

use crate::{
    ast::{BinOp, Program},
    error::Span,
    expand::Target,
    kernel::Field,
    value::Type,
};

/// What a map holds; fixed by its first assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    Count,
    Sum,
    Avg,
    Min,
    Max,
    Stats,
    Hist,
    Lhist {
        min: i64,
        max: i64,
        step: i64,
    },
    Percentiles,
    /// A plain value: `@start[tid] = nsecs`.
    Value(Type),
}

impl MapKind {
    pub(crate) fn describe(self) -> String {
        match self {
            Self::Value(t) => format!("{} value", t.name()),
            other => format!("{}()", other.function()),
        }
    }

    /// The function that makes an aggregation of this kind (`count`, ...).
    pub fn function(self) -> &'static str {
        match self {
            Self::Count => "count",
            Self::Sum => "sum",
            Self::Avg => "avg",
            Self::Min => "min",
            Self::Max => "max",
            Self::Stats => "stats",
            Self::Hist => "hist",
            Self::Lhist { .. } => "lhist",
            Self::Percentiles => "percentiles",
            Self::Value(_) => "",
        }
    }

    /// The type a lookup of the map yields, when it can be read in an expression.
    pub(crate) fn read_type(self) -> Option<Type> {
        match self {
            Self::Count | Self::Sum | Self::Min | Self::Max => Some(Type::Int),
            Self::Value(t) => Some(t),
            _ => None,
        }
    }
}

/// A checked map.
#[derive(Debug, Clone)]
pub struct MapInfo {
    pub name: String,
    pub kind: MapKind,
    pub keys: Vec<Type>,
    /// Its values print as unsigned 64-bit numbers, as bpftrace prints a
    /// map whose first assignment is unsigned (`@n = (uint64)-1`,
    /// `@bytes = sum(retval)` of a kretprobe).
    pub unsigned: bool,
    /// Which of its key parts are pointers by bpftrace's types (`curtask`,
    /// a pointer cast, a pointer member or field): printed in hex, as
    /// bpftrace prints them (`@[0xffff8881049c2e00]`).
    pub pointer_keys: Vec<bool>,
}

/// One concrete place a probe attaches, with what the kernel must do there.
#[derive(Debug, Clone)]
pub struct Attach {
    /// The program item whose actions run.
    pub item: usize,
    pub target: Target,
    /// Every field of the record.
    pub fields: Vec<Field>,
    /// Bytes of the context the kernel copies per event.
    pub raw_len: u16,
    /// Fields whose strings the kernel reads, in slot order.
    pub strings: Vec<Field>,
    /// Maps whose thread's saved pointer the kernel reads the string of,
    /// into the slots after the strings' ([`Self::save`]).
    pub saved: Vec<usize>,
    /// Kernel memory read into the slots after those (struct members).
    pub reads: Vec<Read>,
    /// Where each member expression's value is in [`Self::reads`].
    pub members: Vec<MemberRead>,
    /// How the bytes of members read whole (a struct, an array) are laid
    /// out, by [`MemberRead::layout`].
    pub layouts: Vec<Layout>,
    /// The pointer fields the kernel keeps for the thread (at most
    /// `MAX_SAVES`), each with the map it is saved in
    /// (`@filename[tid] = args.filename`).
    pub saves: Vec<(Field, usize)>,
    /// The pointer-array field whose strings `join()` prints.
    pub join: Option<Field>,
    /// The aggregation the kernel keeps itself, sending no events: the
    /// probe's only action (`kernel_agg.rs` says when).
    pub agg: Option<KernelAgg>,
    /// The start time the kernel stores or takes here for a later probe
    /// (`starts.rs` says when).
    pub start: Option<KeptStart>,
    /// Predicate parts the kernel tests before copying anything.
    pub filters: Vec<Filter>,
    /// `comm == "..."` tested in the kernel.
    pub comm: Option<String>,
    /// Whether the kernel records the kernel stack (`kstack`).
    pub kstack: bool,
    /// Whether the kernel records the user stack (`ustack`).
    pub ustack: bool,
    /// The signal `signal()` sends from the kernel at each event that
    /// passes the predicate (which the kernel tests in full).
    pub signal: Option<u8>,
    /// The function argument whose packets `skboutput()` writes.
    pub skb: Option<SkbOutput>,
    /// BEGIN, END or an interval whose actions read the kernel (struct
    /// members, `curtask`, `kstack`): a kernel program runs it, as
    /// bpftrace runs every probe, and delivers its event as any probe's.
    /// BEGIN and END run once in weft's thread (`BPF_PROG_TEST_RUN`),
    /// an interval on CPU 0's clock.
    pub kernel_run: bool,
    /// How the kernel hooks it.
    pub hook: Hook,
    /// The uprobe that has weft set the watchpoint of attach point N on
    /// the address its function's argument holds (`watch.rs`): it runs
    /// none of the item's actions.
    pub watch: Option<usize>,
}

/// The `struct sk_buff *` argument whose packet the kernel copies at an
/// fentry or fexit probe's event (`skboutput()`), and where its `len` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkbOutput {
    pub arg: u8,
    pub len_at: u16,
}

/// How the kernel hooks an attach point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Hook {
    /// As its target says (a tracepoint through its perf event).
    #[default]
    AsWritten,
    /// A `raw_syscalls` tracepoint as the raw tracepoint of its name, its
    /// fields then the raw context's (`raw_syscalls.rs`).
    Raw,
}

impl Attach {
    /// Item `index`'s attach point at `target`, with the record's `fields`,
    /// nothing yet asked of the kernel; with `raw`, hooked as a raw
    /// tracepoint where it can be (`raw_syscalls.rs`).
    pub(crate) fn new(
        index: usize,
        item: &crate::ast::Item,
        target: Target,
        fields: Vec<Field>,
        raw: bool,
    ) -> Self {
        let raw_fields = raw
            .then(|| crate::check::raw_syscalls::raw_fields(item, &target, &fields))
            .flatten();
        Self {
            item: index,
            target,
            hook: if raw_fields.is_some() {
                Hook::Raw
            } else {
                Hook::AsWritten
            },
            fields: raw_fields.unwrap_or(fields),
            raw_len: 0,
            strings: Vec::new(),
            saved: Vec::new(),
            reads: Vec::new(),
            members: Vec::new(),
            saves: Vec::new(),
            join: None,
            agg: None,
            start: None,
            filters: Vec::new(),
            comm: None,
            kstack: false,
            ustack: false,
            signal: None,
            skb: None,
            kernel_run: false,
            layouts: Vec::new(),
            watch: None,
        }
    }

    /// The field called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The string slot holding field `name`.
    pub fn string_slot(&self, name: &str) -> Option<usize> {
        self.strings.iter().position(|f| f.name == name)
    }

    /// String slots taken: strings, saved pointers' strings and reads.
    pub fn slots(&self) -> usize {
        self.strings.len() + self.saved.len() + self.reads.len()
    }

    /// The string slot of read `i`.
    pub fn read_slot(&self, i: usize) -> usize {
        self.strings.len() + self.saved.len() + i
    }

    /// The string slot holding the string of map `map`'s saved pointer.
    pub fn saved_slot(&self, map: usize) -> Option<usize> {
        let i = self.saved.iter().position(|m| *m == map)?;
        Some(self.strings.len() + i)
    }

    /// Where the member expression written at `span` is read.
    pub fn member(&self, span: Span) -> Option<&MemberRead> {
        self.members.iter().find(|m| m.span == span)
    }

    /// Whether the kernel delivers events for this attach point (BEGIN,
    /// END and intervals run in user space unless they read the kernel).
    pub fn in_kernel(&self) -> bool {
        self.kernel_run
            || !matches!(
                self.target,
                Target::Begin | Target::End | Target::Interval { .. }
            )
    }
}

/// Bytes the kernel reads at each event into a string slot: from
/// `start`, it follows the pointer at each of `hops` in turn, then reads
/// what `kind` says at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub start: Start,
    pub hops: Vec<u32>,
    pub at: u32,
    pub len: u32,
    pub kind: ReadKind,
}

/// What a [`Read`] copies at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadKind {
    /// `len` bytes.
    Bytes,
    /// The string there.
    String,
    /// The file path of the `struct path` there, as the kernel's
    /// `bpf_d_path` writes it (`path()`).
    Path,
}

impl std::fmt::Display for Read {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = self.at.cast_signed();
        match self.kind {
            ReadKind::Bytes => write!(f, "{} bytes at {at:+} of ", self.len)?,
            ReadKind::String => write!(f, "the string at {at:+} of ")?,
            ReadKind::Path => write!(f, "the path of the struct path at {at:+} of ")?,
        }
        for hop in self.hops.iter().rev() {
            write!(f, "the pointer at {:+} of ", hop.cast_signed())?;
        }
        f.write_str(match self.start {
            Start::Context => "the context",
            Start::Task => "curtask",
            Start::TaskAddress => "the address of curtask",
            Start::Address(address) => return write!(f, "address {address:#x}"),
            Start::Saved(map) => return write!(f, "the pointer kept for map {map}"),
        })
    }
}

/// Where a [`Read`] starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The probe's context: its record, registers or arguments.
    Context,
    /// The current task (`curtask`).
    Task,
    /// The current task's address, which the kernel copies rather than
    /// reads through (`curtask` as a value).
    TaskAddress,
    /// A fixed address (`kaddr("nr_cpu_ids")`, a cast constant).
    Address(u64),
    /// The pointer the kernel keeps for the thread for map [`Plan::maps`]
    /// index N (`((struct sock *)@sk[tid])->sk_state`; `saved.rs`).
    Saved(usize),
}

/// How the bytes of a struct or array read whole make its value, as
/// bpftrace prints one (`{ .m = 2, .n = [1,2] }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    Int {
        size: u16,
        signed: bool,
    },
    /// `width` bits from bit `shift`, not sign-extended (as bpftrace 0.17).
    Bits {
        shift: u8,
        width: u8,
    },
    /// `char[N]`: a string.
    Chars(u16),
    Array {
        element: Box<Layout>,
        stride: u32,
        count: u32,
    },
    /// Each member's name, offset and layout.
    Record(Vec<(String, u32, Layout)>),
}

impl Layout {
    /// The value `bytes` hold (a short read reads zeros).
    pub fn value(&self, bytes: &[u8]) -> crate::value::Value {
        use crate::value::Value;
        let at = |from: u32| bytes.get(from as usize..).unwrap_or_default();
        match self {
            Self::Int { size, signed } => Value::Int(crate::run::integer(bytes, 0, *size, *signed)),
            Self::Bits { shift, width } => {
                let raw =
                    crate::run::integer(bytes, 0, u16::from(shift + width).div_ceil(8), false);
                let up = 64 - u32::from(*width);
                Value::Int((raw.cast_unsigned() >> shift << up >> up).cast_signed())
            }
            Self::Chars(len) => {
                let text = &bytes[..bytes.len().min(usize::from(*len))];
                Value::Str(crate::value::c_string(text))
            }
            Self::Array {
                element,
                stride,
                count,
            } => Value::Array((0..*count).map(|i| element.value(at(i * stride))).collect()),
            Self::Record(members) => Value::Record(
                (members.iter())
                    .map(|(name, offset, layout)| (name.clone(), layout.value(at(*offset))))
                    .collect(),
            ),
        }
    }

    /// What a part of it is to the checker: an integer, a string, or
    /// (`None`) a struct or array.
    pub fn scalar(&self) -> Option<Type> {
        match self {
            Self::Int { .. } | Self::Bits { .. } => Some(Type::Int),
            Self::Chars(_) => Some(Type::Str),
            Self::Array { .. } | Self::Record(_) => None,
        }
    }

    /// The bytes it covers.
    pub fn size(&self) -> u32 {
        match self {
            Self::Int { size, .. } | Self::Chars(size) => u32::from(*size),
            Self::Bits { shift, width } => u32::from(shift + width).div_ceil(8),
            Self::Array { stride, count, .. } => stride * count,
            Self::Record(members) => (members.iter())
                .map(|(_, at, layout)| at + layout.size())
                .max()
                .unwrap_or(0),
        }
    }
}

/// A member expression's value: `size` bytes at `at` of a [`Read`] (the
/// read's own `at` is where its bytes start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberRead {
    pub span: Span,
    /// Index into [`Attach::reads`]; its slot follows the strings'.
    pub read: usize,
    pub at: u32,
    pub size: u16,
    pub signed: bool,
    /// A `char[N]` member: a string.
    pub chars: bool,
    /// A bit-field: its shift and width within the `size` bytes read.
    pub bits: Option<(u8, u8)>,
    /// A struct or array read whole: its layout in [`Attach::layouts`].
    pub layout: Option<u16>,
}

/// `@map[keys] = f(sample)` kept in the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelAgg {
    /// Index into [`Plan::maps`].
    pub map: usize,
    /// The map's kind, which says how the kernel files a sample.
    pub kind: MapKind,
    pub keys: Vec<KeyPart>,
    /// `count()` has none.
    pub sample: Option<Sample>,
}

/// What a probe does with a map of start times the kernel keeps
/// (`@start[tid] = nsecs`, then `nsecs - @start[tid]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeptStart {
    /// Stores the event's time in map `map` under `key`. The event is sent
    /// too only when `send`: the probe has other actions, or every event
    /// is kept.
    Store {
        map: usize,
        key: Subject,
        send: bool,
    },
    /// Takes the time stored under `key` into the event, where the probe
    /// reads it (`Builtin::KernelStart`); drops the event when there is
    /// none and `required`; deletes it when `delete`.
    Take {
        map: usize,
        key: Subject,
        required: bool,
        delete: bool,
    },
}

/// A part of an aggregation's key the kernel makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPart {
    Comm,
    Probe,
    Func,
    Int(Subject),
}

/// What an aggregation adds up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    Const(i64),
    Int(Subject),
    /// `(nsecs - @start[key]) / divisor` of a start the probe takes
    /// ([`KeptStart::Take`]); `divisor` > 0.
    Elapsed {
        divisor: i64,
    },
}

/// A predicate part the kernel tests: `subject op value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Filter {
    pub subject: Subject,
    pub op: BinOp,
    pub value: Operand,
}

impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.subject)?;
        let op = match self.op {
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            _ => ">=",
        };
        match self.value {
            Operand::Int(n) => write!(f, " {op} {n}"),
            Operand::Cpid => write!(f, " {op} cpid"),
        }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::Pid => f.write_str("pid"),
            Self::Tid => f.write_str("tid"),
            Self::Uid => f.write_str("uid"),
            Self::Cpu => f.write_str("cpu"),
            Self::Field {
                offset,
                size,
                signed,
            } => write!(
                f,
                "{} {size}-byte field at offset {offset}",
                if signed { "signed" } else { "unsigned" }
            ),
        }
    }
}

/// The constant side of a [`Filter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    Int(i64),
    /// The `-c` command's pid, known once it is started.
    Cpid,
}

/// An integer the kernel reads at the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    Pid,
    Tid,
    Uid,
    Cpu,
    /// An integer field of the context.
    Field {
        offset: u16,
        size: u16,
        signed: bool,
    },
}

/// A program ready to run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub program: Program,
    pub attaches: Vec<Attach>,
    pub maps: Vec<MapInfo>,
    /// The `print(x)` values that print as unsigned 64-bit numbers, by
    /// where `x` is: unsigned by bpftrace's types (`sign.rs`).
    pub unsigned_prints: std::collections::HashSet<crate::error::Span>,
    /// Bytes of each string slot the kernel fills (`BPFTRACE_STRLEN`
    /// rounded up, [`crate::limits::Limits::slot_len`]).
    pub string_len: usize,
    /// Pages of each CPU's buffer of `skboutput()`'s packets
    /// (`BPFTRACE_PERF_RB_PAGES`).
    pub packet_pages: usize,
}

impl Plan {
    /// Slots of `len` bytes (`BPFTRACE_STRLEN` rounded up, see
    /// [`crate::limits::Limits::slot_len`]): every read that fills its
    /// slot (a string, `buf()`) reads that much.
    pub fn set_string_len(&mut self, len: usize) {
        let default = weft_abi::oneliner::STRING_LEN;
        self.string_len = len;
        for attach in &mut self.attaches {
            for member in &mut attach.members {
                let read = &mut attach.reads[member.read];
                let whole = |at, size| at == 0 && size as usize == default;
                if whole(member.at, u32::from(member.size)) && whole(read.at, read.len) {
                    read.len = len as u32;
                    member.size = len as u16;
                }
            }
        }
    }

    pub fn map(&self, name: &str) -> Option<usize> {
        self.maps.iter().position(|m| m.name == name)
    }
}
