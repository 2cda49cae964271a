//! `cargo xtask vm-test`: weft's root integration tests inside VMs booting
//! other kernels. Debian's cloud kernels are fetched with `apt-get download`
//! and unpacked (never installed) under `target/vm/`; one initramfs holds
//! busybox, a small init, weft, the test binaries and the shared libraries
//! they need, at the same absolute paths as on the host (the tests find
//! their helpers through paths compiled in). qemu boots each kernel with the
//! serial console captured; a guest that does not finish in time is killed
//! and reported as a timeout.

use std::{
    fmt::Write as _,
    fs,
    io::Read as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

use crate::{
    exec::{exec, output, workspace_root},
    run::build_weft_release,
    setup,
};

#[derive(clap::Args)]
pub struct Options {
    /// Kernel series to boot (Debian cloud kernels): e.g. 6.1 6.12.
    #[arg(long, num_args = 1.., default_values_t = ["6.1".to_owned(), "6.12".to_owned()])]
    pub kernel: Vec<String>,
    /// Only tests whose names contain one of these (comma-separated).
    #[arg(long)]
    pub filter: Option<String>,
    /// Seconds a guest may run before it is killed and reported as a timeout.
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// `kvm` when it works on this host (probed), else `tcg`; or force one.
    #[arg(long, default_value = "auto")]
    pub accel: String,
}

/// One kernel's outcome.
struct Verdict {
    kernel: String,
    passed: Vec<String>,
    failed: Vec<String>,
    /// Tests that skipped, each with the reason it printed.
    skipped: Vec<(String, String)>,
    timed_out: bool,
    seconds: f64,
    /// Each finished test's seconds, as `--report-time` printed them.
    times: Vec<(f64, String)>,
}

pub fn run(options: &Options) -> Result<()> {
    setup::run()?;
    setup::install_packages(&[
        "qemu-system-x86",
        "busybox-static",
        "e2fsprogs",
        "xz-utils",
        "iproute2",
    ])?;
    let dir = workspace_root().join("target/vm");
    fs::create_dir_all(&dir)?;
    let kernels = options
        .kernel
        .iter()
        .map(|series| fetch_kernel(&dir, series))
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<&str> = kernels.iter().map(|(name, _)| name.as_str()).collect();
    let initrd = build_initramfs(&dir, &names)?;
    let accel = match options.accel.as_str() {
        "auto" => probe_accel(&kernels[0].1, &initrd),
        other => other.to_owned(),
    };
    println!("vm-test: qemu with -accel {accel}");
    // The guests run at once, one vCPU each (see `qemu`): one after the
    // other, two vCPUs each kept about one host core busy (a test mostly
    // runs one thing at a time) and left a core idle for a quarter of the
    // whole suite.
    let verdicts = std::thread::scope(|scope| {
        let guests: Vec<_> = kernels
            .iter()
            .map(|(name, vmlinuz)| {
                let (initrd, accel) = (&initrd, &accel);
                scope.spawn(move || boot(name, vmlinuz, initrd, accel, options))
            })
            .collect();
        guests
            .into_iter()
            .map(|guest| guest.join().expect("a guest's thread panicked"))
            .collect::<Result<Vec<_>>>()
    })?;
    check_timeout(&kernels[0].1, &initrd, &accel)?;
    print_summary(&verdicts);
    if verdicts.iter().any(|v| v.outcome() != "ok") {
        bail!("kernel tests failed in a VM (see target/vm/*.log)");
    }
    Ok(())
}

/// The newest Debian cloud kernel of `series` (e.g. `6.1`), downloaded and
/// unpacked once: its name and its `vmlinuz`.
fn fetch_kernel(dir: &Path, series: &str) -> Result<(String, PathBuf)> {
    let pattern = format!(
        "^linux-image-{}[.][0-9][^ ]*-cloud-amd64-unsigned$",
        series.replace('.', "[.]")
    );
    let search = || output(Command::new("apt-cache").args(["search", "--names-only", &pattern]));
    let mut found = search()?;
    if found.trim().is_empty() {
        // A machine whose packages were all there may never have fetched lists.
        exec(setup::privileged("apt-get").args(["update", "-qq"]))?;
        found = search()?;
    }
    let mut packages: Vec<&str> = found
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    packages.sort_by_key(|p| version_key(p));
    let package = packages.last().with_context(|| {
        format!("no Debian cloud kernel package for {series} (apt-get update?)")
    })?;
    let name = package
        .trim_start_matches("linux-image-")
        .trim_end_matches("-unsigned")
        .to_owned();
    let root = dir.join("kernels").join(&name);
    let vmlinuz = root.join(format!("boot/vmlinuz-{name}"));
    if !vmlinuz.exists() {
        let download = dir.join("kernels");
        fs::create_dir_all(&download)?;
        println!("vm-test: fetching {package}");
        exec(
            Command::new("apt-get")
                .args(["-qq", "-o", "APT::Sandbox::User=root", "download", package])
                .current_dir(&download),
        )?;
        let deb = fs::read_dir(&download)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| {
                p.extension().is_some_and(|e| e == "deb")
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&format!("{package}_")))
            })
            .context("apt-get download left no .deb")?;
        exec(Command::new("dpkg").arg("-x").arg(&deb).arg(&root))?;
        fs::remove_file(&deb)?;
    }
    let config = fs::read_to_string(root.join(format!("boot/config-{name}"))).unwrap_or_default();
    let has = |option: &str| config.lines().any(|l| l == format!("{option}=y"));
    println!(
        "vm-test: {name}: BTF {}, kprobes {}, BPF syscall {}",
        has("CONFIG_DEBUG_INFO_BTF"),
        has("CONFIG_KPROBES"),
        has("CONFIG_BPF_SYSCALL")
    );
    Ok((name, vmlinuz))
}

