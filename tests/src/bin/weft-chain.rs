//! A request chain over TCP for weft's fleet tests: a client asks a proxy,
//! the proxy asks a server, each request a line and each answer a line.
//!
//! - `weft-chain server ADDR SLOW SLOW_MS`: answers each connection on a
//!   thread of its own; the SLOW-th request (counted over all connections,
//!   from 1; 0 for none) waits `SLOW_MS` in one `nanosleep` before its answer.
//! - `weft-chain proxy ADDR UPSTREAM`: for each connection, one thread that
//!   connects to UPSTREAM and passes each request on and its answer back.
//! - `weft-chain client ADDR N GAP_MS`: first blocks reading one byte from
//!   stdin (so a tracer can attach to its pid), then sends N requests on
//!   one connection, `GAP_MS` apart, and exits.
//!
//! Servers and proxies run until killed.

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    net::{TcpListener, TcpStream},
    process::ExitCode,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

static REQUESTS: AtomicU64 = AtomicU64::new(0);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let strs: Vec<&str> = args.iter().map(String::as_str).collect();
    let done = match strs[..] {
        ["server", addr, slow, slow_ms] => server(addr, number(slow), number(slow_ms)),
        ["proxy", addr, upstream] => proxy(addr, upstream),
        ["client", addr, n, gap_ms] => client(addr, number(n), number(gap_ms)),
        _ => Err(std::io::Error::other(
            "usage: weft-chain server ADDR SLOW SLOW_MS | proxy ADDR UPSTREAM | client ADDR N GAP_MS",
        )),
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("weft-chain: {error}");
            ExitCode::from(2)
        }
    }
}

fn number(text: &str) -> u64 {
    text.parse()
        .unwrap_or_else(|_| panic!("weft-chain: `{text}` is not a number"))
}

fn server(addr: &str, slow: u64, slow_ms: u64) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    for stream in listener.incoming() {
        let stream = stream?;
        std::thread::spawn(move || {
            let mut writer = stream.try_clone()?;
            for line in BufReader::new(stream).lines() {
                let line = line?;
                if REQUESTS.fetch_add(1, Ordering::Relaxed) + 1 == slow {
                    sleep(slow_ms);
                }
                writeln!(writer, "done {line}")?;
            }
            Ok::<(), std::io::Error>(())
        });
    }
    Ok(())
}

fn proxy(addr: &str, upstream: &str) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    for stream in listener.incoming() {
        let stream = stream?;
        let upstream = upstream.to_owned();
        std::thread::spawn(move || {
            let server = TcpStream::connect(&upstream)?;
            let mut to_server = server.try_clone()?;
            let mut answers = BufReader::new(server).lines();
            let mut to_client = stream.try_clone()?;
            for line in BufReader::new(stream).lines() {
                writeln!(to_server, "{}", line?)?;
                let answer = answers
                    .next()
                    .ok_or_else(|| std::io::Error::other("server closed"))??;
                writeln!(to_client, "{answer}")?;
            }
            Ok::<(), std::io::Error>(())
        });
    }
    Ok(())
}

fn client(addr: &str, n: u64, gap_ms: u64) -> std::io::Result<()> {
    let mut byte = [0u8; 1];
    std::io::stdin().read_exact(&mut byte)?;
    let stream = TcpStream::connect(addr)?;
    let mut writer = stream.try_clone()?;
    let mut answers = BufReader::new(stream).lines();
    for i in 0..n {
        writeln!(writer, "request {i}")?;
        answers
            .next()
            .ok_or_else(|| std::io::Error::other("proxy closed"))??;
        std::thread::sleep(Duration::from_millis(gap_ms));
    }
    Ok(())
}

/// One `nanosleep` system call (the C library's `nanosleep` may be
/// `clock_nanosleep`).
fn sleep(ms: u64) {
    let time = libc::timespec {
        tv_sec: libc::time_t::try_from(ms / 1000).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::try_from((ms % 1000) * 1_000_000).unwrap_or(0),
    };
    // SAFETY: a valid timespec; no remainder wanted.
    unsafe {
        libc::syscall(
            libc::SYS_nanosleep,
            &raw const time,
            std::ptr::null_mut::<libc::timespec>(),
        )
    };
}
