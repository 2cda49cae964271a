//! What a query can name: each source's columns, their kinds (plain
//! integers, durations, times, names for numbers), and the store indexes
//! behind them. The store only knows integer fields; the program that
//! wrote the capture adds the meaning (that `nr` 44 is called `sendto`).

use std::{collections::HashMap, sync::Arc};

use weft_store::{Field, IndexId, Meta, SourceId};

/// Every source of a capture and its columns.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    /// Sources, and aliases of them.
    pub sources: Vec<SourceColumns>,
    /// Wall-clock time minus `CLOCK_MONOTONIC`, in ns, when known: times
    /// then print as UTC and windows may use wall-clock times.
    pub wall_offset: Option<i64>,
    /// What `now` means, as `CLOCK_MONOTONIC` ns: the present for a live
    /// capture; `None` for a recording, whose "now" is its last record.
    pub now: Option<u64>,
    /// Read every record: no index, no chunk summaries (see
    /// [`Catalog::without_indexes`]).
    pub full_scan: bool,
}

/// The columns of one source.
#[derive(Clone, Debug)]
pub struct SourceColumns {
    /// The store's source id.
    pub id: SourceId,
    /// Its name.
    pub name: String,
    /// Its columns; `time` first.
    pub columns: Vec<Column>,
    /// A duration column that, ending at a record's time, gives the span
    /// `during` correlates with.
    pub span: Option<String>,
}

/// A column of a source.
#[derive(Clone, Debug)]
pub struct Column {
    /// What queries call it.
    pub name: String,
    /// Where its value comes from.
    pub read: Read,
    /// How its values are shown and compared with text.
    pub kind: Kind,
    /// Left out of record listings (still usable by name).
    pub hidden: bool,
    /// A store index over the same field, if there is one.
    pub index: Option<IndexId>,
    /// Store indexes over the same field split by another field (the
    /// partition field and its part count): "p99 of `dur` where `nr` = 44"
    /// from summaries.
    pub partitioned: Vec<(IndexId, Field, u32)>,
}

/// Where a column's value comes from.
#[derive(Clone, Debug)]
pub enum Read {
    /// The record's time: the producer's timestamp if it gave one, else
    /// its arrival time.
    Time,
    /// A payload field.
    Field(Field),
}

/// How a column's integer values are meant.
#[derive(Clone, Debug)]
pub enum Kind {
    /// A plain integer.
    Int,
    /// Nanoseconds of duration.
    Duration,
    /// A `CLOCK_MONOTONIC` time in ns.
    Time,
    /// Numbers that have names (syscall numbers, process ids with their
    /// command names).
    Named(Arc<Names>),
    /// An IPv4 address as a host-order integer: shown and written as
    /// `10.0.0.1`.
    Ipv4,
}

/// Names of the values of a [`Kind::Named`] column. Several values may
/// share one name (threads of one command); they group as one.
#[derive(Debug, Default)]
pub struct Names {
    /// The name of each value that has one.
    by_value: HashMap<i64, String>,
    /// For each value, the smallest value with the same name.
    first: HashMap<i64, i64>,
    /// Whether every value a record may hold has a name here, so that an
    /// unknown name in a query is an error rather than an empty answer.
    pub closed: bool,
}

impl Names {
    /// Names for values; `closed` when no other value can occur.
    pub fn new(names: impl IntoIterator<Item = (i64, String)>, closed: bool) -> Self {
        let by_value: HashMap<i64, String> = names.into_iter().collect();
        let mut lowest: HashMap<&str, i64> = HashMap::new();
        for (value, name) in &by_value {
            let v = lowest.entry(name).or_insert(*value);
            *v = (*v).min(*value);
        }
        let first = by_value
            .iter()
            .map(|(v, n)| (*v, lowest[n.as_str()]))
            .collect();
        Self {
            by_value,
            first,
            closed,
        }
    }

    /// The value that stands for all values sharing `value`'s name, so
    /// that grouping by a named column makes one group per name.
    pub fn group_of(&self, value: i64) -> i64 {
        self.first.get(&value).copied().unwrap_or(value)
    }

    /// A value's name, or the number itself.
    pub fn name_of(&self, value: i64) -> String {
        self.by_value
            .get(&value)
            .cloned()
            .unwrap_or_else(|| value.to_string())
    }

    /// Sorted values whose names satisfy `pred`.
    pub fn values_where(&self, pred: impl Fn(&str) -> bool) -> Vec<i64> {
        let mut values: Vec<i64> = self
            .by_value
            .iter()
            .filter(|(_, n)| pred(n))
            .map(|(v, _)| *v)
            .collect();
        values.sort_unstable();
        values
    }
}

