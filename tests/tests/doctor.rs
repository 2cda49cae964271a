//! `weft doctor` on the running kernel: the syscall probe and the event
//! sources really load, and the report says so line by line.

use weft_tests::{can_trace, run_weft};

#[test]
fn doctor_reports_a_usable_kernel() {
    if !can_trace("doctor_reports_a_usable_kernel") {
        return;
    }
    let (status, stdout, stderr) = run_weft(&["doctor"]);
    assert!(status.success(), "{stdout}{stderr}");
    let line = |what: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no `{what}` line in {stdout}"))
            .to_owned()
    };
    assert!(line("syscall probe").contains(" ok "), "{stdout}");
    assert!(line("privileges").contains(" ok "), "{stdout}");
    assert!(line("raw syscall tracepoints").contains(" ok "), "{stdout}");
    // Every kernel weft supports has the scheduler and block tracepoints;
    // the loaded programs must pass this kernel's verifier.
    assert!(line("source sched").contains(" ok "), "{stdout}");
    assert!(line("source block").contains(" ok "), "{stdout}");
    assert!(line("event sources load").contains(" ok "), "{stdout}");
}
