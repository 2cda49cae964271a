//! Kernel struct members (`$task->real_parent->pid`, `args->rqtp->tv_sec`,
//! `((struct sock *)arg0)->__sk_common.skc_family`): where each one is, as
//! a chain of pointers the kernel follows at the event, from the kernel's
//! BTF. The kernel reads the bytes into a string slot of the record
//! ([`Read`]); the runtime takes the member from there ([`MemberRead`]).

use std::collections::HashMap;

use weft_abi::oneliner::{MAX_HOPS, MAX_STRINGS, STRING_LEN};

use crate::{
    Target,
    ast::{BinOp, Builtin, Expr, ExprKind, MapRef, UnOp},
    error::{Error, Result, Span},
    kernel::{Element, Field, FieldKind, Kernel, KernelType},
    plan::{Attach, Layout, MemberRead, Read, ReadKind, Start},
    value::Type,
};

/// A kernel pointer the kernel can follow: the address is `start`'s,
/// then the pointer at each of `hops` in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pointer {
    pub start: Start,
    pub hops: Vec<u32>,
    /// The struct or union it points to.
    pub record: u32,
}

/// The kernel type of member expression `expr` at `attach`, read nowhere
/// (for `sizeof`).
pub(crate) fn member_type(
    kernel: &dyn Kernel,
    attach: &Attach,
    bound: &Bound,
    expr: &Expr,
) -> Result<KernelType> {
    Ok(place(kernel, attach, bound, expr)?.ty)
}

/// Where a member is: `at` bytes past the address a [`Pointer`] names.
struct Place {
    start: Start,
    hops: Vec<u32>,
    at: u32,
    ty: KernelType,
}

impl Place {
    /// Where the address this place holds leads: its pointer followed.
    fn followed(self) -> (Start, Vec<u32>) {
        let mut hops = self.hops;
        hops.push(self.at);
        (self.start, hops)
    }
}

/// The struct pointers a probe's statements hold, per attach point: in
/// `$variables`, and in maps whose pointers the kernel keeps per thread
/// (`saved.rs`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Bound {
    vars: HashMap<String, Pointer>,
    /// Each such map's index in the plan's maps, and the struct its
    /// assignment casts to, if it does.
    kept: HashMap<String, (usize, Option<u32>)>,
}

impl Bound {
    /// Bound to the maps `kept` names, none of the variables.
    pub fn new(kept: HashMap<String, (usize, Option<u32>)>) -> Bound {
        Bound {
            vars: HashMap::new(),
            kept,
        }
    }

    pub fn get(&self, var: &str) -> Option<&Pointer> {
        self.vars.get(var)
    }

    pub fn contains_key(&self, var: &str) -> bool {
        self.vars.contains_key(var)
    }

    pub fn insert(&mut self, var: String, pointer: Pointer) {
        self.vars.insert(var, pointer);
    }

    pub fn remove(&mut self, var: &str) {
        self.vars.remove(var);
    }

    /// The kernel's start for the pointer `@map[tid]` holds, and its
    /// struct where known, when the kernel keeps it.
    fn kept(&self, map: &MapRef) -> Option<(Start, Option<u32>)> {
        let (index, record) = self.kept.get(&map.name)?;
        (!map.keys.is_empty()).then_some((Start::Saved(*index), *record))
    }
}

/// The pointer `expr` is, at `attach`.
pub(crate) fn pointer(
    kernel: &dyn Kernel,
    attach: &Attach,
    bound: &Bound,
    expr: &Expr,
) -> Result<Pointer> {
    let span = expr.span;
    let not_pointer = || {
        Error::new(
            span,
            "not a pointer to a kernel struct: cast it, as in `(struct sock *)arg0`",
        )
    };
    match &expr.kind {
        ExprKind::StructCast(name, inner) => {
            let record = kernel.record(name).map_err(|e| Error::new(span, e))?;
            let (start, hops) = address_of(kernel, attach, bound, inner)?;
            Ok(Pointer {
                start,
                hops,
                record,
            })
        }
        ExprKind::Builtin(Builtin::Curtask) => Ok(Pointer {
            start: Start::Task,
            hops: Vec::new(),
            record: kernel
                .record("struct task_struct")
                .map_err(|e| Error::new(span, e))?,
        }),
        ExprKind::Var(name) => bound.get(name).cloned().ok_or_else(not_pointer),
        ExprKind::Map(map) => match bound.kept(map) {
            Some((start, Some(record))) => Ok(Pointer {
                start,
                hops: Vec::new(),
                record,
            }),
            _ => Err(not_pointer()),
        },
        ExprKind::Field(name) => {
            let field = attach.field(name).ok_or_else(|| {
                let names: Vec<&str> = attach.fields.iter().map(|f| f.name.as_str()).collect();
                Error::new(
                    span,
                    format!(
                        "{} has no field `{name}`: it has {}",
                        attach.target.name(),
                        names.join(", ")
                    ),
                )
            })?;
            let pointee = field.pointee.as_deref().ok_or_else(not_pointer)?;
            Ok(Pointer {
                start: Start::Context,
                hops: vec![u32::from(field.offset)],
                record: kernel.record(pointee).map_err(|e| Error::new(span, e))?,
            })
        }
        ExprKind::Member { .. } | ExprKind::Deref(_) => {
            let place = match &expr.kind {
                ExprKind::Deref(address) => {
                    element(kernel, attach, bound, address)?.ok_or_else(not_pointer)?
                }
                _ => place(kernel, attach, bound, expr)?,
            };
            let KernelType::Pointer(Some(record)) = place.ty else {
                return Err(not_pointer());
            };
            let (start, hops) = place.followed();
            Ok(Pointer {
                start,
                hops,
                record,
            })
        }
        _ => Err(not_pointer()),
    }
}

