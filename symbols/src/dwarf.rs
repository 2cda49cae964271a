//! A function's parameters and the C types they reach, from the DWARF of an
//! ELF file, as bpftrace reads them for `args` in a uprobe: each parameter
//! by name, in order, with its type, and every struct and union reachable
//! from those types with its members' offsets. Reading DWARF is gimli's
//! job; this module knows which entries describe a function's parameters.

use std::{borrow::Cow, collections::HashMap};

use gimli::{AttributeValue, EndianSlice, LittleEndian, UnitOffset};
use object::{Object as _, ObjectSection as _};

use crate::Elf;

type Reader<'a> = EndianSlice<'a, LittleEndian>;
type Unit<'a> = gimli::Unit<Reader<'a>>;

/// A C type as weft reads it; qualifiers and typedefs are looked through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CType {
    Int {
        size: u8,
        signed: bool,
    },
    Float(u8),
    Void,
    Pointer(Box<CType>),
    /// `struct NAME` or `union NAME`, one of [`Function::records`].
    Record(String),
    /// An array of `len` elements (0: of unknown length).
    Array(Box<CType>, u32),
    /// A type weft does not read (a function, `__int128`, a vector).
    Other,
}

/// A function's parameter: its name and type, and the type as its
/// declaration spells it (`const char*`), for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameter {
    pub name: String,
    pub ty: CType,
    pub spelled: String,
}

/// A struct or union the parameters reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `struct NAME` or `union NAME`; an anonymous one is named after its
    /// typedef or, failing that, where it is in the file.
    pub name: String,
    pub union: bool,
    pub size: u64,
    /// None for a declaration only (an incomplete type).
    pub members: Option<Vec<Member>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// None for an anonymous struct or union, whose members are the
    /// enclosing record's.
    pub name: Option<String>,
    pub ty: CType,
    /// Byte offset in the record.
    pub offset: u64,
    /// A bit-field's width and its first bit past `offset`.
    pub bits: Option<(u32, u32)>,
}

/// What the DWARF says of one function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Function {
    pub parameters: Vec<Parameter>,
    pub records: Vec<Record>,
}

/// How deep a type's description may nest (pointer to const to typedef
/// to ...), against a file whose types loop without a record between.
const MAX_DEPTH: usize = 32;

impl Elf<'_> {
    /// Whether the file holds DWARF debug info.
    pub fn has_dwarf(&self) -> bool {
        self.file.section_by_name(".debug_info").is_some()
    }

    /// The parameters of the first definition of `function` in this
    /// file's DWARF, or None when no unit defines it.
    pub fn parameters(&self, function: &str) -> Result<Option<Function>, crate::Error> {
        Ok(self.parameters_of(&[function])?.remove(function))
    }

    /// The parameters of each of `functions` this file's DWARF defines,
    /// read in one pass over its units (for a listing of many).
    pub fn parameters_of(
        &self,
        functions: &[&str],
    ) -> Result<HashMap<String, Function>, crate::Error> {
        let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, crate::Error> {
            let Some(section) = self.file.section_by_name(id.name()) else {
                return Ok(Cow::Borrowed(&[][..]));
            };
            let bad = |e: object::Error| self.error(format!("{}: {e}", id.name()));
            // A compressed section says how large it unpacks to: a file
            // another user made could claim far more than any debug info.
            let size = section.compressed_data().map_err(bad)?.uncompressed_size;
            if size > crate::MAX_FILE_BYTES {
                return Err(self.error(format!(
                    "{} unpacks to {size} bytes, more than the {} weft reads",
                    id.name(),
                    crate::MAX_FILE_BYTES
                )));
            }
            section.uncompressed_data().map_err(bad)
        };
        let sections = gimli::DwarfSections::load(load)?;
        let dwarf = sections.borrow(|section| EndianSlice::new(section, LittleEndian));
        let bad = |e: gimli::Error| self.error(format!("DWARF: {e}"));
        let mut found = HashMap::new();
        let mut units = dwarf.units();
        while let Some(header) = units.next().map_err(bad)? {
            if found.len() == functions.len() {
                break;
            }
            let unit = dwarf.unit(header).map_err(bad)?;
            for (name, at) in defined(&dwarf, &unit, functions).map_err(bad)? {
                if found.contains_key(&name) {
                    continue;
                }
                let mut types = Types {
                    dwarf: &dwarf,
                    unit: &unit,
                    records: Vec::new(),
                    named: HashMap::new(),
                };
                let parameters = types.parameters(at).map_err(bad)?;
                let records = types.records;
                found.insert(
                    name,
                    Function {
                        parameters,
                        records,
                    },
                );
            }
        }
        Ok(found)
    }
}

