//! Which symbol tables name a file's functions: its own `.symtab`, or
//! when it was stripped the one of its separate debug file, found as gdb
//! finds it; and always its `.dynsym`.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use crate::{
    demangle::demangle,
    elf::Elf,
    table::{Symbol, Symbols},
};

/// Where debian's `-dbgsym` packages (and gdb, and perf) keep debug files.
const SYSTEM_DEBUG_DIR: &str = "/usr/lib/debug";

/// The functions of one file at their file offsets (`addr`), names as
/// stored.
#[derive(Debug, Clone, Default)]
pub struct FileOffsets {
    functions: Vec<Symbol>,
    /// The loadable segments, which place a link-time address in the file.
    segments: Vec<crate::elf::Segment>,
    /// The libraries the file needs (`DT_NEEDED`), where the dynamic
    /// linker looks for what it lacks.
    pub needed: Vec<String>,
}

impl FileOffsets {
    /// Where a uprobe on `place` attaches, as bpftrace reads the place: a
    /// function (`readline`, as [`Self::offset`] finds it), a function and
    /// bytes into it (`readline+4`), or a link-time address in the file
    /// (`0x4a2f0`, as `nm` and `objdump` print it).
    pub fn place(&self, place: &str) -> Option<u64> {
        let number = |text: &str| match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => text.parse::<u64>().ok(),
        };
        if let Some(address) = number(place) {
            return self.segments.iter().find_map(|s| s.file_offset(address));
        }
        if let Some((name, bytes)) = place.rsplit_once('+')
            && let Some(bytes) = number(bytes)
        {
            return self.offset(name)?.checked_add(bytes);
        }
        self.offset(place)
    }

    /// Why bpftrace would not probe `place` though [`Self::place`] finds
    /// it: bytes past the function's end (`readline+100000`), or an
    /// address inside no function.
    pub fn refused(&self, place: &str) -> Option<String> {
        let number = |text: &str| match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => text.parse::<u64>().ok(),
        };
        if let Some(address) = number(place) {
            // Functions are held by their offsets in the file.
            let offset = self.segments.iter().find_map(|s| s.file_offset(address))?;
            let inside = |f: &Symbol| (f.addr..f.addr + f.size.max(1)).contains(&offset);
            return (!self.functions.iter().any(inside))
                .then(|| format!("Could not resolve address: 0x{address:x} is in no function"));
        }
        let (name, bytes) = place.rsplit_once('+')?;
        let bytes = number(bytes)?;
        let function = self
            .functions
            .iter()
            .find(|f| f.name == name || demangle(&f.name) == name)?;
        (function.size > 0 && bytes >= function.size).then(|| {
            format!(
                "Offset outside the function bounds ('{name}' size is {})",
                function.size
            )
        })
    }

    /// Where function `name` starts: matched as stored, then demangled,
    /// then (C++) demangled without its parameter list.
    pub fn offset(&self, name: &str) -> Option<u64> {
        let functions = &self.functions;
        functions
            .iter()
            .find(|f| f.name == name)
            .or_else(|| functions.iter().find(|f| demangle(&f.name) == name))
            .or_else(|| {
                functions.iter().find(|f| {
                    demangle(&f.name)
                        .split_once('(')
                        .is_some_and(|(n, _)| n == name)
                })
            })
            .map(|f| f.addr)
    }
}

/// Finds the function names of ELF files.
#[derive(Debug, Clone)]
pub struct Finder {
    /// Searched for debug files in this order: `--debug-dir`s, then the
    /// system's.
    debug_dirs: Vec<PathBuf>,
    demangle: bool,
}

impl Default for Finder {
    fn default() -> Self {
        Self::new(Vec::new(), true)
    }
}

impl Finder {
    /// A finder that looks in `debug_dirs` before `/usr/lib/debug`, and
    /// demangles names when `demangle` is set.
    pub fn new(mut debug_dirs: Vec<PathBuf>, demangle: bool) -> Self {
        debug_dirs.push(PathBuf::from(SYSTEM_DEBUG_DIR));
        Self {
            debug_dirs,
            demangle,
        }
    }

    /// The functions of `elf` (read from `path`), at link-time addresses.
    pub fn functions(&self, path: &Path, elf: &Elf) -> Vec<Symbol> {
        let mut functions = if elf.has_symtab() {
            elf.functions(false)
        } else {
            self.debug_functions(path, elf)
        };
        // After `.symtab`: where both name an address, `.symtab` wins.
        functions.extend(elf.functions(true));
        if self.demangle {
            for function in &mut functions {
                if let std::borrow::Cow::Owned(name) = demangle(&function.name) {
                    function.name = name;
                }
            }
        }
        functions
    }

    /// The parameters of `function` from the DWARF of `elf` (read from
    /// `path`), else of its separate debug file; None where neither
    /// describes it. A function the DWARF knows by another name at the
    /// same address (C libraries' aliases: `nanosleep` is `__nanosleep`,
    /// `write` is `__libc_write`) is found by that name.
    pub fn parameters(
        &self,
        path: &Path,
        elf: &Elf,
        function: &str,
    ) -> Result<Option<crate::Function>, crate::Error> {
        if let Some(found) = self.parameters_of(path, elf, &[function])?.remove(function) {
            return Ok(Some(found));
        }
        // Only then the symbol tables (a debug file's too), for aliases.
        let functions = self.functions(path, elf);
        let addresses: Vec<u64> = (functions.iter())
            .filter(|f| f.name == function)
            .map(|f| f.addr)
            .collect();
        let names: Vec<&str> = (functions.iter())
            .filter(|f| f.name != function && addresses.contains(&f.addr))
            .map(|f| f.name.as_str())
            .collect();
        if names.is_empty() {
            return Ok(None);
        }
        let mut found = self.parameters_of(path, elf, &names)?;
        Ok(names.iter().find_map(|name| found.remove(*name)))
    }