/// Where `*address` is when it is an element of an array member at a
/// constant index (`$task->signal->rlim[7]` is `*(rlim + 7)`).
fn element(
    kernel: &dyn Kernel,
    attach: &Attach,
    bound: &Bound,
    address: &Expr,
) -> Result<Option<Place>> {
    let (array, index) = match &address.kind {
        ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), array, index) => match offset(index) {
            Some(i) if *op == BinOp::Add => (&**array, i),
            Some(i) => (&**array, i.wrapping_neg()),
            None => return Ok(None),
        },
        _ => (address, 0),
    };
    let outer = match &array.kind {
        ExprKind::Member { .. } => place(kernel, attach, bound, array)?,
        // A row of an array of arrays (`a[1]` in `a[1][2]`).
        ExprKind::Deref(address) => match element(kernel, attach, bound, address)? {
            Some(row) => row,
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let Some((element, stride, count)) = indexed(outer.ty) else {
        return Ok(None);
    };
    let at = u32::try_from(index)
        .ok()
        .filter(|i| *i < count)
        .and_then(|i| outer.at.checked_add(i.checked_mul(stride)?))
        .ok_or_else(|| {
            Error::new(
                address.span,
                format!("the index {index} is out of bounds for array of size {count}"),
            )
        })?;
    Ok(Some(Place {
        start: outer.start,
        hops: outer.hops,
        at,
        ty: element.ty(),
    }))
}

/// Where the address an integer expression holds is, for a cast:
/// curtask, a field, `argN`, `retval`, a variable holding a pointer, or a
/// member.
fn address_of(
    kernel: &dyn Kernel,
    attach: &Attach,
    bound: &Bound,
    expr: &Expr,
) -> Result<(Start, Vec<u32>)> {
    let slot = |name: &str| {
        attach
            .field(name)
            .filter(|f| f.size == 8 && matches!(f.kind, FieldKind::Int | FieldKind::Pointer { .. }))
            .map(|f| (Start::Context, vec![u32::from(f.offset)]))
    };
    let found = match &expr.kind {
        ExprKind::Builtin(Builtin::Curtask) => Some((Start::Task, Vec::new())),
        ExprKind::Field(name) => slot(name),
        ExprKind::Arg(n) => slot(&format!("arg{n}")),
        ExprKind::Builtin(Builtin::Retval) => slot("retval"),
        // A fixed address: `kaddr("nr_cpu_ids")`, a cast constant.
        ExprKind::Int(address) => Some((Start::Address(address.cast_unsigned()), Vec::new())),
        ExprKind::Call(name, args) if name == "reg" => {
            if !matches!(
                attach.target,
                Target::Kprobe { .. } | Target::Uprobe { .. } | Target::Usdt { .. }
            ) {
                return Err(Error::new(
                    expr.span,
                    format!(
                        "reg() and sargN read the registers of kprobes, uprobes and USDT probes, not of {}",
                        attach.target.name()
                    ),
                ));
            }
            register_slot(args)
        }
        ExprKind::Var(_) | ExprKind::StructCast(..) => {
            let p = pointer(kernel, attach, bound, expr)?;
            Some((p.start, p.hops))
        }
        ExprKind::Map(map) => bound.kept(map).map(|(start, _)| (start, Vec::new())),
        ExprKind::Member { .. } => {
            let place = place(kernel, attach, bound, expr)?;
            matches!(
                place.ty,
                KernelType::Pointer(_) | KernelType::Int { size: 8, .. }
            )
            .then(|| place.followed())
        }
        _ => None,
    };
    found.ok_or_else(|| {
        Error::new(
            expr.span,
            "weft follows pointers from curtask, an 8-byte field, argN, retval, reg(), a fixed address, a member, a variable holding one of those or a map keyed by [tid] saving an argument or field",
        )
    })
}

/// The offset of the 8-byte slot of the probe's context whose value
/// `expr` is (an argument, a field, or a cast or variable holding one).
pub(crate) fn context_slot(
    kernel: &dyn Kernel,
    attach: &Attach,
    bound: &Bound,
    expr: &Expr,
) -> Option<u32> {
    match address_of(kernel, attach, bound, expr).ok()? {
        (Start::Context, hops) if hops.len() == 1 => Some(hops[0]),
        _ => None,
    }
}

/// Where `reg("NAME")`'s register is, in a probe whose context is the
/// registers (`struct pt_regs`).
fn register_slot(args: &[Expr]) -> Option<(Start, Vec<u32>)> {
    let [
        Expr {
            kind: ExprKind::Str(name),
            ..
        },
    ] = args
    else {
        return None;
    };
    let field = crate::expand::register_field(name)?;
    Some((Start::Context, vec![u32::from(field.offset)]))
}

/// Where member expression `expr` is.
fn place(kernel: &dyn Kernel, attach: &Attach, bound: &Bound, expr: &Expr) -> Result<Place> {
    let ExprKind::Member { base, arrow, .. } = &expr.kind else {
        unreachable!("places are members")
    };
    let (start, hops, at, record) = if *arrow {
        pointed(kernel, attach, bound, base)?
    } else {
        let outer = match &base.kind {
            ExprKind::Member { .. } => Some(place(kernel, attach, bound, base)?),
            ExprKind::Deref(address) => match element(kernel, attach, bound, address)? {
                Some(element) => Some(element),
                // `(*p).m`, `p[2].m` of a struct pointer.
                None => return at_member(kernel, pointed(kernel, attach, bound, address)?, expr),
            },
            _ => None,
        }
        .ok_or_else(|| {
            Error::new(
                base.span,
                "`.` reads a member of a struct member or array element: use `->` through a pointer",
            )
        })?;
        let KernelType::Record(record) = outer.ty else {
            return Err(Error::new(
                base.span,
                "not a struct or union: `.` needs one",
            ));
        };
        (outer.start, outer.hops, outer.at, record)
    };
    at_member(kernel, (start, hops, at, record), expr)
}

/// Where member `expr` (`.name`, `->name`) of the struct `record` at
/// `at` bytes past the address `start` and `hops` lead to is.
fn at_member(
    kernel: &dyn Kernel,
    (start, hops, at, record): (Start, Vec<u32>, u32, u32),
    expr: &Expr,
) -> Result<Place> {
    let ExprKind::Member { name, .. } = &expr.kind else {
        unreachable!("places are members")
    };
    let member = kernel
        .member(record, name)
        .map_err(|e| Error::new(expr.span, e))?;
    Ok(Place {
        start,
        hops,
        at: at + member.offset,
        ty: member.ty,
    })
}

/// Where struct pointer `expr` points: its start, hops, the bytes past
/// the address they lead to, and its struct. Moved by a constant, it
/// moves by whole structs, as bpftrace moves it (`($p + 1)->m`, `$p[2].m`).
fn pointed(
    kernel: &dyn Kernel,
    attach: &Attach,
    bound: &Bound,
    expr: &Expr,
) -> Result<(Start, Vec<u32>, u32, u32)> {
    if let ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), base, n) = &expr.kind
        && let Some(n) = offset(n)
    {
        let p = pointer(kernel, attach, bound, base)?;
        let size = i64::from(kernel.record_size(p.record));
        let by = match op {
            BinOp::Add => n.checked_mul(size),
            _ => n.checked_mul(size).and_then(i64::checked_neg),
        };
        let at = by.and_then(|b| u32::try_from(b).ok()).ok_or_else(|| {
            Error::new(
                expr.span,
                "weft reads the structs at and after a pointer, not before it",
            )
        })?;
        return Ok((p.start, p.hops, at, p.record));
    }
    let p = pointer(kernel, attach, bound, expr)?;
    Ok((p.start, p.hops, 0, p.record))
}

