//! Expands an item's probes into attach points with the fields each one
//! offers: tracepoint and kprobe globs against the running kernel, raw
//! syscall tracepoints, fentry and uprobe targets, and the registers that
//! name kprobe arguments.

use crate::{
    ast::{Item, ProbeKind},
    error::{Error, Result, Span},
    kernel::{Field, FieldKind, Kernel, glob_match},
    registers::{self, REGISTER_ARGS},
};

/// A probe resolved to one attach point: a probe kind with its globs
/// expanded to one tracepoint or function.
pub type Target = ProbeKind;

/// Arguments a raw tracepoint may have.
const RAW_ARGS: u16 = 12;

/// `pt_regs::ax`: the return value.
const REGISTER_RET: u16 = 80;
/// `reg(NAME)`'s field, `reg_NAME` (a column of `--store`): register NAME
/// of a probe whose context is `struct pt_regs` (kprobes and uprobes).
pub(crate) fn register_field(name: &str) -> Option<Field> {
    Some(register(&format!("reg_{name}"), registers::offset(name)?))
}
/// The attach points of an item, with the fields of each.
/// `program`'s `-p` process's files a USDT probe without a path names;
/// `uprobe_args` the fields uprobes name from DWARF.
pub(crate) fn expand(
    item: &Item,
    kernel: &dyn Kernel,
    program: &crate::ast::Program,
    uprobe_args: &crate::uprobe_args::Args,
) -> Result<Vec<(Target, Vec<Field>)>> {
    let pid = program.pid;
    let mut out = Vec::new();
    for probe in &item.probes {
        let span = probe.span;
        match &probe.kind {
            ProbeKind::Begin => out.push((Target::Begin, Vec::new())),
            ProbeKind::End => out.push((Target::End, Vec::new())),
            ProbeKind::Interval { .. } => out.push((probe.kind.clone(), Vec::new())),
            ProbeKind::Profile { .. }
            | ProbeKind::PerfEvent { .. }
            | ProbeKind::Watchpoint { .. } => {
                out.push((probe.kind.clone(), Vec::new()));
            }
            ProbeKind::Iter { name } => out.push((probe.kind.clone(), iterator_fields(name))),
            ProbeKind::Tracepoint { category, name } => {
                out.extend(tracepoints(kernel, category, name, span)?);
            }
            ProbeKind::RawTracepoint { name } => {
                if !kernel.has_raw_tracepoint(name) {
                    return Err(Error::new(
                        span,
                        format!("no raw tracepoint `{name}` on this kernel"),
                    ));
                }
                let fields = (0..RAW_ARGS)
                    .map(|i| Field::slot(format!("arg{i}"), i))
                    .collect();
                out.push((Target::RawTracepoint { name: name.clone() }, fields));
            }
            ProbeKind::Kprobe { function, exit } => match kprobes(kernel, function, *exit, span) {
                Ok(found) => out.extend(found),
                // As bpftrace does: a glob matching nothing is left out
                // of a probe with other attach points
                // (`kprobe:lookup_fast, kprobe:lookup_fast.constprop.*`).
                Err(_) if item.probes.len() > 1 && function.contains(['*', '?']) => {}
                Err(error) => return Err(error),
            },
            ProbeKind::Fentry {
                function,
                exit,
                module,
            } => {
                out.extend(fentries(kernel, function, module.as_deref(), *exit, span)?);
            }
            ProbeKind::Usdt {
                path,
                provider,
                name,
                ..
            } if path.is_empty() || (path == "*" && pid.is_some()) => {
                out.extend(process_usdt(kernel, pid, provider, name, span)?);
            }
            ProbeKind::Usdt {
                path,
                provider,
                name,
                ..
            } if path.contains(['*', '?']) => {
                out.extend(usdt_in_files(kernel, path, provider, name, span)?);
            }
            ProbeKind::Usdt {
                path,
                provider,
                name,
                ..
            } => {
                let path = process_path(kernel, pid, path);
                out.extend(usdt(kernel, &path, provider, name, span)?);
            }
            ProbeKind::WatchArg { .. } => {
                out.extend(watched_functions(kernel, program, &probe.kind, span)?);
            }
            ProbeKind::Uprobe { path, symbol, exit } => {
                let mut fields = register_args();
                if *exit {
                    fields.push(register("retval", REGISTER_RET));
                } else if let Some(named) = uprobe_args.get(&(path.clone(), symbol.clone())) {
                    fields.extend(named.iter().cloned());
                }
                for (path, symbol) in uprobe_targets(kernel, pid, path, symbol, span)? {
                    let target = Target::Uprobe {
                        path,
                        symbol,
                        exit: *exit,
                    };
                    out.push((target, fields.clone()));
                }
            }
        }
    }
    Ok(out)
}

