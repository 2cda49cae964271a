//! `weft-syscall-loop getppid|getpid|read N`: makes N raw syscalls in a tight
//! loop and prints the mean nanoseconds per call, for `cargo xtask bench`
//! (`read` reads one byte of `/dev/zero` each time).
//!
//! `weft-syscall-loop getppid|getpid|read for SECONDS`: a flood: makes them
//! as fast as it can for that long and prints `calls N`, the exact number
//! made.

use std::{
    process::ExitCode,
    time::{Duration, Instant},
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let [_, name, word, seconds] = args.as_slice()
        && word == "for"
    {
        let (Some(call), Ok(seconds)) = (Call::named(name), seconds.parse::<f64>()) else {
            return usage();
        };
        let calls = flood(&call, Duration::from_secs_f64(seconds));
        println!("calls {calls}");
        return ExitCode::SUCCESS;
    }
    let (call, n) = match args.as_slice() {
        [_, name, n] => match (Call::named(name), n.parse::<u32>()) {
            (Some(call), Ok(n)) if n > 0 => (call, n),
            _ => return usage(),
        },
        _ => return usage(),
    };
    let start = Instant::now();
    for _ in 0..n {
        call.make();
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(n);
    println!("{ns:.1}");
    ExitCode::SUCCESS
}

/// The call the loop makes.
enum Call {
    /// A call without arguments.
    Bare(libc::c_long),
    /// `read` of one byte from this descriptor (of `/dev/zero`).
    Read(libc::c_int),
}

impl Call {
    fn named(name: &str) -> Option<Self> {
        match name {
            "getppid" => Some(Self::Bare(libc::SYS_getppid)),
            "getpid" => Some(Self::Bare(libc::SYS_getpid)),
            "read" => {
                use std::os::fd::IntoRawFd as _;
                let zero = std::fs::File::open("/dev/zero").ok()?;
                Some(Self::Read(zero.into_raw_fd()))
            }
            _ => None,
        }
    }

    #[inline]
    fn make(&self) {
        match *self {
            // SAFETY: getppid/getpid take no arguments and cannot fail.
            Self::Bare(nr) => unsafe {
                libc::syscall(nr);
            },
            Self::Read(fd) => {
                let mut byte = 0u8;
                // SAFETY: one byte into a local of one byte.
                unsafe { libc::syscall(libc::SYS_read, fd, &raw mut byte, 1usize) };
            }
        }
    }
}

/// Makes `call` until `length` has passed; returns how many.
fn flood(call: &Call, length: Duration) -> u64 {
    let start = Instant::now();
    let mut calls = 0u64;
    // The clock is read every 1024 calls (the vDSO makes no syscall).
    while start.elapsed() < length {
        for _ in 0..1024 {
            call.make();
        }
        calls += 1024;
    }
    calls
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: weft-syscall-loop getppid|getpid|read N | weft-syscall-loop getppid|getpid|read for SECONDS"
    );
    ExitCode::from(2)
}
