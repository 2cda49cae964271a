//! Bad input and missing privileges: a one-line error naming the problem, a
//! non-zero exit, and no panic or backtrace.

use std::{os::unix::process::CommandExt as _, process::Command};

use weft_tests::{SYSCALL_PROBE, capture_dir, needs, run_weft, weft_bin};

/// Asserts exit status 2 and exactly one stderr line containing `needle`.
fn assert_one_line_error(args: &[&str], needle: &str) {
    let (status, stdout, stderr) = run_weft(args);
    assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stdout, "", "{args:?}");
    assert_eq!(
        stderr.lines().count(),
        1,
        "{args:?} printed more than one line:\n{stderr}"
    );
    assert!(
        stderr.contains(needle),
        "{args:?}: expected `{needle}` in {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn unknown_syscall_name() {
    assert_one_line_error(&["stat", "--syscall", "getppid,bogus_call"], "bogus_call");
}

#[test]
fn malformed_duration() {
    assert_one_line_error(&["stat", "--duration", "5parsecs"], "5parsecs");
    assert_one_line_error(&["stat", "--interval", "fast"], "fast");
}

#[test]
fn nonexistent_pid() {
    // Above the largest pid_max the kernel allows (2^22).
    assert_one_line_error(
        &["stat", "--pid", "4194305"],
        "--pid 4194305: no such process",
    );
}

#[test]
fn unknown_flag() {
    assert_one_line_error(&["stat", "--frobnicate"], "--frobnicate");
}

/// clap's "did you mean" tip reaches the user, on the error's one line.
#[test]
fn a_mistyped_command_is_told_the_similar_one() {
    assert_one_line_error(&["stats"], "tip: a similar subcommand exists: 'stat'");
    assert_one_line_error(
        &["stat", "--duraton", "1s"],
        "tip: a similar argument exists: '--duration'",
    );
}

