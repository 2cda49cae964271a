//! What weft reads of one ELF file: its loadable segments, its build-id and
//! debug link, and its function symbols.

use std::fmt::Write as _;

use object::{Object as _, ObjectSegment as _, ObjectSymbol as _, SymbolKind};

use crate::table::Symbol;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: not an ELF file")]
    NotElf { path: String },
    #[error("{path}: {what}")]
    BadElf { path: String, what: String },
    #[error("maps line {line}: {text:?} is not a mapping")]
    BadMaps { line: usize, text: String },
}

/// A loadable segment: `size` bytes of the file from `offset`, at `vaddr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub offset: u64,
    pub vaddr: u64,
    pub size: u64,
}

/// An ELF file, parsed.
pub struct Elf<'a> {
    path: String,
    pub(crate) data: &'a [u8],
    pub(crate) file: object::File<'a>,
}

impl<'a> Elf<'a> {
    /// Parses the bytes of the file at `path` (the path is for errors).
    pub fn parse(path: &str, data: &'a [u8]) -> Result<Self, Error> {
        if !data.starts_with(b"\x7fELF") {
            return Err(Error::NotElf { path: path.into() });
        }
        let file = object::File::parse(data).map_err(|e| Error::BadElf {
            path: path.into(),
            what: e.to_string(),
        })?;
        Ok(Self {
            path: path.into(),
            data,
            file,
        })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// The loadable segments, with the bytes they take from the file.
    pub fn segments(&self) -> Vec<Segment> {
        self.file
            .segments()
            .map(|segment| {
                let (offset, size) = segment.file_range();
                Segment {
                    offset,
                    vaddr: segment.address(),
                    size,
                }
            })
            .collect()
    }

    /// The file's bytes of `segment`, or an error naming it when they lie
    /// outside the file.
    pub fn bytes(&self, segment: &Segment) -> Result<&'a [u8], Error> {
        let data = self.data;
        segment
            .offset
            .checked_add(segment.size)
            .filter(|&end| end <= data.len() as u64)
            .map(|end| &data[segment.offset as usize..end as usize])
            .ok_or_else(|| Error::BadElf {
                path: self.path.clone(),
                what: format!(
                    "segment at file offset {:#x} ({} bytes) lies outside the file",
                    segment.offset, segment.size
                ),
            })
    }

    /// The GNU build-id, as hex.
    pub fn build_id(&self) -> Result<Option<String>, Error> {
        let id = self.file.build_id().map_err(|e| self.bad(&e))?;
        Ok(id.map(|id| {
            id.iter().fold(String::new(), |mut hex, b| {
                let _ = write!(hex, "{b:02x}");
                hex
            })
        }))
    }

    /// The `.gnu_debuglink`: the debug file's name and its CRC-32.
    pub fn debug_link(&self) -> Result<Option<(String, u32)>, Error> {
        let link = self.file.gnu_debuglink().map_err(|e| self.bad(&e))?;
        Ok(link.map(|(name, crc)| (String::from_utf8_lossy(name).into_owned(), crc)))
    }

    /// The libraries the file names as `DT_NEEDED` (`libc.so.6`), in order.
    pub fn needed(&self) -> Vec<String> {
        let object::File::Elf64(elf) = &self.file else {
            return Vec::new();
        };
        let endian = elf.endian();
        let Ok(table) = elf.elf_section_table().dynamic_table(endian, self.data) else {
            return Vec::new();
        };
        table
            .iter()
            .filter(|d| d.tag == object::elf::DT_NEEDED)
            .filter_map(|d| table.string(d).ok())
            .map(|name| String::from_utf8_lossy(name).into_owned())
            .collect()
    }

    /// Whether the file has a `.symtab` with functions in it (a stripped
    /// file keeps only `.dynsym`).
    pub fn has_symtab(&self) -> bool {
        self.file.symbols().any(|s| s.kind() == SymbolKind::Text)
    }

    /// Defined functions of `.symtab` (`dynamic` false) or `.dynsym`, at
    /// their link-time addresses, with their names as stored.
    pub fn functions(&self, dynamic: bool) -> Vec<Symbol> {
        let symbols = if dynamic {
            self.file.dynamic_symbols()
        } else {
            self.file.symbols()
        };
        symbols
            .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
            .filter_map(|s| {
                Some(Symbol {
                    addr: s.address(),
                    size: s.size(),
                    name: s.name().ok()?.to_owned(),
                })
            })
            .collect()
    }

    /// The defined data symbol (a variable) named `name`, of `.symtab` or
    /// else `.dynsym`, at its link-time address.
    pub fn object(&self, name: &str) -> Option<Symbol> {
        let wanted = |s: &object::Symbol<'_, '_>| {
            s.kind() == SymbolKind::Data && s.is_definition() && s.name() == Ok(name)
        };
        let symbol = (self.file.symbols().find(wanted))
            .or_else(|| self.file.dynamic_symbols().find(wanted))?;
        Some(Symbol {
            addr: symbol.address(),
            size: symbol.size(),
            name: name.to_owned(),
        })
    }

    fn bad(&self, error: &object::Error) -> Error {
        self.error(error)
    }

    /// An error naming the file.
    pub(crate) fn error(&self, what: impl std::fmt::Display) -> Error {
        Error::BadElf {
            path: self.path.clone(),
            what: what.to_string(),
        }
    }
}

impl Segment {
    /// Where the byte at link-time address `addr` lies in the file, if
    /// this segment holds it.
    pub fn file_offset(&self, addr: u64) -> Option<u64> {
        (self.vaddr..self.vaddr.saturating_add(self.size))
            .contains(&addr)
            .then(|| addr - self.vaddr + self.offset)
    }
}
