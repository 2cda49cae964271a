//! weft left running as root: the attacks of docs/security.md's table that
//! need a real recording. A capture directory another user owns or may
//! write to is refused before anything is written; a full disk stops a
//! recording with every record it could not store counted, and the
//! capture it leaves reads back without damage.

use std::{os::unix::fs::PermissionsExt as _, process::Command};

use weft_tests::{Need, Running, SYSCALL_PROBE, Workload, capture_dir, needs, run_weft};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_weft-workload");

/// The uid of `nobody` on Debian, which owns the foreign directory.
const NOBODY: u32 = 65534;

#[test]
fn a_capture_directory_others_can_write_to_is_refused() {
    if !needs(
        "a_capture_directory_others_can_write_to_is_refused",
        &[Need::Root],
    ) {
        return;
    }
    let dir = capture_dir("foreign");
    std::fs::create_dir(&dir).unwrap();
    let path = dir.to_str().unwrap();
    for (uid, mode, why) in [
        (NOBODY, 0o700, "is owned by uid 65534"),
        (0, 0o777, "writable by group or others"),
        (0, 0o1733, "writable by group or others"),
    ] {
        std::os::unix::fs::chown(&dir, Some(uid), None).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        let (status, _, stderr) = run_weft(&["record", "-o", path, "--duration", "1s"]);
        assert_eq!(status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(why) && stderr.contains(path), "{stderr}");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "weft wrote in it"
        );
    }
    // A link to a directory of root's is not followed either.
    std::os::unix::fs::chown(&dir, Some(0), None).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = dir.with_extension("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let (status, _, stderr) =
        run_weft(&["record", "-o", link.to_str().unwrap(), "--duration", "1s"]);
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    std::fs::remove_file(&link).unwrap();
}

/// A tmpfs of `size` mounted on a new directory, unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    fn mount(name: &str, size: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("weft-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(status.success(), "mount a tmpfs on {}", dir.display());
        Self(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_full_disk_stops_recording_and_counts_every_record_not_stored() {
    // Heavy: filling 64 MiB takes a flood of millions of syscalls.
    let test = "a_full_disk_stops_recording_and_counts_every_record_not_stored";
    if !needs(test, &SYSCALL_PROBE) || !needs(test, &[Need::Heavy]) {
        return;
    }
    // 64 MiB fill in a few seconds of a getppid flood.
    let disk = SmallDisk::mount("enospc", "64m");
    let dir = disk.0.join("capture");
    let mut workload = Workload::spawn(WORKLOAD, &["getppid:400000000"]);
    let pid = workload.pid().to_string();
    let args = [
        "record",
        "-o",
        dir.to_str().unwrap(),
        "--pid",
        &pid,
        "--duration",
        "50s",
    ];
    let running = Running::start(&args, "weft: recording");
    workload.go();
    let finished = running.wait();
    // The flood ends with the test, not 400 M calls later.
    drop(workload);
    assert_eq!(finished.status.code(), Some(2), "{}", finished.stderr);
    let last = finished.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("No space left on device") && last.contains("store error"),
        "{}",
        finished.stderr
    );
    let json = std::fs::read_to_string(dir.join("weft.json")).unwrap();
    let metadata: serde_json::Value = serde_json::from_str(&json).unwrap();
    let session = &metadata["sessions"][0];
    assert!(session["end_ns"].as_u64().is_some(), "{session}");
    assert!(session["store_error"].as_str().is_some(), "{session}");
    let syscalls = &session["lost"]["syscalls"];
    let received = syscalls["received"].as_u64().unwrap();
    let after = syscalls["store_error"].as_u64().unwrap_or(0);
    let unflushed = session["unflushed"].as_u64().unwrap();
    // Every record received is on disk or counted.
    let (status, stdout, stderr) =
        run_weft(&["query", "--json", dir.to_str().unwrap(), "syscalls | count"]);
    assert!(status.success(), "{stderr}");
    let stored = serde_json::from_str::<serde_json::Value>(stdout.trim()).unwrap()["count"]
        .as_u64()
        .unwrap();
    assert_eq!(stored + after + unflushed, received, "{session}");
    assert!(stored > 1_000_000, "only {stored} records stored");
    let (status, _, stderr) = run_weft(&["check", dir.to_str().unwrap()]);
    assert!(status.success(), "weft check found damage: {stderr}");
    let (_, info, _) = run_weft(&["info", dir.to_str().unwrap()]);
    assert!(info.contains("stopped   by a store error"), "{info}");
    drop(disk);
}
