//! Helpers for weft's integration tests: finding the binaries, running a
//! workload with an exactly known syscall count, and running `weft stat`
//! around it.
//!
//! Kernel tests need root; they skip with a message naming the kernel when
//! not root, and `cargo xtask test` (which CI runs as root) never skips them.

use std::{
    io::{BufRead as _, BufReader, Read as _, Write as _},
    path::PathBuf,
    process::{Child, ChildStdin, Command, ExitStatus, Stdio},
    sync::mpsc,
    thread,
    time::Duration,
};

/// The `weft` binary under test: `$WEFT_BIN`, else the release build.
pub fn weft_bin() -> PathBuf {
    std::env::var_os("WEFT_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/weft"),
        PathBuf::from,
    )
}

/// What a kernel test needs from the machine it runs on.
#[derive(Clone, Copy, Debug)]
pub enum Need {
    /// Root (or the BPF capabilities).
    Root,
    /// At least this kernel version (major, minor).
    Kernel(u32, u32),
    /// Kernel BTF (`/sys/kernel/btf/vmlinux`).
    Btf,
    /// A tracepoint, `category/event`, checked when tracefs is mounted.
    Tracepoint(&'static str),
    /// Room for millions of syscalls and hundreds of MB of capture: not
    /// inside the VM matrix (`WEFT_VM`), where TCG and a RAM disk make such
    /// a test take minutes.
    Heavy,
    /// Kprobes (`CONFIG_KPROBES`).
    Kprobes,
}

/// Whether the kernel has kprobes (`CONFIG_KPROBES`): tracefs shows
/// `kprobe_events` then.
pub fn has_kprobes() -> bool {
    std::path::Path::new("/sys/kernel/tracing/kprobe_events").exists()
}

/// What the syscall probe needs: task-local storage for tracing programs
/// (5.11), BPF ring buffers (5.8), kernel BTF, the raw syscall tracepoints.
pub const SYSCALL_PROBE: [Need; 4] = [
    Need::Root,
    Need::Kernel(5, 11),
    Need::Btf,
    Need::Tracepoint("raw_syscalls/sys_enter"),
];

/// Whether every need is met; otherwise prints `skipping TEST: reason` (the
/// VM matrix counts these lines) and returns false.
pub fn needs(test: &str, needs: &[Need]) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let release = release.trim();
    let missing = needs.iter().find_map(|need| match *need {
        // SAFETY: geteuid has no preconditions.
        Need::Root => (unsafe { libc::geteuid() } != 0).then(|| "root".to_owned()),
        Need::Kernel(major, minor) => (kernel_version(release) < (major, minor))
            .then(|| format!("kernel {major}.{minor} or later")),
        Need::Btf => (!std::path::Path::new("/sys/kernel/btf/vmlinux").exists())
            .then(|| "kernel BTF".to_owned()),
        Need::Tracepoint(event) => (!has_tracepoint(event)).then(|| format!("tracepoint {event}")),
        Need::Kprobes => (!has_kprobes()).then(|| "kprobes (CONFIG_KPROBES)".to_owned()),
        Need::Heavy => std::env::var_os("WEFT_VM")
            .is_some()
            .then(|| "a real machine for millions of syscalls (not the VM matrix)".to_owned()),
    });
    match missing {
        None => true,
        Some(what) => {
            eprintln!("skipping {test}: needs {what} (kernel {release})");
            false
        }
    }
}

/// Whether `tool` runs (`tool VERSION_ARG`). `cargo xtask setup` installs
/// every tool the tests use, so on the host its absence fails `test`; the
/// VM matrix's initramfs carries none of them, and there `test` says why it
/// skips.
pub fn has_tool(test: &str, tool: &str, version_arg: &str) -> bool {
    let found = std::process::Command::new(tool)
        .arg(version_arg)
        .output()
        .is_ok();
    if !found && std::env::var_os("WEFT_VM").is_some() {
        eprintln!("skipping {test}: needs {tool}, which the VM's initramfs does not carry");
        return false;
    }
    assert!(found, "{test} needs {tool}: run `cargo xtask setup`");
    true
}

