//! A recording: the plan's probes attached, its store opened, its sockets
//! served, then every record drained into the store (with the triggers
//! tested on each) until the duration ends, a signal or the UI stops it;
//! `weft.json` completed and what was recorded and lost reported.
//!
//! `weft record` and the terminal UI resolve their arguments into a
//! [`RecordPlan`]; nothing here reads the command line.

use std::{
    collections::{BTreeMap, HashMap},
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex,
        mpsc::{Receiver, Sender},
    },
    time::{Duration, Instant},
};

use crate::error::{Context as _, Result, bail};
use weft_ingest::syscalls::SyscallSink;
use weft_kernel::source::CONNS;

use weft_kernel::events::StackReader;

use crate::files::FileNames;
use crate::frames::FrameLog;
use weft_kernel::{
    ebpf,
    events::{self, EventProbe},
    syscall::{Options, SyscallProbe},
    tc::NetOptions,
};
use weft_query::health::Health;
use weft_store::{Config, SourceId, Store};

use crate::{
    app::{self, AppServer},
    command::Command,
    histogram,
    live::{self, DecodePt},
    losses, metrics, peers,
    probe::{Account, Probes},
    recorder::{
        CallTotals, Failure, HealthFeed, Intake, ManualNotes, Progress, ProgressFeed, PtCalls,
        Recorder, Report, Stage,
    },
    session::{self, Outcome, Session},
    travel::Travel,
    trigger::{self, CapturePt, Triggers},
};
use weft_capture::{
    capture,
    metadata::{self, Metadata, SourceNote},
    pt_calls, registry,
    sources::{self, Layout, Spec},
};

/// A recording, resolved from the command line once: which probes with
/// which filters, where to store and how much, which triggers.
pub struct RecordPlan {
    pub sources: Chosen,
    /// The syscall probe's options; their filter also filters the other
    /// sources.
    pub options: Options,
    pub drain_interval: Duration,
    /// The cgroup (v2 id) and packet filters of the other sources.
    pub cgroup: Option<u64>,
    pub net: NetOptions,
    /// The group that may push application records.
    pub app_group: Option<String>,
    pub dir: PathBuf,
    /// Add a session to an existing capture rather than refuse it.
    pub append: bool,
    pub duration: Option<Duration>,
    pub store: Config,
    pub triggers: Triggering,
    /// Where to serve metrics, and over how long a window.
    pub metrics: Option<(SocketAddr, Duration)>,
    /// The peer port other hosts' weft ask.
    pub peer: Option<crate::peers::PeerPlan>,
    /// Decodes the Intel PT captures `weft pt import` hands the live
    /// socket; `None` refuses them.
    pub decode_pt: Option<DecodePt>,
    /// Samples per second per CPU of the stack source.
    pub stack_hz: u64,
    /// Where the recording's progress goes each second (the binary's
    /// status line); `None` shows none.
    pub progress: Option<fn(&Progress)>,
}

/// The triggers of a recording and what they do.
#[derive(Default)]
pub struct Triggering {
    /// Conditions in the query language's `where` syntax.
    pub conditions: Vec<String>,
    pub policy: trigger::Policy,
    /// A command to run on each firing.
    pub command: Option<String>,
    /// How long to capture Intel PT of the process that fired one, and
    /// what takes it; `None` takes none.
    pub pt: Option<(Duration, CapturePt)>,
}

impl RecordPlan {
    /// `sources` with the syscall probe's `options`, into a new capture
    /// `dir`, without limits, triggers or metrics.
    pub fn new(sources: Chosen, options: Options, drain_interval: Duration, dir: PathBuf) -> Self {
        Self {
            sources,
            options,
            drain_interval,
            cgroup: None,
            net: NetOptions::default(),
            app_group: None,
            dir,
            append: false,
            duration: None,
            store: Config::default(),
            triggers: Triggering::default(),
            metrics: None,
            peer: None,
            decode_pt: None,
            stack_hz: weft_abi::stacks::DEFAULT_HZ,
            progress: None,
        }
    }

