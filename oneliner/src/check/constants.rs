//! Names of constants (`AF_INET`, `TCP_FIN_WAIT1`), kernel symbols'
//! addresses (`kaddr("avenrun")`), cgroups' ids (`cgroupid(PATH)`) and
//! types' sizes (`sizeof(struct sock)`), turned into their values before
//! the checker runs; and `cgroup`, turned into the members it reads.
//!
//! bpftrace takes them from C: the headers a script includes and, with
//! BTF, the kernel's enums. weft reads no headers, so it knows the macros
//! bpftrace's tools take from them and the UAPI macros scripts compare with
//! (`uapi.rs`), which are Linux's ABI and never change, and asks the
//! kernel's BTF for the enumerators.

use std::collections::HashMap;

use crate::{
    ast::{Builtin, Expr, ExprKind, ProbeKind, Program, SizeOf, UnOp},
    error::{Error, Result, Span},
    kernel::Kernel,
};

/// Macros of the headers bpftrace's tools include: `<sys/socket.h>`'s
/// address families, and the task state runqlat compares with.
const MACROS: &[(&str, i64)] = &[
    ("AF_UNSPEC", 0),
    ("AF_UNIX", 1),
    ("AF_LOCAL", 1),
    ("AF_INET", 2),
    ("AF_INET6", 10),
    ("AF_NETLINK", 16),
    ("AF_PACKET", 17),
    ("TASK_RUNNING", 0),
];

/// Replaces every constant in `program` by its value, `uaddr()`s too.
pub(crate) fn resolve(program: &mut Program, kernel: &dyn Kernel) -> Result<()> {
    let defines = std::mem::take(&mut program.defines);
    let mut failed = None;
    program.rewrite(&mut |expr| {
        if failed.is_none()
            && let Err(error) = {
                expand(expr, &defines);
                while without_hint(expr) {
                    expand(expr, &defines);
                }
                resolve_expr(expr, kernel)
            }
        {
            failed = Some(error);
        }
    });
    program.defines = defines;
    failed.map_or(Ok(()), Err)?;
    resolve_user_symbols(program, kernel)
}

/// Replaces each `uaddr("symbol")` by the address of data symbol `symbol`
/// in the file its item's uprobes or USDT probes attach to, as a pointer
/// to an integer of the symbol's size (64 bits but for 1, 2 and 4 bytes),
/// as bpftrace resolves it: the link-time address, which in a
/// position-independent file is not where it is loaded.
fn resolve_user_symbols(program: &mut Program, kernel: &dyn Kernel) -> Result<()> {
    for item in &mut program.items {
        let paths: Option<Vec<String>> = (item.probes.iter())
            .map(|probe| match &probe.kind {
                ProbeKind::Uprobe { path, .. } | ProbeKind::Usdt { path, .. } => Some(path.clone()),
                _ => None,
            })
            .collect();
        let mut failed = None;
        item.rewrite(&mut |expr| {
            if let ExprKind::Call(name, args) = &expr.kind
                && name == "uaddr"
                && failed.is_none()
            {
                match user_address(args, paths.as_deref(), kernel) {
                    Ok(pointer) => expr.kind = pointer,
                    Err(error) => failed = Some(Error::new(expr.span, error)),
                }
            }
        });
        if let Some(error) = failed {
            return Err(error);
        }
    }
    Ok(())
}

/// `uaddr(args)` in a probe on the files at `paths` (none where one of its
/// probes is no uprobe or USDT probe).
fn user_address(
    args: &[Expr],
    paths: Option<&[String]>,
    kernel: &dyn Kernel,
) -> std::result::Result<ExprKind, String> {
    let [
        Expr {
            kind: ExprKind::Str(symbol),
            span,
        },
    ] = args
    else {
        return Err("uaddr() takes a symbol's name: uaddr(\"ps1_prompt\")".into());
    };
    let paths = paths
        .filter(|paths| paths.iter().all(|p| !p.is_empty()))
        .ok_or("uaddr() names a symbol of the file a uprobe, uretprobe or USDT probe names")?;
    let mut found = None;
    for path in paths {
        let here = (kernel.user_object(path, symbol)?)
            .ok_or_else(|| format!("{path} has no symbol `{symbol}`"))?;
        if found.is_some_and(|found| found != here) {
            return Err(format!("`{symbol}` differs between the probe's files"));
        }
        found = Some(here);
    }
    let (address, size) = found.ok_or("uaddr() in a probe without a file")?;
    let bits = match size {
        1 | 2 | 4 => size as u8 * 8,
        _ => 64,
    };
    let address = Expr {
        kind: ExprKind::Int(address.cast_signed()),
        span: *span,
    };
    Ok(ExprKind::Unary(
        UnOp::Pointer { bits, signed: true },
        Box::new(address),
    ))
}

