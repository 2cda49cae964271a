//! This process's own resource use, as `getrusage` reports it: the CPU
//! time `stat` and `record` show, the peak memory `--explain` shows.

/// This process's usage so far, or `None` if the kernel refuses.
fn own() -> Option<libc::rusage> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: filled above (and zeroed before).
    Some(unsafe { usage.assume_init() })
}

/// This process's CPU time so far (user and system), in seconds.
pub fn cpu_seconds() -> f64 {
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    own().map_or(0.0, |usage| {
        seconds(usage.ru_utime) + seconds(usage.ru_stime)
    })
}

/// The most this process has had resident since it started, KiB: whether
/// a question was answered in bounded memory. From `VmHWM`, the peak of
/// this program's own memory: `ru_maxrss` keeps across `execve` the peak of
/// the memory the process had before, which for a process spawned with
/// `vfork` (as Rust's `Command` spawns) is its parent's, so a query run by
/// a test harness reported the harness's 142 MiB as its own.
pub fn peak_resident_kib() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
            line.trim().trim_end_matches("kB").trim().parse().ok()
        })
        .unwrap_or_else(|| own().map_or(0, |usage| usage.ru_maxrss))
}
