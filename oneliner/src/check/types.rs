//! A program's own types (`struct`, `union` and `enum` definitions) laid
//! out as x86-64 C lays them out (the System V ABI, bit-fields as GCC packs
//! them), and seen by the checker before the kernel's: [`Defined`] is a
//! [`Kernel`] that answers for the program's records and enumerators and
//! asks the kernel for the rest, so casts, `->`, `.` and `sizeof` read a
//! program's struct as they read a kernel one.

use std::collections::HashMap;

use crate::{
    ast::{Base, Definitions, Expr, ExprKind, MemberDef, RecordDef, TypeRef},
    error::{Error, Result, Span},
    kernel::{Element, Field, Kernel, KernelType, Member, Shape, Signature, UsdtSite},
};

/// Record ids of the program's own types start here, far above any BTF id.
const FIRST_ID: u32 = 0xc000_0000;

/// The fixed-width type names a program may use whatever the kernel's BTF
/// holds: the kernel's and `<stdint.h>`'s.
const FIXED: [(&str, u8, bool); 28] = [
    ("int8_t", 1, true),
    ("int16_t", 2, true),
    ("int32_t", 4, true),
    ("int64_t", 8, true),
    ("uint8_t", 1, false),
    ("uint16_t", 2, false),
    ("uint32_t", 4, false),
    ("uint64_t", 8, false),
    ("u8", 1, false),
    ("u16", 2, false),
    ("u32", 4, false),
    ("u64", 8, false),
    ("s8", 1, true),
    ("s16", 2, true),
    ("s32", 4, true),
    ("s64", 8, true),
    ("__u8", 1, false),
    ("__u16", 2, false),
    ("__u32", 4, false),
    ("__u64", 8, false),
    ("__s8", 1, true),
    ("__s16", 2, true),
    ("__s32", 4, true),
    ("__s64", 8, true),
    ("size_t", 8, false),
    ("ssize_t", 8, true),
    ("uintptr_t", 8, false),
    ("bool", 1, false),
];

/// A record laid out.
#[derive(Debug)]
struct Laid {
    name: String,
    size: u32,
    align: u32,
    members: Vec<LaidMember>,
}

#[derive(Debug)]
struct LaidMember {
    /// None: an anonymous struct or union, whose members are found through it.
    name: Option<String>,
    offset: u32,
    ty: KernelType,
    /// A pointer to an integer (or an array of them): its size and sign.
    pointee_int: Option<(u16, bool)>,
}

/// The kernel, with the program's definitions in front of it.
pub(crate) struct Defined<'k> {
    kernel: &'k dyn Kernel,
    /// By index in [`Definitions::records`]; None for declarations.
    records: Vec<Option<Laid>>,
    names: HashMap<String, usize>,
    /// Records declared and never defined (`struct NAME;`, or one a
    /// uprobe's DWARF holds that weft cannot lay out).
    declared: Vec<String>,
    enumerators: HashMap<String, i64>,
}

impl<'k> Defined<'k> {
    /// Lays out `definitions` against `kernel`, or says which one is wrong.
    pub(crate) fn new(definitions: &Definitions, kernel: &'k dyn Kernel) -> Result<Self> {
        let mut names = HashMap::new();
        for (index, record) in definitions.records.iter().enumerate() {
            let (Some(name), Some(_)) = (&record.name, &record.members) else {
                continue;
            };
            if names.insert(name.clone(), index).is_some() {
                return Err(Error::new(record.span, format!("{name} is defined twice")));
            }
        }
        let mut layout = Layout {
            records: &definitions.records,
            kernel,
            names: &names,
            laid: definitions.records.iter().map(|_| None).collect(),
            laying: vec![false; definitions.records.len()],
        };
        for index in 0..definitions.records.len() {
            if definitions.records[index].members.is_some() {
                layout.lay(index)?;
            }
        }
        let records = layout.laid;
        let declared = (definitions.records.iter())
            .filter_map(|r| r.name.clone())
            .filter(|name| !names.contains_key(name))
            .collect();
        Ok(Self {
            kernel,
            records,
            names,
            declared,
            enumerators: enumerators(definitions, kernel)?,
        })
    }

