//! A uprobe's function's parameters from its file's DWARF
//! (`weft_symbols`), as the checker's C types: what `args->NAME` reads.

use std::{
    collections::{HashMap, HashSet},
    path::Path,
};

use crate::error::Result;
use weft_oneliner::{
    Span, UserFunction,
    ast::{Base, MemberDef, RecordDef, TypeRef},
};
use weft_symbols::{CType, Elf, Record};

/// The parameters of `function` in the file at `path`, from its DWARF or
/// its debug file's.
pub fn parameters(path: &Path, function: &str) -> Result<Option<UserFunction>> {
    let bytes = super::files::read(path)?;
    let elf = Elf::parse(&path.display().to_string(), &bytes)?;
    let finder = weft_symbols::Finder::new(Vec::new(), false);
    Ok(finder
        .parameters(path, &elf, function)?
        .map(|found| user_function(&found)))
}

/// Each of `functions` in the file at `path` that its DWARF describes,
/// with its parameters as declarations spell them (`const char* name`),
/// as bpftrace's `-lv` lists them.
pub fn declarations(path: &Path, functions: &[&str]) -> Result<HashMap<String, Vec<String>>> {
    let bytes = super::files::read(path)?;
    let elf = Elf::parse(&path.display().to_string(), &bytes)?;
    let finder = weft_symbols::Finder::new(Vec::new(), false);
    // One function is also found by an alias at its address (as a probe
    // finds it); many are looked up by name only, in one pass.
    let found = match functions {
        [function] => (finder.parameters(path, &elf, function)?)
            .map(|found| ((*function).to_owned(), found))
            .into_iter()
            .collect(),
        _ => finder.parameters_of(path, &elf, functions)?,
    };
    Ok(found
        .into_iter()
        .map(|(name, function)| {
            let lines = (function.parameters.iter())
                .map(|p| format!("{} {}", p.spelled, p.name))
                .collect();
            (name, lines)
        })
        .collect())
}

fn user_function(function: &weft_symbols::Function) -> UserFunction {
    let void = TypeRef {
        base: Base::Void,
        pointers: 0,
        dims: Vec::new(),
    };
    let params = (function.parameters.iter())
        .map(|p| (p.name.clone(), type_ref(&p.ty).unwrap_or(void.clone())))
        .collect();
    // C++ namespaces may give two records one name: the first is kept.
    let mut names = HashSet::new();
    let records = (function.records.iter())
        .filter(|record| names.insert(record.name.clone()))
        .map(record_def)
        .collect();
    UserFunction { params, records }
}

/// A record as the checker's definition of it: a declaration only where a
/// member has a type weft does not read.
fn record_def(record: &Record) -> RecordDef {
    let members = (record.members.iter().flatten())
        .map(|member| {
            Some(MemberDef {
                name: member.name.clone(),
                ty: type_ref(&member.ty)?,
                bits: member.bits.map(|(width, _)| width),
                at: u32::try_from(member.offset).ok(),
                span: Span::default(),
            })
        })
        .collect::<Option<Vec<_>>>()
        .filter(|_| record.members.is_some());
    RecordDef {
        name: Some(record.name.clone()),
        union: record.union,
        members,
        size: u32::try_from(record.size).ok(),
        span: Span::default(),
    }
}

/// `ty` as a declaration spells it: arrays outermost, then pointers, then
/// the base. A pointer to an array points to its first element; a type
/// weft does not read is None, or `void` behind a pointer.
fn type_ref(ty: &CType) -> Option<TypeRef> {
    let mut ty = ty;
    let mut dims = Vec::new();
    while let CType::Array(element, len) = ty {
        dims.push(*len);
        ty = element;
    }
    let mut pointers = 0u8;
    loop {
        match ty {
            CType::Pointer(target) => {
                pointers = pointers.saturating_add(1);
                ty = target;
            }
            CType::Array(element, _) if pointers > 0 => ty = element,
            _ => break,
        }
    }
    let base = match ty {
        CType::Int { size, signed } => Base::Int {
            size: *size,
            signed: *signed,
        },
        CType::Float(size) => Base::Float(*size),
        CType::Record(name) => Base::Record(name.clone()),
        CType::Void => Base::Void,
        _ if pointers > 0 => Base::Void,
        _ => return None,
    };
    Some(TypeRef {
        base,
        pointers,
        dims,
    })
}
