//! Triggers (`weft record --trigger 'SOURCE where CONDITION'`): a condition
//! of the query language tested on every record as it is stored. A match
//! pins the window around it (`--keep -30s..+10s`), so that retention
//! (`--retain`, `--max-disk`) keeps everything every source recorded then,
//! and is logged in the `triggers` source. This is retroactive sampling:
//! record everything, keep what a symptom points at.
//!
//! A match inside its trigger's current window extends that window (one
//! firing), up to [`WINDOW_CAP`] times the `--keep` span; a match after it,
//! or one that would stretch it past the cap, fires again, at most
//! `--max-triggers` times per period. And the store keeps pinned windows
//! within their share of `--max-disk`, releasing the oldest past it, so a
//! trigger that matches all the time cannot pin the whole ring or pass the
//! budget. SIGUSR2 fires the manual trigger, number 0.

use std::{collections::VecDeque, sync::mpsc::Sender};

use crate::error::{Context as _, Error, Result, bail};
use hdrhistogram::Histogram;
use weft_query::{Column, Kind, ast::Op, bind::Pred};
use weft_store::{SourceId, Store};

use weft_capture::{
    capture,
    metadata::{Metadata, NoteLog, PeerLog, RuleLog, TraceLog, TriggerLog},
    pt_calls::Decoded,
    registry::is_weft_source,
};

use crate::{
    hosts::{monotonic, now_wall},
    travel::{Clock, PinReply, PinRequest, Travel},
};

/// What to keep around a match, and how often a trigger may fire; by
/// default nothing around it, and no limit.
#[derive(Clone, Copy, Debug, Default)]
pub struct Policy {
    /// ns kept before the matching record's own time.
    pub before: u64,
    /// ns kept after it.
    pub after: u64,
    /// At most this many firings per trigger in `per` ns.
    pub limit: Option<(usize, u64)>,
}

/// One `--trigger`, or the manual one.
struct Rule {
    text: String,
    state: State,
    /// Times of recent firings' records, for the rate limit.
    recent: VecDeque<u64>,
    /// The window of the last firing, around its record's own time.
    window: Option<(u64, u64)>,
    /// Where that firing's pin starts in the store (arrival times).
    pin_start: u64,
    fired: u64,
    /// Matches inside the current window: they extend it.
    merged: u64,
    /// Windows closed at the cap, their next match a new firing.
    capped: u64,
    /// Matches the rate limit refused.
    suppressed: u64,
    /// Whether the last match was a new firing (not merged or refused).
    fired_now: bool,
    /// The trace ids of the records that fired it, with their times (the
    /// first [`MAX_TRACES`]).
    traces: Vec<(u64, u128)>,
}

/// Firings' trace ids a rule lists in `weft.json` at most.
const MAX_TRACES: usize = 256;

/// What a matching record says of itself, where its source has it.
#[derive(Clone, Copy, Default)]
struct Matched {
    /// Its process, for the hook.
    pid: Option<i64>,
    /// Its W3C trace id, for the hook, the message and `weft.json`.
    trace: Option<u128>,
}

enum State {
    /// Fired by SIGUSR2 only.
    Manual,
    /// On an application source not defined yet.
    Waiting,
    Bound(Test),
    /// Its application source came without the fields it names.
    Broken,
}

/// The condition of a rule, bound to its source's columns.
struct Test {
    source: SourceId,
    /// The comparisons with fixed values.
    pred: Pred,
    /// `FIELD OP pQ`: against that percentile of the field over the
    /// records the rest of the condition selected in the last window.
    thresholds: Vec<SlidingPercentile>,
    columns: Vec<Column>,
    /// The source's `pid` column: whose record matched, for the hook.
    pid: Option<usize>,
    /// Its `tid` column: the thread whose connections a firing travels
    /// along.
    tid: Option<usize>,
    /// Its trace id column (an application's `trace_id` field).
    trace: Option<usize>,
}

/// A live percentile: per-second histograms over a sliding window.
struct SlidingPercentile {
    column: usize,
    op: Op,
    q: f64,
    /// The window, in ns (`last 1m`).
    window: u64,
    /// One histogram per second of arrival time, oldest first.
    seconds: VecDeque<(u64, Histogram<u64>)>,
    /// Their sum.
    total: Histogram<u64>,
    /// The percentile, recomputed at most every [`RECOMPUTE_NS`].
    value: Option<i64>,
    computed_at: u64,
}

/// How often a live percentile is recomputed: reading one costs a pass
/// over the histogram's buckets, too much for every record.
const RECOMPUTE_NS: u64 = 100_000_000;

/// How many times its `--keep` span a firing's window may grow to as
/// matches extend it: a condition that matches steadily (`dur > 1s` holds
/// for every idle `epoll_wait`) would otherwise stretch one window, and
/// its pin, over the whole recording.
pub const WINDOW_CAP: u64 = 10;

pub struct Triggers {
    rules: Vec<Rule>,
    policy: Policy,
    /// What each firing does besides keeping its window.
    actions: Actions,
    /// PT captures under way, joined before weft exits (each ends at its
    /// watchdog's deadline at the latest).
    captures: Vec<std::thread::JoinHandle<()>>,
    /// Notes of manual triggers, with their arrival times.
    notes: Vec<(u64, String)>,
    /// The log source, defined at the first firing.
    log: Option<SourceId>,
    /// Window extensions not yet written to the store, by pin start to
    /// new end (written each tick: one metadata write a second, however
    /// often matches extend them).
    pending: std::collections::BTreeMap<u64, u64>,
    /// Firings peers asked for, under the same rate limit as a trigger's.
    peers: Rule,
}

