//! `switch`: every context switch, on every CPU, unfiltered
//! (`probes::switch`): the sideband of Intel PT captures.

use std::mem::offset_of;

use weft_abi::switch::SwitchEvent;
use weft_store::FieldKind;

use super::{CPU, IndexSpec, Meaning, STORED_FROM, Spec, field};

pub const SPEC: Spec = Spec {
    name: "switch",
    size: size_of::<SwitchEvent>(),
    aliases: &[],
    about: "every context switch on every CPU, unfiltered: the thread that left and the one that came in",
    fields: &[
        CPU,
        field(
            "ts",
            offset_of!(SwitchEvent, ts_ns),
            FieldKind::U64,
            Meaning::Time,
            "when the CPU switched",
        ),
        field(
            "prev_tid",
            offset_of!(SwitchEvent, prev_tid),
            FieldKind::U32,
            Meaning::Int,
            "thread that left (0: idle)",
        ),
        field(
            "prev_pid",
            offset_of!(SwitchEvent, prev_pid),
            FieldKind::U32,
            Meaning::Int,
            "its process",
        ),
        field(
            "next_tid",
            offset_of!(SwitchEvent, next_tid),
            FieldKind::U32,
            Meaning::Int,
            "thread that came in (0: idle)",
        ),
        field(
            "prev_state",
            offset_of!(SwitchEvent, prev_state),
            FieldKind::U32,
            Meaning::Int,
            "state the thread left in, the tracepoint's prev_state (0 runnable, 1 asleep, 2 uninterruptible, 0x100 preempted)",
        ),
    ],
    indexes: &[IndexSpec::Exact("cpu", 1023)],
    stored_from: STORED_FROM,
    time: Some("ts"),
    span: None,
    tail: None,
    threads: true,
    first: &[],
    late: None,
};
