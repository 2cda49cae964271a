//! `weft record`: syscalls and the other sources into a capture directory,
//! headless.

use std::{
    collections::HashMap,
    io::{IsTerminal as _, Write as _},
    path::Path,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use serde_json::{Map, Value, json};
use weft_probes::syscall::SyscallEvent;
use weft_store::{Config, SourceId, Store};

use crate::{
    capture,
    cli::RecordArgs,
    ebpf,
    events::{self, EventProbe},
    live, resolve,
    session::{self, Accounting, Consumer, Probes, Session},
    sources::{self, STORED_FROM, Spec},
    syscall::SyscallProbe,
    tasks::TaskNames,
};

/// Runs `weft record` until the duration ends, SIGINT or SIGTERM.
pub fn run(args: &RecordArgs) -> Result<ExitCode> {
    let (syscalls, specs) = chosen_sources(&args.sources)?;
    let (options, drain_interval) = resolve::probe_options(&args.filter, &args.capture)?;
    let event_filter = events::Filter {
        pids: options.filter.pids.clone(),
        comm: options.filter.comm.clone(),
        cgroup: args.cgroup.as_deref().map(cgroup_id).transpose()?,
        net: crate::tc::NetOptions {
            interfaces: args.interface.clone(),
            ports: args.port.clone(),
            addrs: args.addr.clone(),
        },
    };
    let dir = &args.output.output;
    ebpf::check_privileges()?;
    capture::prepare_dir(dir, args.output.append)?;
    let syscall_probe = syscalls.then(|| SyscallProbe::load(&options)).transpose()?;
    let event_probe = (!specs.is_empty())
        .then(|| EventProbe::load(&specs, &event_filter, options.ring_bytes))
        .transpose()?;
    let mut probes = Probes::new(syscall_probe, event_probe);
    let mut store = open_store(args, dir)?;
    let syscall_source = capture::define_syscall_source(&mut store)?;
    let mut spec_sources = HashMap::new();
    for spec in &specs {
        spec_sources.insert(spec.name, spec.define(&mut store)?);
    }
    let tasks = TaskNames::define(&mut store)?;
    // Warn and record on: a capture without live queries beats none.
    let _live = live::serve(store.reader(), dir.clone()).unwrap_or_else(|error| {
        eprintln!("weft: live queries unavailable: {error:#}");
        None
    });
    let described = describe(&probes, &options);
    let mut metadata = capture::read_metadata(dir)?;
    let session_index = metadata["sessions"].as_array().map_or(0, Vec::len);
    metadata["sessions"]
        .as_array_mut()
        .context("weft.json has no sessions list")?
        .push(json!({
            "host": capture::host_json(),
            "sources": described,
            "start_ns": weft_store::now_ns(),
            "wall_offset_ns": capture::wall_offset_ns(),
            "complete": false,
        }));
    capture::write_metadata(dir, &metadata)?;
    let names: Vec<&str> = described.keys().map(String::as_str).collect();
    let session = Session {
        drain_interval,
        tick: Some(Duration::from_secs(1)),
        duration: args.output.duration,
        ready: format!(
            "weft: recording {} into {}; Ctrl-C to stop",
            names.join(", "),
            dir.display()
        ),
    };
    let mut recorder = Recorder {
        store,
        syscall_source,
        spec_sources,
        tasks,
        error: None,
        status: std::io::stderr().is_terminal(),
        start: Instant::now(),
        duration: args.output.duration,
        dir: dir.clone(),
    };
    let outcome = session::run(&session, &mut probes, &mut recorder)?;
    if recorder.status {
        eprintln!();
    }
    let Recorder { store, error, .. } = recorder;
    let closed = store.close().context("failed to finish the capture");
    let accounting = &outcome.accounting;
    let entry = &mut metadata["sessions"][session_index];
    entry["end_ns"] = json!(weft_store::now_ns());
    entry["lost"] = losses_json(accounting);
    entry["complete"] = json!(error.is_none() && closed.is_ok());
    capture::write_metadata(dir, &metadata)?;
    if let Some(error) = error {
        return Err(error.context("recording stopped"));
    }
    closed?;
    eprintln!(
        "weft: recorded {} records in {:.1}s to {}; lost {}",
        accounting.received(),
        outcome.elapsed.as_secs_f64(),
        dir.display(),
        accounting.lost(),
    );
    for line in loss_lines(accounting) {
        eprintln!("weft:   {line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether syscalls are chosen, and the other chosen sources.
fn chosen_sources(names: &[String]) -> Result<(bool, Vec<&'static Spec>)> {
    let mut syscalls = false;
    let mut specs: Vec<&'static Spec> = Vec::new();
    for name in names {
        match name.as_str() {
            capture::SYSCALLS => syscalls = true,
            "all" => {
                syscalls = true;
                specs = sources::ALL.to_vec();
            }
            name => match sources::find(name) {
                Some(spec) if !specs.iter().any(|s| s.name == spec.name) => specs.push(spec),
                Some(_) => {}
                None => bail!(
                    "--sources {name}: no such source; `weft sources` lists them (syscalls, {})",
                    sources::ALL
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            },
        }
    }
    Ok((syscalls, specs))
}

/// The cgroup v2 id of a cgroup directory: its inode number.
fn cgroup_id(path: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt as _;
    let metadata = std::fs::metadata(path)
        .with_context(|| format!("--cgroup {}: no such cgroup", path.display()))?;
    if !metadata.is_dir() {
        bail!("--cgroup {}: not a cgroup directory", path.display());
    }
    Ok(metadata.ino())
}

fn open_store(args: &RecordArgs, dir: &Path) -> Result<Store> {
    let config = Config {
        disk_budget: args.output.max_disk,
        retain: args
            .output
            .retain
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
        ..Config::default()
    };
    let store =
        Store::open(dir, &config).with_context(|| format!("failed to open {}", dir.display()))?;
    let recovery = store.recovery();
    if recovery.cut_chunks > 0 {
        eprintln!(
            "weft: {}: the last session ended early; {} unfinished chunks ({} bytes) were cut",
            dir.display(),
            recovery.cut_chunks,
            recovery.cut_bytes
        );
    }
    Ok(store)
}

/// Where each source is attached, for `weft.json`.
fn describe(probes: &Probes, options: &crate::syscall::Options) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(probe) = &probes.syscalls {
        out.insert(
            capture::SYSCALLS.into(),
            json!({ "attach": probe.describe(), "filter": format!("{:?}", options.filter) }),
        );
    }
    if let Some(probe) = &probes.events {
        for spec in probe.specs() {
            let attach = if spec.tc {
                probe.net_attach().unwrap_or_default().to_owned()
            } else {
                let hooks: Vec<String> = spec
                    .hooks
                    .iter()
                    .map(|h| format!("tracepoint {}:{}", h.category, h.event))
                    .collect();
                hooks.join(", ")
            };
            out.insert(spec.name.into(), json!({ "attach": attach }));
        }
    }
    out
}

fn losses_json(accounting: &Accounting) -> Value {
    let mut out = Map::new();
    if let Some(losses) = &accounting.syscalls {
        out.insert(capture::SYSCALLS.into(), losses.to_json());
    }
    for (spec, losses) in &accounting.sources {
        out.insert(spec.name.into(), losses.to_json());
    }
    Value::Object(out)
}

/// One line per source: received, lost and why.
fn loss_lines(accounting: &Accounting) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(l) = &accounting.syscalls {
        lines.push(format!(
            "syscalls: {} records, lost {} (ring full {}, enter table full {})",
            l.received,
            l.lost(),
            l.ring_full,
            l.enter_table_full
        ));
    }
    for (spec, l) in &accounting.sources {
        lines.push(format!(
            "{}: {} records, lost {} (ring full {}); {} intervals not started (table full)",
            spec.name,
            l.received,
            l.lost(),
            l.ring_full,
            l.table_full
        ));
    }
    lines
}

/// `record`'s consumer: each record into the store.
struct Recorder {
    store: Store,
    syscall_source: SourceId,
    spec_sources: HashMap<&'static str, SourceId>,
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
            .append_at(
                self.syscall_source,
                now,
                Some(exit_ns),
                &event.to_le_bytes(),
            )
            .and_then(|_| self.tasks.observe_syscall(&mut self.store, now, event));
        if let Err(error) = appended {
            self.error = Some(error.into());
        }
    }

    fn record(&mut self, spec: &'static Spec, record: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let Some(source) = self.spec_sources.get(spec.name) else {
            return;
        };
        let at = spec.time_offset();
        let ts = record
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        let now = weft_store::now_ns();
        let appended = self
            .store
            .append_at(*source, now, ts, &record[STORED_FROM..])
            .and_then(|_| match spec.thread(record) {
                Some((pid, tid)) => self.tasks.observe(&mut self.store, now, pid, tid, false),
                None => Ok(()),
            });
        if let Err(error) = appended {
            self.error = Some(error.into());
        }
    }

    fn tick(&mut self, accounting: &Accounting) -> Result<bool> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        self.store.publish();
        if self.status {
            self.draw_status(accounting);
        }
        Ok(true)
    }
}

impl Recorder {
    fn draw_status(&self, accounting: &Accounting) {
        let elapsed = self.start.elapsed().as_secs_f64();
        let received = accounting.received();
        let bytes = capture::size_on_disk(&self.dir);
        let left = self.duration.map_or_else(String::new, |d| {
            format!(", {:.0}s left", (d.as_secs_f64() - elapsed).max(0.0))
        });
        let mut stderr = std::io::stderr().lock();
        let _ = write!(
            stderr,
            "\r\x1b[Kweft record: {received} events ({:.1}k/s), lost {}, {:.1} MiB on disk, {elapsed:.0}s{left}",
            received as f64 / elapsed.max(1e-9) / 1e3,
            accounting.lost(),
            bytes as f64 / f64::from(1 << 20),
        );
        let _ = stderr.flush();
    }
}