/// The path in `var` of a tool `cargo xtask setup` installs outside PATH
/// (`WEFT_PYTHON`, `WEFT_FLAMEGRAPH`; `cargo xtask test` sets them). On the
/// host its absence fails `test`; in the VM matrix, whose initramfs carries
/// none of them, `test` says why it skips.
pub fn setup_tool(test: &str, var: &str, what: &str) -> Option<std::ffi::OsString> {
    tool_from(test, var, what)
        .inspect_err(|why| eprintln!("skipping {test}: {why}"))
        .ok()
}

/// As [`setup_tool`], for a tool only a test's last `step` needs: in the VM
/// matrix the test's other assertions still count, so it says which step it
/// leaves out (not "skipping", which the matrix counts as a skip).
pub fn setup_tool_for_step(
    test: &str,
    step: &str,
    var: &str,
    what: &str,
) -> Option<std::ffi::OsString> {
    tool_from(test, var, what)
        .inspect_err(|why| eprintln!("{test}: leaving out {step}: {why}"))
        .ok()
}

/// The tool in `var`, or (in the VMs only) why there is none.
fn tool_from(test: &str, var: &str, what: &str) -> Result<std::ffi::OsString, String> {
    if let Some(path) = std::env::var_os(var) {
        return Ok(path);
    }
    assert!(
        std::env::var_os("WEFT_VM").is_some(),
        "{test} needs {what} from {var}: run it through `cargo xtask test`, which sets it"
    );
    Err(format!(
        "needs {what} ({var}), which the VM's initramfs does not carry"
    ))
}

/// Whether tracepoint `category/event` exists (true when tracefs is not
/// mounted: weft mounts it itself, so that is no reason to skip).
pub fn has_tracepoint(event: &str) -> bool {
    ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
        .iter()
        .map(std::path::Path::new)
        .find(|root| root.join("events").is_dir())
        .is_none_or(|root| root.join("events").join(event).is_dir())
}

/// Whether the running kernel is `major.minor` or later.
pub fn kernel_at_least(major: u32, minor: u32) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    kernel_version(release.trim()) >= (major, minor)
}

/// `6.1.0-56-cloud-amd64` → (6, 1).
fn kernel_version(release: &str) -> (u32, u32) {
    let mut numbers = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse().unwrap_or(0));
    (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0))
}

/// Whether the syscall probe can run here; prints why not.
pub fn can_trace(test: &str) -> bool {
    needs(test, &SYSCALL_PROBE)
}