impl Verdict {
    /// `ok`, `timeout` or `FAILED`; a run where nothing passed failed, so
    /// that a kernel on which everything skipped never looks green.
    fn outcome(&self) -> &'static str {
        if self.timed_out {
            "timeout"
        } else if self.failed.is_empty() && !self.passed.is_empty() {
            "ok"
        } else {
            "FAILED"
        }
    }
}

/// Sorts `linux-image-6.1.0-56-...` by its numbers.
fn version_key(package: &str) -> Vec<u64> {
    package
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The initramfs: busybox, the init, weft and the integration tests with
/// their helpers, bpftrace and its tools, all with their shared libraries
/// at their host paths, and each kernel's modules the tests need.
fn build_initramfs(dir: &Path, kernels: &[&str]) -> Result<PathBuf> {
    let weft = PathBuf::from(build_weft_release()?);
    let tests = integration_binaries()?;
    let root = dir.join("root");
    let _ = fs::remove_dir_all(&root);
    for sub in ["bin", "proc", "sys", "dev", "tmp", "run"] {
        fs::create_dir_all(root.join(sub))?;
    }
    copy_into(&root, Path::new("/bin/busybox"))?;
    // iproute2's `ip` (busybox's has no `netns`) and `tc` for the veth
    // tests, in /bin, where `busybox --install` leaves them alone.
    let mut iproute2 = Vec::new();
    for tool in ["ip", "tc"] {
        let path =
            fs::canonicalize(Path::new("/sbin").join(tool)).context("iproute2 is missing")?;
        fs::copy(&path, root.join("bin").join(tool))
            .with_context(|| format!("failed to copy {}", path.display()))?;
        iproute2.push(path);
    }
    let mut binaries = vec![weft.clone()];
    binaries.extend(tests.iter().cloned());
    for binary in &binaries {
        copy_stripped(&root, binary)?;
    }
    let bpftrace = bpftrace_into(&root)?;
    copy_into(&root, &bpftrace)?;
    binaries.push(bpftrace);
    for binary in binaries.iter().chain(&iproute2) {
        for library in shared_libraries(binary)? {
            copy_into(&root, &library)?;
        }
    }
    for kernel in kernels {
        copy_modules(dir, &root, kernel)?;
    }
    let skips: Vec<String> = HOST_ONLY.iter().map(|m| format!("--skip {m}")).collect();
    let init = INIT
        .replace("@WEFT@", &weft.display().to_string())
        .replace("@TESTS@", &tests[0].display().to_string())
        .replace("@SKIPS@", &skips.join(" "));
    fs::write(root.join("init"), init)?;
    exec(Command::new("chmod").arg("755").arg(root.join("init")))?;
    let initrd = dir.join("initrd.gz");
    let script = format!(
        "cd {} && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1 > {}",
        root.display(),
        initrd.display()
    );
    exec(Command::new("sh").args(["-c", &script]))?;
    Ok(initrd)
}

/// bpftrace, its bundled tools and the libc headers those tools include
/// (`<sys/socket.h>` under BTF), for the tests that compare weft with
/// bpftrace in the guest; returns bpftrace's path, whose shared libraries
/// the caller copies.
fn bpftrace_into(root: &Path) -> Result<PathBuf> {
    let bpftrace = fs::canonicalize("/usr/bin/bpftrace")
        .context("bpftrace is missing (cargo xtask setup installs it)")?;
    for entry in fs::read_dir("/usr/sbin")? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "bt") {
            copy_into(root, &path)?;
        }
    }
    // The headers `<sys/socket.h>` pulls in, as the C compiler lists them.
    let listing =
        output(Command::new("sh").args(["-c", "echo '#include <sys/socket.h>' | cc -M -x c -"]))?;
    for header in listing
        .split_whitespace()
        .filter(|w| w.starts_with("/usr/include/"))
    {
        copy_into(root, Path::new(header))?;
    }
    Ok(bpftrace)
}

