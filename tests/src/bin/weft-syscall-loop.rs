//! `weft-syscall-loop getppid|getpid N`: makes N raw syscalls in a tight loop
//! and prints the mean nanoseconds per call, for `cargo xtask bench`.

use std::{process::ExitCode, time::Instant};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (nr, n) = match args.as_slice() {
        [_, name, n] => {
            let nr = match name.as_str() {
                "getppid" => libc::SYS_getppid,
                "getpid" => libc::SYS_getpid,
                _ => return usage(),
            };
            match n.parse::<u32>() {
                Ok(n) if n > 0 => (nr, n),
                _ => return usage(),
            }
        }
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

fn usage() -> ExitCode {
    eprintln!("usage: weft-syscall-loop getppid|getpid N");
    ExitCode::from(2)
}
