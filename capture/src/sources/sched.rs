//! `sched`: one record per thread switched onto a CPU (`probes::sched`).

use std::mem::offset_of;

use weft_abi::sched::SchedEvent;
use weft_store::FieldKind;

use super::{CPU, IndexSpec, Meaning, STORED_FROM, Spec, field};

/// `sched_switch`'s `prev_state` values, named as `ps` and `perf sched` do.
const STATES: &[(i64, &str)] = &[
    (0, "R"),
    (0x100, "R+"),
    (0x1, "S"),
    (0x2, "D"),
    (0x4, "T"),
    (0x8, "t"),
    (0x10, "X"),
    (0x20, "Z"),
    (0x40, "P"),
    (0x80, "I"),
];

pub const SPEC: Spec = Spec {
    name: "sched",
    size: size_of::<SchedEvent>(),
    aliases: &[],
    about: "threads switched onto a CPU: off-CPU time, run-queue latency, why they left",
    fields: &[
        CPU,
        field(
            "tid",
            offset_of!(SchedEvent, tid),
            FieldKind::U32,
            Meaning::Int,
            "thread switched in",
        ),
        field(
            "pid",
            offset_of!(SchedEvent, pid),
            FieldKind::U32,
            Meaning::Int,
            "its process",
        ),
        field(
            "ts",
            offset_of!(SchedEvent, ts_ns),
            FieldKind::U64,
            Meaning::Time,
            "when it was switched in",
        ),
        field(
            "off_cpu",
            offset_of!(SchedEvent, off_cpu_ns),
            FieldKind::U64,
            Meaning::Duration,
            "time since it was switched out",
        ),
        field(
            "runq",
            offset_of!(SchedEvent, runq_ns),
            FieldKind::U64,
            Meaning::Duration,
            "time runnable, waiting for a CPU",
        ),
        field(
            "prev_tid",
            offset_of!(SchedEvent, prev_tid),
            FieldKind::U32,
            Meaning::Int,
            "thread it replaced (0: idle)",
        ),
        field(
            "state",
            offset_of!(SchedEvent, state),
            FieldKind::U32,
            Meaning::Named(STATES),
            "why it left: R yielded, R+ preempted, S sleeping, D uninterruptible, ...",
        ),
        field(
            "kstack",
            offset_of!(SchedEvent, kstack),
            FieldKind::I32,
            Meaning::Int,
            "the kernel stack it left from, an id in `frames` (with --sources stacks; else -1)",
        ),
        field(
            "ustack",
            offset_of!(SchedEvent, ustack),
            FieldKind::I32,
            Meaning::Int,
            "the user stack it left from (with --sources stacks; else -1)",
        ),
    ],
    indexes: &[
        IndexSpec::Latency("off_cpu"),
        IndexSpec::Latency("runq"),
        // The UI's off-CPU breakdown: states are values up to 0x100 (R+).
        IndexSpec::LatencyBy {
            name: "off_cpu_by_state",
            field: "off_cpu",
            by: "state",
            count: 0x101,
        },
    ],
    stored_from: STORED_FROM,
    time: Some("ts"),
    span: Some("off_cpu"),
    tail: None,
    threads: true,
    first: &[],
    late: None,
};
