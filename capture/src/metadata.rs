//! `weft.json`, typed: where a capture's data came from and where it is
//! incomplete (drops are data). Every writer (`record`, `trace --store`,
//! `replay`, `extract`) builds a [`Metadata`] and every reader (`info`,
//! `export`, the catalog, the UI's feeds) reads one; no one indexes JSON.
//!
//! The file is read by weft versions before and after this one: keys this
//! version does not know are kept as they are when it rewrites the file
//! (`other`), and keys it adds are optional to read.

use std::{collections::BTreeMap, io::Write as _, path::Path};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use weft_store::Dir;

use crate::error::{Error, Result};

/// Name of the metadata file in a capture directory.
pub const METADATA: &str = "weft.json";
/// What `format` says of every capture this weft writes.
pub const FORMAT: &str = "weft-capture 1";
/// Key of `weft.json` holding the CRC-32 of the rest of the document.
const CHECKSUM: &str = "checksum";
/// The largest `weft.json` weft writes is far smaller (sessions, losses,
/// trigger firings); a larger one is refused before it is read.
const MAX_METADATA_BYTES: u64 = 64 << 20;

/// A field's kind by field name, as the app protocol names kinds
/// (`{"id": "int", "latency": "duration"}`; [`crate::registry::query_kind`]).
pub type FieldKinds = BTreeMap<String, String>;

/// The whole of `weft.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// `weft-capture 1` (read as that where it is missing).
    #[serde(default = "format")]
    pub format: String,
    /// One per recording into the capture (`--append` adds one).
    #[serde(default)]
    pub sessions: Vec<Session>,
    /// Application sources' field kinds, by source.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub app_sources: BTreeMap<String, FieldKinds>,
    /// `weft trace --store` sources' field kinds, by source; their `tid`
    /// also names the thread (`comm`). Captures before the name had
    /// `trace_sources`.
    #[serde(
        default,
        alias = "trace_sources",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub oneliner_sources: BTreeMap<String, FieldKinds>,
    /// Set in a capture `weft extract` made: what it was cut from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extracted: Option<Extracted>,
    /// Keys of a later weft, written back as they were.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// [`FORMAT`], owned.
fn format() -> String {
    FORMAT.to_owned()
}

impl Default for Metadata {
    fn default() -> Self {
        Self {
            format: format(),
            sessions: Vec::new(),
            app_sources: BTreeMap::new(),
            oneliner_sources: BTreeMap::new(),
            extracted: None,
            other: Map::new(),
        }
    }
}

/// One recording into a capture.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Session {
    #[serde(default)]
    pub host: Host,
    /// How each source was attached, by source.
    #[serde(default)]
    pub sources: BTreeMap<String, SourceNote>,
    /// `CLOCK_MONOTONIC` ns at the start and at the end (none: it never
    /// ended cleanly).
    #[serde(default)]
    pub start_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<u64>,
    /// `CLOCK_REALTIME` minus `CLOCK_MONOTONIC` at the start, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_offset_ns: Option<i64>,
    /// `CLOCK_BOOTTIME` minus `CLOCK_MONOTONIC` at the start, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boottime_ahead_ns: Option<u64>,
    /// Whether it ended and closed its store without an error.
    #[serde(default)]
    pub complete: bool,
    /// What each source received and lost, by source.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub lost: BTreeMap<String, Lost>,
    /// Longest time from a kernel record's timestamp to its arrival, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_drain_lag_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers: Option<TriggerLog>,
    /// Kept windows released, the oldest first, past their share of the
    /// disk budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pins_released: Option<u64>,
    /// The store error that stopped the session, and the records held in
    /// memory that it left unwritten.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unflushed: Option<u64>,
    /// A replay's: the capture it plays, and how fast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<f64>,
    /// Keys of a later weft, written back as they were.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl Session {
    /// A session starting now on this machine, recording `sources`.
    pub fn starting(sources: BTreeMap<String, SourceNote>) -> Self {
        Self {
            host: Host::this_machine(),
            sources,
            start_ns: weft_store::now_ns(),
            wall_offset_ns: Some(wall_offset_ns()),
            boottime_ahead_ns: Some(boottime_ahead_ns()),
            ..Self::default()
        }
    }
}