/// A `weft-workload` child waiting for its start signal.
pub struct Workload {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Workload {
    /// Spawns the workload with `steps` (see `weft-workload`); it waits.
    pub fn spawn(workload_bin: &str, steps: &[&str]) -> Self {
        let mut child = Command::new(workload_bin)
            .args(steps)
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn weft-workload");
        let stdin = child.stdin.take();
        Self { child, stdin }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets the workload run and waits for it to finish successfully.
    pub fn run_to_end(self) {
        let status = self.run();
        assert!(status.success(), "workload failed: {status}");
    }

    /// Lets the workload run without waiting for it; it is killed when
    /// dropped, so that a test's flood never outlives the test.
    pub fn go(&mut self) {
        let mut stdin = self.stdin.take().expect("started once");
        stdin.write_all(b"g").expect("signal workload");
    }

    /// Lets the workload run and waits for it to end, however it ends.
    pub fn run(mut self) -> ExitStatus {
        let mut stdin = self.stdin.take().expect("started once");
        stdin.write_all(b"g").expect("signal workload");
        drop(stdin);
        wait_within(&mut self.child, Duration::from_secs(120))
            .expect("the workload did not finish within 120 s")
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits up to `limit` for `child` to exit; kills it (and returns None)
/// when it has not.
fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().expect("wait for a child") {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A running `weft` command that has attached its probes.
pub struct Running {
    child: Child,
    stderr: mpsc::Receiver<String>,
}

/// What a stopped `weft` command printed.
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Running {
    /// Starts `weft ARGS` and waits for the stderr line that starts with
    /// `ready` (weft prints it once the probes are attached).
    pub fn start(args: &[&str], ready: &str) -> Self {
        Self::start_under(&[], args, ready)
    }

    /// As [`Running::start`], with weft started by `prefix` (`ip netns
    /// exec NS`, which becomes weft: the child's pid is weft's).
    pub fn start_under(prefix: &[&str], args: &[&str], ready: &str) -> Self {
        let mut command = match prefix.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(weft_bin());
                command
            }
            None => Command::new(weft_bin()),
        };
        let mut child = command
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", weft_bin().display()));
        let (tx, stderr) = mpsc::channel();
        let pipe = child.stderr.take().expect("stderr piped");
        thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Warnings (what a source lacks on this kernel) may come first.
        let mut before = Vec::new();
        loop {
            match stderr.recv_timeout(Duration::from_secs(60)) {
                Ok(line) if line.starts_with(ready) => break,
                Ok(line) => before.push(line),
                Err(e) => panic!("weft did not attach ({e}): {}", before.join("\n")),
            }
        }
        Self { child, stderr }
    }

    /// The weft process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` and goes on (SIGUSR2: `record`'s manual trigger).
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("pid fits");
        // SAFETY: plain kill(2) of our own child.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "signal weft");
    }

    /// Waits up to a minute for a line of weft's stderr that starts with
    /// `prefix` and returns it; the lines before it are not kept.
    pub fn wait_for_stderr(&self, prefix: &str) -> String {
        let mut before = Vec::new();
        loop {
            match self.stderr.recv_timeout(Duration::from_secs(60)) {
                Ok(line) if line.starts_with(prefix) => return line,
                Ok(line) => before.push(line),
                Err(e) => panic!("weft printed no `{prefix}` ({e}): {}", before.join("\n")),
            }
        }
    }

    /// Sends `signal` and collects what weft printed until it exits.
    /// Panics with weft's stderr if it has not exited within a minute, so
    /// that a hang fails its own test instead of the whole run's timeout.
    pub fn stop_with(self, signal: libc::c_int) -> Finished {
        self.signal(signal);
        self.wait()
    }

    /// Collects what weft printed until it exits by itself (`--duration`),
    /// or panics with weft's stderr after a minute.
    pub fn wait(mut self) -> Finished {
        const GRACE: Duration = Duration::from_secs(60);
        let mut pipe = self.child.stdout.take().expect("stdout piped");
        let reader = thread::spawn(move || {
            let mut stdout = String::new();
            pipe.read_to_string(&mut stdout).map(|_| stdout)
        });
        let Some(status) = wait_within(&mut self.child, GRACE) else {
            thread::sleep(Duration::from_millis(50));
            let stderr: Vec<String> = self.stderr.try_iter().collect();
            panic!(
                "weft did not exit within {GRACE:?}; its stderr:\n{}",
                stderr.join("\n")
            );
        };
        let stdout = reader
            .join()
            .expect("the reader does not panic")
            .expect("read weft stdout");
        // The reader thread ends with the pipe; give it a moment to drain.
        thread::sleep(Duration::from_millis(50));
        let stderr: Vec<String> = self.stderr.try_iter().collect();
        Finished {
            status,
            stdout,
            stderr: stderr.join("\n"),
        }
    }

    /// Sends SIGINT, as Ctrl-C does.
    pub fn stop(self) -> Finished {
        self.stop_with(libc::SIGINT)
    }
}

impl Drop for Running {
    /// A test that fails while weft runs must not leave it tracing.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a finished `weft stat --json` printed.
pub struct StatOutput {
    pub status: ExitStatus,
    pub stderr: String,
    /// The final `"kind": "total"` object.
    pub total: serde_json::Value,
}

impl StatOutput {
    /// The count recorded for `syscall`, 0 if absent.
    pub fn count(&self, syscall: &str) -> u64 {
        self.row(syscall)
            .map_or(0, |row| row["count"].as_u64().expect("count"))
    }

