//! `tracepoint:raw_syscalls:sys_enter` and `sys_exit` attached as BPF raw
//! tracepoints where the probe reads no more than the raw context holds:
//! the syscall's number at entry (`args->id`), its return value at exit
//! (`args->ret`), each in the context's second slot. The hook is the same
//! one, but a raw tracepoint's program runs on the kernel's arguments as
//! they are, where a classic tracepoint's first builds the perf record of
//! every field (all six arguments at entry); every syscall of every
//! process pays that, and the bench's one-liners on these hooks cost a
//! getppid loop 13-21 % less this way (docs/oneliners.md has the figures).
//!
//! Not where every field is kept (`weft trace --store`), nor over a
//! capture, whose records are the classic ones.

use crate::{
    ast::{Expr, ExprKind, Item, SizeOf},
    expand::Target,
    kernel::Field,
};

/// The fields `target`'s probe sees as a raw tracepoint, if it is one of
/// the two and `item` reads no field the raw context lacks.
pub(crate) fn raw_fields(item: &Item, target: &Target, fields: &[Field]) -> Option<Vec<Field>> {
    let Target::Tracepoint { category, name } = target else {
        return None;
    };
    let held = match (category.as_str(), name.as_str()) {
        ("raw_syscalls", "sys_enter") => "id",
        ("raw_syscalls", "sys_exit") => "ret",
        _ => return None,
    };
    let mut fits = true;
    let mut check = |expr: &Expr| {
        each_expr(expr, &mut |e| match &e.kind {
            ExprKind::Field(field) if field != held => fits = false,
            _ => {}
        });
    };
    item.for_each_expr(&mut check);
    let field = fields.iter().find(|f| f.name == held)?;
    // The second of the raw context's 8-byte slots, as the field's type.
    fits.then(|| {
        vec![Field {
            offset: 8,
            ..field.clone()
        }]
    })
}

/// `f` on `expr` and every expression in it, `sizeof(x)`'s `x` included
/// (typed against the fields, though never run).
fn each_expr(expr: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(expr);
    if let ExprKind::SizeOf(SizeOf::Expr(inner)) = &expr.kind {
        each_expr(inner, f);
    }
    for child in expr.children() {
        each_expr(child, f);
    }
}