/// A watchpoint on a function's argument (`watchpoint:FUNC+argN`), one
/// per function of the `-p` process's file (else the `-c` command's) that
/// the glob matches, as bpftrace finds them.
fn watched_functions(
    kernel: &dyn Kernel,
    program: &crate::ast::Program,
    kind: &ProbeKind,
    span: Span,
) -> Result<Vec<(Target, Vec<Field>)>> {
    let ProbeKind::WatchArg { function, .. } = kind else {
        return Ok(Vec::new());
    };
    let path = match (program.pid, &program.command) {
        (Some(pid), _) => format!("/proc/{pid}/exe"),
        (None, Some(command)) => command.clone(),
        (None, None) => {
            return Err(Error::new(
                span,
                "a watchpoint on a function's argument watches the -p or -c process: give one",
            ));
        }
    };
    let found = uprobe_targets(kernel, None, &path, function, span)?;
    Ok((found.into_iter())
        .map(|(path, function)| {
            let mut target = kind.clone();
            if let Target::WatchArg {
                path: p,
                function: f,
                ..
            } = &mut target
            {
                (*p, *f) = (path, function);
            }
            (target, Vec::new())
        })
        .collect())
}

/// `path` as the `-p` process sees it: a file that is not in our mount
/// namespace but is in the process's is reached through its root
/// (`/proc/PID/root/PATH`), as bpftrace finds it.
fn process_path(kernel: &dyn Kernel, pid: Option<u32>, path: &str) -> String {
    if let Some(pid) = pid
        && path.starts_with('/')
        && kernel.paths(path).is_empty()
    {
        let theirs = format!("/proc/{pid}/root{path}");
        if !kernel.paths(&theirs).is_empty() {
            return theirs;
        }
    }
    path.to_owned()
}

/// The `(file, function)` pairs a uprobe names. A `path` with `*` or `?`
/// is every file it matches (`uprobe:*:FUNC` with `-p PID`: every file
/// the process has mapped) that has the function, as bpftrace expands it;
/// one without is the file as written.
fn uprobe_targets(
    kernel: &dyn Kernel,
    pid: Option<u32>,
    path: &str,
    symbol: &str,
    span: Span,
) -> Result<Vec<(String, String)>> {
    if !path.contains(['*', '?']) {
        let path = process_path(kernel, pid, path);
        let functions = uprobe_functions(kernel, &path, symbol, span)?;
        return Ok(functions.into_iter().map(|f| (path.clone(), f)).collect());
    }
    let files = match pid {
        Some(pid) if path == "*" => kernel.process_files(pid).map_err(|e| Error::new(span, e))?,
        _ => kernel.paths(path),
    };
    let mut found = Vec::new();
    for file in &files {
        let Ok((_, functions)) = kernel.uprobe_functions(file) else {
            continue;
        };
        found.extend(
            (functions.into_iter())
                .filter(|f| glob_match(symbol, f))
                .map(|f| (file.clone(), f)),
        );
    }
    found.dedup();
    if found.is_empty() {
        let what = if files.is_empty() {
            format!("no file matches `{path}`")
        } else {
            format!(
                "no function of the {} files matching `{path}` is `{symbol}`",
                files.len()
            )
        };
        return Err(Error::new(span, what));
    }
    Ok(found)
}

/// The functions a uprobe's `symbol` names in the file `path` names: the
/// symbol as written, or every function of the file's symbol tables a
/// glob matches (`uprobe:/bin/bash:readline*`), as bpftrace expands it.
fn uprobe_functions(
    kernel: &dyn Kernel,
    path: &str,
    symbol: &str,
    span: Span,
) -> Result<Vec<String>> {
    if !symbol.contains(['*', '?']) {
        return Ok(vec![symbol.to_owned()]);
    }
    let (file, functions) = kernel
        .uprobe_functions(path)
        .map_err(|e| Error::new(span, e))?;
    let mut found: Vec<String> = (functions.into_iter())
        .filter(|f| glob_match(symbol, f))
        .collect();
    found.dedup();
    if found.is_empty() {
        return Err(Error::new(
            span,
            format!("no function of {file} matches `{symbol}`"),
        ));
    }
    Ok(found)
}

