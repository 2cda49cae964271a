//! A process's executable file mappings (`/proc/PID/maps`), and the
//! functions it has there.

use std::{collections::HashMap, path::Path};

use crate::{
    Error,
    debug::Finder,
    elf::Elf,
    table::{Symbol, Symbols},
};

/// `len` bytes of the file at `path`, from `offset`, mapped at `start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub path: String,
    pub start: u64,
    pub len: u64,
    pub offset: u64,
}

/// The executable file mappings of a process, as `/proc/PID/maps` lists
/// them.
pub fn executable_mappings(maps: &str) -> Result<Vec<Mapping>, Error> {
    let mut mappings = Vec::new();
    for (number, line) in (1..).zip(maps.lines()) {
        let bad = || Error::BadMaps {
            line: number,
            text: line.into(),
        };
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [range, perms, offset, _dev, _inode, path @ ..] = fields.as_slice() else {
            return Err(bad());
        };
        let path = path.join(" ");
        if !perms.contains('x') || !path.starts_with('/') {
            continue;
        }
        let hex = |text: &str| u64::from_str_radix(text, 16).map_err(|_| bad());
        let (start, end) = range.split_once('-').ok_or_else(bad)?;
        let (start, end, offset) = (hex(start)?, hex(end)?, hex(offset)?);
        mappings.push(Mapping {
            path,
            start,
            len: end.saturating_sub(start),
            offset,
        });
    }
    Ok(mappings)
}

impl Finder {
    /// The functions of `elf` (read from `path`) that `mapping` holds, at
    /// the addresses they have there, however the file was relocated.
    pub fn mapped_functions(&self, path: &Path, elf: &Elf, mapping: &Mapping) -> Vec<Symbol> {
        let segments = elf.segments();
        let (start, len, offset) = (mapping.start, mapping.len, mapping.offset);
        let inside = |symbol: Symbol| {
            let at = segments.iter().find_map(|s| s.file_offset(symbol.addr))?;
            (offset..offset.saturating_add(len))
                .contains(&at)
                .then(|| Symbol {
                    addr: start + (at - offset),
                    ..symbol
                })
        };
        self.functions(path, elf)
            .into_iter()
            .filter_map(inside)
            .collect()
    }

    /// The functions of running process `pid`, at its addresses; its files
    /// are read through `/proc/PID/root`, so a process in another mount
    /// namespace is named from its own files. Empty once it has exited.
    pub fn process(&self, pid: u32) -> Process {
        let mut process = Process::default();
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return process;
        };
        let mut files: HashMap<String, Option<Vec<u8>>> = HashMap::new();
        process.mappings = executable_mappings(&maps).unwrap_or_default();
        for mapping in &process.mappings {
            let bytes = files.entry(mapping.path.clone()).or_insert_with(|| {
                crate::read_file(Path::new(&format!("/proc/{pid}/root{}", mapping.path))).ok()
            });
            let Some(bytes) = bytes else { continue };
            if let Ok(elf) = Elf::parse(&mapping.path, bytes) {
                let path = Path::new(&mapping.path);
                process
                    .symbols
                    .extend(self.mapped_functions(path, &elf, mapping));
            }
        }
        process
    }
}

/// A running process's functions, and the files mapped where they are.
#[derive(Debug, Default, Clone)]
pub struct Process {
    pub symbols: Symbols,
    pub mappings: Vec<Mapping>,
}

impl Process {
    /// The file mapped at `ip`.
    pub fn file_at(&self, ip: u64) -> Option<&str> {
        self.mapping(ip).map(|m| m.path.as_str())
    }

    /// The function holding `ip`, and how far into it `ip` is: as
    /// [`Symbols::at`], but within the mapping that holds the function. A
    /// symbol without a size reaches the next symbol, which in a process
    /// may be another file's: the executable's sizeless `_fini` named every
    /// address of the anonymous mappings up to the first library.
    pub fn at(&self, ip: u64) -> Option<(&str, u64)> {
        let (name, offset) = self.symbols.at(ip)?;
        let mapping = self.mapping(ip - offset)?;
        (ip - mapping.start < mapping.len).then_some((name, offset))
    }

    fn mapping(&self, ip: u64) -> Option<&Mapping> {
        self.mappings
            .iter()
            .find(|m| (m.start..m.start.saturating_add(m.len)).contains(&ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Symbol;

    #[test]
    fn a_sizeless_symbol_ends_with_its_mapping() {
        let mut symbols = Symbols::default();
        symbols.extend([
            Symbol {
                addr: 0x1000,
                size: 0x10,
                name: "main".into(),
            },
            Symbol {
                addr: 0x1ff0,
                size: 0,
                name: "_fini".into(),
            },
            Symbol {
                addr: 0x7000_0000,
                size: 0x100,
                name: "syscall".into(),
            },
        ]);
        let mapping = |path: &str, start, len| Mapping {
            path: path.into(),
            start,
            len,
            offset: 0,
        };
        let process = Process {
            symbols,
            mappings: vec![
                mapping("/bin/app", 0x1000, 0x1000),
                mapping("/lib/libc.so.6", 0x7000_0000, 0x1000),
            ],
        };
        assert_eq!(process.at(0x1004), Some(("main", 4)));
        assert_eq!(process.at(0x1ff8), Some(("_fini", 8)));
        assert_eq!(process.at(0x5000), None, "an anonymous mapping's address");
        assert_eq!(process.at(0x7000_0010), Some(("syscall", 0x10)));
    }
}
