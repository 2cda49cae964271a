//! Thread names for a capture, noted as records arrive. The syscall
//! records carry thread ids only (16 more bytes per record would cost
//! ingest rate); `record` notes each
//! thread's name once, when weft first drains a record of it and again
//! after it execs, as a `tasks` record. Queries then name threads: the
//! `comm` column of `syscalls` is its `tid` shown by name.
//!
//! A thread that exits before weft drains its first record (within the
//! drain interval) has no name here; queries show its tid instead.

use std::{
    collections::HashSet,
    hash::{BuildHasherDefault, Hasher},
};

use weft_abi::{syscall::SyscallEvent, syscall_names};
use weft_store::{FieldKind, SourceId, Store};

use crate::schema::{Meaning, Spec, field};

/// Name of the source holding thread names.
pub const TASKS: &str = "tasks";
/// Bytes of a thread name, as the kernel's `TASK_COMM_LEN`.
pub const COMM_LEN: usize = 16;

/// Bytes of a cgroup path kept (a path is at most `PATH_MAX`; cgroup
/// trees are far shallower).
const MAX_CGROUP: usize = 512;

/// The `tasks` source: `pid`, `tid`, the name's [`COMM_LEN`] bytes, then
/// the thread's cgroup v2 path (none in captures before it was kept).
pub const SPEC: Spec = Spec {
    size: 8 + COMM_LEN,
    tail: Some(("cgroup", "the thread's cgroup v2 path, as /proc shows it")),
    ..Spec::new(
        TASKS,
        "thread names, noted when a thread is first seen and after it execs",
        &[
            field("pid", 0, FieldKind::U32, Meaning::Int, "process"),
            field("tid", 4, FieldKind::U32, Meaning::Int, "thread"),
        ],
    )
};

/// Notes the name of every thread seen.
pub struct TaskNames {
    source: SourceId,
    seen: HashSet<u32, BuildHasherDefault<TidHasher>>,
    /// The thread of the last record: a flood comes from few threads, and
    /// this spares the set a look-up per record.
    last: Option<u32>,
    execs: [u32; 2],
}

/// Hashes a thread id by one multiplication: tids are small distinct
/// integers, and `SipHash` cost more than the rest of a record's ingest.
#[derive(Default)]
struct TidHasher(u64);

impl Hasher for TidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 << 8 | u64::from(*byte)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, tid: u32) {
        self.0 = u64::from(tid).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl TaskNames {
    /// Defines (or finds again) the `tasks` source ([`SPEC`]).
    pub fn define(store: &mut Store) -> weft_store::Result<Self> {
        let exec = |name| syscall_names::number(name).unwrap_or(u32::MAX);
        Ok(Self {
            source: SPEC.define(store)?,
            seen: HashSet::default(),
            last: None,
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
        if self.last == Some(event.tid) && !exec {
            return Ok(());
        }
        self.last = Some(event.tid);
        self.observe(store, ts, event.pid, event.tid, exec)
    }

    /// Records the name of thread `tid` of process `pid` if it is new or
    /// `exec` says it has a new name. A thread already gone is recorded
    /// without a name: its process is still known (`count by pid` adds
    /// up its threads' counts).
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
        let comm = std::fs::read_to_string(path).unwrap_or_default();
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

    /// Writes thread `tid`'s name and its cgroup (read now: a thread
    /// already gone has none).
    fn write(
        &self,
        store: &mut Store,
        ts: u64,
        pid: u32,
        tid: u32,
        name: &[u8],
    ) -> weft_store::Result<()> {
        let mut payload = vec![0u8; 8 + COMM_LEN];
        payload[..4].copy_from_slice(&pid.to_le_bytes());
        payload[4..8].copy_from_slice(&tid.to_le_bytes());
        let len = name.len().min(COMM_LEN);
        payload[8..8 + len].copy_from_slice(&name[..len]);
        if let Some(cgroup) = cgroup(pid, tid) {
            payload.extend_from_slice(&cgroup.as_bytes()[..cgroup.len().min(MAX_CGROUP)]);
        }
        store.append_at(self.source, ts, None, &payload)?;
        Ok(())
    }
}

/// Thread `tid`'s cgroup v2 path, from the `0::PATH` line /proc shows.
fn cgroup(pid: u32, tid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/cgroup")).ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix("0::"))
        .map(str::to_owned)
}