impl Catalog {
    /// Every source of `meta` with a `time` column and one integer column
    /// per field, bound to the indexes defined over them.
    pub fn from_meta(meta: &Meta) -> Self {
        let sources = meta
            .sources
            .iter()
            .map(|source| {
                let mut columns = vec![Column {
                    name: "time".into(),
                    read: Read::Time,
                    kind: Kind::Time,
                    hidden: false,
                    index: None,
                    partitioned: Vec::new(),
                }];
                columns.extend(source.fields.iter().map(|field| {
                    Column {
                        name: field.name.clone(),
                        read: Read::Field(field.clone()),
                        kind: Kind::Int,
                        hidden: false,
                        index: meta
                            .indexes
                            .iter()
                            .find(|i| {
                                i.source == source.id && i.field == *field && i.partition.is_none()
                            })
                            .map(|i| i.id),
                        partitioned: meta
                            .indexes
                            .iter()
                            .filter(|i| i.source == source.id && i.field == *field)
                            .filter_map(|i| {
                                let p = i.partition.as_ref()?;
                                Some((i.id, p.field.clone(), p.count))
                            })
                            .collect(),
                    }
                }));
                SourceColumns {
                    id: source.id,
                    name: source.name.clone(),
                    columns,
                    span: None,
                }
            })
            .collect();
        Self {
            sources,
            wall_offset: None,
            now: None,
            full_scan: false,
        }
    }

    /// Forgets every index: queries then read every record of their
    /// window (to measure what the indexes save).
    pub fn without_indexes(&mut self) {
        self.full_scan = true;
        for column in self.sources.iter_mut().flat_map(|s| s.columns.iter_mut()) {
            column.index = None;
            column.partitioned.clear();
        }
    }

    /// The source called `name`.
    pub fn source(&self, name: &str) -> Option<&SourceColumns> {
        self.sources.iter().find(|s| s.name == name)
    }

    /// The source called `name`, to add meaning to.
    pub fn source_mut(&mut self, name: &str) -> Option<&mut SourceColumns> {
        self.sources.iter_mut().find(|s| s.name == name)
    }

    /// Lets queries call source `of` by `name` too (when it exists and
    /// nothing else is called `name`).
    pub fn alias_source(&mut self, of: &str, name: &str) {
        if self.source(name).is_some() {
            return;
        }
        if let Some(source) = self.source(of) {
            let alias = SourceColumns {
                name: name.to_owned(),
                ..source.clone()
            };
            self.sources.push(alias);
        }
    }
}

impl SourceColumns {
    /// The column called `name`.
    pub fn column(&self, name: &str) -> Option<(usize, &Column)> {
        self.columns
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == name)
    }

    /// A new column over the same field as column `of`, or `None` when
    /// there is no such column. The field's own column is hidden from
    /// listings: the new one shows it.
    pub fn alias(&mut self, of: &str, name: &str, kind: Kind) -> Option<()> {
        self.view(of, name, kind)?;
        let at = self.column(of)?.0;
        self.columns[at].hidden = true;
        Some(())
    }

    /// A new column that shows column `of`'s values another way (a
    /// thread's name for its id), inserted before it; `None` when there is
    /// no such column.
    pub fn view(&mut self, of: &str, name: &str, kind: Kind) -> Option<()> {
        let (at, original) = self.column(of)?;
        let column = Column {
            name: name.to_owned(),
            kind,
            hidden: false,
            ..original.clone()
        };
        self.columns.insert(at, column);
        Some(())
    }

    /// Moves the columns called `names` (those that exist) right after
    /// `time`, in that order: the order record listings show.
    pub fn show_first(&mut self, names: &[&str]) {
        let mut front = Vec::new();
        for name in names {
            if let Some(at) = self.columns.iter().position(|c| c.name == *name) {
                front.push(self.columns.remove(at));
            }
        }
        let at = usize::from(self.columns.first().is_some_and(|c| c.name == "time"));
        self.columns.splice(at..at, front);
    }

    /// Sets the kind of column `name`.
    pub fn set_kind(&mut self, name: &str, kind: Kind) -> Option<()> {
        let at = self.column(name)?.0;
        self.columns[at].kind = kind;
        Some(())
    }

    /// Names of the columns, for error messages.
    pub fn column_names(&self) -> String {
        self.columns
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Column {
    /// The column's value in a record, `None` when the payload is short.
    pub fn value(&self, time: u64, payload: &[u8]) -> Option<i64> {
        match &self.read {
            Read::Time => i64::try_from(time).ok(),
            Read::Field(field) => field.read(payload),
        }
    }
}
