//! Thread names of a capture, read back: `record` notes each thread's name
//! and cgroup once (`weft_ingest::tasks`), queries show them as `comm` and
//! `cgroup`.

use std::{collections::HashMap, sync::Arc};

use weft_ingest::tasks::COMM_LEN;
use weft_oneliner::value::c_string;
use weft_query::Names;
use weft_store::Snapshot;

use crate::registry::TASKS;

/// What queries name a thread by: its name (`comm`) and its cgroup v2
/// path (`cgroup`), each by tid; and its process (`pid`) by tid, for the
/// threads that were always of one process (a tid reused by another
/// process is left out).
pub struct Threads {
    pub comm: Arc<Names>,
    pub cgroup: Arc<Names>,
    pub pid: Arc<HashMap<i64, i64>>,
}

/// Thread names and cgroups by tid from a capture's `tasks` records (the
/// latest of each thread), or `None` when the capture has none.
pub fn names(snapshot: &Snapshot) -> weft_store::Result<Option<Threads>> {
    ThreadNames::default().update(snapshot)
}

/// Thread names read so far, read on from where the last reading
/// stopped: a live capture meets new threads all the time, and reading
/// every name again for each question is a pass over the whole capture.
#[derive(Default)]
pub struct ThreadNames {
    /// Chunks read: the last of them may have grown since, and is read again.
    read: u64,
    names: HashMap<u32, String>,
    cgroups: HashMap<u32, String>,
    /// Each thread's process; `None` for a tid seen in two processes.
    pids: HashMap<u32, Option<u32>>,
}

impl ThreadNames {
    /// The names with the `tasks` records of chunks not read before, or
    /// `None` when the capture has none.
    pub fn update(&mut self, snapshot: &Snapshot) -> weft_store::Result<Option<Threads>> {
        let Some(source) = snapshot.meta().sources.iter().find(|s| s.name == TASKS) else {
            return Ok(None);
        };
        let chunks = self.read.saturating_sub(1)..snapshot.chunks();
        // In the order written: a later record (after exec) replaces an earlier one.
        snapshot.raw_scan_chunks(source.id, chunks, |record| {
            if let Some(thread) = Thread::read(record.payload) {
                if let Some(cgroup) = thread.cgroup {
                    self.cgroups.insert(thread.tid, cgroup);
                }
                // A thread gone before its name was read has none.
                if !thread.name.is_empty() {
                    self.names.insert(thread.tid, thread.name);
                }
                let pid = self.pids.entry(thread.tid).or_insert(Some(thread.pid));
                if *pid != Some(thread.pid) {
                    *pid = None;
                }
            }
        })?;
        self.read = snapshot.chunks();
        let by_tid = |map: &HashMap<u32, String>| {
            let entries = map.iter().map(|(tid, v)| (i64::from(*tid), v.clone()));
            Names::new(entries, false)
        };
        let pid = (self.pids.iter())
            .filter_map(|(tid, pid)| Some((i64::from(*tid), i64::from((*pid)?))))
            .collect();
        Ok(Some(Threads {
            comm: Arc::new(by_tid(&self.names)),
            cgroup: Arc::new(by_tid(&self.cgroups)),
            pid: Arc::new(pid),
        }))
    }
}

/// A thread as a `tasks` record names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    pub pid: u32,
    pub tid: u32,
    pub name: String,
    /// Its cgroup v2 path (none in captures made before weft kept it).
    pub cgroup: Option<String>,
}

/// Every `tasks` record in the order written (a thread again after it
/// exec'd), or `None` when the capture has none.
pub fn threads(snapshot: &Snapshot) -> weft_store::Result<Option<Vec<Thread>>> {
    let Some(source) = snapshot.meta().sources.iter().find(|s| s.name == TASKS) else {
        return Ok(None);
    };
    let mut threads = Vec::new();
    snapshot.raw_scan_each(source.id, 0..=u64::MAX, |record| {
        threads.extend(Thread::read(record.payload));
    })?;
    Ok(Some(threads))
}

impl Thread {
    /// The thread a `tasks` record's payload names: `pid`, `tid`, the name.
    fn read(payload: &[u8]) -> Option<Self> {
        let u32_at = |at: usize| {
            Some(u32::from_le_bytes(
                payload.get(at..at + 4)?.try_into().ok()?,
            ))
        };
        let cgroup = payload
            .get(8 + COMM_LEN..)
            .filter(|path| !path.is_empty())
            .map(|path| String::from_utf8_lossy(path).into_owned());
        Some(Self {
            pid: u32_at(0)?,
            tid: u32_at(4)?,
            name: c_string(&payload[8..payload.len().min(8 + COMM_LEN)]),
            cgroup,
        })
    }
}