fn tracepoints(
    kernel: &dyn Kernel,
    category: &str,
    name: &str,
    span: Span,
) -> Result<Vec<(Target, Vec<Field>)>> {
    let found = kernel.tracepoints(category, name);
    if found.is_empty() {
        return Err(Error::new(
            span,
            format!(
                "tracepoint not found: {category}:{name} (no tracepoint matches it on this kernel: see /sys/kernel/tracing/events)"
            ),
        ));
    }
    found
        .into_iter()
        .map(|(category, name)| {
            let fields = kernel
                .tracepoint_fields(&category, &name)
                .map_err(|e| Error::new(span, e))?;
            Ok((Target::Tracepoint { category, name }, fields))
        })
        .collect()
}

/// Functions bpftrace refuses a kretprobe on: the return trampoline takes
/// a spinlock, and on these the kernel can deadlock.
const BANNED_KRETPROBES: [&str; 4] = [
    "_raw_spin_lock",
    "_raw_spin_lock_irqsave",
    "_raw_spin_unlock_irqrestore",
    "queued_spin_lock_slowpath",
];

fn kprobes(
    kernel: &dyn Kernel,
    function: &str,
    exit: bool,
    span: Span,
) -> Result<Vec<(Target, Vec<Field>)>> {
    if exit && BANNED_KRETPROBES.contains(&function) {
        return Err(Error::new(
            span,
            format!("kretprobe:{function} can't be used as it might lock up your system."),
        ));
    }
    if !kernel.has_kprobes() {
        let (kind, alternative) = if exit {
            ("kretprobe", "fexit")
        } else {
            ("kprobe", "fentry")
        };
        return Err(Error::new(
            span,
            format!(
                "this kernel has no kprobes (CONFIG_KPROBES is off): use {alternative}:{function} instead of {kind}:{function}"
            ),
        ));
    }
    Ok(matching(kernel, function, span)?
        .into_iter()
        // A glob passes them by.
        .filter(|function| !(exit && BANNED_KRETPROBES.contains(&function.as_str())))
        .map(|function| {
            let mut fields = register_args();
            if exit {
                fields.push(register("retval", REGISTER_RET));
            }
            (Target::Kprobe { function, exit }, fields)
        })
        .collect())
}

/// The functions `function` matches (in `module`, when one is written),
/// each with its arguments from BTF.
fn fentries(
    kernel: &dyn Kernel,
    function: &str,
    module: Option<&str>,
    exit: bool,
    span: Span,
) -> Result<Vec<(Target, Vec<Field>)>> {
    matching(kernel, function, span)?
        .into_iter()
        .map(|function| {
            let signature = kernel
                .function(&function)
                .map_err(|e| Error::new(span, e))?;
            let found = signature.module.as_deref().unwrap_or("vmlinux");
            if let Some(module) = module.filter(|m| *m != found) {
                let whose = match &signature.module {
                    Some(found) => format!("the {found} module's"),
                    None => "the kernel's own (vmlinux)".into(),
                };
                return Err(Error::new(
                    span,
                    format!("`{function}` is {whose}, not {module}'s"),
                ));
            }
            let mut fields: Vec<Field> = signature
                .args
                .iter()
                .enumerate()
                .map(|(i, (name, pointee))| Field {
                    pointee: pointee.clone(),
                    ..Field::slot(name.clone(), i as u16)
                })
                .collect();
            if exit {
                fields.push(Field {
                    pointee: signature.returns.clone(),
                    ..Field::slot("retval", signature.args.len() as u16)
                });
            }
            let module = module.map(str::to_string);
            Ok((
                Target::Fentry {
                    function,
                    exit,
                    module,
                },
                fields,
            ))
        })
        .collect()
}

