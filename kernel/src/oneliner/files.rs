//! The files uprobes and USDT probes name: found as bpftrace finds them,
//! and a file's USDT probe sites.

use std::path::{Path, PathBuf};

use crate::error::{Context as _, Result, bail};
use weft_oneliner::kernel::glob_match;
use weft_symbols::{Elf, UsdtProbe};

/// The file a uprobe names, as bpftrace finds it: a path as it is; a bare
/// name as a program on `PATH`, else as a library (`libssl` or `ssl`:
/// `libssl.so`, then the highest `libssl.so.N`) in the system's library
/// directories. Only ELF files count: with a C library's development files
/// installed, `libc.so` is a linker script naming `libc.so.6`.
pub fn uprobe_file(name: &str) -> Result<PathBuf> {
    if name.contains('/') {
        return Ok(name.into());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    // A script on PATH (a version manager's shim) cannot be probed.
    if let Some(program) = std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file() && is_elf(p))
    {
        return Ok(program);
    }
    let stem = if name.starts_with("lib") {
        name.to_owned()
    } else {
        format!("lib{name}")
    };
    let exact = format!("{stem}.so");
    let versioned = format!("{stem}.so.");
    for dir in [
        "/lib/x86_64-linux-gnu",
        "/usr/lib/x86_64-linux-gnu",
        "/lib64",
        "/usr/lib64",
        "/usr/local/lib",
        "/usr/lib",
        "/lib",
    ] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| *n == exact || n.starts_with(&versioned))
            .filter(|n| is_elf(&Path::new(dir).join(n)))
            .collect();
        names.sort_by_key(|n| (*n != exact, std::cmp::Reverse(n.clone())));
        if let Some(found) = names.first() {
            return Ok(Path::new(dir).join(found));
        }
    }
    bail!("uprobe: no program or library called {name} (give its path)")
}

/// The regular files `pattern` matches, sorted: each component with `*`
/// or `?` matched against its directory's entries (not those starting
/// with `.`), as a shell expands it.
pub fn glob_paths(pattern: &str) -> Vec<String> {
    let mut found = vec![String::from(if pattern.starts_with('/') {
        "/"
    } else {
        ""
    })];
    for component in pattern.split('/').filter(|c| !c.is_empty()) {
        let mut next = Vec::new();
        for dir in &found {
            if !component.contains(['*', '?']) {
                next.push(format!("{dir}{component}/"));
                continue;
            }
            let Ok(entries) = std::fs::read_dir(if dir.is_empty() { "." } else { dir }) else {
                continue;
            };
            let mut names: Vec<String> = (entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok()))
            .filter(|name| !name.starts_with('.') && glob_match(component, name))
            .collect();
            names.sort_unstable();
            next.extend(names.into_iter().map(|name| format!("{dir}{name}/")));
        }
        found = next;
    }
    found
        .into_iter()
        .map(|path| path.trim_end_matches('/').to_owned())
        .filter(|path| Path::new(path).is_file())
        .collect()
}

/// The USDT probe sites of the file at `path`.
pub fn usdt_probes(path: &Path) -> Result<Vec<UsdtProbe>> {
    let bytes = read(path)?;
    Ok(Elf::parse(&path.display().to_string(), &bytes)?.usdt_probes()?)
}

/// The names of the functions the file at `path` defines, as stored
/// (its symbol table, or its debug file's where it is stripped, and its
/// dynamic symbols), sorted, each once: what bpftrace's `-l` lists.
pub fn functions(path: &Path) -> Result<Vec<String>> {
    let bytes = read(path)?;
    let elf = Elf::parse(&path.display().to_string(), &bytes)?;
    let finder = weft_symbols::Finder::new(Vec::new(), false);
    let mut names: Vec<String> = (finder.functions(path, &elf).into_iter())
        .map(|symbol| symbol.name)
        .collect();
    names.sort_unstable();
    names.dedup();
    Ok(names)
}

/// The link-time address and size of data symbol `name` of the file at
/// `path` (`uaddr()`), if it has one.
pub fn object(path: &Path, name: &str) -> Result<Option<(u64, u64)>> {
    let bytes = read(path)?;
    let elf = Elf::parse(&path.display().to_string(), &bytes)?;
    Ok(elf.object(name).map(|symbol| (symbol.addr, symbol.size)))
}

/// The file at `path`, which a user named: a regular file of bounded
/// size, never waited on (`weft_symbols::read_file`).
pub(super) fn read(path: &Path) -> Result<Vec<u8>> {
    weft_symbols::read_file(path).with_context(|| format!("failed to read {}", path.display()))
}

/// Whether `path` starts as an ELF file does.
fn is_elf(path: &Path) -> bool {
    let mut magic = [0; 4];
    std::fs::File::open(path)
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut magic))
        .is_ok_and(|()| magic == *b"\x7fELF")
}