/// The id firings from peers have in the `triggers` source.
pub const PEER_FIRING: u64 = 0xffff;

/// The longest window a peer may have kept when `--keep` keeps nothing
/// around this host's own firings, ns.
const PEER_WINDOW_CAP: u64 = 60_000_000_000;

impl Triggers {
    /// Parses and binds each `SOURCE where CONDITION` against the sources
    /// `store` has now.
    pub fn new(
        store: &Store,
        metadata: &Metadata,
        texts: &[String],
        policy: Policy,
        actions: Actions,
    ) -> Result<Self> {
        let mut rules = vec![Rule::new("manual (SIGUSR2)".into(), State::Manual)];
        rules.extend(
            texts
                .iter()
                .map(|text| Rule::new(text.clone(), State::Waiting)),
        );
        let mut triggers = Self {
            rules,
            policy,
            actions,
            captures: Vec::new(),
            notes: Vec::new(),
            log: None,
            pending: std::collections::BTreeMap::new(),
            peers: Rule::new("from peers".into(), State::Manual),
        };
        if texts.is_empty() {
            return Ok(triggers);
        }
        let catalog = capture::catalog(&store.reader().snapshot(), metadata, false)?;
        for rule in &mut triggers.rules[1..] {
            match bind(&catalog, &rule.text).with_context(|| format!("--trigger {}", rule.text))? {
                Some(test) => rule.state = State::Bound(test),
                None => log::warn!(
                    "weft: --trigger {}: waits for an application to define its source",
                    rule.text
                ),
            }
        }
        Ok(triggers)
    }

    /// Binds the triggers waiting for an application source, after one was
    /// defined; one that does not fit its source says why and is dropped
    /// (recording goes on).
    pub fn bind_waiting(&mut self, store: &Store, metadata: &Metadata) -> Result<()> {
        if !self.rules.iter().any(|r| matches!(r.state, State::Waiting)) {
            return Ok(());
        }
        let catalog = capture::catalog(&store.reader().snapshot(), metadata, false)?;
        for rule in &mut self.rules {
            if !matches!(rule.state, State::Waiting) {
                continue;
            }
            match bind(&catalog, &rule.text) {
                Ok(Some(test)) => rule.state = State::Bound(test),
                Ok(None) => {}
                Err(error) => {
                    log::warn!("weft: --trigger {}: {error:#}; it is dropped", rule.text);
                    rule.state = State::Broken;
                }
            }
        }
        Ok(())
    }

    /// Tests a record of `source` that arrived `now`; `time` is its own
    /// timestamp, when it has one.
    pub fn check(
        &mut self,
        store: &mut Store,
        source: SourceId,
        now: u64,
        time: Option<u64>,
        payload: &[u8],
    ) -> Result<()> {
        let time = time.unwrap_or(now);
        for id in 1..self.rules.len() {
            let State::Bound(test) = &mut self.rules[id].state else {
                continue;
            };
            if test.source == source && test.matches(now, time, payload) {
                let value = |column: Option<usize>| {
                    column.and_then(|c| test.columns[c].value(time, payload))
                };
                let (pid, tid) = (value(test.pid), value(test.tid));
                let trace = test.trace.and_then(|c| test.columns[c].id(payload));
                self.fire(store, id, now, time, Matched { pid, trace })?;
                if let (Some(travel), Some(tid)) = (&mut self.actions.travel, tid)
                    && self.rules[id].fired_now
                {
                    let window = self.rules[id].window.expect("a firing has its window");
                    let tid = u32::try_from(tid).unwrap_or_default();
                    travel.fired(id, self.rules[id].text.clone(), tid, window);
                }
            }
        }
        Ok(())
    }

    /// SIGUSR2 or `weft trigger [--note TEXT]`: keeps the window around
    /// now.
    pub fn manual(&mut self, store: &mut Store, note: Option<String>) -> Result<()> {
        let now = weft_store::now_ns();
        if let Some(note) = note.filter(|n| !n.is_empty()) {
            self.notes.push((now, note));
        }
        self.fire(store, 0, now, now, Matched::default())
    }

