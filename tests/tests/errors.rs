//! Bad input and missing privileges: a one-line error naming the problem, a
//! non-zero exit, and no panic or backtrace.

use std::{os::unix::process::CommandExt as _, process::Command};

use weft_tests::{run_weft, weft_bin};

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

#[test]
fn not_root() {
    // A copy outside the build tree, so the unprivileged user can execute it.
    let dir = std::env::temp_dir().join(format!("weft-not-root-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("weft");
    std::fs::copy(weft_bin(), &copy).unwrap();
    let mut cmd = Command::new(&copy);
    cmd.args(["stat", "--duration", "1s"]);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = cmd.output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("needs root"), "{stderr}");
}
