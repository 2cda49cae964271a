//! The event sources besides syscalls, on the running kernel: each records
//! what a workload with known behaviour did, exactly, and says what it lost.

use weft_tests::{Need, capture_dir, needs, record, run_weft};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_weft-workload");

/// `weft query DIR QUERY --json`: the rows as JSON objects.
fn query(dir: &std::path::Path, text: &str) -> Vec<serde_json::Value> {
    let (status, stdout, stderr) = run_weft(&["query", "--json", dir.to_str().unwrap(), text]);
    assert!(status.success(), "{text}: {stderr}");
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

#[test]
fn sched_shows_each_sleep_as_an_off_cpu_interval() {
    if !needs(
        "sched_shows_each_sleep_as_an_off_cpu_interval",
        &[Need::Root, Need::Tracepoint("sched/sched_switch")],
    ) {
        return;
    }
    let dir = capture_dir("sched-sleeps");
    let sleeps = 25;
    let stderr = record(
        WORKLOAD,
        &dir,
        &[
            "getppid:1000",
            &format!("nanosleep:10:{sleeps}"),
            "getppid:1000",
        ],
        &["--sources", "sched"],
    );
    assert!(
        stderr.contains("sched: ") && stderr.contains("lost 0"),
        "{stderr}"
    );
    let rows = query(
        &dir,
        r#"sched where state = "S" | count, min(off_cpu), max(off_cpu) by pid"#,
    );
    assert_eq!(rows.len(), 1, "one thread slept: {rows:?}");
    let row = &rows[0];
    assert_eq!(row["count"], sleeps, "{row}");
    assert!(row["min(off_cpu)"].as_i64().unwrap() >= 10_000_000, "{row}");
    assert!(
        row["max(off_cpu)"].as_i64().unwrap() < 1_000_000_000,
        "{row}"
    );
    // The thread's name comes along, and the run-queue wait is part of the
    // off-CPU time.
    let rows = query(
        &dir,
        r#"sched where state = "S" | fields comm, off_cpu, runq"#,
    );
    assert_eq!(rows.len(), sleeps);
    for row in rows {
        assert_eq!(row["comm"], "weft-workload", "{row}");
        assert!(row["runq"].as_i64() <= row["off_cpu"].as_i64(), "{row}");
    }
}

/// A loop device over a fresh file, detached and removed on drop.
struct LoopDevice {
    device: std::fs::File,
    path: String,
    backing: std::path::PathBuf,
    /// The kernel's `dev_t`: major << 20 | minor.
    dev: u32,
}

impl LoopDevice {
    /// A loop device over a new file of `bytes`, or why there is none.
    fn new(bytes: u64) -> Result<Self, String> {
        use std::os::{fd::AsRawFd as _, unix::fs::MetadataExt as _};
        const LOOP_SET_FD: libc::c_ulong = 0x4C00;
        const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
        let control = std::fs::File::open("/dev/loop-control")
            .map_err(|e| format!("/dev/loop-control: {e}"))?;
        // SAFETY: a valid fd; the ioctl takes no argument.
        let number = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) };
        if number < 0 {
            return Err(format!(
                "no free loop device: {}",
                std::io::Error::last_os_error()
            ));
        }
        let backing = std::env::temp_dir().join(format!("weft-loop-{}", std::process::id()));
        let file = std::fs::File::create(&backing).map_err(|e| e.to_string())?;
        file.set_len(bytes).map_err(|e| e.to_string())?;
        let path = format!("/dev/loop{number}");
        let device = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: both fds are valid and open.
        if unsafe { libc::ioctl(device.as_raw_fd(), LOOP_SET_FD, file.as_raw_fd()) } != 0 {
            return Err(format!(
                "LOOP_SET_FD {path}: {}",
                std::io::Error::last_os_error()
            ));
        }
        let rdev = device.metadata().map_err(|e| e.to_string())?.rdev();
        let dev = (libc::major(rdev) << 20) | libc::minor(rdev);
        Ok(Self {
            device,
            path,
            backing,
            dev,
        })
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd as _;
        const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
        // SAFETY: a valid fd; the ioctl takes no argument.
        unsafe { libc::ioctl(self.device.as_raw_fd(), LOOP_CLR_FD) };
        let _ = std::fs::remove_file(&self.backing);
    }
}