    /// Keep the window around `now` for trigger `id`, whose matching
    /// record (`matched`) has time `time`.
    fn fire(
        &mut self,
        store: &mut Store,
        id: usize,
        now: u64,
        time: u64,
        matched: Matched,
    ) -> Result<()> {
        let Policy {
            before,
            after,
            limit,
        } = self.policy;
        let rule = &mut self.rules[id];
        rule.fired_now = false;
        // Windows, merging and the rate limit go by the record's own time:
        // records drained in one batch arrive together however far apart
        // they happened. The pin also covers the arrival window, as the
        // store retires chunks by arrival.
        let window = (time.saturating_sub(before), time + after);
        let pinned = (
            window.0.min(now.saturating_sub(before)),
            window.1.max(now + after),
        );
        if let Some(current) = &mut rule.window
            && window.0 <= current.1
            && current.0 <= window.1
        {
            let grown = (current.0.min(window.0), current.1.max(window.1));
            if grown.1 - grown.0 <= WINDOW_CAP.saturating_mul(before + after) {
                *current = grown;
                rule.merged += 1;
                let end = self.pending.entry(rule.pin_start).or_insert(pinned.1);
                *end = (*end).max(pinned.1);
                return Ok(());
            }
            // Past the cap the window closes, and this match is a new
            // firing, under the rate limit.
            rule.capped += 1;
            rule.window = None;
        }
        if let Some((most, per)) = limit {
            while rule.recent.front().is_some_and(|t| t + per <= time) {
                rule.recent.pop_front();
            }
            if rule.recent.len() >= most {
                rule.suppressed += 1;
                return Ok(());
            }
            rule.recent.push_back(time);
        }
        rule.window = Some(window);
        rule.pin_start = pinned.0;
        rule.fired += 1;
        rule.fired_now = true;
        let trace = matched
            .trace
            .map(|trace| format!(" on trace {trace:032x}"))
            .unwrap_or_default();
        log::info!(
            "weft: trigger {id} ({}) fired{trace}: keeping {:.1}s before and {:.1}s after",
            rule.text,
            before as f64 / 1e9,
            after as f64 / 1e9
        );
        if let Some(trace) = matched.trace
            && rule.traces.len() < MAX_TRACES
        {
            rule.traces.push((time, trace));
        }
        store.pin(pinned.0, pinned.1)?;
        let log = match self.log {
            Some(log) => log,
            None => *self.log.insert(define_log(store)?),
        };
        let record: Vec<u8> = [id as u64, window.0, window.1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        store.append_at(log, now, Some(time), &record)?;
        if let Some(command) = &self.actions.command {
            let note = if id == 0 {
                self.notes.last().map(|(_, n)| n.as_str())
            } else {
                None
            };
            run_hook(
                command,
                &self.actions.dir,
                &Firing {
                    id,
                    condition: &self.rules[id].text,
                    time,
                    window,
                    matched,
                    note: note.unwrap_or_default(),
                },
            );
        }
        if let Some((duration, calls, take)) = &self.actions.pt {
            self.captures.retain(|c| !c.is_finished());
            let (duration, calls) = (*duration, calls.clone());
            let output = self.actions.dir.join(format!("pt-{id}-{time}"));
            self.captures.extend(capture_pt(
                id,
                matched.pid,
                (duration, output),
                calls,
                *take,
            ));
        }
        Ok(())
    }

    /// Notes a `conns` record (which thread used which connection), for
    /// firings to travel along.
    pub fn note_conn(&mut self, record: &[u8]) {
        if let (Some(travel), Some(event)) = (
            &mut self.actions.travel,
            weft_abi::conns::ConnEvent::read(record),
        ) {
            travel.recent.note(&event);
        }
    }

    /// Notes a `net` record (a TCP segment leaving or arriving), to bound
    /// the clocks of the peers firings travel to.
    pub fn note_packet(&mut self, record: &[u8]) {
        if let (Some(travel), Some(packet)) = (
            &mut self.actions.travel,
            weft_abi::net::PacketEvent::read(record),
        ) {
            travel.segments.note(&packet);
        }
    }

    /// A drain ended: the firings in it ask their peers now, their
    /// threads' connections noted.
    pub fn drained(&mut self) {
        if let Some(travel) = &mut self.actions.travel {
            travel.drained();
        }
    }

    /// A peer asks to keep a firing's window here: kept once per firing
    /// id, under this host's rate limit, at most as long as its own
    /// windows may grow, then asked along this host's connections.
    pub fn from_peer(&mut self, store: &mut Store, request: &PinRequest) -> Result<PinReply> {
        let received_wall = now_wall();
        let Some(travel) = &mut self.actions.travel else {
            return Ok(PinReply {
                kept: false,
                note: "this recorder keeps no firings from peers".into(),
                received_wall,
                replied_wall: now_wall(),
                segments_clock: None,
            });
        };
        let segments_clock = travel.segments_clock(request);
        let reply = |kept: bool, note: &str| PinReply {
            kept,
            note: note.to_owned(),
            received_wall,
            replied_wall: now_wall(),
            segments_clock,
        };
        let clock = Travel::clock(request, segments_clock);
        if !travel.first_time(&request.id) {
            travel.received(request, clock, None, "seen before");
            return Ok(reply(false, "this firing was kept here already"));
        }
        let now = weft_store::now_ns();
        if let Some((most, per)) = self.policy.limit {
            let recent = &mut self.peers.recent;
            while recent.front().is_some_and(|t| t + per <= now) {
                recent.pop_front();
            }
            if recent.len() >= most {
                self.peers.suppressed += 1;
                travel.received(request, clock, None, "refused by the rate limit");
                return Ok(reply(
                    false,
                    "refused by this host's rate limit (--max-triggers)",
                ));
            }
            recent.push_back(now);
        }
        let window = peer_window(request, clock, self.policy);
        store.pin(window.0, window.1)?;
        let log = match self.log {
            Some(log) => log,
            None => *self.log.insert(define_log(store)?),
        };
        let record: Vec<u8> = [PEER_FIRING, window.0, window.1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        store.append_at(log, now, Some(now), &record)?;
        self.peers.fired += 1;
        log::info!(
            "weft: keeping firing {} of {} (asked by {}, hop {})",
            request.id,
            request.origin,
            request.from,
            request.hop
        );
        travel.received(request, clock, Some(window), "kept");
        travel.forward(request, window);
        Ok(reply(true, "kept"))
    }

    /// Writes the extension of a window that matches stretched.
    pub fn tick(&mut self, store: &mut Store) -> Result<()> {
        for (start, end) in std::mem::take(&mut self.pending) {
            store.pin(start, end)?;
        }
        Ok(())
    }

    /// Each trigger and what it did, for `weft.json`.
    pub fn log(&self) -> TriggerLog {
        let rules = (self.rules.iter().enumerate())
            .map(|(id, r)| RuleLog {
                id,
                condition: r.text.clone(),
                fired: r.fired,
                merged: r.merged,
                capped: r.capped,
                suppressed: r.suppressed,
                traces: (r.traces.iter())
                    .map(|(time, trace)| TraceLog {
                        time_ns: *time,
                        trace_id: format!("{trace:032x}"),
                    })
                    .collect(),
            })
            .collect();
        let notes = (self.notes.iter())
            .map(|(time, note)| NoteLog {
                time_ns: *time,
                note: note.clone(),
            })
            .collect();
        let peers = self.actions.travel.as_ref().map(|travel| PeerLog {
            kept: self.peers.fired,
            suppressed: self.peers.suppressed,
            ..travel.log()
        });
        TriggerLog {
            keep_before_ns: self.policy.before,
            keep_after_ns: self.policy.after,
            rules,
            notes,
            peers,
        }
    }
}

/// The window a peer's request keeps here, monotonic ns: its wall-clock
/// window moved onto this host's clock and widened by that estimate's
/// error, no longer than this host keeps.
fn peer_window(request: &PinRequest, clock: Clock, policy: Policy) -> (u64, u64) {
    let here = |wall: i64| monotonic(wall.saturating_add(clock.offset_ns));
    let start = here(request.start_wall).saturating_sub(clock.error_ns);
    let end = here(request.end_wall).saturating_add(clock.error_ns);
    let cap = match policy.before + policy.after {
        0 => PEER_WINDOW_CAP,
        span => WINDOW_CAP.saturating_mul(span),
    };
    if end.saturating_sub(start) <= cap {
        return (start, end.max(start));
    }
    let middle = start + (end - start) / 2;
    (middle.saturating_sub(cap / 2), middle + cap / 2)
}

/// What firings do besides keeping their windows.
#[derive(Default)]
pub struct Actions {
    /// The capture directory.
    pub dir: std::path::PathBuf,
    /// A shell command run at each firing (`--on-trigger`).
    pub command: Option<String>,
    /// How long to capture Intel PT of the matching process
    /// (`--pt-on-trigger`), when this CPU has PT, where its decoded calls
    /// go to be stored, and what takes and decodes it.
    pub pt: Option<(std::time::Duration, Sender<Decoded>, CapturePt)>,
    /// Asks peers to keep the same window (`--peer-listen`).
    pub travel: Option<crate::travel::Travel>,
}

/// Takes Intel PT of process `pid` for `duration` into the new directory
/// `output` and sends its decoded calls to `to`. The binary supplies it:
/// capture and decoding are Intel PT's crates, which recording does not
/// depend on.
pub type CapturePt = fn(
    pid: u32,
    duration: std::time::Duration,
    output: &std::path::Path,
    to: &Sender<Decoded>,
) -> Result<()>;

/// How long closing a recording waits for the PT captures under way to
/// be decoded and stored: a capture ends at its watchdog's deadline, but
/// decoding a large trace, or a symbol lookup on a slow file, has none,
/// and Ctrl-C must still close the capture.
pub const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl Triggers {
    /// Waits up to `limit` for the PT captures under way; returns how many
    /// it gave up on (left running until weft exits, their calls not
    /// stored).
    pub fn join_captures(&mut self, limit: std::time::Duration) -> usize {
        let deadline = std::time::Instant::now() + limit;
        while self.captures.iter().any(|c| !c.is_finished()) && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let (done, running): (Vec<_>, Vec<_>) = self
            .captures
            .drain(..)
            .partition(std::thread::JoinHandle::is_finished);
        for capture in done {
            let _ = capture.join();
        }
        running.len()
    }
}

impl Drop for Triggers {
    fn drop(&mut self) {
        self.join_captures(CLOSE_WAIT);
    }
}

/// Captures PT of process `pid` into `output` and has its calls stored,
/// on a thread of its own so that recording goes on meanwhile.
fn capture_pt(
    id: usize,
    pid: Option<i64>,
    (duration, output): (std::time::Duration, std::path::PathBuf),
    calls: Sender<Decoded>,
    take: CapturePt,
) -> Option<std::thread::JoinHandle<()>> {
    let Some(pid) = pid.and_then(|p| u32::try_from(p).ok()) else {
        log::warn!("weft: trigger {id}: no PT capture: its record names no process");
        return None;
    };
    Some(std::thread::spawn(move || {
        match take(pid, duration, &output, &calls) {
            Ok(()) => log::info!(
                "weft: trigger {id}: PT of process {pid} in {}",
                output.display()
            ),
            Err(error) => log::warn!("weft: trigger {id}: PT of process {pid} failed: {error:#}"),
        }
    }))
}

/// One firing, as the hook sees it.
struct Firing<'a> {
    id: usize,
    condition: &'a str,
    time: u64,
    window: (u64, u64),
    /// The record that matched: its process (`WEFT_TRIGGER_PID`) and trace
    /// id (`WEFT_TRIGGER_TRACE_ID`), each empty where the source has none
    /// or the trigger is manual.
    matched: Matched,
    note: &'a str,
}

/// Runs `command` with `sh -c`, the firing described in its environment;
/// it runs on its own (a thread reaps it), so a slow hook never holds up
/// recording.
fn run_hook(command: &str, dir: &std::path::Path, firing: &Firing) {
    let spawned = std::process::Command::new("sh")
        .args(["-c", command])
        .env("WEFT_CAPTURE", dir)
        .env("WEFT_TRIGGER_ID", firing.id.to_string())
        .env("WEFT_TRIGGER_CONDITION", firing.condition)
        .env("WEFT_TRIGGER_TIME_NS", firing.time.to_string())
        .env("WEFT_TRIGGER_START_NS", firing.window.0.to_string())
        .env("WEFT_TRIGGER_END_NS", firing.window.1.to_string())
        .env(
            "WEFT_TRIGGER_PID",
            firing
                .matched
                .pid
                .map(|p| p.to_string())
                .unwrap_or_default(),
        )
        .env(
            "WEFT_TRIGGER_TRACE_ID",
            (firing.matched.trace)
                .map(|trace| format!("{trace:032x}"))
                .unwrap_or_default(),
        )
        .env("WEFT_TRIGGER_NOTE", firing.note)
        .stdin(std::process::Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(error) => log::warn!("weft: --on-trigger: failed to run sh: {error}"),
    }
}

impl Test {
    /// Whether a record of the test's source matches; its value also
    /// joins the live percentiles when the fixed comparisons hold.
    fn matches(&mut self, now: u64, time: u64, payload: &[u8]) -> bool {
        let columns = &self.columns;
        let value = |c: usize| columns[c].value(time, payload);
        if !self.pred.matches(columns, time, payload) {
            return false;
        }
        // Every threshold is compared first, then learns the value.
        let mut matched = true;
        for live in &mut self.thresholds {
            let Some(v) = value(live.column) else {
                return false;
            };
            matched &= live.holds(v, now);
            live.add(v, now);
        }
        matched
    }
}

impl SlidingPercentile {
    fn new(column: usize, op: Op, q: f64, window: u64) -> Self {
        Self {
            column,
            op,
            q,
            window,
            seconds: VecDeque::new(),
            total: Histogram::new(3).expect("3 significant digits are valid"),
            value: None,
            computed_at: 0,
        }
    }

