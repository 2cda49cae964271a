//! What the checker asks of the kernel: which probes exist and what each
//! record holds. The agent answers from tracefs and BTF; tests answer from
//! fixed tables.

use weft_abi::tracefs;

/// How a field's bytes read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// An integer of `size` bytes.
    Int,
    /// A pointer: an integer, and `str()` reads the string it points to;
    /// `constant` where it points to `const` data (an input the kernel
    /// only reads, such as a syscall's file name).
    Pointer { constant: bool },
    /// `char name[N]` inside the record: a string.
    Chars,
    /// A USDT argument that is a constant, not in the record.
    Const(i64),
    /// A USDT argument held in memory (`8@-8(%rbp)`): `at` bytes from the
    /// address in the register at the field's offset, which the kernel
    /// reads at the event.
    Memory { at: i32 },
    /// A USDT argument in a place weft does not read (`8@sym(%rip)`,
    /// `8@(%rax,%rbx,8)`): an error where it is used.
    Unread,
    /// `__data_loc char[]`: a string stored after the fixed fields.
    DataLoc,
}

impl FieldKind {
    /// Whether the field reads as an integer the record holds or a
    /// constant: alike where probes share an action.
    pub fn integer(self) -> bool {
        matches!(
            self,
            Self::Int | Self::Const(_) | Self::Memory { .. } | Self::Unread
        )
    }
}

/// One field of a probe's record, as the kernel copies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    /// Byte offset in the copied context.
    pub offset: u16,
    /// Size in bytes of the value (an `int` in an 8-byte slot reads 4).
    pub size: u16,
    pub signed: bool,
    pub kind: FieldKind,
    /// The struct or union a pointer field points to, as its declaration
    /// names it (`struct __kernel_timespec`).
    pub pointee: Option<String>,
    /// The integer or pointer a pointer field points to, as its
    /// declaration names it: its size and sign (`const char *const *argv`:
    /// 8 unsigned, `int *fds`: 4 signed), by which `+`, `-` and `[i]` step;
    /// of an integer field, the elements of the array it is inside the
    /// record (`unsigned long args[6]`, whose `args[2]` is in place).
    pub element: Option<(u16, bool)>,
}

impl Field {
    /// Whether it is an array of integers inside the record, which `[i]`
    /// reads in place.
    pub fn is_array(&self) -> bool {
        self.kind == FieldKind::Int && self.element.is_some()
    }

    /// A 64-bit slot `index` of an argument array (fentry, raw tracepoints).
    pub fn slot(name: impl Into<String>, index: u16) -> Self {
        Self {
            name: name.into(),
            offset: index * 8,
            size: 8,
            signed: true,
            kind: FieldKind::Int,
            pointee: None,
            element: None,
        }
    }
}

/// A kernel function's arguments, by name, and its return: each with the
/// struct or union it points to, if it does (`struct file`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signature {
    pub args: Vec<(String, Option<String>)>,
    pub returns: Option<String>,
    /// The module whose function it is (none: the kernel's own).
    pub module: Option<String>,
}

/// A kernel type, as far as weft reads it (from BTF).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelType {
    /// An integer or an enum of `size` bytes.
    Int { size: u16, signed: bool },
    /// A pointer, and the struct or union it points to, if it does.
    Pointer(Option<u32>),
    /// A struct or union, by its id.
    Record(u32),
    /// `char name[N]`: a string.
    Chars(u16),
    /// A bit-field: `width` bits from bit `shift` of the member's first
    /// byte (little-endian, as x86-64 packs them), of a signed or unsigned
    /// integer type.
    Bits { shift: u8, width: u8, signed: bool },
    /// `T name[count]` of integers, pointers or records, `stride` bytes
    /// apart (`unsigned long bits[1]`, `struct rlimit rlim[16]`).
    Array {
        element: Element,
        stride: u32,
        count: u32,
    },
    /// Anything else (arrays of arrays of structs or pointers, floats,
    /// functions).
    Other,
}

/// What an array holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Element {
    Int {
        size: u16,
        signed: bool,
    },
    Pointer(Option<u32>),
    Record(u32),
    /// A row of an array of arrays: `count` integers of `size` bytes
    /// (`int a[2][3]`'s `int[3]`; a row of chars is a string, as
    /// `char names[4][16]`'s).
    Row {
        size: u16,
        signed: bool,
        count: u32,
    },
}