/// Checks member expression `expr` at `attach` and notes what the kernel
/// reads for it.
pub(crate) fn read(
    kernel: &dyn Kernel,
    attach: &mut Attach,
    bound: &Bound,
    expr: &Expr,
) -> Result<Type> {
    let place = place(kernel, attach, bound, expr)?;
    read_place(kernel, attach, &place, expr.span)
}

/// Notes what the kernel reads for member `expr`, found at `place`.
fn read_place(kernel: &dyn Kernel, attach: &mut Attach, place: &Place, span: Span) -> Result<Type> {
    let mut bits = None;
    let mut layout = None;
    let (size, signed, ty) = match place.ty {
        KernelType::Int { size, signed } if size <= 8 => (size, signed, Type::Int),
        KernelType::Bits {
            shift,
            width,
            signed,
        } => {
            // The bytes that hold it; the runtime shifts and masks.
            bits = Some((shift, width));
            (u16::from(shift + width).div_ceil(8), signed, Type::Int)
        }
        KernelType::Pointer(_) => (8, false, Type::Int),
        KernelType::Chars(n) => (n.clamp(1, STRING_LEN as u16), false, Type::Str),
        // Read whole, as bpftrace reads a struct or array value.
        KernelType::Record(_) | KernelType::Array { .. } => {
            // Its size first: a large struct says so, whatever it holds.
            let size = match place.ty {
                KernelType::Record(id) => kernel.record_size(id),
                KernelType::Array { stride, count, .. } => stride.saturating_mul(count),
                _ => 0,
            };
            let size = u16::try_from(size)
                .ok()
                .filter(|size| usize::from(*size) <= STRING_LEN)
                .ok_or_else(|| {
                    let what = match place.ty {
                        KernelType::Record(id) => kernel.record_name(id),
                        _ => "array".into(),
                    };
                    Error::new(
                        span,
                        format!(
                            "this is a {what} of {size} bytes: weft reads one whole up to \
                             {STRING_LEN} bytes, so read one of its members"
                        ),
                    )
                })?;
            let laid = whole(kernel, place.ty).map_err(|e| Error::new(span, e))?;
            layout = Some(u16::try_from(attach.layouts.len()).unwrap_or(u16::MAX));
            attach.layouts.push(laid);
            (size, false, COMPOSITE)
        }
        _ => {
            return Err(Error::new(
                span,
                "weft reads integers, pointers and char arrays of kernel structs",
            ));
        }
    };
    within_reach(&place.hops, span)?;
    let read = slot(attach, place, u32::from(size)).ok_or_else(|| no_room_at(span))?;
    attach.members.push(MemberRead {
        span,
        read,
        at: place.at,
        size,
        signed,
        chars: ty == Type::Str,
        bits,
        layout,
    });
    Ok(ty)
}

