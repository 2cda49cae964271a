//! The eBPF object built from `ebpf/` by `build.rs`, and the checks every probe
//! needs before loading: privileges and tracefs.

use std::{fs, path::Path};

use anyhow::{Context as _, Result, anyhow, bail};
use weft_probes::tracefs::{Field, find_field};

/// The object file, 8-byte aligned as the ELF parser requires.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/weft-ebpf.o"));

/// The embedded eBPF object.
pub fn object() -> Result<&'static [u8]> {
    if OBJECT.is_empty() {
        bail!(
            "this weft was built with WEFT_SKIP_EBPF set and has no eBPF programs; rebuild without it"
        );
    }
    Ok(OBJECT)
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

/// Reads field `name` of tracepoint `category:event` from its tracefs format.
pub fn tracepoint_field(tracefs: &Path, category: &str, event: &str, name: &str) -> Result<Field> {
    let path = tracefs
        .join("events")
        .join(category)
        .join(event)
        .join("format");
    let text = fs::read_to_string(&path).with_context(|| {
        format!(
            "tracepoint {category}:{event} is not available ({})",
            path.display()
        )
    })?;
    find_field(&text, name).ok_or_else(|| anyhow!("{}: no field `{name}`", path.display()))
}
