//! `weft record`'s consumer: the store, what puts each drained record into
//! it ([`Intake`]), the triggers that test each record, and what each tick
//! does besides, as a list of [`Stage`]s: manual triggers, the loss log,
//! the PT captures' calls, and the counters a UI, the metrics or the
//! terminal read.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex, PoisonError, mpsc::Receiver},
    time::{Duration, Instant},
};

use weft_capture::{
    metadata::{self, Lost, Metadata},
    pt_calls,
    registry::{self, ValueKind},
    sources::{Layout, STORED_FROM},
};
use weft_ingest::syscalls::SyscallSink;
use weft_kernel::{ebpf, source::SourceHooks};
use weft_query::health::{Health, SourceHealth};
use weft_store::{SourceId, Store};

use crate::{
    app::Message,
    error::{Error, Result},
    files::FileNames,
    frames::FrameLog,
    histogram, losses,
    probe::{Accounting, Arrival, Consumer},
    travel,
    trigger::Triggers,
};

/// `record`'s consumer.
pub(crate) struct Recorder {
    pub store: Store,
    pub intake: Intake,
    pub triggers: Triggers,
    /// The first store error, and what arrived after it.
    pub failure: Failure,
    /// What each tick does, in order, after the triggers' own tick.
    pub stages: Vec<Box<dyn Stage>>,
    /// What the stages report: the session's start and its PT calls.
    pub report: Report,
    /// Peers' firings, from the peer port.
    pub pins: Option<Receiver<travel::Incoming>>,
}

/// One part of each tick's work.
pub(crate) trait Stage {
    /// Its work this tick.
    fn tick(&mut self, at: &mut Tick<'_>) -> Result<()>;

    /// What it must still store when the session ends, before the store
    /// closes (never after a store error).
    fn finish(&mut self, at: &mut Tick<'_>) -> Result<()> {
        let _ = at;
        Ok(())
    }
}

/// What a stage works on.
pub(crate) struct Tick<'a> {
    pub store: &'a mut Store,
    pub triggers: &'a mut Triggers,
    pub accounting: &'a Accounting,
    pub report: &'a mut Report,
    /// Longest time from a kernel record's timestamp to its store, since
    /// the last tick.
    pub lag_ns: u64,
}

/// What the reporting stages show besides the accounting.
pub(crate) struct Report {
    pub start: Instant,
    pub calls: CallTotals,
}

/// The first store error (it stops the capture at the next tick), and
/// the records received after it, by source: never stored, counted as
/// lost ("store error").
#[derive(Default)]
pub(crate) struct Failure {
    pub error: Option<Error>,
    pub unstored: BTreeMap<&'static str, u64>,
}

impl Failure {
    /// Keeps `result`'s error if it is the first.
    fn keep(&mut self, result: Result<()>) {
        if let Err(error) = result {
            self.error.get_or_insert(error);
        }
    }
}

impl Consumer for Recorder {
    fn take(&mut self, now: u64, arrival: Arrival<'_>) {
        let source = source_of(&arrival);
        if self.failure.error.is_some() {
            *self.failure.unstored.entry(source).or_default() += 1;
            return;
        }
        let stored = self
            .intake
            .take(&mut self.store, &mut self.triggers, now, arrival);
        if let Err(error) = stored {
            self.failure.error = Some(error);
            *self.failure.unstored.entry(source).or_default() += 1;
        }
    }

    fn manual_trigger(&mut self) {
        let fired = self.triggers.manual(&mut self.store, None);
        self.failure.keep(fired);
    }

