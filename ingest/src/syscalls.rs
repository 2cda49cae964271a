//! The `syscalls` source of a capture: its store schema and default
//! indexes, and the sink that appends each ring record of the syscall probe
//! as it lies in the ring (one copy, ring to chunk).

use std::mem::offset_of;

use weft_abi::syscall::{EVENT_SIZE, MAX_SYSCALLS, SyscallEvent};
use weft_store::{Field, FieldKind, SourceId, Store};

use crate::{
    schema::{IndexSpec, Meaning, Spec, field},
    tasks::TaskNames,
};

/// Name of the syscall source in the store.
pub const SYSCALLS: &str = "syscalls";

/// The `syscalls` source: a `SyscallEvent` as the probe writes it, with
/// its default indexes: latency (`duration_ns`, log bins), syscall number
/// (`nr`, one bin per number: an exact-match index), and latency per
/// syscall (`duration_by_nr`, partitioned by number), so that one
/// syscall's percentiles come from summaries too; and the threads' ids
/// (`tid`, one wide bin), so that counts by thread, and by its name, come
/// from the values log, which keeps latencies apart per thread where
/// threads interleave (percentiles by thread, process or name).
pub const SPEC: Spec = Spec {
    size: EVENT_SIZE,
    indexes: &[
        IndexSpec::Latency("duration_ns"),
        IndexSpec::Exact("nr", MAX_SYSCALLS as i64),
        IndexSpec::LatencyBy {
            name: "duration_by_nr",
            field: "duration_ns",
            by: "nr",
            count: MAX_SYSCALLS,
        },
        IndexSpec::Key {
            field: "tid",
            splits: "duration_ns",
        },
        IndexSpec::Values("cpu"),
        IndexSpec::Values("ret"),
    ],
    span: Some("dur"),
    threads: true,
    first: &["name", "dur", "ret", "comm", "pid", "tid", "cpu"],
    ..Spec::new(
        SYSCALLS,
        "system calls, each when it returned",
        &[
            field(
                "enter_ns",
                offset_of!(SyscallEvent, enter_ns),
                FieldKind::U64,
                Meaning::Time,
                "when it was entered",
            ),
            field(
                "duration_ns",
                offset_of!(SyscallEvent, duration_ns),
                FieldKind::U64,
                Meaning::Duration,
                "how long it took",
            )
            .shown_as("dur"),
            field(
                "ret",
                offset_of!(SyscallEvent, ret),
                FieldKind::I64,
                Meaning::Int,
                "what it returned (-errno on failure)",
            ),
            field(
                "pid",
                offset_of!(SyscallEvent, pid),
                FieldKind::U32,
                Meaning::Int,
                "process",
            ),
            field(
                "tid",
                offset_of!(SyscallEvent, tid),
                FieldKind::U32,
                Meaning::Int,
                "thread",
            ),
            field(
                "nr",
                offset_of!(SyscallEvent, nr),
                FieldKind::U32,
                Meaning::Syscall,
                "the call",
            )
            .shown_as("name"),
            field(
                "cpu",
                offset_of!(SyscallEvent, cpu),
                FieldKind::U32,
                Meaning::Int,
                "CPU it returned on",
            ),
        ],
    )
};

/// Defines (or finds again, when appending) the syscall source and its
/// default indexes ([`SPEC`]).
pub fn define_source(store: &mut Store) -> weft_store::Result<SourceId> {
    SPEC.define(store)
}

/// The store fields of a `SyscallEvent` payload, in layout order.
pub fn fields() -> Vec<Field> {
    SPEC.store_fields()
}

/// Appends the syscall probe's ring records to the store, noting each new
/// thread's name once.
pub struct SyscallSink {
    source: SourceId,
    tasks: TaskNames,
    /// Ring records too short to be a [`SyscallEvent`]; never expected.
    malformed: u64,
}

/// A syscall record as stored: the source, the kernel's exit time (the
/// producer's timestamp) and the payload, for triggers to test.
#[derive(Clone, Copy, Debug)]
pub struct Stored<'a> {
    /// The store source the record went to.
    pub source: SourceId,
    /// When the syscall returned, `CLOCK_MONOTONIC` ns.
    pub exit_ns: u64,
    /// The record's payload, as stored.
    pub payload: &'a [u8],
    /// The syscall's number.
    pub nr: u32,
    /// How long it took, ns.
    pub duration_ns: u64,
}

impl SyscallSink {
    /// Defines (or finds again) the `syscalls` and `tasks` sources of `store`.
    pub fn define(store: &mut Store) -> weft_store::Result<Self> {
        Ok(Self {
            source: define_source(store)?,
            tasks: TaskNames::define(store)?,
            malformed: 0,
        })
    }

    /// The store source of syscall records.
    pub fn source(&self) -> SourceId {
        self.source
    }

    /// Thread names, shared with the other sources of a recording.
    pub fn tasks(&mut self) -> &mut TaskNames {
        &mut self.tasks
    }

    /// Ring records that were too short to decode.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }

    /// Appends `record`, a ring record of the syscall probe drained at
    /// `now` (its arrival time), and names its thread if it is new. A
    /// record too short to be a syscall is counted in [`Self::malformed`]
    /// and gives `Ok(None)`.
    #[inline]
    pub fn append<'a>(
        &mut self,
        store: &mut Store,
        now: u64,
        record: &'a [u8],
    ) -> weft_store::Result<Option<Stored<'a>>> {
        let Some(event) = SyscallEvent::read(record) else {
            self.malformed += 1;
            return Ok(None);
        };
        let payload = &record[..EVENT_SIZE];
        let exit_ns = event.enter_ns.wrapping_add(event.duration_ns);
        store.append_at(self.source, now, Some(exit_ns), payload)?;
        self.tasks.observe_syscall(store, now, &event)?;
        Ok(Some(Stored {
            source: self.source,
            exit_ns,
            payload,
            nr: event.nr,
            duration_ns: event.duration_ns,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::latency_bins;

    #[test]
    fn fields_read_what_to_le_bytes_wrote() {
        let event = SyscallEvent {
            enter_ns: 1,
            duration_ns: 2,
            ret: -3,
            pid: 4,
            tid: 5,
            nr: 6,
            cpu: 7,
        };
        let bytes = event.to_le_bytes();
        let values: Vec<i64> = fields().iter().map(|f| f.read(&bytes).unwrap()).collect();
        assert_eq!(values, vec![1, 2, -3, 4, 5, 6, 7]);
    }

    #[test]
    fn latency_bins_span_100ns_to_100s() {
        let bins = latency_bins();
        assert!(bins.boundaries().contains(&100));
        assert!(*bins.boundaries().last().unwrap() >= 100_000_000_000);
        assert!(bins.len() < 300, "{} bins", bins.len());
        // Every hist() bucket edge up to 2^37 ns is a bound: no bin
        // straddles one.
        for shift in 0..=37 {
            assert!(bins.boundaries().contains(&(1 << shift)), "2^{shift}");
        }
    }
}
