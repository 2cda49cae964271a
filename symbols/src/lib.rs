//! Function names for addresses in ELF files, found the way gdb and perf
//! find them: the file's own `.symtab`, else the `.symtab` of its separate
//! debug file (by build-id under a debug directory, or by `.gnu_debuglink`),
//! and always its `.dynsym`; demangled (Rust v0 and legacy, C++ Itanium)
//! unless asked not to. A function's parameters and the C types they
//! reach come from DWARF ([`Function`]), for a uprobe's `args->NAME`.
//!
//! One place for PT call traces, one-liners' `ustack` and uprobe targets,
//! so that all three name a function alike. Reading ELF is `object`'s job;
//! this crate knows where names live. It must not depend on other weft
//! crates. Files are read through [`read_file`]: regular files of bounded
//! size only, as weft runs as root.

mod debug;
mod demangle;
mod dwarf;
mod elf;
mod file;
mod maps;
mod table;
mod usdt;

pub use debug::{FileOffsets, Finder};
pub use demangle::demangle;
pub use dwarf::{CType, Function, Member, Parameter, Record};
pub use elf::{Elf, Error, Segment};
pub use file::{MAX_FILE_BYTES, read_file, read_file_within};
pub use maps::{Mapping, Process, executable_mappings};
pub use table::{Symbol, Symbols};
pub use usdt::UsdtProbe;
