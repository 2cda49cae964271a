//! Names of programs the test builds itself (C++ and Rust), stripped with
//! their debug info split off the ways distributions do it, found as gdb
//! finds them, demangled.

mod common;

use std::path::{Path, PathBuf};

use common::{run, scratch};

use weft_symbols::{Elf, Finder};

const CPP: &str = r#"
namespace shop {
struct Cart {
    int total(int n) const;
};
__attribute__((noinline)) int Cart::total(int n) const { return n * 3; }
}
extern "C" __attribute__((noinline)) int weft_exported(int n) { return n + 1; }
int main(int argc, char **) {
    shop::Cart cart;
    return cart.total(argc) + weft_exported(argc);
}
"#;

const RUST: &str = r"
pub mod shop {
    #[inline(never)]
    pub fn checkout_total(n: usize) -> usize { n * 3 }
}
fn main() { std::process::exit(shop::checkout_total(std::env::args().count()) as i32); }
";

fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Builds the C++ program with `flags` into `dir/shop`.
fn cpp(dir: &Path, flags: &[&str]) -> PathBuf {
    let source = dir.join("shop.cpp");
    std::fs::write(&source, CPP).unwrap();
    let out = dir.join("shop");
    let mut args = vec!["-O1", "-g", "-Wl,--build-id", "-o", s(&out), s(&source)];
    args.extend(flags);
    run("g++", &args);
    out
}

/// Splits `binary`'s debug info into `debug` and strips it; with a
/// `.gnu_debuglink` when `link`.
fn split(binary: &Path, debug: &Path, link: bool) {
    run("objcopy", &["--only-keep-debug", s(binary), s(debug)]);
    run("strip", &["--strip-all", s(binary)]);
    if link {
        run(
            "objcopy",
            &[&format!("--add-gnu-debuglink={}", s(debug)), s(binary)],
        );
    }
}

/// The names `finder` gives the functions of `path`.
fn names(finder: &Finder, path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap();
    let elf = Elf::parse(s(path), &bytes).unwrap();
    finder
        .functions(path, &elf)
        .into_iter()
        .map(|f| f.name)
        .collect()
}

fn build_id(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    Elf::parse(s(path), &bytes)
        .unwrap()
        .build_id()
        .unwrap()
        .expect("linked with --build-id")
}

const TOTAL: &str = "shop::Cart::total(int) const";

#[test]
fn a_stripped_cpp_program_is_named_from_its_debuglink_file() {
    let dir = scratch("link");
    let binary = cpp(&dir, &[]);
    split(&binary, &dir.join("shop.debug"), true);
    let found = names(&Finder::default(), &binary);
    assert!(found.iter().any(|n| n == TOTAL), "{found:?}");
    let raw = names(&Finder::new(Vec::new(), false), &binary);
    assert!(raw.iter().any(|n| n == "_ZNK4shop4Cart5totalEi"), "{raw:?}");
    // Also from `.debug/` next to it.
    std::fs::create_dir(dir.join(".debug")).unwrap();
    std::fs::rename(dir.join("shop.debug"), dir.join(".debug/shop.debug")).unwrap();
    assert!(
        names(&Finder::default(), &binary)
            .iter()
            .any(|n| n == TOTAL)
    );
}

#[test]
fn a_debug_file_is_found_by_build_id_under_a_debug_dir() {
    let dir = scratch("buildid");
    let binary = cpp(&dir, &[]);
    let id = build_id(&binary);
    let debug_dir = dir.join("debug");
    let place = debug_dir.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..]));
    std::fs::create_dir_all(place.parent().unwrap()).unwrap();
    split(&binary, &place, false);
    assert!(
        !names(&Finder::default(), &binary)
            .iter()
            .any(|n| n == TOTAL),
        "not without --debug-dir"
    );
    let found = names(&Finder::new(vec![debug_dir], true), &binary);
    assert!(found.iter().any(|n| n == TOTAL), "{found:?}");
}

#[test]
fn compressed_debug_sections_and_a_stale_debug_file() {
    let dir = scratch("compressed");
    let binary = cpp(&dir, &["-gz"]);
    let debug = dir.join("shop.debug");
    split(&binary, &debug, true);
    run("objcopy", &["--compress-debug-sections=zlib", s(&debug)]);
    // objcopy changed the debug file after the link was made: the CRC no
    // longer matches, but the build-id does, and it names the same build.
    assert!(
        names(&Finder::default(), &binary)
            .iter()
            .any(|n| n == TOTAL)
    );
    // A debug file of another build is refused: only the dynamic symbols.
    let other_dir = scratch("other");
    let other = cpp(&other_dir, &["-DOTHER=1", "-O0"]);
    run("objcopy", &["--only-keep-debug", s(&other), s(&debug)]);
    let found = names(&Finder::default(), &binary);
    assert!(!found.iter().any(|n| n == TOTAL), "{found:?}");
}

