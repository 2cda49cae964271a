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
    let (status, stdout, stderr) = run_weft(&["pt", "record", "--pid", &pid]);
    assert_eq!(stdout, "");
    if Path::new("/sys/bus/event_source/devices/intel_pt").exists() {
        assert_ne!(status.code(), Some(0), "{stderr}");
        assert!(stderr.contains("Intel PT is present"), "{stderr}");
    } else {
        assert_eq!(status.code(), Some(3), "{stderr}");
        assert!(
            stderr.contains("Intel PT is not available on this CPU or VM"),
            "{stderr}"
        );
        assert!(stderr.contains("weft pt flow"), "{stderr}");
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