/// The sites of the USDT probes of `path` that match the globs, each with
/// its arguments.
fn usdt(
    kernel: &dyn Kernel,
    path: &str,
    provider: &str,
    name: &str,
    span: Span,
) -> Result<Vec<(Target, Vec<Field>)>> {
    let (file, sites) = kernel.usdt(path).map_err(|e| Error::new(span, e))?;
    let mut out = Vec::new();
    for found in &sites {
        if !glob_match(provider, &found.provider) || !glob_match(name, &found.name) {
            continue;
        }
        let target = Target::Usdt {
            path: file.clone(),
            provider: found.provider.clone(),
            name: found.name.clone(),
            offset: found.offset,
            semaphore: found.semaphore,
        };
        out.push((target, crate::usdt::fields(&found.args)));
    }
    if out.is_empty() {
        return Err(Error::new(
            span,
            format!("{file} has no USDT probe {provider}:{name}"),
        ));
    }
    Ok(out)
}

/// A USDT probe whose path is a glob (`usdt:/usr/lib/*/libfoo*.so:*`):
/// the sites of every file it matches that has them, as bpftrace expands
/// it.
fn usdt_in_files(
    kernel: &dyn Kernel,
    path: &str,
    provider: &str,
    name: &str,
    span: Span,
) -> Result<Vec<(Target, Vec<Field>)>> {
    let found = usdt_of(kernel, &kernel.paths(path), provider, name, span);
    if found.is_empty() {
        return Err(Error::new(
            span,
            format!("no file that {path} matches has a USDT probe {provider}:{name}"),
        ));
    }
    Ok(found)
}

/// A USDT probe without a path: the sites `provider:name` matches in
/// every file process `pid` has mapped that has them, as bpftrace finds
/// them with `-p PID`.
fn process_usdt(
    kernel: &dyn Kernel,
    pid: Option<u32>,
    provider: &str,
    name: &str,
    span: Span,
) -> Result<Vec<(Target, Vec<Field>)>> {
    let Some(pid) = pid else {
        return Err(Error::new(
            span,
            "a USDT probe without a path is looked for in the -p process's files: give -p PID, \
             or the path (usdt:PATH:PROBE)",
        ));
    };
    let files = kernel.process_files(pid).map_err(|e| Error::new(span, e))?;
    let found = usdt_of(kernel, &files, provider, name, span);
    if found.is_empty() {
        return Err(Error::new(
            span,
            format!("no file of process {pid} has the USDT probe {provider}:{name}"),
        ));
    }
    Ok(found)
}

/// The sites `provider:name` matches in each of `files`; a file without
/// USDT notes, or without this probe, is passed by.
fn usdt_of(
    kernel: &dyn Kernel,
    files: &[String],
    provider: &str,
    name: &str,
    span: Span,
) -> Vec<(Target, Vec<Field>)> {
    (files.iter())
        .filter_map(|file| usdt(kernel, file, provider, name, span).ok())
        .flatten()
        .collect()
}

fn matching(kernel: &dyn Kernel, glob: &str, span: Span) -> Result<Vec<String>> {
    // A plain name is tried as written: kprobes reach functions that the
    // list of traceable ones may leave out, and attaching says if it fails.
    if !glob.contains(['*', '?']) {
        return Ok(vec![glob.to_string()]);
    }
    let found = kernel.functions(glob);
    if found.is_empty() {
        return Err(Error::new(
            span,
            format!("no kernel function matches `{glob}` (see /proc/kallsyms; it may be inlined)"),
        ));
    }
    Ok(found)
}

/// The fields of iterator `name`'s context, `struct bpf_iter__NAME`, as
/// the kernel lays them out for BPF (each in 8 bytes): its meta and task,
/// and for `task_file` the file's descriptor and the file.
fn iterator_fields(name: &str) -> Vec<Field> {
    let pointer = |name: &str, index: u16, pointee: &str| Field {
        pointee: Some(pointee.into()),
        kind: FieldKind::Pointer { constant: false },
        ..Field::slot(name, index)
    };
    let mut fields = vec![
        pointer("meta", 0, "struct bpf_iter_meta"),
        pointer("task", 1, "struct task_struct"),
    ];
    if name == "task_file" {
        fields.push(Field {
            size: 4,
            signed: false,
            ..Field::slot("fd", 2)
        });
        fields.push(pointer("file", 3, "struct file"));
    }
    fields
}

fn register(name: &str, offset: u16) -> Field {
    Field {
        name: name.into(),
        offset,
        size: 8,
        signed: true,
        kind: FieldKind::Int,
        pointee: None,
        element: None,
    }
}

pub(crate) fn register_args() -> Vec<Field> {
    REGISTER_ARGS
        .iter()
        .enumerate()
        .map(|(i, offset)| register(&format!("arg{i}"), *offset))
        .collect()
}