    fn poke(&mut self) {
        let Some(pins) = &self.pins else { return };
        while let Ok((request, answer)) = pins.try_recv() {
            match self.triggers.from_peer(&mut self.store, &request) {
                Ok(reply) => {
                    // The peer port may have given up waiting.
                    let _ = answer.try_send(reply);
                }
                Err(error) => self.failure.keep(Err(error)),
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
        if self.failure.error.is_some() {
            return Ok(false);
        }
        self.triggers.tick(&mut self.store)?;
        self.each_stage(accounting, |stage, at| stage.tick(at))?;
        self.store.publish();
        self.intake.publish();
        Ok(true)
    }
}

impl Recorder {
    /// Runs each stage's end, keeping the first error.
    pub fn finish_stages(&mut self, accounting: &Accounting) {
        if self.failure.error.is_none() {
            let finished = self.each_stage(accounting, |stage, at| stage.finish(at));
            self.failure.keep(finished);
        }
    }

    /// `step` of each stage in order, until one fails.
    fn each_stage(
        &mut self,
        accounting: &Accounting,
        step: fn(&mut dyn Stage, &mut Tick<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut at = Tick {
            store: &mut self.store,
            triggers: &mut self.triggers,
            accounting,
            report: &mut self.report,
            lag_ns: self.intake.lag.0,
        };
        for stage in &mut self.stages {
            step(stage.as_mut(), &mut at)?;
        }
        Ok(())
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

/// What puts each drained record into the store: the syscall sink (and
/// every source's thread names), each event source's store source, the
/// applications' sources, the stacks' frames and the files' names.
pub(crate) struct Intake {
    pub syscalls: SyscallSink,
    /// The store source of each event source, and where its records'
    /// timestamp and thread are.
    pub spec_sources: HashMap<weft_abi::events::Source, (SourceId, Layout)>,
    /// Application sources defined so far.
    pub app_sources: HashMap<Arc<str>, SourceId>,
    /// `weft.json`, rewritten when an application defines a source.
    pub metadata: Metadata,
    /// Each syscall's latency histogram and where scrapes read it, when
    /// metrics are served.
    pub latencies: Option<(histogram::Latencies, histogram::Shared)>,
    /// The functions of the stacks records name, with the stack source.
    pub frames: Option<FrameLog>,
    /// With the `args` source, the names of its records' files.
    pub files: Option<FileNames>,
    /// Longest time from a kernel record's timestamp to its arrival in the
    /// store, since the last tick and over the whole session.
    pub lag: (u64, u64),
}

impl Intake {
    fn take(
        &mut self,
        store: &mut Store,
        triggers: &mut Triggers,
        now: u64,
        arrival: Arrival<'_>,
    ) -> Result<()> {
        match arrival {
            Arrival::Syscall(record) => self.syscall(store, triggers, now, record),
            Arrival::Event(hooks, record) => self.event(store, triggers, hooks, now, record),
            Arrival::App(message) => self.app(store, triggers, now, message),
        }
    }

    /// A syscall record into the `syscalls` source, its thread noted.
    fn syscall(
        &mut self,
        store: &mut Store,
        triggers: &mut Triggers,
        now: u64,
        record: &[u8],
    ) -> Result<()> {
        // Arrival is when weft drained it; the kernel's exit time is the
        // producer's timestamp.
        let Some(stored) = self.syscalls.append(store, now, record)? else {
            return Ok(());
        };
        if let Some((latencies, _)) = &mut self.latencies {
            latencies.add(stored.nr, stored.duration_ns);
        }
        let time = Some(stored.exit_ns);
        triggers.check(store, stored.source, now, time, stored.payload)
    }

    /// Another source's record into its store source, its thread noted.
    fn event(
        &mut self,
        store: &mut Store,
        triggers: &mut Triggers,
        hooks: &'static SourceHooks,
        now: u64,
        record: &[u8],
    ) -> Result<()> {
        use weft_abi::events::Source;
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
            Some(files) if hooks.source == Source::Args => {
                named = files.name(store, now, record)?;
                &named[..]
            }
            _ => record,
        };
        store.append_at(source, now, ts, &record[STORED_FROM..])?;
        triggers.check(store, source, now, ts, &record[STORED_FROM..])?;
        match hooks.source {
            Source::Conns => triggers.note_conn(record),
            Source::Net => triggers.note_packet(record),
            _ => {}
        }
        // The thread's name first: a `/proc` read, while naming a new
        // stack's frames may read the process's files for long, and a
        // short-lived thread may be gone after.
        if let Some((pid, tid)) = layout.thread(record) {
            self.syscalls.tasks().observe(store, now, pid, tid, false)?;
        }
        if let (Some(frames), Some((pid, kstack, ustack))) =
            (&mut self.frames, stack_ids(hooks, record))
        {
            frames.note(store, now, pid, kstack, ustack)?;
        }
        Ok(())
    }

    /// An application's new source, or a record of one it defined.
    fn app(
        &mut self,
        store: &mut Store,
        triggers: &mut Triggers,
        now: u64,
        message: Message,
    ) -> Result<()> {
        match message {
            Message::Define { name, fields } => {
                self.define_app_source(store, &name, &fields)?;
                triggers.bind_waiting(store, &self.metadata)
            }
            Message::Record { name, ts, values } => {
                let Some(&source) = self.app_sources.get(&name) else {
                    return Ok(());
                };
                let payload: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                store.append_at(source, now, Some(ts), &payload)?;
                triggers.check(store, source, now, Some(ts), &payload)
            }
        }
    }

    /// Defines an application's source (each field an i64) and notes its
    /// field kinds in `weft.json` for queries.
    fn define_app_source(
        &mut self,
        store: &mut Store,
        name: &str,
        fields: &[(String, ValueKind)],
    ) -> Result<()> {
        let source = match store.define_source(name, registry::app_fields(fields)) {
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
        metadata::write_metadata(store.dir(), &self.metadata)?;
        Ok(())
    }

    /// Hands the latency histograms to the metrics' scrapes, and starts the
    /// next tick's lag.
    fn publish(&mut self) {
        if let Some((latencies, shared)) = &self.latencies {
            latencies.publish(shared);
        }
        self.lag.0 = 0;
    }
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

/// Manual triggers asked through the live socket, with their notes.
pub(crate) struct ManualNotes(pub Receiver<String>);

impl Stage for ManualNotes {
    fn tick(&mut self, at: &mut Tick<'_>) -> Result<()> {
        while let Ok(note) = self.0.try_recv() {
            at.triggers.manual(at.store, Some(note))?;
        }
        Ok(())
    }
}

/// What each source lost, noted each tick and once more at the end.
impl Stage for losses::LossLog {
    fn tick(&mut self, at: &mut Tick<'_>) -> Result<()> {
        self.note(at.store, weft_store::now_ns(), at.accounting)
    }

    fn finish(&mut self, at: &mut Tick<'_>) -> Result<()> {
        self.tick(at)
    }
}

/// The PT captures whose calls a session stored.
#[derive(Debug, Default)]
pub(crate) struct CallTotals {
    pub captures: u64,
    pub stored: u64,
    pub late: u64,
    pub decoding_errors: u64,
}

impl CallTotals {
    pub fn noted(&self) -> Lost {
        // Late calls are the source's losses.
        Lost {
            lost: self.late,
            received: Some(self.stored),
            captures: Some(self.captures),
            decoding_errors: Some(self.decoding_errors),
            ..Lost::default()
        }
    }

    pub fn line(&self) -> String {
        format!(
            "calls: {} from {} PT capture(s), {} too late to store, {} decoding error(s)",
            self.stored, self.captures, self.late, self.decoding_errors
        )
    }
}

/// Decoded PT captures (from triggers and the live socket) into the
/// `calls` source.
pub(crate) struct PtCalls {
    pub log: Option<pt_calls::CallLog>,
    pub decoded: Receiver<pt_calls::Decoded>,
}

impl PtCalls {
    /// Stores the calls of a decoded PT capture.
    fn store(&mut self, at: &mut Tick<'_>, decoded: &pt_calls::Decoded) -> Result<()> {
        let log = match &mut self.log {
            Some(log) => log,
            None => self.log.insert(pt_calls::CallLog::define(at.store)?),
        };
        let done = log.append(at.store, weft_store::now_ns(), &decoded.calls)?;
        if let Some(waiting) = &decoded.done {
            let _ = waiting.send(done);
        }
        let totals = &mut at.report.calls;
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
}

impl Stage for PtCalls {
    fn tick(&mut self, at: &mut Tick<'_>) -> Result<()> {
        while let Ok(decoded) = self.decoded.try_recv() {
            self.store(at, &decoded)?;
        }
        Ok(())
    }

    fn finish(&mut self, at: &mut Tick<'_>) -> Result<()> {
        // The captures under way have ended (`record`'s finish waits).
        self.tick(at)
    }
}

/// The counters a terminal UI (or the metrics) reads, renewed each tick.
pub(crate) struct HealthFeed(pub Arc<Mutex<Health>>);

impl Stage for HealthFeed {
    fn tick(&mut self, at: &mut Tick<'_>) -> Result<()> {
        let accounting = at.accounting;
        let mut sources: Vec<_> = (accounting.0.iter())
            .map(|account| SourceHealth {
                name: account.name.into(),
                received: account.received(),
                lost: account.lost(),
            })
            .collect();
        let calls = &at.report.calls;
        if calls.captures > 0 {
            sources.push(SourceHealth {
                name: registry::CALLS.into(),
                received: calls.stored,
                lost: calls.late,
            });
        }
        let now = Health {
            sources,
            drain_lag_ns: at.lag_ns,
            disk_bytes: at.store.dir().disk_use().unwrap_or(0),
            pins_released: at.store.pins_released(),
            cpu_permille: Some(per_mille(
                Duration::from_secs_f64(weft_capture::usage::cpu_seconds()),
                at.report.start.elapsed(),
            )),
            bpf_ns_per_syscall: (accounting.0.iter())
                .find(|a| matches!(a.losses, crate::probe::Losses::Syscalls(_)))
                .and_then(|a| ebpf::ProgramCost::per_syscall(&a.costs)),
            ended: false,
        };
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = now;
        Ok(())
    }
}

/// `part` in thousandths of `whole`.
fn per_mille(part: Duration, whole: Duration) -> u64 {
    let ratio = part.as_micros() * 1000 / whole.as_micros().max(1);
    u64::try_from(ratio).unwrap_or(u64::MAX)
}

/// Where a recording's progress goes each tick (the binary draws it on
/// its terminal): what was received and lost, how far the drain is
/// behind, the capture's size and the time.
pub struct Progress {
    pub received: u64,
    pub lost: u64,
    pub lag_ns: u64,
    pub disk_bytes: u64,
    pub elapsed: Duration,
    /// What is left of `--duration`, if one was given.
    pub left: Option<Duration>,
}

/// Hands [`Progress`] to the plan's `progress` each tick.
pub(crate) struct ProgressFeed {
    pub show: fn(&Progress),
    pub duration: Option<Duration>,
}

impl Stage for ProgressFeed {
    fn tick(&mut self, at: &mut Tick<'_>) -> Result<()> {
        let elapsed = at.report.start.elapsed();
        (self.show)(&Progress {
            received: at.accounting.received(),
            lost: at.accounting.lost(),
            lag_ns: at.lag_ns,
            disk_bytes: at.store.dir().disk_use().unwrap_or(0),
            elapsed,
            left: self.duration.map(|d| d.saturating_sub(elapsed)),
        });
        Ok(())
    }
}
