//! `weft pt`: decoding traces end to end through the binary, and capture
//! saying clearly when the CPU has no Intel PT (as on the AMD machines the
//! suite runs on; with PT present the test checks the other answer).

use std::path::{Path, PathBuf};

use weft_tests::{
    Running, Workload, can_trace, capture_dir, query_rows, run_weft, setup_tool_for_step,
};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_weft-workload");

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

/// A corpus case's trace and code, for `weft pt flow` with the code at
/// `org` (hex).
struct Case {
    trace: Scratch,
    /// Kept for as long as the case: weft reads it through `image`.
    _code: Scratch,
    image: String,
}

impl Case {
    fn new(name: &str, trace: &[u8], code: &[u8], org: &str) -> Self {
        let code = Scratch::new(&format!("{name}.bin"), code);
        Case {
            trace: Scratch::new(&format!("{name}.pt"), trace),
            image: format!("{}:{org}", arg(&code.0)),
            _code: code,
        }
    }

    /// `weft pt flow` of the case with `options`.
    fn flow(&self, options: &[&str]) -> (std::process::ExitStatus, String, String) {
        let mut args = vec!["pt", "flow", "--image", &self.image];
        args.extend(options);
        args.push(arg(&self.trace.0));
        run_weft(&args)
    }
}

/// libipt's SKL014 case: a call leaves the filtered range and the CPU's
/// TIP.PGD carries no IP; `--addr-filter` tells weft where tracing stopped.
#[test]
fn flow_uses_the_address_filter_where_erratum_skl014_drops_the_ip() {
    // Built in, so the test also runs in the VMs.
    let case = Case::new(
        "skl014",
        include_bytes!("../../pt/tests/libipt/skl014-call@cpu_6/102/skl014-call.pt"),
        include_bytes!("../../pt/tests/libipt/skl014-call@cpu_6/102/skl014-call.bin"),
        "0x1000",
    );
    let filter = ["--cpu", "6/102", "--addr-filter", "0x1000-0x10ff"];
    let (status, stdout, stderr) = case.flow(&filter);
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, "0000000000001000\n[disabled]\n");
    let (status, _, stderr) = case.flow(&["--cpu", "6/102"]);
    assert!(
        !status.success() && stderr.contains("1 decoding error(s)"),
        "without the filter the call's target is walked: {stderr}"
    );
}

/// libipt's `trig-fup` case: with `--event-ips` each event names where it
/// happened, as `ptxed --event:ip` prints it; `--stat --quiet` counts the
/// instructions and prints nothing else.
#[test]
fn flow_names_event_ips_and_counts_instructions_as_ptxed_does() {
    let case = Case::new(
        "trig",
        include_bytes!("../../pt/tests/libipt/trig-fup/trig-fup.pt"),
        include_bytes!("../../pt/tests/libipt/trig-fup/trig-fup.bin"),
        "0x1000",
    );
    let (status, stdout, stderr) = case.flow(&["--event-ips"]);
    assert!(status.success(), "{stderr}");
    assert_eq!(
        stdout,
        include_str!("../../pt/tests/libipt/trig-fup/trig-fup-ptxed.exp")
    );
    let (status, stdout, stderr) = case.flow(&[]);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("[trig 1a]\n"), "{stdout}");
    let (status, stdout, stderr) = case.flow(&["--stat", "--quiet"]);
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, "insn: 2.\n");
}

/// libipt's `ptxed-resync-nomap-tip` case: the trace jumps twice to code
/// that is not there. By default weft resumes at the next PSB (there is
/// none); with `--resync-on-error` at the next TIP, as ptxed does, and the
/// flow goes on to its end.
#[test]
fn flow_resyncs_at_the_next_ip_after_an_error() {
    let case = Case::new(
        "resync",
        include_bytes!("../../pt/tests/libipt/ptxed-resync-nomap-tip/ptxed-resync-nomap-tip.pt"),
        include_bytes!("../../pt/tests/libipt/ptxed-resync-nomap-tip/ptxed-resync-nomap-tip.bin"),
        "0x100000",
    );
    let (status, stdout, stderr) = case.flow(&[]);
    assert!(!status.success(), "an error exits 1: {stderr}");
    assert_eq!(
        stdout,
        "0000000000100000\n[22, 100100: error: no memory mapped at this address]\n"
    );
    let (status, stdout, stderr) = case.flow(&["--resync-on-error"]);
    assert!(
        !status.success() && stderr.contains("2 decoding error(s)"),
        "{stderr}"
    );
    assert_eq!(
        stdout,
        include_str!(
            "../../pt/tests/libipt/ptxed-resync-nomap-tip/ptxed-resync-nomap-tip-ptxed.exp"
        )
    );
}

#[test]
fn flow_prints_each_instruction_of_the_loop_and_where_tracing_stopped() {
    let (status, stdout, stderr) = Case::new("flow", TRACE, CODE, "0x100000").flow(&[]);
    assert!(status.success(), "{stderr}");
    assert_eq!(stdout, FLOW);
}

