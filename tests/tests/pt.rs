//! `weft pt`: decoding traces end to end through the binary, and capture
//! saying clearly when the CPU has no Intel PT (as on the AMD machines the
//! suite runs on; with PT present the test checks the other answer).

use std::path::{Path, PathBuf};

use weft_tests::run_weft;

/// libipt's `loop-tnt` case, built in so the test also runs in the VMs.
const TRACE: &[u8] = include_bytes!("../../pt/tests/libipt/loop-tnt/loop-tnt.pt");
const CODE: &[u8] = include_bytes!("../../pt/tests/libipt/loop-tnt/loop-tnt.bin");
const FLOW: &str = include_str!("../../pt/tests/libipt/loop-tnt/loop-tnt-ptxed.exp");

/// A scratch file holding `bytes`, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, bytes: &[u8]) -> Self {
        let path = std::env::temp_dir().join(format!("weft-pt-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn flow_prints_each_instruction_of_the_loop_and_where_tracing_stopped() {
    let (trace, code) = (
        Scratch::new("flow.pt", TRACE),
        Scratch::new("flow.bin", CODE),
    );
    let image = format!("{}:0x100000", arg(&code.0));
    let (status, stdout, stderr) = run_weft(&["pt", "flow", "--image", &image, arg(&trace.0)]);
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, FLOW);
}

