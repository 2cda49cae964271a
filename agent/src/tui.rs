//! `weft tui [DIR]`, and `weft` alone: the terminal UI (crate `weft-tui`)
//! on a live capture, recorded in-process by `record` on its own thread, or
//! on a recording. Both are a [`Feed`] to the UI.

use std::{
    fs,
    io::Write as _,
    os::{
        fd::{AsFd as _, AsRawFd as _, OwnedFd},
        unix::{ffi::OsStringExt as _, fs::OpenOptionsExt as _},
    },
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
};

use anyhow::{Context as _, Result, anyhow};
use weft_capture::feed::Ready;
use weft_capture::{
    feed::{CaptureFeed, LiveFeed},
    fleet_feed::FleetFeed,
    open::Capture,
    replay,
};
use weft_kernel::ebpf;
use weft_query::{feed::Feed, health::Health};
use weft_recording::{
    command::Command,
    record::{UiLink, ns},
};
use weft_store::Config;
use weft_tui::FrameTimes;

use crate::{cli::TuiArgs, pt_demand, record, resolve};

pub fn run(args: &TuiArgs) -> Result<ExitCode> {
    let feed: Arc<dyn Feed> = match &args.dir {
        Some(dir) => Arc::new(CaptureFeed::open(dir, args.skip_damaged)?),
        None if !args.fleet.is_empty() => {
            let dirs: Vec<&Path> = args.fleet.iter().map(PathBuf::as_path).collect();
            Arc::new(FleetFeed::open(&dirs, args.skip_damaged)?)
        }
        None => return live(args),
    };
    let frames = weft_tui::run(&feed).context("the terminal failed")?;
    report(args, &frames);
    Ok(ExitCode::SUCCESS)
}

/// Records (or replays a recording) on a thread of its own while the UI
/// runs on this one; that thread's messages go to a log shown after the
/// UI closes.
fn live(args: &TuiArgs) -> Result<ExitCode> {
    if args.replay.is_none() {
        ebpf::check_privileges()?;
    }
    let scratch = Scratch::new()?;
    let temporary = args.output.is_none();
    let dir = (args.output.clone()).unwrap_or_else(|| scratch.root.join("capture"));
    let log = Redirect::stderr(&scratch.root.join("stderr.log"))?;
    if args.replay.is_some() && (args.filter.command.is_some() || !args.filter.program.is_empty()) {
        anyhow::bail!("--replay plays a recording back: it runs no command (-c)");
    }
    // After the redirect: the command writes to the log, not the screen.
    let command = resolve::command(&args.filter, true)?;
    let (ready, reader) = mpsc::channel();
    let health = Arc::new(Mutex::new(Health::default()));
    let ended = Arc::new(AtomicBool::new(false));
    let Producer { name, run, stop } = match &args.replay {
        Some(from) => replayer(args, from, &dir, ready, &health),
        None => recorder(args, &dir, ready, &health, command),
    };
    let producer = {
        let ended = Arc::clone(&ended);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let result = run();
                ended.store(true, Ordering::Relaxed);
                result
            })
            .with_context(|| format!("failed to start {name}"))?
    };
    // Until the capture has begun there is nothing to show; a producer
    // that fails first drops the sender.
    let shown = reader.recv().map(|(reader, calls)| -> Result<_> {
        let feed: Arc<dyn Feed> = Arc::new(LiveFeed {
            reader,
            pt: calls.map(|calls| (calls, pt_demand::start as _)),
            capture: Capture::open(&dir)?,
            title: args.replay.as_ref().map_or_else(
                || "live".into(),
                |from| format!("replay of {} at {}x", from.display(), args.speed),
            ),
            health,
            ended,
        });
        weft_tui::run(&feed).context("the terminal failed")
    });
    stop();
    let outcome = producer
        .join()
        .unwrap_or_else(|_| Err(anyhow!("the capture thread panicked")));
    log.restore();
    let recorded = temporary && dir.exists();
    drop(scratch);
    if recorded {
        eprintln!("weft: the live capture was temporary and is gone (-o DIR keeps one)");
    }
    if let Ok(shown) = shown {
        report(args, &shown?);
    }
    outcome.map(|()| ExitCode::SUCCESS)
}

