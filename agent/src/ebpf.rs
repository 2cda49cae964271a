//! The eBPF object built from `ebpf/` by `build.rs`, and the checks every probe
//! needs before loading: privileges and tracefs.

use std::{
    fs,
    os::fd::{AsFd as _, AsRawFd as _, RawFd},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, anyhow, bail};
use aya::{
    Ebpf,
    maps::{HashMap, Map, MapData, RingBuf},
};
use weft_probes::tracefs::{Field, find_field};

/// The object file, 8-byte aligned as the ELF parser requires.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/weft-ebpf.o"));

/// `weft trace`'s object (its generic programs and maps only).
static TRACE_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/weft-trace-ebpf.o"));

/// The embedded eBPF object of the event sources.
pub fn object() -> Result<&'static [u8]> {
    embedded(OBJECT)
}

/// The embedded eBPF object of `weft trace`.
pub fn trace_object() -> Result<&'static [u8]> {
    embedded(TRACE_OBJECT)
}

fn embedded(object: &'static [u8]) -> Result<&'static [u8]> {
    if object.is_empty() {
        bail!(
            "this weft was built with WEFT_SKIP_EBPF set and has no eBPF programs; rebuild without it"
        );
    }
    Ok(object)
}

/// Capability bits from `linux/capability.h`.
const CAP_SYS_ADMIN: u32 = 21;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// Fails with a plain message unless this process may load tracing programs:
/// `CAP_BPF` and `CAP_PERFMON`, or `CAP_SYS_ADMIN`.
pub fn check_privileges() -> Result<()> {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .unwrap_or(0);
    let has = |cap: u32| effective & (1 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    bail!("tracing needs root (or CAP_BPF and CAP_PERFMON): run weft with sudo")
}

/// The tracefs mount point, mounting it when absent.
pub fn tracefs() -> Result<&'static Path> {
    let path = Path::new("/sys/kernel/tracing");
    if path.join("events").is_dir() {
        return Ok(path);
    }
    let legacy = Path::new("/sys/kernel/debug/tracing");
    if legacy.join("events").is_dir() {
        return Ok(legacy);
    }
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL in literal");
    let (source, target, fstype) = (c("nodev"), c("/sys/kernel/tracing"), c("tracefs"));
    // SAFETY: all pointers are valid NUL-terminated strings; data may be NULL.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        bail!(
            "tracefs is not mounted and mounting it on /sys/kernel/tracing failed: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(path)
}

/// Where the tracefs format file of tracepoint `category:event` is; it
/// exists when the kernel has the tracepoint.
pub fn tracepoint_format(tracefs: &Path, category: &str, event: &str) -> PathBuf {
    tracefs
        .join("events")
        .join(category)
        .join(event)
        .join("format")
}

/// The tracefs format of tracepoint `category:event`.
pub fn read_tracepoint_format(tracefs: &Path, category: &str, event: &str) -> Result<String> {
    let path = tracepoint_format(tracefs, category, event);
    fs::read_to_string(&path).with_context(|| {
        format!(
            "tracepoint {category}:{event} is not available ({})",
            path.display()
        )
    })
}

/// Reads field `name` of tracepoint `category:event` from its tracefs format.
pub fn tracepoint_field(tracefs: &Path, category: &str, event: &str, name: &str) -> Result<Field> {
    let text = read_tracepoint_format(tracefs, category, event)?;
    find_field(&text, name)
        .ok_or_else(|| anyhow!("tracepoint {category}:{event}: no field `{name}`"))
}

/// The number of possible CPUs: one ring each.
pub fn cpus() -> Result<u32> {
    let cpus = aya::util::nr_cpus().map_err(|(path, e)| anyhow!("failed to read {path}: {e}"))?;
    u32::try_from(cpus).context("too many CPUs")
}

/// Puts `pids` into the pid filter set `map`.
pub fn fill_pids(ebpf: &mut Ebpf, map: &str, pids: &[u32]) -> Result<()> {
    let mut set: HashMap<&mut MapData, u32, u8> =
        HashMap::try_from(ebpf.map_mut(map).context("the probe has no pid map")?)?;
    for pid in pids {
        set.insert(pid, 1, 0)
            .context("failed to fill the pid filter")?;
    }
    Ok(())
}

/// Creates one ring of `bytes` per CPU and plugs each into the ring array `map`.
pub fn create_rings(
    ebpf: &mut Ebpf,
    map: &str,
    cpus: u32,
    bytes: u32,
) -> Result<Vec<RingBuf<MapData>>> {
    install_rings(ebpf, map, new_rings(cpus, bytes)?)
}

/// Creates one ring of `bytes` per CPU (the kernel allocates and clears
/// every page now, so this can run while the object loads).
pub fn new_rings(cpus: u32, bytes: u32) -> Result<Vec<MapData>> {
    (0..cpus)
        .map(|cpu| {
            let params = aya_obj::Map::new_from_params(
                aya_obj::generated::bpf_map_type::BPF_MAP_TYPE_RINGBUF as u32,
                0,
                0,
                bytes,
                0,
            );
            MapData::create(params, "weft_ring", None).with_context(|| {
                format!("failed to create a {bytes}-byte ring buffer for CPU {cpu}")
            })
        })
        .collect()
}

/// Plugs `rings` (one per CPU, in order) into the ring array `map`.
///
/// Each update of a map-of-maps waits for an RCU grace period in the
/// kernel (milliseconds each), so the updates run in parallel threads and
/// share grace periods instead of paying one per CPU in turn.
pub fn install_rings(
    ebpf: &mut Ebpf,
    map: &str,
    rings: Vec<MapData>,
) -> Result<Vec<RingBuf<MapData>>> {
    let outer = ebpf.map(map).context("the probe has no ring array")?;
    let Map::ArrayOfMaps(outer) = outer else {
        bail!("{map} is not an array of maps");
    };
    let outer_fd = outer.fd().as_fd().as_raw_fd();
    std::thread::scope(|scope| {
        let updates: Vec<_> = rings
            .iter()
            .zip(0u32..)
            .map(|(ring, cpu)| {
                let inner_fd = ring.fd().as_fd().as_raw_fd();
                scope.spawn(move || update_fd_slot(outer_fd, cpu, inner_fd))
            })
            .collect();
        updates
            .into_iter()
            .try_for_each(|u| u.join().expect("an update thread does not panic"))
    })
    .context("failed to install a ring buffer")?;
    rings
        .into_iter()
        .map(|ring| Ok(RingBuf::try_from(Map::RingBuf(ring))?))
        .collect()
}

/// `bpf(BPF_MAP_UPDATE_ELEM)` of slot `key` of map-of-maps `map_fd` to the
/// map `inner_fd`.
fn update_fd_slot(map_fd: RawFd, key: u32, inner_fd: RawFd) -> std::io::Result<()> {
    /// `union bpf_attr` for the element commands.
    #[repr(C)]
    struct ElemAttr {
        map_fd: u32,
        pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
    let value = inner_fd.cast_unsigned();
    let attr = ElemAttr {
        map_fd: map_fd.cast_unsigned(),
        pad: 0,
        key: (&raw const key) as u64,
        value: (&raw const value) as u64,
        flags: 0,
    };
    bpf(BPF_MAP_UPDATE_ELEM, &attr).map(drop)
}

/// The `bpf(2)` system call `cmd` with `attr`, the leading part of a
/// `union bpf_attr` for commands the kernel only reads it for (pointers in
/// it must outlive the call); returns the result, a new fd for some.
pub fn bpf<T>(cmd: libc::c_long, attr: &T) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is valid for `size_of::<T>()` bytes and only read.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            std::ptr::from_ref(attr),
            std::mem::size_of::<T>(),
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rc)
}

/// A task name as the kernel keeps it (`task_struct::comm`): at most 15
/// bytes, NUL-padded to 16.
pub fn comm_bytes(comm: &str) -> [u8; 16] {
    let mut bytes = [0; 16];
    let len = comm.len().min(15);
    bytes[..len].copy_from_slice(&comm.as_bytes()[..len]);
    bytes
}
