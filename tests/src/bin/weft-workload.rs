//! A workload with an exactly known syscall count, for weft's kernel tests.
//!
//! `weft-workload STEP...` where each STEP is `getppid:N`, `getpid:N`,
//! `nanosleep:MS:K` or `direct-read:PATH:BYTES` (one `O_DIRECT` read of
//! BYTES, a multiple of 4096, from the start of PATH). It first blocks reading one byte from stdin, so a tracer
//! can attach to its pid before anything counted happens, then runs the steps
//! in order with raw `syscall(2)` calls (no libc caching) and exits.

use std::{io::Read as _, process::ExitCode};

fn main() -> ExitCode {
    let steps: Vec<String> = std::env::args().skip(1).collect();
    let mut parsed = Vec::new();
    for step in &steps {
        let Some(step) = parse(step) else {
            eprintln!(
                "weft-workload: bad step `{step}` (getppid:N, getpid:N, nanosleep:MS:K, direct-read:PATH:BYTES)"
            );
            return ExitCode::from(2);
        };
        parsed.push(step);
    }
    let mut byte = [0u8; 1];
    if std::io::stdin().read_exact(&mut byte).is_err() {
        eprintln!("weft-workload: stdin closed before the start signal");
        return ExitCode::from(2);
    }
    for step in parsed {
        if let Err(error) = run(step) {
            eprintln!("weft-workload: {error}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

enum Step {
    Getppid(u64),
    Getpid(u64),
    Nanosleep { ms: i64, times: u64 },
    DirectRead { path: String, bytes: usize },
}

fn parse(step: &str) -> Option<Step> {
    let mut parts = step.split(':');
    let step = match (parts.next()?, parts.next()?, parts.next()) {
        ("getppid", n, None) => Step::Getppid(n.parse().ok()?),
        ("getpid", n, None) => Step::Getpid(n.parse().ok()?),
        ("nanosleep", ms, Some(k)) => Step::Nanosleep {
            ms: ms.parse().ok()?,
            times: k.parse().ok()?,
        },
        ("direct-read", path, Some(bytes)) => Step::DirectRead {
            path: path.to_owned(),
            bytes: bytes.parse().ok().filter(|b| b % 4096 == 0)?,
        },
        _ => return None,
    };
    parts.next().is_none().then_some(step)
}

fn run(step: Step) -> std::io::Result<()> {
    match step {
        Step::Getppid(n) => {
            for _ in 0..n {
                // SAFETY: getppid takes no arguments and cannot fail.
                unsafe { libc::syscall(libc::SYS_getppid) };
            }
        }
        Step::Getpid(n) => {
            for _ in 0..n {
                // SAFETY: getpid takes no arguments and cannot fail.
                unsafe { libc::syscall(libc::SYS_getpid) };
            }
        }
        Step::Nanosleep { ms, times } => {
            let request = libc::timespec {
                tv_sec: ms / 1000,
                tv_nsec: (ms % 1000) * 1_000_000,
            };
            for _ in 0..times {
                // SAFETY: the timespec is valid; a NULL remainder is allowed.
                unsafe {
                    libc::syscall(
                        libc::SYS_nanosleep,
                        &raw const request,
                        std::ptr::null_mut::<libc::timespec>(),
                    )
                };
            }
        }
        Step::DirectRead { path, bytes } => direct_read(&path, bytes)?,
    }
    Ok(())
}

/// One `O_DIRECT` read of `bytes` into a page-aligned buffer.
fn direct_read(path: &str, bytes: usize) -> std::io::Result<()> {
    use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    if bytes == 0 {
        return Ok(());
    }
    let layout = std::alloc::Layout::from_size_align(bytes, 4096).expect("valid layout");
    // SAFETY: the layout has a non-zero size.
    let buffer = unsafe { std::alloc::alloc_zeroed(layout) };
    // SAFETY: `buffer` holds `bytes` initialised bytes until freed below.
    let slice = unsafe { std::slice::from_raw_parts_mut(buffer, bytes) };
    let read = file.read_at(slice, 0);
    // SAFETY: allocated above with the same layout.
    unsafe { std::alloc::dealloc(buffer, layout) };
    if read? != bytes {
        return Err(std::io::Error::other(format!("{path}: short read")));
    }
    Ok(())
}