    fn own(&self, id: u32) -> Option<&Laid> {
        let index = id.checked_sub(FIRST_ID)?;
        self.records.get(index as usize)?.as_ref()
    }
}

/// Each enumerator's value: as written, else the previous one's plus 1,
/// from 0 in each enum, as C numbers them.
fn enumerators(definitions: &Definitions, kernel: &dyn Kernel) -> Result<HashMap<String, i64>> {
    let mut values = HashMap::new();
    for enumeration in &definitions.enums {
        let mut next = 0i64;
        for enumerator in enumeration {
            if let Some(value) = &enumerator.value {
                next = fold(value, &values, kernel)?;
            }
            if values.insert(enumerator.name.clone(), next).is_some() {
                return Err(Error::new(
                    enumerator.span,
                    format!("enumerator `{}` is defined twice", enumerator.name),
                ));
            }
            next = next.wrapping_add(1);
        }
    }
    Ok(values)
}

/// The value of an enumerator's constant expression: numbers, the
/// enumerators before it and the kernel's, with C's integer operators.
fn fold(expr: &Expr, known: &HashMap<String, i64>, kernel: &dyn Kernel) -> Result<i64> {
    Ok(match &expr.kind {
        ExprKind::Int(n) => *n,
        ExprKind::Constant(name) => known
            .get(name)
            .copied()
            .or_else(|| kernel.enumerator(name))
            .ok_or_else(|| Error::new(expr.span, format!("unknown constant `{name}`")))?,
        ExprKind::Unary(op, operand) => op.apply(fold(operand, known, kernel)?),
        ExprKind::Binary(op, left, right) => {
            op.apply(fold(left, known, kernel)?, fold(right, known, kernel)?)
        }
        _ => {
            return Err(Error::new(
                expr.span,
                "an enumerator's value must be a constant integer expression",
            ));
        }
    })
}

/// Laying out the program's records, each once, those a record holds by
/// value first.
struct Layout<'d> {
    records: &'d [RecordDef],
    kernel: &'d dyn Kernel,
    names: &'d HashMap<String, usize>,
    laid: Vec<Option<Laid>>,
    laying: Vec<bool>,
}