/// The type [`read`] gives a struct or array read whole, which the
/// checker numbers by its layout.
pub(crate) const COMPOSITE: Type = Type::Composite(u16::MAX);

/// How the bytes of a value of kernel type `ty` make its value.
fn whole(kernel: &dyn Kernel, ty: KernelType) -> std::result::Result<Layout, String> {
    Ok(match ty {
        KernelType::Int { size, signed } if size <= 8 => Layout::Int { size, signed },
        KernelType::Bits { shift, width, .. } => Layout::Bits { shift, width },
        KernelType::Pointer(_) => Layout::Int {
            size: 8,
            signed: false,
        },
        KernelType::Chars(n) => Layout::Chars(n),
        KernelType::Array {
            element,
            stride,
            count,
        } => Layout::Array {
            element: Box::new(whole(kernel, element.ty())?),
            stride,
            count,
        },
        KernelType::Record(id) => {
            // (An empty struct, a configured-out one, is `{  }`.)
            let names = kernel.member_names(id);
            let mut members = Vec::with_capacity(names.len());
            for name in names {
                let member = kernel.member(id, &name)?;
                members.push((name, member.offset, whole(kernel, member.ty)?));
            }
            Layout::Record(members)
        }
        _ => {
            return Err(
                "weft reads integers, pointers, strings, structs and arrays of them".into(),
            );
        }
    })
}

/// `curtask` as a value, at `span`: the kernel copies its address into a
/// slot.
pub(crate) fn read_task_address(attach: &mut Attach, span: Span) -> Result<()> {
    let place = Place {
        start: Start::TaskAddress,
        hops: Vec::new(),
        at: 0,
        ty: KernelType::Pointer(None),
    };
    let read = slot(attach, &place, 8).ok_or_else(|| no_room_at(span))?;
    attach.members.push(MemberRead {
        span,
        read,
        at: 0,
        size: 8,
        signed: false,
        chars: false,
        bits: None,
        layout: None,
    });
    Ok(())
}

/// `str()` of member expression `expr` at `attach`: a `char[N]` member,
/// or the string a `char *` member points to, which the kernel reads.
pub(crate) fn read_string(
    kernel: &dyn Kernel,
    attach: &mut Attach,
    bound: &Bound,
    expr: &Expr,
) -> Result<Type> {
    read_pointed(kernel, attach, bound, expr, true)
}

/// `buf()` of member expression `expr`: the first bytes its pointer
/// points to (or of its array), NULs and all.
pub(crate) fn read_bytes(
    kernel: &dyn Kernel,
    attach: &mut Attach,
    bound: &Bound,
    expr: &Expr,
) -> Result<Type> {
    read_pointed(kernel, attach, bound, expr, false)
}

/// `buf()` of field `name` (`args.buf`, `arg1`), `expr`: the first bytes
/// the pointer it holds points to, which the kernel reads at the event.
pub(crate) fn read_field_bytes(attach: &mut Attach, name: &str, expr: &Expr) -> Result<()> {
    let field = attach
        .field(name)
        .filter(|f| f.size == 8 && matches!(f.kind, FieldKind::Int | FieldKind::Pointer { .. }))
        .ok_or_else(|| {
            Error::new(
                expr.span,
                format!(
                    "buf() reads where a pointer points: {} has no 8-byte pointer `{name}`",
                    attach.target.name()
                ),
            )
        })?;
    let hops = vec![u32::from(field.offset)];
    read_slot(attach, Start::Context, hops, 0, expr, ReadKind::Bytes)
}

/// What member `expr` points to, as a string or as bytes.
fn read_pointed(
    kernel: &dyn Kernel,
    attach: &mut Attach,
    bound: &Bound,
    expr: &Expr,
    string: bool,
) -> Result<Type> {
    let place = place(kernel, attach, bound, expr)?;
    match place.ty {
        KernelType::Chars(_) => return read_place(kernel, attach, &place, expr.span),
        // buf() of an array of integers: its bytes, where it lies.
        KernelType::Array { stride, count, .. } if !string => {
            let len = u16::try_from(stride.saturating_mul(count))
                .ok()
                .filter(|len| usize::from(*len) <= STRING_LEN)
                .ok_or_else(|| {
                    Error::new(
                        expr.span,
                        format!(
                            "buf() reads at most {STRING_LEN} bytes of an array: give a length"
                        ),
                    )
                })?;
            read_slot(
                attach,
                place.start,
                place.hops,
                place.at,
                expr,
                ReadKind::Bytes,
            )?;
            if let (Some(read), Some(member)) = (attach.reads.last_mut(), attach.members.last_mut())
            {
                (read.len, member.size) = (u32::from(len), len);
            }
            return Ok(Type::Str);
        }
        // An address in an `unsigned long` too (`pt_regs`), as bpftrace reads it.
        KernelType::Pointer(_) | KernelType::Int { size: 8, .. } => {}
        _ => {
            return Err(Error::new(
                expr.span,
                if string {
                    "str() reads a char array, or the string a pointer or address member points to"
                } else {
                    "buf() reads an array, or the bytes a pointer or address member points to"
                },
            ));
        }
    }
    let (start, hops) = place.followed();
    within_reach(&hops, expr.span)?;
    let kind = if string {
        ReadKind::String
    } else {
        ReadKind::Bytes
    };
    read_slot(attach, start, hops, 0, expr, kind)?;
    Ok(Type::Str)
}

