//! `weft tui --replay DIR`: a recording played into a new capture as if
//! its records were arriving now, at the recorded pace or `--speed` times
//! it, so the live UI — its sliding windows, its health line, its own cost
//! — can be watched and measured on any recorded load, at rates this
//! machine's probes could not make.
//!
//! Every time moves by one map, `now + (t - first) / speed`: arrival times,
//! producer timestamps and the payload fields the catalog calls times.
//! Durations stay as recorded, so a replay answers percentiles exactly as
//! its recording does.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use weft_query::{
    Kind,
    catalog::Read,
    health::{Health, SourceHealth},
};
use weft_store::{Config, FieldKind, Snapshot, SourceId, Store, now_ns};

use crate::{
    capture,
    error::{Error, Result, refuse},
    feed::Ready,
    metadata::{self, Metadata, Session},
    registry::{SYMBOLS, TASKS, TRIGGERS},
};

/// Recorded time read and sorted at a time; memory is one slice's records.
const SLICE_NS: u64 = 100_000_000;
/// Longest sleep between two batches of due records.
const BATCH: Duration = Duration::from_millis(1);

/// What to replay, and how.
pub struct Options {
    /// The recording.
    pub from: PathBuf,
    /// Times the recorded pace.
    pub speed: f64,
    /// Start over at the end, until stopped.
    pub repeat: bool,
    /// Leave out the recording's damaged chunks instead of failing.
    pub skip_damaged: bool,
}

/// What a replay shares with the terminal UI showing it.
pub struct Link {
    /// Receives the new capture's reader once it is ready (no PT capture
    /// channel: a replay is not this machine).
    pub ready: Ready,
    /// The counters, renewed every second.
    pub health: Arc<Mutex<Health>>,
    /// Set when the UI closes.
    pub stop: Arc<AtomicBool>,
}

/// Replays `options.from` into a new capture at `dir` until it ends (or,
/// repeating, until `link.stop`).
pub fn run(options: &Options, dir: &Path, config: &Config, link: &Link) -> Result<()> {
    if !(options.speed.is_finite() && options.speed > 0.0) {
        refuse!("--speed {}: must be a positive number", options.speed);
    }
    let from = &options.from;
    let snapshot = capture::open(from, options.skip_damaged)?;
    let Some(span) = snapshot.time_range()? else {
        refuse!("{} holds no records to replay", from.display());
    };
    let recorded = metadata::read_metadata(from)?;
    let mut fresh = capture::prepare_dir(dir, false)?;
    let mut store = Store::open(dir, config).map_err(|error| Error::Open {
        dir: dir.to_owned(),
        error,
    })?;
    capture::define_like(&mut store, snapshot.meta())?;
    let capture_dir = Arc::clone(store.dir());
    let mut metadata = replay_metadata(&recorded, options);
    metadata::write_metadata(&capture_dir, &metadata)?;
    fresh.keep();
    let sources = &snapshot.meta().sources;
    let ids = sources
        .iter()
        .map(|s| usize::from(s.id) + 1)
        .max()
        .unwrap_or(0);
    let mut names = vec![String::new(); ids];
    for source in sources {
        names[usize::from(source.id)].clone_from(&source.name);
    }
    let mut player = Player {
        times: time_fields(&snapshot, &recorded, ids)?,
        names,
        sent: vec![0; ids],
        dir: Arc::clone(&capture_dir),
        clock: Clock {
            start: now_ns(),
            first: *span.start(),
            speed: options.speed,
        },
        lag: 0,
        max_lag: 0,
        tick: Instant::now(),
    };
    // The UI may have given up waiting; the replay goes on regardless.
    let _ = link.ready.send((store.reader(), None));
    let started = Instant::now();
    let mut passes = 0;
    let outcome = loop {
        match player.pass(&snapshot, &span, &mut store, link) {
            Ok(true) => passes += 1,
            Ok(false) => break Ok(()),
            Err(error) => break Err(error),
        }
        if !options.repeat {
            break Ok(());
        }
        // The next pass starts where this one ended, a millisecond on.
        player.clock.start = player.clock.at(*span.end()) + 1_000_000;
    };
    let closed = store.close().map_err(Error::Finish);
    let session = &mut metadata.sessions[0];
    session.end_ns = Some(now_ns());
    session.complete = outcome.is_ok() && closed.is_ok();
    metadata::write_metadata(&capture_dir, &metadata)?;
    outcome?;
    closed?;
    let records: u64 = player.sent.iter().sum();
    let seconds = started.elapsed().as_secs_f64();
    log::info!(
        "weft: replayed {records} records of {} in {seconds:.1}s ({:.2} M records/s, {passes} whole passes, at most {:.0} ms behind schedule) into {}",
        from.display(),
        records as f64 / seconds.max(1e-9) / 1e6,
        player.max_lag.max(player.lag) as f64 / 1e6,
        dir.display()
    );
    Ok(())
}

