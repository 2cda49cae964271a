//! fentry and fexit on a module's function. The kernel takes such a
//! program with the module's BTF object beside the function's type id
//! (`attach_btf_obj_fd`, else the id is read in vmlinux's BTF); aya 0.14
//! sets that for extensions only, so weft loads these copies itself: the
//! copy's instructions from the object, relocated against the maps aya
//! made for the other programs (so that they share configuration, rings
//! and aggregations), loaded with `BPF_PROG_LOAD` and attached with
//! `BPF_RAW_TRACEPOINT_OPEN`.

use std::{
    collections::{HashMap, HashSet},
    io,
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd},
};

use aya::{
    Ebpf,
    maps::{Map, MapData},
};
use aya_obj::Object;

use crate::{
    ebpf::{self, bpf},
    error::{Context as _, Error, Result},
};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_RAW_TRACEPOINT_OPEN: libc::c_long = 17;
const BPF_BTF_GET_FD_BY_ID: libc::c_long = 19;
const BPF_BTF_GET_NEXT_ID: libc::c_long = 23;
const BPF_PROG_TYPE_TRACING: u32 = 26;
const BPF_TRACE_FENTRY: u32 = 24;
const BPF_TRACE_FEXIT: u32 = 25;

/// `union bpf_attr` for `BPF_PROG_LOAD`, up to `attach_btf_obj_fd`.
#[repr(C)]
#[derive(Default)]
struct LoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_btf_obj_fd: u32,
}

/// `union bpf_attr` for the `BPF_*_GET_*_ID` commands.
#[repr(C)]
#[derive(Default)]
struct IdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

/// `struct bpf_btf_info`.
#[repr(C)]
#[derive(Default)]
struct BtfInfo {
    btf: u64,
    btf_size: u32,
    id: u32,
    name: u64,
    name_len: u32,
    kernel_btf: u32,
}

/// `union bpf_attr` for `BPF_RAW_TRACEPOINT_OPEN`.
#[repr(C)]
struct OpenAttr {
    name: u64,
    prog_fd: u32,
}

/// A program weft loaded and attached itself: dropping it detaches it.
pub struct Attached {
    /// Declared first: the link goes before its program.
    _link: OwnedFd,
    program: OwnedFd,
}

impl Attached {
    /// The loaded program, for its counts.
    pub fn program(&self) -> BorrowedFd<'_> {
        self.program.as_fd()
    }
}

/// The one-liner object, parsed again and relocated against the maps aya
/// made for `ebpf`.
pub struct Programs {
    object: Object,
}

impl Programs {
    /// `taken`: the maps taken out of `ebpf`, by name.
    pub fn relocate(ebpf: &Ebpf, data: &[u8], taken: &[(&str, RawFd)]) -> Result<Self> {
        let mut object = Object::parse(data)
            .map_err(io::Error::other)
            .context("failed to read the trace programs")?;
        let maps = std::mem::take(&mut object.maps);
        let fds = ebpf
            .maps()
            .filter_map(|(name, map)| Some((name, map_data(map)?.fd().as_fd().as_raw_fd())));
        let fds: HashMap<&str, RawFd> = fds.chain(taken.iter().copied()).collect();
        let mut relocations = Vec::new();
        for (name, map) in &maps {
            let fd = fds
                .get(name.as_str())
                .with_context(|| format!("the trace programs' map {name} is not loaded"))?;
            relocations.push((name.as_str(), *fd, map));
        }
        let text: HashSet<usize> = object
            .functions
            .keys()
            .map(|(section, _)| *section)
            .collect();
        object
            .relocate_maps(relocations.into_iter(), &text)
            .map_err(io::Error::other)
            .context("failed to relocate the trace programs' maps")?;
        object
            .relocate_calls(&text)
            .map_err(io::Error::other)
            .context("failed to relocate the trace programs' calls")?;
        Ok(Self { object })
    }

    /// Loads program `name` (an fentry or, when `exit`, fexit copy) for
    /// the function whose type is `type_id` in `module`'s BTF, and
    /// attaches it.
    pub fn attach(&self, name: &str, exit: bool, module: &str, type_id: u32) -> Result<Attached> {
        let program = self
            .object
            .programs
            .get(name)
            .with_context(|| format!("the trace program {name} is missing"))?;
        let function = &self.object.functions[&program.function_key()];
        let btf = module_btf(module)?;
        let mut attr = LoadAttr {
            prog_type: BPF_PROG_TYPE_TRACING,
            insn_cnt: u32::try_from(function.instructions.len()).unwrap_or(u32::MAX),
            insns: function.instructions.as_ptr() as u64,
            license: self.object.license.as_ptr() as u64,
            kern_version: self.object.kernel_version.unwrap_or(0),
            expected_attach_type: if exit {
                BPF_TRACE_FEXIT
            } else {
                BPF_TRACE_FENTRY
            },
            attach_btf_id: type_id,
            attach_btf_obj_fd: fd_u32(btf.as_fd()),
            ..LoadAttr::default()
        };
        for (to, from) in attr.prog_name[..15].iter_mut().zip(name.bytes()) {
            *to = from;
        }
        let program = match load(&mut attr) {
            Ok(fd) => fd,
            Err(error) => return Err(refused(&mut attr, error)),
        };
        let mut open = OpenAttr {
            name: 0,
            prog_fd: fd_u32(program.as_fd()),
        };
        let link = owned(bpf(BPF_RAW_TRACEPOINT_OPEN, &mut open))
            .context("the kernel refused to attach the program")?;
        Ok(Attached {
            _link: link,
            program,
        })
    }
}