/// A slot of its own for what the last of `hops` points to: the string
/// or path there, or its first bytes, as `expr` gives them.
fn read_slot(
    attach: &mut Attach,
    start: Start,
    hops: Vec<u32>,
    at: u32,
    expr: &Expr,
    kind: ReadKind,
) -> Result<()> {
    if attach.slots() >= MAX_STRINGS {
        return Err(no_room(expr));
    }
    attach.reads.push(Read {
        start,
        hops,
        at,
        len: STRING_LEN as u32,
        kind,
    });
    attach.members.push(MemberRead {
        span: expr.span,
        read: attach.reads.len() - 1,
        at,
        size: STRING_LEN as u16,
        signed: false,
        chars: kind != ReadKind::Bytes,
        bits: None,
        layout: None,
    });
    Ok(())
}

/// `path()` of `expr` at `attach`: a `struct path`, or a pointer to one,
/// whose file path the kernel's `bpf_d_path` writes into a slot at the
/// event. That helper takes only a pointer the verifier typed itself: a
/// function's argument, or a struct inside what the argument points to
/// (`path(args->path)`, `path(args->file->f_path)`), nothing read from
/// memory on the way, as bpftrace's kfunc probes take it.
pub(crate) fn read_path(
    kernel: &dyn Kernel,
    attach: &mut Attach,
    bound: &Bound,
    expr: &Expr,
) -> Result<()> {
    let record = kernel
        .record("struct path")
        .map_err(|e| Error::new(expr.span, e))?;
    let place = match &expr.kind {
        ExprKind::Member { .. } => Some(place(kernel, attach, bound, expr)?),
        _ => None,
    };
    let (start, hops, at) = match place {
        Some(Place {
            ty: KernelType::Record(id),
            start,
            hops,
            at,
        }) if id == record => (start, hops, at),
        _ => {
            let pointer = pointer(kernel, attach, bound, expr)
                .ok()
                .filter(|p| p.record == record)
                .ok_or_else(|| {
                    Error::new(
                        expr.span,
                        "path() takes a struct path or a pointer to one: path(args->path), \
                         path(args->file->f_path)",
                    )
                })?;
            (pointer.start, pointer.hops, 0)
        }
    };
    if start != Start::Context || hops.len() != 1 {
        return Err(Error::new(
            expr.span,
            "path() takes a function's argument or a struct path inside what it points to \
             (path(args->path), path(args->file->f_path)): the kernel's bpf_d_path refuses a \
             pointer read from memory",
        ));
    }
    read_slot(attach, start, hops, at, expr, ReadKind::Path)
}

/// Whether the kernel follows as many pointers as `expr` needs.
fn within_reach(hops: &[u32], span: Span) -> Result<()> {
    if hops.len() > MAX_HOPS {
        return Err(Error::new(
            span,
            format!("the kernel follows at most {MAX_HOPS} pointers to a member"),
        ));
    }
    Ok(())
}

/// The error for a member `expr` without a free string slot.
fn no_room(expr: &Expr) -> Error {
    no_room_at(expr.span)
}

fn no_room_at(span: Span) -> Error {
    Error::new(
        span,
        format!("a probe can read at most {MAX_STRINGS} strings and struct regions"),
    )
}

/// `*address` at `attach`, as the expression at `span` reads it: the
/// integer the address points to (`address.pointee()`), which the kernel
/// reads at the event.
pub(crate) fn read_deref(
    kernel: &dyn Kernel,
    attach: &mut Attach,
    bound: &Bound,
    address: &Expr,
    span: Span,
) -> Result<Type> {
    // A struct element of an array, or what a struct pointer points to
    // (`*(struct foo *)arg0`): the struct, read whole.
    if let Some(
        place @ Place {
            ty: KernelType::Record(_),
            ..
        },
    ) = element(kernel, attach, bound, address)?
    {
        return read_place(kernel, attach, &place, span);
    }
    if let Ok(pointer) = pointer(kernel, attach, bound, address) {
        let place = Place {
            start: pointer.start,
            hops: pointer.hops,
            at: 0,
            ty: KernelType::Record(pointer.record),
        };
        return read_place(kernel, attach, &place, span);
    }
    let UnOp::Cast { bits, signed } = pointee(kernel, attach, bound, address) else {
        unreachable!("a pointee is an integer")
    };
    let (start, hops, at) = target(kernel, attach, bound, address)?;
    within_reach(&hops, span)?;
    let at = reachable(at, &hops, address.span)?;
    let size = u16::from(bits / 8);
    let place = Place {
        start,
        hops,
        // Negative offsets wrap here; the kernel sign-extends them back.
        at: at.cast_unsigned(),
        ty: KernelType::Int { size, signed },
    };
    let read = if at >= 0 {
        slot(attach, &place, u32::from(size))
    } else {
        let wanted = Read {
            start: place.start,
            hops: place.hops,
            at: place.at,
            len: u32::from(size),
            kind: ReadKind::Bytes,
        };
        shared(attach, wanted)
    };
    attach.members.push(MemberRead {
        span,
        read: read.ok_or_else(|| no_room_at(span))?,
        at: place.at,
        size,
        signed,
        chars: false,
        bits: None,
        layout: None,
    });
    Ok(Type::Int)
}