    /// The parameters of each of `functions` [`Self::parameters`] finds,
    /// in one pass.
    pub fn parameters_of(
        &self,
        path: &Path,
        elf: &Elf,
        functions: &[&str],
    ) -> Result<HashMap<String, crate::Function>, crate::Error> {
        if elf.has_dwarf() {
            return elf.parameters_of(functions);
        }
        let Some((debug_path, bytes)) = self.debug_file(path, elf) else {
            return Ok(HashMap::default());
        };
        Elf::parse(&debug_path.to_string_lossy(), &bytes)?.parameters_of(functions)
    }

    /// The functions of `elf` as a table.
    pub fn symbols(&self, path: &Path, elf: &Elf) -> Symbols {
        let mut symbols = Symbols::default();
        symbols.extend(self.functions(path, elf));
        symbols
    }

    /// Where function `name` (as stored, or demangled) starts in the ELF
    /// file at `path`, as an offset into the file: what a uprobe attaches
    /// to. Looks in every table `functions` reads, so a stripped library's
    /// exported functions and a split-debug program's own are found alike.
    pub fn file_offset(&self, path: &Path, name: &str) -> Result<Option<u64>, crate::Error> {
        Ok(self.file_offsets(path)?.offset(name))
    }

    /// Every function of the ELF file at `path` with the file offset where
    /// it starts, read once for all the uprobes a program puts on it.
    pub fn file_offsets(&self, path: &Path) -> Result<FileOffsets, crate::Error> {
        let display = path.display().to_string();
        let bytes = crate::read_file(path).map_err(|e| crate::Error::BadElf {
            path: display.clone(),
            what: e.to_string(),
        })?;
        let elf = Elf::parse(&display, &bytes)?;
        let raw = Finder {
            demangle: false,
            ..self.clone()
        };
        let segments = elf.segments();
        let functions = raw
            .functions(path, &elf)
            .into_iter()
            .filter_map(|f| {
                let offset = segments.iter().find_map(|s| s.file_offset(f.addr))?;
                Some(Symbol { addr: offset, ..f })
            })
            .collect();
        Ok(FileOffsets {
            functions,
            segments,
            needed: elf.needed(),
        })
    }

    fn debug_functions(&self, path: &Path, elf: &Elf) -> Vec<Symbol> {
        let Some((debug_path, bytes)) = self.debug_file(path, elf) else {
            return Vec::new();
        };
        Elf::parse(&debug_path.to_string_lossy(), &bytes)
            .map(|debug| debug.functions(false))
            .unwrap_or_default()
    }

    /// The separate debug file of `elf` (read from `path`) and its bytes
    /// (see [`crate::read_file`]):
    /// by build-id (`DIR/.build-id/ab/cdef….debug`), then by
    /// `.gnu_debuglink` next to the file, in its `.debug/`, and under each
    /// debug directory at the file's own directory. A candidate must match
    /// the link's CRC-32 and the file's build-id where they are known, so
    /// a stale debug file names nothing rather than the wrong functions.
    pub fn debug_file(&self, path: &Path, elf: &Elf) -> Option<(PathBuf, Vec<u8>)> {
        let build_id = elf.build_id().ok().flatten();
        // The link is a file name to look for beside the file and under the
        // debug directories: one with a `/` or `..` would reach elsewhere.
        let link = (elf.debug_link().ok().flatten()).filter(|(name, _)| is_plain_name(name));
        let mut candidates = Vec::new();
        if let Some(id) = build_id.as_deref().filter(|id| id.len() > 2) {
            for dir in &self.debug_dirs {
                candidates.push(dir.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..])));
            }
        }
        if let Some((name, _)) = &link {
            let dir = path.parent().unwrap_or(Path::new("/"));
            candidates.push(dir.join(name));
            candidates.push(dir.join(".debug").join(name));
            let relative = dir.strip_prefix("/").unwrap_or(dir);
            for debug_dir in &self.debug_dirs {
                candidates.push(debug_dir.join(relative).join(name));
            }
        }
        candidates
            .into_iter()
            .filter(|candidate| candidate != path)
            .find_map(|candidate| {
                let bytes = crate::read_file(&candidate).ok()?;
                let crc_ok = link
                    .as_ref()
                    .is_none_or(|(_, crc)| crc32fast::hash(&bytes) == *crc);
                let debug = Elf::parse(&candidate.to_string_lossy(), &bytes).ok()?;
                let theirs = debug.build_id().ok().flatten();
                let id_ok = build_id.is_none() || theirs.is_none() || theirs == build_id;
                // A build-id match alone is enough (the link's CRC is of a
                // file the build-id already names).
                let found_by_id = build_id.is_some() && theirs == build_id;
                (id_ok && (crc_ok || found_by_id)).then_some((candidate, bytes))
            })
    }
}

/// Whether `name` names a file in a directory, and nothing else: no `/`,
/// not `.` or `..`, not empty.
fn is_plain_name(name: &str) -> bool {
    !(name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0'))
}

#[cfg(test)]
mod link_tests {
    use super::is_plain_name;

    #[test]
    fn a_debug_link_is_a_plain_file_name() {
        assert!(is_plain_name("libfoo.so.debug"));
        for bad in [
            "",
            ".",
            "..",
            "/etc/shadow",
            "../../etc/shadow",
            "a/b.debug",
        ] {
            assert!(!is_plain_name(bad), "{bad}");
        }
    }
}
