//! Which expressions bpftrace types as pointers: their values compare
//! and compute as integers here, but a map key that is one prints in hex.

use super::{Checker, Expr, ExprKind, FieldKind, KernelType, members};
use crate::ast::{BinOp, Builtin, UnOp};

impl Checker<'_> {
    /// Whether `expr` is a pointer by bpftrace's types at the first attach
    /// point: `curtask`, a pointer cast, a pointer field or member, a
    /// variable holding one, or one stepped by an integer.
    pub(super) fn is_pointer(&self, expr: &Expr) -> bool {
        match &expr.kind {
            ExprKind::Builtin(Builtin::Curtask)
            | ExprKind::StructCast(..)
            | ExprKind::Unary(UnOp::Pointer { .. }, _) => true,
            ExprKind::Var(name) => self.pointer_vars.contains(name),
            ExprKind::Field(name) => self.attaches.first().is_some_and(|attach| {
                attach
                    .field(name)
                    .is_some_and(|f| matches!(f.kind, FieldKind::Pointer { .. }))
            }),
            ExprKind::Member { .. } => {
                (self.attaches.first().zip(self.bound.first())).is_some_and(|(attach, bound)| {
                    matches!(
                        members::member_type(self.kernel, attach, bound, expr),
                        Ok(KernelType::Pointer(_))
                    )
                })
            }
            ExprKind::Binary(BinOp::Add | BinOp::Sub, left, right) => {
                self.is_pointer(left) && !self.is_pointer(right)
            }
            ExprKind::Ternary(_, then, otherwise) => {
                self.is_pointer(then) && self.is_pointer(otherwise)
            }
            _ => false,
        }
    }

    /// The bytes bpftrace moves pointer `expr` by in `expr + 1`, where
    /// weft must multiply: a struct pointer (a cast, `curtask`, a variable
    /// or member holding one) or a typed pointer field. A pointer cast to
    /// an integer type is moved so by the parser already.
    pub(super) fn pointee_size(&self, expr: &Expr) -> Option<u32> {
        let record = match &expr.kind {
            ExprKind::StructCast(name, _) => self.kernel.record(name).ok()?,
            ExprKind::Builtin(Builtin::Curtask) => self.kernel.record("struct task_struct").ok()?,
            // Moved, it is still such a pointer.
            ExprKind::Binary(BinOp::Add | BinOp::Sub, pointer, n) if !self.is_pointer(n) => {
                return self.pointee_size(pointer);
            }
            ExprKind::Var(name) => self.bound.first()?.get(name)?.record,
            ExprKind::Field(name) => {
                let field = self.attaches.first()?.field(name)?;
                if let Some((size, _)) = field.element {
                    return Some(u32::from(size));
                }
                self.kernel.record(field.pointee.as_deref()?).ok()?
            }
            ExprKind::Member { .. } => {
                let (attach, bound) = self.attaches.first().zip(self.bound.first())?;
                match members::member_type(self.kernel, attach, bound, expr).ok()? {
                    KernelType::Pointer(Some(record)) => record,
                    _ => return None,
                }
            }
            _ => return None,
        };
        Some(self.kernel.record_size(record))
    }
}
