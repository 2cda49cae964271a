//! A workload with an exactly known syscall count, for weft's kernel tests.
//!
//! `weft-workload STEP...` where each STEP is `getppid:N`, `getpid:N`,
//! `close-bad:N` (N `close(-1)` calls, each failing with EBADF),
//! `nanosleep:MS:K`, `direct-read:PATH:BYTES` (one `O_DIRECT` read of
//! BYTES, a multiple of 4096, from the start of PATH), `drop-cache:PATH`
//! (fsync, then drop PATH's pages from the page cache) or `read:PATH:BYTES`
//! (read PATH to its end, BYTES at a time), `open-mapped:PATH` (one
//! `openat` of PATH whose name lies in a file mapping the process has not
//! touched, so that a probe at the syscall's entry cannot read it yet) or
//! `migrate:N` (N getppid calls, each on the next CPU the process may run
//! on, moved there with `sched_setaffinity`), `threads:T:N` (T new threads,
//! started together, each making N getppid calls), `usdt:N` (N firings of the USDT probe `weft:step`, see
//! [`usdt_step`]), `frame:IFACE` (one Ethernet
//! frame from [`FRAME_SOURCE`] to [`FRAME_DEST`] sent on network interface
//! IFACE through a packet socket), `write-edge:PATH` (one `write` to PATH
//! of the 5 bytes `edge\n` that end a mapping: the page after them is
//! not mapped), `write-line:PATH` (one `write` to PATH of `line\n` from a
//! buffer with room after it), `stat:PATH` (one `statx` of PATH),
//! `hold:MS` (MS ms off the CPU in `poll`, not in a sleep: a process kept
//! alive after its measured steps, so that a tracer still finds its files),
//! `stack-args:N` (N getppid calls through libc's `syscall()` given seven
//! more arguments, 1 to 5, 66 and 77: the last two on the stack), or `switches:PATH` (the
//! thread's voluntary context switches so far, written into PATH once all
//! steps are done, so that writing it cannot block inside a measured
//! interval). It first blocks reading one byte from stdin, so a tracer
//! can attach to its pid before anything counted happens, then runs the steps
//! in order with raw `syscall(2)` calls (no libc caching) and exits.

use std::{io::Read as _, process::ExitCode};