/// Puts a `#define`'s value in place of its name (and, if the value is
/// itself a defined name, that one's), as the C preprocessor does. The
/// value's own subexpressions are rewritten after it. The parser refused
/// defines that name themselves, so this ends.
fn expand(expr: &mut Expr, defines: &HashMap<String, Expr>) {
    while let ExprKind::Constant(name) = &expr.kind
        && let Some(value) = defines.get(name)
    {
        *expr = value.clone();
    }
}

/// Puts the address in place of bpftrace's address-space hints,
/// `kptr(x)` and `uptr(x)`, which weft needs not (it reads user or kernel
/// memory by the address): `str(uptr(arg0))` is `str(arg0)`. Whether it did.
fn without_hint(expr: &mut Expr) -> bool {
    let ExprKind::Call(name, args) = &mut expr.kind else {
        return false;
    };
    if !matches!(name.as_str(), "kptr" | "uptr") || args.len() != 1 {
        return false;
    }
    let address = args.remove(0);
    *expr = address;
    true
}

fn resolve_expr(expr: &mut Expr, kernel: &dyn Kernel) -> Result<()> {
    // A stack's mode (`kstack(perf)`) is a word, not a constant.
    if let ExprKind::Call(name, args) = &mut expr.kind
        && (name == "kstack" || name == "ustack")
        && let Some(first) = args.first_mut()
        && let ExprKind::Constant(mode) = &first.kind
    {
        first.kind = ExprKind::Str(mode.clone());
    }
    if let ExprKind::Call(name, args) = &expr.kind
        && matches!(name.as_str(), "kaddr" | "cgroupid")
    {
        let value = kernel_value(name, args, kernel).map_err(|e| Error::new(expr.span, e))?;
        expr.kind = ExprKind::Int(value);
        return Ok(());
    }
    if let ExprKind::Constant(name) = &expr.kind
        && name == "cgroup"
    {
        expr.kind = cgroup(expr.span);
        return Ok(());
    }
    if let ExprKind::SizeOf(SizeOf::Type(name)) = &expr.kind {
        let size = match UnOp::cast(name) {
            Some(UnOp::Cast { bits, .. }) => u32::from(bits) / 8,
            _ => kernel
                .record(name)
                .map(|id| kernel.record_size(id))
                .map_err(|e| Error::new(expr.span, e))?,
        };
        expr.kind = ExprKind::Int(i64::from(size));
        return Ok(());
    }
    if let ExprKind::Constant(name) = &expr.kind {
        let value = MACROS
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .or_else(|| super::uapi::value(name))
            .or_else(|| kernel.enumerator(name))
            .ok_or_else(|| {
                Error::new(
                    expr.span,
                    format!(
                        "unknown name `{name}`: not a builtin, nor a constant of the kernel's \
                         enums or of the headers weft knows (AF_*, TASK_RUNNING, errno values, \
                         O_*, AT_*, SIG*, PROT_*, MAP_*, S_I*, CLONE_*)"
                    ),
                )
            })?;
        expr.kind = ExprKind::Int(value);
    }
    Ok(())
}

/// What `kaddr("symbol")` (a kernel symbol's address) or
/// `cgroupid("path")` (a cgroup's id) names, or why nothing.
fn kernel_value(
    name: &str,
    args: &[Expr],
    kernel: &dyn Kernel,
) -> std::result::Result<i64, String> {
    let [
        Expr {
            kind: ExprKind::Str(text),
            ..
        },
    ] = args
    else {
        return Err(if name == "kaddr" {
            "kaddr() takes a symbol's name: kaddr(\"avenrun\")".into()
        } else {
            "cgroupid() takes a cgroup's path: cgroupid(\"/sys/fs/cgroup/system.slice\")".into()
        });
    };
    if name == "kaddr" {
        kernel
            .symbol(text)
            .map(|address| address as i64)
            .ok_or_else(|| format!("the kernel has no symbol `{text}` (see /proc/kallsyms)"))
    } else {
        kernel
            .cgroup_id(text)
            .map(|id| id as i64)
            .map_err(|e| format!("cgroupid(): {e}"))
    }
}

/// `cgroup`, the current task's cgroup v2 id, as the members the kernel's
/// `bpf_get_current_cgroup_id` reads: `curtask->cgroups->dfl_cgrp->kn->id`.
fn cgroup(span: Span) -> ExprKind {
    ["cgroups", "dfl_cgrp", "kn", "id"].into_iter().fold(
        ExprKind::Builtin(Builtin::Curtask),
        |base, name| ExprKind::Member {
            base: Box::new(Expr { kind: base, span }),
            name: name.to_string(),
            arrow: true,
        },
    )
}
