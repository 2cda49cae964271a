//! `-c COMMAND` and `-- PROGRAM ARGS` of `weft stat` and `weft record`, as
//! strace, perf and bpftrace take them: weft starts the command and traces
//! it and every process it starts, until it exits.
//!
//! The command runs in a cgroup of its own, made for it under the cgroup2
//! root (`weft-PID`), which the probes filter on in the kernel: a child it
//! forks is in that cgroup from its first instruction, with nothing to
//! follow by hand. The command is forked stopped, moved in, and let run
//! only once the probes are attached, so none of its calls goes untraced.

use std::{
    os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _},
    path::PathBuf,
    sync::Arc,
    thread::JoinHandle,
    time::Duration,
};

use crate::error::{Context as _, Result};
use tokio::sync::Notify;

use crate::oneliner::process::HeldChild;

/// A command started and held until the probes are attached.
pub struct Command {
    child: HeldChild,
    cgroup: Cgroup,
}

impl Command {
    /// Starts `words` (the program, then its arguments), stopped, in a new
    /// cgroup; with `quiet`, off the terminal (the UI's: stdin from
    /// `/dev/null`, stdout to weft's stderr, which the UI logs).
    pub fn spawn(words: &[String], quiet: bool) -> Result<Self> {
        let cgroup = Cgroup::create()?;
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let child = HeldChild::spawn_words(&words, quiet)?;
        cgroup.add(child.id())?;
        Ok(Self { child, cgroup })
    }

    /// The cgroup v2 id the probes filter on.
    pub fn cgroup_id(&self) -> u64 {
        self.cgroup.id
    }

    /// Lets the command run; `ended` is notified when it exits.
    pub fn run(self, ended: Arc<Notify>) -> Running {
        let Self { mut child, cgroup } = self;
        let pid = child.id();
        child.release();
        let waiter = std::thread::spawn(move || {
            child.wait();
            ended.notify_one();
            child
        });
        Running {
            pid,
            waiter: Some(waiter),
            cgroup,
        }
    }
}

/// A command running; dropping it kills it, and every process it started,
/// if it still runs (tracing stopped first: the duration, Ctrl-C), then
/// removes its cgroup.
pub struct Running {
    pid: u32,
    waiter: Option<JoinHandle<HeldChild>>,
    cgroup: Cgroup,
}

impl Drop for Running {
    fn drop(&mut self) {
        let Some(waiter) = self.waiter.take() else {
            return;
        };
        if !waiter.is_finished() {
            // The whole tree weft started, where the kernel can (5.14 on).
            self.cgroup.kill();
            // SAFETY: signals our own child, which the waiter has not reaped.
            unsafe { libc::kill(self.pid.cast_signed(), libc::SIGKILL) };
        }
        // The child, reaped; then the cgroup goes (a field dropped after).
        let _ = waiter.join();
    }
}

/// The command's own cgroup, removed on drop.
struct Cgroup {
    dir: PathBuf,
    id: u64,
}

impl Cgroup {
    /// A new cgroup under the cgroup2 root, which only root may write.
    fn create() -> Result<Self> {
        let root = weft_oneliner::run::cgroups::cgroup2_root().context(
            "-c needs the cgroup2 file system mounted (it follows the command's children by their cgroup)",
        )?;
        let dir = root.join(format!("weft-{}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&dir)
            .with_context(|| format!("-c: failed to make the cgroup {}", dir.display()))?;
        let id = std::fs::symlink_metadata(&dir)
            .with_context(|| format!("-c: {}", dir.display()))?
            .ino();
        Ok(Self { dir, id })
    }

    /// Kills every process in it (`cgroup.kill`; absent before Linux
    /// 5.14, where only the command itself is killed).
    fn kill(&self) {
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(self.dir.join("cgroup.kill"))
            .and_then(|mut file| std::io::Write::write_all(&mut file, b"1"));
    }

    /// Moves process `pid` in.
    fn add(&self, pid: u32) -> Result<()> {
        let procs = self.dir.join("cgroup.procs");
        let write = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&procs)
            .and_then(|mut file| std::io::Write::write_all(&mut file, pid.to_string().as_bytes()));
        write.with_context(|| format!("-c: failed to move the command into {}", procs.display()))
    }
}

impl Drop for Cgroup {
    /// Removes the cgroup once empty: the kernel frees it a moment after
    /// its last process is reaped. Processes the command left running
    /// keep it, and weft says so.
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        log::warn!(
            "weft: processes the command started still run in {}; it is left in place",
            self.dir.display()
        );
    }
}