fn main() -> ExitCode {
    let steps: Vec<String> = std::env::args().skip(1).collect();
    let mut parsed = Vec::new();
    for step in &steps {
        let Some(step) = parse(step) else {
            eprintln!(
                "weft-workload: bad step `{step}` (getppid:N, getpid:N, close-bad:N, nanosleep:MS:K, direct-read:PATH:BYTES, drop-cache:PATH, read:PATH:BYTES, open-mapped:PATH, migrate:N, frame:IFACE, write-edge:PATH, write-line:PATH, stat:PATH, stack-args:N, usdt:N, hogged-reads:MS, spin:MS, hold:MS, map-reads:MS, lock-waits:N:MS, threads:T:N, random-read:PATH:BYTES, fsync-behind:PATH:MB, switches:PATH)"
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
    let mut switches = Vec::new();
    for step in parsed {
        if let Err(error) = run(step, &mut switches) {
            eprintln!("weft-workload: {error}");
            return ExitCode::FAILURE;
        }
    }
    for (path, count) in switches {
        if let Err(error) = std::fs::write(&path, count.to_string()) {
            eprintln!("weft-workload: {path}: {error}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// The calling thread's voluntary context switches so far.
fn voluntary_switches() -> i64 {
    // SAFETY: getrusage fills the zeroed struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &raw mut usage) };
    usage.ru_nvcsw
}

enum Step {
    Getppid(u64),
    Getpid(u64),
    StackArgs(u64),
    CloseBad(u64),
    Nanosleep { ms: i64, times: u64 },
    DirectRead { path: String, bytes: usize },
    DropCache(String),
    Switches(String),
    Read { path: String, bytes: usize },
    OpenMapped(String),
    Migrate(u64),
    Frame(String),
    WriteEdge(String),
    WriteLine(String),
    Stat(String),
    Usdt(u64),
    HoggedReads(u64),
    LockWaits { times: u64, ms: u64 },
    Threads { threads: u64, calls: u64 },
    RandomRead { path: String, bytes: usize },
    FsyncBehind { path: String, mb: usize },
    Spin(u64),
    MapReads(u64),
    Hold(u64),
}

fn parse(step: &str) -> Option<Step> {
    let mut parts = step.split(':');
    let step = match (parts.next()?, parts.next()?, parts.next()) {
        ("drop-cache", path, None) => Step::DropCache(path.to_owned()),
        ("switches", path, None) => Step::Switches(path.to_owned()),
        ("open-mapped", path, None) => Step::OpenMapped(path.to_owned()),
        ("frame", iface, None) => Step::Frame(iface.to_owned()),
        ("write-edge", path, None) => Step::WriteEdge(path.to_owned()),
        ("write-line", path, None) => Step::WriteLine(path.to_owned()),
        ("stat", path, None) => Step::Stat(path.to_owned()),
        ("read", path, Some(bytes)) => Step::Read {
            path: path.to_owned(),
            bytes: bytes.parse().ok().filter(|b| *b > 0)?,
        },
        ("getppid", n, None) => Step::Getppid(n.parse().ok()?),
        ("getpid", n, None) => Step::Getpid(n.parse().ok()?),
        ("stack-args", n, None) => Step::StackArgs(n.parse().ok()?),
        ("close-bad", n, None) => Step::CloseBad(n.parse().ok()?),
        ("migrate", n, None) => Step::Migrate(n.parse().ok()?),
        ("usdt", n, None) => Step::Usdt(n.parse().ok()?),
        ("hogged-reads", ms, None) => Step::HoggedReads(ms.parse().ok()?),
        ("spin", ms, None) => Step::Spin(ms.parse().ok()?),
        ("hold", ms, None) => Step::Hold(ms.parse().ok()?),
        ("map-reads", ms, None) => Step::MapReads(ms.parse().ok()?),
        ("lock-waits", n, Some(ms)) => Step::LockWaits {
            times: n.parse().ok()?,
            ms: ms.parse().ok()?,
        },
        ("threads", t, Some(n)) => Step::Threads {
            threads: t.parse().ok().filter(|t| *t > 0)?,
            calls: n.parse().ok()?,
        },
        ("random-read", path, Some(bytes)) => Step::RandomRead {
            path: path.to_owned(),
            bytes: bytes.parse().ok().filter(|b| *b > 0)?,
        },
        ("fsync-behind", path, Some(mb)) => Step::FsyncBehind {
            path: path.to_owned(),
            mb: mb.parse().ok()?,
        },
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

/// Runs one step; `switches` collects the readings of `switches:PATH` steps.
fn run(step: Step, switches: &mut Vec<(String, i64)>) -> std::io::Result<()> {
    match step {
        Step::Getppid(n) => getppid(n),
        Step::Getpid(n) => {
            for _ in 0..n {
                // SAFETY: getpid takes no arguments and cannot fail.
                unsafe { libc::syscall(libc::SYS_getpid) };
            }
        }
        Step::StackArgs(n) => {
            for _ in 0..n {
                // SAFETY: getppid ignores the arguments past its number.
                unsafe {
                    libc::syscall(
                        libc::SYS_getppid,
                        1i64,
                        2i64,
                        3i64,
                        4i64,
                        5i64,
                        66i64,
                        77i64,
                    )
                };
            }
        }
        Step::CloseBad(n) => {
            for _ in 0..n {
                // SAFETY: closing fd -1 fails with EBADF and touches nothing.
                unsafe { libc::syscall(libc::SYS_close, -1) };
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
        Step::DropCache(path) => drop_cache(&path)?,
        Step::Switches(path) => switches.push((path, voluntary_switches())),
        Step::OpenMapped(path) => open_mapped(&path)?,
        Step::Migrate(n) => migrate(n)?,
        Step::HoggedReads(ms) => hogged_reads(ms)?,
        Step::Spin(ms) => spin_in_user_space(ms),
        Step::Hold(ms) => hold(ms),
        Step::MapReads(ms) => map_reads(ms)?,
        Step::LockWaits { times, ms } => lock_waits(times, ms),
        Step::Threads { threads, calls } => {
            // Started together, so that their calls interleave.
            let start = std::sync::Barrier::new(usize::try_from(threads).unwrap_or(1));
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(|| {
                        start.wait();
                        getppid(calls);
                    });
                }
            });
        }
        Step::RandomRead { path, bytes } => random_read(&path, bytes)?,
        Step::FsyncBehind { path, mb } => fsync_behind(&path, mb)?,
        Step::Frame(iface) => send_frame(&iface)?,
        Step::WriteEdge(path) => write_edge(&path)?,
        Step::Stat(path) => {
            std::fs::metadata(path)?;
        }
        Step::WriteLine(path) => {
            let file = std::fs::OpenOptions::new().write(true).open(path)?;
            // Zeros after the line: a string read past it stays in the buffer.
            let buffer = [
                *b"line
", [0; 5],
            ]
            .concat();
            std::io::Write::write_all(&mut &file, &buffer[..5])?;
        }
        Step::Usdt(n) => {
            for i in 0..n {
                usdt_step(i);
            }
        }
        Step::Read { path, bytes } => {
            use std::io::Read as _;
            let mut file = std::fs::File::open(path)?;
            let mut buffer = vec![0; bytes];
            while file.read(&mut buffer)? > 0 {}
        }
    }
    Ok(())
}

/// The semaphore of USDT probe `weft:step`: a tracer's count of it, which
/// the kernel keeps here while a uprobe on the probe asks it to.
#[unsafe(link_section = ".probes")]
#[unsafe(no_mangle)]
static mut weft_step_semaphore: Semaphore = Semaphore(0);

/// A semaphore on a page of its own. The kernel counts a semaphore in
/// the writable mapping of its file page; where the linker puts it on the
/// page that also ends the read-only-after-relocation data (a layout this
/// binary had once), the loader maps that page twice and the kernel counts
/// the copy the program does not read (bpftrace saw no event either).
#[repr(C, align(4096))]
struct Semaphore(u16);

/// Fires USDT probe `weft:step` (an SDT note, as `<sys/sdt.h>` writes
/// one) when a tracer counts its semaphore, as programs guard their
/// probes: `arg0` is `i` in a register, `arg1` the constant -7, `arg2` `i`
/// again, in memory, and `arg3` a pointer in memory to the string `step`.
#[inline(never)]
fn usdt_step(i: u64) {
    // SAFETY: a read of a u16 the kernel may write at any time.
    if unsafe { std::ptr::read_volatile(&raw const weft_step_semaphore.0) } == 0 {
        return;
    }
    let memory = i;
    let label = c"step".as_ptr();
    // SAFETY: a nop, and notes in sections of their own.
    unsafe {
        std::arch::asm!(
            "990: nop",
            ".pushsection .note.stapsdt, \"\", @note",
            ".balign 4",
            ".4byte 992f-991f, 994f-993f, 3",
            "991: .asciz \"stapsdt\"",
            "992: .balign 4",
            "993: .8byte 990b",
            ".8byte _.stapsdt.base",
            ".8byte weft_step_semaphore",
            ".asciz \"weft\"",
            ".asciz \"step\"",
            ".asciz \"8@{i} -4@$-7 8@-16({memory}) 8@8({label})\"",
            "994: .balign 4",
            ".popsection",
            ".ifndef _.stapsdt.base",
            ".pushsection .stapsdt.base, \"aG\", @progbits, .stapsdt.base, comdat",
            ".weak _.stapsdt.base",
            ".hidden _.stapsdt.base",
            "_.stapsdt.base: .space 1",
            ".size _.stapsdt.base, 1",
            ".popsection",
            ".endif",
            i = in(reg) i,
            // Offsets from a frame pointer are often negative, as this one.
            memory = in(reg) (&raw const memory).wrapping_byte_add(16),
            // 8 bytes before the pointer: the argument's offset is 8.
            label = in(reg) (&raw const label).wrapping_byte_sub(8),
            options(att_syntax, nostack, preserves_flags, readonly),
        );
    }
}

/// `n` getppid calls, each on the next of the CPUs the process may use.
fn migrate(n: u64) -> std::io::Result<()> {
    let cpus = allowed_cpus()?;
    for (_, &cpu) in (0..n).zip(cpus.iter().cycle()) {
        pin(cpu)?;
        // SAFETY: getppid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
    Ok(())
}

/// The CPUs the calling thread may run on.
fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is an empty set.
    let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `allowed` is a cpu_set_t of `size` bytes.
    if unsafe { libc::sched_getaffinity(0, size, &raw mut allowed) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &allowed) })
        .collect())
}

/// Moves the calling thread to `cpu` alone.
fn pin(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut one) };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: `one` is a cpu_set_t of `size` bytes.
    if unsafe { libc::sched_setaffinity(0, size, &raw const one) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `ms` on the CPU without a system call: a function a CPU profile finds
/// by name. The loop is one `asm!` block, so that samples land in this
/// function itself: this crate is built without optimisation and without
/// frame pointers, and a sample in a function it calls would not name it.
/// `ms` ms off the CPU in `poll`, which is no sleep of `nanosleep`'s.
fn hold(ms: u64) {
    let ms = i32::try_from(ms).unwrap_or(i32::MAX);
    // SAFETY: poll of no descriptors only waits.
    unsafe { libc::poll(std::ptr::null_mut(), 0, ms) };
}

#[inline(never)]
fn spin_in_user_space(ms: u64) {
    let until = std::time::Instant::now() + std::time::Duration::from_millis(ms);
    while std::time::Instant::now() < until {
        let mut rounds: u64 = 1_000_000;
        // SAFETY: counts a register down to zero; touches nothing else.
        unsafe {
            std::arch::asm!("2:", "dec {0}", "jnz 2b", inout(reg) rounds);
        }
        std::hint::black_box(rounds);
    }
}

/// 1 MiB reads of `/dev/zero` on one CPU for `ms`, then as long again with
/// two threads spinning on the same CPU: those reads wait in the run queue.
fn hogged_reads(ms: u64) -> std::io::Result<()> {
    use std::{
        io::Read as _,
        sync::atomic::{AtomicBool, Ordering},
        time::{Duration, Instant},
    };
    let cpu = *allowed_cpus()?
        .last()
        .ok_or_else(|| std::io::Error::other("no CPU"))?;
    pin(cpu)?;
    let mut zero = std::fs::File::open("/dev/zero")?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut read_for = |ms: u64| -> std::io::Result<()> {
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            zero.read_exact(&mut buffer)?;
        }
        Ok(())
    };
    read_for(ms)?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                if pin(cpu).is_ok() {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                }
            });
        }
        let done = read_for(ms);
        stop.store(true, Ordering::Relaxed);
        done
    })
}