/// `str(*address)`, `expr`: the string the pointer `*address` reads
/// points to, which the kernel reads at the event.
pub(crate) fn read_deref_string(
    kernel: &dyn Kernel,
    attach: &mut Attach,
    bound: &Bound,
    address: &Expr,
    expr: &Expr,
) -> Result<()> {
    if !matches!(
        pointee(kernel, attach, bound, address),
        UnOp::Cast { bits: 64, .. }
    ) {
        return Err(Error::new(
            expr.span,
            "str(*address) reads where the 8-byte pointer at the address points",
        ));
    }
    let (start, mut hops, at) = target(kernel, attach, bound, address)?;
    hops.push(reachable(at, &hops, address.span)?.cast_unsigned());
    within_reach(&hops, expr.span)?;
    read_slot(attach, start, hops, 0, expr, ReadKind::String)
}

/// `str(address)` of a stepped or cast pointer (`str(args->filename + 1)`):
/// the string at the address, which the kernel reads at the event.
pub(crate) fn read_string_at(
    kernel: &dyn Kernel,
    attach: &mut Attach,
    bound: &Bound,
    address: &Expr,
) -> Result<()> {
    let (start, hops, at) = target(kernel, attach, bound, address)?;
    within_reach(&hops, address.span)?;
    let at = reachable(at, &hops, address.span)?;
    read_slot(
        attach,
        start,
        hops,
        at.cast_unsigned(),
        address,
        ReadKind::String,
    )
}

/// Where the integer `*address` reads is: the address `address` holds,
/// with its pointers to follow, and a constant offset from it
/// (`*(uint32 *)(args.buf + 8)`, `*((int64 *)arg0 + 1)`). Through a `*`
/// within (`**p`), the pointer that one reads is followed too.
fn target(
    kernel: &dyn Kernel,
    attach: &Attach,
    bound: &Bound,
    address: &Expr,
) -> Result<(Start, Vec<u32>, i64)> {
    match &address.kind {
        ExprKind::Unary(UnOp::Pointer { .. } | UnOp::Cast { bits: 64, .. }, inner) => {
            target(kernel, attach, bound, inner)
        }
        ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), base, step) if offset(step).is_some() => {
            let scale = step_size(kernel, attach, bound, base).ok_or_else(|| {
                Error::new(
                    base.span,
                    "bpftrace steps a typed pointer by whole pointees, which weft does not size here: cast it, `(uint64)P + 8` steps bytes, `(int64 *)P + 1` one int64",
                )
            })?;
            let (start, hops, at) = target(kernel, attach, bound, base)?;
            let step = offset(step).unwrap_or_default().wrapping_mul(scale);
            let at = match op {
                BinOp::Add => at.checked_add(step),
                _ => at.checked_sub(step),
            };
            let at = at.ok_or_else(|| Error::new(address.span, "this offset overflows"))?;
            Ok((start, hops, at))
        }
        // An array inside the record is where it lies.
        ExprKind::Field(name) if attach.field(name).is_some_and(Field::is_array) => {
            let offset = attach.field(name).map_or(0, |f| f.offset);
            Ok((Start::Context, Vec::new(), i64::from(offset)))
        }
        ExprKind::Member { .. } | ExprKind::Deref(_)
            if let Some(place) = array_place(kernel, attach, bound, address) =>
        {
            // An array's address (a row's too) is where it lies, not a
            // pointer it holds.
            Ok((place.start, place.hops, i64::from(place.at)))
        }
        ExprKind::Deref(inner)
            if matches!(
                pointee(kernel, attach, bound, inner),
                UnOp::Cast { bits: 64, .. }
            ) =>
        {
            let (start, mut hops, at) = target(kernel, attach, bound, inner)?;
            let at = reachable(at, &hops, inner.span)?;
            hops.push(at.cast_unsigned());
            Ok((start, hops, 0))
        }
        ExprKind::Var(name) if !bound.contains_key(name) => Err(Error::new(
            address.span,
            format!(
                "the kernel reads `*${name}` at the event, before the probe's statements run: write the address in place, as in `*(int64 *)arg0`"
            ),
        )),
        _ => {
            let (start, hops) = address_of(kernel, attach, bound, address)?;
            Ok((start, hops, 0))
        }
    }
}

/// Whether `address` is a fixed address, cast or stepped by constants
/// (`(uint32 *)kaddr("nr_cpu_ids") + 1`): the kernel reads it in any
/// probe, BEGIN's included.
pub(crate) fn is_fixed(address: &Expr) -> bool {
    match &address.kind {
        ExprKind::Int(_) => true,
        ExprKind::Unary(UnOp::Pointer { .. } | UnOp::Cast { bits: 64, .. }, inner) => {
            is_fixed(inner)
        }
        ExprKind::Binary(BinOp::Add | BinOp::Sub, base, step) => {
            offset(step).is_some() && is_fixed(base)
        }
        _ => false,
    }
}

