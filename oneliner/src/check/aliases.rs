//! Variables that hold an address the kernel reads through: `$f =
//! args->filename; ... str($f)`, `$p = (uint8 *)args->buf; ... $p[0]`,
//! `str($p + 1)`, `$a = kaddr("avenrun"); ... *($a + 8)`. bpftrace reads the memory at the pointer the variable
//! holds, which is the field's own value stepped by constants, so `str($f)`
//! is `str(args->filename)` and `$p[0]` is `*((uint8 *)args->buf + 0)`,
//! which weft reads in the kernel as the event happens. A variable
//! qualifies when the item assigns it once, at the top of its actions (not
//! inside `if` or `while`), and never changes it; the reads after that
//! assignment (`str()` and `buf()`'s first argument, and what `*` and
//! `[]` read through) name the address in place of the variable, as do
//! the values of later variables set from it and constants (`$b = $a +
//! 1`), which then qualify in turn.

use crate::{
    ast::{BinOp, Builtin, Expr, ExprKind, Item, Program, Stmt, UnOp, for_each_expr},
    parse::binary,
};

/// The functions whose first argument weft reads in the kernel at the
/// event, so that it must name a field there.
const READ_AT_THE_EVENT: [&str; 2] = ["str", "buf"];

/// Rewrites each read through a qualifying variable of `program` as a
/// read through the address it holds.
pub(crate) fn inline_in_str(program: &mut Program) {
    for item in &mut program.items {
        inline_item(item);
    }
}

fn inline_item(item: &mut Item) {
    for at in 0..item.body.len() {
        let Stmt::VarAssign { name, value, .. } = &item.body[at] else {
            continue;
        };
        if changes(&item.body, name) != 1 {
            continue;
        }
        if let ExprKind::Deref(address) = &value.kind
            && is_address(address)
        {
            let (name, address) = (name.clone(), (**address).clone());
            members_through(&mut item.body[at + 1..], &name, &address);
            continue;
        }
        if !is_address(value) {
            continue;
        }
        let (name, value) = (name.clone(), value.clone());
        through_later_variables(&mut item.body[at + 1..], &name, &value);
        crate::ast::for_each_expr_mut(&mut item.body[at + 1..], &mut |e| {
            e.rewrite(&mut |e| match &mut e.kind {
                ExprKind::Call(function, args)
                    if READ_AT_THE_EVENT.contains(&function.as_str()) =>
                {
                    if let Some(first) = args.first_mut() {
                        substitute(first, &name, &value);
                    }
                }
                ExprKind::Deref(address) => substitute(address, &name, &value),
                _ => {}
            });
        });
    }
}

/// A later variable set from this one and constants (`$b = $a + 1`,
/// `$c = (uint64)$a`) holds an address the event holds too: its value is
/// written with the address in place, so that it qualifies in turn.
fn through_later_variables(body: &mut [Stmt], name: &str, address: &Expr) {
    for stmt in body {
        if let Stmt::VarAssign { value, .. } = stmt {
            let mut written = value.clone();
            substitute(&mut written, name, address);
            if is_address(&written) {
                *value = written;
            }
        }
    }
}

/// `$x.member` after `$x = *address` (a struct copied whole, in
/// bpftrace) read as `address->member`, at the event.
fn members_through(body: &mut [Stmt], name: &str, address: &Expr) {
    crate::ast::for_each_expr_mut(body, &mut |e| {
        e.rewrite(&mut |e| {
            if let ExprKind::Member { base, arrow, .. } = &mut e.kind
                && !*arrow
                && matches!(&base.kind, ExprKind::Var(v) if v == name)
            {
                let span = base.span;
                **base = Expr {
                    span,
                    ..address.clone()
                };
                *arrow = true;
            }
        });
    });
}

/// Whether `value` is an address the event holds: a field, `argN` or
/// `retval`, cast or stepped by constants.
fn is_address(value: &Expr) -> bool {
    match &value.kind {
        // A fixed address too (`kaddr("avenrun")`, resolved before this).
        ExprKind::Field(_)
        | ExprKind::Arg(_)
        | ExprKind::Builtin(Builtin::Retval)
        | ExprKind::Int(_) => true,
        ExprKind::Unary(UnOp::Pointer { .. } | UnOp::Cast { bits: 64, .. }, inner) => {
            is_address(inner)
        }
        ExprKind::Binary(BinOp::Add | BinOp::Sub, a, b) => is_address(a) && is_constant(b),
        _ => false,
    }
}

/// Whether `expr` is an integer the parser wrote (`2`, `2 * 8`, `-1`).
fn is_constant(expr: &Expr) -> bool {
    match &expr.kind {
        ExprKind::Int(_) => true,
        ExprKind::Unary(UnOp::Neg, inner) => is_constant(inner),
        ExprKind::Binary(BinOp::Mul, a, b) => is_constant(a) && is_constant(b),
        _ => false,
    }
}

/// `$name` in `expr` replaced by `value`; `$name + N` steps a typed
/// pointer by whole pointees, as it would have written in place.
fn substitute(expr: &mut Expr, name: &str, value: &Expr) {
    let is_name = |e: &Expr| matches!(&e.kind, ExprKind::Var(v) if v == name);
    if is_name(expr) {
        expr.kind = value.kind.clone();
        return;
    }
    if let ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), left, right) = &mut expr.kind
        && is_name(left)
    {
        substitute(right, name, value);
        let span = expr.span;
        *expr = binary(*op, value.clone(), (**right).clone());
        expr.span = span;
        return;
    }
    for child in expr.children_mut() {
        substitute(child, name, value);
    }
}

