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
    // The same checks as JSON lines, for scripts.
    let (status, json, stderr) = run_weft(&["doctor", "--json"]);
    assert!(status.success(), "{json}{stderr}");
    let checks: Vec<serde_json::Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(checks.len(), stdout.lines().count(), "{json}");
    let probe = checks
        .iter()
        .find(|c| c["check"] == "syscall probe")
        .expect("the syscall probe's check");
    assert_eq!(probe["ok"], true, "{probe}");
}

#[test]
fn sources_lists_each_source_and_survives_a_closed_stdout() {
    if !can_trace("sources_lists_each_source_and_survives_a_closed_stdout") {
        return;
    }
    let (status, stdout, stderr) = run_weft(&["sources", "--json"]);
    assert!(status.success(), "{stderr}");
    let sources: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<&str> = sources.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "sched",
            "block",
            "pagecache",
            "net",
            "switch",
            "conns",
            "stacks",
            "args"
        ]
    );
    assert_eq!(sources[0]["available"], true, "{}", sources[0]);
    // `weft sources | head -1`: the reader goes away; weft must not panic.
    let mut child = std::process::Command::new(weft_tests::weft_bin())
        .arg("sources")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