/// For `ms`, reads of a BPF array map in a loop, pinned to one CPU beside
/// a thread that sleeps 50 us at a time there: the kernel runs no
/// tracepoint program on that CPU during each read, so tracers miss the
/// sleeper's wakeups whose timer interrupt comes in one.
fn map_reads(ms: u64) -> std::io::Result<()> {
    use std::{
        sync::atomic::{AtomicBool, Ordering},
        time::{Duration, Instant},
    };
    /// The leading members of `union bpf_attr` for `BPF_MAP_CREATE`, and
    /// for `BPF_MAP_LOOKUP_ELEM`.
    #[repr(C)]
    struct Create {
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    }
    #[repr(C)]
    struct Lookup {
        map_fd: u32,
        pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    const BPF_MAP_TYPE_ARRAY: u32 = 2;
    let create = Create {
        map_type: BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size: 8,
        max_entries: 1,
    };
    // SAFETY: a valid BPF_MAP_CREATE attribute of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            0,
            &raw const create,
            std::mem::size_of::<Create>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let cpu = *allowed_cpus()?
        .last()
        .ok_or_else(|| std::io::Error::other("no CPU"))?;
    pin(cpu)?;
    let (key, mut value) = (0u32, 0u64);
    let lookup = Lookup {
        map_fd: u32::try_from(fd).map_err(std::io::Error::other)?,
        pad: 0,
        key: (&raw const key) as u64,
        value: (&raw mut value) as u64,
        flags: 0,
    };
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            if pin(cpu).is_ok() {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
        });
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            // SAFETY: a valid BPF_MAP_LOOKUP_ELEM attribute whose key and
            // value outlive the call.
            unsafe {
                libc::syscall(
                    libc::SYS_bpf,
                    1,
                    &raw const lookup,
                    std::mem::size_of::<Lookup>(),
                )
            };
        }
        stop.store(true, Ordering::Relaxed);
    });
    // SAFETY: closes the map's descriptor, made above.
    unsafe { libc::close(i32::try_from(fd).unwrap_or(-1)) };
    Ok(())
}

