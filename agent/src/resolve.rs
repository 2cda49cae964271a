//! Turning filter and capture flags into probe options: names to numbers,
//! pids checked, sizes bounded. Shared by `stat` and `record`.

use std::{path::Path, time::Duration};

use anyhow::{Context as _, Result, bail};
use weft_kernel::syscall::{AttachPoints, Filter, Options};
use weft_recording::command::Command;

use crate::cli::{Attach, CaptureArgs, FilterArgs};

/// The command `-c` or `-- PROGRAM ARGS` names, started and held until
/// the probes are attached (`quiet`: off the terminal, for the UI); `None`
/// without one.
pub fn command(filter: &FilterArgs, quiet: bool) -> Result<Option<Command>> {
    let words = match (&filter.command, filter.program.is_empty()) {
        (Some(command), _) => command.split_whitespace().map(str::to_owned).collect(),
        (None, false) => filter.program.clone(),
        (None, true) => return Ok(None),
    };
    // Before the cgroup is made: without root, the error says so.
    weft_kernel::ebpf::check_privileges()?;
    Ok(Some(Command::spawn(&words, quiet)?))
}

/// Probe options and the drain interval from the shared flags; with a
/// command, its cgroup is the filter.
pub fn probe_options(
    filter: &FilterArgs,
    capture: &CaptureArgs,
    command: Option<&Command>,
) -> Result<(Options, Duration)> {
    let cgroup = match command {
        Some(command) => Some(command.cgroup_id()),
        None => filter.cgroup.as_deref().map(cgroup_id).transpose()?,
    };
    let filter = Filter {
        pids: resolve_pids(&filter.pid)?,
        comm: filter.comm.clone(),
        syscalls: resolve_syscalls(&filter.syscall)?,
        min_duration: filter.min_duration.unwrap_or_default(),
        cgroup,
    };
    let attach = match (capture.attach, filter.syscalls.is_empty()) {
        (Attach::Syscall, true) => bail!("--attach syscall needs --syscall NAME"),
        (Attach::Raw, _) | (Attach::Auto, true) => AttachPoints::Raw,
        (Attach::Syscall | Attach::Auto, false) => AttachPoints::PerSyscall,
    };
    let ring_bytes = match capture.ring_size {
        Some(requested) => ring_bytes(requested)?,
        None => default_ring_bytes(weft_kernel::ebpf::cpus()?),
    };
    if capture.drain_interval.is_zero() {
        bail!("--drain-interval must be greater than zero");
    }
    Ok((
        Options {
            filter,
            attach,
            ring_bytes,
        },
        capture.drain_interval,
    ))
}

/// The cgroup v2 id of a cgroup directory: its inode number, once it is
/// known to be a directory of the cgroup2 file system.
fn cgroup_id(path: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let metadata = std::fs::metadata(path)
        .with_context(|| format!("--cgroup {}: no such cgroup", path.display()))?;
    if !metadata.is_dir() || !on_cgroup2(path) {
        bail!(
            "--cgroup {}: not a cgroup v2 directory (e.g. /sys/fs/cgroup/system.slice)",
            path.display()
        );
    }
    Ok(metadata.ino())
}

/// Whether `path` lies on the cgroup2 file system.
fn on_cgroup2(path: &Path) -> bool {
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the zeroed struct; the path is NUL-terminated.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c_path.as_ptr(), &raw mut fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC }
}

fn resolve_pids(pids: &[u32]) -> Result<Vec<u32>> {
    for pid in pids {
        if *pid == 0 || !Path::new(&format!("/proc/{pid}")).exists() {
            bail!("--pid {pid}: no such process");
        }
    }
    Ok(pids.to_vec())
}

fn resolve_syscalls(names: &[String]) -> Result<Vec<u32>> {
    names
        .iter()
        .map(|name| {
            weft_abi::syscall_names::number(name).with_context(|| {
                format!(
                    "--syscall {name}: unknown x86-64 syscall name (e.g. read, openat, getppid)"
                )
            })
        })
        .collect()
}

/// Each CPU's ring when `--ring-size` is not given: 256 MiB shared by the
/// CPUs, 1 to 64 MiB each (the event sources' rings as many again). A
/// one-core flood fills one CPU's ring; on a small machine, where the drain
/// shares the one other core with the flusher and the kernel's writeback,
/// 16 MiB is 70 ms of a 4 M/s flood and stalls of the drain that long were
/// seen (weft record lost records in a fifth of 10 s floods); 64 MiB is
/// 280 ms. A big machine drains on cores of its own: its rings share the
/// same 256 MiB rather than each keeping a floor (a 16 MiB floor took 2 GiB
/// of kernel memory for the syscall rings of a 128-CPU host, 4 GiB with the
/// event sources').
fn default_ring_bytes(cpus: u32) -> u32 {
    const TOTAL: u32 = 256 << 20;
    let each = (TOTAL / cpus.max(1)).clamp(1 << 20, 64 << 20);
    1 << each.ilog2()
}

/// The ring size rounded up to a power of two, within what the kernel accepts.
fn ring_bytes(requested: u64) -> Result<u32> {
    const MIN: u64 = 4096;
    const MAX: u64 = 1 << 30;
    if !(MIN..=MAX).contains(&requested) {
        bail!("--ring-size {requested}: must be between 4KiB and 1GiB");
    }
    Ok(requested.next_power_of_two() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_rings_share_256_mib_at_1_to_64_each() {
        assert_eq!(default_ring_bytes(1), 64 << 20);
        assert_eq!(default_ring_bytes(2), 64 << 20);
        assert_eq!(default_ring_bytes(8), 32 << 20);
        assert_eq!(default_ring_bytes(12), 16 << 20);
        assert_eq!(default_ring_bytes(16), 16 << 20);
        // A 128-CPU host: 256 MiB in all, not 2 GiB.
        assert_eq!(default_ring_bytes(128), 2 << 20);
        assert_eq!(u64::from(default_ring_bytes(128)) * 128, 256 << 20);
        assert_eq!(default_ring_bytes(256), 1 << 20);
        assert_eq!(default_ring_bytes(1024), 1 << 20);
    }

    #[test]
    fn ring_bytes_rounds_and_bounds() {
        assert_eq!(ring_bytes(5000).unwrap(), 8192);
        assert!(ring_bytes(100).is_err());
        assert!(ring_bytes(2 << 30).is_err());
    }

    #[test]
    fn resolve_syscalls_unknown_name() {
        let err = resolve_syscalls(&["getppid".into(), "nosuchcall".into()]).unwrap_err();
        assert!(err.to_string().contains("--syscall nosuchcall"), "{err}");
        assert_eq!(resolve_syscalls(&["getppid".into()]).unwrap(), vec![110]);
    }
}