#[test]
fn flow_over_code_that_is_not_there_names_offset_and_address_and_fails() {
    let (trace, code) = (
        Scratch::new("lost.pt", TRACE),
        Scratch::new("lost.bin", CODE),
    );
    let image = format!("{}:0x200000", arg(&code.0));
    let (status, stdout, stderr) = run_weft(&["pt", "flow", "--image", &image, arg(&trace.0)]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(
        stdout,
        "[1b, 100000: error: no memory mapped at this address]\n"
    );
    assert!(stderr.contains("1 decoding error"), "{stderr}");
}

#[test]
fn dump_of_bytes_that_are_not_pt_reports_the_offset_and_fails() {
    let file = Scratch::new("garbage.pt", &[0x02, 0x99, 0x02, 0x82]);
    let (status, stdout, stderr) = run_weft(&["pt", "dump", "--no-sync", arg(&file.0)]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(stdout, "[0: error decoding packet: unknown opcode]\n");
    let (status, _, stderr) = run_weft(&["pt", "dump", "/nonexistent/trace.pt"]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("/nonexistent/trace.pt"), "{stderr}");
}

#[test]
fn record_says_whether_this_machine_has_intel_pt() {
    let pid = std::process::id().to_string();
    let out = std::env::temp_dir().join(format!("weft-pt-record-{pid}"));
    let _ = std::fs::remove_dir_all(&out);
    let args = [
        "pt",
        "record",
        "--pid",
        &pid,
        "--duration",
        "100ms",
        "-o",
        arg(&out),
    ];
    let (status, stdout, stderr) = run_weft(&args);
    assert_eq!(stdout, "");
    if Path::new("/sys/bus/event_source/devices/intel_pt").exists() {
        // A real capture: one trace per CPU this process may run on.
        assert!(status.success(), "{stderr}");
        let meta = std::fs::read(out.join("capture.json")).unwrap();
        let meta: serde_json::Value = serde_json::from_slice(&meta).unwrap();
        let cpus = meta["cpus"].as_array().unwrap();
        assert!(!cpus.is_empty(), "{meta}");
        for cpu in cpus {
            assert!(out.join(cpu["file"].as_str().unwrap()).exists(), "{meta}");
        }
        std::fs::remove_dir_all(&out).unwrap();
    } else {
        assert_eq!(status.code(), Some(3), "{stderr}");
        assert!(
            stderr.contains("Intel PT is not available on this CPU or VM"),
            "{stderr}"
        );
        assert!(stderr.contains("weft pt flow"), "{stderr}");
        // Nothing is written where nothing can be captured.
        assert!(!out.exists());
    }
}

#[test]
fn dump_with_time_shows_the_tsc_that_mtc_packets_advance() {
    let wrap = include_bytes!("../../pt/tests/libipt/tsc-tma-mtc_wrap/tsc-tma-mtc_wrap.pt");
    let trace = Scratch::new("time.pt", wrap);
    let clocks = [
        "--mtc-freq",
        "0",
        "--cpuid-0x15.eax",
        "3",
        "--cpuid-0x15.ebx",
        "9",
    ];
    let mut args = vec!["pt", "dump", "--no-offset", "--time", "--time-delta"];
    args.extend(clocks);
    args.push(arg(&trace.0));
    let (status, stdout, stderr) = run_weft(&args);
    assert!(status.success(), "{stderr}");
    // The TMA says the crystal clock was at 0x1fff (low 8 bits 0xff, one
    // fast-counter tick past the TSC); MTC 0 wraps to 0x100, one crystal
    // tick = 9/3 TSC ticks later, so 3 - 1 = 2; MTC 1 is 3 more.
    let times: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.rsplit_once(" tsc ").map(|(_, time)| time))
        .collect();
    assert_eq!(times, ["+a0000", "+0", "+2", "+3"], "{stdout}");

    // Without the crystal clock ratio MTCs cannot move the time; each says so.
    let (status, stdout, _) = run_weft(&["pt", "dump", "--no-offset", "--time", arg(&trace.0)]);
    assert!(status.success());
    assert_eq!(
        stdout
            .matches("error updating time: bad configuration]")
            .count(),
        2,
        "{stdout}"
    );

    let (status, _, stderr) = run_weft(&["pt", "dump", "--time-delta", arg(&trace.0)]);
    assert_eq!(status.code(), Some(2));
    assert!(stderr.contains("not provided: --time"), "{stderr}");
}

/// main calls f twice, f calls g: machine code at 0x401000, 0x401010 and
/// 0x401020.
const CALLS_CODE: [u8; 0x21] = [
    0xe8, 0x0b, 0, 0, 0, // main: call f
    0xe8, 0x06, 0, 0, 0,    //       call f
    0xc3, //                      ret
    0x90, 0x90, 0x90, 0x90, 0x90, // padding
    0xe8, 0x0b, 0, 0, 0,    // f: call g
    0xc3, //                   ret
    0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, // padding
    0xc3, // g: ret
];
const CALLS_BASE: u64 = 0x40_1000;

/// A minimal ELF executable: the code in one loadable segment, and a
/// symbol table naming main, f and g.
fn elf(code: &[u8], base: u64, symbols: &[(&str, u64, u64)]) -> Vec<u8> {
    let le = |out: &mut Vec<u8>, value: u64, n: usize| out.extend(&value.to_le_bytes()[..n]);
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 24];
    for &(name, addr, size) in symbols {
        le(&mut symtab, strtab.len() as u64, 4);
        symtab.extend([0x12, 0]); // global function
        le(&mut symtab, 1, 2); // defined (section 1)
        le(&mut symtab, addr, 8);
        le(&mut symtab, size, 8);
        strtab.extend(name.as_bytes());
        strtab.push(0);
    }
    let code_at = 64 + 56;
    let symtab_at = code_at + code.len();
    let strtab_at = symtab_at + symtab.len();
    let shoff = strtab_at + strtab.len();
    let mut out = b"\x7fELF\x02\x01\x01".to_vec();
    out.resize(16, 0);
    le(&mut out, 2, 2); // executable
    le(&mut out, 62, 2); // x86-64
    le(&mut out, 1, 4);
    le(&mut out, base, 8); // entry
    le(&mut out, 64, 8); // program headers
    le(&mut out, shoff as u64, 8); // section headers
    le(&mut out, 0, 4);
    for value in [64, 56, 1, 64, 3, 0] {
        le(&mut out, value, 2);
    }
    // PT_LOAD, read + execute.
    for (value, n) in [(1, 4), (5, 4), (code_at as u64, 8), (base, 8), (base, 8)] {
        le(&mut out, value, n);
    }
    for value in [code.len() as u64, code.len() as u64, 0x1000] {
        le(&mut out, value, 8);
    }
    out.extend(code);
    out.extend(&symtab);
    out.extend(&strtab);
    out.extend([0; 64]); // the null section
    // .symtab (type 2) linked to section 2, .strtab (type 3).
    let sections = [
        (2, symtab_at, symtab.len(), 2, 24),
        (3, strtab_at, strtab.len(), 0, 0),
    ];
    for (kind, offset, size, link, entsize) in sections {
        le(&mut out, 0, 4);
        le(&mut out, kind, 4);
        le(&mut out, 0, 8); // flags
        le(&mut out, 0, 8); // address
        le(&mut out, offset as u64, 8);
        le(&mut out, size as u64, 8);
        le(&mut out, link, 4);
        le(&mut out, 0, 4);
        le(&mut out, 8, 8);
        le(&mut out, entsize, 8);
    }
    out
}