    /// The row for `syscall`.
    pub fn row(&self, syscall: &str) -> Option<&serde_json::Value> {
        self.total["syscalls"]
            .as_array()
            .expect("syscalls array")
            .iter()
            .find(|row| row["name"] == syscall)
    }

    /// A top-level counter of the total object.
    pub fn counter(&self, name: &str) -> u64 {
        self.total[name]
            .as_u64()
            .unwrap_or_else(|| panic!("no counter {name}"))
    }
}

/// A running `weft stat --json`, attached and ready.
pub struct Stat(Running);

impl Stat {
    /// Starts `weft stat --json ARGS` and waits until it has attached.
    pub fn start(args: &[&str]) -> Self {
        let mut all = vec!["stat", "--json"];
        all.extend_from_slice(args);
        Self(Running::start(&all, "weft: tracing"))
    }

    /// Sends SIGINT (as Ctrl-C does) and parses the final JSON object.
    pub fn stop(self) -> StatOutput {
        let Finished {
            status,
            stdout,
            stderr,
        } = self.0.stop();
        let total = stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find(|object| object["kind"] == "total")
            .unwrap_or_else(|| panic!("no total object in weft output:\n{stdout}\n{stderr}"));
        StatOutput {
            status,
            stderr,
            total,
        }
    }
}

/// `run` applied to each of `items` by `workers` threads, each taking the
/// next item as it finishes one; the answers in the items' order. For
/// tests that compare weft with bpftrace case by case: under TCG a guest
/// spends most of such a test in bpftrace compiling each case on one CPU,
/// and it has two; and one slow case (a wildcard over hundreds of
/// tracepoints takes seconds to detach) no longer holds up the rest.
pub fn at_once<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    run: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let take = || next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut answers: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..workers.clamp(1, items.len().max(1)))
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    let mut i = take();
                    while let Some(item) = items.get(i) {
                        done.push((i, run(item)));
                        i = take();
                    }
                    done
                })
            })
            .collect();
        (workers.into_iter())
            .flat_map(|worker| worker.join().expect("a case panicked"))
            .collect()
    });
    answers.sort_unstable_by_key(|(i, _)| *i);
    answers.into_iter().map(|(_, answer)| answer).collect()
}

