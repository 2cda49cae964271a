//! Which comparisons bpftrace 0.17 makes unsigned. Its `<`, `<=`, `>` and
//! `>=` compare signed only where both sides are signed, by its types:
//! `pid`, `tid`, `nsecs`, `cpu` and the like, `argN`, a kprobe's `retval`,
//! an unsigned field or member and an unsigned cast are unsigned; literals and signed
//! fields signed; arithmetic signed where both sides are (a shift where its
//! left side is). So `kretprobe:f /retval < 0/` never holds there, and
//! `pid > -1` neither.
//!
//! Where the two orders can differ (a side may be negative or 2^63 and
//! more), an unsigned comparison is rewritten to compare both sides with
//! their top bit flipped, which orders them as unsigned numbers are
//! ordered. Elsewhere nothing changes: `pid > 100` compares alike either
//! way and is still tested in the kernel.

use std::collections::HashMap;

use crate::{
    ast::{BinOp, Builtin, Expr, ExprKind, Item, Stmt, UnOp},
    error::Span,
    expand::Target,
    kernel::{Field, Kernel, KernelType},
};

/// What bpftrace's type says of an integer, and what is known of its
/// values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sign {
    signed: bool,
    /// Never negative, and below 2^63: signed and unsigned order agree.
    small: bool,
}

const SIGNED: Sign = Sign {
    signed: true,
    small: false,
};
const UNSIGNED: Sign = Sign {
    signed: false,
    small: false,
};
const UNSIGNED_SMALL: Sign = Sign {
    signed: false,
    small: true,
};

/// What [`compare_as_bpftrace`] found unsigned besides comparisons.
#[derive(Default)]
pub(crate) struct Unsigned {
    /// The maps an item assigns, in order, each with whether the value
    /// assigned is unsigned (a `sum()` or `max()` by its sample's).
    pub maps: Vec<(String, bool)>,
    /// Where the values of its `print(x)` that are unsigned are.
    pub prints: Vec<Span>,
}

/// Rewrites `item`'s unsigned comparisons (see the module's comment), its
/// fields those of `target`'s record; says which maps and printed values
/// are unsigned.
pub(crate) fn compare_as_bpftrace(
    item: &mut Item,
    kernel: &dyn Kernel,
    target: &Target,
    fields: &[Field],
) -> Unsigned {
    let mut signs = Signs {
        kernel,
        target,
        fields,
        vars: HashMap::new(),
        records: HashMap::new(),
        found: Unsigned::default(),
    };
    if let Some(predicate) = &mut item.predicate {
        signs.rewrite(predicate);
    }
    signs.stmts(&mut item.body);
    signs.found
}

struct Signs<'a> {
    kernel: &'a dyn Kernel,
    target: &'a Target,
    fields: &'a [Field],
    /// Each variable's sign, from its first assignment.
    vars: HashMap<String, Sign>,
    /// The struct each variable holding a struct pointer points to.
    records: HashMap<String, u32>,
    found: Unsigned,
}

