//! Just enough of the kernel's BTF (`/sys/kernel/btf/vmlinux`) to name a
//! function's arguments for `fentry:`/`fexit:` (`args.NAME`) and to find
//! the members of kernel structs (`$task->real_parent->pid`): aya parses
//! BTF too but keeps function prototypes and member types to itself.

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
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_ENUM64: u32 = 19;

/// The kernel's BTF: functions by name, and their types.
pub struct Btf {
    data: Vec<u8>,
    /// Where each type id's entry starts (id 0 is void).
    starts: Vec<usize>,
    /// Where the string section starts.
    strings: usize,
    /// `struct NAME` and `union NAME` to their ids.
    records: HashMap<String, u32>,
    /// Function names to their prototypes' ids.
    functions: HashMap<String, u32>,
}

impl Btf {
    pub fn read() -> Result<Self, String> {
        let path = "/sys/kernel/btf/vmlinux";
        let data =
            std::fs::read(path).map_err(|e| format!("{path}: {e} (the kernel has no BTF)"))?;
        Self::parse(data).ok_or_else(|| format!("{path}: not BTF weft can read"))
    }

    /// The arguments of `function`, in order, and its return.
    pub fn function(&self, function: &str) -> Option<Signature> {
        let proto = *self.functions.get(function)?;
        let start = self.start(proto);
        let params = self.u32_at(start + 4)? & 0xffff;
        let args = (0..params as usize)
            .map(|i| {
                let at = start + 12 + i * 8;
                Some((
                    self.name(self.u32_at(at)?)?,
                    self.pointee(self.u32_at(at + 4)?),
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Signature {
            args,
            returns: self.pointee(self.u32_at(start + 8)?),
        })
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
        let name = self.u32_at(self.start(id)).and_then(|n| self.name(n));
        format!("{keyword} {}", name.unwrap_or_default())
    }

    /// The bytes of record `id`.
    pub fn record_size(&self, id: u32) -> u32 {
        self.u32_at(self.start(id) + 8).unwrap_or(0)
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
            self.kind(id) == Some(KIND_TYPEDEF)
                && self
                    .u32_at(self.start(id))
                    .is_some_and(|n| self.name_is(n, name))
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
        let start = self.start(id);
        let size = self.u32_at(start + 8).unwrap_or(0);
        match self.kind(id) {
            Some(KIND_PTR) => (8, 8),
            Some(KIND_ARRAY) if depth < 32 => {
                let element = self.u32_at(start + 12).unwrap_or(0);
                let count = self.u32_at(start + 20).unwrap_or(0);
                let (size, align) = self.size_align(element, depth + 1);
                (size.saturating_mul(count), align)
            }
            Some(KIND_STRUCT | KIND_UNION) if depth < 32 => {
                let members = self.u32_at(start + 4).unwrap_or(0) & 0xffff;
                let align = (0..members as usize)
                    .filter_map(|i| self.u32_at(start + 12 + i * 12 + 4))
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
            let kind = self.kind(id);
            if kind != Some(KIND_ENUM) && kind != Some(KIND_ENUM64) {
                continue;
            }
            let start = self.start(id);
            let info = self.u32_at(start + 4)?;
            let signed = info & (1 << 31) != 0;
            let size = if kind == Some(KIND_ENUM) { 8 } else { 12 };
            for i in 0..(info & 0xffff) as usize {
                let at = start + 12 + i * size;
                if !self.name_is(self.u32_at(at)?, name) {
                    continue;
                }
                let low = self.u32_at(at + 4)?;
                return Some(match (kind, signed) {
                    (Some(KIND_ENUM64), _) => {
                        (i64::from(self.u32_at(at + 8)?) << 32) | i64::from(low)
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

    fn find_member(&self, id: u32, name: &str) -> Result<Option<Member>, String> {
        let start = self.start(id);
        let info = self.u32_at(start + 4).unwrap_or(0);
        let bitfields = info & (1 << 31) != 0;
        for i in 0..(info & 0xffff) as usize {
            let at = start + 12 + i * 12;
            let (Some(name_off), Some(ty), Some(bits)) =
                (self.u32_at(at), self.u32_at(at + 4), self.u32_at(at + 8))
            else {
                break;
            };
            let (offset, width) = if bitfields {
                (bits & 0xff_ffff, bits >> 24)
            } else {
                (bits, 0)
            };
            let member_name = self.name(name_off).unwrap_or_default();
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
        let start = self.start(id);
        let size = self.u32_at(start + 8).unwrap_or(0);
        match self.kind(id) {
            Some(KIND_INT) => {
                let encoding = self.u32_at(start + 12).unwrap_or(0) >> 24;
                KernelType::Int {
                    size: size as u16,
                    signed: encoding & 1 != 0,
                }
            }
            Some(KIND_ENUM | KIND_ENUM64) => KernelType::Int {
                size: size as u16,
                signed: self.u32_at(start + 4).unwrap_or(0) & (1 << 31) != 0,
            },
            Some(KIND_PTR) => {
                let to = self.resolve(size);
                KernelType::Pointer(match self.kind(to) {
                    Some(KIND_STRUCT | KIND_UNION) => Some(to),
                    // A declaration: the definition has the same name.
                    Some(KIND_FWD) => self.records.get(&self.record_name(to)).copied(),
                    _ => None,
                })
            }
            Some(KIND_ARRAY) => {
                let element = self.u32_at(start + 12).unwrap_or(0);
                let count = self.u32_at(start + 20).unwrap_or(0);
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
            match self.kind(id) {
                Some(8..=11 | 18) => id = self.u32_at(self.start(id) + 8).unwrap_or(0),
                _ => break,
            }
        }
        id
    }

    fn start(&self, id: u32) -> usize {
        self.starts.get(id as usize).copied().unwrap_or(0)
    }

    fn kind(&self, id: u32) -> Option<u32> {
        if id == 0 {
            return None;
        }
        Some((self.u32_at(self.start(id) + 4)? >> 24) & 0x1f)
    }

    fn u32_at(&self, at: usize) -> Option<u32> {
        Some(u32::from_le_bytes(
            self.data.get(at..at + 4)?.try_into().ok()?,
        ))
    }

    fn name(&self, offset: u32) -> Option<String> {
        let start = self.strings + offset as usize;
        let end = start + self.data.get(start..)?.iter().position(|b| *b == 0)?;
        Some(String::from_utf8_lossy(&self.data[start..end]).into_owned())
    }

    /// Whether the string at `offset` is `name`, without copying it.
    fn name_is(&self, offset: u32, name: &str) -> bool {
        let start = self.strings + offset as usize;
        self.data
            .get(start..start + name.len() + 1)
            .is_some_and(|bytes| bytes[..name.len()] == *name.as_bytes() && bytes[name.len()] == 0)
    }

    fn parse(data: Vec<u8>) -> Option<Self> {
        if u16::from_le_bytes(data.get(0..2)?.try_into().ok()?) != MAGIC {
            return None;
        }
        let mut btf = Self {
            data,
            starts: vec![0],
            strings: 0,
            records: HashMap::new(),
            functions: HashMap::new(),
        };
        let header = btf.u32_at(4)? as usize;
        let (type_off, type_len) = (btf.u32_at(8)? as usize, btf.u32_at(12)? as usize);
        btf.strings = header + btf.u32_at(16)? as usize;
        let types = header + type_off;
        // Type ids start at 1; remember where each type starts.
        let mut at = types;
        while at < types + type_len {
            btf.starts.push(at);
            let info = btf.u32_at(at + 4)?;
            let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
            at += 12 + extra_bytes(kind, vlen)?;
        }
        for id in 1..btf.starts.len() as u32 {
            let start = btf.start(id);
            match btf.kind(id)? {
                KIND_STRUCT | KIND_UNION => {
                    let name = btf.name(btf.u32_at(start)?)?;
                    if !name.is_empty() {
                        btf.records.entry(btf.record_name(id)).or_insert(id);
                    }
                }
                KIND_FUNC => {
                    let proto = btf.u32_at(start + 8)?;
                    if btf.kind(proto) == Some(KIND_FUNC_PROTO) {
                        btf.functions.insert(btf.name(btf.u32_at(start)?)?, proto);
                    }
                }
                _ => {}
            }
        }
        Some(btf)
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