impl Element {
    /// An array of `count` elements of type `ty`, each `stride` bytes,
    /// as weft reads it: `char[N]` is a string.
    pub fn array(ty: KernelType, stride: u32, count: u32) -> KernelType {
        let element = match ty {
            KernelType::Int { size: 1, .. } => {
                return u16::try_from(count).map_or(KernelType::Other, KernelType::Chars);
            }
            KernelType::Int { size, signed } => Self::Int { size, signed },
            KernelType::Pointer(record) => Self::Pointer(record),
            KernelType::Record(id) => Self::Record(id),
            KernelType::Chars(len) => Self::Row {
                size: 1,
                signed: true,
                count: u32::from(len),
            },
            KernelType::Array {
                element: Self::Int { size, signed },
                stride,
                count,
            } if stride == u32::from(size) => Self::Row {
                size,
                signed,
                count,
            },
            _ => return KernelType::Other,
        };
        KernelType::Array {
            element,
            stride,
            count,
        }
    }

    /// The element as a type of its own.
    pub fn ty(self) -> KernelType {
        match self {
            Self::Int { size, signed } => KernelType::Int { size, signed },
            Self::Pointer(record) => KernelType::Pointer(record),
            Self::Record(id) => KernelType::Record(id),
            Self::Row { size: 1, count, .. } => {
                u16::try_from(count).map_or(KernelType::Other, KernelType::Chars)
            }
            Self::Row {
                size,
                signed,
                count,
            } => KernelType::Array {
                element: Self::Int { size, signed },
                stride: u32::from(size),
                count,
            },
        }
    }
}

/// A type and its layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub ty: KernelType,
    pub size: u32,
    pub align: u32,
}

/// A member of a kernel struct or union.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    /// Bytes from the start of the struct.
    pub offset: u32,
    pub ty: KernelType,
}

/// The kernel as the checker sees it. No method has a default, so that a
/// wrapper (a program's own types in front of the kernel, `types.rs`)
/// cannot leave one out.
pub trait Kernel {
    /// Tracepoints `(category, name)` matching the globs, sorted.
    fn tracepoints(&self, category: &str, name: &str) -> Vec<(String, String)>;
    /// The fields of a tracepoint's record, or why they cannot be read.
    fn tracepoint_fields(&self, category: &str, name: &str) -> Result<Vec<Field>, String>;
    /// Whether raw tracepoint `name` exists.
    fn has_raw_tracepoint(&self, name: &str) -> bool;
    /// Whether the kernel was built with kprobes.
    fn has_kprobes(&self) -> bool;
    /// Kernel functions matching a glob that kprobes or fentry can attach to.
    fn functions(&self, glob: &str) -> Vec<String>;
    /// A kernel function's arguments and return, from BTF, or why unknown.
    fn function(&self, function: &str) -> Result<Signature, String>;
    /// The id of kernel type `struct NAME` or `union NAME`, from BTF.
    fn record(&self, name: &str) -> Result<u32, String>;
    /// The name of record `id`, `struct NAME` or `union NAME`.
    fn record_name(&self, id: u32) -> String;
    /// The bytes of record `id`.
    fn record_size(&self, id: u32) -> u32;
    /// Member `name` of record `id`, or why it has none.
    fn member(&self, id: u32, name: &str) -> Result<Member, String>;
    /// The integer a pointer member of record `id` points to (each element
    /// of an array of pointers, `int *z[4]`): its size and sign; none for a
    /// pointer to anything else.
    fn pointee_int(&self, id: u32, name: &str) -> Option<(u16, bool)> {
        let _ = (id, name);
        None
    }
    /// The names of struct or union `id`'s members, in order (an
    /// anonymous member's own members in its place), to read it whole.
    fn member_names(&self, id: u32) -> Vec<String> {
        let _ = id;
        Vec::new()
    }
    /// The alignment of record `id`, for a program's struct that holds it.
    fn record_align(&self, id: u32) -> u32;
    /// The type a kernel typedef names (`pid_t`, `u64`), for a program's
    /// struct that holds one.
    fn typedef(&self, name: &str) -> Option<Shape>;
    /// The value of enumerator `name` of a kernel enum (`TCP_FIN_WAIT1`),
    /// from BTF.
    fn enumerator(&self, name: &str) -> Option<i64>;
    /// The address of kernel symbol `name` (`avenrun`), from kallsyms.
    fn symbol(&self, name: &str) -> Option<u64>;
    /// The id of the cgroup v2 directory at `path`, or why it has none.
    fn cgroup_id(&self, path: &str) -> Result<u64, String>;
    /// The USDT probe sites of the program or library `path` names (found
    /// as a uprobe's file is) with that file's path, or why there are none.
    fn usdt(&self, path: &str) -> Result<(String, Vec<UsdtSite>), String>;
    /// The program and libraries process `pid` has mapped, by path: where
    /// a USDT probe without a path is looked for.
    fn process_files(&self, pid: u32) -> Result<Vec<String>, String>;
    /// The regular files a path with `*` and `?` in it matches
    /// (`/lib/x86_64-linux-gnu/libc.so.*`), sorted, as a shell expands it.
    fn paths(&self, pattern: &str) -> Vec<String>;
    /// The functions a uprobe may attach to in the program or library
    /// `path` names (its symbol tables), with that file's path.
    fn uprobe_functions(&self, path: &str) -> Result<(String, Vec<String>), String>;
    /// The link-time address and size of data symbol `name` of the file a
    /// uprobe on `path` attaches to (`uaddr()`), if it has one.
    fn user_object(&self, path: &str, name: &str) -> Result<Option<(u64, u64)>, String> {
        let _ = name;
        Err(format!("{path}: weft reads no files here"))
    }
    /// The parameters of `function` in the program or library `path`
    /// names, from its DWARF or its debug file's; None where neither
    /// describes the function.
    fn uprobe_parameters(
        &self,
        path: &str,
        function: &str,
    ) -> Result<Option<crate::UserFunction>, String>;
}

