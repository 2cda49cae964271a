//! `str($v)` and `buf($v, N)` where `$v` holds a tracepoint field, `argN`
//! or `retval` (`$f = args->filename; ... str($f)`): bpftrace reads the
//! memory at the pointer the variable holds, which is the field's own
//! value, so it is `str(args->filename)`, which weft reads in the kernel as
//! the event happens. A variable qualifies when the item assigns it once, at the top
//! of its actions (not inside `if` or `while`), and never changes it;
//! `str()` calls after that assignment read the field instead.

use crate::ast::{Builtin, ExprKind, Item, Program, Stmt, for_each_expr};

/// The functions whose first argument weft reads in the kernel at the
/// event, so that it must name a field there.
const READ_AT_THE_EVENT: [&str; 2] = ["str", "buf"];

/// Rewrites each qualifying `str($v)` (or `buf($v, N)`) of `program` as
/// `str(FIELD)`.
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
        let holds_field = matches!(
            value.kind,
            ExprKind::Field(_) | ExprKind::Arg(_) | ExprKind::Builtin(Builtin::Retval)
        );
        if !holds_field || changes(&item.body, name) != 1 {
            continue;
        }
        let (name, value) = (name.clone(), value.clone());
        for stmt in &mut item.body[at + 1..] {
            let mut one = [stmt.clone()];
            crate::ast::for_each_expr_mut(&mut one, &mut |e| {
                e.rewrite(&mut |e| {
                    if let ExprKind::Call(function, args) = &mut e.kind
                        && READ_AT_THE_EVENT.contains(&function.as_str())
                        && let Some(first) = args.first_mut()
                        && matches!(&first.kind, ExprKind::Var(v) if *v == name)
                    {
                        first.kind = value.kind.clone();
                    }
                });
            });
            let [rewritten] = one;
            *stmt = rewritten;
        }
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