/// What `*address` reads at `attach`: the integer a pointer cast names;
/// else what the typed pointer field or char array member it steps from
/// holds (`*(args->argv + 1)` a pointer, `$task->comm[0]` a char); else a
/// `uint64`, as bpftrace reads an untyped address.
pub(crate) fn pointee(kernel: &dyn Kernel, attach: &Attach, bound: &Bound, address: &Expr) -> UnOp {
    if matches!(address.kind, ExprKind::Unary(UnOp::Pointer { .. }, _)) {
        return address.pointee();
    }
    let mut base = address;
    while let ExprKind::Binary(BinOp::Add | BinOp::Sub, inner, step) = &base.kind
        && offset(step).is_some()
    {
        base = inner;
    }
    let element = match &base.kind {
        ExprKind::Field(name) => attach
            .field(name)
            .filter(|f| matches!(f.kind, FieldKind::Pointer { .. }) || f.is_array())
            .and_then(|f| f.element),
        ExprKind::Member { .. } | ExprKind::Deref(_) => {
            match array_element(kernel, attach, bound, base) {
                Some(Element::Int { size, signed }) => Some((size, signed)),
                Some(Element::Pointer(_)) => Some((8, false)),
                Some(Element::Record(_) | Element::Row { .. }) => None,
                // A pointer member, or an element of an array of them.
                None => member_pointee(kernel, attach, bound, base),
            }
        }
        _ => None,
    };
    match element {
        Some((size, signed)) => UnOp::Cast {
            bits: (size * 8) as u8,
            signed,
        },
        None => address.pointee(),
    }
}

/// The integer that pointer member `expr` points to (`p->count` of an
/// `int *count`), or an element of an array of them (`p->z[1]` of `int
/// *z[4]`), by its struct's type.
fn member_pointee(
    kernel: &dyn Kernel,
    attach: &Attach,
    bound: &Bound,
    expr: &Expr,
) -> Option<(u16, bool)> {
    let member = match &expr.kind {
        ExprKind::Deref(address) => match &address.kind {
            ExprKind::Binary(BinOp::Add, member, _) => member,
            _ => return None,
        },
        _ => expr,
    };
    let ExprKind::Member { base, name, arrow } = &member.kind else {
        return None;
    };
    let record = if *arrow {
        pointer(kernel, attach, bound, base).ok()?.record
    } else {
        match place(kernel, attach, bound, base).ok()?.ty {
            KernelType::Record(id) => id,
            _ => return None,
        }
    };
    kernel.pointee_int(record, name)
}

/// What member expression `expr` holds when it is an array: a `char[N]`
/// holds signed bytes.
fn array_element(
    kernel: &dyn Kernel,
    attach: &Attach,
    bound: &Bound,
    expr: &Expr,
) -> Option<Element> {
    let (element, _, _) = indexed(array_place(kernel, attach, bound, expr)?.ty)?;
    Some(element)
}

/// How values of array type `ty` are indexed: their element, stride and
/// count (a `char[N]` as N signed bytes); `None` for other types.
fn indexed(ty: KernelType) -> Option<(Element, u32, u32)> {
    match ty {
        KernelType::Chars(n) => Some((
            Element::Int {
                size: 1,
                signed: true,
            },
            1,
            u32::from(n),
        )),
        KernelType::Array {
            element,
            stride,
            count,
        } => Some((element, stride, count)),
        _ => None,
    }
}

/// The type of `*address` when it is a row of an array of arrays (`a[1]`
/// in `a[1][2]`): a string (`char[N]`) or an array.
pub(crate) fn row(
    kernel: &dyn Kernel,
    attach: &Attach,
    bound: &Bound,
    address: &Expr,
) -> Option<KernelType> {
    row_place(kernel, attach, bound, address).map(|row| row.ty)
}

/// Where `*address` is when it is a row of an array of arrays.
fn row_place(kernel: &dyn Kernel, attach: &Attach, bound: &Bound, address: &Expr) -> Option<Place> {
    let row = element(kernel, attach, bound, address).ok()??;
    indexed(row.ty).is_some().then_some(row)
}

/// `*address` (`expr`) of a row of an array of arrays, as a value: the
/// string a row of chars holds, which the kernel reads at the event; a
/// row of integers is indexed, not read whole.
pub(crate) fn read_row(
    kernel: &dyn Kernel,
    attach: &mut Attach,
    bound: &Bound,
    address: &Expr,
    expr: &Expr,
) -> Result<Type> {
    let row = row_place(kernel, attach, bound, address)
        .ok_or_else(|| Error::new(expr.span, "not a row of an array"))?;
    if let KernelType::Array { count, .. } = row.ty {
        return Err(Error::new(
            expr.span,
            format!("this is a row of {count} integers: index it, as in `a[1][2]`"),
        ));
    }
    read_place(kernel, attach, &row, expr.span)
}

/// Where array expression `expr` is: a member, or a row of an array of
/// arrays (`a[1]`); `None` if it is neither.
fn array_place(kernel: &dyn Kernel, attach: &Attach, bound: &Bound, expr: &Expr) -> Option<Place> {
    match &expr.kind {
        ExprKind::Member { .. } => {
            Some(place(kernel, attach, bound, expr).ok()?).filter(|p| indexed(p.ty).is_some())
        }
        ExprKind::Deref(address) => row_place(kernel, attach, bound, address),
        _ => None,
    }
}

