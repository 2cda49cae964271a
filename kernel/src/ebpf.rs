//! The eBPF object built from `ebpf/` by `build.rs`, the checks every probe
//! needs before loading (privileges, tracefs), aya's loader, and the raw
//! `bpf(2)` calls aya has no API for.

use std::{
    ffi::CStr,
    fs,
    path::{Path, PathBuf},
};

use crate::error::{Context as _, Error, Result, bail};
use aya::{
    Ebpf, EbpfLoader,
    maps::{HashMap, MapData},
};
use weft_abi::tracefs::{Field, find_field};

/// Threads closing probe attachments at once, at most.
const CLOSERS: usize = 32;

/// Drops `links` (probe attachments: dropping one detaches it) many at
/// once. Closing a tracepoint's link and its perf event waits out RCU grace
/// periods in the kernel (about 70 ms a probe here): one by one, the 360
/// probes of `tracepoint:syscalls:sys_enter_*` took 25 s to detach, as
/// bpftrace's do, and `weft record --sources all` 5 s. Closes made at once
/// share the links' waits; the perf events' are serialised by the kernel
/// (`event_mutex`), which bounds the gain to half.
pub fn close_at_once<T: Send>(links: Vec<T>) {
    if links.len() < 2 {
        // Closed here, without a thread.
        return;
    }
    let per_thread = links.len().div_ceil(CLOSERS);
    let mut links = links.into_iter();
    std::thread::scope(|scope| {
        loop {
            let batch: Vec<T> = links.by_ref().take(per_thread).collect();
            if batch.is_empty() {
                break;
            }
            scope.spawn(move || drop(batch));
        }
    });
}

/// The object file, 8-byte aligned as the ELF parser requires.
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/weft-ebpf.o"));

/// `weft trace`'s object (its generic programs and maps only).
static ONELINER_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/weft-oneliner-ebpf.o"));

/// The embedded eBPF object of the event sources.
pub fn object() -> Result<&'static [u8]> {
    embedded(OBJECT)
}

/// The embedded eBPF object of `weft trace`.
pub fn oneliner_object() -> Result<&'static [u8]> {
    embedded(ONELINER_OBJECT)
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
    Err(Error::NeedsRoot(
        "tracing needs root (or CAP_BPF and CAP_PERFMON): run weft with sudo",
    ))
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
    // Mounted but closed to this user (mode 0700), or not mounted and not
    // this user's to mount: either way the answer is root.
    let closed = fs::metadata(path.join("events"))
        .is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied);
    if closed {
        return Err(Error::NeedsRoot(
            "reading tracefs (the kernel's probes) needs root: run weft with sudo",
        ));
    }
    mount(c"tracefs", c"/sys/kernel/tracing", None).map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            Error::NeedsRoot(
                "tracefs is not mounted, and mounting it needs root: run weft with sudo",
            )
        } else {
            Error::Kernel {
                doing: "tracefs is not mounted and mounting it on /sys/kernel/tracing failed"
                    .into(),
                cause: Box::new(e.into()),
            }
        }
    })?;
    Ok(path)
}

/// Mounts a kernel file system of type `fstype` on `target`, with the
/// mount options `data` (`mode=0700`) if any.
pub fn mount(fstype: &CStr, target: &CStr, data: Option<&CStr>) -> std::io::Result<()> {
    let data = data.map_or(std::ptr::null(), |d| d.as_ptr().cast());
    // SAFETY: all pointers are valid NUL-terminated strings; data may be NULL.
    let rc = unsafe { libc::mount(c"nodev".as_ptr(), target.as_ptr(), fstype.as_ptr(), 0, data) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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
        .ok_or_else(|| Error::Missing(format!("tracepoint {category}:{event}: no field `{name}`")))
}

/// Makes an [`EbpfLoader`] that has not read the kernel's BTF, on a
/// thread of its own, for objects that need no CO-RE relocations.
///
/// aya 0.14's `EbpfLoader::new` reads and parses /sys/kernel/btf/vmlinux
/// (megabytes, once the larger part of `weft trace`'s start-up) even when the
/// caller then sets `.btf(None)`. aya 0.16 reads it only when needed, but
/// needs a newer Rust than Debian's. Until then the loader is made on a
/// thread whose file opens fail: a seccomp filter binds only the thread
/// that installs it and ends with it. aya then finds no BTF, as after
/// `.btf(None)`.
pub fn spawn_loader_without_btf() -> std::thread::JoinHandle<EbpfLoader<'static>> {
    std::thread::spawn(|| {
        if deny_opens_on_this_thread().is_ok() {
            return EbpfLoader::new();
        }
        let mut loader = EbpfLoader::new();
        loader.btf(None);
        loader
    })
}