    /// Whether `v` compares with the percentile as the trigger says. Until
    /// the window holds enough records for the percentile to mean
    /// something (1 / (1 - q): 10 000 for p99.99), nothing holds.
    fn holds(&mut self, v: i64, now: u64) -> bool {
        if now.saturating_sub(self.computed_at) >= RECOMPUTE_NS {
            self.expire(now);
            #[expect(clippy::cast_sign_loss, reason = "q < 1, so the count is positive")]
            let needed = (1.0 / (1.0 - self.q).max(1e-9)).ceil() as u64;
            self.value = (self.total.len() >= needed)
                .then(|| self.total.value_at_quantile(self.q).cast_signed());
            self.computed_at = now;
        }
        self.value.is_some_and(|threshold| {
            Pred::Compare {
                column: 0,
                op: self.op,
                value: threshold,
            }
            .eval(&|_| Some(v))
        })
    }

    fn add(&mut self, v: i64, now: u64) {
        let second = now / 1_000_000_000;
        if self.seconds.back().is_none_or(|(s, _)| *s != second) {
            let empty = Histogram::new_from(&self.total);
            self.seconds.push_back((second, empty));
        }
        let value = v.max(0).unsigned_abs();
        if let Some((_, histogram)) = self.seconds.back_mut() {
            histogram.saturating_record(value);
        }
        self.total.saturating_record(value);
    }