/// The recording's `weft.json` as the replay's: its sources' kinds kept,
/// one session that says what it replays, with this moment's wall clock.
fn replay_metadata(recorded: &Metadata, options: &Options) -> Metadata {
    let sources = (recorded.sessions.first())
        .map(|s| s.sources.clone())
        .unwrap_or_default();
    let session = Session {
        replay_of: Some(options.from.display().to_string()),
        speed: Some(options.speed),
        ..Session::starting(sources)
    };
    Metadata {
        sessions: vec![session],
        ..recorded.clone()
    }
}

/// By source id, the byte offsets of the 8-byte payload fields the
/// catalog calls times.
fn time_fields(snapshot: &Snapshot, metadata: &Metadata, ids: usize) -> Result<Vec<Vec<usize>>> {
    let catalog = capture::catalog(snapshot, metadata, false)?;
    let mut fields = vec![Vec::new(); ids];
    for source in &catalog.sources {
        for column in &source.columns {
            if let (Kind::Time, Read::Field(field)) = (&column.kind, &column.read)
                && matches!(field.kind, FieldKind::U64 | FieldKind::I64)
            {
                let offsets = &mut fields[usize::from(source.id)];
                let offset = field.offset as usize;
                if !offsets.contains(&offset) {
                    offsets.push(offset);
                }
            }
        }
    }
    Ok(fields)
}

/// When a recorded time is replayed.
struct Clock {
    /// When the pass's first record is due, `CLOCK_MONOTONIC` ns.
    start: u64,
    /// The recording's first arrival time.
    first: u64,
    speed: f64,
}

impl Clock {
    fn at(&self, recorded: u64) -> u64 {
        // Differences are small enough for an f64 to hold exactly.
        let offset = recorded.wrapping_sub(self.first).cast_signed() as f64 / self.speed;
        self.start.saturating_add_signed(offset as i64)
    }
}

/// A slice of the recording's records: per source a run in arrival
/// order, merged as they are played.
#[derive(Default)]
struct Slice {
    runs: Vec<Vec<Entry>>,
    /// Per run, its next record to play.
    heads: Vec<usize>,
    /// The payloads, in the order they were read.
    bytes: Vec<u8>,
}

/// A record of a [`Slice`].
struct Entry {
    ts: u64,
    /// Its place in the record log: the order records were appended in.
    addr: u64,
    source: SourceId,
    producer_ts: Option<u64>,
    payload: std::ops::Range<usize>,
}

/// By source id: the time fields' offsets, the names, the records
/// appended.
struct Player {
    times: Vec<Vec<usize>>,
    names: Vec<String>,
    sent: Vec<u64>,
    dir: Arc<weft_store::Dir>,
    clock: Clock,
    /// How far behind its schedule the replay appended, at most, since
    /// the last tick.
    lag: u64,
    /// The same over the whole replay.
    max_lag: u64,
    tick: Instant,
}

impl Player {
    /// Plays the recording once; `false` when stopped before its end.
    fn pass(
        &mut self,
        snapshot: &Snapshot,
        span: &std::ops::RangeInclusive<u64>,
        store: &mut Store,
        link: &Link,
    ) -> Result<bool> {
        // One slice's buffers serve the whole pass: growing fresh ones each
        // time cost copies, page faults and the allocator's lock, which the
        // store's flusher shares.
        let mut slice = Slice::default();
        let mut from = *span.start();
        while from <= *span.end() {
            let to = from.saturating_add(SLICE_NS - 1).min(*span.end());
            slice.read(snapshot, from..=to)?;
            if !self.play(&mut slice, store, link)? {
                return Ok(false);
            }
            from = to + 1;
        }
        Ok(true)
    }