#[test]
fn flow_over_code_that_is_not_there_names_offset_and_address_and_fails() {
    let (status, stdout, stderr) = Case::new("lost", TRACE, CODE, "0x200000").flow(&[]);
    assert_eq!(status.code(), Some(1), "{stderr}");
    // The offset is past the TNT at 1b, as libipt names it: its decoder has
    // delivered that TNT when the walk fails (libipt's `ptxed-resync-nomap-*`).
    assert_eq!(
        stdout,
        "[1c, 100000: error: no memory mapped at this address]\n"
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
    assert!(
        stderr.contains("not provided") && stderr.contains("--time"),
        "{stderr}"
    );
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
    // Section names come from .strtab (all empty): ELF readers want a
    // section name table where there are sections.
    for value in [64, 56, 1, 64, 3, 2] {
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
    let program = calls_program();
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

/// The ELF file of `CALLS_CODE` at `CALLS_BASE`, with its functions.
fn calls_program() -> Vec<u8> {
    let (main, f, g) = (CALLS_BASE, CALLS_BASE + 0x10, CALLS_BASE + 0x20);
    elf(
        &CALLS_CODE,
        CALLS_BASE,
        &[("main", main, 0x10), ("f", f, 0x10), ("g", g, 1)],
    )
}

/// The PT of `CALLS_CODE` loaded at `base`: main → f → g, back, main → f →
/// g, back, main returns (untraced), with a TSC 100 ticks on before every
/// instruction.
fn calls_trace(base: u64) -> Vec<u8> {
    calls_trace_from(base, 1000)
}

/// `calls_trace` starting at TSC `tsc`.
fn calls_trace_from(base: u64, tsc: u64) -> Vec<u8> {
    let mut image = weft_pt::image::Image::new();
    image.add(base, CALLS_CODE.to_vec());
    let (main, f, g) = (base, base + 0x10, base + 0x20);
    let path = [main, f, g, f + 5, main + 5, f, g, f + 5, main + 10];
    let mut cpu = weft_pt::encode::Recorder::new(&image, main, tsc);
    for (i, pair) in (1..).zip(path.windows(2)) {
        cpu.tsc(tsc + 100 * i);
        cpu.step(pair[0], pair[1]).unwrap();
    }
    cpu.disable(None);
    cpu.finish()
}

#[test]
fn calls_finds_a_relocated_program_and_its_symbols_through_its_maps() {
    let program = calls_program();
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

/// A capture directory as `weft pt record --pid 4242` writes one (this
/// machine has no PT): `calls_program` mapped at a page in `maps`, the
/// trace `trace(page)` as CPU 3's, and clock readings of two TSC ticks a
/// ns with TSC 1000 at 7 s. Returns the directory and the program's file.
fn pt_capture(name: &str, trace: impl Fn(u64) -> Vec<u8>) -> (PathBuf, Scratch) {
    pt_capture_at(name, [7_000_000_000, 7_000_001_000], trace)
}

/// [`pt_capture`] with TSC 1000 and 3000 read at `monotonic_ns`.
fn pt_capture_at(
    name: &str,
    monotonic_ns: [u64; 2],
    trace: impl Fn(u64) -> Vec<u8>,
) -> (PathBuf, Scratch) {
    let page = 0x5555_5555_4000;
    let exe = Scratch::new(&format!("{name}.elf"), &calls_program());
    let dir = std::env::temp_dir().join(format!("weft-pt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let maps = format!(
        "{page:x}-{:x} r-xp 00000000 08:01 42 {}\n",
        page + 0x1000,
        arg(&exe.0)
    );
    std::fs::write(dir.join("maps"), maps).unwrap();
    std::fs::write(dir.join("cpu3.pt"), trace(page)).unwrap();
    let meta = serde_json::json!({
        "version": 1,
        "target": {"pid": 4242},
        "cpus": [{"cpu": 3, "file": "cpu3.pt"}],
        "fields": {"tsc": 1},
        "cpuid_0x15": {"eax": 0, "ebx": 0},
        "clock": {"tsc": [1000, 3000], "monotonic_ns": monotonic_ns},
        "threads": {"4243": "worker"},
    });
    std::fs::write(dir.join("capture.json"), meta.to_string()).unwrap();
    (dir, exe)
}

/// A capture of three stretches on CPU 3: the traced process at TSC 1000,
/// another one (code elsewhere) at 5000, the traced one again at 9000.
fn three_stretches(name: &str) -> (PathBuf, Scratch) {
    pt_capture(name, |page| {
        [
            calls_trace_from(page + 0x78, 1000),
            calls_trace_from(0x7000_0000_0078, 5000),
            calls_trace_from(page + 0x78, 9000),
        ]
        .concat()
    })
}

/// Writes a capture's `switches`: (ns, cpu, pid, tid) of each thread
/// switched in.
fn write_switches(dir: &Path, switches: &[(u64, u32, u32, u32)]) {
    let lines: String = switches
        .iter()
        .map(|(ns, cpu, pid, tid)| {
            serde_json::json!({"ns": ns, "cpu": cpu, "pid": pid, "tid": tid}).to_string() + "\n"
        })
        .collect();
    std::fs::write(dir.join("switches"), lines).unwrap();
}

/// Changes a capture's `capture.json` with `edit`.
fn edit_meta(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("capture.json");
    let mut meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut meta);
    std::fs::write(&path, meta.to_string()).unwrap();
}

/// A `weft pt record` capture directory decodes whole: each CPU's trace
/// with the traced process's code from its `maps`, and times in the
/// `CLOCK_MONOTONIC` ns that `weft record` keeps, from the TSC and clock
/// readings the capture took around its window. (This machine has no PT,
/// so the directory is written here as `weft pt record` writes one.)
#[test]
fn calls_of_a_capture_directory_are_timed_in_monotonic_ns() {
    let (dir, _exe) = pt_capture("capture", |page| calls_trace(page + 0x78));
    let (status, stdout, stderr) = run_weft(&["pt", "calls", arg(&dir)]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{stderr}");
    let mut lines = stdout.lines();
    let title = lines.next().unwrap();
    assert!(title.starts_with("[cpu 3, "), "{stdout}");
    assert_eq!(
        columns(&lines.collect::<Vec<_>>().join("\n")),
        [
            vec!["TIME(ns)", "DURATION(ns)", "FUNCTION"],
            vec!["7000000000", "f()", "{"],
            vec!["7000000000", "150", "g();"],
            vec!["7000000200", "200", "}", "/*", "f", "*/"],
            vec!["7000000200", "f()", "{"],
            vec!["7000000200", "150", "g();"],
            vec!["7000000400", "200", "}", "/*", "f", "*/"],
            vec!["7000000400", "}", "/*", "main", "*/"],
        ],
        "{stdout}"
    );
}

/// A capture's context-switch sideband (`switches`) splits each CPU's
/// trace between threads: the traced process's stretches decode with its
/// code, another process's stretch in between is skipped rather than
/// decoded with code it never ran; without the sideband that stretch is
/// an error.
#[test]
fn a_capture_with_switches_decodes_only_the_traced_process() {
    let (dir, _exe) = three_stretches("switched");
    write_switches(
        &dir,
        &[
            (6_999_999_000, 3, 4242, 4243),
            (7_000_000_100, 5, 99, 99),
            (7_000_001_500, 3, 99, 99),
            (7_000_003_500, 3, 4242, 4243),
        ],
    );
    let (status, stdout, stderr) = run_weft(&["pt", "calls", "--summary", arg(&dir)]);
    assert!(status.success(), "{stderr}");
    assert_eq!(
        columns(&stdout)[1..],
        [
            vec!["[thread", "4243", "(worker),", "process", "4242]"],
            vec!["CALLS", "TOTAL(ns)", "OWN(ns)", "FUNCTION"],
            vec!["4", "600", "600", "g"],
            vec!["4", "800", "200", "f"],
        ],
        "{stdout}"
    );
    std::fs::remove_file(dir.join("switches")).unwrap();
    let (status, _, stderr) = run_weft(&["pt", "calls", "--summary", arg(&dir)]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        !status.success() && stderr.contains("decoding error(s)"),
        "without the sideband the other process's stretch is an error: {stderr}"
    );
}

/// A thread that moves to another CPU is one call trace: its stretches on
/// each CPU are put together in time order, with one call stack, however
/// the CPUs' traces are listed.
#[test]
fn a_thread_that_moves_between_cpus_is_one_call_trace() {
    // On CPU 5 the thread runs main -> f -> g and back (TSC 1000-1800);
    // on CPU 3, later (TSC 9000-9800), the same path again.
    let (dir, _exe) = pt_capture("moved", |page| calls_trace_from(page + 0x78, 9000));
    let page = 0x5555_5555_4000u64;
    std::fs::write(dir.join("cpu5.pt"), calls_trace_from(page + 0x78, 1000)).unwrap();
    // CPU 3 is listed (and decoded) first.
    edit_meta(&dir, |meta| {
        meta["cpus"] =
            serde_json::json!([{"cpu": 3, "file": "cpu3.pt"}, {"cpu": 5, "file": "cpu5.pt"}]);
    });
    write_switches(
        &dir,
        &[
            (6_999_999_000, 5, 4242, 4243),
            (7_000_003_000, 3, 4242, 4243),
        ],
    );
    let (status, stdout, stderr) = run_weft(&["pt", "calls", arg(&dir)]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("[cpu 3, ") && lines[1].starts_with("[cpu 5, "),
        "{stdout}"
    );
    assert_eq!(lines[2], "[thread 4243 (worker), process 4242]", "{stdout}");
    // One listing, in time order: the calls on CPU 5 first.
    let times: Vec<&str> = lines[4..]
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        times,
        [
            "7000000000",
            "7000000000",
            "7000000200",
            "7000000200",
            "7000000200",
            "7000000400",
            "7000000400",
            "7000004000",
            "7000004000",
            "7000004200",
            "7000004200",
            "7000004200",
            "7000004400",
            "7000004400"
        ],
        "{stdout}"
    );
}

/// Whether perf (Debian's `linux-perf`) runs here; the VMs have none.
fn perf_runs() -> bool {
    std::process::Command::new("perf")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The record counts `perf report -D` prints under "Aggregated stats",
/// without zeros and the total.
fn perf_report_counts(data: &Path) -> Vec<(String, u64)> {
    let output = std::process::Command::new("perf")
        .args(["report", "-D", "--stdio", "-i", arg(data)])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    let mut counts: Vec<(String, u64)> = text
        .lines()
        .skip_while(|l| !l.starts_with("Aggregated stats"))
        .skip(1)
        .map_while(|l| {
            let (name, rest) = l.trim().split_once(" events:")?;
            Some((
                name.to_string(),
                rest.split_whitespace().next()?.parse().ok()?,
            ))
        })
        .filter(|(name, count)| *count > 0 && name != "TOTAL")
        .collect();
    counts.sort();
    counts
}

/// `weft pt perf`'s `records:` line as (name, count) pairs.
fn weft_record_counts(stdout: &str) -> Vec<(String, u64)> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("records: "))
        .unwrap_or_else(|| panic!("no records line: {stdout}"));
    let mut counts: Vec<(String, u64)> = line
        .split(", ")
        .map(|pair| {
            let (name, count) = pair.rsplit_once(' ').unwrap();
            (name.to_string(), count.parse().unwrap())
        })
        .collect();
    counts.sort();
    counts
}

#[test]
fn perf_data_from_perf_holds_the_records_perf_report_counts() {
    let test = "perf_data_from_perf_holds_the_records_perf_report_counts";
    if !weft_tests::needs(test, &[weft_tests::Need::Root]) {
        return;
    }
    if !perf_runs() {
        eprintln!("skipping {test}: needs perf (linux-perf)");
        return;
    }
    let data = Scratch::new("sw.data", b"");
    let recorded = std::process::Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-o", arg(&data.0), "--"])
        .args([
            "sh",
            "-c",
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(recorded.status.success(), "{recorded:?}");
    let (status, stdout, stderr) = run_weft(&["pt", "perf", arg(&data.0)]);
    assert!(status.success(), "{stderr}");
    assert_eq!(
        weft_record_counts(&stdout),
        perf_report_counts(&data.0),
        "{stdout}"
    );
    assert!(
        stdout.contains("intel_pt: no AUXTRACE_INFO record"),
        "{stdout}"
    );
}

/// A perf.data file as `perf record -e intel_pt//u PROGRAM` writes one in
/// per-thread mode: the PT event's attribute; then the thread's name, the
/// program's executable mapping, the PT configuration and its trace.
fn perf_data(pid: u32, exe: &Path, page: u64, trace: &[u8]) -> Vec<u8> {
    let mut data = process_records(pid, "prog", exe, page);
    data.extend(pt_records(trace, pid, u32::MAX));
    // Nothing sampled.
    perf_file(&attr(0, 0), &data)
}

/// A per-CPU perf.data (`perf record -a`): each process of `processes`
/// (pid, name, file, when it was switched in) ran `trace`'s code from its
/// own file at `page` on CPU 2, as context-switch records with
/// `sample_id_all` trailers (tid, time, CPU, identifier) say.
fn per_cpu_perf_data(processes: &[(u32, &str, &Path, u64)], page: u64, trace: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    for &(pid, name, exe, _) in processes {
        data.extend(process_records(pid, name, exe, page));
    }
    for &(pid, _, _, time) in processes {
        // SWITCH_CPU_WIDE, switching in (misc 0): the previous task, then
        // the trailer of the task coming in.
        let mut switch = vec![0u8; 8];
        switch.extend_from_slice(&pid.to_le_bytes());
        switch.extend_from_slice(&pid.to_le_bytes());
        switch.extend(words(&[time, 2, 0]));
        record(&mut data, 15, &switch);
    }
    data.extend(pt_records(trace, u32::MAX, 2));
    // TID, TIME, CPU and IDENTIFIER samples, sample_id_all.
    perf_file(&attr(1 << 1 | 1 << 2 | 1 << 7 | 1 << 16, 1 << 18), &data)
}

fn record(data: &mut Vec<u8>, kind: u32, body: &[u8]) {
    data.extend_from_slice(&kind.to_le_bytes());
    data.extend_from_slice(&0u16.to_le_bytes());
    data.extend_from_slice(&u16::try_from(8 + body.len()).unwrap().to_le_bytes());
    data.extend_from_slice(body);
}

fn words(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn padded(text: &str) -> Vec<u8> {
    let mut bytes = text.as_bytes().to_vec();
    bytes.resize((text.len() + 1).next_multiple_of(8), 0);
    bytes
}

/// COMM and MMAP2 of process `pid` (its one thread, `pid` too) running
/// `exe` at `page`.
fn process_records(pid: u32, name: &str, exe: &Path, page: u64) -> Vec<u8> {
    let ids = u64::from(pid) << 32 | u64::from(pid);
    let mut data = Vec::new();
    record(&mut data, 3, &[words(&[ids]), padded(name)].concat());
    // MMAP2: pid/tid, addr, len, pgoff, dev and inode (24 bytes), prot
    // (read, exec), flags (private), file name.
    let mut mmap2 = words(&[ids, page, 0x1000, 0, 0, 0, 0]);
    mmap2.extend_from_slice(&5u32.to_le_bytes());
    mmap2.extend_from_slice(&2u32.to_le_bytes());
    mmap2.extend(padded(arg(exe)));
    record(&mut data, 10, &mmap2);
    data
}

/// Intel PT's `AUXTRACE_INFO` and one `AUXTRACE` of `trace` for thread `tid`
/// (`u32::MAX`: any) on `cpu` (`u32::MAX`: any).
fn pt_records(trace: &[u8], tid: u32, cpu: u32) -> Vec<u8> {
    let mut data = Vec::new();
    // AUXTRACE_INFO of Intel PT: PMU type, time shift, mult, zero (a
    // clock of 2 ns per tick from 5 ns), user time zero, then where the
    // TSC, noretcomp and MTC bits sit in the config, sched switch,
    // snapshot, per-CPU, the MTC period's place, TSC:CTC 168/2, the CYC
    // bit and the maximum non-turbo ratio.
    let per_cpu = u64::from(cpu != u32::MAX);
    let mut info = vec![1u8, 0, 0, 0, 0, 0, 0, 0];
    info.extend(words(&[
        8, 0, 2, 5, 1, 10, 11, per_cpu, 0, per_cpu, 9, 14, 168, 2, 1, 24,
    ]));
    record(&mut data, 70, &info);
    // AUXTRACE: size, offset, reference, idx, tid, cpu; then the trace,
    // padded to 8 bytes as perf does.
    let mut trace = trace.to_vec();
    trace.resize(trace.len().next_multiple_of(8), 0);
    let mut auxtrace = words(&[trace.len() as u64, 0, 0]);
    auxtrace.extend_from_slice(&0u32.to_le_bytes());
    auxtrace.extend_from_slice(&tid.to_le_bytes());
    auxtrace.extend_from_slice(&cpu.to_le_bytes());
    auxtrace.extend_from_slice(&0u32.to_le_bytes());
    record(&mut data, 71, &auxtrace);
    data.extend_from_slice(&trace);
    data
}

/// The PT event's attribute as perf 6.1 writes it (`perf_event_attr` of
/// 128 bytes: type 8, config with TSC and MTC on, CYC off, MTC period 3,
/// `sample_type` and `flags` as given) and its empty id section.
fn attr(sample_type: u64, flags: u64) -> Vec<u8> {
    let mut attr = vec![0u8; 128 + 16];
    attr[..4].copy_from_slice(&8u32.to_le_bytes());
    attr[4..8].copy_from_slice(&128u32.to_le_bytes());
    attr[8..16].copy_from_slice(&(1u64 << 10 | 1 << 9 | 3 << 14).to_le_bytes());
    attr[24..32].copy_from_slice(&sample_type.to_le_bytes());
    attr[40..48].copy_from_slice(&flags.to_le_bytes());
    attr
}

/// A perf.data file: header, one attribute, the data section.
fn perf_file(attr: &[u8], data: &[u8]) -> Vec<u8> {
    let data_at = 104 + attr.len() as u64;
    let mut file = b"PERFILE2".to_vec();
    file.extend(words(&[104, attr.len() as u64, 104, attr.len() as u64]));
    file.extend(words(&[data_at, data.len() as u64, 0, 0]));
    file.extend([0u8; 32]);
    file.extend(attr);
    file.extend(data);
    file
}

#[test]
fn calls_from_a_perf_data_file_use_the_mapping_perf_recorded() {
    let program = calls_program();
    let page = 0x5555_5555_4000;
    let exe = Scratch::new("perf.elf", &program);
    let data = perf_data(4242, &exe.0, page, &calls_trace(page + 0x78));
    let data = Scratch::new("pt.data", &data);
    let (status, stdout, stderr) = run_weft(&["pt", "perf", arg(&data.0)]);
    assert!(status.success(), "{stderr}");
    assert!(
        stdout.contains("intel_pt: pmu type 8, per thread, full trace, tsc on, mtc on, cyc off"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "clocks: mtc period 3, tsc:ctc 168/2 (CPUID 0x15 EBX/EAX), max non-turbo ratio 24"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("queue 0: thread 4242 (prog), "), "{stdout}");
    assert!(stdout.contains("clock: ns = 5 + tsc * 2 >> 0"), "{stdout}");
    assert!(
        stdout.contains("records: COMM 1, MMAP2 1, AUXTRACE_INFO 1, AUXTRACE 1"),
        "{stdout}"
    );
    let (status, stdout, stderr) = run_weft(&["pt", "calls", "--summary", "--perf", arg(&data.0)]);
    assert!(status.success(), "{stderr}");
    let mut lines = stdout.lines();
    let title = lines.next().unwrap();
    assert!(
        title.starts_with("[queue 0: thread 4242 (prog), "),
        "{stdout}"
    );
    // The file's clock makes each tick 2 ns.
    assert_eq!(
        columns(&lines.collect::<Vec<_>>().join("\n")),
        [
            ["CALLS", "TOTAL(ns)", "OWN(ns)", "FUNCTION"],
            ["2", "1200", "1200", "g"],
            ["2", "1600", "400", "f"],
        ],
        "{stdout}"
    );
    if perf_runs() {
        // perf reads the file as well, and its own decoder finds the same
        // packets at the same offsets as `weft pt dump` of the trace.
        let counts = perf_report_counts(&data.0);
        assert!(counts.contains(&("AUXTRACE".to_string(), 1)), "{counts:?}");
        let mut trace = calls_trace(page + 0x78);
        trace.resize(trace.len().next_multiple_of(8), 0);
        let trace = Scratch::new("perf-pt.pt", &trace);
        let (status, stdout, stderr) = run_weft(&["pt", "dump", arg(&trace.0)]);
        assert!(status.success(), "{stderr}");
        let weft: Vec<(u64, String)> = stdout
            .lines()
            .map(|line| {
                let (offset, rest) = line.split_once("  ").unwrap();
                let kind = rest.split_whitespace().next().unwrap();
                let kind = kind.split_once(".8").map_or(kind, |(k, _)| k);
                (u64::from_str_radix(offset, 16).unwrap(), kind.to_string())
            })
            .collect();
        assert_eq!(perf_packets(&data.0), weft);
    }
}

/// A per-CPU trace (`perf record -a`) holds whatever ran on the CPU: the
/// context-switch records say which process ran when, so each stretch
/// decodes with its own process's code, and each thread's calls come out
/// under its own title, named by its own symbols.
#[test]
fn calls_of_a_per_cpu_trace_follow_the_context_switches() {
    let page = 0x5555_5555_4000;
    let (main, f, g) = (CALLS_BASE, CALLS_BASE + 0x10, CALLS_BASE + 0x20);
    let a = Scratch::new("a.elf", &calls_program());
    // The same code under other names, in another file.
    let b = Scratch::new(
        "b.elf",
        &elf(
            &CALLS_CODE,
            CALLS_BASE,
            &[("main_b", main, 0x10), ("f_b", f, 0x10), ("g_b", g, 1)],
        ),
    );
    // A runs at TSC 1000-1800 (perf time 2005-3605), B from TSC 5000
    // (10005); B is switched in at 6000.
    let trace = [
        calls_trace_from(page + 0x78, 1000),
        calls_trace_from(page + 0x78, 5000),
    ]
    .concat();
    let data = per_cpu_perf_data(
        &[(4242, "proga", &a.0, 100), (4343, "progb", &b.0, 6000)],
        page,
        &trace,
    );
    let data = Scratch::new("per-cpu.data", &data);
    let (status, stdout, stderr) = run_weft(&["pt", "perf", arg(&data.0)]);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("intel_pt: pmu type 8, per CPU"), "{stdout}");
    if perf_runs() {
        // perf reads the switch records as weft does.
        let counts = perf_report_counts(&data.0);
        assert!(
            counts.contains(&("SWITCH_CPU_WIDE".to_string(), 2)),
            "{counts:?}"
        );
        assert_eq!(weft_record_counts(&stdout), counts, "{stdout}");
    }
    let (status, stdout, stderr) = run_weft(&["pt", "calls", "--summary", "--perf", arg(&data.0)]);
    assert!(status.success(), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("[queue 0: cpu 2, "), "{stdout}");
    let section = |title: &str, f: &str, g: &str| {
        vec![
            vec![title.to_string()],
            ["CALLS", "TOTAL(ns)", "OWN(ns)", "FUNCTION"]
                .map(String::from)
                .to_vec(),
            ["2", "1200", "1200", g].map(String::from).to_vec(),
            ["2", "1600", "400", f].map(String::from).to_vec(),
        ]
    };
    let expected = [
        section("[thread 4242 (proga), process 4242]", "f", "g"),
        section("[thread 4343 (progb), process 4343]", "f_b", "g_b"),
    ]
    .concat();
    let got: Vec<Vec<String>> = lines[1..]
        .iter()
        .map(|l| {
            if l.starts_with('[') {
                vec![l.to_string()]
            } else {
                l.split_whitespace().map(String::from).collect()
            }
        })
        .collect();
    assert_eq!(got, expected, "{stdout}");
    // The instruction flow says where the thread changes.
    let (status, stdout, _) = run_weft(&["pt", "flow", "--perf", arg(&data.0)]);
    assert!(status.success(), "{stdout}");
    let titles: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("[thread"))
        .collect();
    assert_eq!(
        titles,
        [
            "[thread 4242 (proga), process 4242]",
            "[thread 4343 (progb), process 4343]"
        ],
        "{stdout}"
    );
}

/// The (offset, packet kind) pairs of `perf report -D`'s dump of the PT
/// data in `data`, kinds lowercased as ptdump names them.
fn perf_packets(data: &Path) -> Vec<(u64, String)> {
    let output = std::process::Command::new("perf")
        .args(["report", "-D", "--stdio", "-i", arg(data)])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .skip_while(|l| !l.contains("Intel Processor Trace data"))
        .skip(1)
        .map_while(|line| {
            let (offset, rest) = line.strip_prefix(".  ")?.split_once(':')?;
            let offset = u64::from_str_radix(offset.trim(), 16).ok()?;
            let is_byte = |t: &&str| t.len() == 2 && t.chars().all(|c| c.is_ascii_hexdigit());
            let kind = rest.split_whitespace().find(|t| !is_byte(t))?;
            Some((offset, kind.to_lowercase()))
        })
        .collect()
}

/// The calls of a PT capture taken while `weft record` runs are stored in
/// its recording as the `calls` source (`weft pt import`, which `weft pt
/// record` and `--pt-on-trigger` do themselves where there is PT), placed
/// by their own time though they arrive later: the syscall made during a
/// call is found `during` it, and the calls that end around the syscall
/// are found `around` it, live and in the recording. (No PT here: the
/// capture is written as `weft pt record` writes one, its clock readings
/// putting its calls around a real syscall.)
/// A millisecond in ns.
const MS: u64 = 1_000_000;

#[test]
fn imported_calls_line_up_with_the_syscalls_of_the_same_instant() {
    if !can_trace("imported_calls_line_up_with_the_syscalls_of_the_same_instant") {
        return;
    }
    let dir = capture_dir("pt-import");
    let workload = Workload::spawn(WORKLOAD, &["getppid:1"]);
    let pid = workload.pid().to_string();
    let running = Running::start(
        &["record", "-o", arg(&dir), "--pid", &pid],
        "weft: recording",
    );
    workload.run_to_end();
    let live = |query: &str| {
        let (status, stdout, stderr) = run_weft(&["query", "--live", "--json", query]);
        assert!(status.success(), "{query}: {stderr}");
        let rows: Vec<serde_json::Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        rows
    };
    let getppid = r#"syscalls where name = "getppid""#;
    let mut rows = Vec::new();
    for _ in 0..50 {
        rows = live(&format!("{getppid} | fields time"));
        if !rows.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(rows.len(), 1, "{rows:?}");
    let t0 = rows[0]["time"].as_u64().unwrap();
    // 1 ms a unit of the listing in `calls_of_a_capture_directory_...`:
    // g from t0-100ms to t0+50ms in f until t0+100ms, then again 200 ms on.
    let start = t0 - 100 * MS;
    let (capture, _exe) = pt_capture_at("import", [start, start + 1000 * MS], |page| {
        calls_trace(page + 0x78)
    });
    let (status, _, stderr) = run_weft(&["pt", "import", arg(&capture)]);
    assert!(status.success(), "{stderr}");
    assert!(
        stderr.contains("4 calls of ")
            && stderr.contains("stored (0 too late, 0 decoding error(s))"),
        "{stderr}"
    );
    let calls = |rows: Vec<serde_json::Value>| -> Vec<(String, u64, u64, u64)> {
        rows.iter()
            .map(|r| {
                let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
                (
                    r["func"].as_str().unwrap().to_owned(),
                    n("time") - start,
                    n("dur"),
                    n("depth"),
                )
            })
            .collect()
    };
    let all = [
        ("g".to_owned(), 150 * MS, 150 * MS, 2),
        ("f".to_owned(), 200 * MS, 200 * MS, 1),
        ("g".to_owned(), 350 * MS, 150 * MS, 2),
        ("f".to_owned(), 400 * MS, 200 * MS, 1),
    ];
    assert_eq!(calls(live("calls | fields time, func, dur, depth")), all);
    assert_eq!(
        live(r#"syscalls during (calls where func = "g") where name = "getppid" | count"#)[0]["count"],
        1
    );
    assert_eq!(
        calls(live(&format!(
            "calls around ({getppid}) within 120ms | fields time, func, dur, depth"
        ))),
        all[..2]
    );
    // A directory that is no capture is refused, naming what it lacks.
    let (status, _, stderr) = run_weft(&["pt", "import", arg(&dir)]);
    assert!(
        !status.success() && stderr.contains("not a `weft pt record` capture (no capture.json)"),
        "{stderr}"
    );
    let finished = running.stop();
    assert!(finished.status.success(), "{}", finished.stderr);
    assert!(
        finished
            .stderr
            .contains("calls: 4 from 1 PT capture(s), 0 too late to store, 0 decoding error(s)"),
        "{}",
        finished.stderr
    );
    let _ = std::fs::remove_dir_all(&capture);
    // The recording answers the same.
    let rows = query_rows(
        &dir,
        r#"calls where func = "f" and pid = 4242 | fields time, func, dur, depth"#,
    );
    assert_eq!(calls(rows), [all[1].clone(), all[3].clone()]);
    let rows = query_rows(
        &dir,
        r#"syscalls during (calls where func = "f") where name = "getppid" | count"#,
    );
    assert_eq!(rows[0]["count"], 1);
    flame_graph_of_the_calls(&dir);
}

/// `weft export --format folded` of a recording holding the calls of
/// `calls_trace` (f with g inside, twice), drawn by inferno's flame graph
/// tool: each path with its own time, and the SVG names both functions.
fn flame_graph_of_the_calls(dir: &Path) {
    let folded = dir.with_extension("folded");
    let (status, _, stderr) = run_weft(&[
        "export",
        arg(dir),
        "--source",
        "calls",
        "--format",
        "folded",
        "-o",
        arg(&folded),
    ]);
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("exported 4 calls records"), "{stderr}");
    let text = std::fs::read_to_string(&folded).unwrap();
    assert_eq!(
        text,
        format!(
            "pid 4242/tid 0;f {}\npid 4242/tid 0;f;g {}\n",
            2 * 50 * MS,
            2 * 150 * MS
        )
    );
    let Some(flamegraph) = setup_tool_for_step(
        "imported_calls_line_up_with_the_syscalls_of_the_same_instant",
        "drawing the flame graph",
        "WEFT_FLAMEGRAPH",
        "inferno's flame graph",
    ) else {
        return;
    };
    let output = std::process::Command::new(&flamegraph)
        .arg(&folded)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (`cargo xtask setup` installs it)",
                flamegraph.display()
            )
        });
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let svg = String::from_utf8_lossy(&output.stdout);
    for title in [
        "<title>f (400,000,000 samples, 100.00%)</title>",
        "<title>g (300,000,000 samples, 75.00%)</title>",
    ] {
        assert!(svg.contains(title), "{title} in:\n{svg}");
    }
    let _ = std::fs::remove_file(&folded);
}

/// A capture keeps the build-id each executable file had (`build_ids` in
/// `capture.json`); decoding leaves out a file that has changed since, so
/// that code which never ran is not walked, and says so.
#[test]
fn a_file_rebuilt_since_the_capture_is_left_out_and_said() {
    let (dir, exe) = pt_capture("rebuilt", |page| calls_trace(page + 0x78));
    let with_ids = |id: serde_json::Value| {
        edit_meta(&dir, |meta| {
            meta["build_ids"] = serde_json::json!({ arg(&exe.0): id });
        });
        run_weft(&["pt", "calls", "--summary", arg(&dir)])
    };
    // The test's file has no build-id, as the capture saw.
    let (status, stdout, stderr) = with_ids(serde_json::Value::Null);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains(" g\n"), "{stdout}");
    let (status, _, stderr) = with_ids("0123abcd".into());
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        stderr.contains(&format!(
            "{}: changed since the capture (build-id 0123abcd then, none now)",
            arg(&exe.0)
        )),
        "{stderr}"
    );
    assert_eq!(status.code(), Some(1), "its code is missing: {stderr}");
}

/// A cgroup's capture keeps the memory map of each of its processes
/// (`maps` in `capture.json`): with the context switches, every thread's
/// stretches decode with its own process's code, each under its title.
#[test]
fn a_cgroup_capture_decodes_each_process_with_its_own_code() {
    let (dir, exe) = three_stretches("cgroup");
    let other = format!(
        "700000000000-700000001000 r-xp 00000000 08:01 42 {}\n",
        arg(&exe.0)
    );
    std::fs::write(dir.join("maps-99"), other).unwrap();
    edit_meta(&dir, |meta| {
        meta["target"] = serde_json::json!({"cgroup": "/sys/fs/cgroup/app"});
        meta["maps"] = serde_json::json!({"4242": "maps", "99": "maps-99"});
    });
    let (status, _, stderr) = run_weft(&["pt", "calls", "--summary", arg(&dir)]);
    assert!(
        !status.success() && stderr.contains("no context switches to tell its 2 processes apart"),
        "{stderr}"
    );
    write_switches(
        &dir,
        &[
            (6_999_999_000, 3, 4242, 4243),
            (7_000_001_500, 3, 99, 99),
            (7_000_003_500, 3, 4242, 4243),
        ],
    );
    let (status, stdout, stderr) = run_weft(&["pt", "calls", "--summary", arg(&dir)]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{stderr}");
    assert_eq!(
        columns(&stdout)[1..],
        [
            vec!["[thread", "99", "(?),", "process", "99]"],
            vec!["CALLS", "TOTAL(ns)", "OWN(ns)", "FUNCTION"],
            vec!["2", "300", "300", "g"],
            vec!["2", "400", "100", "f"],
            vec!["[thread", "4243", "(worker),", "process", "4242]"],
            vec!["CALLS", "TOTAL(ns)", "OWN(ns)", "FUNCTION"],
            vec!["4", "600", "600", "g"],
            vec!["4", "800", "200", "f"],
        ],
        "{stdout}"
    );
}

/// Lines with their whitespace runs collapsed (libipt's expectations were
/// typed with columns of their own).
fn normalised(text: &str) -> Vec<String> {
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// libipt's `pevent-tip_pgd-switch-tsc-tip_pge` case in a folder of its own
/// (the sideband names its code file, which `--pevent-sysroot` finds).
struct SidebandCase {
    dir: PathBuf,
}

impl SidebandCase {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("weft-pt-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files: [(&str, &[u8]); 3] = [
            (
                "trace.pt",
                include_bytes!(
                    "../../pt/tests/libipt/pevent-tip_pgd-switch-tsc-tip_pge/pevent-tip_pgd-switch-tsc-tip_pge.pt"
                ),
            ),
            (
                "pevent-tip_pgd-switch-tsc-tip_pge.bin",
                include_bytes!(
                    "../../pt/tests/libipt/pevent-tip_pgd-switch-tsc-tip_pge/pevent-tip_pgd-switch-tsc-tip_pge.bin"
                ),
            ),
            (
                "primary.sb",
                include_bytes!(
                    "../../pt/tests/libipt/pevent-tip_pgd-switch-tsc-tip_pge/pevent-tip_pgd-switch-tsc-tip_pge-pevent-primary,sample-type=0x6,time-zero=0x0,time-shift=0x0,time-mult=0x1.sb"
                ),
            ),
        ];
        for (name, bytes) in files {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        SidebandCase { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }
}

impl Drop for SidebandCase {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `weft pt flow` with `perf_event` sideband: each process's code comes from
/// its MMAP records, and the flow takes process 2's code where the SWITCH
/// records say it runs, as ptxed prints it. `weft pt dump` shows the same
/// records where the trace's time reaches them.
#[test]
fn flow_follows_the_processes_the_sideband_says_run() {
    let case = SidebandCase::new("follows");
    let (trace, primary, dir) = (
        case.path("trace.pt"),
        case.path("primary.sb"),
        case.path(""),
    );
    let sideband = [
        "--pevent-primary",
        primary.as_str(),
        "--pevent-sample-type",
        "0x6",
        "--pevent-sysroot",
        dir.as_str(),
        "--sb-compact",
        "--sb-offset",
    ];
    // `weft pt COMMAND` with the sideband options: what it printed.
    let output = |command: &[&str]| {
        let mut args = vec!["pt"];
        args.extend(command);
        args.extend(sideband);
        args.push(&trace);
        let (status, stdout, stderr) = run_weft(&args);
        assert!(status.success(), "{stderr}");
        normalised(&stdout)
    };
    let flow = output(&["flow", "--image", "/dev/null:0", "--sb-switch"]);
    let want = include_str!(
        "../../pt/tests/libipt/pevent-tip_pgd-switch-tsc-tip_pge/pevent-tip_pgd-switch-tsc-tip_pge-ptxed.exp"
    );
    assert_eq!(flow, normalised(want));
    let want = include_str!(
        "../../pt/tests/libipt/pevent-tip_pgd-switch-tsc-tip_pge/pevent-tip_pgd-switch-tsc-tip_pge-ptdump.exp"
    );
    assert_eq!(output(&["dump"]), normalised(want));
}

/// A sideband file that is not there, and sideband with a perf.data file
/// (which brings its own), are errors that say so.
#[test]
fn sideband_that_cannot_be_used_is_an_error() {
    let case = SidebandCase::new("unusable");
    let (trace, missing) = (case.path("trace.pt"), case.path("missing.sb"));
    let (status, _, stderr) = run_weft(&["pt", "flow", "--pevent-primary", &missing, &trace]);
    assert!(
        !status.success() && stderr.contains("missing.sb"),
        "{stderr}"
    );
    let primary = case.path("primary.sb");
    let args = ["pt", "flow", "--perf", "--pevent-primary", &primary, &trace];
    let (status, _, stderr) = run_weft(&args);
    assert!(
        !status.success() && stderr.contains("brings its own sideband"),
        "{stderr}"
    );
    // A damaged record is a decoding error: named, and the exit fails.
    let mut file = std::fs::read(&primary).unwrap();
    file[0x66] = 4;
    std::fs::write(&primary, file).unwrap();
    let sideband = ["--pevent-primary", &primary, "--pevent-sample-type", "0x6"];
    let mut args = vec!["pt", "flow", "--image", "/dev/null:0"];
    args.extend(sideband);
    args.push(&trace);
    let (status, stdout, stderr) = run_weft(&args);
    assert!(!status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("primary.sb:0000000000000060 sideband error: decoder out of sync"),
        "{stdout}"
    );
}