impl Signs<'_> {
    fn stmts(&mut self, stmts: &mut [Stmt]) {
        for stmt in stmts {
            match stmt {
                Stmt::VarAssign { name, value, .. } => {
                    self.rewrite(value);
                    let sign = self.sign(value);
                    self.vars.entry(name.clone()).or_insert(sign);
                    if let Some(record) = self.pointee(value) {
                        self.records.entry(name.clone()).or_insert(record);
                    }
                }
                Stmt::MapAssign { map, value } => {
                    map.keys.iter_mut().for_each(|k| self.rewrite(k));
                    self.rewrite(value);
                    let sample = match &value.kind {
                        ExprKind::Call(name, args) if matches!(name.as_str(), "sum" | "max") => {
                            args.first()
                        }
                        ExprKind::Call(..) => None,
                        _ => Some(&*value),
                    };
                    if let Some(sample) = sample {
                        // A pointer compares unsigned, but a map holding one
                        // prints signed in bpftrace 0.17.
                        let unsigned = !self.sign(sample).signed
                            && !matches!(sample.kind, ExprKind::Builtin(Builtin::Curtask));
                        self.found.maps.push((map.name.clone(), unsigned));
                    }
                }
                Stmt::MapUpdate { map, value, .. } => {
                    map.keys.iter_mut().for_each(|k| self.rewrite(k));
                    self.rewrite(value);
                }
                Stmt::Expr(value) => {
                    self.rewrite(value);
                    if let ExprKind::Call(name, args) = &value.kind
                        && name == "print"
                        && let [printed] = args.as_slice()
                        && !matches!(printed.kind, ExprKind::Map(_))
                        && !self.sign(printed).signed
                    {
                        self.found.prints.push(printed.span);
                    }
                }
                Stmt::VarUpdate { value, .. } => self.rewrite(value),
                Stmt::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    self.rewrite(cond);
                    self.stmts(then);
                    self.stmts(otherwise);
                }
                Stmt::While { cond, body } => {
                    self.rewrite(cond);
                    self.stmts(body);
                }
                Stmt::Break | Stmt::Continue => {}
            }
        }
    }

    /// Rewrites the unsigned comparisons in `expr` and below.
    fn rewrite(&self, expr: &mut Expr) {
        for child in expr.children_mut() {
            self.rewrite(child);
        }
        let ExprKind::Binary(BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge, left, right) =
            &mut expr.kind
        else {
            return;
        };
        let (l, r) = (self.sign(left), self.sign(right));
        if (l.signed && r.signed) || (l.small && r.small) {
            return;
        }
        let flipped = |side: &mut Box<Expr>| {
            let span = side.span;
            let top = Expr {
                kind: ExprKind::Int(i64::MIN),
                span,
            };
            let inner = std::mem::replace(
                side.as_mut(),
                Expr {
                    kind: ExprKind::Int(0),
                    span,
                },
            );
            **side = Expr {
                kind: ExprKind::Binary(BinOp::Xor, Box::new(inner), Box::new(top)),
                span,
            };
        };
        flipped(left);
        flipped(right);
    }

    /// `expr`'s sign as bpftrace types it.
    fn sign(&self, expr: &Expr) -> Sign {
        match &expr.kind {
            ExprKind::Int(n) => Sign {
                signed: true,
                small: *n >= 0,
            },
            ExprKind::Builtin(builtin) => self.builtin(*builtin),
            ExprKind::Field(name) => self.field(name),
            ExprKind::Arg(n) => match self.target {
                Target::Usdt { .. } => self.field(&format!("arg{n}")),
                _ => UNSIGNED,
            },
            ExprKind::Unary(UnOp::Cast { bits, signed }, _) => Sign {
                signed: *signed,
                small: !*signed && *bits < 64,
            },
            ExprKind::Unary(UnOp::Not, _) | ExprKind::SizeOf(_) => UNSIGNED_SMALL,
            ExprKind::Unary(_, operand) => Sign {
                small: false,
                ..self.sign(operand)
            },
            ExprKind::Binary(op, left, right) => {
                let (l, r) = (self.sign(left), self.sign(right));
                match op {
                    BinOp::Shl | BinOp::Shr => Sign { small: false, ..l },
                    _ if op.is_comparison()
                        || matches!(op, BinOp::LogicalAnd | BinOp::LogicalOr) =>
                    {
                        Sign {
                            signed: l.signed && r.signed,
                            small: true,
                        }
                    }
                    _ => Sign {
                        signed: l.signed && r.signed,
                        small: false,
                    },
                }
            }
            ExprKind::Var(name) => self.vars.get(name).copied().unwrap_or(SIGNED),
            ExprKind::Member { .. } => match self.member(expr) {
                // As an unsigned field (below): taken to be below 2^63.
                Some(
                    KernelType::Int { signed: false, .. } | KernelType::Bits { signed: false, .. },
                ) => UNSIGNED_SMALL,
                Some(KernelType::Pointer(_)) => UNSIGNED,
                _ => SIGNED,
            },
            ExprKind::Ternary(_, then, otherwise) => {
                let (a, b) = (self.sign(then), self.sign(otherwise));
                Sign {
                    signed: a.signed && b.signed,
                    small: a.small && b.small,
                }
            }
            _ => SIGNED,
        }
    }

    fn builtin(&self, builtin: Builtin) -> Sign {
        match builtin {
            Builtin::Retval => match self.target {
                Target::Kprobe { .. } | Target::Uprobe { .. } => UNSIGNED,
                _ => self.field("retval"),
            },
            // Ids, CPUs, times since boot: unsigned, never near 2^63.
            Builtin::Pid
            | Builtin::Tid
            | Builtin::Uid
            | Builtin::Gid
            | Builtin::Cpu
            | Builtin::Nsecs
            | Builtin::Elapsed
            | Builtin::Rand
            | Builtin::Numaid
            | Builtin::Cpid => UNSIGNED_SMALL,
            // A kernel address: 2^63 and more.
            Builtin::Curtask => UNSIGNED,
            _ => SIGNED,
        }
    }

    /// A field's sign. An unsigned field is taken to be below 2^63: sizes,
    /// counts, flags and user addresses are, and only a kernel address is
    /// not, which no one orders with `<`; so `args->count > 4096` keeps
    /// being tested in the kernel.
    fn field(&self, name: &str) -> Sign {
        match self.fields.iter().find(|f| f.name == name) {
            Some(field) if field.signed => SIGNED,
            Some(_) => UNSIGNED_SMALL,
            None => SIGNED,
        }
    }
}

/// Members' types, for their signs: bpftrace compares an unsigned member
/// unsigned (`$a = ((struct x *)0)->u64; $a > -1` is 0).
impl Signs<'_> {
    /// The type of member expression `expr`, where it can be told.
    fn member(&self, expr: &Expr) -> Option<KernelType> {
        let ExprKind::Member { base, name, arrow } = &expr.kind else {
            return None;
        };
        let record = if *arrow {
            self.pointee(base)?
        } else {
            match &base.kind {
                ExprKind::Deref(pointer) => self.pointee(pointer)?,
                _ => match self.member(base)? {
                    KernelType::Record(record) => record,
                    _ => return None,
                },
            }
        };
        Some(self.kernel.member(record, name).ok()?.ty)
    }

    /// The struct pointer `expr` points to, where it can be told.
    fn pointee(&self, expr: &Expr) -> Option<u32> {
        match &expr.kind {
            ExprKind::StructCast(name, _) => self.kernel.record(name).ok(),
            ExprKind::Builtin(Builtin::Curtask) => self.kernel.record("struct task_struct").ok(),
            ExprKind::Var(name) => self.records.get(name).copied(),
            ExprKind::Field(name) => {
                let field = self.fields.iter().find(|f| f.name == *name)?;
                self.kernel.record(field.pointee.as_deref()?).ok()
            }
            ExprKind::Member { .. } => match self.member(expr)? {
                KernelType::Pointer(record) => record,
                _ => None,
            },
            _ => None,
        }
    }
}