/// What fills a live capture on a thread of its own.
struct Producer {
    /// The thread's name.
    name: &'static str,
    run: Box<dyn FnOnce() -> Result<()> + Send>,
    /// Asks `run` to finish.
    stop: Box<dyn FnOnce()>,
}

/// `record` with the UI's sources and limits, into `dir`.
///
/// With `command`, recording ends when it exits; the UI stays, over what
/// was recorded.
fn recorder(
    args: &TuiArgs,
    dir: &Path,
    ready: Ready,
    health: &Arc<Mutex<Health>>,
    command: Option<Command>,
) -> Producer {
    let (sources, filter, capture) = (
        args.sources.clone(),
        args.filter.clone(),
        args.capture.clone(),
    );
    let (dir, disk, retain) = (dir.to_owned(), args.max_disk, args.retain);
    let summaries = args.retain_summaries;
    let stop = Arc::new(tokio::sync::Notify::new());
    let ui = UiLink {
        ready,
        health: Arc::clone(health),
        stop: Arc::clone(&stop),
    };
    Producer {
        name: "weft-record",
        run: Box::new(move || {
            let plan = record::plain(&sources, &filter, &capture, dir, command.as_ref())?;
            let report = weft_recording::record::record(
                &plan
                    .limited(Some(disk), Some(retain))
                    .keeping_summaries(Some(summaries)),
                Some(ui),
                command,
            )?;
            eprint!("{report}");
            Ok(())
        }),
        stop: Box::new(move || stop.notify_one()),
    }
}