/// The machine a session ran on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    #[serde(default)]
    pub hostname: String,
    #[serde(default)]
    pub kernel: String,
    #[serde(default)]
    pub weft_version: String,
}

impl Host {
    /// This machine, now.
    pub fn this_machine() -> Self {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .map(|s| s.trim().to_owned())
                .unwrap_or_default()
        };
        Self {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            weft_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

/// How a source was attached.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceNote {
    /// Where, in words (`raw tracepoints sys_enter/sys_exit, ...`).
    #[serde(default)]
    pub attach: String,
    /// The filter it was loaded with, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// The packet source's interfaces by index, named as they were while
    /// recording (`export --format pcapng` names them so).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub interfaces: BTreeMap<String, String>,
}

impl SourceNote {
    /// Attached at `attach`, nothing more to say.
    pub fn at(attach: impl Into<String>) -> Self {
        Self {
            attach: attach.into(),
            ..Self::default()
        }
    }
}

/// What one source received and lost in a session, and why. Which
/// counters a source has depends on its family; absent ones are not kept.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lost {
    /// Records lost, for every reason.
    #[serde(default)]
    pub lost: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
    /// Records the kernel programs produced (received + ring full).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_full: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_full_per_cpu: Option<Vec<u64>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_peak_percent: Option<u64>,
    /// Events whose program the kernel did not run (another BPF program
    /// or a `bpf()` call on a map was under way on their CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<u64>,
    /// Syscalls whose entry found the table of calls in flight full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enter_table_full: Option<u64>,
    /// Exits whose entry came before the probe (not losses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unpaired_exits: Option<u64>,
    /// Intervals of an event source not started (table full).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_full: Option<u64>,
    /// Application connections closed for a bad line, and records their
    /// clients dropped while weft lagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_by_clients: Option<u64>,
    /// PT captures decoded into calls, and their decoding errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captures: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoding_errors: Option<u64>,
    /// Records received after a store error, never stored (part of `lost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_error: Option<u64>,
}

/// A session's triggers and what they did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TriggerLog {
    #[serde(default)]
    pub keep_before_ns: u64,
    #[serde(default)]
    pub keep_after_ns: u64,
    /// Rule 0 is the manual trigger (SIGUSR2, `weft trigger`).
    #[serde(default)]
    pub rules: Vec<RuleLog>,
    /// The notes manual firings came with.
    #[serde(default)]
    pub notes: Vec<NoteLog>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers: Option<PeerLog>,
}

/// One trigger and its firings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleLog {
    pub id: usize,
    #[serde(default)]
    pub condition: String,
    #[serde(default)]
    pub fired: u64,
    /// Matches inside a window already kept, which stretched it.
    #[serde(default)]
    pub merged: u64,
    /// Firings past the rate cap.
    #[serde(default)]
    pub capped: u64,
    /// Firings refused by the disk budget's share for kept windows.
    #[serde(default)]
    pub suppressed: u64,
    /// The W3C trace ids of the records that fired it (an application
    /// source's `trace_id` field), the first 256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub traces: Vec<TraceLog>,
}

/// A firing on a record with a trace id: the record's time (monotonic ns)
/// and the id, 32 hex digits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceLog {
    pub time_ns: u64,
    pub trace_id: String,
}

/// A manual firing's note, at monotonic ns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoteLog {
    pub time_ns: u64,
    #[serde(default)]
    pub note: String,
}

/// Firings that traveled between recorders: this one's address, its own
/// firings, those peers asked it to keep and those it asked of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerLog {
    #[serde(default)]
    pub me: String,
    #[serde(default)]
    pub fired: Vec<Firing>,
    #[serde(default)]
    pub received: Vec<Received>,
    /// Received firings past the log's length, counted only.
    #[serde(default)]
    pub received_unlisted: u64,
    #[serde(default)]
    pub sent: Vec<Sent>,
    /// Peers' firings kept here, and refused by the budget.
    #[serde(default)]
    pub kept: u64,
    #[serde(default)]
    pub suppressed: u64,
}