/// The entries of `unit` that define one of `functions`: subprograms of
/// those names with code (not declarations, nor inlined-only abstract
/// instances).
fn defined(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &Unit,
    functions: &[&str],
) -> gimli::Result<Vec<(String, UnitOffset)>> {
    let mut found = Vec::new();
    let mut entries = unit.entries();
    while let Some(entry) = entries.next_dfs()? {
        if entry.tag() != gimli::DW_TAG_subprogram
            || entry.attr(gimli::DW_AT_declaration).is_some()
            || entry.attr(gimli::DW_AT_low_pc).is_none()
                && entry.attr(gimli::DW_AT_ranges).is_none()
        {
            continue;
        }
        // An out-of-line C++ method names itself through its declaration,
        // a concrete instance of an inlined function through its origin:
        // neither is looked through.
        let Some(name) = entry.attr_value(gimli::DW_AT_name) else {
            continue;
        };
        let name = dwarf.attr_string(unit, name)?;
        if let Some(function) = functions.iter().find(|f| f.as_bytes() == name.slice()) {
            found.push(((*function).to_owned(), entry.offset()));
        }
    }
    Ok(found)
}

/// Types read from one unit, and the records they reach.
struct Types<'d, 'a> {
    dwarf: &'d gimli::Dwarf<Reader<'a>>,
    unit: &'d Unit<'a>,
    records: Vec<Record>,
    /// The name of each record entry already read.
    named: HashMap<UnitOffset, String>,
}

impl Types<'_, '_> {
    fn parameters(&mut self, function: UnitOffset) -> gimli::Result<Vec<Parameter>> {
        let mut tree = self.unit.entries_tree(Some(function))?;
        let mut children = tree.root()?.children();
        let mut found = Vec::new();
        while let Some(child) = children.next()? {
            let entry = child.entry();
            if entry.tag() != gimli::DW_TAG_formal_parameter {
                continue;
            }
            let name = match entry.attr_value(gimli::DW_AT_name) {
                Some(name) => self.string(name)?,
                None => format!("arg{}", found.len()),
            };
            let at = type_of(entry);
            found.push((name, at));
        }
        found
            .into_iter()
            .map(|(name, at)| {
                Ok(Parameter {
                    name,
                    ty: self.ty(at, 0)?,
                    spelled: self.spelled(at, 0)?,
                })
            })
            .collect()
    }

    fn string(&self, value: AttributeValue<Reader>) -> gimli::Result<String> {
        let text = self.dwarf.attr_string(self.unit, value)?;
        Ok(String::from_utf8_lossy(text.slice()).into_owned())
    }

    fn name(
        &self,
        entry: &gimli::DebuggingInformationEntry<Reader>,
    ) -> gimli::Result<Option<String>> {
        entry
            .attr_value(gimli::DW_AT_name)
            .map(|name| self.string(name))
            .transpose()
    }