    /// Appends the slice's records as each falls due, in batches a
    /// millisecond apart at most, as a recorder drains its rings.
    fn play(&mut self, slice: &mut Slice, store: &mut Store, link: &Link) -> Result<bool> {
        while let Some(first) = slice.first() {
            if link.stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let now = now_ns();
            let mut next = Some(first);
            while let Some(run) = next {
                let record = &slice.runs[run][slice.heads[run]];
                let due = self.clock.at(record.ts);
                if due > now {
                    break;
                }
                self.lag = self.lag.max(now - due);
                let payload = &mut slice.bytes[record.payload.clone()];
                self.move_times(record.source, payload);
                let producer_ts = record.producer_ts.map(|t| self.clock.at(t));
                store.append_at(record.source, due, producer_ts, payload)?;
                self.sent[usize::from(record.source)] += 1;
                slice.heads[run] += 1;
                next = slice.first();
            }
            if self.tick.elapsed() >= Duration::from_secs(1) {
                self.renew(store, link);
            }
            if let Some(run) = next {
                let ts = slice.runs[run][slice.heads[run]].ts;
                let wait = self.clock.at(ts).saturating_sub(now_ns());
                std::thread::sleep(Duration::from_nanos(wait).min(BATCH));
            }
        }
        Ok(true)
    }

    /// Moves the payload's time fields by the clock's map.
    fn move_times(&self, source: SourceId, payload: &mut [u8]) {
        for &offset in &self.times[usize::from(source)] {
            if let Some(bytes) = payload.get_mut(offset..offset + 8) {
                let time = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
                if time != 0 {
                    bytes.copy_from_slice(&self.clock.at(time).to_le_bytes());
                }
            }
        }
    }

    /// Publishes the open chunk and renews the UI's counters, once a second:
    /// the recording's sources, not weft's bookkeeping (as a recorder's
    /// counters).
    fn renew(&mut self, store: &mut Store, link: &Link) {
        store.publish();
        let sources = (self.names.iter().zip(&self.sent))
            .filter(|(name, _)| {
                !name.is_empty() && ![TASKS, TRIGGERS, SYMBOLS].contains(&name.as_str())
            })
            .map(|(name, sent)| SourceHealth {
                name: name.clone(),
                received: *sent,
                lost: 0,
            })
            .collect();
        let health = Health {
            sources,
            drain_lag_ns: self.lag,
            disk_bytes: self.dir.disk_use().unwrap_or(0),
            ..Health::default()
        };
        *link.health.lock().unwrap_or_else(PoisonError::into_inner) = health;
        self.max_lag = self.max_lag.max(self.lag);
        self.lag = 0;
        self.tick = Instant::now();
    }
}

impl Slice {
    /// Holds the records of every source that arrived in `window`.
    fn read(&mut self, snapshot: &Snapshot, window: std::ops::RangeInclusive<u64>) -> Result<()> {
        let sources = &snapshot.meta().sources;
        self.runs.resize_with(sources.len(), Vec::new);
        self.heads.clear();
        self.heads.resize(sources.len(), 0);
        self.bytes.clear();
        for (run, source) in self.runs.iter_mut().zip(sources) {
            run.clear();
            snapshot.raw_scan_each(source.id, window.clone(), |r| {
                let start = self.bytes.len();
                self.bytes.extend_from_slice(r.payload);
                run.push(Entry {
                    ts: r.ts,
                    addr: r.addr,
                    source: r.source,
                    producer_ts: r.producer_ts,
                    payload: start..self.bytes.len(),
                });
            })?;
        }
        Ok(())
    }

    /// The run whose next record was appended first.
    fn first(&self) -> Option<usize> {
        (self.runs.iter().zip(&self.heads).enumerate())
            .filter_map(|(i, (run, head))| run.get(*head).map(|e| (e.ts, e.addr, i)))
            .min()
            .map(|(.., i)| i)
    }
}