impl Layout<'_> {
    /// Lays out record `index` (once), and returns its size and alignment.
    fn lay(&mut self, index: usize) -> Result<(u32, u32)> {
        if let Some(laid) = &self.laid[index] {
            return Ok((laid.size, laid.align));
        }
        let record = &self.records[index];
        let name = record.name.clone().unwrap_or_else(|| {
            if record.union {
                "union (anonymous)"
            } else {
                "struct (anonymous)"
            }
            .into()
        });
        if std::mem::replace(&mut self.laying[index], true) {
            return Err(Error::new(record.span, format!("{name} holds itself")));
        }
        let mut place = Place::default();
        let mut members = Vec::new();
        for member in record.members.iter().flatten() {
            let shape = self.shape(&member.ty, member.span)?;
            let (offset, shift) = match member.at {
                Some(at) => (place.put(at, shape), 0),
                None => place.add(member, shape, record.union)?,
            };
            let ty = match (member.bits, shape.ty) {
                (Some(width), KernelType::Int { signed, .. }) => KernelType::Bits {
                    shift,
                    width: width as u8,
                    signed,
                },
                _ => shape.ty,
            };
            if member.name.is_some()
                || (member.bits.is_none() && matches!(shape.ty, KernelType::Record(_)))
            {
                let pointee_int = self.pointee_int(&member.ty, member.span);
                members.push(LaidMember {
                    name: member.name.clone(),
                    offset,
                    ty,
                    pointee_int,
                });
            }
        }
        let (mut size, align) = place.end();
        size = record.size.unwrap_or(size);
        self.laid[index] = Some(Laid {
            name,
            size,
            align,
            members,
        });
        Ok((size, align))
    }

    /// The integer a pointer of type `ty` points to (`int *`, `u8 *p[4]`).
    fn pointee_int(&mut self, ty: &TypeRef, span: Span) -> Option<(u16, bool)> {
        if ty.pointers != 1 || !matches!(ty.base, Base::Int { .. } | Base::Named(_)) {
            return None;
        }
        match self.base(&ty.base, span).ok()?.ty {
            KernelType::Int { size, signed } => Some((size, signed)),
            _ => None,
        }
    }

    /// What a member's declared type is, and its size and alignment.
    fn shape(&mut self, ty: &TypeRef, span: Span) -> Result<Shape> {
        let count = ty.dims.iter().try_fold(1u32, |n, d| n.checked_mul(*d));
        let count = count.ok_or_else(|| Error::new(span, "the array is too large"))?;
        let one = if ty.pointers > 0 {
            let record = match (&ty.base, ty.pointers) {
                (Base::Record(name), 1) => self.record_id(name),
                (Base::Inline(index), 1) => Some(FIRST_ID + *index as u32),
                _ => None,
            };
            Shape {
                ty: KernelType::Pointer(record),
                size: 8,
                align: 8,
            }
        } else {
            self.base(&ty.base, span)?
        };
        if ty.dims.is_empty() {
            return Ok(one);
        }
        let size = one
            .size
            .checked_mul(count)
            .ok_or_else(|| Error::new(span, "the array is too large"))?;
        let ty = match ty.dims[..] {
            [count] => Element::array(one.ty, one.size, count),
            // An array of rows, each an array of its own.
            [rows, count] => {
                let row = Element::array(one.ty, one.size, count);
                Element::array(row, one.size * count, rows)
            }
            _ => KernelType::Other,
        };
        Ok(Shape {
            ty,
            size,
            align: one.align,
        })
    }

    /// The shape of a type that is no pointer.
    fn base(&mut self, base: &Base, span: Span) -> Result<Shape> {
        let int = |size: u8, signed| Shape {
            ty: KernelType::Int {
                size: size.into(),
                signed,
            },
            size: size.into(),
            align: size.into(),
        };
        Ok(match base {
            Base::Int { size, signed } => int(*size, *signed),
            Base::Enum => int(4, false),
            Base::Float(size) => Shape {
                ty: KernelType::Other,
                size: (*size).into(),
                align: (*size).into(),
            },
            Base::Void => return Err(Error::new(span, "a member cannot be `void`")),
            Base::Inline(index) => self.record_shape(*index, span)?,
            Base::Record(name) => self.named_record(name, span)?,
            Base::Named(name) => FIXED
                .iter()
                .find(|(fixed, ..)| fixed == name)
                .map(|(_, size, signed)| int(*size, *signed))
                .or_else(|| self.kernel.typedef(name))
                .ok_or_else(|| {
                    Error::new(
                        span,
                        format!(
                            "unknown type `{name}`: not a C type, nor a typedef of the kernel's BTF"
                        ),
                    )
                })?,
        })
    }

    /// `struct NAME` held by value: the program's, else the kernel's.
    fn named_record(&mut self, name: &str, span: Span) -> Result<Shape> {
        if let Some(index) = self.names.get(name) {
            return self.record_shape(*index, span);
        }
        let id = self.kernel.record(name).map_err(|_| {
            Error::new(
                span,
                format!("{name} is neither defined in the program nor in the kernel's BTF"),
            )
        })?;
        Ok(Shape {
            ty: KernelType::Record(id),
            size: self.kernel.record_size(id),
            align: self.kernel.record_align(id),
        })
    }

    fn record_shape(&mut self, index: usize, span: Span) -> Result<Shape> {
        let (size, align) = self.lay(index).map_err(|e| {
            if e.message.ends_with("holds itself") {
                Error::new(span, e.message)
            } else {
                e
            }
        })?;
        Ok(Shape {
            ty: KernelType::Record(FIRST_ID + index as u32),
            size,
            align,
        })
    }

    /// The id of `struct NAME`: the program's, else the kernel's, if any.
    fn record_id(&self, name: &str) -> Option<u32> {
        match self.names.get(name) {
            Some(index) => Some(FIRST_ID + *index as u32),
            None => self.kernel.record(name).ok(),
        }
    }
}

