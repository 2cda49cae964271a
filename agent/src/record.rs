//! `weft record`: every syscall into a capture directory, headless.

use std::{
    io::{IsTerminal as _, Write as _},
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result};
use serde_json::json;
use weft_probes::syscall::SyscallEvent;
use weft_store::{Config, Store};

use crate::{
    capture,
    cli::RecordArgs,
    ebpf, live, resolve,
    session::{self, Consumer, Session},
    syscall::{Counters, Losses, SyscallProbe},
    tasks::TaskNames,
};

/// Runs `weft record` until the duration ends, SIGINT or SIGTERM.
pub fn run(args: &RecordArgs) -> Result<ExitCode> {
    let (options, drain_interval) = resolve::probe_options(&args.filter, &args.capture)?;
    let dir = &args.output.output;
    ebpf::check_privileges()?;
    capture::prepare_dir(dir, args.output.append)?;
    let mut probe = SyscallProbe::load(&options)?;
    let config = Config {
        disk_budget: args.output.max_disk,
        retain: args
            .output
            .retain
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        ..Config::default()
    };
    let mut store =
        Store::open(dir, &config).with_context(|| format!("failed to open {}", dir.display()))?;
    let recovery = store.recovery().clone();
    if recovery.cut_chunks > 0 {
        eprintln!(
            "weft: {}: the last session ended early; {} unfinished chunks ({} bytes) were cut",
            dir.display(),
            recovery.cut_chunks,
            recovery.cut_bytes
        );
    }
    let source = capture::define_syscall_source(&mut store)?;
    let tasks = TaskNames::define(&mut store)?;
    // Warn and record on: a capture without live queries beats none.
    let _live = live::serve(store.reader(), dir.clone()).unwrap_or_else(|error| {
        eprintln!("weft: live queries unavailable: {error:#}");
        None
    });
    let mut metadata = capture::read_metadata(dir)?;
    let session_index = metadata["sessions"].as_array().map_or(0, Vec::len);
    metadata["sessions"]
        .as_array_mut()
        .context("weft.json has no sessions list")?
        .push(json!({
            "host": capture::host_json(),
            "sources": { capture::SYSCALLS: { "attach": probe.describe(), "filter": format!("{:?}", options.filter) } },
            "start_ns": weft_store::now_ns(),
            "wall_offset_ns": capture::wall_offset_ns(),
            "complete": false,
        }));
    capture::write_metadata(dir, &metadata)?;
    let session = Session {
        drain_interval,
        tick: Some(Duration::from_secs(1)),
        duration: args.output.duration,
        ready: format!(
            "weft: recording syscalls on {} into {}; Ctrl-C to stop",
            probe.describe(),
            dir.display()
        ),
    };
    let mut recorder = Recorder {
        store,
        source,
        tasks,
        error: None,
        status: std::io::stderr().is_terminal(),
        start: Instant::now(),
        duration: args.output.duration,
        dir: dir.clone(),
    };
    let outcome = session::run(&session, &mut probe, &mut recorder)?;
    if recorder.status {
        eprintln!();
    }
    let Recorder { store, error, .. } = recorder;
    let closed = store.close().context("failed to finish the capture");
    let losses = Losses::new(&outcome.counters, outcome.received);
    let entry = &mut metadata["sessions"][session_index];
    entry["end_ns"] = json!(weft_store::now_ns());
    entry["lost"] = json!({ capture::SYSCALLS: losses.to_json() });
    entry["complete"] = json!(error.is_none() && closed.is_ok());
    capture::write_metadata(dir, &metadata)?;
    if let Some(error) = error {
        return Err(error.context("recording stopped"));
    }
    closed?;
    eprintln!(
        "weft: recorded {} syscalls in {:.1}s to {}; lost {} (ring full {}, enter table full {})",
        outcome.received,
        outcome.elapsed.as_secs_f64(),
        dir.display(),
        losses.lost(),
        losses.ring_full,
        losses.enter_table_full,
    );
    Ok(ExitCode::SUCCESS)
}

/// `record`'s consumer: each event into the store.
struct Recorder {
    store: Store,
    source: weft_store::SourceId,
    tasks: TaskNames,
    /// The first store error; it stops the capture at the next tick.
    error: Option<anyhow::Error>,
    /// Whether to draw a status line (stderr is a terminal).
    status: bool,
    start: Instant,
    duration: Option<Duration>,
    dir: std::path::PathBuf,
}

impl Consumer for Recorder {
    fn event(&mut self, event: &SyscallEvent) {
        if self.error.is_some() {
            return;
        }
        // Arrival is when weft drained it; the kernel's exit time is the
        // producer's timestamp.
        let exit_ns = event.enter_ns + event.duration_ns;
        let now = weft_store::now_ns();
        let appended = self
            .store
            .append_at(self.source, now, Some(exit_ns), &event.to_le_bytes())
            .and_then(|_| self.tasks.observe(&mut self.store, now, event));
        if let Err(error) = appended {
            self.error = Some(error.into());
        }
    }

    fn tick(&mut self, counters: &Counters, received: u64) -> Result<bool> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        self.store.publish();
        if self.status {
            self.draw_status(counters, received);
        }
        Ok(true)
    }
}

impl Recorder {
    fn draw_status(&self, counters: &Counters, received: u64) {
        let elapsed = self.start.elapsed().as_secs_f64();
        let lost = Losses::new(counters, received).lost();
        let bytes = capture::size_on_disk(&self.dir);
        let left = self.duration.map_or_else(String::new, |d| {
            format!(", {:.0}s left", (d.as_secs_f64() - elapsed).max(0.0))
        });
        let mut stderr = std::io::stderr().lock();
        let _ = write!(
            stderr,
            "\r\x1b[Kweft record: {received} events ({:.1}k/s), lost {lost}, {:.1} MiB on disk, {elapsed:.0}s{left}",
            received as f64 / elapsed.max(1e-9) / 1e3,
            bytes as f64 / f64::from(1 << 20),
        );
        let _ = stderr.flush();
    }
}
