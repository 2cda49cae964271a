//! Event generators for `cargo xtask bench sources`: each makes one kind of
//! event as fast as one thread can, and prints the seconds it took.
//!
//! `weft-stress KIND N [PATH]`:
//! - `switches N`: N round trips between two threads over pipes (2N
//!   context switches);
//! - `udp N`: N 64-byte datagrams over `lo`;
//! - `lookups N PATH`: N page-cache lookups (4 KiB `pread`s of a cached file);
//! - `direct N PATH`: N 4 KiB `O_DIRECT` reads (block requests) over PATH;
//! - `app N`: N application records through `weft-client`, then a sync.

use std::{
    io::{Read as _, Write as _},
    os::unix::fs::{FileExt as _, OpenOptionsExt as _},
    process::ExitCode,
    time::Instant,
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(kind), Some(Ok(n))) = (args.first(), args.get(1).map(|n| n.parse::<u64>())) else {
        eprintln!("usage: weft-stress switches|udp|lookups|direct|app N [PATH]");
        return ExitCode::from(2);
    };
    let path = args.get(2).map(String::as_str).unwrap_or_default();
    let start = Instant::now();
    let done = match kind.as_str() {
        "switches" => switches(n),
        "udp" => udp(n),
        "lookups" => lookups(n, path),
        "direct" => direct(n, path),
        "app" => app(n),
        _ => Err(std::io::Error::other(format!("unknown kind {kind}"))),
    };
    if let Err(error) = done {
        eprintln!("weft-stress: {error}");
        return ExitCode::FAILURE;
    }
    println!("{:.6}", start.elapsed().as_secs_f64());
    ExitCode::SUCCESS
}

fn switches(n: u64) -> std::io::Result<()> {
    let (mut ping_rx, mut ping_tx) = std::io::pipe()?;
    let (mut pong_rx, mut pong_tx) = std::io::pipe()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let mut byte = [0u8];
        for _ in 0..n {
            ping_rx.read_exact(&mut byte)?;
            pong_tx.write_all(&byte)?;
        }
        Ok(())
    });
    let mut byte = [1u8];
    for _ in 0..n {
        ping_tx.write_all(&byte)?;
        pong_rx.read_exact(&mut byte)?;
    }
    echo.join()
        .map_err(|_| std::io::Error::other("echo thread panicked"))?
}

fn udp(n: u64) -> std::io::Result<()> {
    let receiver = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let sender = std::net::UdpSocket::bind("127.0.0.1:0")?;
    let to = receiver.local_addr()?;
    let payload = [0u8; 64];
    for _ in 0..n {
        sender.send_to(&payload, to)?;
    }
    Ok(())
}

fn lookups(n: u64, path: &str) -> std::io::Result<()> {
    let file = std::fs::File::open(path)?;
    let mut page = [0u8; 4096];
    for _ in 0..n {
        file.read_at(&mut page, 0)?;
    }
    Ok(())
}

fn direct(n: u64, path: &str) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)?;
    let pages = file.metadata()?.len() / 4096;
    let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("valid layout");
    // SAFETY: a non-zero layout; freed below.
    let buffer = unsafe { std::alloc::alloc_zeroed(layout) };
    // SAFETY: 4096 initialised bytes until freed.
    let page = unsafe { std::slice::from_raw_parts_mut(buffer, 4096) };
    let mut result = Ok(());
    for i in 0..n {
        if let Err(error) = file.read_at(page, (i % pages.max(1)) * 4096) {
            result = Err(error);
            break;
        }
    }
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(buffer, layout) };
    result
}

fn app(n: u64) -> std::io::Result<()> {
    let mut client = weft_client::Client::connect()?;
    client.define("stress", &[("i", weft_client::Kind::Int)])?;
    for i in 0..n {
        client.push("stress", &[i64::try_from(i).unwrap_or(i64::MAX)])?;
    }
    client.sync().map(|_| ())
}