/// Where the next member goes, in bits, as a record is laid out.
#[derive(Default)]
struct Place {
    bits: u64,
    /// The union's or struct's size so far, in bits.
    end: u64,
    align: u32,
}

impl Place {
    /// Places `member` and returns its byte offset, and a bit-field's bit
    /// in that byte. A struct's members
    /// follow one another, each at its alignment; a bit-field goes at the
    /// next bit unless it would cross a boundary of its type's alignment,
    /// and one of width 0 moves to that boundary; a union's members all
    /// start at 0.
    fn add(&mut self, member: &MemberDef, shape: Shape, union: bool) -> Result<(u32, u8)> {
        let unit = u64::from(shape.align) * 8;
        let start = if union { 0 } else { self.bits };
        let at = if let Some(width) = member.bits {
            if width > shape.size * 8 || !matches!(shape.ty, KernelType::Int { .. }) {
                return Err(Error::new(
                    member.span,
                    "a bit-field must be an integer no wider than its type",
                ));
            }
            if width == 0 {
                self.bits = start.next_multiple_of(unit);
                return Ok((0, 0));
            }
            let crosses = start / unit != (start + u64::from(width) - 1) / unit;
            let at = if crosses {
                start.next_multiple_of(unit)
            } else {
                start
            };
            self.bits = at + u64::from(width);
            at
        } else {
            let at = start.next_multiple_of(unit);
            self.bits = at + u64::from(shape.size) * 8;
            at
        };
        if member.name.is_some() || member.bits.is_none() {
            self.align = self.align.max(shape.align);
        }
        self.end = self.end.max(self.bits);
        let byte = u32::try_from(at / 8)
            .map_err(|_| Error::new(member.span, "the struct is too large"))?;
        Ok((byte, (at % 8) as u8))
    }

    /// Places a member where a file's DWARF says it is, `at` bytes in.
    fn put(&mut self, at: u32, shape: Shape) -> u32 {
        self.bits = (u64::from(at) + u64::from(shape.size)) * 8;
        self.align = self.align.max(shape.align);
        self.end = self.end.max(self.bits);
        at
    }

    /// The record's size and alignment.
    fn end(&self) -> (u32, u32) {
        let align = self.align.max(1);
        let bytes = self.end.div_ceil(8).next_multiple_of(u64::from(align));
        (u32::try_from(bytes).unwrap_or(u32::MAX), align)
    }
}