/// `n` getppid calls.
fn getppid(n: u64) {
    for _ in 0..n {
        // SAFETY: getppid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_getppid) };
    }
}

/// `times` locks of a mutex that another thread holds for `ms` each time.
/// The waiter says when it has had the lock, so that the holder never
/// takes it again first and then waits on a waiter stuck in `lock()` (a
/// slow guest is slower than any fixed pause).
fn lock_waits(times: u64, ms: u64) {
    use std::sync::{Mutex, mpsc};
    let lock = Mutex::new(());
    let (held, wait) = mpsc::sync_channel(0);
    let (had, taken) = mpsc::sync_channel(0);
    std::thread::scope(|scope| {
        let lock = &lock;
        scope.spawn(move || {
            for _ in 0..times {
                let guard = lock
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if held.send(()).is_err() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(ms));
                drop(guard);
                if taken.recv().is_err() {
                    return;
                }
            }
        });
        for _ in 0..times {
            if wait.recv().is_err() {
                return;
            }
            drop(
                lock.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            if had.send(()).is_err() {
                return;
            }
        }
    });
}

/// `pread64` of `path` to its end, `bytes` at a time, with readahead off.
fn random_read(path: &str, bytes: usize) -> std::io::Result<()> {
    use std::os::{fd::AsRawFd as _, unix::fs::FileExt as _};
    let file = std::fs::File::open(path)?;
    // SAFETY: a valid fd; offset 0 and length 0 mean the whole file.
    let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    let mut buffer = vec![0; bytes];
    let mut offset = 0;
    loop {
        let n = file.read_at(&mut buffer, offset)?;
        if n == 0 {
            return Ok(());
        }
        offset += n as u64;
    }
}