    /// The type at `at` (None: `void`).
    fn ty(&mut self, at: Option<UnitOffset>, depth: usize) -> gimli::Result<CType> {
        let Some(at) = at else {
            return Ok(CType::Void);
        };
        if depth > MAX_DEPTH {
            return Ok(CType::Other);
        }
        let entry = self.unit.entry(at)?;
        let size = entry
            .attr_value(gimli::DW_AT_byte_size)
            .and_then(|s| s.udata_value())
            .unwrap_or(0);
        Ok(match entry.tag() {
            gimli::DW_TAG_base_type => base(&entry, size),
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => {
                CType::Pointer(Box::new(self.ty(type_of(&entry), depth + 1)?))
            }
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type | gimli::DW_TAG_union_type => {
                CType::Record(self.record(at, None)?)
            }
            gimli::DW_TAG_typedef => {
                let target = type_of(&entry);
                // `typedef struct { ... } point_t;`: the record takes the
                // typedef's name.
                if let Some(record) = target {
                    let inner = self.unit.entry(record)?;
                    if matches!(
                        inner.tag(),
                        gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type
                    ) && inner.attr(gimli::DW_AT_name).is_none()
                    {
                        let name = self.name(&entry)?;
                        return Ok(CType::Record(self.record(record, name)?));
                    }
                }
                self.ty(target, depth + 1)?
            }
            gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type => self.ty(type_of(&entry), depth + 1)?,
            gimli::DW_TAG_enumeration_type => match type_of(&entry) {
                Some(underlying) => self.ty(Some(underlying), depth + 1)?,
                None => CType::Int {
                    size: u8::try_from(size).unwrap_or(4),
                    signed: false,
                },
            },
            gimli::DW_TAG_array_type => self.array(at, type_of(&entry), depth)?,
            _ => CType::Other,
        })
    }

    /// An array's type: one [`CType::Array`] per dimension, outermost
    /// first.
    fn array(
        &mut self,
        at: UnitOffset,
        element: Option<UnitOffset>,
        depth: usize,
    ) -> gimli::Result<CType> {
        let mut lengths = Vec::new();
        let mut tree = self.unit.entries_tree(Some(at))?;
        let mut children = tree.root()?.children();
        while let Some(child) = children.next()? {
            let entry = child.entry();
            if entry.tag() != gimli::DW_TAG_subrange_type {
                continue;
            }
            let count = entry
                .attr_value(gimli::DW_AT_count)
                .and_then(|c| c.udata_value());
            let upper = (entry.attr_value(gimli::DW_AT_upper_bound))
                .and_then(|u| u.udata_value())
                .map(|u| u + 1);
            lengths.push(u32::try_from(count.or(upper).unwrap_or(0)).unwrap_or(0));
        }
        let mut ty = self.ty(element, depth + 1)?;
        for length in lengths.into_iter().rev() {
            ty = CType::Array(Box::new(ty), length);
        }
        Ok(ty)
    }

    /// The name of the struct or union at `at`, read into
    /// [`Self::records`] with the records its members reach.
    fn record(&mut self, at: UnitOffset, typedef: Option<String>) -> gimli::Result<String> {
        if let Some(name) = self.named.get(&at) {
            return Ok(name.clone());
        }
        let entry = self.unit.entry(at)?;
        let union = entry.tag() == gimli::DW_TAG_union_type;
        let keyword = if union { "union" } else { "struct" };
        let own = match self.name(&entry)?.or(typedef) {
            Some(name) => name,
            None => format!("anonymous_{:x}", at.0),
        };
        let name = format!("{keyword} {own}");
        self.named.insert(at, name.clone());
        let index = self.records.len();
        self.records.push(Record {
            name: name.clone(),
            union,
            size: (entry.attr_value(gimli::DW_AT_byte_size))
                .and_then(|s| s.udata_value())
                .unwrap_or(0),
            members: None,
        });
        if entry.attr(gimli::DW_AT_declaration).is_none() {
            let members = self.members(at)?;
            self.records[index].members = Some(members);
        }
        Ok(name)
    }

