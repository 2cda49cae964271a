//! `args`: the file-related system calls with what their arguments say of
//! the file (`probes::args`): the descriptor, the bytes asked for, and the
//! file's name (the path an open was given, or the name recording found
//! for the descriptor), by its number in the `paths` source.

use std::mem::offset_of;

use weft_abi::args::ArgsEvent;
use weft_abi::syscall::MAX_SYSCALLS;
use weft_store::FieldKind;

use super::{CPU, IndexSpec, Meaning, STORED_FROM, Spec, field};

pub const SPEC: Spec = Spec {
    name: "args",
    size: size_of::<ArgsEvent>(),
    aliases: &["files"],
    about: "file-related system calls (read, write, send, receive, open, close, dup families) with their descriptor, bytes asked for and file name",
    fields: &[
        CPU,
        field(
            "ts",
            offset_of!(ArgsEvent, exit_ns),
            FieldKind::U64,
            Meaning::Time,
            "when it returned",
        ),
        field(
            "dur",
            offset_of!(ArgsEvent, duration_ns),
            FieldKind::U64,
            Meaning::Duration,
            "how long it took",
        ),
        field(
            "ret",
            offset_of!(ArgsEvent, ret),
            FieldKind::I64,
            Meaning::Int,
            "what it returned: bytes moved, the new descriptor (-errno on failure)",
        ),
        field(
            "pid",
            offset_of!(ArgsEvent, pid),
            FieldKind::U32,
            Meaning::Int,
            "process",
        ),
        field(
            "tid",
            offset_of!(ArgsEvent, tid),
            FieldKind::U32,
            Meaning::Int,
            "thread",
        ),
        field(
            "nr",
            offset_of!(ArgsEvent, nr),
            FieldKind::U32,
            Meaning::Syscall,
            "the call",
        )
        .shown_as("name"),
        field(
            "fd",
            offset_of!(ArgsEvent, fd),
            FieldKind::I32,
            Meaning::Int,
            "the descriptor it was given (openat's directory; -1 for open and creat)",
        ),
        field(
            "count",
            offset_of!(ArgsEvent, count),
            FieldKind::U64,
            Meaning::Int,
            "bytes asked for (read, write, pread64, pwrite64, sendto, recvfrom; else 0)",
        ),
        field(
            "file",
            offset_of!(ArgsEvent, file),
            FieldKind::U32,
            Meaning::Path,
            "the file: the path an open was given (made absolute), or the name of the descriptor (socket:[inode] for a socket)",
        ),
        field(
            "given",
            offset_of!(ArgsEvent, given),
            FieldKind::U32,
            Meaning::Path,
            "the path an open was given, as given (a relative one relative)",
        ),
    ],
    indexes: &[
        IndexSpec::Latency("dur"),
        IndexSpec::Exact("nr", MAX_SYSCALLS as i64),
        IndexSpec::LatencyBy {
            name: "dur_by_nr",
            field: "dur",
            by: "nr",
            count: MAX_SYSCALLS,
        },
        IndexSpec::Values("file"),
    ],
    stored_from: STORED_FROM,
    time: Some("ts"),
    span: Some("dur"),
    tail: None,
    threads: true,
    first: &[
        "name", "file", "dur", "ret", "count", "comm", "pid", "tid", "fd",
    ],
    late: None,
};
