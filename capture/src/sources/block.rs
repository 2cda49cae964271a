//! `block`: one record per completed block I/O request (`probes::block`).

use std::mem::offset_of;

use weft_abi::block::BlockEvent;
use weft_store::FieldKind;

use super::{CPU, IndexSpec, Meaning, STORED_FROM, Spec, field};

/// `Op` values, named as in the tracepoints' `rwbs`.
const OPS: &[(i64, &str)] = &[
    (0, "other"),
    (1, "read"),
    (2, "write"),
    (3, "discard"),
    (4, "flush"),
];

pub const SPEC: Spec = Spec {
    name: "block",
    size: size_of::<BlockEvent>(),
    aliases: &[],
    about: "block I/O requests: device, sector, bytes, operation, issue-to-completion latency",
    fields: &[
        CPU,
        field(
            "tid",
            offset_of!(BlockEvent, tid),
            FieldKind::U32,
            Meaning::Int,
            "thread that issued it",
        ),
        field(
            "pid",
            offset_of!(BlockEvent, pid),
            FieldKind::U32,
            Meaning::Int,
            "its process",
        ),
        field(
            "ts",
            offset_of!(BlockEvent, ts_ns),
            FieldKind::U64,
            Meaning::Time,
            "when it completed",
        ),
        field(
            "latency",
            offset_of!(BlockEvent, latency_ns),
            FieldKind::U64,
            Meaning::Duration,
            "time from issue to completion",
        ),
        field(
            "sector",
            offset_of!(BlockEvent, sector),
            FieldKind::U64,
            Meaning::Int,
            "first 512-byte sector",
        ),
        field(
            "dev",
            offset_of!(BlockEvent, dev),
            FieldKind::U32,
            Meaning::Int,
            "device: major << 20 | minor",
        ),
        field(
            "bytes",
            offset_of!(BlockEvent, bytes),
            FieldKind::U32,
            Meaning::Int,
            "bytes requested",
        ),
        field(
            "op",
            offset_of!(BlockEvent, op),
            FieldKind::U32,
            Meaning::Named(OPS),
            "read, write, discard, flush or other",
        ),
        field(
            "error",
            offset_of!(BlockEvent, error),
            FieldKind::I32,
            Meaning::Int,
            "0 or the negative errno",
        ),
    ],
    indexes: &[
        IndexSpec::Latency("latency"),
        IndexSpec::Exact("op", 4),
        // The UI's block breakdown, per operation.
        IndexSpec::LatencyBy {
            name: "latency_by_op",
            field: "latency",
            by: "op",
            count: 5,
        },
    ],
    stored_from: STORED_FROM,
    time: Some("ts"),
    span: Some("latency"),
    tail: None,
    threads: true,
    first: &[],
    late: None,
};
