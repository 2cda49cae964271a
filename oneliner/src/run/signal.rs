//! `signal(SIG)`: a signal the kernel sends the current task's process at
//! the event (`bpf_send_signal`), as bpftrace's does. The kernel sends it
//! before weft sees the event, so the kernel alone must know whether to:
//! the probe's predicate is one it tests in full, and the call stands at
//! the top of the probe's block, not under an `if` or `while`.

use crate::{
    ast::{Expr, ExprKind, Item, Stmt, for_each_expr},
    error::{Error, Result, Span},
    plan::Attach,
};

/// The signals by name, `SIG` left out (`"KILL"`, `"USR1"`).
const SIGNALS: [(&str, u8); 31] = [
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("PWR", 30),
    ("SYS", 31),
];

/// The signal `signal(...)`'s arguments name: a name with or without
/// `SIG`, or a number from 1 to 64.
pub(crate) fn number(args: &[Expr], span: Span) -> Result<u8> {
    match args {
        [
            Expr {
                kind: ExprKind::Str(name),
                ..
            },
        ] => {
            let short = name.strip_prefix("SIG").unwrap_or(name);
            SIGNALS
                .iter()
                .find(|(n, _)| *n == short)
                .map(|(_, number)| *number)
                .ok_or_else(|| Error::new(span, format!("{name} is not a valid signal")))
        }
        [
            Expr {
                kind: ExprKind::Int(n),
                ..
            },
        ] => u8::try_from(*n)
            .ok()
            .filter(|n| (1..=64).contains(n))
            .ok_or_else(|| {
                Error::new(
                    span,
                    format!("{n} is not a valid signal, allowed range: [1,64]"),
                )
            }),
        _ => Err(Error::new(
            span,
            "signal() takes a signal's name or number: signal(\"KILL\"), signal(9)",
        )),
    }
}

/// Gives `item`'s attach points the signal its block sends, if it sends
/// one; `whole_predicate` says whether the kernel tests all of its
/// predicate.
pub(crate) fn attach(item: &Item, attaches: &mut [Attach], whole_predicate: bool) -> Result<()> {
    let top = item.body.iter().find_map(|stmt| match stmt {
        Stmt::Expr(expr) => is_signal(expr).then_some(expr),
        _ => None,
    });
    let mut nested = None;
    for stmt in &item.body {
        if let Stmt::If { .. } | Stmt::While { .. } = stmt {
            for_each_expr(std::slice::from_ref(stmt), &mut |e| {
                if is_signal(e) {
                    nested.get_or_insert(e.span);
                }
            });
        }
    }
    if let Some(span) = nested {
        return Err(Error::new(
            span,
            "signal() is sent by the kernel at the event, so it cannot be under an `if` or \
             `while`: put the condition in the probe's predicate",
        ));
    }
    let Some(call) = top else {
        return Ok(());
    };
    let ExprKind::Call(_, args) = &call.kind else {
        unreachable!("is_signal")
    };
    let signal = number(args, call.span)?;
    if let Some(attach) = attaches.iter().find(|a| !a.in_kernel()) {
        return Err(Error::new(
            call.span,
            format!(
                "signal can not be used with \"{}\" probes",
                attach.target.name()
            ),
        ));
    }
    if !whole_predicate {
        return Err(Error::new(
            call.span,
            "signal() is sent by the kernel at the event, so the kernel must test the whole \
             predicate: `&&` of pid, tid, uid, cpu, a field, argN or retval compared with a \
             constant, or comm == \"name\" (four at most)",
        ));
    }
    for attach in attaches {
        attach.signal = Some(signal);
    }
    Ok(())
}

fn is_signal(expr: &Expr) -> bool {
    matches!(&expr.kind, ExprKind::Call(name, _) if name == "signal")
}