/// How many statements (nested ones too) assign or change `$name`,
/// counting `$name++` and friends wherever they are.
fn changes(stmts: &[Stmt], name: &str) -> usize {
    let mut count = 0;
    count_assignments(stmts, name, &mut count);
    for_each_expr(stmts, &mut |e| {
        e.visit(&mut |e| {
            if let ExprKind::Step { target, .. } = &e.kind
                && matches!(&target.kind, ExprKind::Var(v) if v == name)
            {
                count += 1;
            }
        });
    });
    count
}

fn count_assignments(stmts: &[Stmt], name: &str, count: &mut usize) {
    for stmt in stmts {
        match stmt {
            Stmt::VarAssign { name: n, .. } | Stmt::VarUpdate { name: n, .. } if n == name => {
                *count += 1;
            }
            Stmt::If {
                then, otherwise, ..
            } => {
                count_assignments(then, name, count);
                count_assignments(otherwise, name, count);
            }
            Stmt::While { body, .. } => count_assignments(body, name, count),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::check::tests::{checked, refused};
    use crate::plan::ReadKind;

    #[test]
    fn str_of_a_variable_holding_a_field_reads_the_field() {
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_openat { $f = args->filename; printf("%s %d\n", str($f), $f > 0); }"#,
        );
        let same = checked(
            r#"tracepoint:syscalls:sys_enter_openat { $f = args->filename; printf("%s %d\n", str(args->filename), $f > 0); }"#,
        );
        assert_eq!(plan.attaches[0].strings, same.attaches[0].strings);
        assert_eq!(plan.attaches[0].strings.len(), 1);
    }

    #[test]
    fn members_of_a_struct_copied_into_a_variable_are_read_at_the_event() {
        let plan = checked(
            "tracepoint:syscalls:sys_enter_nanosleep { $t = *args->rqtp; @[$t.tv_sec, $t.tv_nsec] = count(); }",
        );
        let same = checked(
            "tracepoint:syscalls:sys_enter_nanosleep { $t = *args->rqtp; @[args->rqtp->tv_sec, args->rqtp->tv_nsec] = count(); }",
        );
        // The copy itself reads the first 8 bytes; then each member.
        let reads = |plan: &crate::Plan| -> Vec<_> {
            (plan.attaches[0].members.iter())
                .map(|m| (m.read, m.at, m.size, m.signed))
                .collect()
        };
        assert_eq!(reads(&plan), reads(&same));
        assert_eq!(reads(&plan).len(), 3);
    }

    #[test]
    fn buf_of_a_variable_holding_a_field_reads_the_field() {
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_openat { $f = args->filename; printf("%r\n", buf($f, 6)); }"#,
        );
        let same = checked(
            r#"tracepoint:syscalls:sys_enter_openat { printf("%r\n", buf(args->filename, 6)); }"#,
        );
        assert_eq!(plan.attaches[0].reads, same.attaches[0].reads);
        assert_eq!(plan.attaches[0].strings, same.attaches[0].strings);
    }

    #[test]
    fn a_variable_holding_a_cast_field_is_indexed_by_its_pointee() {
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_openat { $p = (uint16 *)args->filename; printf("%d %d\n", $p[3], *($p + 1)); }"#,
        );
        let same = checked(
            r#"tracepoint:syscalls:sys_enter_openat { printf("%d %d\n", ((uint16 *)args->filename)[3], *((uint16 *)args->filename + 1)); }"#,
        );
        assert_eq!(plan.attaches[0].reads, same.attaches[0].reads);
        assert_eq!(plan.attaches[0].members.len(), 2);
        let read = &plan.attaches[0].reads[0];
        // Two bytes each, at 2 and 6: one read covers both.
        assert_eq!(
            (read.at, read.len, (read.kind == ReadKind::String)),
            (2, 6, false)
        );
    }

    #[test]
    fn str_of_a_stepped_pointer_reads_the_string_there() {
        let plan = checked(
            r#"tracepoint:syscalls:sys_enter_openat { $f = args->filename; printf("%s %s\n", str(args->filename + 1), str($f + 2)); }"#,
        );
        let reads: Vec<_> = plan.attaches[0]
            .reads
            .iter()
            .map(|r| (r.at, (r.kind == ReadKind::String)))
            .collect();
        assert_eq!(reads, [(1, true), (2, true)]);
        assert_eq!(
            plan.attaches[0].reads[0].hops,
            plan.attaches[0].reads[1].hops
        );
    }

    #[test]
    fn a_variable_changed_or_set_in_a_branch_is_not_a_field() {
        for program in [
            r#"tracepoint:syscalls:sys_enter_openat { $f = args->filename; $f = 0; printf("%s\n", str($f)); }"#,
            r#"tracepoint:syscalls:sys_enter_openat { $f = args->filename; $f++; printf("%s\n", str($f)); }"#,
            r#"tracepoint:syscalls:sys_enter_openat { if (pid > 0) { $f = args->filename; } printf("%s\n", str($f)); }"#,
        ] {
            let error = refused(program);
            assert!(error.contains("str() reads a field"), "{program}: {error}");
        }
    }
}