#[test]
fn block_records_a_direct_read_with_its_bytes() {
    if !needs(
        "block_records_a_direct_read_with_its_bytes",
        &[Need::Root, Need::Tracepoint("block/block_rq_issue")],
    ) {
        return;
    }
    let device = match LoopDevice::new(8 << 20) {
        Ok(device) => device,
        Err(why) => {
            eprintln!(
                "skipping block_records_a_direct_read_with_its_bytes: needs a loop device ({why})"
            );
            return;
        }
    };
    let dir = capture_dir("block-direct");
    let bytes = 1 << 20;
    let stderr = record(
        WORKLOAD,
        &dir,
        &[&format!("direct-read:{}:{bytes}", device.path)],
        &["--sources", "block"],
    );
    assert!(
        stderr.contains("block: ") && stderr.contains("lost 0"),
        "{stderr}"
    );
    let rows = query(
        &dir,
        &format!(
            "block where dev = {} | count, sum(bytes), min(latency) by op",
            device.dev
        ),
    );
    assert_eq!(rows.len(), 1, "only reads: {rows:?}");
    let row = &rows[0];
    assert_eq!(row["op"], "read", "{row}");
    assert_eq!(row["sum(bytes)"], bytes, "{row}");
    assert!(row["min(latency)"].as_i64().unwrap() > 0, "{row}");
}

#[test]
fn pagecache_counts_a_cold_read_in_adds_and_a_warm_one_in_hits() {
    let test = "pagecache_counts_a_cold_read_in_adds_and_a_warm_one_in_hits";
    if !needs(
        test,
        &[
            Need::Root,
            Need::Tracepoint("filemap/mm_filemap_add_to_page_cache"),
        ],
    ) {
        return;
    }
    // 300 pages, the last one partly used. In the capture directory's
    // parent: a disk-backed file system (tmpfs pages never leave the cache).
    let pages = 300;
    let dir = capture_dir("pagecache");
    let here = std::env::current_dir().unwrap();
    if in_memory(&here) {
        eprintln!(
            "skipping {test}: {} is in memory; its pages never leave the cache",
            here.display()
        );
        return;
    }
    let file = here.join(format!("weft-pagecache-{}", std::process::id()));
    std::fs::write(&file, vec![7u8; pages * 4096 - 100]).unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
    let path = file.to_str().unwrap();
    let stderr = record(
        WORKLOAD,
        &dir,
        // Page-sized reads: a lookup counts the pages a read asks for, and
        // a read asking past the end of the file asks for pages that are
        // not there (docs/sources.md).
        &[
            &format!("drop-cache:{path}"),
            &format!("read:{path}:4096"),
            &format!("read:{path}:4096"),
        ],
        &["--sources", "pagecache"],
    );
    let _ = std::fs::remove_file(&file);
    assert!(
        stderr.contains("pagecache: ") && stderr.contains("lost 0"),
        "{stderr}"
    );
    let rows = query(
        &dir,
        &format!("pagecache where ino = {ino} | sum(pages) by op"),
    );
    let sum = |op: &str| {
        rows.iter()
            .find(|r| r["op"] == op)
            .map_or(0, |r| r["sum(pages)"].as_u64().unwrap())
    };
    assert_eq!(
        sum("delete"),
        pages as u64,
        "dropped from the cache: {rows:?}"
    );
    assert_eq!(
        sum("add"),
        pages as u64,
        "the cold read adds each page once: {rows:?}"
    );
    if needs(test, &[Need::Tracepoint("filemap/mm_filemap_get_pages")]) {
        // Both reads look up every page; the second adds none, so hits =
        // lookups - adds = one read's worth.
        assert_eq!(sum("lookup"), 2 * pages as u64, "{rows:?}");
        let second_read = query(
            &dir,
            &format!("pagecache where ino = {ino} and op = \"add\" | max(ts)"),
        );
        let last_add = second_read[0]["max(ts)"].as_i64().unwrap();
        let lookups = query(
            &dir,
            &format!("pagecache where ino = {ino} and op = \"lookup\" | fields ts, pages"),
        );
        let after: u64 = lookups
            .iter()
            .filter(|r| r["ts"].as_i64().unwrap() > last_add)
            .map(|r| r["pages"].as_u64().unwrap())
            .sum();
        assert!(
            after >= pages as u64,
            "the warm read only hits: {lookups:?}"
        );
    }
}

/// Whether `dir` is on tmpfs or ramfs, whose pages the cache never drops.
fn in_memory(dir: &std::path::Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let path = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
    // SAFETY: statfs fills the zeroed struct; the path is NUL-terminated.
    let mut stat: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &raw mut stat) } != 0 {
        return true;
    }
    #[allow(clippy::unnecessary_cast, reason = "f_type's type differs by platform")]
    let kind = stat.f_type as i64;
    kind == TMPFS_MAGIC || kind == RAMFS_MAGIC
}
