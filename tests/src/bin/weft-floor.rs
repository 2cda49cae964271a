//! Attaches the empty programs of `ebpf/src/floor.rs` to the syscall hooks and
//! waits for SIGINT/SIGTERM: the "merely attached" floor that
//! `cargo xtask bench probe-effect` measures weft against.
//!
//! `weft-floor OBJECT raw|btf|tp` prints `attached` once the programs run;
//! `pairing` attaches raw tracepoints that only pair each call (a clock
//! read and the thread's task storage at each end).
//! `weft-floor OBJECT costs` attaches, beside the empty raw tracepoint on
//! `sys_enter`, one program per operation of the syscall probe (a helper,
//! the task storage, the counter, a ring record), so the kernel's run-time
//! statistics give what each costs; it drains their ring meanwhile.

use std::process::ExitCode;

use aya::{
    Btf, Ebpf, EbpfLoader,
    maps::RingBuf,
    programs::{BtfTracePoint, RawTracePoint, TracePoint},
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, object, kind] = args.as_slice() else {
        eprintln!("usage: weft-floor OBJECT raw|btf|tp|pairing|costs");
        return ExitCode::from(2);
    };
    match attach(object, kind) {
        Ok(_ebpf) => {
            println!("attached");
            wait_for_signal();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("weft-floor: {e}");
            ExitCode::from(2)
        }
    }
}

fn attach(object: &str, kind: &str) -> Result<Ebpf, Box<dyn std::error::Error>> {
    // The object also holds weft's task-storage map, which aya cannot type.
    let mut ebpf = EbpfLoader::new()
        .allow_unsupported_maps()
        .map_max_entries("COST_RING", 1 << 24)
        .load(&std::fs::read(object)?)?;
    if kind == "costs" {
        for (name, program) in ebpf.programs_mut() {
            if name.starts_with("cost_") || name == "floor_raw_enter" {
                let program: &mut RawTracePoint = program.try_into()?;
                program.load()?;
                program.attach("sys_enter")?;
            }
        }
        let mut ring = RingBuf::try_from(ebpf.take_map("COST_RING").ok_or("no map COST_RING")?)?;
        std::thread::spawn(move || {
            loop {
                while ring.next().is_some() {}
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        });
        return Ok(ebpf);
    }
    for hook in ["sys_enter", "sys_exit"] {
        let name = format!("floor_{kind}_{}", &hook[4..]);
        let program = ebpf
            .program_mut(&name)
            .ok_or(format!("no program {name}"))?;
        match kind {
            "raw" | "pairing" => {
                let p: &mut RawTracePoint = program.try_into()?;
                p.load()?;
                p.attach(hook)?;
            }
            "btf" => {
                let p: &mut BtfTracePoint = program.try_into()?;
                p.load(hook, &Btf::from_sys_fs()?)?;
                p.attach()?;
            }
            "tp" => {
                let p: &mut TracePoint = program.try_into()?;
                p.load()?;
                p.attach("raw_syscalls", hook)?;
            }
            _ => return Err(format!("unknown kind {kind}").into()),
        }
    }
    Ok(ebpf)
}

fn wait_for_signal() {
    // SAFETY: plain sigset manipulation on a local set, then sigwait.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        libc::sigaddset(&raw mut set, libc::SIGINT);
        libc::sigaddset(&raw mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &raw const set, std::ptr::null_mut());
        let mut signal = 0;
        libc::sigwait(&raw const set, &raw mut signal);
    }
}