/// A firing of this host's, as its peers know it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Firing {
    pub id: String,
    #[serde(default)]
    pub rule: usize,
    #[serde(default)]
    pub condition: String,
    /// The window it keeps here, monotonic ns.
    #[serde(default)]
    pub window_ns: [u64; 2],
}

/// A peer's firing this host was asked to keep.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Received {
    pub id: String,
    /// The host that asked, the one whose trigger fired, and its condition.
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub origin: String,
    #[serde(default)]
    pub condition: String,
    #[serde(default)]
    pub hop: u32,
    /// Wall-clock ns: when it fired, its window, when this host answered.
    #[serde(default)]
    pub fired_wall_ns: i64,
    #[serde(default)]
    pub start_wall_ns: i64,
    #[serde(default)]
    pub end_wall_ns: i64,
    #[serde(default)]
    pub answered_wall_ns: i64,
    #[serde(default)]
    pub kept: bool,
    /// The window kept here, monotonic ns.
    #[serde(default)]
    pub window_ns: Option<[u64; 2]>,
    #[serde(default)]
    pub note: String,
    /// The asker's clock minus this one's, the bound on its error, and
    /// what measured it; absent in captures of a weft that did not.
    #[serde(default)]
    pub clock_offset_ns: Option<i64>,
    #[serde(default)]
    pub clock_error_ns: Option<u64>,
    #[serde(default)]
    pub clock_from: Option<String>,
}

/// A request this host sent a peer to keep a firing's window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sent {
    pub id: String,
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub hop: u32,
    #[serde(default)]
    pub kept: bool,
    #[serde(default)]
    pub note: String,
    /// Wall-clock ms from the firing (or the request that led here) to the
    /// answer.
    #[serde(default)]
    pub ms: f64,
    /// The peer's clock minus this one's, and the bound on its error: from
    /// the segments both saw when the peer could bound it so, else NTP's
    /// estimate from the exchange's four times.
    #[serde(default)]
    pub clock_offset_ns: i64,
    #[serde(default)]
    pub clock_error_ns: i64,
    #[serde(default)]
    pub clock_from: String,
}

/// What a capture `weft extract` made was cut from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extracted {
    /// The capture it was cut from, and the window, monotonic ns on that
    /// capture's clock.
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub start_ns: u64,
    #[serde(default)]
    pub end_ns: u64,
    /// The firing (1-based) whose window it is, of `from`'s own triggers…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_firing: Option<usize>,
    /// …or of a firing that traveled between hosts, by id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet_firing: Option<String>,
    /// This capture's wall clock minus the traveled firing's origin's, and
    /// the bound on that estimate's error, where the hops were measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_error_ns: Option<u64>,
}

impl Metadata {
    /// The wall-clock offset of the capture: its first session's.
    pub fn wall_offset(&self) -> Option<i64> {
        self.sessions.first()?.wall_offset_ns
    }

    /// The BOOTTIME offset the capture's first session noted.
    pub fn boottime_ahead(&self) -> Option<u64> {
        self.sessions.first()?.boottime_ahead_ns
    }

    /// Records of `source` lost over all sessions.
    pub fn lost(&self, source: &str) -> u64 {
        lost_in(&self.sessions, source)
    }

    /// Kept windows released over all sessions.
    pub fn pins_released(&self) -> u64 {
        self.sessions.iter().filter_map(|s| s.pins_released).sum()
    }

    /// Each session's log of traveled firings.
    pub fn peer_logs(&self) -> impl Iterator<Item = &PeerLog> {
        (self.sessions.iter()).filter_map(|s| s.triggers.as_ref()?.peers.as_ref())
    }
}

/// Records of `source` lost over `sessions`.
pub fn lost_in(sessions: &[Session], source: &str) -> u64 {
    (sessions.iter())
        .filter_map(|s| s.lost.get(source))
        .map(|lost| lost.lost)
        .sum()
}