    /// With the store kept under `disk` bytes and `retain` long.
    #[must_use]
    pub fn limited(mut self, disk: Option<u64>, retain: Option<Duration>) -> Self {
        self.store.disk_budget = disk;
        self.store.retain = retain.map(ns);
        self
    }

    /// With the summaries of what the limits delete kept `summaries` long.
    #[must_use]
    pub fn keeping_summaries(mut self, summaries: Option<Duration>) -> Self {
        self.store.retain_summaries = summaries.map(ns);
        self
    }
}

/// A duration in ns, saturating (no recording lasts 584 years).
pub fn ns(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// What a recording shares with a terminal UI running beside it.
pub struct UiLink {
    /// Receives the store's reader once the probes are attached, and
    /// where decoded PT captures go to be stored.
    pub ready: weft_capture::feed::Ready,
    /// The counters, renewed every second.
    pub health: Arc<Mutex<Health>>,
    /// Stops the recording, as SIGINT would.
    pub stop: Arc<tokio::sync::Notify>,
}

/// Records until the duration ends, SIGINT, SIGTERM or `ui`'s stop.
///
/// Returns the report of what was recorded and lost, a line per source.
///
/// With `command`, recording also ends when the command exits (its cgroup
/// is the plan's filter).
pub fn record(plan: &RecordPlan, ui: Option<UiLink>, command: Option<Command>) -> Result<String> {
    let dir = &plan.dir;
    ebpf::check_privileges()?;
    let mut fresh = capture::prepare_dir(dir, plan.append)?;
    let (mut probes, stack_map) = load_probes(plan)?;
    let mut store = open_store(dir, &plan.store)?;
    let syscalls = SyscallSink::define(&mut store)?;
    let spec_sources = define_sources(plan, &mut store)?;
    let frames = stack_map
        .map(|stacks| FrameLog::define(&mut store, stacks))
        .transpose()?;
    let files = (spec_sources.contains_key(&weft_abi::events::Source::Args))
        .then(|| FileNames::define(&mut store))
        .transpose()?;
    // Decoded PT captures, from trigger actions and the live socket.
    let (calls_sender, decoded) = std::sync::mpsc::channel();
    let peer = plan.peer.as_ref().map(peers::Side::open).transpose()?;
    let triggers = triggers(plan, &store, &calls_sender, peer.as_ref())?;
    let (manual, manual_notes) = std::sync::mpsc::sync_channel(16);
    let (ui_health, ui_stop) = match ui {
        Some(UiLink {
            ready,
            health,
            stop,
        }) => {
            // The UI may have given up waiting; recording goes on regardless.
            let _ = ready.send((store.reader(), Some(calls_sender.clone())));
            (Some(health), Some(stop))
        }
        None => (None, None),
    };
    // The counters, for the UI or the metrics.
    let health = ui_health.or_else(|| {
        plan.metrics
            .map(|_| Arc::new(Mutex::new(Health::default())))
    });
    // The programs' time per syscall for the UI and the metrics, from a
    // tenth of the runs (none where the kernel keeps no statistics).
    let _sampled = health
        .is_some()
        .then(ebpf::sample_run_stats)
        .and_then(Result::ok);
    let latencies = serve_ports(plan, &store, health.as_ref(), peer.as_ref())?;
    // Warn and record on: a capture without live queries beats none.
    let _live = live::serve(store.reader(), dir, manual, calls_sender, plan.decode_pt)
        .unwrap_or_else(|error| {
            log::warn!("weft: live queries unavailable: {error:#}");
            None
        });
    let described: BTreeMap<String, SourceNote> = probes
        .iter()
        .flat_map(|probe| probe.describe())
        .map(|(name, about)| (name.to_owned(), about))
        .collect();
    let names: Vec<&str> = described.keys().map(String::as_str).collect();
    let session = Session {
        drain_interval: plan.drain_interval,
        tick: Some(Duration::from_secs(1)),
        duration: plan.duration,
        ready: format!(
            "weft: recording {} into {} (rings of {} KiB per CPU); Ctrl-C to stop",
            names.join(", "),
            dir.display(),
            plan.options.ring_bytes >> 10
        ),
        stop: ui_stop.clone().or_else(|| {
            command
                .as_ref()
                .map(|_| Arc::new(tokio::sync::Notify::new()))
        }),
        poke: peer.as_ref().map(|side| Arc::clone(&side.wake)),
    };
    let (metadata, session_index) = capture::start_session(store.dir(), described)?;
    fresh.keep();
    let stages = stages(plan, manual_notes, decoded, health);
    let mut recorder = Recorder {
        store,
        intake: Intake {
            syscalls,
            spec_sources,
            app_sources: HashMap::new(),
            metadata,
            latencies,
            frames,
            files,
            lag: (0, 0),
        },
        triggers,
        failure: Failure::default(),
        stages,
        report: Report {
            start: Instant::now(),
            calls: CallTotals::default(),
        },
        pins: peer.map(|side| side.incoming),
    };
    // Let run now that the probes are attached; killed if still running
    // when recording stops.
    let running = (command.zip(session.stop.clone())).map(|(command, ended)| command.run(ended));
    let outcome = session::run(&session, &mut probes, &mut recorder)?;
    drop(running);
    finish(recorder, session_index, &outcome)
}

/// Serves the metrics and the peer port the plan asks for; returns the
/// latency histograms the recorder counts for the metrics.
fn serve_ports(
    plan: &RecordPlan,
    store: &Store,
    health: Option<&Arc<Mutex<Health>>>,
    peer: Option<&peers::Side>,
) -> Result<Option<(histogram::Latencies, histogram::Shared)>> {
    let mut latencies = None;
    if let (Some((addr, window)), Some(health)) = (plan.metrics, health) {
        let shared = histogram::Shared::default();
        let metrics = metrics::Metrics {
            reader: store.reader(),
            capture: weft_capture::open::Capture::open(&plan.dir)?,
            health: Arc::clone(health),
            latencies: Arc::clone(&shared),
            window,
        };
        metrics::serve(addr, metrics)?;
        latencies = Some((histogram::Latencies::default(), shared));
    }
    if let (Some(peer_plan), Some(side)) = (&plan.peer, peer) {
        peers::serve(
            peer_plan,
            Arc::clone(&side.secret),
            store.reader(),
            &plan.dir,
            side.pins(),
        )?;
    }
    Ok(latencies)
}

/// The plan's triggers over `store`; a PT capture they take sends its
/// calls to `calls`.
fn triggers(
    plan: &RecordPlan,
    store: &Store,
    calls: &Sender<pt_calls::Decoded>,
    peer: Option<&peers::Side>,
) -> Result<Triggers> {
    let triggering = &plan.triggers;
    // A thread's connections are remembered as long as a window reaches
    // back, and a second more for the drain.
    let horizon = triggering.policy.before.max(triggering.policy.after) + 1_000_000_000;
    let travel = plan.peer.as_ref().zip(peer).map(|(peer_plan, side)| {
        Travel::start(
            peer_plan.routes(),
            Arc::clone(&side.secret),
            horizon,
            peer_plan.name(),
        )
    });
    let actions = trigger::Actions {
        dir: plan.dir.clone(),
        command: triggering.command.clone(),
        pt: (triggering.pt).map(|(duration, take)| (duration, calls.clone(), take)),
        travel,
    };
    Triggers::new(
        store,
        &Metadata::default(),
        &triggering.conditions,
        triggering.policy,
        actions,
    )
}

/// Loads and attaches the chosen probes, and opens the application
/// socket; with the stack source, the map its stacks' frames are read from.
fn load_probes(plan: &RecordPlan) -> Result<(Probes, Option<StackReader>)> {
    let (chosen, options) = (&plan.sources, &plan.options);
    let event_filter = events::Filter {
        pids: options.filter.pids.clone(),
        comm: options.filter.comm.clone(),
        cgroup: plan.cgroup,
        net: plan.net.clone(),
        stack_hz: plan.stack_hz,
    };
    let mut probes: Probes = Vec::new();
    let mut stack_map = None;
    if chosen.syscalls {
        probes.push(Box::new(SyscallProbe::load(options)?));
    }
    let hooks: Vec<_> = chosen.specs.iter().map(|spec| crate::hooks(spec)).collect();
    if !hooks.is_empty() {
        let mut probe = EventProbe::load(&hooks, &event_filter, options.ring_bytes)?;
        stack_map = probe.take_stacks();
        probes.push(Box::new(probe));
    }
    if chosen.app {
        probes.push(Box::new(AppServer::listen(plan.app_group.as_deref())?));
    }
    Ok((probes, stack_map))
}

/// Closes the store, completes `weft.json` and reports what was recorded
/// and lost.
fn finish(mut recorder: Recorder, session_index: usize, outcome: &Outcome) -> Result<String> {
    // PT captures under way end, even after a store error, so that none is
    // left half written; the capture closes even when one does not (a
    // decode that hangs).
    let abandoned = recorder.triggers.join_captures(trigger::CLOSE_WAIT);
    if abandoned > 0 {
        log::warn!(
            "weft: gave up waiting {}s for {abandoned} PT capture(s) to be decoded; their calls are not stored",
            trigger::CLOSE_WAIT.as_secs()
        );
    }
    // What the stages must still store: those captures' calls, the last
    // drain's losses (none can be written after a store error).
    recorder.finish_stages(&outcome.accounting);
    let Recorder {
        store,
        intake: Intake {
            mut metadata, lag, ..
        },
        triggers,
        failure: Failure { error, unstored },
        report: Report {
            calls: call_totals, ..
        },
        ..
    } = recorder;
    let dir = Arc::clone(store.dir());
    // The space set aside for this last write of `weft.json`, which a full
    // disk would refuse.
    capture::release_reserve(&dir);
    let pins_released = store.pins_released();
    let unflushed = if error.is_some() {
        store.records_not_on_disk()
    } else {
        0
    };
    let closed = store.close().context("failed to finish the capture");
    let accounting = &outcome.accounting;
    let entry = &mut metadata.sessions[session_index];
    entry.end_ns = Some(weft_store::now_ns());
    entry.lost = (accounting.0.iter())
        .map(|account| (account.name.to_owned(), account.noted()))
        .collect();
    entry.max_drain_lag_ns = Some(lag.1);
    entry.triggers = Some(triggers.log());
    entry.pins_released = Some(pins_released);
    if call_totals.captures > 0 {
        entry
            .lost
            .insert(registry::CALLS.to_owned(), call_totals.noted());
    }
    for (source, records) in &unstored {
        let lost = entry.lost.entry((*source).to_owned()).or_default();
        lost.store_error = Some(*records);
        lost.lost += records;
    }
    if let Some(error) = &error {
        entry.store_error = Some(format!("{error:#}"));
        // Stored in memory, never written: lost with the failed write.
        entry.unflushed = Some(unflushed);
    }
    entry.complete = error.is_none() && closed.is_ok();
    metadata::write_metadata(&dir, &metadata)?;
    if let Some(error) = error {
        let lost: u64 = unstored.values().sum();
        return Err(error.within(format!(
            "recording stopped: the records written before it are kept in {}; \
             {unflushed} records held in memory and {lost} received after it were \
             not stored (counted as lost, \"store error\", in its weft.json)",
            dir.path().display()
        )));
    }
    closed?;
    let mut report = format!(
        "weft: recorded {} records in {:.1}s to {}; lost {}\n",
        accounting.received(),
        outcome.elapsed.as_secs_f64(),
        dir.path().display(),
        accounting.lost(),
    );
    let calls = (call_totals.captures > 0).then(|| call_totals.line());
    let lines = accounting.0.iter().map(Account::line);
    for line in lines.chain(calls) {
        report = report + "weft:   " + &line + "\n";
    }
    Ok(report)
}

/// The sources a recording takes.
pub struct Chosen {
    pub syscalls: bool,
    pub specs: Vec<&'static Spec>,
    /// Application records through the socket.
    pub app: bool,
}

impl Chosen {
    /// The sources called `names` (as `--sources` names them: `syscalls`,
    /// a source `weft sources` lists, `app` or `all`).
    pub fn named(names: &[String]) -> Result<Self> {
        let mut chosen = Self {
            syscalls: false,
            specs: Vec::new(),
            app: false,
        };
        for name in names {
            match name.as_str() {
                registry::SYSCALLS => chosen.syscalls = true,
                // `-conns`: net without the connections beside it.
                name if name.strip_prefix('-') == Some(CONNS.name) => {}
                app::NAME => chosen.app = true,
                "all" => {
                    chosen = Self {
                        syscalls: true,
                        specs: sources::ALL.to_vec(),
                        app: true,
                    };
                }
                name => match sources::find(name) {
                    Some(spec) if !chosen.specs.iter().any(|s| s.name == spec.name) => {
                        chosen.specs.push(spec);
                    }
                    Some(_) => {}
                    None => bail!(
                        "--sources {name}: no such source; `weft sources` lists them (syscalls, {}, app)",
                        sources::ALL
                            .iter()
                            .map(|s| s.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                },
            }
        }
        chosen.with_conns_beside_net(names);
        Ok(chosen)
    }

    /// `conns` joins `net` (and `all`) unless named (`conns` keeps it,
    /// `-conns` leaves it out): which thread used which connection is what
    /// ties packets to requests. On a kernel without its tracepoints
    /// (before Linux 6.3) it is left out, and stderr says so.
    fn with_conns_beside_net(&mut self, names: &[String]) {
        let asked = |n: &str| names.iter().any(|name| name == n);
        let beside = self.specs.iter().any(|s| s.name == "net");
        if asked(CONNS.name) || !beside {
            return;
        }
        self.specs.retain(|s| s.name != CONNS.name);
        if asked(&format!("-{}", CONNS.name)) {
            return;
        }
        let missing = weft_kernel::ebpf::tracefs()
            .ok()
            .and_then(|tracefs| CONNS.availability(tracefs).missing);
        match (missing, sources::find(CONNS.name)) {
            (None, Some(spec)) => self.specs.push(spec),
            (Some(why), _) => log::warn!(
                "weft: net goes without conns (which thread used which connection): {why}"
            ),
            (None, None) => {}
        }
    }
}

/// Opens (or creates) the store in `dir`, saying what recovery cut.
fn open_store(dir: &Path, config: &Config) -> Result<Store> {
    let store =
        Store::open(dir, config).with_context(|| format!("failed to open {}", dir.display()))?;
    let recovery = store.recovery();
    if recovery.cut_chunks > 0 {
        log::warn!(
            "weft: {}: the last session ended early; {} unfinished chunks ({} bytes) were cut",
            dir.display(),
            recovery.cut_chunks,
            recovery.cut_bytes
        );
    }
    Ok(store)
}

/// What each tick of a recording does besides the triggers' own: manual
/// triggers (`notes`), the loss log, the PT captures' calls (`decoded`),
/// and the counters for a UI or the metrics (`health`) and the plan's
/// progress line.
fn stages(
    plan: &RecordPlan,
    notes: Receiver<String>,
    decoded: Receiver<pt_calls::Decoded>,
    health: Option<Arc<Mutex<Health>>>,
) -> Vec<Box<dyn Stage>> {
    let mut stages: Vec<Box<dyn Stage>> = vec![
        Box::new(ManualNotes(notes)),
        Box::new(losses::LossLog::default()),
        Box::new(PtCalls { log: None, decoded }),
    ];
    if let Some(health) = health {
        stages.push(Box::new(HealthFeed(health)));
    }
    if let Some(show) = plan.progress {
        let duration = plan.duration;
        stages.push(Box::new(ProgressFeed { show, duration }));
    }
    stages
}

/// The store source of each chosen event source, with its layout.
fn define_sources(
    plan: &RecordPlan,
    store: &mut Store,
) -> Result<HashMap<weft_abi::events::Source, (SourceId, Layout)>> {
    let mut sources = HashMap::new();
    for spec in &plan.sources.specs {
        sources.insert(
            crate::hooks(spec).source,
            (spec.define(store)?, spec.layout()),
        );
    }
    Ok(sources)
}
