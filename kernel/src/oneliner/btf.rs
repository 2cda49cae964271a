//! Just enough of the kernel's BTF (`/sys/kernel/btf/vmlinux`, and each
//! loaded module's beside it) to name a function's arguments for
//! `fentry:`/`fexit:` (`args.NAME`) and to find the members of kernel
//! structs (`$task->real_parent->pid`, `((struct loop_device *)arg0)->lo_number`):
//! aya parses BTF too but keeps function prototypes and member types to
//! itself.
//!
//! A module's BTF is split BTF: its type ids continue vmlinux's, its
//! strings continue vmlinux's string section, and each module starts at
//! the same id, so that two modules' ids collide. Here every module's
//! types get ids of their own, after vmlinux's and the modules' before it
//! (its references to vmlinux's types keep theirs).

use std::collections::HashMap;

use weft_oneliner::kernel::{Element, KernelType, Member, Shape, Signature};

const MAGIC: u16 = 0xeb9f;
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FWD: u32 = 7;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_ENUM64: u32 = 19;

/// Where the kernel shows its BTF: `vmlinux` and one file per module.
const BTF_DIR: &str = "/sys/kernel/btf";

/// One BTF blob: vmlinux's, or a module's on top of it.
struct Space {
    data: Vec<u8>,
    /// Where the string section starts.
    strings: usize,
    /// For a module: vmlinux's type count and string bytes, below which its
    /// type ids and string offsets are vmlinux's.
    base: Option<(u32, u32)>,
    /// The global id of this blob's first own type (1 for vmlinux).
    first: u32,
    /// `vmlinux`, or the module's name.
    name: String,
}

/// The kernel's BTF: functions by name, and their types.
pub struct Btf {
    spaces: Vec<Space>,
    /// Each global type id's blob and where its entry starts (id 0 is void).
    starts: Vec<(u16, usize)>,
    /// `struct NAME` and `union NAME` to their ids.
    records: HashMap<String, u32>,
    /// vmlinux's function names to their prototypes' ids.
    functions: HashMap<String, u32>,
    /// The modules' functions, to the blob that has them and their ids.
    module_functions: HashMap<String, (u16, u32)>,
    /// The prototypes of vmlinux's functions of a name taken before
    /// (static functions of several files), after the first's.
    more_prototypes: HashMap<String, Vec<u32>>,
}

/// A type's entry: its blob and where it starts.
#[derive(Clone, Copy)]
struct Entry<'a> {
    btf: &'a Btf,
    space: &'a Space,
    start: usize,
}

impl Entry<'_> {
    /// The raw word `at` bytes into the entry.
    fn word(&self, at: usize) -> Option<u32> {
        let at = self.start + at;
        Some(u32::from_le_bytes(
            self.space.data.get(at..at + 4)?.try_into().ok()?,
        ))
    }

    /// The type id the word `at` bytes in names, as a global id.
    fn ty(&self, at: usize) -> Option<u32> {
        let raw = self.word(at)?;
        Some(match self.space.base {
            Some((types, _)) if raw >= types => self.space.first + (raw - types),
            _ => raw,
        })
    }

    /// The blob and offset of the string the word `at` bytes in names.
    fn string(&self, at: usize) -> Option<(&Space, usize)> {
        let offset = self.word(at)?;
        match self.space.base {
            Some((_, bytes)) if offset < bytes => {
                let vmlinux = &self.btf.spaces[0];
                Some((vmlinux, vmlinux.strings + offset as usize))
            }
            Some((_, bytes)) => Some((self.space, self.space.strings + (offset - bytes) as usize)),
            None => Some((self.space, self.space.strings + offset as usize)),
        }
    }

    /// The string the word `at` bytes in names.
    fn name(&self, at: usize) -> Option<String> {
        let (space, start) = self.string(at)?;
        let end = start + space.data.get(start..)?.iter().position(|b| *b == 0)?;
        Some(String::from_utf8_lossy(&space.data[start..end]).into_owned())
    }

    /// Whether that string is `name`, without copying it.
    fn name_is(&self, at: usize, name: &str) -> bool {
        self.string(at).is_some_and(|(space, start)| {
            space
                .data
                .get(start..start + name.len() + 1)
                .is_some_and(|b| b[..name.len()] == *name.as_bytes() && b[name.len()] == 0)
        })
    }

    fn kind(&self) -> Option<u32> {
        Some((self.word(4)? >> 24) & 0x1f)
    }

    /// Its member, parameter or enumerator count.
    fn vlen(&self) -> usize {
        self.word(4).map_or(0, |info| (info & 0xffff) as usize)
    }
}