#[test]
fn a_uprobe_offset_is_found_by_stored_demangled_or_bare_cpp_name() {
    let dir = scratch("offset");
    let binary = cpp(&dir, &[]);
    split(&binary, &dir.join("shop.debug"), true);
    let finder = Finder::default();
    let offset = |name: &str| finder.file_offset(&binary, name).unwrap();
    let stored = offset("_ZNK4shop4Cart5totalEi").expect("found from the debug file");
    assert_eq!(offset(TOTAL), Some(stored));
    assert_eq!(offset("shop::Cart::total"), Some(stored));
    // An offset into the file: the function's bytes are there.
    let bytes = std::fs::read(&binary).unwrap();
    assert!(stored < bytes.len() as u64);
    assert_ne!(offset("weft_exported"), Some(stored));
    assert_eq!(offset("no_such_function"), None);
    // bpftrace's other places: a function and bytes into it, and a
    // link-time address as nm prints it.
    let offsets = finder.file_offsets(&binary).unwrap();
    assert_eq!(offsets.place(&format!("{TOTAL}+4")), Some(stored + 4));
    assert_eq!(
        offsets.place("_ZNK4shop4Cart5totalEi+0x10"),
        Some(stored + 16)
    );
    let nm = std::process::Command::new("nm")
        .arg(dir.join("shop.debug"))
        .output()
        .expect("run nm");
    let address = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find(|l| l.ends_with(" _ZNK4shop4Cart5totalEi"))
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .expect("nm names the function");
    assert_eq!(offsets.place(&format!("0x{address}")), Some(stored));
    assert_eq!(offsets.place("0xffffffffff"), None);
    // What bpftrace refuses: bytes past the function's end, an address in
    // no function; a place inside one is fine.
    assert_eq!(offsets.refused(&format!("{TOTAL}+0")), None);
    assert_eq!(offsets.refused(&format!("0x{address}")), None);
    let past = offsets
        .refused("_ZNK4shop4Cart5totalEi+100000")
        .expect("refused");
    assert!(
        past.starts_with("Offset outside the function bounds ('_ZNK4shop4Cart5totalEi' size is "),
        "{past}"
    );
    assert_eq!(
        offsets.refused("0x1").as_deref(),
        Some("Could not resolve address: 0x1 is in no function")
    );
    let err = finder
        .file_offset(&dir.join("missing"), "main")
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing"), "{err}");
}

#[test]
fn an_exported_function_of_a_stripped_library_is_named_by_dynsym() {
    let dir = scratch("dynsym");
    let source = dir.join("shop.cpp");
    std::fs::write(&source, CPP).unwrap();
    let library = dir.join("libshop.so");
    run(
        "g++",
        &["-shared", "-fPIC", "-O1", "-o", s(&library), s(&source)],
    );
    run("strip", &["--strip-all", s(&library)]);
    let found = names(&Finder::default(), &library);
    assert!(found.iter().any(|n| n == "weft_exported"), "{found:?}");
    assert!(found.iter().any(|n| n == TOTAL), "{found:?}");
}

#[test]
fn a_stripped_rust_program_is_named_demangled_in_both_manglings() {
    // Legacy is stable rustc's default; v0 is asked for.
    for (mangling, flags) in [
        ("legacy", &[][..]),
        ("v0", &["-C", "symbol-mangling-version=v0"][..]),
    ] {
        let dir = scratch(mangling);
        let source = dir.join("shop.rs");
        std::fs::write(&source, RUST).unwrap();
        let binary = dir.join("shop");
        let mut args = vec![
            "-g",
            "-C",
            "link-arg=-Wl,--build-id",
            "-o",
            s(&binary),
            s(&source),
        ];
        args.extend(flags);
        run("rustc", &args);
        split(&binary, &dir.join("shop.debug"), true);
        let found = names(&Finder::default(), &binary);
        assert!(
            found.iter().any(|n| n == "shop::shop::checkout_total"),
            "{mangling}: {:?}",
            found
                .iter()
                .filter(|n| n.contains("checkout"))
                .collect::<Vec<_>>()
        );
    }
}
