//! The sources weft writes itself besides syscalls and tasks: the trigger
//! log, PT calls and their symbols, and the loss log.

use weft_store::FieldKind;

use super::{Meaning, Spec, field};
use crate::{pt_calls::LATE, registry};

/// One record per firing (`weft_recording::trigger`): which trigger, and
/// the window it kept (arrival times); the record's time is the matching
/// record's own.
pub const TRIGGERS: Spec = Spec {
    size: 24,
    ..Spec::new(
        registry::TRIGGERS,
        "trigger firings and the windows they kept",
        &[
            field(
                "trigger",
                0,
                FieldKind::U64,
                Meaning::Int,
                "which trigger (its number)",
            ),
            field(
                "start",
                8,
                FieldKind::U64,
                Meaning::Time,
                "the kept window's start",
            ),
            field(
                "end",
                16,
                FieldKind::U64,
                Meaning::Time,
                "the kept window's end",
            ),
        ],
    )
};

/// Intel PT calls, decoded after their capture (`pt_calls.rs`), stored
/// when they return.
pub const CALLS: Spec = Spec {
    size: 24,
    span: Some("dur"),
    threads: true,
    first: &["func", "dur", "depth", "tid", "pid"],
    late: Some(LATE),
    ..Spec::new(
        registry::CALLS,
        "function calls decoded from Intel PT, each when it returned",
        &[
            field(
                "dur",
                0,
                FieldKind::U64,
                Meaning::Duration,
                "how long it ran",
            ),
            field("pid", 8, FieldKind::U32, Meaning::Int, "process"),
            field("tid", 12, FieldKind::U32, Meaning::Int, "thread"),
            field(
                "depth",
                16,
                FieldKind::U32,
                Meaning::Int,
                "calls deep in its trace",
            ),
            field("func", 20, FieldKind::U32, Meaning::Symbol, "the function"),
        ],
    )
};

/// The names of the calls' functions: a number, then the name's bytes.
pub const SYMBOLS: Spec = Spec {
    size: 4,
    ..Spec::new(
        registry::SYMBOLS,
        "the names of the PT calls' functions",
        &[field(
            "id",
            0,
            FieldKind::U32,
            Meaning::Int,
            "the function's number",
        )],
    )
};

/// The names of the `args` records' files: a number, then the name's bytes.
pub const PATHS: Spec = Spec {
    size: 4,
    ..Spec::new(
        registry::PATHS,
        "the names of the args records' files",
        &[field(
            "id",
            0,
            FieldKind::U32,
            Meaning::Int,
            "the name's number",
        )],
    )
};

/// The frames of the `stacks` and `sched` records' stack ids, each named
/// once when first met: the id, the process a user stack is of (0 for
/// the kernel's), whether it is a user stack, then its functions, outermost
/// first, `;` between them (as folded stacks write them).
pub const FRAMES: Spec = Spec {
    size: 12,
    tail: Some(("frames", "the functions, outermost first, `;` between them")),
    ..Spec::new(
        registry::FRAMES,
        "the functions of the recorded stacks, by id",
        &[
            field("id", 0, FieldKind::U32, Meaning::Int, "the stack's id"),
            field(
                "pid",
                4,
                FieldKind::U32,
                Meaning::Int,
                "the process of a user stack (0: the kernel's)",
            ),
            field(
                "user",
                8,
                FieldKind::U8,
                Meaning::Int,
                "1: a user stack, 0: a kernel stack",
            ),
        ],
    )
};

/// What each source lost, when and why (`weft_recording::losses`).
pub const LOSSES: Spec = Spec {
    size: 24,
    ..Spec::new(
        registry::LOSSES,
        "records lost, per source, CPU and cause",
        &[
            field(
                "source",
                0,
                FieldKind::U32,
                Meaning::Source,
                "the source that lost them",
            ),
            field(
                "cpu",
                4,
                FieldKind::U32,
                Meaning::Int,
                "CPU (4294967295: not per CPU)",
            ),
            field("lost", 8, FieldKind::U64, Meaning::Int, "records lost"),
            field(
                "why",
                16,
                FieldKind::U8,
                Meaning::Named(WHY),
                "ring full, or other",
            ),
        ],
    )
};

/// Why records were lost (`weft_recording::losses`).
const WHY: &[(i64, &str)] = &[(0, "ring full"), (1, "other")];
