//! Just enough of the kernel's BTF (`/sys/kernel/btf/vmlinux`) to name a
//! function's arguments for `fentry:`/`fexit:` (`args.NAME`): aya parses BTF
//! too but keeps function prototypes to itself.

use std::collections::HashMap;

const MAGIC: u16 = 0xeb9f;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;

/// The functions of a BTF blob: name to argument names.
pub struct Functions {
    args: HashMap<String, Vec<String>>,
}

impl Functions {
    pub fn read() -> Result<Self, String> {
        let path = "/sys/kernel/btf/vmlinux";
        let data =
            std::fs::read(path).map_err(|e| format!("{path}: {e} (the kernel has no BTF)"))?;
        Self::parse(&data).ok_or_else(|| format!("{path}: not BTF weft can read"))
    }

    /// Argument names of `function`, in order.
    pub fn args(&self, function: &str) -> Option<&[String]> {
        self.args.get(function).map(Vec::as_slice)
    }

    fn parse(data: &[u8]) -> Option<Self> {
        let u16_at = |at: usize| Some(u16::from_le_bytes(data.get(at..at + 2)?.try_into().ok()?));
        let u32_at = |at: usize| Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?));
        if u16_at(0)? != MAGIC {
            return None;
        }
        let header = u32_at(4)? as usize;
        let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
        let str_off = u32_at(16)? as usize;
        let types = header + type_off;
        let strings = header + str_off;
        let name = |offset: u32| -> Option<String> {
            let start = strings + offset as usize;
            let end = start + data.get(start..)?.iter().position(|b| *b == 0)?;
            Some(String::from_utf8_lossy(&data[start..end]).into_owned())
        };
        // Type ids start at 1; remember where each type starts.
        let mut starts = vec![0usize];
        let mut at = types;
        while at < types + type_len {
            starts.push(at);
            let info = u32_at(at + 4)?;
            let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
            at += 12 + extra_bytes(kind, vlen)?;
        }
        let mut args = HashMap::new();
        for &start in &starts[1..] {
            let info = u32_at(start + 4)?;
            if (info >> 24) & 0x1f != KIND_FUNC {
                continue;
            }
            let proto = *starts.get(u32_at(start + 8)? as usize)?;
            let proto_info = u32_at(proto + 4)?;
            if (proto_info >> 24) & 0x1f != KIND_FUNC_PROTO {
                continue;
            }
            let params = (0..(proto_info & 0xffff) as usize)
                .map(|i| name(u32_at(proto + 12 + i * 8)?))
                .collect::<Option<Vec<String>>>()?;
            args.insert(name(u32_at(start)?)?, params);
        }
        Some(Self { args })
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
        let Ok(functions) = Functions::read() else {
            eprintln!("skipping: no kernel BTF");
            return;
        };
        assert_eq!(
            functions.args("vfs_read").map(<[String]>::to_vec),
            Some(vec![
                "file".into(),
                "buf".into(),
                "count".into(),
                "pos".into()
            ])
        );
    }
}
