//! Thread names for a capture. The syscall records carry thread ids only
//! (16 more bytes per record would cost ingest rate); `record` notes each
//! thread's name once, when weft first drains a record of it and again
//! after it execs, as a `tasks` record. Queries then name threads: the
//! `comm` column of `syscalls` is its `tid` shown by name.
//!
//! A thread that exits before weft drains its first record (within the
//! drain interval) has no name here; queries show its tid instead.

use std::collections::HashSet;

use weft_probes::{syscall::SyscallEvent, syscall_names};
use weft_query::Names;
use weft_store::{Field, FieldKind, Snapshot, SourceId, Store};

/// Name of the source holding thread names.
pub const TASKS: &str = "tasks";
/// Bytes of a thread name, as the kernel's `TASK_COMM_LEN`.
const COMM_LEN: usize = 16;

/// Notes the name of every thread seen.
pub struct TaskNames {
    source: SourceId,
    seen: HashSet<u32>,
    execs: [u32; 2],
}

impl TaskNames {
    /// Defines (or finds again) the `tasks` source: `pid`, `tid`, then the
    /// name's 16 bytes.
    pub fn define(store: &mut Store) -> weft_store::Result<Self> {
        let fields = vec![
            Field::new("pid", 0, FieldKind::U32),
            Field::new("tid", 4, FieldKind::U32),
        ];
        let exec = |name| syscall_names::number(name).unwrap_or(u32::MAX);
        Ok(Self {
            source: store.define_source(TASKS, fields)?,
            seen: HashSet::new(),
            execs: [exec("execve"), exec("execveat")],
        })
    }

    /// Records the name of `event`'s thread if it is new or has just
    /// exec'd.
    pub fn observe_syscall(
        &mut self,
        store: &mut Store,
        ts: u64,
        event: &SyscallEvent,
    ) -> weft_store::Result<()> {
        let exec = event.ret == 0 && self.execs.contains(&event.nr);
        self.observe(store, ts, event.pid, event.tid, exec)
    }

    /// Records the name of thread `tid` of process `pid` if it is new or
    /// `exec` says it has a new name. A thread already gone is skipped.
    pub fn observe(
        &mut self,
        store: &mut Store,
        ts: u64,
        pid: u32,
        tid: u32,
        exec: bool,
    ) -> weft_store::Result<()> {
        if !self.seen.insert(tid) && !exec {
            return Ok(());
        }
        let path = format!("/proc/{pid}/task/{tid}/comm");
        let Ok(comm) = std::fs::read_to_string(path) else {
            return Ok(());
        };
        self.write(store, ts, pid, tid, comm.trim_end_matches('\n').as_bytes())
    }

    /// Records `comm` (as the kernel gave it, NUL-padded) as the name of
    /// thread `tid` of process `pid` if the thread is new.
    pub fn note(
        &mut self,
        store: &mut Store,
        ts: u64,
        pid: u32,
        tid: u32,
        comm: &[u8],
    ) -> weft_store::Result<()> {
        if !self.seen.insert(tid) {
            return Ok(());
        }
        let end = comm.iter().position(|b| *b == 0).unwrap_or(comm.len());
        self.write(store, ts, pid, tid, &comm[..end])
    }

    fn write(
        &self,
        store: &mut Store,
        ts: u64,
        pid: u32,
        tid: u32,
        name: &[u8],
    ) -> weft_store::Result<()> {
        let mut payload = [0u8; 8 + COMM_LEN];
        payload[..4].copy_from_slice(&pid.to_le_bytes());
        payload[4..8].copy_from_slice(&tid.to_le_bytes());
        let len = name.len().min(COMM_LEN);
        payload[8..8 + len].copy_from_slice(&name[..len]);
        store.append_at(self.source, ts, None, &payload)?;
        Ok(())
    }
}

/// Thread names by tid from a capture's `tasks` records (the latest name
/// of each thread), or `None` when the capture has none.
pub fn names(snapshot: &Snapshot) -> weft_store::Result<Option<Names>> {
    let Some(source) = snapshot.meta().sources.iter().find(|s| s.name == TASKS) else {
        return Ok(None);
    };
    let mut names = Vec::new();
    snapshot.raw_scan_each(source.id, 0..=u64::MAX, |record| {
        let payload = &record.payload;
        if payload.len() >= 8 {
            let tid = u32::from_le_bytes([payload[4], payload[5], payload[6], payload[7]]);
            let comm = &payload[8..payload.len().min(8 + COMM_LEN)];
            let end = comm.iter().position(|b| *b == 0).unwrap_or(comm.len());
            names.push((
                i64::from(tid),
                String::from_utf8_lossy(&comm[..end]).into_owned(),
            ));
        }
    })?;
    // Later records (after exec) replace earlier ones.
    Ok(Some(Names::new(names, false)))
}
