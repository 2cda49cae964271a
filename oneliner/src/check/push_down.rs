//! Pushes the simple parts of an item's predicate (`field op constant`,
//! joined by `&&`) down to the kernel, which then drops events before
//! copying them.

use crate::{
    ast::{BinOp, Builtin, Expr, ExprKind, UnOp},
    kernel::FieldKind,
    plan::{Attach, Filter, Operand, Subject},
};

/// Moves the predicate's simple conjuncts (pid, tid, uid, cpu or an
/// integer field against a constant; comm against a string) into the
/// kernel.
/// User space still tests the whole predicate, so this only saves copies.
/// Returns whether the kernel tests the whole of it, at every attach point.
pub(crate) fn push_down(predicate: &Expr, attaches: &mut [Attach]) -> bool {
    let mut conjuncts = Vec::new();
    split_and(predicate, &mut conjuncts);
    let mut whole = true;
    for attach in attaches.iter_mut().filter(|a| a.in_kernel()) {
        for conjunct in &conjuncts {
            whole &= push_conjunct(conjunct, attach);
        }
    }
    whole
}

/// Moves one conjunct into `attach`'s kernel tests if it is simple enough;
/// whether it did.
fn push_conjunct(conjunct: &Expr, attach: &mut Attach) -> bool {
    let ExprKind::Binary(op, left, right) = &conjunct.kind else {
        return false;
    };
    if !op.is_comparison() {
        return false;
    }
    let (side, constant, op) = match (constant(right), constant(left)) {
        (Some(c), _) => (left, c, *op),
        (None, Some(c)) => (right, c, flip(*op)),
        _ => return false,
    };
    match (&side.kind, constant) {
        (ExprKind::Builtin(Builtin::Comm), Constant::Str(s))
            if op == BinOp::Eq && s.len() < 16 && attach.comm.is_none() =>
        {
            attach.comm = Some(s.to_string());
            true
        }
        (kind, Constant::Int(_) | Constant::Cpid) if attach.filters.len() < 4 => {
            let value = match constant {
                Constant::Int(n) => Operand::Int(n),
                _ => Operand::Cpid,
            };
            let Some(subject) = subject(kind, attach) else {
                return false;
            };
            attach.filters.push(Filter { subject, op, value });
            true
        }
        _ => false,
    }
}

/// The integer the kernel can read for an expression: pid, tid, uid, cpu
/// or an integer (or pointer) field of the context.
pub(crate) fn subject(kind: &ExprKind, attach: &Attach) -> Option<Subject> {
    let name = match kind {
        ExprKind::Builtin(Builtin::Pid) => return Some(Subject::Pid),
        ExprKind::Builtin(Builtin::Tid) => return Some(Subject::Tid),
        ExprKind::Builtin(Builtin::Uid) => return Some(Subject::Uid),
        ExprKind::Builtin(Builtin::Cpu) => return Some(Subject::Cpu),
        ExprKind::Builtin(Builtin::Retval) => "retval".to_string(),
        ExprKind::Field(name) => name.clone(),
        ExprKind::Arg(n) => format!("arg{n}"),
        _ => return None,
    };
    let f = attach.field(&name)?;
    let integer = matches!(f.kind, FieldKind::Int | FieldKind::Pointer { .. });
    (integer && matches!(f.size, 1 | 2 | 4 | 8)).then_some(Subject::Field {
        offset: f.offset,
        size: f.size,
        signed: f.signed,
    })
}

#[derive(Clone, Copy)]
enum Constant<'a> {
    Int(i64),
    Str(&'a str),
    Cpid,
}

fn constant(expr: &Expr) -> Option<Constant<'_>> {
    match &expr.kind {
        ExprKind::Int(n) => Some(Constant::Int(*n)),
        ExprKind::Str(s) => Some(Constant::Str(s)),
        ExprKind::Builtin(Builtin::Cpid) => Some(Constant::Cpid),
        ExprKind::Unary(UnOp::Neg, inner) => match inner.kind {
            ExprKind::Int(n) => Some(Constant::Int(n.wrapping_neg())),
            _ => None,
        },
        _ => None,
    }
}

fn flip(op: BinOp) -> BinOp {
    match op {
        BinOp::Lt => BinOp::Gt,
        BinOp::Le => BinOp::Ge,
        BinOp::Gt => BinOp::Lt,
        BinOp::Ge => BinOp::Le,
        other => other,
    }
}

pub(crate) fn split_and<'a>(expr: &'a Expr, out: &mut Vec<&'a Expr>) {
    if let ExprKind::Binary(BinOp::LogicalAnd, left, right) = &expr.kind {
        split_and(left, out);
        split_and(right, out);
    } else {
        out.push(expr);
    }
}