/// Modules the tests need that Debian's kernels build as modules: the
/// `clsact` qdisc and the BPF classifier (TC before TCX, kernel 6.6), veth
/// pairs, loop
/// devices, and virtio block devices (the scratch disk) with what they
/// need. Those a kernel builds in are simply absent.
const MODULES: [&str; 10] = [
    "net/sched/sch_ingress",
    "net/sched/cls_bpf",
    "drivers/net/veth",
    "drivers/block/loop",
    "drivers/virtio/virtio_ring",
    "drivers/virtio/virtio",
    "drivers/virtio/virtio_pci_modern_dev",
    "drivers/virtio/virtio_pci_legacy_dev",
    "drivers/virtio/virtio_pci",
    "drivers/block/virtio_blk",
];

/// Copies (uncompressed) `MODULES` of `kernel` into the initramfs at
/// `/lib/modules/KERNEL/`, where the init loads them.
fn copy_modules(dir: &Path, root: &Path, kernel: &str) -> Result<()> {
    let from = dir
        .join("kernels")
        .join(kernel)
        .join("lib/modules")
        .join(kernel)
        .join("kernel");
    let to = root.join("lib/modules").join(kernel);
    fs::create_dir_all(&to)?;
    for module in MODULES {
        let name = Path::new(module).file_name().context("module name")?;
        let target = to.join(name).with_extension("ko");
        let plain = from.join(format!("{module}.ko"));
        let packed = from.join(format!("{module}.ko.xz"));
        if plain.exists() {
            fs::copy(&plain, &target)?;
        } else if packed.exists() {
            let bytes = Command::new("xz").arg("-dc").arg(&packed).output()?.stdout;
            fs::write(&target, bytes)?;
        }
    }
    Ok(())
}

/// The integration test modules that do not depend on the running kernel
/// (see `tests/tests/main.rs`): Intel PT decoded from recorded traces,
/// damaged captures, queries and exports of what a recording holds, and
/// bad command lines. The host runs them; the guests, there to try other
/// kernels, skip them. Under TCG a guest runs CPU-bound work many times
/// slower, and decoding and exporting are nothing else. So too the
/// one-liner tests of the language alone: programs that need no event,
/// map limits, `cat()`, and programs played over a capture (the recording
/// they play is the record tests' to try on each kernel).
const HOST_ONLY: &[&str] = &[
    "pt::",
    "faults::",
    "query::",
    "errors::",
    "fleet::",
    "trace::begin_programs_print_what_bpftrace_prints",
    "trace::a_full_map_drops_new_keys_as_bpftrace_s_does",
    "trace::cat_reads_a_bounded_part_and_never_waits",
    "trace::a_program_over_a_capture_prints_the_maps_it_printed_live",
    // Reading DWARF, and the guests carry no compiler.
    "trace::uprobe_arguments_by_name_from_dwarf_as_bpftrace_reads_them",
    // The guests' scratch disk writes into the host's page cache: an fsync
    // there spends its time on the CPU (58 % of it on 6.1), so the test's
    // cause, waiting for the disk, is not there to find.
    "explain::explain_ranks_an_fsync_behind_a_large_write_as_block_io",
    // The same disk: a cold read is served from the host's cache through an
    // emulated device, and spends 90 % of its time on the CPU (6.1 under
    // TCG, a CI run); the misses it waits on are a few points either way.
    "explain::explain_ranks_a_cold_file_as_page_cache_misses",
];

/// The guest's init: mount what weft needs, run the tests (filtered by
/// `weft.filter=a,b` on the kernel command line; `--show-output` so that
/// the tests' own "skipping NAME: reason" lines reach the log), print one
/// verdict line. `weft.hang` makes it hang, to check the timeout.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# /tmp stays the initramfs's own (writable): the binaries may live under it.
mount -t tmpfs run /run
# A tmpfs at /var/tmp, where loop devices are backed when the scratch disk is missing.
mkdir -p /var/tmp && mount -t tmpfs tmp /var/tmp
mount -t tracefs tracefs /sys/kernel/tracing
mount -t bpf bpf /sys/fs/bpf
mkdir -p /sys/fs/cgroup && mount -t cgroup2 cgroup2 /sys/fs/cgroup
# busybox insmod does not resolve dependencies: a few rounds load them in order.
for round in 1 2 3; do
    for module in /lib/modules/$(uname -r)/*.ko; do insmod "$module" 2>/dev/null; done
done
ip link set lo up
# The scratch disk (ext4 on virtio): page-cache tests need a file system
# whose pages can leave the cache. Its driver may probe after insmod returns.
for i in 1 2 3 4 5; do [ -b /dev/vda ] && break; sleep 1; done
mkdir -p /mnt/disk && mount -t ext4 /dev/vda /mnt/disk && export WEFT_TEST_DISK=/mnt/disk
echo "weft-vm: kernel $(uname -r)"
if grep -q weft.probe /proc/cmdline; then echo "weft-vm: probe ok"; poweroff -f; fi
filters=$(sed -n 's/.*weft.filter=\([^ ]*\).*/\1/p' /proc/cmdline | tr ',' ' ')
export WEFT_BIN=@WEFT@
# Tests of millions of syscalls skip themselves here (TCG, a RAM disk).
export WEFT_VM=1
if grep -q weft.hang /proc/cmdline; then echo "weft-vm: hanging"; while :; do sleep 60; done; fi
if grep -q weft.resume /proc/cmdline; then
    # Booted again after TCG's race: the second disk names the tests that
    # finished; the rest run, each by its exact name.
    for i in 1 2 3 4 5; do [ -b /dev/vdb ] && break; sleep 1; done
    sed '/^$/d' /dev/vdb > /tmp/finished
    set -- --exact $(@TESTS@ --list --format terse $filters @SKIPS@ | sed -n 's/: test$//p' | grep -vxF -f /tmp/finished)
    filters=
    [ $# = 1 ] && { echo "weft-vm: verdict 0"; poweroff -f; }
fi
# Each test's time on its line (`ok <1.234s>`): libtest's, unstable, let through.
RUSTC_BOOTSTRAP=1 @TESTS@ --test-threads=1 --show-output -Z unstable-options --report-time $filters @SKIPS@ "$@"
echo "weft-vm: verdict $?"
poweroff -f
"#;

/// The integration test executable (first) and the helper binaries it runs.
fn integration_binaries() -> Result<Vec<PathBuf>> {
    let json = output(Command::new("cargo").current_dir(workspace_root()).args([
        "test",
        "--locked",
        "--release",
        "--package",
        "weft-tests",
        "--no-run",
        "--message-format=json",
    ]))?;
    let mut tests = None;
    let mut helpers = Vec::new();
    for line in json.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(path) = message["executable"].as_str() else {
            continue;
        };
        match message["target"]["kind"][0].as_str() {
            Some("test") if message["target"]["name"] == "integration" => {
                tests = Some(PathBuf::from(path));
            }
            // The release bins the tests name through CARGO_BIN_EXE_*.
            Some("bin") if !path.contains("/deps/") => helpers.push(PathBuf::from(path)),
            _ => {}
        }
    }
    let mut all = vec![tests.context("cargo built no integration test binary")?];
    all.extend(helpers);
    Ok(all)
}