/// `replay` of `from` into `dir`, with the UI's limits.
fn replayer(
    args: &TuiArgs,
    from: &Path,
    dir: &Path,
    ready: Ready,
    health: &Arc<Mutex<Health>>,
) -> Producer {
    let options = replay::Options {
        from: from.to_owned(),
        speed: args.speed,
        repeat: args.repeat,
        skip_damaged: args.skip_damaged,
    };
    let config = Config {
        disk_budget: Some(args.max_disk),
        retain: Some(ns(args.retain)),
        retain_summaries: Some(ns(args.retain_summaries)),
        ..Config::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let link = replay::Link {
        ready,
        health: Arc::clone(health),
        stop: Arc::clone(&stop),
    };
    let dir = dir.to_owned();
    Producer {
        name: "weft-replay",
        run: Box::new(move || Ok(replay::run(&options, &dir, &config, &link)?)),
        stop: Box::new(move || stop.store(true, Ordering::Relaxed)),
    }
}

/// The frame times, when asked for.
fn report(args: &TuiArgs, frames: &FrameTimes) {
    if args.frame_stats {
        eprintln!(
            "weft: {} frames drawn, median {:.1} ms, max {:.1} ms",
            frames.count,
            frames.median().as_secs_f64() * 1e3,
            frames.max.as_secs_f64() * 1e3
        );
    }
}

/// Prefix of the UI's scratch directories in the temporary directory,
/// followed by weft's pid and six random characters.
const SCRATCH_PREFIX: &str = "weft-live-";

/// The UI's scratch directory: its temporary capture and the log of the
/// recording thread. Made atomically under an unpredictable name
/// (`mkdtemp`, mode 0700), so no other user can claim or plant it; removed
/// when dropped: on `q`, on SIGINT, SIGTERM and SIGHUP (which end the
/// recording and so the UI) and on a panic (which unwinds). A weft killed
/// with SIGKILL leaves it; the next start removes those of dead wefts.
struct Scratch {
    root: PathBuf,
}

impl Scratch {
    fn new() -> Result<Self> {
        let temp = std::env::temp_dir();
        remove_stale(&temp);
        let template = temp.join(format!("{SCRATCH_PREFIX}{}-XXXXXX", std::process::id()));
        let mut bytes = template.into_os_string().into_vec();
        bytes.push(0);
        // SAFETY: `bytes` is a NUL-terminated template that mkdtemp fills
        // in place, within its length.
        let made = unsafe { libc::mkdtemp(bytes.as_mut_ptr().cast()) };
        if made.is_null() {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("failed to make a directory in {}", temp.display()));
        }
        bytes.pop();
        let root = PathBuf::from(std::ffi::OsString::from_vec(bytes));
        Ok(Self { root })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Best effort: `remove_dir_all` never follows a link.
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// Removes the scratch directories of wefts that are gone: named as
/// [`Scratch`] names them, real directories owned by this user, whose pid
/// is no running weft. Nothing else is touched.
fn remove_stale(temp: &Path) {
    use std::os::unix::fs::MetadataExt as _;
    // SAFETY: geteuid has no arguments and cannot fail.
    let user = unsafe { libc::geteuid() };
    for entry in fs::read_dir(temp).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = scratch_pid(&name.to_string_lossy()) else {
            continue;
        };
        let Ok(meta) = fs::symlink_metadata(entry.path()) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != user || weft_is_running(pid) {
            continue;
        }
        let _ = fs::remove_dir_all(entry.path());
    }
}

/// The pid in a scratch directory's name, `None` for any other name.
fn scratch_pid(name: &str) -> Option<u32> {
    let (pid, random) = name.strip_prefix(SCRATCH_PREFIX)?.split_once('-')?;
    (random.len() == 6 && random.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(())?;
    pid.parse().ok()
}

/// Whether `pid` is a running weft (a pid reused by another program is not).
fn weft_is_running(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim() == "weft")
}

/// Standard error sent to a file while the UI owns the terminal.
struct Redirect {
    saved: OwnedFd,
    path: PathBuf,
}

impl Redirect {
    fn stderr(path: &Path) -> Result<Self> {
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .with_context(|| format!("failed to create {}", path.display()))?;
        let saved = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .context("failed to duplicate stderr")?;
        // SAFETY: both descriptors are open; dup2 replaces fd 2 atomically.
        if unsafe { libc::dup2(file.as_raw_fd(), libc::STDERR_FILENO) } < 0 {
            return Err(std::io::Error::last_os_error()).context("failed to redirect stderr");
        }
        Ok(Self {
            saved,
            path: path.to_owned(),
        })
    }

    /// Puts standard error back and prints what was written meanwhile.
    fn restore(self) {
        // SAFETY: `saved` is the original stderr, still open.
        unsafe { libc::dup2(self.saved.as_raw_fd(), libc::STDERR_FILENO) };
        if let Ok(text) = fs::read(&self.path) {
            let _ = std::io::stderr().write_all(&text);
        }
        let _ = fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_scratch_names_of_dead_wefts_are_stale() {
        assert_eq!(scratch_pid("weft-live-4242-a1B2c3"), Some(4242));
        for other in [
            "weft-live-4242",
            "weft-live-4242.log",
            "weft-live-x-a1B2c3",
            "weft-live-1-a1B2c3d",
            "other",
        ] {
            assert_eq!(scratch_pid(other), None, "{other}");
        }
        let temp = std::env::temp_dir().join(format!("weft-stale-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&temp);
        fs::create_dir(&temp).unwrap();
        // pid 0 is never a process; this test's own pid is not named weft.
        let dead = temp.join("weft-live-0-AAAAAA");
        let foreign = temp.join("weft-live-0-BBBBBB.txt");
        fs::create_dir(&dead).unwrap();
        fs::write(&foreign, "kept").unwrap();
        let target = temp.join("kept");
        fs::create_dir(&target).unwrap();
        std::os::unix::fs::symlink(&target, temp.join("weft-live-0-CCCCCC")).unwrap();
        remove_stale(&temp);
        assert!(!dead.exists());
        assert!(foreign.exists() && target.exists());
        assert!(fs::symlink_metadata(temp.join("weft-live-0-CCCCCC")).is_ok());
        let scratch = Scratch::new().unwrap();
        let name = scratch
            .root
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(scratch_pid(&name), Some(std::process::id()));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &fs::metadata(&scratch.root).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o700);
        let root = scratch.root.clone();
        drop(scratch);
        assert!(!root.exists());
        fs::remove_dir_all(&temp).unwrap();
    }
}