/// Every command that needs the kernel's probes says it needs root, run by
/// a user who is not (never that tracefs is not mounted when it is).
#[test]
fn not_root() {
    // A copy outside the build tree, so the unprivileged user can execute it.
    let dir = std::env::temp_dir().join(format!("weft-not-root-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("weft");
    std::fs::copy(weft_bin(), &copy).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for args in [
        &["stat", "--duration", "1s"][..],
        &["trace", "-l", "tracepoint:syscalls:sys_enter_getpp*"],
    ] {
        let mut cmd = Command::new(&copy);
        cmd.args(args);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.uid(65534).gid(65534);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // sysexits' EX_NOPERM: a script can tell it from bad input (2).
        assert_eq!(out.status.code(), Some(77), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("needs root"), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The bad-input table of docs/errors.md: a command with a wrong value and
/// what its error must say. `{dir}` is a small capture; `{new}` a path
/// that must still not exist afterwards (nothing half written).
const TABLE: &[(&[&str], &str)] = &[
    (&["stat", "--syscall", "getppid,bogus_call"], "bogus_call"),
    (
        &["stat", "--duration", "5parsecs"],
        "unknown unit `parsecs`",
    ),
    (&["stat", "--interval", "fast"], "`fast` is not a duration"),
    (&["stat", "--min-duration", "3zz"], "unknown unit `zz`"),
    (&["stat", "--comm", ""], "1 to 15 bytes"),
    (
        &["stat", "--pid", "4194305"],
        "--pid 4194305: no such process",
    ),
    (&["record"], "--output"),
    (
        &["record", "-o", "{new}", "--max-disk", "12zz"],
        "unknown unit `zz`",
    ),
    (
        &["record", "-o", "{new}", "--retain", "forever"],
        "`forever` is not a duration",
    ),
    (
        &["record", "-o", "{new}", "--retain-summaries", "7d"],
        "--max-disk <SIZE>|--retain <DURATION>",
    ),
    (
        &["record", "-o", "{new}", "--sources", "bogus"],
        "--sources bogus: no such source",
    ),
    (
        &["record", "-o", "{new}", "--port", "70000"],
        "70000 is not in 0..=65535",
    ),
    (
        &["record", "-o", "{new}", "--addr", "1.2.3"],
        "invalid IP address",
    ),
    (&["record", "-o", "{dir}"], "already holds a capture"),
    (
        &["info", "/nonexistent"],
        "/nonexistent is not a weft capture",
    ),
    (
        &["check", "/nonexistent"],
        "/nonexistent is not a weft capture",
    ),
    (
        &["query", "/nonexistent", "syscalls | count"],
        "/nonexistent is not a weft capture",
    ),
    (
        &["query", "{dir}", "syscalls | p99(bogus)"],
        "has no field `bogus`",
    ),
    (
        &[
            "query",
            "{dir}",
            r#"syscalls where name = "nosuchcall" | count"#,
        ],
        r#"no `name` is called "nosuchcall""#,
    ),
    (
        &["query", "{dir}", "syscalls | p101(dur)"],
        "`p101` is not a percentile",
    ),
    (
        &["query", "{dir}", "syscalls | count last 5parsecs"],
        "unknown unit `parsecs`",
    ),
    (
        &["query", "{dir}", "nosource | count"],
        "no source `nosource`",
    ),
    (
        &["query", "{dir}", "syscalls | limit -1"],
        "expected a row count",
    ),
    (
        &["query", "{dir}", "syscalls | count by"],
        "expected a field to group by",
    ),
    (&["query", "{dir}", ""], "expected a source name"),
    (
        &["diff", "{dir}", "{dir}", "--fail-if", "p98 > 2x"],
        "`p98` is not count, rate",
    ),
    (&["diff", "{dir}"], "give B, or --b-window"),
    (
        &["diff", "{dir}", "/nonexistent"],
        "/nonexistent is not a weft capture",
    ),
    (
        &["export", "{dir}", "--format", "xml", "-o", "{new}"],
        "invalid value 'xml'",
    ),
    (
        &["export", "{dir}", "-o", "/nonexistent/f.csv"],
        "/nonexistent/f.csv",
    ),
    (
        &["export", "{dir}", "--source", "nosuch", "-o", "{new}"],
        "no source `nosuch`",
    ),
    (
        &["extract", "{dir}", "--trigger", "99", "-o", "{new}"],
        "no trigger firings",
    ),
    (
        &["tui", "--replay", "/nonexistent"],
        "/nonexistent is not a weft capture",
    ),
    (
        &["tui", "--replay", "{dir}", "--speed", "0"],
        "--speed 0: must be a positive number",
    ),
    (
        &["tui", "--replay", "{dir}", "--speed", "abc"],
        "invalid value 'abc'",
    ),
    (
        &["trace", "tracepoint:nosuch:event { @ = count(); }"],
        "tracepoint not found: nosuch:event",
    ),
    (
        &["trace", "tracepoint:syscalls:sys_enter_read { @ = count() "],
        "expected `;` or `}`",
    ),
    (
        &["trace", "/nonexistent/tool.bt"],
        "failed to open file '/nonexistent/tool.bt': No such file or directory",
    ),
    (
        &["trace", "-p", "a1111", "BEGIN { exit(); }"],
        "pid 'a1111' is not a valid decimal number",
    ),
    (
        &["trace", "-p", "5000000", "BEGIN { exit(); }"],
        "pid '5000000' out of valid pid range [1,4194304]",
    ),
    (&["pt", "dump", "/nonexistent"], "/nonexistent"),
    (&["pt", "flow", "/nonexistent"], "reading /nonexistent"),
    (
        &["record", "-o", "{new}", "--trigger", "syscalls"],
        "a trigger needs a condition",
    ),
    (
        &[
            "record",
            "-o",
            "{new}",
            "--trigger",
            "syscalls where bogus > 3",
        ],
        "has no field `bogus`",
    ),
    (
        &["record", "-o", "{new}", "--keep", "30s"],
        "`30s` is not -BEFORE..+AFTER",
    ),
    (
        &["record", "-o", "{new}", "--max-triggers", "10"],
        "`10` is not N/PERIOD",
    ),
    (
        &["record", "-o", "{new}", "--max-triggers", "x/1h"],
        "`x` in `x/1h` is not a count",
    ),
    (
        &["record", "-o", "{new}", "--pt-on-trigger", "0s"],
        "a PT window lasts 100ms to 2s",
    ),
    (
        &["trigger", "/nonexistent", "--note", "x"],
        "no capture at /nonexistent",
    ),
    (&["stat", "--syscall", ""], "unknown x86-64 syscall name"),
    (
        &["tui", "/nonexistent"],
        "/nonexistent is not a weft capture",
    ),
    (
        &[
            "trace",
            "-c",
            "",
            "tracepoint:syscalls:sys_enter_read { @ = count(); }",
        ],
        "-c needs a command",
    ),
    (
        &[
            "trace",
            "tracepoint:syscalls:sys_enter_read { @ = nosuchfn(); }",
        ],
        "unknown function `nosuchfn`",
    ),
    (
        &[
            "trace",
            "tracepoint:syscalls:sys_enter_read { @[args.nosuch] = count(); }",
        ],
        "has no field `nosuch`",
    ),
];

/// A row of [`TABLE`] as docs/errors.md shows it.
fn doc_row((args, needle): &(&[&str], &str)) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|a| match *a {
            "{dir}" => "DIR".to_owned(),
            "{new}" => "NEW".to_owned(),
            a if a.is_empty() || a.contains([' ', '|', '"', '{']) => format!("'{a}'"),
            a => a.to_owned(),
        })
        .collect();
    let cell = |text: &str| text.replace('|', "\\|");
    format!("| `weft {}` | {} |", cell(&words.join(" ")), cell(needle))
}

#[test]
fn the_bad_input_table_in_the_docs_is_the_tested_one() {
    // Built in, so the VM matrix (whose initramfs holds no sources) runs it too.
    let docs = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/errors.md"));
    let rows: Vec<&str> = docs.lines().filter(|l| l.starts_with("| `weft ")).collect();
    let tested: Vec<String> = TABLE.iter().map(doc_row).collect();
    assert_eq!(rows, tested, "docs/errors.md's table and TABLE differ");
}

#[test]
fn bad_input_table() {
    let test = "bad_input_table";
    if !needs(test, &SYSCALL_PROBE) {
        return;
    }
    let dir = capture_dir("bad-input");
    let (status, _, stderr) = run_weft(&[
        "record",
        "--sources",
        "syscalls",
        "-d",
        "1s",
        "-o",
        dir.to_str().expect("utf-8 path"),
    ]);
    assert!(status.success(), "{stderr}");
    let new = capture_dir("bad-input-new");
    for (args, needle) in TABLE {
        let args: Vec<&str> = args
            .iter()
            .map(|a| match *a {
                "{dir}" => dir.to_str().expect("utf-8 path"),
                "{new}" => new.to_str().expect("utf-8 path"),
                a => a,
            })
            .collect();
        let (status, stdout, stderr) = run_weft(&args);
        assert_eq!(status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stdout, "", "{args:?}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(first.starts_with("weft: "), "{args:?}: {stderr}");
        assert!(
            first.contains(needle),
            "{args:?}: expected `{needle}` in {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!new.exists(), "{args:?} left {}", new.display());
    }
}