/// Installs a seccomp filter that fails every `openat` of the calling
/// thread with ENOENT (and allows every other system call).
fn deny_opens_on_this_thread() -> std::io::Result<()> {
    // The filter's system call numbers hold for this architecture only.
    #[cfg(target_arch = "x86_64")]
    const AUDIT_ARCH: Option<u32> = Some(0xc000_003e);
    #[cfg(target_arch = "aarch64")]
    const AUDIT_ARCH: Option<u32> = Some(0xc000_00b7);
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    const AUDIT_ARCH: Option<u32> = None;
    const ARCH_OFFSET: u32 = 4; // seccomp_data.arch
    const NR_OFFSET: u32 = 0; // seccomp_data.nr
    let arch = AUDIT_ARCH.ok_or(std::io::ErrorKind::Unsupported)?;
    let load = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let jeq = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    let ret = (libc::BPF_RET | libc::BPF_K) as u16;
    let insn = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let filter = [
        insn(load, 0, 0, ARCH_OFFSET),
        insn(jeq, 0, 3, arch),
        insn(load, 0, 0, NR_OFFSET),
        insn(jeq, 0, 1, libc::SYS_openat as u32),
        insn(ret, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOENT as u32),
        insn(ret, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prctl with integer arguments and a valid filter program;
    // no_new_privs and the filter apply to this thread only (no TSYNC).
    let rc = unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            -1
        } else {
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                &raw const program,
            )
        }
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The number of possible CPUs: one ring each.
pub fn cpus() -> Result<u32> {
    let cpus = aya::util::nr_cpus().map_err(|(path, e)| Error::Kernel {
        doing: format!("failed to read {path}"),
        cause: Box::new(e.into()),
    })?;
    u32::try_from(cpus).map_err(|_| Error::Invalid(format!("{cpus} CPUs: too many")))
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

/// The `bpf(2)` system call `cmd` with `attr`, the leading part of a
/// `union bpf_attr` (pointers in it must outlive the call), which the
/// kernel may write results back into (`BPF_OBJ_GET_INFO_BY_FD`'s length,
/// `BPF_PROG_TEST_RUN`'s return value); returns the result, a new fd for
/// some.
pub fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is valid for `size_of::<T>()` bytes, and the kernel
    // writes no more than that size into it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            std::ptr::from_mut(attr),
            std::mem::size_of::<T>(),
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(rc)
}

/// Runs of `programs` the kernel skipped (their `recursion_misses`; a
/// program not loaded, or whose info cannot be read, counts none). A
/// tracepoint or kprobe program is not run on a CPU where another such
/// program, or a `bpf()` call on a map (of any process), is under way:
/// each such event is lost to every tracer, counted only here, and only
/// from Linux 6.7 (before, the kernel counts a tracepoint's skipped runs
/// nowhere).
pub fn skipped<'a>(programs: impl IntoIterator<Item = &'a aya::programs::Program>) -> u64 {
    use std::os::fd::AsFd as _;
    programs
        .into_iter()
        .filter_map(|program| program.fd().ok())
        .map(|fd| recursion_misses(fd.as_fd()).unwrap_or(0))
        .sum()
}

/// The loaded program `fd`'s `recursion_misses`.
pub fn recursion_misses(fd: std::os::fd::BorrowedFd<'_>) -> Result<u64> {
    // SAFETY: a struct of plain integers, for which all zeroes is valid.
    let mut info: aya_obj::generated::bpf_prog_info = unsafe { std::mem::zeroed() };
    object_info(fd, &mut info).map_err(|e| Error::Kernel {
        doing: "failed to read a program's info".into(),
        cause: Box::new(e.into()),
    })?;
    Ok(info.recursion_misses)
}