/// Three rounds of 20 `fsync`s of `path` with nothing to write, then `mb`
/// MiB written and one `fsync` that waits for them to reach the disk.
fn fsync_behind(path: &str, mb: usize) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)?;
    file.sync_all()?;
    let block = vec![0x5a_u8; 1 << 20];
    for _ in 0..3 {
        for _ in 0..20 {
            file.sync_all()?;
        }
        for _ in 0..mb {
            file.write_all(&block)?;
        }
        file.sync_all()?;
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

/// Writes `edge\n` to `path` from the end of a page whose next page is
/// not mapped.
fn write_edge(path: &str) -> std::io::Result<()> {
    const PAGE: usize = 4096;
    // SAFETY: a fresh anonymous mapping of two pages, unmapped at the end.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            2 * PAGE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the second page is part of the mapping made above.
    if unsafe { libc::munmap(base.cast::<u8>().add(PAGE).cast(), PAGE) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the first page is mapped and writable; the slice ends with it.
    let bytes = unsafe { std::slice::from_raw_parts_mut(base.cast::<u8>().add(PAGE - 5), 5) };
    bytes.copy_from_slice(b"edge\n");
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    std::io::Write::write_all(&mut &file, bytes)?;
    // SAFETY: the first page is unmapped once, after its last use.
    unsafe { libc::munmap(base, PAGE) };
    Ok(())
}

/// The source and destination MAC addresses of `frame:IFACE`'s frame.
const FRAME_SOURCE: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0xab, 0xff];
const FRAME_DEST: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x01];