impl Btf {
    /// vmlinux's BTF, and every loaded module's.
    pub fn read() -> Result<Self, String> {
        let path = format!("{BTF_DIR}/vmlinux");
        let data =
            std::fs::read(&path).map_err(|e| format!("{path}: {e} (the kernel has no BTF)"))?;
        let mut btf = Self {
            spaces: Vec::new(),
            starts: vec![(0, 0)],
            records: HashMap::new(),
            functions: HashMap::new(),
            module_functions: HashMap::new(),
            more_prototypes: HashMap::new(),
        };
        btf.add(data, "vmlinux")
            .ok_or_else(|| format!("{path}: not BTF weft can read"))?;
        let mut modules: Vec<_> = std::fs::read_dir(BTF_DIR)
            .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        modules.sort();
        for module in modules {
            if module.file_name().is_some_and(|n| n == "vmlinux") {
                continue;
            }
            // A module's BTF that cannot be read leaves its types out.
            let name = module.file_name().unwrap_or_default().to_string_lossy();
            if let Ok(data) = std::fs::read(&module)
                && btf.add(data, &name).is_none()
            {
                log::warn!("weft: {}: not BTF weft can read", module.display());
            }
        }
        Ok(btf)
    }

    /// The entry of type `id` (none for void or an id out of range).
    fn entry(&self, id: u32) -> Option<Entry<'_>> {
        let &(space, start) = self.starts.get(id as usize).filter(|_| id != 0)?;
        Some(Entry {
            btf: self,
            space: &self.spaces[usize::from(space)],
            start,
        })
    }

    fn kind(&self, id: u32) -> Option<u32> {
        self.entry(id)?.kind()
    }

    /// The prototype of `function`, vmlinux's or a module's.
    fn prototype(&self, function: &str) -> Option<Entry<'_>> {
        let proto = match self.module_of(function) {
            None => *self.functions.get(function)?,
            Some(_) => self.entry(self.module_functions.get(function)?.1)?.ty(8)?,
        };
        self.entry(proto)
    }

    /// The arguments of `function`, in order, its return, and its module
    /// if it is a module's.
    pub fn function(&self, function: &str) -> Option<Signature> {
        let module = self.module_of(function);
        let proto = self.prototype(function)?;
        let args = (0..proto.vlen())
            .map(|i| {
                let at = 12 + i * 8;
                Some((proto.name(at)?, self.pointee(proto.ty(at + 4)?)))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Signature {
            args,
            returns: self.pointee(proto.ty(8)?),
            module: module.map(str::to_string),
        })
    }

    /// Every function, with its module (`vmlinux` for the kernel's own).
    pub fn functions(&self) -> impl Iterator<Item = (&str, &str)> {
        let vmlinux = self.functions.keys().map(|f| ("vmlinux", f.as_str()));
        let modules = (self.module_functions.iter())
            .map(|(f, (space, _))| (self.spaces[usize::from(*space)].name.as_str(), f.as_str()));
        vmlinux.chain(modules)
    }

    /// `function`'s parameters as C declares them (`struct file * file`),
    /// then `TYPE retval` unless it returns void: bpftrace's `-lv` lines;
    /// those of each function of the name in turn, as bpftrace lists them.
    pub fn declarations(&self, function: &str) -> Option<Vec<String>> {
        let mut lines = self.prototype_lines(self.prototype(function)?)?;
        for &proto in self.more_prototypes.get(function).into_iter().flatten() {
            lines.extend(self.prototype_lines(self.entry(proto)?)?);
        }
        Some(lines)
    }

    /// The `-lv` lines of prototype `proto`.
    fn prototype_lines(&self, proto: Entry<'_>) -> Option<Vec<String>> {
        let mut lines = (0..proto.vlen())
            .map(|i| {
                let at = 12 + i * 8;
                Some(format!(
                    "{} {}",
                    self.c_type(proto.ty(at + 4)?, 0),
                    proto.name(at)?
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        let returns = proto.ty(8)?;
        if returns != 0 {
            lines.push(format!("{} retval", self.c_type(returns, 0)));
        }
        Some(lines)
    }

    /// Type `id` as libbpf's `btf_dump` declares it without a name
    /// (`const char *`, `long unsigned int`, `int (*)(void *)`), `depth`
    /// types in (bounded, as BTF may be damaged into a cycle).
    fn c_type(&self, id: u32, depth: usize) -> String {
        let Some(entry) = self.entry(id) else {
            return "void".into();
        };
        if depth > 16 {
            return "?".into();
        }
        let target = entry.ty(8).unwrap_or(0);
        let inner = || self.c_type(target, depth + 1);
        let qualified = |qualifier: &str| {
            let inner = inner();
            if inner.ends_with('*') {
                format!("{inner} {qualifier}")
            } else {
                format!("{qualifier} {inner}")
            }
        };
        let name = entry.name(0).unwrap_or_default();
        match entry.kind() {
            Some(KIND_PTR) if self.kind(target) == Some(KIND_FUNC_PROTO) => {
                self.function_pointer(target, depth)
            }
            Some(KIND_PTR) => {
                let inner = inner();
                if inner.ends_with('*') {
                    inner + "*"
                } else {
                    inner + " *"
                }
            }
            Some(KIND_CONST) => qualified("const"),
            Some(KIND_VOLATILE) => qualified("volatile"),
            Some(KIND_RESTRICT) => qualified("restrict"),
            // A type tag (`__user`) is no part of the C type.
            Some(18) => inner(),
            Some(KIND_UNION) => format!("union {name}"),
            // A declaration: its kind flag says a union.
            Some(KIND_FWD) if entry.word(4).unwrap_or(0) >> 31 != 0 => format!("union {name}"),
            Some(KIND_STRUCT | KIND_FWD) => format!("struct {name}"),
            Some(KIND_ENUM | KIND_ENUM64) => format!("enum {name}"),
            Some(KIND_ARRAY) => {
                let element = self.c_type(entry.ty(12).unwrap_or(0), depth + 1);
                format!("{element}[{}]", entry.word(20).unwrap_or(0))
            }
            _ => name,
        }
    }

    /// A pointer to function prototype `proto`: `int (*)(struct file *, void *)`,
    /// `u64 (*)()`.
    fn function_pointer(&self, proto: u32, depth: usize) -> String {
        let Some(entry) = self.entry(proto) else {
            return "void (*)()".into();
        };
        let returns = self.c_type(entry.ty(8).unwrap_or(0), depth + 1);
        let args: Vec<String> = (0..entry.vlen())
            .map(|i| match entry.ty(12 + i * 8 + 4).unwrap_or(0) {
                // The last parameter of a variadic function has no type.
                0 => "...".to_string(),
                ty => self.c_type(ty, depth + 1),
            })
            .collect();
        // `()` for no parameters, as libbpf writes it.
        format!("{returns} (*)({})", args.join(", "))
    }

    /// `struct NAME` of what type `id` points to, when it is a pointer to one.
    fn pointee(&self, id: u32) -> Option<String> {
        match self.kernel_type(id) {
            KernelType::Pointer(Some(record)) => Some(self.record_name(record)),
            _ => None,
        }
    }

    /// The id of `struct NAME` or `union NAME`.
    pub fn record(&self, name: &str) -> Option<u32> {
        self.records.get(name).copied()
    }

    /// `struct NAME` or `union NAME` of record `id`.
    pub fn record_name(&self, id: u32) -> String {
        let keyword = if self.kind(id) == Some(KIND_UNION) {
            "union"
        } else {
            "struct"
        };
        let name = self.entry(id).and_then(|e| e.name(0));
        format!("{keyword} {}", name.unwrap_or_default())
    }

    /// The bytes of record `id`.
    pub fn record_size(&self, id: u32) -> u32 {
        self.entry(id).and_then(|e| e.word(8)).unwrap_or(0)
    }

    /// The alignment of record `id`: its most aligned member's, as C
    /// gives it (BTF does not record packing; the kernel's packed structs
    /// are not held by value in a program's).
    pub fn record_align(&self, id: u32) -> u32 {
        self.size_align(id, 0).1
    }

    /// The type typedef `name` names (`pid_t`, `u64`), with its layout.
    pub fn typedef(&self, name: &str) -> Option<Shape> {
        let id = (1..self.starts.len() as u32).find(|&id| {
            self.entry(id)
                .is_some_and(|e| e.kind() == Some(KIND_TYPEDEF) && e.name_is(0, name))
        })?;
        let (size, align) = self.size_align(id, 0);
        Some(Shape {
            ty: self.kernel_type(id),
            size,
            align,
        })
    }

    /// The size and alignment of type `id`, through typedefs, qualifiers
    /// and arrays to its members (`depth` bounds damaged BTF's cycles).
    fn size_align(&self, id: u32, depth: u32) -> (u32, u32) {
        let id = self.resolve(id);
        let Some(entry) = self.entry(id) else {
            return (0, 1);
        };
        let size = entry.word(8).unwrap_or(0);
        match entry.kind() {
            Some(KIND_PTR) => (8, 8),
            Some(KIND_ARRAY) if depth < 32 => {
                let element = entry.ty(12).unwrap_or(0);
                let count = entry.word(20).unwrap_or(0);
                let (size, align) = self.size_align(element, depth + 1);
                (size.saturating_mul(count), align)
            }
            Some(KIND_STRUCT | KIND_UNION) if depth < 32 => {
                let align = (0..entry.vlen())
                    .filter_map(|i| entry.ty(12 + i * 12 + 4))
                    .map(|ty| self.size_align(ty, depth + 1).1)
                    .max()
                    .unwrap_or(1);
                (size, align)
            }
            _ => (size, size.clamp(1, 8)),
        }
    }

    /// The value of enumerator `name` of any enum (`TCP_FIN_WAIT1`); the
    /// kernel's enumerators have unique names, as C requires.
    pub fn enumerator(&self, name: &str) -> Option<i64> {
        for id in 1..self.starts.len() as u32 {
            let Some(entry) = self.entry(id) else {
                continue;
            };
            let kind = entry.kind();
            if kind != Some(KIND_ENUM) && kind != Some(KIND_ENUM64) {
                continue;
            }
            let signed = entry.word(4)? & (1 << 31) != 0;
            let size = if kind == Some(KIND_ENUM) { 8 } else { 12 };
            for i in 0..entry.vlen() {
                let at = 12 + i * size;
                if !entry.name_is(at, name) {
                    continue;
                }
                let low = entry.word(at + 4)?;
                return Some(match (kind, signed) {
                    (Some(KIND_ENUM64), _) => {
                        (i64::from(entry.word(at + 8)?) << 32) | i64::from(low)
                    }
                    (_, true) => i64::from(low.cast_signed()),
                    (_, false) => i64::from(low),
                });
            }
        }
        None
    }

    /// Member `name` of record `id`, looking into its anonymous members
    /// as C does; `Err` says why there is none.
    pub fn member(&self, id: u32, name: &str) -> Result<Member, String> {
        self.find_member(id, name)?
            .ok_or_else(|| format!("{} has no member `{name}`", self.record_name(id)))
    }

    /// The integer member `name` of record `id` points to, as a pointer or
    /// an array of pointers: its size and sign.
    pub fn pointee_int(&self, id: u32, name: &str) -> Option<(u16, bool)> {
        let entry = self.entry(id)?;
        for i in 0..entry.vlen() {
            let at = 12 + i * 12;
            let ty = entry.ty(at + 4)?;
            let member_name = entry.name(at).unwrap_or_default();
            if member_name.is_empty() {
                if let KernelType::Record(inner) = self.kernel_type(ty)
                    && let Some(found) = self.pointee_int(inner, name)
                {
                    return Some(found);
                }
                continue;
            }
            if member_name != name {
                continue;
            }
            let mut ty = self.resolve(ty);
            while self.kind(ty) == Some(KIND_ARRAY) {
                ty = self.resolve(self.entry(ty)?.ty(12)?);
            }
            if self.kind(ty) != Some(KIND_PTR) {
                return None;
            }
            let to = self.resolve(self.entry(ty)?.ty(8)?);
            return match self.kernel_type(to) {
                KernelType::Int { size, signed } => Some((size, signed)),
                _ => None,
            };
        }
        None
    }

    /// The names of record `id`'s members, in order; an anonymous struct
    /// or union's members in its place.
    pub fn member_names(&self, id: u32) -> Vec<String> {
        let Some(entry) = self.entry(id) else {
            return Vec::new();
        };
        let mut names = Vec::new();
        for i in 0..entry.vlen() {
            let at = 12 + i * 12;
            let Some(ty) = entry.ty(at + 4) else {
                break;
            };
            match entry.name(at).unwrap_or_default().as_str() {
                "" => {
                    if let KernelType::Record(inner) = self.kernel_type(ty) {
                        names.extend(self.member_names(inner));
                    }
                }
                name => names.push(name.to_string()),
            }
        }
        names
    }

    fn find_member(&self, id: u32, name: &str) -> Result<Option<Member>, String> {
        let Some(entry) = self.entry(id) else {
            return Ok(None);
        };
        let bitfields = entry.word(4).unwrap_or(0) & (1 << 31) != 0;
        for i in 0..entry.vlen() {
            let at = 12 + i * 12;
            let (Some(ty), Some(bits)) = (entry.ty(at + 4), entry.word(at + 8)) else {
                break;
            };
            let (offset, width) = if bitfields {
                (bits & 0xff_ffff, bits >> 24)
            } else {
                (bits, 0)
            };
            let member_name = entry.name(at).unwrap_or_default();
            if member_name.is_empty() {
                // An anonymous struct or union: its members are the record's.
                if let KernelType::Record(inner) = self.kernel_type(ty)
                    && let Some(found) = self.find_member(inner, name)?
                {
                    return Ok(Some(Member {
                        offset: found.offset + offset / 8,
                        ty: found.ty,
                    }));
                }
                continue;
            }
            if member_name != name {
                continue;
            }
            if width != 0 || offset % 8 != 0 {
                return self.bit_field(id, name, offset, width, ty).map(Some);
            }
            return Ok(Some(Member {
                offset: offset / 8,
                ty: self.kernel_type(ty),
            }));
        }
        Ok(None)
    }

    /// Bit-field `name` of record `id`: `width` bits (0: the whole of its
    /// integer type `ty`) at bit `offset` of the record.
    fn bit_field(
        &self,
        id: u32,
        name: &str,
        offset: u32,
        width: u32,
        ty: u32,
    ) -> Result<Member, String> {
        let KernelType::Int { size, signed } = self.kernel_type(ty) else {
            return Err(format!(
                "`{name}` of {} is a bit-field of a type that is no integer",
                self.record_name(id)
            ));
        };
        let width = if width == 0 {
            u32::from(size) * 8
        } else {
            width
        };
        let shift = offset % 8;
        if shift + width > 64 {
            return Err(format!(
                "`{name}` of {} is a bit-field across more than 8 bytes, which weft does not read",
                self.record_name(id)
            ));
        }
        Ok(Member {
            offset: offset / 8,
            ty: KernelType::Bits {
                shift: shift as u8,
                width: width as u8,
                signed,
            },
        })
    }

    /// What type `id` is, through typedefs and qualifiers.
    fn kernel_type(&self, id: u32) -> KernelType {
        let id = self.resolve(id);
        let Some(entry) = self.entry(id) else {
            return KernelType::Other;
        };
        let size = entry.word(8).unwrap_or(0);
        match entry.kind() {
            Some(KIND_INT) => {
                let encoding = entry.word(12).unwrap_or(0) >> 24;
                KernelType::Int {
                    size: size as u16,
                    signed: encoding & 1 != 0,
                }
            }
            Some(KIND_ENUM | KIND_ENUM64) => KernelType::Int {
                size: size as u16,
                signed: entry.word(4).unwrap_or(0) & (1 << 31) != 0,
            },
            Some(KIND_PTR) => {
                let to = self.resolve(entry.ty(8).unwrap_or(0));
                KernelType::Pointer(match self.kind(to) {
                    Some(KIND_STRUCT | KIND_UNION) => Some(to),
                    // A declaration: the definition has the same name.
                    Some(KIND_FWD) => self.records.get(&self.record_name(to)).copied(),
                    _ => None,
                })
            }
            Some(KIND_ARRAY) => {
                let element = entry.ty(12).unwrap_or(0);
                let count = entry.word(20).unwrap_or(0);
                let stride = self.size_align(element, 0).0;
                Element::array(self.kernel_type(element), stride, count)
            }
            Some(KIND_STRUCT | KIND_UNION) => KernelType::Record(id),
            _ => KernelType::Other,
        }
    }

    /// `id` without typedefs and qualifiers.
    fn resolve(&self, mut id: u32) -> u32 {
        // typedef, volatile, const, restrict, type_tag; bounded, as BTF
        // may be damaged into a cycle.
        for _ in 0..32 {
            match self.entry(id) {
                Some(e) if matches!(e.kind(), Some(8..=11 | 18)) => id = e.ty(8).unwrap_or(0),
                _ => break,
            }
        }
        id
    }

    /// The module whose BTF has `function`, when vmlinux's does not.
    pub fn module_of(&self, function: &str) -> Option<&str> {
        Some(self.module_function(function)?.0)
    }

    /// The module whose BTF has `function`, when vmlinux's does not, and
    /// the function's type id there as the kernel numbers it (a module's
    /// ids continue vmlinux's, each module from the same id).
    pub fn module_function(&self, function: &str) -> Option<(&str, u32)> {
        if self.functions.contains_key(function) {
            return None;
        }
        let (space, id) = *self.module_functions.get(function)?;
        let space = &self.spaces[usize::from(space)];
        Some((&space.name, id - space.first + space.base?.0))
    }

    /// Adds a blob: vmlinux's first (`name` "vmlinux"), then each module's
    /// on top of it.
    fn add(&mut self, data: Vec<u8>, name: &str) -> Option<()> {
        let module = name != "vmlinux";
        let word = |at: usize| Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?));
        if u16::from_le_bytes(data.get(0..2)?.try_into().ok()?) != MAGIC {
            return None;
        }
        let header = word(4)? as usize;
        let (type_off, type_len) = (word(8)? as usize, word(12)? as usize);
        let str_off = word(16)? as usize;
        let base = if module {
            let vmlinux = self.spaces.first()?;
            let vmlinux_types = self.starts.iter().filter(|(space, _)| *space == 0).count();
            let bytes = u32::from_le_bytes(vmlinux.data.get(20..24)?.try_into().ok()?);
            Some((u32::try_from(vmlinux_types).ok()?, bytes))
        } else {
            None
        };
        let index = u16::try_from(self.spaces.len()).ok()?;
        let first = u32::try_from(self.starts.len()).ok()?;
        // Type ids start at 1 (or past vmlinux's); remember where each starts.
        let types = header + type_off;
        let mut starts = Vec::new();
        let mut at = types;
        while at < types + type_len {
            starts.push((index, at));
            let info = word(at + 4)?;
            let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
            at += 12 + extra_bytes(kind, vlen)?;
        }
        self.spaces.push(Space {
            strings: header + str_off,
            data,
            base,
            first,
            name: name.to_owned(),
        });
        self.starts.extend(starts);
        for id in first..self.starts.len() as u32 {
            let entry = self.entry(id)?;
            match entry.kind()? {
                KIND_STRUCT | KIND_UNION if !entry.name(0)?.is_empty() => {
                    self.records.entry(self.record_name(id)).or_insert(id);
                }
                // A name twice (static functions of two files) is the
                // first's, as bpftrace takes it.
                KIND_FUNC if module => {
                    (self.module_functions.entry(entry.name(0)?)).or_insert((index, id));
                }
                KIND_FUNC => {
                    let proto = entry.ty(8)?;
                    if self.kind(proto) == Some(KIND_FUNC_PROTO) {
                        match self.functions.entry(entry.name(0)?) {
                            std::collections::hash_map::Entry::Occupied(first) => {
                                let name = first.key().clone();
                                self.more_prototypes.entry(name).or_default().push(proto);
                            }
                            std::collections::hash_map::Entry::Vacant(slot) => {
                                slot.insert(proto);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        Some(())
    }
}

/// Bytes that follow the 12-byte header of a type of `kind` with `vlen`.
fn extra_bytes(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        // int, var, decl_tag
        1 | 14 | 17 => 4,
        // ptr, fwd, typedef, volatile, const, restrict, func, float, type_tag
        2 | 7..=12 | 16 | 18 => 0,
        // array
        3 => 12,
        // struct, union, datasec, enum64
        4 | 5 | 15 | 19 => vlen * 12,
        // enum, func_proto
        6 | 13 => vlen * 8,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_kernel_s_vfs_read() {
        let btf = Btf::read().expect("the kernel's BTF");
        let read = btf.function("vfs_read").expect("vfs_read");
        assert_eq!(
            read.args,
            [
                ("file".into(), Some("struct file".into())),
                ("buf".into(), None),
                ("count".into(), None),
                ("pos".into(), None)
            ]
        );
        assert_eq!(read.returns, None);
    }

    #[test]
    fn reads_this_kernel_s_enumerators() {
        let btf = Btf::read().expect("the kernel's BTF");
        // include/net/tcp_states.h and the BPF UAPI: fixed by the ABI.
        assert_eq!(btf.enumerator("TCP_ESTABLISHED"), Some(1));
        assert_eq!(btf.enumerator("TCP_FIN_WAIT1"), Some(4));
        assert_eq!(btf.enumerator("TCP_CLOSE"), Some(7));
        assert_eq!(btf.enumerator("BPF_PROG_TYPE_KPROBE"), Some(2));
        assert_eq!(btf.enumerator("TCP_NO_SUCH_STATE"), None);
    }

    #[test]
    fn finds_this_kernel_s_task_members() {
        let btf = Btf::read().expect("the kernel's BTF");
        let task = btf
            .record("struct task_struct")
            .expect("struct task_struct");
        let parent = btf.member(task, "real_parent").expect("real_parent");
        assert_eq!(parent.ty, KernelType::Pointer(Some(task)));
        let comm = btf.member(task, "comm").expect("comm");
        assert_eq!(comm.ty, KernelType::Chars(16));
        assert_eq!(
            btf.member(task, "pid").expect("pid").ty,
            KernelType::Int {
                size: 4,
                signed: true
            }
        );
        // A member of an anonymous union inside struct sock_common.
        let common = btf
            .record("struct sock_common")
            .expect("struct sock_common");
        assert!(btf.member(common, "skc_daddr").is_ok());
        assert!(btf.member(task, "no_such_member").is_err());
    }

    #[test]
    fn declares_parameters_as_bpftrace_lists_them() {
        let btf = Btf::read().expect("the kernel's BTF");
        // As bpftrace 0.17 lists them on 6.12 (`-lv kfunc:...`).
        let cases: [(&str, &[&str]); 4] = [
            (
                "vfs_read",
                &[
                    "struct file * file",
                    "char * buf",
                    "size_t count",
                    "loff_t * pos",
                    "ssize_t retval",
                ],
            ),
            ("tcp_reset", &["struct sock * sk", "struct sk_buff * skb"]),
            (
                "copy_from_kernel_nofault",
                &[
                    "void * dst",
                    "const void * src",
                    "size_t size",
                    "long int retval",
                ],
            ),
            (
                "sched_setaffinity",
                &[
                    "pid_t pid",
                    "const struct cpumask * in_mask",
                    "long int retval",
                ],
            ),
        ];
        for (function, lines) in cases {
            let lines: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
            assert_eq!(btf.declarations(function), Some(lines), "{function}");
        }
        // A pointer to a function, as C declares it.
        let threads = btf
            .declarations("kthread_create_on_node")
            .expect("kthread_create_on_node");
        assert_eq!(threads[0], "int (*)(void *) threadfn");
        // Its `...`: a parameter of no type and no name, which bpftrace
        // 0.17 lists as `void ` (seen on 6.12).
        assert_eq!(threads[4], "void ");
    }

    /// A module's split BTF: `struct NAME { int a; struct NAME *next; }`,
    /// its types after vmlinux's `types` (void included), its strings after
    /// vmlinux's `bytes`, `int` being vmlinux's type `int`.
    fn module_blob(name: &str, types: u32, bytes: u32, int: u32) -> Vec<u8> {
        let strings = format!("\0{name}\0a\0next\0");
        let at = |s: &str| bytes + strings.find(&format!("\0{s}\0")).unwrap() as u32 + 1;
        let (record, pointer) = (types, types + 1);
        let mut type_data = Vec::new();
        let mut push = |words: &[u32]| {
            for w in words {
                type_data.extend_from_slice(&w.to_le_bytes());
            }
        };
        // struct NAME, 2 members, 16 bytes: a at bit 0, next at bit 64.
        push(&[at(name), (KIND_STRUCT << 24) | 2, 16]);
        push(&[at("a"), int, 0, at("next"), pointer, 64]);
        // struct NAME *
        push(&[0, KIND_PTR << 24, record]);
        let mut blob = Vec::new();
        blob.extend_from_slice(&MAGIC.to_le_bytes());
        blob.extend_from_slice(&[1, 0]);
        for w in [
            24,
            0,
            type_data.len() as u32,
            type_data.len() as u32,
            strings.len() as u32,
        ] {
            blob.extend_from_slice(&w.to_le_bytes());
        }
        blob.extend_from_slice(&type_data);
        blob.extend_from_slice(strings.as_bytes());
        blob
    }

    #[test]
    fn reads_modules_split_btf_with_ids_of_their_own() {
        let mut btf = Btf::read().expect("the kernel's BTF");
        let vmlinux = &btf.spaces[0];
        let bytes = u32::from_le_bytes(vmlinux.data[20..24].try_into().unwrap());
        let types = btf.starts.iter().filter(|(space, _)| *space == 0).count() as u32;
        let int = (1..types)
            .find(|&id| {
                btf.entry(id)
                    .is_some_and(|e| e.kind() == Some(KIND_INT) && e.name_is(0, "int"))
            })
            .expect("int");
        // Two modules whose types have the same local ids.
        for name in ["weft_one", "weft_two"] {
            btf.add(module_blob(name, types, bytes, int), name)
                .expect("a module's BTF");
        }
        let one = btf.record("struct weft_one").expect("struct weft_one");
        let two = btf.record("struct weft_two").expect("struct weft_two");
        assert_ne!(one, two, "each module's ids are its own");
        for (id, name) in [(one, "struct weft_one"), (two, "struct weft_two")] {
            assert_eq!(btf.record_name(id), name);
            assert_eq!(btf.record_size(id), 16);
            let a = btf.member(id, "a").expect("a");
            assert_eq!(
                (a.offset, a.ty),
                (
                    0,
                    KernelType::Int {
                        size: 4,
                        signed: true
                    }
                )
            );
            let next = btf.member(id, "next").expect("next");
            assert_eq!((next.offset, next.ty), (8, KernelType::Pointer(Some(id))));
        }
        // vmlinux's own types are where they were.
        assert!(btf.record("struct task_struct").is_some());
    }

    #[test]
    fn lays_out_this_kernel_s_types() {
        let btf = Btf::read().expect("the kernel's BTF");
        let int = |size, signed| {
            Some(Shape {
                ty: KernelType::Int { size, signed },
                size: size.into(),
                align: size.into(),
            })
        };
        assert_eq!(btf.typedef("pid_t"), int(4, true));
        assert_eq!(btf.typedef("u64"), int(8, false));
        assert_eq!(btf.typedef("no_such_type_t"), None);
        // Two pointers; a list of 4-byte counters; an 8-byte atomic.
        let align = |name| btf.record_align(btf.record(name).expect(name));
        assert_eq!(align("struct list_head"), 8);
        assert_eq!(align("struct callback_head"), 8);
        assert_eq!(
            btf.record_align(btf.record("struct qspinlock").expect("qspinlock")),
            4
        );
    }
}
