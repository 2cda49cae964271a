//! Parameters and the types they reach, read from the DWARF of C programs
//! the test builds: what a uprobe's `args->NAME` reads.

mod common;

use std::path::{Path, PathBuf};

use common::{run, scratch};

use weft_symbols::{CType, Elf, Finder, Function, Record};

const C: &str = r#"
#include <stdbool.h>
enum color { RED, GREEN = 5 };
typedef struct { int a; unsigned short b; } pair_t;
struct inner { char tag[8]; long v; };
struct outer {
    int id;
    struct inner in;
    union { int i; char c[4]; } u;
    unsigned int flag : 3, mode : 5;
    struct outer *next;
    pair_t pairs[2];
    const char *label;
};
__attribute__((noinline)) long work(struct outer *o, pair_t *p, enum color c, bool ok,
                                    unsigned long long big, signed char sc, double d) {
    return o->id + p->a + c + ok + big + sc + d;
}
__attribute__((noinline)) int __impl_count(int items, long *total) { return items + (int)*total; }
int count(int items, long *total) __attribute__((alias("__impl_count")));
int main(void) { return 0; }
"#;

/// Builds the program with `flags` into `dir/work`.
fn build(dir: &Path, flags: &[&str]) -> PathBuf {
    let source = dir.join("work.c");
    std::fs::write(&source, C).unwrap();
    let out = dir.join("work");
    let mut args = vec![
        "-O1",
        "-g",
        "-o",
        out.to_str().unwrap(),
        source.to_str().unwrap(),
    ];
    args.extend(flags);
    run("gcc", &args);
    out
}

fn work(path: &Path) -> Function {
    let bytes = std::fs::read(path).unwrap();
    let elf = Elf::parse(path.to_str().unwrap(), &bytes).unwrap();
    Finder::default()
        .parameters(path, &elf, "work")
        .unwrap()
        .expect("work is described")
}

fn int(size: u8, signed: bool) -> CType {
    CType::Int { size, signed }
}

fn pointer(ty: CType) -> CType {
    CType::Pointer(Box::new(ty))
}

fn record<'f>(function: &'f Function, name: &str) -> &'f Record {
    (function.records.iter())
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("{name} in {:?}", function.records))
}

/// A member's name, offset and bit-field (width, first bit).
type Placed = (String, u64, Option<(u32, u32)>);

/// Each member's place.
fn layout(record: &Record) -> Vec<Placed> {
    (record.members.iter().flatten())
        .map(|m| (m.name.clone().unwrap_or_default(), m.offset, m.bits))
        .collect()
}

#[test]
fn parameters_and_the_records_they_reach() {
    let dir = scratch("plain");
    let found = work(&build(&dir, &[]));
    let params: Vec<(&str, &CType, &str)> = (found.parameters.iter())
        .map(|p| (p.name.as_str(), &p.ty, p.spelled.as_str()))
        .collect();
    let outer = CType::Record("struct outer".into());
    let pair = CType::Record("struct pair_t".into());
    assert_eq!(
        params,
        [
            ("o", &pointer(outer.clone()), "struct outer*"),
            ("p", &pointer(pair), "pair_t*"),
            ("c", &int(4, false), "enum color"),
            ("ok", &int(1, false), "_Bool"),
            ("big", &int(8, false), "long long unsigned int"),
            ("sc", &int(1, true), "signed char"),
            ("d", &CType::Float(8), "double"),
        ]
    );
    let outer = record(&found, "struct outer");
    assert_eq!(outer.size, 64);
    let none = None;
    assert_eq!(
        layout(outer),
        [
            ("id".to_owned(), 0, none),
            ("in".into(), 8, None),
            ("u".into(), 24, None),
            ("flag".into(), 28, Some((3, 0))),
            ("mode".into(), 28, Some((5, 3))),
            ("next".into(), 32, None),
            ("pairs".into(), 40, None),
            ("label".into(), 56, None),
        ]
    );
    let members = outer.members.as_ref().unwrap();
    assert_eq!(members[5].ty, pointer(CType::Record("struct outer".into())));
    assert_eq!(
        members[6].ty,
        CType::Array(Box::new(CType::Record("struct pair_t".into())), 2)
    );
    assert_eq!(members[7].ty, pointer(int(1, true)));
    // The anonymous union is named after where it is; its members are read.
    let CType::Record(union) = &members[2].ty else {
        panic!("{:?}", members[2].ty);
    };
    let union = record(&found, union);
    assert!(union.union && union.name.starts_with("union anonymous_"));
    assert_eq!(
        layout(union),
        [("i".to_owned(), 0, None), ("c".into(), 0, None)]
    );
    assert_eq!(layout(record(&found, "struct inner")).len(), 2);
    assert_eq!(record(&found, "struct pair_t").size, 8);
}

/// A C library's alias (`nanosleep` of `__nanosleep`): the DWARF names
/// the function once, the symbol tables twice at one address.
#[test]
fn an_alias_is_found_by_the_name_at_its_address() {
    let dir = scratch("alias");
    let binary = build(&dir, &[]);
    let bytes = std::fs::read(&binary).unwrap();
    let elf = Elf::parse(binary.to_str().unwrap(), &bytes).unwrap();
    let found = Finder::default()
        .parameters(&binary, &elf, "count")
        .unwrap()
        .expect("count is __impl_count");
    let names: Vec<&str> = found.parameters.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["items", "total"]);
}

/// As distributions ship them: compressed, split off behind a
/// `.gnu_debuglink`, the program stripped.
#[test]
fn parameters_from_a_compressed_split_debug_file() {
    let dir = scratch("split");
    let binary = build(&dir, &["-gz=zlib"]);
    let plain = work(&binary);
    let debug = dir.join("work.debug");
    let (binary_s, debug_s) = (binary.to_str().unwrap(), debug.to_str().unwrap());
    run("objcopy", &["--only-keep-debug", binary_s, debug_s]);
    run("strip", &["--strip-all", binary_s]);
    run(
        "objcopy",
        &[&format!("--add-gnu-debuglink={debug_s}"), binary_s],
    );
    assert_eq!(work(&binary), plain);
    let bytes = std::fs::read(&binary).unwrap();
    let elf = Elf::parse(binary_s, &bytes).unwrap();
    let finder = Finder::default();
    assert_eq!(
        finder
            .parameters(&binary, &elf, "no_such_function")
            .unwrap(),
        None
    );
    // Without its debug file, nothing describes it.
    std::fs::remove_file(&debug).unwrap();
    assert_eq!(finder.parameters(&binary, &elf, "work").unwrap(), None);
}

/// A compressed debug section claiming to unpack to more than weft reads
/// (a file another user made) is refused before it is unpacked.
#[test]
fn a_section_claiming_a_huge_size_is_refused_unread() {
    use object::{Object as _, ObjectSection as _};
    let dir = scratch("bomb");
    let binary = build(&dir, &["-gz=zlib"]);
    let mut bytes = std::fs::read(&binary).unwrap();
    let offset = {
        let file = object::File::parse(&*bytes).unwrap();
        let section = file.section_by_name(".debug_info").unwrap();
        section.file_range().unwrap().0 as usize
    };
    // Elf64_Chdr: type, reserved, then the unpacked size.
    bytes[offset + 8..offset + 16].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let elf = Elf::parse(binary.to_str().unwrap(), &bytes).unwrap();
    let error = Finder::default()
        .parameters(&binary, &elf, "work")
        .unwrap_err()
        .to_string();
    assert!(error.contains("unpacks to 1099511627776 bytes"), "{error}");
}
