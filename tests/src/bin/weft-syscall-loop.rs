//! `weft-syscall-loop getppid|getpid N`: makes N raw syscalls in a tight loop
//! and prints the mean nanoseconds per call, for `cargo xtask bench`.
//!
//! `weft-syscall-loop getppid|getpid for SECONDS`: a flood: makes them as
//! fast as it can for that long and prints `calls N`, the exact number made.

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, name, word, seconds] = args.as_slice()
        && word == "for"
    {
        let (Some(nr), Ok(seconds)) = (number(name), seconds.parse::<f64>()) else {
            return usage();
        };
        let calls = flood(nr, Duration::from_secs_f64(seconds));
        println!("calls {calls}");
        return ExitCode::SUCCESS;
    }
    let (nr, n) = match args.as_slice() {
        [_, name, n] => match (number(name), n.parse::<u32>()) {
            (Some(nr), Ok(n)) if n > 0 => (nr, n),
            _ => return usage(),
        },
        _ => return usage(),
    };
    let start = Instant::now();
    for _ in 0..n {
        // SAFETY: getppid/getpid take no arguments and cannot fail.
        unsafe { libc::syscall(nr) };
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(n);
    println!("{ns:.1}");
    ExitCode::SUCCESS
}

fn number(name: &str) -> Option<libc::c_long> {
    match name {
        "getppid" => Some(libc::SYS_getppid),
        "getpid" => Some(libc::SYS_getpid),
        _ => None,
    }
}

/// Makes syscall `nr` until `length` has passed; returns how many.
fn flood(nr: libc::c_long, length: Duration) -> u64 {
    let start = Instant::now();
    let mut calls = 0u64;
    // The clock is read every 1024 calls (the vDSO makes no syscall).
    while start.elapsed() < length {
        for _ in 0..1024 {
            // SAFETY: getppid/getpid take no arguments and cannot fail.
            unsafe { libc::syscall(nr) };
        }
        calls += 1024;
    }
    calls
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: weft-syscall-loop getppid|getpid N | weft-syscall-loop getppid|getpid for SECONDS"
    );
    ExitCode::from(2)
}
