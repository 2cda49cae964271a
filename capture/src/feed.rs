//! The terminal UI's two kinds of capture, as [`Feed`]s: one being
//! recorded (or replayed) now, read through the store's reader with the
//! recorder's counters, and a capture directory as it was when opened.

use std::{
    path::Path,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
        mpsc::Sender,
    },
};

use weft_query::{
    Answer,
    feed::Feed,
    health::{Health, SourceHealth},
};
use weft_store::{Reader, Snapshot};

use crate::{answer, capture, info, open::Capture, pt_calls};

/// Where a live capture hands the UI its store's reader once it has begun,
/// and where decoded PT captures go to be stored (`None` for a replay,
/// which is not this machine).
pub type Ready = Sender<(weft_store::Reader, Option<Sender<pt_calls::Decoded>>)>;

/// A capture being recorded (or replayed) now.
pub struct LiveFeed {
    pub reader: Reader,
    /// Where the UI's PT captures go to be stored, and what takes them;
    /// `None` in a replay.
    pub pt: Option<(Sender<pt_calls::Decoded>, StartPt)>,
    pub capture: Capture,
    pub title: String,
    /// The counters the recorder renews every second.
    pub health: Arc<Mutex<Health>>,
    /// Set when the recorder has stopped.
    pub ended: Arc<AtomicBool>,
}

/// Starts an Intel PT capture of process `pid` into a new directory of
/// `dir`, its calls then stored through the sender; says what it started
/// or why it cannot. The binary supplies it: capture is Intel PT's crates,
/// which recording does not depend on.
pub type StartPt =
    fn(pid: u32, dir: &Path, calls: &Sender<pt_calls::Decoded>) -> Result<String, String>;

impl Feed for LiveFeed {
    fn ask(&self, query: &str) -> Result<Answer, String> {
        let snapshot = self.reader.snapshot();
        ask(&self.capture, &snapshot, query, Some(weft_store::now_ns()))
    }

    fn capture_pt(&self, pid: u32) -> Result<String, String> {
        match &self.pt {
            Some((calls, start)) => start(pid, self.capture.dir(), calls),
            None => Err("PT captures need a capture of this machine, not a replay".into()),
        }
    }

    fn health(&self) -> Health {
        let mut health = self
            .health
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        health.ended = self.ended.load(Ordering::Relaxed);
        health
    }

    fn schema(&self) -> Vec<(String, Vec<String>)> {
        schema(&self.capture, &self.reader.snapshot())
    }

    fn range(&self) -> Option<(u64, u64)> {
        None
    }

    fn title(&self) -> String {
        self.title.clone()
    }

    fn wall_offset(&self) -> Option<i64> {
        Some(crate::metadata::wall_offset_ns())
    }
}

/// A capture directory, as it was when opened.
pub struct CaptureFeed {
    snapshot: Snapshot,
    capture: Capture,
    health: Health,
    range: Option<(u64, u64)>,
    wall_offset: Option<i64>,
}

impl CaptureFeed {
    /// Opens the capture in `dir`, leaving out damaged chunks when
    /// `skip_damaged`.
    pub fn open(dir: &Path, skip_damaged: bool) -> crate::Result<Self> {
        let capture = Capture::open(dir)?;
        let snapshot = capture::open(dir, skip_damaged)?;
        let metadata = capture.metadata()?;
        let sources = info::records(&snapshot)?
            .into_iter()
            .map(|(source, records, _, _)| SourceHealth {
                name: source.name.clone(),
                received: records,
                lost: metadata.lost(&source.name),
            })
            .collect();
        let range = snapshot.time_range()?.map(|r| (*r.start(), *r.end()));
        Ok(Self {
            health: Health {
                sources,
                drain_lag_ns: 0,
                disk_bytes: capture::size_on_disk(dir),
                pins_released: metadata.pins_released(),
                cpu_permille: None,
                bpf_ns_per_syscall: None,
                ended: false,
            },
            range,
            wall_offset: metadata.wall_offset(),
            snapshot,
            capture,
        })
    }
}

impl CaptureFeed {
    /// The capture directory.
    pub fn dir(&self) -> &Path {
        self.capture.dir()
    }

    /// The capture's `weft.json`, as opening it read it.
    pub fn metadata(&self) -> crate::Result<std::sync::Arc<crate::metadata::Metadata>> {
        self.capture.metadata()
    }
}

impl Feed for CaptureFeed {
    fn ask(&self, query: &str) -> Result<Answer, String> {
        ask(&self.capture, &self.snapshot, query, None)
    }

    fn health(&self) -> Health {
        self.health.clone()
    }

    fn schema(&self) -> Vec<(String, Vec<String>)> {
        schema(&self.capture, &self.snapshot)
    }

    fn range(&self) -> Option<(u64, u64)> {
        // An empty capture has no time to move in; it shows as live, empty.
        self.range
    }

    fn title(&self) -> String {
        format!("recording {}", self.capture.dir().display())
    }

    fn wall_offset(&self) -> Option<i64> {
        self.wall_offset
    }
}

fn ask(
    capture: &Capture,
    snapshot: &Snapshot,
    text: &str,
    now: Option<u64>,
) -> Result<Answer, String> {
    answer::ask(capture, snapshot, text, now, false)
        .map(|(answer, _)| answer)
        .map_err(|error| error.to_string())
}

/// Each source and its columns, as queries name them.
fn schema(capture: &Capture, snapshot: &Snapshot) -> Vec<(String, Vec<String>)> {
    let Ok(catalog) = capture.catalog(snapshot, false) else {
        return Vec::new();
    };
    catalog
        .sources
        .iter()
        .map(|s| {
            let columns = s.columns.iter().map(|c| c.name.clone()).collect();
            (s.name.clone(), columns)
        })
        .collect()
}