/// The shared libraries `ldd` says `binary` loads.
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let listing = output(Command::new("ldd").arg(binary))?;
    Ok(listing
        .lines()
        .filter_map(|line| {
            line.split_whitespace()
                .find(|word| word.starts_with('/'))
                .map(PathBuf::from)
        })
        .collect())
}

/// `path`'s place under `root` (the same absolute path), its directory made.
fn place_in(root: &Path, path: &Path) -> Result<PathBuf> {
    let target = root.join(path.strip_prefix("/").unwrap_or(path));
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent)?;
    }
    Ok(target)
}

/// Copies `path` to the same absolute path under `root`.
fn copy_into(root: &Path, path: &Path) -> Result<()> {
    fs::copy(path, place_in(root, path)?)
        .with_context(|| format!("failed to copy {}", path.display()))?;
    Ok(())
}

/// Copies `path` as [`copy_into`] does, without its debug sections: the
/// guest unpacks every byte of the initramfs under TCG, and weft's and the
/// tests' DWARF (release builds keep line tables) was a third of it. The
/// symbol tables stay, for the tests that name the helpers' functions.
fn copy_stripped(root: &Path, path: &Path) -> Result<()> {
    exec(
        Command::new("strip")
            .args(["--strip-debug", "-o"])
            .arg(place_in(root, path)?)
            .arg(path),
    )
}

/// `kvm` if a guest boots under it within 60 s (on some hosts `/dev/kvm`
/// exists but guests die with an emulation failure), else `tcg`.
fn probe_accel(vmlinuz: &Path, initrd: &Path) -> String {
    if !Path::new("/dev/kvm").exists() {
        return "tcg".into();
    }
    let log = qemu(
        vmlinuz,
        initrd,
        "kvm",
        "weft.probe",
        Duration::from_secs(60),
        &[],
    );
    if log.is_ok_and(|(text, _)| text.contains("weft-vm: probe ok")) {
        "kvm".into()
    } else {
        "tcg".into()
    }
}

/// A fresh 64 MiB ext4 image next to the initramfs, for the guest's
/// `/mnt/disk`: one per qemu, as guests run at once.
fn scratch_disk(initrd: &Path) -> Result<PathBuf> {
    static DISKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = DISKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let disk = initrd.with_file_name(format!("disk-{n}.img"));
    let _ = fs::remove_file(&disk);
    fs::File::create(&disk)?.set_len(64 << 20)?;
    exec(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&disk))?;
    Ok(disk)
}