/// The kernel's `info` of BPF object `fd` (`struct bpf_prog_info`,
/// `bpf_btf_info`...: plain integers and pointers to buffers that outlive
/// the call).
pub fn object_info<T>(fd: std::os::fd::BorrowedFd<'_>, info: &mut T) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    /// The `info` member of `union bpf_attr`.
    #[repr(C)]
    struct InfoAttr {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    let mut attr = InfoAttr {
        bpf_fd: u32::try_from(fd.as_raw_fd()).unwrap_or(u32::MAX),
        info_len: u32::try_from(size_of::<T>()).unwrap_or(u32::MAX),
        info: std::ptr::from_mut(info) as u64,
    };
    // The kernel writes no more than `info_len` bytes of `info`.
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr).map(drop)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::mount;

    /// The options weft mounts bpffs with (see `rings::bpffs`) make it
    /// root's only; without them it is 1777. Needs root, as CI has.
    #[test]
    fn bpffs_mounted_with_mode_0700_is_not_world_writable() {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping: mounting needs root");
            return;
        }
        let dir = std::env::temp_dir().join(format!("weft-bpffs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
        mount(c"bpf", &target, Some(c"mode=0700")).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o7777;
        // SAFETY: a valid NUL-terminated path, mounted above.
        unsafe { libc::umount(target.as_ptr()) };
        std::fs::remove_dir(&dir).unwrap();
        // The kernel keeps bpffs's sticky bit (0o1700); nobody but root
        // may enter or write.
        assert_eq!(mode & 0o777, 0o700, "mode {mode:o}");
    }
}

/// What one of weft's programs has cost so far, by the kernel's own
/// accounting (counted only while [`enable_run_stats`] is held).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramCost {
    pub name: &'static str,
    /// Times it ran.
    pub runs: u64,
    /// Nanoseconds it ran, in all.
    pub run_ns: u64,
}

/// Turns on the kernel's BPF run-time statistics (`BPF_ENABLE_STATS`)
/// while the returned descriptor is open. They are machine-wide and add
/// two clock reads to every run of every BPF program.
pub fn enable_run_stats() -> Result<std::os::fd::OwnedFd> {
    aya::sys::enable_stats(aya::sys::Stats::RunTime)
        .context("the kernel keeps no BPF run-time statistics (BPF_ENABLE_STATS, Linux 5.8)")
}

/// How long in each period [`sample_run_stats`] keeps the statistics on,
/// and off: a tenth of the runs pay their two clock reads.
pub const SAMPLE_ON: std::time::Duration = std::time::Duration::from_secs(1);
pub const SAMPLE_OFF: std::time::Duration = std::time::Duration::from_secs(9);
/// How long they stay off at first: a run of a few seconds is sampled,
/// while the first seconds, which a benchmark of weft's probe effect
/// measures, run as they do unsampled.
pub const SAMPLE_FIRST: std::time::Duration = std::time::Duration::from_secs(2);

/// The kernel's BPF run-time statistics on for [`SAMPLE_ON`] after
/// [`SAMPLE_FIRST`], then every [`SAMPLE_OFF`], until the returned guard
/// is dropped: the programs' run counts and times then cover the sampled
/// runs, whose mean is the time per run at a tenth of what keeping them
/// on costs. An error where the kernel keeps none.
pub fn sample_run_stats() -> Result<RunStatsSampler> {
    use std::sync::{Arc, atomic::AtomicBool};
    drop(enable_run_stats()?);
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("weft-bpf-stats".into())
        .spawn(move || {
            let mut off = SAMPLE_FIRST;
            while sleep_unless(&stopping, off) {
                // Off for this period where the kernel refuses.
                let on = enable_run_stats().ok();
                let going = sleep_unless(&stopping, SAMPLE_ON);
                drop(on);
                if !going {
                    break;
                }
                off = SAMPLE_OFF;
            }
        })
        .context("failed to start the BPF statistics thread")?;
    Ok(RunStatsSampler {
        stop,
        thread: Some(thread),
    })
}

/// Stops [`sample_run_stats`]'s sampling when dropped.
pub struct RunStatsSampler {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for RunStatsSampler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Sleeps `time` in short steps; false as soon as `stop` is set.
fn sleep_unless(stop: &std::sync::atomic::AtomicBool, time: std::time::Duration) -> bool {
    let end = std::time::Instant::now() + time;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(std::time::Duration::from_millis(50)));
    }
    false
}

impl ProgramCost {
    /// The programs' time per syscall entered, in ns: every syscall on the
    /// machine runs them, filtered ones too, and the entry program runs
    /// once each. `None` without sampled runs.
    pub fn per_syscall(costs: &[Self]) -> Option<u64> {
        let entered = costs.iter().map(|c| c.runs).min().filter(|n| *n > 0)?;
        let total: u64 = costs.iter().map(|c| c.run_ns).sum();
        Some(total / entered)
    }
}