/// Reads `weft.json`, or an empty document for a new capture.
pub fn read_metadata(dir: &Path) -> Result<Metadata> {
    metadata_in(&Dir::open(dir)?)
}

/// [`read_metadata`] of a directory already open.
pub(crate) fn metadata_in(dir: &Dir) -> Result<Metadata> {
    if !dir.contains(METADATA) && dir.contains("meta") {
        return Err(Error::Damaged(format!(
            "{}: the capture's {METADATA} is missing",
            dir.path().display()
        )));
    }
    metadata_or_new(dir)
}

/// `weft.json` as [`read_metadata`] reads it, or an empty document when
/// there is none yet (a capture whose store was just created).
pub(crate) fn metadata_or_new(dir: &Dir) -> Result<Metadata> {
    if !dir.contains(METADATA) {
        return Ok(Metadata::default());
    }
    let path = dir.join(METADATA);
    let text = dir.read(METADATA, MAX_METADATA_BYTES)?;
    let mut document: Value = serde_json::from_slice(&text).map_err(|error| Error::Json {
        what: format!("{} is not valid JSON", path.display()),
        error,
    })?;
    // Checked on the document as read, whichever weft wrote it (captures
    // from before the checksum have none).
    if let Some(stored) = document.as_object_mut().and_then(|m| m.remove(CHECKSUM)) {
        let text = pretty(&document);
        if stored.as_str() != Some(format!("{:08x}", crc32fast::hash(text.as_bytes())).as_str()) {
            let damaged = format!("{} fails its checksum (damaged)", path.display());
            return Err(Error::Damaged(damaged));
        }
    }
    // From the text, so that an error names its line and column.
    let mut metadata: Metadata = serde_json::from_slice(&text).map_err(|error| Error::Json {
        what: format!("{} is not a weft capture's metadata", path.display()),
        error,
    })?;
    metadata.other.remove(CHECKSUM);
    Ok(metadata)
}

/// Replaces `weft.json` atomically (temp file, fsync, rename), mode 0600,
/// in a directory opened to write (the store's, or
/// [`weft_store::Dir::open_to_write`]).
pub fn write_metadata(opened: &Dir, metadata: &Metadata) -> Result<()> {
    let tmp = format!("{METADATA}.tmp");
    // Left by a write that was killed: never renamed into place.
    opened.remove_if_present(&tmp)?;
    let mut file = opened.create(&tmp)?;
    // The checksum covers the document as written without it, so a
    // damaged number (a time offset, a count) is noticed, not believed.
    let mut document = serde_json::to_value(metadata).expect("weft.json's keys are strings");
    if let Some(object) = document.as_object_mut() {
        object.remove(CHECKSUM);
        let text = pretty(object);
        let crc = format!("{:08x}", crc32fast::hash(text.as_bytes()));
        object.insert(CHECKSUM.into(), crc.into());
    }
    file.write_all(pretty(&document).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|error| Error::File {
            doing: "failed to write",
            path: opened.join(&tmp),
            error,
        })?;
    opened.rename(&tmp, METADATA)?;
    Ok(())
}

/// `value` as weft writes it, and as its checksum is taken: a JSON value
/// always prints (its map keys are strings).
fn pretty(value: &impl Serialize) -> String {
    serde_json::to_string_pretty(value).expect("a JSON value prints")
}

/// `CLOCK_BOOTTIME` minus `CLOCK_MONOTONIC` now, in ns: the time the
/// machine spent suspended since it booted (Perfetto's default clock is
/// BOOTTIME).
pub fn boottime_ahead_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &raw mut ts) };
    let boottime = u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000
        + u64::try_from(ts.tv_nsec).unwrap_or(0);
    boottime.saturating_sub(weft_store::now_ns())
}