/// A USDT probe site, as the checker sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsdtSite {
    pub provider: String,
    pub name: String,
    /// Its arguments' places, as the assembler wrote them (`-4@%eax`).
    pub args: String,
    /// Where it is in the file, and its probe's semaphore (0: none).
    pub offset: u64,
    pub semaphore: u64,
}

/// Whether `text` matches `pattern`, where `*` matches any run of
/// characters and `?` any one (bpftrace's probe wildcards).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    wildmatch::WildMatch::new(pattern).matches(text)
}

/// The fields of a tracepoint from the text of its tracefs `format` file,
/// without the `common_` header fields.
pub fn format_fields(format: &str) -> Vec<Field> {
    tracefs::fields(format)
        .filter(|f| !f.name.starts_with("common_"))
        .map(|f| {
            let declaration = f.declaration;
            let kind = if declaration.starts_with("__data_loc") {
                FieldKind::DataLoc
            } else if let Some(star) = declaration.find('*') {
                FieldKind::Pointer {
                    constant: declaration[..star].split_whitespace().any(|w| w == "const"),
                }
            } else if declaration.contains('[') && c_type(declaration).0 == Some(1) {
                // Byte arrays as char arrays, as BTF members are: strings,
                // or the addresses `ntop()` reads (`__u8 saddr[4]`).
                FieldKind::Chars
            } else {
                FieldKind::Int
            };
            let (mut width, mut signed) = c_type(declaration);
            if let Some(widened) = widened(declaration, f.field.size) {
                (width, signed) = (Some(8), widened);
            }
            let size = if kind == FieldKind::Int {
                width.map_or(f.field.size, |w| w.min(f.field.size))
            } else {
                f.field.size
            };
            let element = if kind == FieldKind::Int && declaration.contains('[') {
                // Its elements, each `size` bytes as the type says.
                Some((size as u16, f.signed || signed))
            } else {
                element(declaration)
            };
            Field {
                name: f.name.to_string(),
                offset: f.field.offset as u16,
                size: size as u16,
                signed: kind == FieldKind::Int && (f.signed || signed),
                kind,
                pointee: pointee(declaration),
                element,
            }
        })
        .collect()
}

/// `struct NAME` of a declaration `[const] struct NAME * field`.
fn pointee(declaration: &str) -> Option<String> {
    let (before, _) = declaration.split_once('*')?;
    let mut words = before.split_whitespace().filter(|w| *w != "const");
    let keyword = words.next().filter(|w| *w == "struct" || *w == "union")?;
    Some(format!("{keyword} {}", words.next()?))
}

/// What a pointer declaration (`const char *const * argv`, `int *fds`)
/// points to when that is a pointer or an integer: its size and sign.
/// A `void *` steps bytes, as GNU C steps it.
fn element(declaration: &str) -> Option<(u16, bool)> {
    let (before, after) = declaration.split_once('*')?;
    if after.contains('*') {
        return Some((8, false));
    }
    let words: Vec<&str> = before
        .split_whitespace()
        .filter(|w| *w != "const")
        .collect();
    if words.iter().any(|w| *w == "struct" || *w == "union") {
        return None;
    }
    if words == ["void"] {
        return Some((1, false));
    }
    // c_type reads the last word as the field's name.
    let (width, signed) = c_type(&format!("{before} x"));
    Some((u16::try_from(width?).ok()?, signed))
}

