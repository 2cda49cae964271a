//! What a source of a capture is, described once: its record's fields
//! (names, types, what their integers mean), its default store indexes,
//! and what queries show of it. Every source weft records under has one
//! [`Spec`] (`weft_capture::sources::EVERY` lists them); the producers
//! define their store source from it and the query catalog describes it
//! from it.

use std::mem::offset_of;

use weft_abi::events::Header;
use weft_store::{Bins, Field, FieldKind, Partition, SourceId, Store};

/// What a field's integers mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meaning {
    /// A plain integer.
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
    /// A system call's number, shown by name.
    Syscall,
    /// A source of the same capture, by its store id, shown by name.
    Source,
    /// A function of the capture's `symbols` source, by its number.
    Symbol,
    /// A file of the capture's `paths` source, by its number.
    Path,
}

/// One field of a source's record.
pub struct FieldSpec {
    /// Its name in the store.
    pub name: &'static str,
    /// Byte offset in the record as its producer writes it (a kernel
    /// record's header included: see [`Spec::stored_from`]).
    pub offset: usize,
    /// Its width and sign.
    pub kind: FieldKind,
    /// What its integers mean.
    pub meaning: Meaning,
    /// What it is, in a few words (`weft sources`).
    pub about: &'static str,
    /// The name queries know it by, when not its own (`dur` for
    /// `duration_ns`); its own stays hidden.
    pub shown_as: Option<&'static str>,
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
        shown_as: None,
    }
}

impl FieldSpec {
    /// The same field, known to queries as `name`.
    #[must_use]
    pub const fn shown_as(mut self, name: &'static str) -> Self {
        self.shown_as = Some(name);
        self
    }
}

/// A default index: latency bins over a duration field, or one bin per
/// value `0..=max` of a small integer field (exact match: a port, an
/// operation).
pub enum IndexSpec {
    /// Latency bins over this duration field, the index named as it.
    Latency(&'static str),
    /// One bin per value `0..=max` of this field, the index named as it.
    Exact(&'static str, i64),
    /// One wide bin over the field's values (`0..2^36`, and the outliers
    /// each side), the index named as it: the values log then holds each
    /// chunk's distinct values with their counts, and `count by tid` comes
    /// from it.
    Values(&'static str),
    /// One wide bin over `field`'s values, as [`IndexSpec::Values`], that
    /// also splits the index named `splits`: where a chunk's records hold
    /// several values of `field`, the values log keeps that index's values
    /// apart per value (a thread's latencies, so that `p99(dur) by pid`
    /// reads the values log, not the records, where threads interleave).
    Key {
        /// The field, and the index's name.
        field: &'static str,
        /// The index whose values it splits (defined before it).
        splits: &'static str,
    },
    /// Latency bins of `field` kept apart per value `0..count` of `by`:
    /// grouped percentiles (`p99(latency) by op`) come from summaries.
    LatencyBy {
        /// The index's name.
        name: &'static str,
        /// The duration field.
        field: &'static str,
        /// The field whose values partition it.
        by: &'static str,
        /// Values of `by` kept apart: `0..count`.
        count: u32,
    },
}

/// One source.
pub struct Spec {
    /// Its name on the command line, in messages and in captures (the
    /// kernel side's too).
    pub name: &'static str,
    /// The size of its record (a kernel record's header included).
    pub size: usize,
    /// Bytes of the record before what is stored: a kernel record's
    /// `source` word ([`STORED_FROM`]), 0 for records weft writes itself.
    pub stored_from: usize,
    /// Other names queries may call it by.
    pub aliases: &'static [&'static str],
    /// What it records, in a line (`weft sources`).
    pub about: &'static str,
    /// Its record's fields, in order.
    pub fields: &'static [FieldSpec],
    /// Its default store indexes.
    pub indexes: &'static [IndexSpec],
    /// The field holding the producer's timestamp, if the record has one
    /// (else the store's own time is the record's).
    pub time: Option<&'static str>,
    /// A duration field that ends at the record's time (for `during`).
    pub span: Option<&'static str>,
    /// A column holding the bytes a record may carry after its `size`
    /// (a packet's first payload bytes): its name and what it is.
    pub tail: Option<(&'static str, &'static str)>,
    /// Whether queries show its `tid` by the thread's name, as `comm`.
    pub threads: bool,
    /// The columns a listing shows first, in order (the rest follow).
    pub first: &'static [&'static str],
    /// How late (ns) a record may arrive after its own time.
    pub late: Option<u64>,
}

impl Spec {
    /// A source with these fields and the rest empty, to fill in.
    pub const fn new(
        name: &'static str,
        about: &'static str,
        fields: &'static [FieldSpec],
    ) -> Self {
        Self {
            name,
            size: 0,
            stored_from: 0,
            aliases: &[],
            about,
            fields,
            indexes: &[],
            time: None,
            span: None,
            tail: None,
            threads: false,
            first: &[],
            late: None,
        }
    }

