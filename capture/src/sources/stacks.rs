//! `stacks`: a low-rate CPU profile, one record per sample of a thread on
//! a CPU (`probes::stacks`). Its stacks are ids; their frames, named once
//! each, are in the `frames` source (`own::FRAMES`).

use std::mem::offset_of;

use weft_abi::stacks::StackEvent;
use weft_store::FieldKind;

use super::{CPU, Meaning, STORED_FROM, Spec, field};

pub const SPEC: Spec = Spec {
    name: "stacks",
    size: size_of::<StackEvent>(),
    aliases: &["profile"],
    about: "a CPU profile (--stack-hz samples a second per CPU): each sampled thread's kernel and user stacks",
    fields: &[
        CPU,
        field(
            "ts",
            offset_of!(StackEvent, ts_ns),
            FieldKind::U64,
            Meaning::Time,
            "when the thread was sampled",
        ),
        field(
            "tid",
            offset_of!(StackEvent, tid),
            FieldKind::U32,
            Meaning::Int,
            "thread on the CPU",
        ),
        field(
            "pid",
            offset_of!(StackEvent, pid),
            FieldKind::U32,
            Meaning::Int,
            "its process",
        ),
        field(
            "kstack",
            offset_of!(StackEvent, kstack),
            FieldKind::I32,
            Meaning::Int,
            "its kernel stack's id in `frames` (negative: none)",
        ),
        field(
            "ustack",
            offset_of!(StackEvent, ustack),
            FieldKind::I32,
            Meaning::Int,
            "its user stack's id in `frames` (negative: none)",
        ),
    ],
    indexes: &[],
    stored_from: STORED_FROM,
    time: Some("ts"),
    span: None,
    tail: None,
    threads: true,
    first: &[],
    late: None,
};