    /// Drops the seconds that left the window.
    fn expire(&mut self, now: u64) {
        let oldest = now.saturating_sub(self.window) / 1_000_000_000;
        while let Some((second, histogram)) = self.seconds.front() {
            if *second >= oldest {
                break;
            }
            // Every value of `histogram` is in `total`.
            let _ = self.total.subtract(histogram);
            self.seconds.pop_front();
        }
    }
}

impl Rule {
    fn new(text: String, state: State) -> Self {
        Self {
            text,
            state,
            recent: VecDeque::new(),
            window: None,
            pin_start: 0,
            fired: 0,
            merged: 0,
            capped: 0,
            suppressed: 0,
            fired_now: false,
            traces: Vec::new(),
        }
    }
}

/// `SOURCE where CONDITION`, bound to the source's columns; `None` when the
/// source is not weft's and not defined yet (an application's).
fn bind(catalog: &weft_query::Catalog, text: &str) -> Result<Option<Test>> {
    let failed = |error: weft_query::Error| Error::Program(error.render(text));
    let query = weft_query::parse(text).map_err(failed)?;
    if !query.stages.is_empty() || query.correlate.is_some() {
        bail!("a trigger is `SOURCE where CONDITION [last WINDOW]`, without stages or correlation");
    }
    let window = match query.window {
        None => None,
        Some(weft_query::ast::Window::Last(ns)) if ns > 0 => Some(ns.unsigned_abs()),
        Some(_) => bail!("a trigger's window is `last DURATION`: the span its percentiles cover"),
    };
    let Some(cond) = &query.filter else {
        bail!(
            "a trigger needs a condition: `{} where ...`",
            query.source.text
        );
    };
    let name = &query.source.text;
    let Some(source) = catalog.source(name) else {
        if is_weft_source(name) {
            bail!("this recording has no source `{name}` (see --sources)");
        }
        return Ok(None);
    };
    let pred = weft_query::bind::bind(source, cond).map_err(failed)?;
    let (thresholds, fixed): (Vec<Pred>, Vec<Pred>) = pred
        .conjuncts()
        .into_iter()
        .partition(|p| matches!(p, Pred::Threshold { .. }));
    if fixed.iter().any(has_threshold) {
        bail!("a percentile threshold must be one of the top-level `and`s");
    }
    let thresholds = match (thresholds.is_empty(), window) {
        (true, None) => Vec::new(),
        (true, Some(_)) => bail!("`last` is for percentile thresholds (`dur > p99.99 last 1m`)"),
        (false, None) => bail!("a percentile threshold needs its window: add `last 1m`"),
        (false, Some(window)) => thresholds
            .into_iter()
            .filter_map(|p| match p {
                Pred::Threshold { column, op, q, .. } => {
                    Some(SlidingPercentile::new(column, op, q, window))
                }
                _ => None,
            })
            .collect(),
    };
    Ok(Some(Test {
        source: source.id,
        pred: Pred::And(fixed),
        thresholds,
        pid: source.columns.iter().position(|c| c.name == "pid"),
        tid: source.columns.iter().position(|c| c.name == "tid"),
        trace: (source.columns.iter()).position(|c| matches!(c.kind, Kind::Id(_))),
        columns: source.columns.clone(),
    }))
}

fn has_threshold(pred: &Pred) -> bool {
    match pred {
        Pred::And(all) | Pred::Or(all) => all.iter().any(has_threshold),
        Pred::Not(p) => has_threshold(p),
        Pred::Threshold { .. } => true,
        Pred::Compare { .. } | Pred::In { .. } | Pred::Text { .. } => false,
    }
}

/// The trigger log ([`weft_capture::sources::own::TRIGGERS`]).
fn define_log(store: &mut Store) -> Result<SourceId> {
    Ok(weft_capture::sources::own::TRIGGERS.define(store)?)
}

#[cfg(test)]
mod tests {
    use weft_abi::syscall::SyscallEvent;