impl Kernel for Defined<'_> {
    fn tracepoints(&self, category: &str, name: &str) -> Vec<(String, String)> {
        self.kernel.tracepoints(category, name)
    }

    fn tracepoint_fields(
        &self,
        category: &str,
        name: &str,
    ) -> std::result::Result<Vec<Field>, String> {
        self.kernel.tracepoint_fields(category, name)
    }

    fn has_raw_tracepoint(&self, name: &str) -> bool {
        self.kernel.has_raw_tracepoint(name)
    }

    fn has_kprobes(&self) -> bool {
        self.kernel.has_kprobes()
    }

    fn functions(&self, glob: &str) -> Vec<String> {
        self.kernel.functions(glob)
    }

    fn function(&self, function: &str) -> std::result::Result<Signature, String> {
        self.kernel.function(function)
    }

    fn record(&self, name: &str) -> std::result::Result<u32, String> {
        match self.names.get(name) {
            Some(index) => Ok(FIRST_ID + *index as u32),
            None => self.kernel.record(name).map_err(|e| {
                if self.declared.iter().any(|d| d == name) {
                    format!(
                        "{name} is declared but not defined (where a uprobe's file describes \
                         it, it holds a type weft does not read), and {e}"
                    )
                } else {
                    e
                }
            }),
        }
    }

    fn record_name(&self, id: u32) -> String {
        match self.own(id) {
            Some(laid) => laid.name.clone(),
            None => self.kernel.record_name(id),
        }
    }

    fn record_size(&self, id: u32) -> u32 {
        match self.own(id) {
            Some(laid) => laid.size,
            None => self.kernel.record_size(id),
        }
    }

    fn record_align(&self, id: u32) -> u32 {
        match self.own(id) {
            Some(laid) => laid.align,
            None => self.kernel.record_align(id),
        }
    }

    fn pointee_int(&self, id: u32, name: &str) -> Option<(u16, bool)> {
        let Some(laid) = self.own(id) else {
            return self.kernel.pointee_int(id, name);
        };
        for member in &laid.members {
            match (&member.name, member.ty) {
                (Some(found), _) if found == name => return member.pointee_int,
                (None, KernelType::Record(inner)) => {
                    if let Some(found) = self.pointee_int(inner, name) {
                        return Some(found);
                    }
                }
                _ => {}
            }
        }
        None
    }

    fn member_names(&self, id: u32) -> Vec<String> {
        let Some(laid) = self.own(id) else {
            return self.kernel.member_names(id);
        };
        let mut names = Vec::new();
        for member in &laid.members {
            match (&member.name, member.ty) {
                (Some(name), _) => names.push(name.clone()),
                (None, KernelType::Record(inner)) => names.extend(self.member_names(inner)),
                (None, _) => {}
            }
        }
        names
    }

    fn member(&self, id: u32, name: &str) -> std::result::Result<Member, String> {
        let Some(laid) = self.own(id) else {
            return self.kernel.member(id, name);
        };
        for member in &laid.members {
            match &member.name {
                Some(found) if found == name => {
                    return Ok(Member {
                        offset: member.offset,
                        ty: member.ty,
                    });
                }
                None => {
                    if let KernelType::Record(inner) = member.ty
                        && let Ok(found) = self.member(inner, name)
                    {
                        return Ok(Member {
                            offset: member.offset + found.offset,
                            ty: found.ty,
                        });
                    }
                }
                Some(_) => {}
            }
        }
        Err(format!("{} has no member `{name}`", laid.name))
    }

    fn enumerator(&self, name: &str) -> Option<i64> {
        self.enumerators
            .get(name)
            .copied()
            .or_else(|| self.kernel.enumerator(name))
    }

    fn symbol(&self, name: &str) -> Option<u64> {
        self.kernel.symbol(name)
    }

    fn cgroup_id(&self, path: &str) -> std::result::Result<u64, String> {
        self.kernel.cgroup_id(path)
    }

    fn usdt(&self, path: &str) -> std::result::Result<(String, Vec<UsdtSite>), String> {
        self.kernel.usdt(path)
    }

    fn uprobe_functions(&self, path: &str) -> std::result::Result<(String, Vec<String>), String> {
        self.kernel.uprobe_functions(path)
    }

    fn user_object(
        &self,
        path: &str,
        name: &str,
    ) -> std::result::Result<Option<(u64, u64)>, String> {
        self.kernel.user_object(path, name)
    }

    fn uprobe_parameters(
        &self,
        path: &str,
        function: &str,
    ) -> std::result::Result<Option<crate::UserFunction>, String> {
        self.kernel.uprobe_parameters(path, function)
    }

    fn process_files(&self, pid: u32) -> std::result::Result<Vec<String>, String> {
        self.kernel.process_files(pid)
    }

    fn paths(&self, pattern: &str) -> Vec<String> {
        self.kernel.paths(pattern)
    }

    fn typedef(&self, name: &str) -> Option<Shape> {
        self.kernel.typedef(name)
    }
}