/// How many bytes `+ 1` moves `base`: one on an integer (see
/// [`steps_bytes`]) and a char array member; on a typed pointer field what
/// it points to, as bpftrace steps it; else unknown.
fn step_size(kernel: &dyn Kernel, attach: &Attach, bound: &Bound, base: &Expr) -> Option<i64> {
    // An array member or a row of an array of arrays: by its elements
    // (checked first: a row is a `*`, which would step bytes).
    if let Some(array) = array_place(kernel, attach, bound, base) {
        let (_, stride, _) = indexed(array.ty)?;
        return Some(i64::from(stride));
    }
    if steps_bytes(attach, base) {
        return Some(1);
    }
    match &base.kind {
        ExprKind::Field(name) => {
            let field = attach.field(name)?;
            if let Some((size, _)) = field.element {
                return Some(i64::from(size));
            }
            let record = kernel.record(field.pointee.as_deref()?).ok()?;
            Some(i64::from(kernel.record_size(record)))
        }
        _ => None,
    }
}

/// Whether `+` and `-` on `base` step bytes, as on an integer: a cast
/// (a pointer cast steps whole integers already, as the parser wrote
/// it), a `*`, an integer field or argument. A typed pointer (a
/// tracepoint's `char **`, a struct member) bpftrace steps by its pointee.
fn steps_bytes(attach: &Attach, base: &Expr) -> bool {
    let name = match &base.kind {
        ExprKind::Unary(UnOp::Pointer { .. } | UnOp::Cast { .. }, _) | ExprKind::Deref(_) => {
            return true;
        }
        ExprKind::Field(name) => name.clone(),
        ExprKind::Arg(n) => format!("arg{n}"),
        ExprKind::Builtin(Builtin::Retval) => "retval".to_string(),
        // A register is an integer, and so is a fixed address.
        ExprKind::Call(name, _) => return name == "reg",
        ExprKind::Int(_) => return true,
        _ => return false,
    };
    attach
        .field(&name)
        .is_some_and(|f| f.kind == FieldKind::Int && !f.is_array())
}

/// Offset `at` from the address `hops` lead to, as the kernel takes it:
/// 32 bits, and below the address only past a pointer followed (the
/// context's and the task's own bytes start at their address).
fn reachable(at: i64, hops: &[u32], span: Span) -> Result<i32> {
    i32::try_from(at)
        .ok()
        .filter(|at| *at >= 0 || !hops.is_empty())
        .ok_or_else(|| Error::new(span, "this offset from the address is out of reach"))
}

/// A byte offset known before the program runs: an integer, negated, or
/// scaled (`(int64 *)p + 2` steps 2 × 8 bytes).
fn offset(expr: &Expr) -> Option<i64> {
    match &expr.kind {
        ExprKind::Int(n) => Some(*n),
        ExprKind::Unary(UnOp::Neg, inner) => offset(inner).map(i64::wrapping_neg),
        ExprKind::Binary(BinOp::Mul, a, b) => Some(offset(a)?.wrapping_mul(offset(b)?)),
        _ => None,
    }
}

/// USDT argument `field`, held in memory `at` bytes past the address in
/// the register at the field's offset, as the expression at `span` reads
/// it: the kernel reads its bytes, or with `string` the string its pointer
/// there points to, into a slot of their own.
pub(crate) fn memory_arg(
    attach: &mut Attach,
    field: &Field,
    at: i32,
    span: Span,
    string: bool,
) -> Result<()> {
    if attach.member(span).is_some() {
        return Ok(());
    }
    let register = u32::from(field.offset);
    // Negative offsets wrap here; the kernel sign-extends them back.
    let at = at.cast_unsigned();
    let (hops, at, size) = if string {
        (vec![register, at], 0, STRING_LEN as u16)
    } else {
        (vec![register], at, field.size)
    };
    let wanted = Read {
        start: Start::Context,
        hops,
        at,
        len: u32::from(size),
        kind: if string {
            ReadKind::String
        } else {
            ReadKind::Bytes
        },
    };
    // The same argument read again (`sum(arg2)`, `max(arg2)`) shares a slot.
    let read = shared(attach, wanted).ok_or_else(|| no_room_at(span))?;
    attach.members.push(MemberRead {
        span,
        read,
        at,
        size,
        signed: field.signed && !string,
        chars: string,
        bits: None,
        layout: None,
    });
    Ok(())
}

/// The [`Read`] of `attach` that is `wanted`, found or added.
fn shared(attach: &mut Attach, wanted: Read) -> Option<usize> {
    if let Some(read) = attach.reads.iter().position(|r| *r == wanted) {
        return Some(read);
    }
    if attach.slots() >= MAX_STRINGS {
        return None;
    }
    attach.reads.push(wanted);
    Some(attach.reads.len() - 1)
}

/// The [`Read`] of `attach` that covers `len` bytes at `place`, widened
/// or added: members near each other behind one pointer share a read.
fn slot(attach: &mut Attach, place: &Place, len: u32) -> Option<usize> {
    let (lo, hi) = (place.at, place.at + len);
    let limit = STRING_LEN as u32;
    for (i, read) in attach.reads.iter_mut().enumerate() {
        if read.kind != ReadKind::Bytes || read.start != place.start || read.hops != place.hops {
            continue;
        }
        let (new_lo, new_hi) = (read.at.min(lo), (read.at + read.len).max(hi));
        if new_hi - new_lo <= limit {
            read.at = new_lo;
            read.len = new_hi - new_lo;
            return Some(i);
        }
    }
    if attach.slots() >= MAX_STRINGS {
        return None;
    }
    attach.reads.push(Read {
        start: place.start,
        hops: place.hops.clone(),
        at: lo,
        len,
        kind: ReadKind::Bytes,
    });
    Some(attach.reads.len() - 1)
}
