//! A recording: the plan's probes attached, its store opened, its sockets
//! served, then every record drained into the store (with the triggers
//! tested on each) until the duration ends, a signal or the UI stops it;
//! `weft.json` completed and what was recorded and lost reported.
//!
//! `weft record` and the terminal UI resolve their arguments into a
//! [`RecordPlan`]; nothing here reads the command line.

use std::{
    collections::{BTreeMap, HashMap},
    io::{IsTerminal as _, Write as _},
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError, mpsc::Sender},
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
    source::SourceHooks,
    syscall::{Options, SyscallProbe},
    tc::NetOptions,
};
use weft_query::health::{Health, SourceHealth};
use weft_store::{Config, SourceId, Store};

use crate::{
    app::{self, AppServer, Message},
    command::Command,
    histogram,
    live::{self, DecodePt},
    losses, metrics, peers,
    probe::{Account, Accounting, Arrival, Consumer, Probes},
    session::{self, Outcome, Session},
    travel::{self, Travel},
    trigger::{self, CapturePt, Triggers},
};
use weft_capture::{
    capture,
    metadata::{self, Lost, Metadata, SourceNote},
    pt_calls,
    registry::{self, ValueKind},
    sources::{self, Layout, STORED_FROM, Spec},
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
    let capture_dir = Arc::clone(store.dir());
    let (metadata, session_index) = capture::start_session(&capture_dir, described)?;
    fresh.keep();
    let mut recorder = Recorder {
        store,
        syscalls,
        spec_sources,
        app_sources: HashMap::new(),
        metadata,
        triggers,
        manual_notes,
        calls: None,
        decoded,
        call_totals: CallTotals::default(),
        lag: (0, 0),
        error: None,
        unstored: std::collections::BTreeMap::new(),
        status: ui_stop.is_none() && std::io::stderr().is_terminal(),
        health,
        latencies,
        pins: peer.map(|side| side.incoming),
        start: Instant::now(),
        duration: plan.duration,
        dir: capture_dir,
        losses: losses::LossLog::default(),
        frames,
        files,
    };
    // Let run now that the probes are attached; killed if still running
    // when recording stops.
    let running = (command.zip(session.stop.clone())).map(|(command, ended)| command.run(ended));
    let outcome = session::run(&session, &mut probes, &mut recorder)?;
    drop(running);
    if recorder.status {
        eprintln!();
    }
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
    // PT captures under way end, and their calls are stored; the capture
    // closes even when one does not (a decode that hangs).
    let abandoned = recorder.triggers.join_captures(trigger::CLOSE_WAIT);
    if abandoned > 0 {
        log::warn!(
            "weft: gave up waiting {}s for {abandoned} PT capture(s) to be decoded; their calls are not stored",
            trigger::CLOSE_WAIT.as_secs()
        );
    }
    let pending: Vec<_> = recorder.decoded.try_iter().collect();
    for decoded in &pending {
        if let Err(error) = recorder.store_calls(decoded) {
            recorder.error.get_or_insert(error);
        }
    }
    // The losses of the last drain, at the end (none can be written after
    // a store error).
    if recorder.error.is_none() {
        let now = weft_store::now_ns();
        let Recorder { store, losses, .. } = &mut recorder;
        if let Err(error) = losses.note(store, now, &outcome.accounting) {
            recorder.error = Some(error);
        }
    }
    let Recorder {
        store,
        error,
        unstored,
        mut metadata,
        dir,
        lag,
        triggers,
        call_totals,
        ..
    } = recorder;
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

/// `record`'s consumer: each record into the store.
struct Recorder {
    store: Store,
    /// Syscall records into the store, and every source's thread names.
    syscalls: SyscallSink,
    /// The store source of each event source, and where its records'
    /// timestamp and thread are.
    spec_sources: HashMap<weft_abi::events::Source, (SourceId, Layout)>,
    /// Application sources defined so far.
    app_sources: HashMap<Arc<str>, SourceId>,
    /// `weft.json`, rewritten when an application defines a source.
    metadata: Metadata,
    /// Longest time from a kernel record's timestamp to its arrival in
    /// the store, since the last status line and over the whole session.
    lag: (u64, u64),
    /// The first store error; it stops the capture at the next tick.
    error: Option<crate::error::Error>,
    /// Records received after it, by source: never stored, counted as
    /// lost ("store error").
    unstored: std::collections::BTreeMap<&'static str, u64>,
    /// Whether to draw a status line (stderr is a terminal).
    status: bool,
    triggers: Triggers,
    /// Manual triggers asked through the live socket, with their notes.
    manual_notes: std::sync::mpsc::Receiver<String>,
    /// The `calls` source, once a PT capture has been decoded.
    calls: Option<pt_calls::CallLog>,
    /// Decoded PT captures waiting to be stored.
    decoded: std::sync::mpsc::Receiver<pt_calls::Decoded>,
    call_totals: CallTotals,
    /// Where a terminal UI reads the counters, when one runs.
    health: Option<Arc<Mutex<Health>>>,
    /// Each syscall's latency histogram and where scrapes read it, when
    /// metrics are served.
    latencies: Option<(histogram::Latencies, histogram::Shared)>,
    /// Peers' firings, from the peer port.
    pins: Option<std::sync::mpsc::Receiver<travel::Incoming>>,
    start: Instant,
    duration: Option<Duration>,
    /// The capture directory, the store's own.
    dir: Arc<weft_store::Dir>,
    /// What each source lost, noted each tick.
    losses: losses::LossLog,
    /// The functions of the stacks records name, with the stack source.
    frames: Option<FrameLog>,
    /// With the `args` source, the names of its records' files.
    files: Option<FileNames>,
}

impl Consumer for Recorder {
    fn take(&mut self, now: u64, arrival: Arrival<'_>) {
        if self.error.is_some() {
            *self.unstored.entry(source_of(&arrival)).or_default() += 1;
            return;
        }
        let source = source_of(&arrival);
        let stored = match arrival {
            Arrival::Syscall(record) => self.store_syscall(now, record),
            Arrival::Event(hooks, record) => self.store_event(hooks, now, record),
            Arrival::App(message) => self.store_app(now, message),
        };
        if let Err(error) = stored {
            self.error = Some(error);
            *self.unstored.entry(source).or_default() += 1;
        }
    }

    fn manual_trigger(&mut self) {
        if let Err(error) = self.triggers.manual(&mut self.store, None) {
            self.error.get_or_insert(error);
        }
    }

    fn poke(&mut self) {
        let Some(pins) = &self.pins else { return };
        while let Ok((request, answer)) = pins.try_recv() {
            match self.triggers.from_peer(&mut self.store, &request) {
                Ok(reply) => {
                    // The peer port may have given up waiting.
                    let _ = answer.try_send(reply);
                }
                Err(error) => {
                    self.error.get_or_insert(error);
                }
            }
        }
    }

    fn drained(&mut self) {
        self.triggers.drained();
    }

    fn tick(&mut self, accounting: &Accounting) -> Result<bool> {
        // A store error (a full disk) stops the session: the probes detach
        // and what is left in the rings is drained and counted as lost;
        // `finish` closes the capture and reports the error.
        if self.error.is_some() {
            return Ok(false);
        }
        while let Ok(note) = self.manual_notes.try_recv() {
            self.triggers.manual(&mut self.store, Some(note))?;
        }
        self.triggers.tick(&mut self.store)?;
        self.losses
            .note(&mut self.store, weft_store::now_ns(), accounting)?;
        while let Ok(decoded) = self.decoded.try_recv() {
            self.store_calls(&decoded)?;
        }
        self.store.publish();
        if self.status {
            self.draw_status(accounting);
        }
        if let Some(health) = &self.health {
            let now = self.health_of(accounting);
            *health.lock().unwrap_or_else(PoisonError::into_inner) = now;
        }
        if let Some((latencies, shared)) = &self.latencies {
            latencies.publish(shared);
        }
        self.lag.0 = 0;
        Ok(true)
    }
}

/// The source an arrival's record belongs to, as `weft.json` names it.
fn source_of(arrival: &Arrival<'_>) -> &'static str {
    match arrival {
        Arrival::Syscall(_) => registry::SYSCALLS,
        Arrival::Event(hooks, _) => hooks.name,
        Arrival::App(_) => "app",
    }
}

/// The PT captures whose calls a session stored.
#[derive(Debug, Default)]
struct CallTotals {
    captures: u64,
    stored: u64,
    late: u64,
    decoding_errors: u64,
}

impl CallTotals {
    fn noted(&self) -> Lost {
        // Late calls are the source's losses.
        Lost {
            lost: self.late,
            received: Some(self.stored),
            captures: Some(self.captures),
            decoding_errors: Some(self.decoding_errors),
            ..Lost::default()
        }
    }

    fn line(&self) -> String {
        format!(
            "calls: {} from {} PT capture(s), {} too late to store, {} decoding error(s)",
            self.stored, self.captures, self.late, self.decoding_errors
        )
    }
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

/// The process and the kernel and user stack ids a `stacks` or `sched`
/// record (as the kernel wrote it) names.
fn stack_ids(hooks: &SourceHooks, record: &[u8]) -> Option<(u32, i32, i32)> {
    use std::mem::offset_of;
    use weft_abi::{events::Source, sched::SchedEvent, stacks::StackEvent};
    let (pid, kstack, ustack) = match hooks.source {
        Source::Stacks => (
            offset_of!(StackEvent, pid),
            offset_of!(StackEvent, kstack),
            offset_of!(StackEvent, ustack),
        ),
        Source::Sched => (
            offset_of!(SchedEvent, pid),
            offset_of!(SchedEvent, kstack),
            offset_of!(SchedEvent, ustack),
        ),
        _ => return None,
    };
    let word = |at: usize| Some(u32::from_le_bytes(record.get(at..at + 4)?.try_into().ok()?));
    Some((
        word(pid)?,
        word(kstack)?.cast_signed(),
        word(ustack)?.cast_signed(),
    ))
}

impl Recorder {
    /// A syscall record into the `syscalls` source, its thread noted.
    fn store_syscall(&mut self, now: u64, record: &[u8]) -> Result<()> {
        // Arrival is when weft drained it; the kernel's exit time is the
        // producer's timestamp.
        match self.syscalls.append(&mut self.store, now, record)? {
            Some(stored) => {
                if let Some((latencies, _)) = &mut self.latencies {
                    latencies.add(stored.nr, stored.duration_ns);
                }
                self.triggers.check(
                    &mut self.store,
                    stored.source,
                    now,
                    Some(stored.exit_ns),
                    stored.payload,
                )
            }
            None => Ok(()),
        }
    }

    /// Another source's record into its store source, its thread noted.
    fn store_event(&mut self, hooks: &'static SourceHooks, now: u64, record: &[u8]) -> Result<()> {
        let Some(&(source, layout)) = self.spec_sources.get(&hooks.source) else {
            return Ok(());
        };
        let ts = layout.time(record);
        if let Some(ts) = ts {
            let lag = now.saturating_sub(ts);
            self.lag = (self.lag.0.max(lag), self.lag.1.max(lag));
        }
        let named;
        let record = match &mut self.files {
            Some(files) if hooks.source == weft_abi::events::Source::Args => {
                named = files.name(&mut self.store, now, record)?;
                &named[..]
            }
            _ => record,
        };
        self.store_record(source, now, ts, &record[STORED_FROM..])?;
        match hooks.source {
            weft_abi::events::Source::Conns => self.triggers.note_conn(record),
            weft_abi::events::Source::Net => self.triggers.note_packet(record),
            _ => {}
        }
        // The thread's name first: a `/proc` read, while naming a new
        // stack's frames may read the process's files for long, and a
        // short-lived thread may be gone after.
        if let Some((pid, tid)) = layout.thread(record) {
            self.syscalls
                .tasks()
                .observe(&mut self.store, now, pid, tid, false)?;
        }
        if let (Some(frames), Some((pid, kstack, ustack))) =
            (&mut self.frames, stack_ids(hooks, record))
        {
            frames.note(&mut self.store, now, pid, kstack, ustack)?;
        }
        Ok(())
    }

    /// An application's new source, or a record of one it defined.
    fn store_app(&mut self, now: u64, message: Message) -> Result<()> {
        match message {
            Message::Define { name, fields } => self.define_app_source(&name, &fields),
            Message::Record { name, ts, values } => {
                let Some(&source) = self.app_sources.get(&name) else {
                    return Ok(());
                };
                let payload: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                self.store_record(source, now, Some(ts), &payload)
            }
        }
    }

    /// Stores the calls of a decoded PT capture.
    fn store_calls(&mut self, decoded: &pt_calls::Decoded) -> Result<()> {
        let log = match &mut self.calls {
            Some(log) => log,
            None => self
                .calls
                .insert(pt_calls::CallLog::define(&mut self.store)?),
        };
        let done = log.append(&mut self.store, weft_store::now_ns(), &decoded.calls)?;
        if let Some(waiting) = &decoded.done {
            let _ = waiting.send(done);
        }
        let totals = &mut self.call_totals;
        totals.captures += 1;
        totals.stored += done.stored;
        totals.late += done.late;
        totals.decoding_errors += decoded.errors as u64;
        log::info!(
            "weft: {} calls of {} stored ({} too late, {} decoding error(s))",
            done.stored,
            decoded.dir.display(),
            done.late,
            decoded.errors
        );
        Ok(())
    }

    /// Appends a record that arrived `now` and tests it against the
    /// triggers.
    fn store_record(
        &mut self,
        source: SourceId,
        now: u64,
        time: Option<u64>,
        payload: &[u8],
    ) -> Result<()> {
        self.store.append_at(source, now, time, payload)?;
        self.triggers
            .check(&mut self.store, source, now, time, payload)
    }

    /// Defines an application's source (each field an i64) and notes its
    /// field kinds in `weft.json` for queries.
    fn define_app_source(&mut self, name: &str, fields: &[(String, ValueKind)]) -> Result<()> {
        let source = match self.store.define_source(name, registry::app_fields(fields)) {
            // A definition the store refuses is that application's
            // problem: its records are dropped, the recording goes on.
            Err(weft_store::Error::Invalid(why)) => {
                log::warn!("weft: application source {name} refused: {why}");
                return Ok(());
            }
            defined => defined?,
        };
        self.app_sources.insert(Arc::from(name), source);
        let kinds = fields
            .iter()
            .map(|(field, kind)| (field.clone(), kind.name().to_owned()))
            .collect();
        self.metadata.app_sources.insert(name.to_owned(), kinds);
        metadata::write_metadata(&self.dir, &self.metadata)?;
        self.triggers.bind_waiting(&self.store, &self.metadata)
    }

    /// The counters a terminal UI shows.
    fn health_of(&self, accounting: &Accounting) -> Health {
        let mut sources: Vec<_> = accounting
            .0
            .iter()
            .map(|account| SourceHealth {
                name: account.name.into(),
                received: account.received(),
                lost: account.lost(),
            })
            .collect();
        if self.call_totals.captures > 0 {
            sources.push(SourceHealth {
                name: registry::CALLS.into(),
                received: self.call_totals.stored,
                lost: self.call_totals.late,
            });
        }
        Health {
            sources,
            drain_lag_ns: self.lag.0,
            disk_bytes: self.dir.disk_use().unwrap_or(0),
            pins_released: self.store.pins_released(),
            cpu_permille: Some(per_mille(
                Duration::from_secs_f64(weft_capture::usage::cpu_seconds()),
                self.start.elapsed(),
            )),
            bpf_ns_per_syscall: (accounting.0.iter())
                .find(|a| matches!(a.losses, crate::probe::Losses::Syscalls(_)))
                .and_then(|a| ebpf::ProgramCost::per_syscall(&a.costs)),
            ended: false,
        }
    }

    fn draw_status(&self, accounting: &Accounting) {
        let elapsed = self.start.elapsed().as_secs_f64();
        let received = accounting.received();
        let bytes = self.dir.disk_use().unwrap_or(0);
        let left = self.duration.map_or_else(String::new, |d| {
            format!(", {:.0}s left", (d.as_secs_f64() - elapsed).max(0.0))
        });
        let lag = if self.lag.0 > 0 {
            format!(", drain lag {:.1}ms", self.lag.0 as f64 / 1e6)
        } else {
            String::new()
        };
        let mut stderr = std::io::stderr().lock();
        let _ = write!(
            stderr,
            "\r\x1b[Kweft record: {received} events ({:.1}k/s), lost {}{lag}, {:.1} MiB on disk, {elapsed:.0}s{left}",
            received as f64 / elapsed.max(1e-9) / 1e3,
            accounting.lost(),
            bytes as f64 / f64::from(1 << 20),
        );
        let _ = stderr.flush();
    }
}

/// `part` in thousandths of `whole`.
fn per_mille(part: Duration, whole: Duration) -> u64 {
    let ratio = part.as_micros() * 1000 / whole.as_micros().max(1);
    u64::try_from(ratio).unwrap_or(u64::MAX)
}
