//! `weft trace -l [SEARCH]`: the probes this kernel offers, a line each,
//! as bpftrace's `-l` lists them; with `-v`, each tracepoint's fields.
//!
//! SEARCH is a glob (`*`, `?`) over whole probe names
//! (`tracepoint:syscalls:sys_enter_open*`, `t:sched:*`, `kprobe:vfs_*`);
//! one without a probe type (`*sleep*`) matches the name after the type.
//! `usdt:PATH:*` lists the USDT probes of a program or library,
//! `uprobe:PATH:*` the functions a uprobe may attach to there, and
//! `kfunc:[MODULE:]FUNCTION` the functions fentry attaches to.

use std::{io::Write, path::Path};

use crate::error::{Error, Result, bail};
use weft_kernel::{ebpf, oneliner::kernel::Kernel};
use weft_oneliner::{Kernel as _, ast::PerfEvent, kernel::glob_match};

/// The probe types `-l` lists, with the short names bpftrace takes.
const TYPES: &[(&str, &str)] = &[
    ("tracepoint", "t"),
    ("kprobe", "k"),
    ("software", "s"),
    ("hardware", "h"),
];

/// Writes the probes matching `search` (all without one) to `out`, a
/// reader that stops reading (`| head`) ending it quietly. With `pid`, a
/// user probe's path `*` is every file the process has mapped, and
/// without a search those files' uprobes and USDT probes are listed.
pub fn list(
    search: Option<&str>,
    verbose: bool,
    pid: Option<u32>,
    out: &mut dyn Write,
) -> Result<()> {
    let tracefs = ebpf::tracefs()?;
    let kernel = Kernel::new(tracefs);
    let files = Files {
        kernel: &kernel,
        pid,
    };
    if search.is_none() && pid.is_some() {
        let mut entries = uprobes(&files, "uprobe", "*:*", verbose)?;
        entries.extend(usdts(&files, "*:*:*")?);
        return emit_all(out, entries);
    }
    if let Some(search) = search {
        check_search(search)?;
    }
    if let Some((kind, rest)) = search.and_then(|s| s.split_once(':')) {
        let user = [("usdt", "U"), ("uprobe", "u"), ("uretprobe", "ur")];
        // `*:PATH:*`: each user probe type the glob matches, over a file.
        let globbed = kind.contains(['*', '?']) && rest.contains(':');
        // bpftrace lists uretprobes only by their own name.
        let kinds: Vec<&str> = if globbed {
            ["usdt", "uprobe"]
                .into_iter()
                .filter(|k| glob_match(kind, k))
                .collect()
        } else {
            user.iter()
                .filter(|(k, short)| kind == *k || kind == *short)
                .map(|(k, _)| *k)
                .collect()
        };
        if !kinds.is_empty() {
            let mut entries = Vec::new();
            for kind in kinds {
                let found = match kind {
                    "usdt" => usdts(&files, rest),
                    _ => uprobes(&files, kind, rest, verbose),
                };
                // Over a glob of types, a type the file has none of lists
                // nothing (a program without USDT notes).
                match found {
                    Err(_) if globbed => {}
                    found => entries.extend(found?),
                }
            }
            return emit_all(out, entries);
        }
    }
    if let Some((kind, rest)) = search.and_then(|s| s.split_once(':'))
        && let Some(exit) = kfunc_kind(kind)
    {
        return list_kfuncs(&kernel, exit, rest, verbose, out);
    }
    let (types, glob) = scope(search.unwrap_or("*"))?;
    for kind in types {
        let mut names: Vec<String> = names(kind, &kernel)
            .into_iter()
            .filter(|name| glob_match(&glob, name))
            .collect();
        // In the order bpftrace lists them: by the whole name.
        names.sort_unstable();
        for name in names {
            let mut entry = format!("{kind}:{name}\n");
            if verbose && kind == "tracepoint" {
                entry.push_str(&fields(tracefs, &name)?);
            }
            if !emit(out, &entry)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Whether probe type `kind` is bpftrace's kfunc (false) or kretfunc
/// (true), by any of their names; none for other types.
fn kfunc_kind(kind: &str) -> Option<bool> {
    match kind {
        "kfunc" | "fentry" | "f" => Some(false),
        "kretfunc" | "fexit" | "fr" => Some(true),
        _ => None,
    }
}

/// `-l kfunc:[MODULE:]FUNCTION`: the functions fentry (or, with `exit`,
/// fexit) attaches to, as bpftrace lists them (`kfunc:vmlinux:vfs_read`);
/// with `verbose`, each one's parameters and return.
fn list_kfuncs(
    kernel: &Kernel,
    exit: bool,
    search: &str,
    verbose: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let kind = if exit { "kretfunc" } else { "kfunc" };
    let mut functions = kernel.fentry_functions().map_err(Error::Invalid)?;
    // A search without a module matches the function alone.
    functions.retain(|(module, function)| {
        if search.contains(':') {
            glob_match(search, &format!("{module}:{function}"))
        } else {
            glob_match(search, function)
        }
    });
    functions.sort_unstable();
    for (module, function) in functions {
        let mut entry = format!("{kind}:{module}:{function}\n");
        if verbose {
            for line in kernel.declarations(&function).unwrap_or_default() {
                entry.push_str("    ");
                entry.push_str(&line);
                entry.push('\n');
            }
        }
        if !emit(out, &entry)? {
            return Ok(());
        }
    }
    Ok(())
}

/// `-l usdt:PATH[:[PROVIDER:]PROBE]`: the USDT probes of a program or
/// library (a file has no list of its own to search through otherwise),
/// once each however many sites they have.
fn usdts(files: &Files<'_>, search: &str) -> Result<Vec<String>> {
    let (path, provider, name) = match search.split(':').collect::<Vec<_>>()[..] {
        [path] => (path, "*", "*"),
        [path, name] | [path, "", name] => (path, "*", name),
        [path, provider, name] => (path, provider, name),
        _ => bail!("`usdt:{search}`: expected usdt:PATH:[PROVIDER:]PROBE"),
    };
    let kernel = files.kernel;
    files.each("usdt", path, |file| {
        let (file, sites) = kernel.usdt(file).map_err(Error::Invalid)?;
        Ok(sites
            .iter()
            .filter(|s| glob_match(provider, &s.provider) && glob_match(name, &s.name))
            .map(|s| format!("usdt:{file}:{}:{}\n", s.provider, s.name))
            .collect())
    })
}

/// Where user probes' files are found: the kernel's view of files, and
/// the process `-p` names, if any.
struct Files<'a> {
    kernel: &'a Kernel,
    pid: Option<u32>,
}

impl Files<'_> {
    /// The entries `list` finds in the file `path` names, or in each file
    /// its glob matches (with `-p`, `*` is each file the process has
    /// mapped), as bpftrace lists them: files it cannot read as programs
    /// (scripts) are passed over, and a glob that matches no file is an
    /// error.
    fn each(
        &self,
        kind: &str,
        path: &str,
        mut list: impl FnMut(&str) -> Result<Vec<String>>,
    ) -> Result<Vec<String>> {
        let files = match self.pid {
            Some(pid) if path == "*" || path.is_empty() => {
                self.kernel.process_files(pid).map_err(Error::Invalid)?
            }
            _ if !path.contains(['*', '?']) => return list(path),
            _ => self.kernel.paths(path),
        };
        if files.is_empty() {
            bail!("`{kind}:{path}`: the path matches no file");
        }
        Ok(files
            .iter()
            .filter_map(|file| list(file).ok())
            .flatten()
            .collect())
    }
}

/// An error for a search bpftrace refuses: a character no probe name has.
fn check_search(search: &str) -> Result<()> {
    match search.chars().find(|c| c.is_control() || c.is_whitespace()) {
        Some(c) => bail!(
            "invalid character {c:?} in search expression `{}`",
            search.escape_debug()
        ),
        None => Ok(()),
    }
}

/// Writes `entries` sorted as bpftrace sorts its list (whole lines: the
/// probes of `/usr/bin/python3.11` before those of `/usr/bin/python3`),
/// each once, until the reader stops reading.
fn emit_all(out: &mut dyn Write, mut entries: Vec<String>) -> Result<()> {
    entries.sort_unstable();
    entries.dedup();
    for entry in entries {
        if !emit(out, &entry)? {
            break;
        }
    }
    Ok(())
}

/// `-l uprobe:PATH[:FUNCTION]`: the functions of a program or library a
/// uprobe may attach to, as bpftrace lists them; with `-v`, the parameters
/// of each its DWARF describes.
fn uprobes(files: &Files<'_>, kind: &str, search: &str, verbose: bool) -> Result<Vec<String>> {
    let (path, glob) = search.rsplit_once(':').unwrap_or((search, "*"));
    files.each(kind, path, |file| {
        file_uprobes(files.kernel, kind, file, glob, verbose)
    })
}

/// The functions of one file matching `glob`, with their parameters, as
/// probes of `kind` (`uprobe` or `uretprobe`).
fn file_uprobes(
    kernel: &Kernel,
    kind: &str,
    path: &str,
    glob: &str,
    verbose: bool,
) -> Result<Vec<String>> {
    let (file, functions) = kernel
        .uprobe_functions(path)
        .map_err(|e| Error::Invalid(format!("uprobe:{path}: {e}")))?;
    let matching: Vec<&str> = (functions.iter())
        .filter(|name| glob_match(glob, name))
        .map(String::as_str)
        .collect();
    let declarations = if verbose {
        weft_kernel::oneliner::dwarf::declarations(Path::new(&file), &matching)?
    } else {
        std::collections::HashMap::new()
    };
    Ok(matching
        .into_iter()
        .map(|name| {
            let mut entry = format!("{kind}:{file}:{name}\n");
            for line in declarations.get(name).into_iter().flatten() {
                entry.push_str("    ");
                entry.push_str(line);
                entry.push('\n');
            }
            entry
        })
        .collect())
}

/// Writes one entry; false when the reader has stopped reading (`| head`).
fn emit(out: &mut dyn Write, entry: &str) -> Result<bool> {
    match out.write_all(entry.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        written => Ok(written.map(|()| true)?),
    }
}

/// The probe types a search covers and the glob their names must match:
/// `TYPE:REST` (a type or its short name) covers that type with `REST`;
/// a glob over the type (`*:vfs_read`) the types it matches; a search
/// without a type every type. A type that is none of them is an error
/// (`syscalls:*` names a category, not a type).
fn scope(search: &str) -> Result<(Vec<&'static str>, String)> {
    let Some((kind, rest)) = search.split_once(':') else {
        let all = TYPES.iter().map(|(full, _)| *full).collect();
        return Ok((all, search.to_owned()));
    };
    if let Some((full, _)) = TYPES.iter().find(|(f, s)| kind == *f || kind == *s) {
        return Ok((vec![full], rest.to_owned()));
    }
    let types: Vec<&str> = (TYPES.iter())
        .map(|(full, _)| *full)
        .filter(|full| glob_match(kind, full))
        .collect();
    if types.is_empty() {
        bail!(
            "`{search}`: unknown probe type `{kind}` (-l lists tracepoint, kprobe, kfunc, kretfunc, uprobe:PATH, usdt:PATH, software and hardware probes)"
        );
    }
    Ok((types, rest.to_owned()))
}

/// The names after `kind:` of every probe of that type here.
fn names(kind: &str, kernel: &Kernel) -> Vec<String> {
    match kind {
        // ftrace's own events (`ftrace:function`) have formats but no
        // id a BPF program can attach to.
        "tracepoint" => kernel
            .tracepoints("*", "*")
            .into_iter()
            .filter(|(category, _)| category != "ftrace")
            .map(|(category, name)| format!("{category}:{name}"))
            .collect(),
        // Without kprobes (CONFIG_KPROBES off) nothing can attach there.
        // The compiler's local copies (`vfs_statfs.part.0.isra.0`) are
        // left out, as bpftrace lists them; a probe may still name one.
        "kprobe" if kernel.has_kprobes() => kernel
            .functions("*")
            .into_iter()
            .filter(|name| !name.contains('.'))
            .collect(),
        "software" | "hardware" => PerfEvent::names(kind == "hardware")
            .into_iter()
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// A tracepoint's own fields (not the common ones), a line each as its
/// format file declares them: `    const char * filename`.
fn fields(tracefs: &Path, name: &str) -> Result<String> {
    let (category, event) = name.split_once(':').unwrap_or((name, ""));
    let format = ebpf::read_tracepoint_format(tracefs, category, event)?;
    let mut out = String::new();
    for line in format.lines() {
        let Some(declaration) = line
            .trim()
            .strip_prefix("field:")
            .and_then(|rest| rest.split(';').next())
        else {
            continue;
        };
        let field = declaration.rsplit([' ', '*']).next().unwrap_or_default();
        if !field.starts_with("common_") {
            out.push_str("    ");
            out.push_str(declaration);
            out.push('\n');
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_name_a_type_or_all_of_them() {
        let scope = |search| scope(search).unwrap();
        assert_eq!(
            scope("t:syscalls:*"),
            (vec!["tracepoint"], "syscalls:*".to_owned())
        );
        assert_eq!(scope("kprobe:vfs_*"), (vec!["kprobe"], "vfs_*".to_owned()));
        assert_eq!(scope("*sleep*").0.len(), TYPES.len());
        assert_eq!(
            scope("*:cpu*"),
            (
                vec!["tracepoint", "kprobe", "software", "hardware"],
                "cpu*".to_owned()
            )
        );
        assert_eq!(scope("s*:cpu*").0, ["software"]);
    }

    #[test]
    fn a_search_of_an_unknown_probe_type_is_an_error() {
        let error = scope("syscalls:sys_enter_*").unwrap_err().to_string();
        assert!(error.contains("unknown probe type `syscalls`"), "{error}");
    }
}