/// Runs `weft ARGS` to completion; returns (status, stdout, stderr).
pub fn run_weft(args: &[&str]) -> (ExitStatus, String, String) {
    let out = Command::new(weft_bin())
        .args(args)
        .output()
        .expect("run weft");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `weft query --json DIR QUERY`: the rows as JSON objects; panics with
/// weft's message when the query fails.
pub fn query_rows(dir: &std::path::Path, text: &str) -> Vec<serde_json::Value> {
    let (status, stdout, stderr) =
        run_weft(&["query", "--json", dir.to_str().expect("utf-8 path"), text]);
    assert!(status.success(), "{text}: {stderr}");
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
        .collect()
}

/// A fresh path for a capture directory named after the test, removed
/// (with the files beside it that share its name) when the test ends.
pub fn capture_dir(name: &str) -> CaptureDir {
    let dir = std::env::temp_dir().join(format!("weft-record-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    CaptureDir(dir)
}

/// See [`capture_dir`].
pub struct CaptureDir(PathBuf);

impl std::ops::Deref for CaptureDir {
    type Target = std::path::Path;

    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for CaptureDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for CaptureDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // Files named after it: `DIR.before`, `DIR.parquet`, ...
        let (Some(parent), Some(name)) = (self.0.parent(), self.0.file_name()) else {
            return;
        };
        let prefix = format!("{}.", name.to_string_lossy());
        for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// Records `steps` of a fresh `weft-workload` (at `workload_bin`), filtered
/// to its pid, into `dir`; returns weft's stderr.
pub fn record(workload_bin: &str, dir: &std::path::Path, steps: &[&str], extra: &[&str]) -> String {
    let workload = Workload::spawn(workload_bin, steps);
    let pid = workload.pid().to_string();
    let dir_arg = dir.to_str().expect("utf-8 temp path");
    let mut args = vec!["record", "-o", dir_arg, "--pid", &pid];
    args.extend_from_slice(extra);
    let running = Running::start(&args, "weft: recording");
    workload.run_to_end();
    let finished = running.stop();
    assert!(
        finished.status.success(),
        "weft record failed: {}",
        finished.stderr
    );
    finished.stderr
}

/// A directory on a disk (the VMs' scratch disk, else /var/tmp), or
/// `None` where it is in memory and pages never leave the cache.
pub fn disk_dir(test: &str) -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("WEFT_TEST_DISK").map_or_else(
        || std::path::PathBuf::from("/var/tmp"),
        std::path::PathBuf::from,
    );
    if in_memory(&dir) {
        eprintln!("skipping {test}: {} is in memory", dir.display());
        return None;
    }
    Some(dir)
}

/// Whether `dir` is on tmpfs or ramfs, whose pages the cache never drops.
pub fn in_memory(dir: &std::path::Path) -> bool {
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

/// A loop device over a fresh file, detached and removed on drop.
pub struct LoopDevice {
    device: std::fs::File,
    /// Its node, `/dev/loopN`.
    pub path: String,
    backing: std::path::PathBuf,
    /// The kernel's `dev_t`: major << 20 | minor.
    pub dev: u32,
}

impl LoopDevice {
    /// A loop device over a new file of `bytes`, or why there is none.
    pub fn new(bytes: u64) -> Result<Self, String> {
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
        // The VMs' scratch disk, else /var/tmp, else the temporary directory.
        let dir = std::env::var_os("WEFT_TEST_DISK")
            .map(std::path::PathBuf::from)
            .or_else(|| Some(std::path::PathBuf::from("/var/tmp")).filter(|d| d.is_dir()))
            .unwrap_or_else(std::env::temp_dir);
        let backing = dir.join(format!("weft-loop-{}", std::process::id()));
        // Opened to read as well: the loop device reads through this file,
        // and 6.1 fails those reads on a write-only one with EIO.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&backing)
            .map_err(|e| format!("{}: {e}", backing.display()))?;
        std::io::Write::write_all(&mut &file, &vec![0x5a; usize::try_from(bytes).unwrap()])
            .map_err(|e| e.to_string())?;
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
        // The scaffolding must work before weft is judged on it.
        let mut first = [0u8; 4096];
        if let Err(error) = std::os::unix::fs::FileExt::read_at(&device, &mut first, 0) {
            // SAFETY: a valid fd; the ioctl takes no argument.
            unsafe { libc::ioctl(device.as_raw_fd(), 0x4C01) };
            let _ = std::fs::remove_file(&backing);
            return Err(format!("{path} cannot be read here: {error}"));
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

/// The durations of the syscalls `condition` selects in each capture of
/// `dirs`, through `weft export --format jsonl`, ascending: what a fleet
/// query's percentiles are checked against.
pub fn exported_durations(dirs: &[&std::path::Path], condition: &str) -> Vec<i64> {
    let mut durations = Vec::new();
    for dir in dirs {
        let (status, stdout, stderr) = run_weft(&[
            "export",
            dir.to_str().expect("utf-8 temp path"),
            "--format",
            "jsonl",
            "-o",
            "-",
            "--where",
            condition,
        ]);
        assert!(status.success(), "{stderr}");
        durations.extend(stdout.lines().map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("a JSON line")["dur"]
                .as_i64()
                .expect("a duration")
        }));
    }
    durations.sort_unstable();
    durations
}

/// Where the cgroup2 hierarchy is mounted, if it is.
pub fn cgroup2_root() -> Option<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").expect("/proc/mounts");
    mounts.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(2) == Some(&"cgroup2")).then(|| std::path::PathBuf::from(fields[1]))
    })
}

/// A new cgroup v2 directory, under the machine's cgroup2 mount or one
/// made for the test; removed (and unmounted) on drop.
pub struct Cgroup {
    pub dir: std::path::PathBuf,
    mounted: Option<std::path::PathBuf>,
}

impl Cgroup {
    /// `None` (saying why, as a skip) where the kernel has no cgroup v2.
    pub fn create(test: &str) -> Option<Self> {
        let (root, mounted) = if let Some(root) = cgroup2_root() {
            (root, None)
        } else {
            let root = std::env::temp_dir().join(format!("weft-cgroup2-{}", std::process::id()));
            std::fs::create_dir_all(&root).expect("make a mount point");
            let status = Command::new("mount")
                .args(["-t", "cgroup2", "none"])
                .arg(&root)
                .status()
                .expect("run mount");
            if !status.success() {
                let _ = std::fs::remove_dir(&root);
                eprintln!("skipping {test}: needs cgroup v2 (mount -t cgroup2: {status})");
                return None;
            }
            (root.clone(), Some(root))
        };
        let dir = root.join(format!("weft-test-{}-{test}", std::process::id()));
        std::fs::create_dir(&dir).expect("make a cgroup");
        Some(Self { dir, mounted })
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Its processes have exited; a cgroup without any is removed so.
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(root) = &self.mounted {
            let _ = Command::new("umount").arg(root).status();
            let _ = std::fs::remove_dir(root);
        }
    }
}

/// A network namespace with a veth pair: `weft0` (10.77.0.1) here,
/// `weft1` (10.77.0.2) inside. Removed on drop.
pub struct Veth {
    namespace: String,
}

impl Veth {
    pub const HOST: &str = "10.77.0.1";
    pub const PEER: &str = "10.77.0.2";

    pub fn new() -> Result<Self, String> {
        let namespace = format!("weft-test-{}", std::process::id());
        let veth = Self { namespace };
        let ns = veth.namespace.as_str();
        for args in [
            vec!["netns", "add", ns],
            vec![
                "link", "add", "weft0", "type", "veth", "peer", "name", "weft1",
            ],
            vec!["link", "set", "weft1", "netns", ns],
            vec!["addr", "add", "10.77.0.1/24", "dev", "weft0"],
            vec!["link", "set", "weft0", "up"],
            vec!["-n", ns, "addr", "add", "10.77.0.2/24", "dev", "weft1"],
            vec!["-n", ns, "link", "set", "weft1", "up"],
        ] {
            let output = std::process::Command::new("ip")
                .args(&args)
                .output()
                .map_err(|e| format!("ip: {e}"))?;
            if !output.status.success() {
                return Err(format!(
                    "ip {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
            }
        }
        Ok(veth)
    }

    /// Runs `f` on a thread inside the namespace.
    pub fn spawn_inside<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let path = format!("/run/netns/{}", self.namespace);
        std::thread::spawn(move || {
            use std::os::fd::AsRawFd as _;
            let ns = std::fs::File::open(&path).expect("namespace file");
            // SAFETY: a valid namespace fd; only this thread moves.
            assert_eq!(
                unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) },
                0
            );
            f()
        })
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        // Deleting the namespace deletes weft1 and with it weft0.
        let _ = std::process::Command::new("ip")
            .args(["netns", "delete", &self.namespace])
            .output();
    }
}

/// Whether TC programs can attach: TCX links (6.6 on), or a `clsact` qdisc
/// in the kernel (built in or loaded; a VM without modules may lack it).
pub fn tc_available() -> bool {
    kernel_at_least(6, 6)
        || std::fs::read_to_string("/proc/kallsyms").is_ok_and(|symbols| symbols.contains("clsact"))
}

#[cfg(test)]
mod tests {
    use super::kernel_version;

    #[test]
    fn kernel_version_reads_major_minor() {
        assert_eq!(kernel_version("6.1.0-56-cloud-amd64"), (6, 1));
        assert_eq!(kernel_version("6.12.117+deb12-cloud-amd64"), (6, 12));
        assert_eq!(kernel_version("5.10.0"), (5, 10));
        assert!(kernel_version("5.10.0") < (5, 11));
    }
}