/// Whether a field declared `int`, or one of the 32-bit unsigned names, in
/// an 8-byte slot (a syscall's argument) is read whole, and signed: as
/// bpftrace 0.17 reads it (an `s64` or `u64`), so that its values and
/// sizes print alike (`-100` in `int dfd` is `4294967196` in a map key).
/// `const int`, `short` and the like keep their own width there.
fn widened(declaration: &str, size: u32) -> Option<bool> {
    let words: Vec<&str> = declaration.split_whitespace().collect();
    let (_, ty) = words.split_last()?;
    match (size, ty.join(" ").as_str()) {
        (8, "int") => Some(true),
        (8, "unsigned int" | "unsigned" | "u32" | "pid_t" | "uid_t" | "gid_t") => Some(false),
        _ => None,
    }
}

/// Width and signedness of common C integer types in a declaration
/// (`umode_t mode` in an 8-byte syscall slot reads as the 2 bytes it is,
/// as bpftrace reads it).
fn c_type(declaration: &str) -> (Option<u32>, bool) {
    // The kernel's `__u8` is its `u8`.
    let words: Vec<&str> = declaration
        .split_whitespace()
        .map(|w| w.trim_start_matches("__"))
        .collect();
    let Some((_, types)) = words.split_last() else {
        return (None, false);
    };
    let unsigned = types.iter().any(|w| *w == "unsigned" || w.starts_with('u'));
    let has = |t: &str| types.contains(&t);
    let any = |names: &[&str]| names.iter().any(|t| has(t));
    let width = if any(&["char", "s8", "u8"]) {
        Some(1)
    } else if any(&["short", "s16", "u16", "umode_t"]) {
        Some(2)
    } else if any(&[
        "long",
        "s64",
        "u64",
        "size_t",
        "loff_t",
        "off_t",
        "aio_context_t",
    ]) {
        Some(8)
    } else if any(&[
        "int",
        "s32",
        "u32",
        "pid_t",
        "uid_t",
        "gid_t",
        "clockid_t",
        "mqd_t",
        "key_t",
        "key_serial_t",
        "rwf_t",
        "timer_t",
        "qid_t",
        "enum",
    ]) {
        Some(4)
    } else {
        None
    };
    let unsigned = unsigned || any(&["umode_t", "qid_t", "aio_context_t", "enum"]);
    let signed_type = !unsigned && !has("size_t") && width.is_some();
    (width, signed_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointer_fields_say_what_they_step_over() {
        let element = |d: &str| element(d);
        assert_eq!(element("const char *const * argv"), Some((8, false)));
        assert_eq!(element("const char * filename"), Some((1, true)));
        assert_eq!(element("int * fds"), Some((4, true)));
        assert_eq!(element("unsigned int * p"), Some((4, false)));
        assert_eq!(element("void * buf"), Some((1, false)));
        assert_eq!(element("struct __kernel_timespec * rqtp"), None);
        assert_eq!(element("int fd"), None);
    }

    #[test]
    fn globs() {
        assert!(glob_match("sys_enter_*", "sys_enter_openat"));
        assert!(glob_match("*open*", "sys_enter_openat"));
        assert!(glob_match("vfs_rea?", "vfs_read"));
        assert!(!glob_match("sys_enter_*", "sys_exit_read"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("a*b", "acbd"));
    }

    #[test]
    fn syscall_and_sched_formats() {
        let format = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;\n\
            \tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;\n\
            \tfield:size_t count;\toffset:32;\tsize:8;\tsigned:0;\n\
            \tfield:char * buf;\toffset:48;\tsize:8;\tsigned:0;\n\
            \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
            \tfield:__data_loc char[] name;\toffset:40;\tsize:4;\tsigned:0;\n\
            \tfield:umode_t mode;\toffset:56;\tsize:8;\tsigned:0;\n\
            \tfield:const int flags;\toffset:64;\tsize:8;\tsigned:0;\n\
            \tfield:pid_t pid;\toffset:72;\tsize:8;\tsigned:0;\n";
        let fields = format_fields(format);
        let brief: Vec<_> = fields
            .iter()
            .map(|f| (f.name.as_str(), f.offset, f.size, f.signed, f.kind))
            .collect();
        assert_eq!(
            brief,
            vec![
                // bpftrace's sizes: an `int` or `pid_t` slot read whole,
                // `umode_t` and `const int` at their own width.
                ("dfd", 16, 8, true, FieldKind::Int),
                (
                    "filename",
                    24,
                    8,
                    false,
                    FieldKind::Pointer { constant: true }
                ),
                ("count", 32, 8, false, FieldKind::Int),
                ("buf", 48, 8, false, FieldKind::Pointer { constant: false }),
                ("prev_comm", 8, 16, false, FieldKind::Chars),
                ("name", 40, 4, false, FieldKind::DataLoc),
                ("mode", 56, 2, false, FieldKind::Int),
                ("flags", 64, 4, true, FieldKind::Int),
                ("pid", 72, 8, false, FieldKind::Int),
            ]
        );
    }
}