    /// The store fields: the record from [`Self::stored_from`] on.
    pub fn store_fields(&self) -> Vec<Field> {
        self.fields
            .iter()
            .map(|f| {
                let offset = u32::try_from(f.offset - self.stored_from).expect("offsets are small");
                Field::new(f.name, offset, f.kind)
            })
            .collect()
    }

    /// The stored offset of a record's byte `offset`.
    pub fn stored(&self, offset: usize) -> u32 {
        u32::try_from(offset - self.stored_from).expect("offsets are small")
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
            time: self
                .time
                .and_then(offset)
                .expect("a kernel source's time field exists"),
            // A switch names the thread that left the CPU: every thread
            // that runs leaves one, so each gets its name noted.
            thread: (offset("pid").zip(offset("tid")))
                .or_else(|| offset("prev_pid").zip(offset("prev_tid"))),
        }
    }

    /// Defines (or finds again) the source and its default indexes.
    ///
    /// # Panics
    ///
    /// If an index names a field the source lacks: the tables are
    /// checked by a unit test.
    pub fn define(&self, store: &mut Store) -> weft_store::Result<SourceId> {
        let fields = self.store_fields();
        let source = store.define_source(self.name, fields.clone())?;
        let find = |name: &str| {
            (fields.iter().find(|f| f.name == name).cloned())
                .unwrap_or_else(|| panic!("source {}: index over unknown field {name}", self.name))
        };
        for index in self.indexes {
            let (name, field, bins, partition) = match *index {
                IndexSpec::Latency(field) => (field, find(field), latency_bins(), None),
                IndexSpec::Exact(field, max) => (field, find(field), exact_bins(max), None),
                IndexSpec::Values(field) | IndexSpec::Key { field, .. } => {
                    (field, find(field), value_bins(), None)
                }
                IndexSpec::LatencyBy {
                    name,
                    field,
                    by,
                    count,
                } => {
                    let partition = Partition {
                        field: find(by),
                        count,
                    };
                    (name, find(field), latency_bins(), Some(partition))
                }
            };
            if store.index_named(source, name).is_some() {
                continue;
            }
            let id = store.define_partitioned_index(source, name, field, bins, partition)?;
            if let IndexSpec::Key { splits, .. } = *index {
                let values = store.index_named(source, splits).unwrap_or_else(|| {
                    panic!("source {}: index {name} splits unknown {splits}", self.name)
                });
                store.split_values(id, values)?;
            }
        }
        Ok(source)
    }
}

/// One bin per value `0..=max` (and the outlier bins): an exact-match index.
pub fn exact_bins(max: i64) -> Bins {
    Bins::new((0..=max).collect()).expect("strictly increasing by construction")
}

/// One bin of the values `0..2^36` (and the outliers each side): one run
/// per distinct value in the values log, packed as the log packs values.
pub fn value_bins() -> Bins {
    Bins::new(vec![0, 1 << 36]).expect("strictly increasing")
}

/// Latency bins 10% apart from 100 ns to about 100 s, so percentiles read
/// few chunks, split at every power of two from 1 ns to 2^37 ns too, so
/// that `hist()`'s buckets are whole bins and come from the summaries
/// alone (no bin straddles a bucket's edge).
pub fn latency_bins() -> Bins {
    let mut bounds = vec![100i64];
    while let Some(&last) = bounds.last().filter(|b| **b < 100_000_000_000) {
        bounds.push((last + last / 10).max(last + 1));
    }
    bounds.extend((0..=37).map(|shift| 1i64 << shift));
    bounds.sort_unstable();
    bounds.dedup();
    Bins::new(bounds).expect("strictly increasing once sorted and deduplicated")
}

/// Where the fields `record` reads of every kernel record are.
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

/// Stored kernel records start after the `source` word of the header (the
/// store source says the same); `cpu` is the first stored field.
pub const STORED_FROM: usize = offset_of!(Header, cpu);

/// The `cpu` field every kernel record has, from the header.
pub const CPU: FieldSpec = FieldSpec {
    name: "cpu",
    offset: offset_of!(Header, cpu),
    kind: FieldKind::U32,
    meaning: Meaning::Int,
    about: "CPU the record was written on",
    shown_as: None,
};
