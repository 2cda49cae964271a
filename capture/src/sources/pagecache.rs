//! `pagecache`: pages added to, removed from and looked up in the page
//! cache, per file and thread (`probes::pagecache`).

use std::mem::offset_of;

use weft_abi::pagecache::PageCacheEvent;
use weft_store::FieldKind;

use super::{CPU, IndexSpec, Meaning, STORED_FROM, Spec, field};

/// `Op` values.
const OPS: &[(i64, &str)] = &[(1, "add"), (2, "delete"), (3, "lookup")];

pub const SPEC: Spec = Spec {
    name: "pagecache",
    size: size_of::<PageCacheEvent>(),
    aliases: &[],
    about: "page cache: pages added (misses filled), removed, and looked up by reads, per file",
    fields: &[
        CPU,
        field(
            "tid",
            offset_of!(PageCacheEvent, tid),
            FieldKind::U32,
            Meaning::Int,
            "current thread",
        ),
        field(
            "pid",
            offset_of!(PageCacheEvent, pid),
            FieldKind::U32,
            Meaning::Int,
            "its process",
        ),
        field(
            "ts",
            offset_of!(PageCacheEvent, ts_ns),
            FieldKind::U64,
            Meaning::Time,
            "when",
        ),
        field(
            "ino",
            offset_of!(PageCacheEvent, ino),
            FieldKind::U64,
            Meaning::Int,
            "the file's inode number",
        ),
        field(
            "index",
            offset_of!(PageCacheEvent, index),
            FieldKind::U64,
            Meaning::Int,
            "first page index in the file",
        ),
        field(
            "dev",
            offset_of!(PageCacheEvent, dev),
            FieldKind::U32,
            Meaning::Int,
            "the file system's device: major << 20 | minor",
        ),
        field(
            "pages",
            offset_of!(PageCacheEvent, pages),
            FieldKind::U32,
            Meaning::Int,
            "pages added, removed, or asked for by a read (past the end of the file too)",
        ),
        field(
            "kind",
            offset_of!(PageCacheEvent, op),
            FieldKind::U32,
            Meaning::Named(OPS),
            "add, delete or lookup (hits: lookups minus adds)",
        ),
    ],
    indexes: &[
        IndexSpec::Exact("kind", 3),
        // The overview's headline, `sum(pages) by kind`, per kind.
        IndexSpec::LatencyBy {
            name: "pages_by_kind",
            field: "pages",
            by: "kind",
            count: 4,
        },
    ],
    stored_from: STORED_FROM,
    time: Some("ts"),
    span: None,
    tail: None,
    threads: true,
    first: &[],
    late: None,
};