/// Runs qemu until the guest powers off or `timeout`; returns the serial
/// output and whether it finished in time.
fn qemu(
    vmlinuz: &Path,
    initrd: &Path,
    accel: &str,
    cmdline: &str,
    timeout: Duration,
    finished: &[&str],
) -> Result<(String, bool)> {
    let disk = scratch_disk(initrd)?;
    let mut command = Command::new("qemu-system-x86_64");
    command
        .arg("-drive")
        .arg(format!("file={},format=raw,if=virtio", disk.display()));
    // A guest booted again is told the tests already finished on a second
    // disk: the kernel's command line (2 KiB) cannot hold their names.
    let list = disk.with_extension("finished");
    let cmdline = if finished.is_empty() {
        cmdline.to_owned()
    } else {
        let mut names = finished.join("\n") + "\n";
        // A raw disk is whole sectors; blank lines pad it.
        names.extend(std::iter::repeat_n('\n', 511 - (names.len() + 511) % 512));
        fs::write(&list, names)?;
        command.arg("-drive").arg(format!(
            "file={},format=raw,if=virtio,readonly=on",
            list.display()
        ));
        format!("{cmdline} weft.resume")
    };
    let mut child = command
        .args([
            "-accel",
            accel,
            "-m",
            "3G",
            // One vCPU. With two, multi-threaded TCG raced with the guest
            // patching its own code (a static key or call flipped as a probe
            // attaches): one vCPU ran, or the kernel read back, a stale
            // `int3`, or spun on a patched jump, and the guest died, in most
            // runs on 6.12 and up to four times in one. One vCPU patches
            // only what it alone runs, and two one-vCPU guests fit two host
            // cores (each ran faster than with two vCPUs).
            "-smp",
            "1",
            "-nographic",
            "-no-reboot",
        ])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .args([
            "-append",
            // loglevel=2: kernel errors (a failing loop device) must not split
            // libtest's lines on the shared console; oopses still show.
            // An oops, a soft lockup or a task hung for two minutes panics
            // the guest, which then powers off (panic=-1, -no-reboot): a
            // task killed by an oops while holding a lock must not leave
            // the guest hanging until the timeout with nothing said. A soft
            // lockup is a CPU 2 x watchdog_thresh seconds in the kernel;
            // under TCG, which runs the guest many times slower, the default
            // 20 s was reached once, in a syscall entry while bpftrace's
            // tools ran on 6.1, in no run before or since that we saw; so
            // it is 60 s there, still far short of the run's timeout.
            &format!(
                "console=ttyS0 quiet loglevel=2 panic=-1 oops=panic softlockup_panic=1 hung_task_panic=1 {} {cmdline}",
                if accel == "tcg" { "watchdog_thresh=30" } else { "" }
            ),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("failed to start qemu-system-x86_64")?;
    let mut stdout = child.stdout.take().context("qemu stdout")?;
    let start = Instant::now();
    // When the serial console last said something, in ms since `start`.
    let said = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let reader = std::thread::spawn({
        let said = said.clone();
        move || {
            let (mut text, mut chunk) = (Vec::new(), [0u8; 4096]);
            while let Ok(n @ 1..) = stdout.read(&mut chunk) {
                text.extend_from_slice(&chunk[..n]);
                said.store(
                    start.elapsed().as_millis() as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
            String::from_utf8_lossy(&text).into_owned()
        }
    });
    let silent = || {
        let said = Duration::from_millis(said.load(std::sync::atomic::Ordering::Relaxed));
        start.elapsed().saturating_sub(said) > SILENCE
    };
    let mut hung = false;
    let finished = loop {
        if child.try_wait()?.is_some() {
            break true;
        }
        hung = silent();
        if start.elapsed() > timeout || hung {
            let _ = child.kill();
            let _ = child.wait();
            break false;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut text = reader.join().unwrap_or_default();
    let _ = fs::remove_file(&disk);
    let _ = fs::remove_file(&list);
    if hung {
        let _ = writeln!(text, "\n{HUNG} {} s", SILENCE.as_secs());
    }
    Ok((text, finished))
}

/// Longer than any test's own timeouts (a minute or two) leave the
/// console silent: a guest silent this long has stopped in its kernel.
const SILENCE: Duration = Duration::from_secs(300);

/// The kernel's words for a CPU stuck in the kernel past the watchdog.
const SOFT_LOCKUP: &str = "watchdog: BUG: soft lockup";

/// The line `qemu` adds to a log whose guest fell [`SILENCE`]-long silent.
const HUNG: &str = "vm-test: the guest's console was silent for";

/// A guest whose init hangs must be killed and reported, not hang us.
fn check_timeout(vmlinuz: &Path, initrd: &Path, accel: &str) -> Result<()> {
    let start = Instant::now();
    let (log, finished) = qemu(
        vmlinuz,
        initrd,
        accel,
        "weft.hang",
        Duration::from_secs(20),
        &[],
    )?;
    if finished || !log.contains("weft-vm: hanging") {
        bail!("a hanging guest was not reported as a timeout:\n{log}");
    }
    println!(
        "vm-test: a hanging guest was killed after {:.1}s and reported as a timeout",
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn boot(
    name: &str,
    vmlinuz: &Path,
    initrd: &Path,
    accel: &str,
    options: &Options,
) -> Result<Verdict> {
    println!("vm-test: booting {name}");
    let cmdline = options
        .filter
        .as_ref()
        .map_or_else(String::new, |f| format!("weft.filter={f}"));
    let path = workspace_root().join(format!("target/vm/{name}.log"));
    let start = Instant::now();
    let (mut log, mut finished) = qemu(
        vmlinuz,
        initrd,
        accel,
        &cmdline,
        Duration::from_secs(options.timeout),
        &[],
    )?;
    // The logs of the boots that died: their finished tests count.
    let mut earlier = String::new();
    let mut boots = 1;
    while accel.starts_with("tcg") && boots < BOOTS {
        let Some((why, lines)) = tcg_death(&log) else {
            break;
        };
        fs::write(path.with_extension("int3.log"), &log)?;
        // Each report is printed whole: the other guest prints too.
        let mut report = format!("vm-test: {name}: {why}\n");
        indented(&mut report, &lines);
        earlier.push_str(&log);
        earlier.push('\n');
        let done = finished_tests(&earlier);
        println!(
            "{report}vm-test: {name}: booting it again for the tests after the {} that finished",
            done.len()
        );
        boots += 1;
        (log, finished) = qemu(
            vmlinuz,
            initrd,
            accel,
            &cmdline,
            Duration::from_secs(options.timeout),
            &done,
        )?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let timed_out = !finished || !log.contains("weft-vm: verdict");
    let last = log;
    let log = earlier + &last;
    fs::write(&path, &log)?;
    let verdict = parse(name, &log, timed_out, seconds);
    // CI keeps stdout only, not target/vm: say there what went wrong, in
    // one piece, as the other guest prints too.
    let mut report = String::new();
    if verdict.timed_out {
        let _ = writeln!(
            report,
            "vm-test: {name}: no verdict ({}); the test under way was {}; the log ends:",
            if finished {
                "the guest stopped"
            } else {
                "killed at the timeout"
            },
            test_under_way(&last).unwrap_or("none")
        );
        let oops = oops(&last);
        indented(
            &mut report,
            &if oops.is_empty() {
                log_tail(&last, 40)
            } else {
                oops
            },
        );
    }
    for test in &verdict.failed {
        let _ = writeln!(report, "vm-test: {name}: FAILED {test}");
        indented(&mut report, &failure_output(&log, test));
    }
    print!("{report}");
    Ok(verdict)
}

/// How a TCG guest died of the emulator rather than of a test, said for
/// the console, with the lines of its log that show it; `None` for any
/// other end. Multi-threaded TCG races with a guest patching its own code
/// (a static key or static call flipped as a probe attaches or detaches):
/// a vCPU runs, or the kernel reads back, a stale `int3` and the guest
/// dies. One vCPU (see `qemu`) leaves no other CPU to race; the reboot
/// stays for a guest booted with more and for the silent and stuck guests
/// seen on 6.1.
fn tcg_death(log: &str) -> Option<(String, Vec<&str>)> {
    let under_way = test_under_way(log).unwrap_or("no test");
    if log.contains(HUNG) {
        // Seen once on 6.1, both vCPUs busy for 28 minutes during a test
        // whose every wait has its own timeout: the guest's kernel had
        // stopped, with no oops and no watchdog (TCG has no NMI watchdog
        // for a CPU spinning with interrupts off).
        let why = format!(
            "the guest said nothing for {} s while {under_way} ran; the log ends:",
            SILENCE.as_secs()
        );
        Some((why, log_tail(log, 10)))
    } else if log.contains(SOFT_LOCKUP) {
        // Seen on 6.1 while probes attached: weft's own `bpf()` call
        // spinning for 78 s on a jump in `syscall_trace_enter`, a site the
        // kernel patches as syscall tracepoints come and go. BPF programs
        // cannot loop; a vCPU running stale code can.
        let why = format!(
            "the guest's watchdog found a CPU stuck while {under_way} ran (TCG); the log ends:"
        );
        Some((why, log_tail(log, 25)))
    } else if died_patching_code(log) {
        let why = "the guest died patching its own code (a TCG race); the oops:";
        Some((why.to_owned(), oops(log)))
    } else {
        None
    }
}

/// `lines` into `report`, each indented under the line that explains them.
fn indented(report: &mut String, lines: &[&str]) {
    for line in lines {
        let _ = writeln!(report, "    {line}");
    }
}

/// Boots of a guest at most, while it dies of TCG (see the reboot loop in
/// `boot`): with two vCPUs and both guests at once, 6.12 died four times in
/// one run. A boot again runs only what was left.
const BOOTS: u32 = 5;

/// The oops of a CPU that ran an `int3` the kernel had already patched
/// away: `Oops: int3: 0000 [#1]` on newer kernels, `int3: 0000 [#1]` on 6.1.
const STALE_INT3: &str = "int3: 0000 [#";

/// Kernel functions that patch code: an oops whose trace passes through
/// one (6.1's static call check, `BUG()` on a stale `int3` it reads back,
/// is `invalid opcode` in `arch_static_call_transform`) died of TCG's race.
const PATCHING: [&str; 4] = [
    "arch_static_call_transform",
    "text_poke_bp",
    "arch_jump_label_transform",
    "smp_text_poke",
];

/// Whether the guest died of TCG's race with code patching.
fn died_patching_code(log: &str) -> bool {
    let oops = oops(log);
    log.contains(STALE_INT3)
        || oops
            .iter()
            .any(|line| PATCHING.iter().any(|f| line.contains(f)))
}

/// The kernel's first oops in the log, from a few lines before its
/// `[#1]` header (the message that led to it), at most 60 lines: CI keeps
/// stdout only, and a panic's last 40 lines lose its cause.
fn oops(log: &str) -> Vec<&str> {
    let lines: Vec<&str> = log.lines().map(str::trim_end).collect();
    let Some(header) = lines.iter().position(|line| line.contains(" [#1]")) else {
        return Vec::new();
    };
    lines[header.saturating_sub(4)..]
        .iter()
        .take(60)
        .copied()
        .collect()
}

/// A libtest line, `test PATH ... OUTCOME`: the path and the outcome, empty
/// while the test runs.
fn test_line(line: &str) -> Option<(&str, &str)> {
    let (test, outcome) = line.trim().strip_prefix("test ")?.split_once(" ...")?;
    Some((test, outcome.split_whitespace().next().unwrap_or_default()))
}

/// The seconds `--report-time` put on a finished test's line (`ok <1.234s>`).
fn test_seconds(line: &str) -> Option<f64> {
    let (_, time) = line.trim().rsplit_once('<')?;
    time.strip_suffix("s>")?.parse().ok()
}

/// The tests that finished (passed, failed or ignored) in `log`: a guest
/// booted again after TCG's race runs the others, not the whole suite.
fn finished_tests(log: &str) -> Vec<&str> {
    log.lines()
        .filter_map(test_line)
        .filter(|(_, outcome)| finished(outcome))
        .map(|(test, _)| test)
        .collect()
}

/// Whether a test's outcome says it finished.
fn finished(outcome: &str) -> bool {
    matches!(outcome, "ok" | "FAILED" | "ignored")
}

/// The test libtest had started and not finished when the log ends.
fn test_under_way(log: &str) -> Option<&str> {
    let (test, outcome) = log.lines().rev().find_map(test_line)?;
    (!finished(outcome)).then_some(test)
}

/// The last `count` lines of the serial log.
fn log_tail(log: &str, count: usize) -> Vec<&str> {
    let lines: Vec<&str> = log.lines().map(str::trim_end).collect();
    lines[lines.len().saturating_sub(count)..].to_vec()
}

/// The lines libtest printed for a failed test (`---- path::NAME stdout ----`
/// up to the next section), at most 80 of them.
fn failure_output<'a>(log: &'a str, test: &str) -> Vec<&'a str> {
    let header = format!("::{test} stdout ----");
    log.lines()
        .map(str::trim_end)
        .skip_while(|line| !(line.starts_with("---- ") && line.ends_with(&header)))
        .skip(1)
        .take_while(|line| !line.starts_with("---- ") && *line != "failures:")
        .take(80)
        .collect()
}

/// Reads libtest's lines (`test NAME ... ok|FAILED|ignored`) and the
/// tests' own `skipping NAME: reason` lines from the serial log.
fn parse(kernel: &str, log: &str, timed_out: bool, seconds: f64) -> Verdict {
    let mut verdict = Verdict {
        kernel: kernel.to_owned(),
        passed: Vec::new(),
        failed: Vec::new(),
        skipped: Vec::new(),
        timed_out,
        seconds,
        times: Vec::new(),
    };
    for line in log.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("skipping ") {
            if let Some((test, why)) = rest.split_once(':') {
                verdict
                    .skipped
                    .push((test.to_owned(), why.trim().to_owned()));
            }
            continue;
        }
        let Some((test, outcome)) = test_line(line) else {
            continue;
        };
        if let Some(seconds) = test_seconds(line) {
            verdict.times.push((seconds, test.to_owned()));
        }
        let test = test.rsplit("::").next().unwrap_or(test).to_owned();
        match outcome {
            "ok" => verdict.passed.push(test),
            "ignored" => verdict.skipped.push((test, "ignored".to_owned())),
            "FAILED" => verdict.failed.push(test),
            // Still running when the log ended (its line may end in the
            // kernel's dying words): the timeout reports it, or a boot
            // again runs it.
            _ => {}
        }
    }
    // A test that skipped itself also reports `ok`.
    verdict
        .passed
        .retain(|t| !verdict.skipped.iter().any(|(s, _)| s == t));
    verdict
}

fn print_summary(verdicts: &[Verdict]) {
    let mut table = format!(
        "{:<28} {:>7} {:>7} {:>8} {:>9}  verdict\n",
        "kernel", "passed", "failed", "skipped", "seconds"
    );
    for v in verdicts {
        let outcome = v.outcome();
        let _ = writeln!(
            table,
            "{:<28} {:>7} {:>7} {:>8} {:>9.1}  {outcome}",
            v.kernel,
            v.passed.len(),
            v.failed.len(),
            v.skipped.len(),
            v.seconds
        );
        for (test, why) in &v.skipped {
            let _ = writeln!(table, "    skipped {test}: {why}");
        }
        let mut slowest = v.times.clone();
        slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (seconds, test) in slowest.iter().take(12) {
            let _ = writeln!(table, "    {seconds:>7.1}s {test}");
        }
    }
    print!("{table}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_output_is_the_tests_own_section() {
        let log = "test a::x ... FAILED\r\n\r\nfailures:\r\n\r\n\
                   ---- a::x stdout ----\r\n\
                   thread 'x' panicked at t.rs:1:\r\n\
                   fired 2\r\n\
                   ---- a::y stdout ----\r\n\
                   other\r\n\r\nfailures:\r\n    a::x\r\n";
        assert_eq!(
            failure_output(log, "x"),
            ["thread 'x' panicked at t.rs:1:", "fired 2"]
        );
        assert_eq!(failure_output(log, "y"), ["other", ""]);
        assert!(failure_output(log, "z").is_empty());
    }

    #[test]
    fn the_test_under_way_is_the_last_one_started() {
        let log = "test a::x ... ok\r\ntest a::y ... \r\n[  9.1] int3: 0000 [#1] PREEMPT SMP\r\n";
        assert_eq!(test_under_way(log), Some("a::y"));
        assert!(log.contains(STALE_INT3));
        assert_eq!(test_under_way("test a::x ... ok\r\n"), None);
        assert_eq!(log_tail(log, 1), ["[  9.1] int3: 0000 [#1] PREEMPT SMP"]);
        assert!("Oops: int3: 0000 [#1] PREEMPT SMP NOPTI".contains(STALE_INT3));
    }

    #[test]
    fn a_guest_that_died_patching_code_is_told_from_other_deaths() {
        // 6.1's static call check reading back a stale int3 (from a CI log).
        let log = "test a::y ... \r\n\
                   [ 312.4] unexpected static_call insn opcode 0xcc at tp_func+0x0/0x8\r\n\
                   [ 312.4] invalid opcode: 0000 [#1] PREEMPT SMP NOPTI\r\n\
                   [ 312.4] RIP: 0010:__static_call_validate+0x50/0x60\r\n\
                   [ 312.4]  arch_static_call_transform+0x52/0xa0\r\n";
        assert!(died_patching_code(log));
        assert_eq!(oops(log).len(), 5);
        assert!(oops(log)[1].contains("0xcc"));
        let other = "[ 9.1] general protection fault: 0000 [#1] SMP\r\n\
                     [ 9.1]  bpf_prog_run+0x10/0x20\r\n";
        assert!(!died_patching_code(other));
        assert!(!died_patching_code("test a::x ... ok\r\n"));
    }

    #[test]
    fn a_test_the_guest_died_in_is_not_counted_failed() {
        let log = "test a::passed ... ok <1.000s>\r\n\
                   test a::dying ... [ 252.5] watchdog: BUG: soft lockup - CPU#1 stuck for 78s! [weft:1894]\r\n";
        let v = parse("6.1", log, true, 1.0);
        assert_eq!(v.passed, ["passed"]);
        assert!(v.failed.is_empty(), "{:?}", v.failed);
        assert_eq!(test_under_way(log), Some("a::dying"));
        assert!(log.contains(SOFT_LOCKUP));
    }

    #[test]
    fn a_guest_booted_again_skips_only_the_tests_that_finished() {
        let log = "test a::passed ... ok <1.000s>\r\n\
                   test a::failed ... FAILED <2.000s>\r\n\
                   test a::ignored ... ignored\r\n\
                   test a::dying ... [ 215.7] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\r\n";
        assert_eq!(
            finished_tests(log),
            ["a::passed", "a::failed", "a::ignored"]
        );
    }

    #[test]
    fn parse_counts_passes_failures_and_skips() {
        let log = "weft-vm: kernel 6.1\r\n\
                   test stat::exact ... ok <12.500s>\r\n\
                   skipping export_parquet_matches_duckdb: WEFT_PYTHON is not set\r\n\
                   test query::export_parquet_matches_duckdb ... ok <0.010s>\r\n\
                   test record::killed ... FAILED <3.000s>\r\n\
                   weft-vm: verdict 101\r\n";
        let v = parse("6.1", log, false, 1.0);
        assert_eq!(v.passed, ["exact"]);
        assert_eq!(v.failed, ["killed"]);
        assert_eq!(v.times[0], (12.5, "stat::exact".to_owned()));
        assert_eq!(v.times.len(), 3);
        assert_eq!(
            v.skipped,
            [(
                "export_parquet_matches_duckdb".to_owned(),
                "WEFT_PYTHON is not set".to_owned()
            )]
        );
    }

    #[test]
    fn version_key_orders_numerically() {
        let mut packages = [
            "linux-image-6.1.0-9-cloud-amd64-unsigned",
            "linux-image-6.1.0-56-cloud-amd64-unsigned",
            "linux-image-6.1.0-10-cloud-amd64-unsigned",
        ];
        packages.sort_by_key(|p| version_key(p));
        assert_eq!(packages[2], "linux-image-6.1.0-56-cloud-amd64-unsigned");
    }
}