/// What the kernel's verifier said of a program it refused, with `error`:
/// the load again with its log (the first load runs without one, as a
/// log slows the verifier down).
fn refused(attr: &mut LoadAttr, error: io::Error) -> Error {
    let mut log = vec![0u8; 1 << 20];
    attr.log_level = 1;
    attr.log_size = log.len() as u32;
    attr.log_buf = log.as_mut_ptr() as u64;
    let _ = load(attr);
    let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
    let text = String::from_utf8_lossy(&log[..end]);
    // The verifier's last lines say why.
    let tail: Vec<&str> = text.lines().rev().take(8).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Error::Kernel {
        doing: format!("the kernel refused the program\n{}", tail.join("\n")),
        cause: Box::new(error.into()),
    }
}

fn load(attr: &mut LoadAttr) -> io::Result<OwnedFd> {
    owned(bpf(BPF_PROG_LOAD, attr))
}

/// The fd a `bpf()` call returned.
fn owned(rc: io::Result<libc::c_long>) -> io::Result<OwnedFd> {
    let fd = RawFd::try_from(rc?).map_err(io::Error::other)?;
    // SAFETY: the kernel returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fd_u32(fd: BorrowedFd<'_>) -> u32 {
    u32::try_from(fd.as_raw_fd()).expect("an open fd is not negative")
}

/// The kernel's BTF object of `module`, found among the kernel's BTF
/// objects by name.
fn module_btf(module: &str) -> Result<OwnedFd> {
    let mut id = 0;
    loop {
        let mut next = IdAttr {
            id,
            ..IdAttr::default()
        };
        if bpf(BPF_BTF_GET_NEXT_ID, &mut next).is_err() {
            return Err(Error::Missing(format!(
                "the kernel has no BTF object of module {module}"
            )));
        }
        id = next.next_id;
        let mut get = IdAttr {
            id,
            ..IdAttr::default()
        };
        // An object freed since it was listed is skipped.
        let Ok(fd) = owned(bpf(BPF_BTF_GET_FD_BY_ID, &mut get)) else {
            continue;
        };
        let mut name = [0u8; 64];
        let mut info = BtfInfo {
            name: name.as_mut_ptr() as u64,
            name_len: name.len() as u32,
            ..BtfInfo::default()
        };
        ebpf::object_info(fd.as_fd(), &mut info).context("failed to read a BTF object's info")?;
        let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
        if info.kernel_btf != 0 && name[..end] == *module.as_bytes() {
            return Ok(fd);
        }
    }
}

/// The map under `map`, whatever its kind.
pub(super) fn map_data(map: &Map) -> Option<&MapData> {
    match map {
        Map::Array(data)
        | Map::ArrayOfMaps(data)
        | Map::BloomFilter(data)
        | Map::CgroupArray(data)
        | Map::CpuMap(data)
        | Map::DevMap(data)
        | Map::DevMapHash(data)
        | Map::HashMap(data)
        | Map::HashOfMaps(data)
        | Map::LpmTrie(data)
        | Map::LruHashMap(data)
        | Map::PerCpuArray(data)
        | Map::PerCpuHashMap(data)
        | Map::PerCpuLruHashMap(data)
        | Map::PerfEventArray(data)
        | Map::ProgramArray(data)
        | Map::Queue(data)
        | Map::ReusePortSockArray(data)
        | Map::RingBuf(data)
        | Map::SockHash(data)
        | Map::SockMap(data)
        | Map::Stack(data)
        | Map::StackTraceMap(data)
        | Map::Unsupported(data)
        | Map::XskMap(data) => Some(data),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_load_attribute_has_the_kernel_s_layout() {
        // `union bpf_attr`'s offsets in <linux/bpf.h>.
        assert_eq!(std::mem::offset_of!(LoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(LoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::offset_of!(LoadAttr, attach_btf_id), 108);
        assert_eq!(std::mem::offset_of!(LoadAttr, attach_btf_obj_fd), 112);
        assert_eq!(std::mem::offset_of!(BtfInfo, kernel_btf), 28);
    }
}