    use super::*;

    const MS: u64 = 1_000_000;

    /// A store with the syscall source, in a directory removed on drop.
    struct Scratch {
        dir: std::path::PathBuf,
        store: Store,
        syscalls: SourceId,
    }

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("weft-trigger-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let mut store = Store::open(&dir, &weft_store::Config::default()).unwrap();
            let syscalls = weft_ingest::syscalls::define_source(&mut store).unwrap();
            Self {
                dir,
                store,
                syscalls,
            }
        }

        fn triggers(&self, texts: &[&str], limit: Option<(usize, u64)>) -> Result<Triggers> {
            let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
            let policy = Policy {
                before: MS,
                after: MS,
                limit,
            };
            Triggers::new(
                &self.store,
                &Metadata::default(),
                &texts,
                policy,
                Actions::default(),
            )
        }

        /// Stores a getppid that took `duration_ns` and arrived at its
        /// exit, and tests it.
        fn feed(&mut self, triggers: &mut Triggers, arrival: u64, duration_ns: u64) {
            self.feed_late(triggers, arrival, arrival, duration_ns);
        }

        /// Stores a getppid that exited at `exit` and arrived at `arrival`
        /// (drained later), and tests it.
        fn feed_late(
            &mut self,
            triggers: &mut Triggers,
            exit: u64,
            arrival: u64,
            duration_ns: u64,
        ) {
            let record = SyscallEvent {
                enter_ns: exit - duration_ns,
                duration_ns,
                ret: 1,
                pid: 7,
                tid: 7,
                nr: 110,
                cpu: 0,
            }
            .to_le_bytes();
            let source = self.syscalls;
            self.store
                .append_at(source, arrival, Some(exit), &record)
                .unwrap();
            triggers
                .check(&mut self.store, source, arrival, Some(exit), &record)
                .unwrap();
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    #[test]
    fn matches_fire_merge_and_are_limited() {
        let mut scratch = Scratch::new("unit");
        let mut triggers = scratch
            .triggers(
                &[r#"syscalls where name = "getppid""#],
                Some((2, 3600 * 1000 * MS)),
            )
            .unwrap();
        // Fires; inside its window (merged, extended); fires again after
        // it; then the limit of 2 refuses the rest.
        for arrival in [100 * MS, 100 * MS + MS / 2, 200 * MS, 300 * MS, 400 * MS] {
            scratch.feed(&mut triggers, arrival, 1000);
        }
        triggers.tick(&mut scratch.store).unwrap();
        let rule = &triggers.log().rules[1];
        assert_eq!((rule.fired, rule.merged, rule.suppressed), (2, 1, 2));
        assert_eq!(
            scratch.store.meta().pins,
            [(99 * MS, 101 * MS + MS / 2), (199 * MS, 201 * MS)],
            "the merged window extends its pin"
        );
    }

    #[test]
    fn matches_drained_together_fire_by_their_own_times() {
        let mut scratch = Scratch::new("batch");
        let mut triggers = scratch
            .triggers(&[r#"syscalls where name = "getppid""#], None)
            .unwrap();
        // Three calls 30 ms apart, drained in one batch at 200 ms: three
        // firings, each pinning its own window and the batch's arrival.
        for exit in [100 * MS, 130 * MS, 160 * MS] {
            scratch.feed_late(&mut triggers, exit, 200 * MS, 1000);
        }
        let rule = &triggers.log().rules[1];
        assert_eq!((rule.fired, rule.merged), (3, 0));
        assert_eq!(
            scratch.store.meta().pins,
            [
                (99 * MS, 201 * MS),
                (129 * MS, 201 * MS),
                (159 * MS, 201 * MS)
            ],
            "each firing is a pin of its own, released on its own"
        );
    }

    #[test]
    fn a_steady_match_grows_a_window_only_to_its_cap() {
        let mut scratch = Scratch::new("cap");
        let mut triggers = scratch
            .triggers(&[r#"syscalls where name = "getppid""#], None)
            .unwrap();
        // A match every ms for 50 ms, with --keep -1ms..+1ms: each window
        // grows to at most 10 x 2 ms, then the next match fires anew.
        for arrival in (100..150).map(|ms| ms * MS) {
            scratch.feed(&mut triggers, arrival, 1000);
        }
        triggers.tick(&mut scratch.store).unwrap();
        let rule = &triggers.log().rules[1];
        assert_eq!((rule.fired, rule.capped, rule.merged), (3, 2, 47));
        assert_eq!(
            scratch.store.meta().pins,
            [
                (99 * MS, 119 * MS),
                (118 * MS, 138 * MS),
                (137 * MS, 150 * MS)
            ]
        );
    }

    /// A peer's firing over `start..end` wall-clock seconds from now.
    fn asked(id: &str, start: i64, end: i64) -> PinRequest {
        let now = now_wall();
        PinRequest {
            id: id.into(),
            origin: "server".into(),
            condition: "slow".into(),
            from: "proxy".into(),
            hop: 2,
            hops_left: 1_000_000,
            fired_wall: now,
            start_wall: now + start * 1_000_000_000,
            end_wall: now + end * 1_000_000_000,
            offset_ns: None,
            error_ns: 0,
            via: crate::hosts::Conn {
                local: (1, 1),
                remote: (2, 2),
            },
            segments: Vec::new(),
            sent_wall: now,
        }
    }

    #[test]
    fn a_peers_window_is_moved_onto_this_clock_by_the_segments_both_saw() {
        use crate::segments::{Seen, Segment};
        use weft_abi::net::Direction;
        let mut scratch = Scratch::new("peer-clock");
        let policy = Policy {
            before: 1_000_000_000,
            after: 1_000_000_000,
            limit: None,
        };
        let mut travel = crate::travel::Travel::start(
            crate::travel::Routes::default(),
            std::sync::Arc::new(weft_peer::Secret::from_bytes(b"a test secret, long enough")),
            policy.before,
            "here".into(),
        );
        // The asker's clock is 5 ms behind this one. Its segment 1 arrived
        // here 20 us after it left; this host's segment 2 reached it 30 us
        // after leaving here.
        let (here, there) = ((2, 2), (1, 1));
        let t = weft_store::now_ns();
        let segment = |seq| Segment {
            seq,
            ack: 9,
            flags: 16,
            payload: 10,
        };
        for (seq, dir, ts_ns) in [
            (1, Direction::Ingress, t),
            (2, Direction::Egress, t + 100_000),
        ] {
            let packet = crate::segments::packet((here, there), dir, seq, ts_ns);
            travel.segments.note(&packet);
        }
        let mut request = asked("a", -1, 1);
        request.error_ns = crate::travel::DEFAULT_CLOCK_ERROR;
        let behind = |mono: u64| crate::hosts::wall(mono) - 5_000_000;
        request.segments = vec![
            Seen {
                segment: segment(1),
                sent: true,
                wall_ns: behind(t - 20_000),
            },
            Seen {
                segment: segment(2),
                sent: false,
                wall_ns: behind(t + 130_000),
            },
        ];
        let actions = Actions {
            travel: Some(travel),
            ..Actions::default()
        };
        let mut triggers =
            Triggers::new(&scratch.store, &Metadata::default(), &[], policy, actions).unwrap();
        let reply = triggers.from_peer(&mut scratch.store, &request).unwrap();
        assert!(reply.kept, "{reply:?}");
        // Between 4.97 and 5.02 ms: 4.995 ms, give or take 25 us.
        let clock = reply.segments_clock.unwrap();
        assert_eq!((clock.offset_ns, clock.error_ns), (4_995_000, 25_000));
        let placed = |wall: i64, widen: i64| crate::hosts::monotonic(wall + 4_995_000 + widen);
        assert_eq!(
            scratch.store.meta().pins,
            [(
                placed(request.start_wall, -25_000),
                placed(request.end_wall, 25_000)
            )]
        );
        let received = &triggers.log().peers.unwrap().received[0];
        assert_eq!(
            (received.clock_from.as_deref(), received.clock_error_ns),
            (Some("segments"), Some(25_000)),
            "{received:?}"
        );
    }

    #[test]
    fn a_peers_firing_is_kept_once_within_this_hosts_limits() {
        let mut scratch = Scratch::new("peers");
        let policy = Policy {
            before: 1_000_000_000,
            after: 1_000_000_000,
            limit: Some((2, 3_600_000_000_000)),
        };
        let travel = crate::travel::Travel::start(
            crate::travel::Routes::default(),
            std::sync::Arc::new(weft_peer::Secret::from_bytes(b"a test secret, long enough")),
            policy.before,
            "here".into(),
        );
        let actions = Actions {
            travel: Some(travel),
            ..Actions::default()
        };
        let mut triggers =
            Triggers::new(&scratch.store, &Metadata::default(), &[], policy, actions).unwrap();
        // A window of an hour is cut to this host's cap: 10 x 2 s.
        let first = triggers
            .from_peer(&mut scratch.store, &asked("a", -1800, 1800))
            .unwrap();
        assert!(first.kept, "{first:?}");
        let pins = scratch.store.meta().pins.clone();
        assert_eq!(pins.len(), 1);
        assert_eq!(pins[0].1 - pins[0].0, 20_000_000_000);
        // The same firing again (a loop) is not kept twice.
        let again = triggers
            .from_peer(&mut scratch.store, &asked("a", -1, 1))
            .unwrap();
        assert!(!again.kept && again.note.contains("already"), "{again:?}");
        // The rate limit holds for peers' firings: 2 an hour.
        assert!(
            triggers
                .from_peer(&mut scratch.store, &asked("b", -1, 1))
                .unwrap()
                .kept
        );
        let third = triggers
            .from_peer(&mut scratch.store, &asked("c", -1, 1))
            .unwrap();
        assert!(
            !third.kept && third.note.contains("rate limit"),
            "{third:?}"
        );
        assert_eq!(scratch.store.meta().pins.len(), 2);
        let peers = triggers.log().peers.unwrap();
        assert_eq!((peers.kept, peers.suppressed), (2, 1));
        assert_eq!(peers.received.len(), 4);
    }

    #[test]
    fn closing_gives_up_on_a_pt_capture_that_does_not_end() {
        #[allow(clippy::unnecessary_wraps, reason = "a CapturePt")]
        fn hangs(
            _: u32,
            _: std::time::Duration,
            _: &std::path::Path,
            _: &Sender<Decoded>,
        ) -> Result<()> {
            std::thread::sleep(std::time::Duration::from_secs(3600));
            Ok(())
        }
        let mut scratch = Scratch::new("pt-hangs");
        let (calls, _decoded) = std::sync::mpsc::channel();
        let actions = Actions {
            dir: scratch.dir.clone(),
            command: None,
            pt: Some((std::time::Duration::from_millis(10), calls, hangs)),
            travel: None,
        };
        let policy = Policy {
            before: MS,
            after: MS,
            limit: None,
        };
        let texts = ["syscalls where dur > 1ms".to_owned()];
        let mut triggers = Triggers::new(
            &scratch.store,
            &Metadata::default(),
            &texts,
            policy,
            actions,
        )
        .unwrap();
        scratch.feed(&mut triggers, 10 * MS, 5 * MS);
        let waited = std::time::Instant::now();
        let limit = std::time::Duration::from_millis(200);
        assert_eq!(
            triggers.join_captures(limit),
            1,
            "the capture was not started"
        );
        assert!(
            waited.elapsed() < limit * 5,
            "waited {:?}",
            waited.elapsed()
        );
    }

    #[test]
    fn a_percentile_threshold_compares_with_the_window_of_matching_records() {
        let mut scratch = Scratch::new("pct");
        let mut triggers = scratch
            .triggers(
                &[r#"syscalls where name = "getppid" and dur > p99 last 1m"#],
                None,
            )
            .unwrap();
        // Warming up: 99 slow calls are too few for a p99, and fire nothing.
        for i in 1..100 {
            scratch.feed(&mut triggers, i * 10 * MS, 1_000_000);
        }
        // 200 fast calls: the p99 of the minute settles near 1 ms.
        for i in 0..200 {
            scratch.feed(&mut triggers, 1000 * MS + i * MS, 1000);
        }
        // One far slower fires; one as fast as the rest does not.
        scratch.feed(&mut triggers, 1500 * MS, 9_000_000);
        scratch.feed(&mut triggers, 1700 * MS, 900);
        // Two minutes on, the window has forgotten them: warming up again.
        scratch.feed(&mut triggers, 200_000 * MS, 50_000_000);
        let rule = &triggers.log().rules[1];
        assert_eq!(rule.fired, 1, "{rule:?}");
    }

    #[test]
    fn triggers_are_source_where_condition_with_fixed_values() {
        let scratch = Scratch::new("bad");
        let error = |text: &str| match scratch.triggers(&[text], None) {
            Ok(_) => panic!("{text} was accepted"),
            Err(error) => format!("{error:#}"),
        };
        assert!(error("syscalls | count").contains("without stages"));
        assert!(error("syscalls").contains("needs a condition"));
        assert!(error("syscalls where dur > p99").contains("add `last 1m`"));
        assert!(error("syscalls where dur > 1ms last 1m").contains("`last` is for percentile"));
        assert!(error("syscalls where dur > p99 or ret < 0 last 1m").contains("top-level"));
        assert!(error("syscalls where bogus = 1").contains("bogus"));
        assert!(error("sched where runq > 1ms").contains("no source `sched`"));
    }
}
