//! The event sources besides syscalls, described once: their record's
//! fields (names, types, units), their default store indexes and what
//! their columns mean to queries. Their kernel side (programs, attach
//! points) is `weft_kernel::source`, found by the same name
//! (`weft_recording::hooks`). `weft sources`, `record` and the query
//! catalog read these.

mod block;
mod conns;
mod net;
mod pagecache;
mod sched;
pub mod switch;

use std::{mem::offset_of, sync::Arc};

use anyhow::{Context as _, Result};
use weft_abi::events::Header;
use weft_ingest::syscalls::{exact_bins, latency_bins};
use weft_query::{Addresses, Kind, Names, SourceColumns};
use weft_store::{Field, FieldKind, Partition, SourceId, Store};

/// What a field's integers mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meaning {
    Int,
    /// ns of duration.
    Duration,
    /// `CLOCK_MONOTONIC` ns.
    Time,
    /// Values with names (a thread state, an operation).
    Named(&'static [(i64, &'static str)]),
    /// An IP address of either family: the field holds the IPv4 form
    /// (host order); the IPv6 form is 16 bytes at this offset of the kernel
    /// record, and the record's `family` field says which one holds.
    Addr(usize),
}

/// One field of a source's kernel record.
pub struct FieldSpec {
    pub name: &'static str,
    /// Byte offset in the kernel record (header included).
    pub offset: usize,
    pub kind: FieldKind,
    pub meaning: Meaning,
    pub about: &'static str,
}

/// A [`FieldSpec`], in one line.
pub const fn field(
    name: &'static str,
    offset: usize,
    kind: FieldKind,
    meaning: Meaning,
    about: &'static str,
) -> FieldSpec {
    FieldSpec {
        name,
        offset,
        kind,
        meaning,
        about,
    }
}

/// A default index: latency bins over a duration field, or one bin per
/// value `0..=max` of a small integer field (exact match: a port, an
/// operation).
pub enum IndexSpec {
    Latency(&'static str),
    Exact(&'static str, i64),
    /// Latency bins of the first field kept apart per value `0..count` of
    /// the second: grouped percentiles (`p99(latency) by op`) come from
    /// summaries.
    LatencyBy(&'static str, &'static str, u32),
}

/// One source.
pub struct Spec {
    /// Its name on the command line, in messages and in captures (the
    /// kernel side's too).
    pub name: &'static str,
    /// The size of its kernel record (header included).
    pub size: usize,
    /// Other names queries may call it by.
    pub aliases: &'static [&'static str],
    pub about: &'static str,
    pub fields: &'static [FieldSpec],
    pub indexes: &'static [IndexSpec],
    /// The field holding the producer's timestamp.
    pub time: &'static str,
    /// A duration field that ends at the record's time (for `during`).
    pub span: Option<&'static str>,
    /// A column holding the bytes a record may carry after its `size`
    /// (a packet's first payload bytes): its name and what it is.
    pub tail: Option<(&'static str, &'static str)>,
}

/// Every source besides syscalls.
pub const ALL: &[&Spec] = &[
    &sched::SPEC,
    &block::SPEC,
    &pagecache::SPEC,
    &net::SPEC,
    &switch::SPEC,
    &conns::SPEC,
];

/// The source called `name`.
pub fn find(name: &str) -> Option<&'static Spec> {
    ALL.iter().copied().find(|s| s.name == name)
}

impl Spec {
    /// The store fields: the kernel record without its `source` word.
    pub fn store_fields(&self) -> Vec<Field> {
        self.fields
            .iter()
            .map(|f| {
                let offset = u32::try_from(f.offset - STORED_FROM).expect("offsets are small");
                Field::new(f.name, offset, f.kind)
            })
            .collect()
    }