#[test]
fn calls_names_functions_from_the_elf_symbols_and_times_each_call() {
    let (main, f, g) = (CALLS_BASE, CALLS_BASE + 0x10, CALLS_BASE + 0x20);
    let program = elf(
        &CALLS_CODE,
        CALLS_BASE,
        &[("main", main, 0x10), ("f", f, 0x10), ("g", g, 1)],
    );
    let (trace, exe) = (
        Scratch::new("calls.pt", &calls_trace(CALLS_BASE)),
        Scratch::new("calls.elf", &program),
    );
    let calls = |summary: &[&str]| {
        let mut args = vec!["pt", "calls"];
        args.extend(summary);
        args.extend(["--image", arg(&exe.0), arg(&trace.0)]);
        let (status, stdout, stderr) = run_weft(&args);
        assert!(status.success(), "{stderr}");
        stdout
    };
    let stdout = calls(&[]);
    assert_eq!(
        columns(&stdout),
        [
            vec!["TIME", "DURATION", "FUNCTION"],
            vec!["0", "f()", "{"],
            vec!["0", "300", "g();"],
            vec!["400", "400", "}", "/*", "f", "*/"],
            vec!["400", "f()", "{"],
            vec!["400", "300", "g();"],
            vec!["800", "400", "}", "/*", "f", "*/"],
            vec!["800", "}", "/*", "main", "*/"],
        ],
        "{stdout}"
    );
    let stdout = calls(&["--summary"]);
    assert_eq!(columns(&stdout), CALLS_SUMMARY, "{stdout}");
}

/// Each line's whitespace-separated columns.
fn columns(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .map(|l| l.split_whitespace().collect())
        .collect()
}

/// `weft pt calls --summary` of `calls_trace`: g runs 300 ticks per call
/// (from the branch before it to its return's TNT), f 400 with g inside.
const CALLS_SUMMARY: [[&str; 4]; 3] = [
    ["CALLS", "TOTAL", "OWN", "FUNCTION"],
    ["2", "600", "600", "g"],
    ["2", "800", "200", "f"],
];

/// The PT of `CALLS_CODE` loaded at `base`: main → f → g, back, main → f →
/// g, back, main returns (untraced), with a TSC 100 ticks on before every
/// instruction.
fn calls_trace(base: u64) -> Vec<u8> {
    let mut image = weft_pt::image::Image::new();
    image.add(base, CALLS_CODE.to_vec());
    let (main, f, g) = (base, base + 0x10, base + 0x20);
    let path = [main, f, g, f + 5, main + 5, f, g, f + 5, main + 10];
    let mut cpu = weft_pt::encode::Recorder::new(&image, main, 1000);
    for (i, pair) in (1..).zip(path.windows(2)) {
        cpu.tsc(1000 + 100 * i);
        cpu.step(pair[0], pair[1]).unwrap();
    }
    cpu.disable(None);
    cpu.finish()
}

#[test]
fn calls_finds_a_relocated_program_and_its_symbols_through_its_maps() {
    let program = elf(
        &CALLS_CODE,
        CALLS_BASE,
        &[
            ("main", CALLS_BASE, 0x10),
            ("f", CALLS_BASE + 0x10, 0x10),
            ("g", CALLS_BASE + 0x20, 1),
        ],
    );
    // Loaded elsewhere, as a position-independent program is: the file
    // from offset 0 at a page, so main (file offset 0x78) is 0x78 into it.
    let page = 0x5555_5555_4000;
    let exe = Scratch::new("moved.elf", &program);
    let maps = format!(
        "{page:x}-{:x} r-xp 00000000 08:01 42 {}\n",
        page + 0x1000,
        arg(&exe.0)
    );
    let maps = Scratch::new("moved.maps", maps.as_bytes());
    let trace = Scratch::new("moved.pt", &calls_trace(page + 0x78));
    let (status, stdout, stderr) = run_weft(&[
        "pt",
        "calls",
        "--summary",
        "--maps",
        arg(&maps.0),
        arg(&trace.0),
    ]);
    assert!(status.success(), "{stderr}");
    assert_eq!(columns(&stdout), CALLS_SUMMARY, "{stdout}");
}