    fn members(&mut self, at: UnitOffset) -> gimli::Result<Vec<Member>> {
        let mut found = Vec::new();
        {
            let mut tree = self.unit.entries_tree(Some(at))?;
            let mut children = tree.root()?.children();
            while let Some(child) = children.next()? {
                let entry = child.entry();
                if entry.tag() != gimli::DW_TAG_member
                    || entry.attr(gimli::DW_AT_external).is_some()
                {
                    continue;
                }
                let name = self.name(entry)?;
                let offset = (entry.attr_value(gimli::DW_AT_data_member_location))
                    .and_then(|o| o.udata_value());
                let bit_offset =
                    (entry.attr_value(gimli::DW_AT_data_bit_offset)).and_then(|o| o.udata_value());
                let bits = (entry.attr_value(gimli::DW_AT_bit_size)).and_then(|b| b.udata_value());
                found.push((name, type_of(entry), offset, bit_offset, bits));
            }
        }
        found
            .into_iter()
            .map(|(name, ty, offset, bit_offset, bits)| {
                let (offset, bits) = match (bits, bit_offset) {
                    (Some(width), Some(first)) => {
                        (first / 8, Some((width as u32, (first % 8) as u32)))
                    }
                    (Some(width), None) => (offset.unwrap_or(0), Some((width as u32, 0))),
                    _ => (offset.unwrap_or(0), None),
                };
                Ok(Member {
                    name,
                    ty: self.ty(ty, 0)?,
                    offset,
                    bits,
                })
            })
            .collect()
    }

    /// The type at `at` as a declaration spells it, as bpftrace lists it:
    /// `const char*`, `struct point*`, `size_t`.
    fn spelled(&self, at: Option<UnitOffset>, depth: usize) -> gimli::Result<String> {
        let Some(at) = at else {
            return Ok("void".into());
        };
        if depth > MAX_DEPTH {
            return Ok("?".into());
        }
        let entry = self.unit.entry(at)?;
        let inner = || self.spelled(type_of(&entry), depth + 1);
        let name = self.name(&entry)?;
        Ok(match entry.tag() {
            gimli::DW_TAG_pointer_type => format!("{}*", inner()?),
            gimli::DW_TAG_reference_type => format!("{}&", inner()?),
            gimli::DW_TAG_const_type => format!("const {}", inner()?),
            gimli::DW_TAG_volatile_type => format!("volatile {}", inner()?),
            gimli::DW_TAG_restrict_type => format!("{} restrict", inner()?),
            gimli::DW_TAG_structure_type | gimli::DW_TAG_class_type => {
                format!("struct {}", name.unwrap_or_default())
            }
            gimli::DW_TAG_union_type => format!("union {}", name.unwrap_or_default()),
            gimli::DW_TAG_enumeration_type => format!("enum {}", name.unwrap_or_default()),
            gimli::DW_TAG_array_type => format!("{}[]", inner()?),
            gimli::DW_TAG_subroutine_type => "void (*)()".into(),
            _ => name.unwrap_or_else(|| "?".into()),
        })
    }
}

/// The entry `DW_AT_type` names, if it names one in the same unit.
fn type_of(entry: &gimli::DebuggingInformationEntry<Reader>) -> Option<UnitOffset> {
    match entry.attr_value(gimli::DW_AT_type)? {
        AttributeValue::UnitRef(at) => Some(at),
        _ => None,
    }
}

/// A base type by its encoding and size.
fn base(entry: &gimli::DebuggingInformationEntry<Reader>, size: u64) -> CType {
    let Some(AttributeValue::Encoding(encoding)) = entry.attr_value(gimli::DW_AT_encoding) else {
        return CType::Other;
    };
    let Ok(size) = u8::try_from(size) else {
        return CType::Other;
    };
    match encoding {
        gimli::DW_ATE_float if matches!(size, 4 | 8) => CType::Float(size),
        _ if !matches!(size, 1 | 2 | 4 | 8) => CType::Other,
        gimli::DW_ATE_signed | gimli::DW_ATE_signed_char => CType::Int { size, signed: true },
        gimli::DW_ATE_unsigned
        | gimli::DW_ATE_unsigned_char
        | gimli::DW_ATE_boolean
        | gimli::DW_ATE_UTF => CType::Int {
            size,
            signed: false,
        },
        _ => CType::Other,
    }
}