    /// Where a record's timestamp and thread are, computed once rather
    /// than per record.
    pub fn layout(&self) -> Layout {
        let offset = |name: &str| {
            self.fields
                .iter()
                .find(|f| f.name == name)
                .map(|f| f.offset)
        };
        Layout {
            time: offset(self.time).expect("a source's time field exists"),
            // A switch names the thread that left the CPU: every thread
            // that runs leaves one, so each gets its name noted.
            thread: (offset("pid").zip(offset("tid")))
                .or_else(|| offset("prev_pid").zip(offset("prev_tid"))),
        }
    }

    /// Defines (or finds again) the source and its default indexes.
    pub fn define(&self, store: &mut Store) -> Result<SourceId> {
        let fields = self.store_fields();
        let source = store.define_source(self.name, fields.clone())?;
        let find = |name: &str| {
            fields
                .iter()
                .find(|f| f.name == name)
                .cloned()
                .with_context(|| format!("source {}: index over unknown field {name}", self.name))
        };
        for index in self.indexes {
            let (name, field, bins, partition) = match *index {
                IndexSpec::Latency(field) => (field.to_owned(), find(field)?, latency_bins(), None),
                IndexSpec::Exact(field, max) => {
                    (field.to_owned(), find(field)?, exact_bins(max), None)
                }
                IndexSpec::LatencyBy(field, by, count) => {
                    let partition = Partition {
                        field: find(by)?,
                        count,
                    };
                    (
                        format!("{field}_by_{by}"),
                        find(field)?,
                        latency_bins(),
                        Some(partition),
                    )
                }
            };
            if store.index_named(source, &name).is_none() {
                store.define_partitioned_index(source, &name, field, bins, partition)?;
            }
        }
        Ok(source)
    }

    /// Gives the source's columns their meaning.
    pub fn describe_columns(&self, columns: &mut SourceColumns) {
        let addresses = Arc::new(Addresses::default());
        for field in self.fields {
            let kind = match field.meaning {
                Meaning::Int => continue,
                Meaning::Duration => Kind::Duration,
                Meaning::Time => Kind::Time,
                Meaning::Addr(v6) => {
                    let v6 = u32::try_from(v6 - STORED_FROM).expect("offsets are small");
                    columns.set_address(field.name, "family", v6, &addresses);
                    continue;
                }
                Meaning::Named(names) => {
                    let names = names.iter().map(|(v, n)| (*v, (*n).to_owned()));
                    Kind::Named(Arc::new(Names::new(names, false)))
                }
            };
            columns.set_kind(field.name, kind);
        }
        if let Some((tail, _)) = self.tail {
            let from = u32::try_from(self.size - STORED_FROM).expect("records are small");
            columns.add_bytes(tail, from);
        }
        columns.span = self.span.map(str::to_owned);
    }
}

/// Where the fields `record` reads of every record are.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// Offset of the producer's timestamp (u64).
    pub time: usize,
    /// Offsets of `pid` and `tid` (u32), when the record names a thread.
    pub thread: Option<(usize, usize)>,
}

impl Layout {
    /// The record's timestamp.
    pub fn time(&self, record: &[u8]) -> Option<u64> {
        let bytes = record.get(self.time..self.time + 8)?;
        Some(u64::from_le_bytes(bytes.try_into().ok()?))
    }

    /// The process and thread the record is about, when it names one.
    pub fn thread(&self, record: &[u8]) -> Option<(u32, u32)> {
        let (pid, tid) = self.thread?;
        let read = |at: usize| Some(u32::from_le_bytes(record.get(at..at + 4)?.try_into().ok()?));
        let (pid, tid) = (read(pid)?, read(tid)?);
        (tid != 0).then_some((pid, tid))
    }
}

/// Stored records start after the `source` word of the header (the store
/// source says the same); `cpu` is the first stored field.
pub const STORED_FROM: usize = offset_of!(Header, cpu);

/// The `cpu` field every record has, from the header.
const CPU: FieldSpec = FieldSpec {
    name: "cpu",
    offset: offset_of!(Header, cpu),
    kind: FieldKind::U32,
    meaning: Meaning::Int,
    about: "CPU the record was written on",
};
