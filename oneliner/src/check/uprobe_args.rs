//! A uprobe's arguments by name (`args->name`, `args->p->x`), as bpftrace
//! reads them from the probed file's DWARF: parameter N is argument
//! register N, typed as the DWARF types it, and the structs and unions the
//! parameters point to join the program's own definitions, so `->` reads
//! them as it reads a program's struct.

use std::collections::HashMap;

use crate::{
    ast::{Base, Expr, ExprKind, Item, ProbeKind, Program, RecordDef, TypeRef},
    error::{Error, Result},
    kernel::{Field, FieldKind, Kernel},
    registers::REGISTER_ARGS,
};

/// The named fields of each uprobe `(path, function)` whose file describes
/// the function.
pub(crate) type Args = HashMap<(String, String), Vec<Field>>;

/// A user function's parameters, from its DWARF, as C types weft lays out.
#[derive(Debug, Clone, Default)]
pub struct UserFunction {
    /// Each parameter's name and type, in order.
    pub params: Vec<(String, TypeRef)>,
    /// The structs and unions the parameters reach, their members placed
    /// where the DWARF places them; a declaration only where one holds a
    /// type weft does not read.
    pub records: Vec<RecordDef>,
}

/// Reads the DWARF of every uprobe in `program` that names one function,
/// adds the records the parameters reach to the program's definitions
/// (the program's own win), and returns each uprobe's named fields.
pub(crate) fn read(program: &mut Program, kernel: &dyn Kernel) -> Result<Args> {
    let mut args = Args::new();
    // Only the items that name an argument: a file's DWARF may be large
    // (a library's installed debug file), and reading it slows start-up.
    let defined: Vec<String> = (program.definitions.records.iter())
        .filter_map(|r| r.name.clone())
        .collect();
    let naming = (program.items.iter())
        .filter(|item| names_an_argument(item) || casts_to_unknown(item, &defined, kernel));
    for probe in naming.flat_map(|item| &item.probes) {
        let ProbeKind::Uprobe { path, symbol, .. } = &probe.kind else {
            continue;
        };
        let key = (path.clone(), symbol.clone());
        if symbol.contains(['*', '?']) || path.contains(['*', '?']) || args.contains_key(&key) {
            continue;
        }
        let function = kernel
            .uprobe_parameters(path, symbol)
            .map_err(|e| Error::new(probe.span, e))?;
        let Some(function) = function else {
            continue;
        };
        let records = &mut program.definitions.records;
        for record in function.records {
            if !records.iter().any(|r| r.name == record.name) {
                records.push(record);
            }
        }
        args.insert(key, fields(&function.params));
    }
    let declared: Vec<String> = (program.definitions.records.iter())
        .filter(|r| r.members.is_none())
        .filter_map(|r| r.name.clone())
        .collect();
    for name in declared {
        declare_holders(program, &name);
    }
    Ok(args)
}

/// Whether `item` casts to a struct neither the program nor the kernel
/// defines (`(struct Foo *)arg0`): bpftrace finds it in the probed file's
/// DWARF, as the records its parameters reach.
fn casts_to_unknown(item: &Item, defined: &[String], kernel: &dyn Kernel) -> bool {
    let mut found = false;
    let mut look = |expr: &Expr| {
        expr.visit(&mut |e| {
            if let ExprKind::StructCast(name, _) = &e.kind {
                found |= !defined.contains(name) && kernel.record(name).is_err();
            }
        });
    };
    item.for_each_expr(&mut look);
    found
}

/// Whether `item` reads a field by name (`args->NAME`) anywhere.
fn names_an_argument(item: &Item) -> bool {
    let mut found = false;
    let mut look = |expr: &Expr| {
        expr.visit(&mut |e| found |= matches!(e.kind, ExprKind::Field(_)));
    };
    item.for_each_expr(&mut look);
    found
}

/// Makes a declaration of every record that holds record `name`, a
/// declaration, by value, and so on outwards: none could be laid out.
fn declare_holders(program: &mut Program, name: &str) {
    let mut holders = Vec::new();
    for record in &mut program.definitions.records {
        if holds(record, name) {
            record.members = None;
            holders.extend(record.name.clone());
        }
    }
    for holder in holders {
        declare_holders(program, &holder);
    }
}

/// Whether `record` holds record `name` by value.
fn holds(record: &RecordDef, name: &str) -> bool {
    (record.members.iter().flatten())
        .any(|member| member.ty.pointers == 0 && member.ty.base == Base::Record(name.to_owned()))
}

/// The fields `args->NAME` reads: parameter N in argument register N, as
/// bpftrace reads them (a parameter past the sixth, on the stack, is not
/// read).
fn fields(params: &[(String, TypeRef)]) -> Vec<Field> {
    params
        .iter()
        .enumerate()
        .map(|(i, (name, ty))| {
            let mut field = Field {
                name: name.clone(),
                offset: REGISTER_ARGS.get(i).copied().unwrap_or(0),
                size: 8,
                signed: false,
                kind: FieldKind::Unread,
                pointee: None,
                element: None,
            };
            if i >= REGISTER_ARGS.len() {
                return field;
            }
            if ty.pointers > 0 || !ty.dims.is_empty() {
                field.kind = FieldKind::Pointer { constant: false };
                field.pointee = match &ty.base {
                    Base::Record(name) if ty.pointers == 1 => Some(name.clone()),
                    _ => None,
                };
                field.element = match ty.base {
                    _ if ty.pointers > 1 => Some((8, false)),
                    Base::Int { size, signed } => Some((u16::from(size), signed)),
                    Base::Enum => Some((4, true)),
                    Base::Void => Some((1, false)),
                    _ => None,
                };
                return field;
            }
            match ty.base {
                Base::Int { size, signed } => {
                    field.kind = FieldKind::Int;
                    field.size = u16::from(size);
                    field.signed = signed;
                }
                Base::Enum => {
                    field.kind = FieldKind::Int;
                    field.size = 4;
                    field.signed = true;
                }
                _ => {}
            }
            field
        })
        .collect()
}