/// `CLOCK_REALTIME` minus `CLOCK_MONOTONIC` now, in ns: turns the store's
/// monotonic times into wall-clock times.
pub fn wall_offset_ns() -> i64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    wall - i64::try_from(weft_store::now_ns()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("weft-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        path
    }

    /// Numbers a capture records (rates, seconds, a peer's delay) read
    /// back as written: parsed inexactly, about one float in six would
    /// print otherwise and fail the checksum of a sound file.
    #[test]
    fn metadata_with_floats_passes_its_own_checksum() {
        let path = scratch("metadata");
        let dir = Dir::open_to_write(&path).unwrap();
        let sessions = (0..2000)
            .map(|i| Session {
                speed: Some(f64::from(i) * 1.37 / 1e3 + 98.23),
                ..Session::default()
            })
            .collect();
        let metadata = Metadata {
            sessions,
            ..Metadata::default()
        };
        write_metadata(&dir, &metadata).unwrap();
        let read = read_metadata(&path);
        let _ = std::fs::remove_dir_all(&path);
        assert_eq!(read.unwrap(), metadata);
    }

    /// A `weft.json` of an older weft (`trace_sources`, no clock notes) and
    /// of a newer one (keys this one does not know) reads, and a rewrite
    /// keeps what it did not know.
    #[test]
    fn older_and_newer_documents_read_and_keep_what_they_hold() {
        let path = scratch("metadata-versions");
        let dir = Dir::open_to_write(&path).unwrap();
        let document = json!({
            "format": "weft-capture 1",
            "trace_sources": { "opens": { "tid": "int" } },
            "from_the_future": [1, 2],
            "sessions": [{
                "host": { "hostname": "h" },
                "start_ns": 5,
                "complete": true,
                "lost": { "syscalls": { "lost": 3, "ring_full": 3 } },
                "triggers": { "peers": { "me": "a", "received": [{ "id": "o/1/5", "from": "o" }] } },
                "a_new_counter": 9,
            }],
        });
        std::fs::write(path.join(METADATA), document.to_string()).unwrap();
        let read = read_metadata(&path).unwrap();
        assert_eq!(read.oneliner_sources["opens"]["tid"], "int");
        assert_eq!(read.lost("syscalls"), 3);
        let got = &read.peer_logs().next().unwrap().received[0];
        assert_eq!((got.from.as_str(), got.clock_offset_ns), ("o", None));
        write_metadata(&dir, &read).unwrap();
        let text = std::fs::read_to_string(path.join(METADATA)).unwrap();
        let _ = std::fs::remove_dir_all(&path);
        let written: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(written["from_the_future"], json!([1, 2]));
        assert_eq!(written["sessions"][0]["a_new_counter"], 9);
        assert_eq!(written["oneliner_sources"]["opens"]["tid"], "int");
    }

    /// A document of the wrong shape is refused saying where.
    #[test]
    fn a_document_of_another_shape_is_refused_at_its_line() {
        let path = scratch("metadata-shape");
        Dir::open_to_write(&path).unwrap();
        let text =
            "{\n  \"format\": \"weft-capture 1\",\n  \"sessions\": [{\"complete\": \"yes\"}]\n}";
        std::fs::write(path.join(METADATA), text).unwrap();
        let error = read_metadata(&path).unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&path);
        assert!(
            error.contains("is not a weft capture's metadata"),
            "{error}"
        );
        assert!(error.contains("line 3"), "{error}");
    }

    /// A document whose numbers were changed after it was written is
    /// refused by name.
    #[test]
    fn a_damaged_document_fails_its_checksum() {
        let path = scratch("metadata-damaged");
        let dir = Dir::open_to_write(&path).unwrap();
        let mut metadata = Metadata::default();
        metadata.sessions.push(Session {
            start_ns: 1234,
            ..Session::default()
        });
        write_metadata(&dir, &metadata).unwrap();
        let text = std::fs::read_to_string(path.join(METADATA)).unwrap();
        std::fs::write(path.join(METADATA), text.replace("1234", "1235")).unwrap();
        let error = read_metadata(&path).unwrap_err();
        let _ = std::fs::remove_dir_all(&path);
        assert!(error.to_string().contains("fails its checksum"), "{error}");
    }
}