/// Sends one Ethernet frame on `iface` (IEEE's local experimental
/// `EtherType`, 0x88b5, and a zeroed minimum payload).
fn send_frame(iface: &str) -> std::io::Result<()> {
    let name = std::ffi::CString::new(iface).map_err(std::io::Error::other)?;
    // SAFETY: if_nametoindex reads the NUL-terminated name.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: socket takes no pointers; its descriptor is owned below.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new socket that nothing else owns.
    let socket = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let mut frame = [0u8; 60];
    frame[..6].copy_from_slice(&FRAME_DEST);
    frame[6..12].copy_from_slice(&FRAME_SOURCE);
    frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    // SAFETY: an all-zero sockaddr_ll is valid; the fields are set below.
    let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    to.sll_family = libc::AF_PACKET as u16;
    to.sll_ifindex = i32::try_from(index).map_err(std::io::Error::other)?;
    to.sll_halen = 6;
    to.sll_addr[..6].copy_from_slice(&FRAME_DEST);
    // SAFETY: the frame and the address are valid for the lengths given.
    let sent = unsafe {
        libc::sendto(
            std::os::fd::AsRawFd::as_raw_fd(&socket),
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (&raw const to).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Opens `path` through a name that only a fresh mapping of a file holds:
/// the process touches the page first inside `openat`.
fn open_mapped(path: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let names = format!("{path}.name");
    let mut name = path.as_bytes().to_vec();
    name.push(0);
    std::fs::write(&names, &name)?;
    let file = std::fs::File::open(&names);
    std::fs::remove_file(&names)?;
    let file = file?;
    // SAFETY: a read-only private mapping of an open file, unmapped below.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ,
            libc::MAP_PRIVATE,
            file.as_raw_fd(),
            0,
        )
    };
    if map == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the mapping holds the NUL-terminated name.
    let fd = unsafe { libc::openat(libc::AT_FDCWD, map.cast(), libc::O_RDONLY) };
    let opened = if fd < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        // SAFETY: the descriptor openat returned.
        unsafe { libc::close(fd) };
        Ok(())
    };
    // SAFETY: mapped above with this length.
    unsafe { libc::munmap(map, 4096) };
    opened
}

/// Writes back and drops `path`'s pages from the page cache.
fn drop_cache(path: &str) -> std::io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let file = std::fs::File::open(path)?;
    // The kernel keeps a page it is still writing back, or one another
    // reader holds for a moment (a CI machine busy writing): tried until
    // none of the file stays resident, so that the reads after are cold.
    for _ in 0..100 {
        file.sync_all()?;
        // SAFETY: a valid fd; offset 0 and length 0 mean the whole file.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        if resident_pages(&file)? == 0 {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(std::io::Error::other(format!(
        "{path}: pages stay in the page cache after POSIX_FADV_DONTNEED"
    )))
}

/// How many of `file`'s pages are in the page cache (`mincore(2)`).
fn resident_pages(file: &std::fs::File) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd as _;
    let len = usize::try_from(file.metadata()?.len()).unwrap_or(0);
    if len == 0 {
        return Ok(0);
    }
    // SAFETY: a shared read-only map of a file this process holds open,
    // unmapped before returning; nothing reads through it.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if map == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let mut pages = vec![0u8; len.div_ceil(page)];
    // SAFETY: `pages` has a byte for each page of the `len`-byte map.
    let rc = unsafe { libc::mincore(map, len, pages.as_mut_ptr()) };
    let error = std::io::Error::last_os_error();
    // SAFETY: the map made above, of `len` bytes.
    unsafe { libc::munmap(map, len) };
    if rc != 0 {
        return Err(error);
    }
    Ok(pages.iter().filter(|p| **p & 1 != 0).count())
}
