//! What a query can name: each source's columns, their kinds (plain
//! integers, durations, times, names for numbers), and the store indexes
//! behind them. The store only knows integer fields; the program that
//! wrote the capture adds the meaning (that `nr` 44 is called `sendto`).

use std::{
    collections::HashMap,
    net::{IpAddr, Ipv4Addr, Ipv6Addr},
    sync::{Arc, Mutex, PoisonError},
};

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
    /// How long after its own time a record may arrive, where that is
    /// longer than the live sources' drain (records decoded after the
    /// fact, like PT calls). Windows and correlations then select the
    /// source's records by their own time, reading this much further in
    /// arrival time, and never from chunk summaries (which are by arrival).
    pub late: Option<u64>,
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
    /// A column whose value follows from another's: a thread's process
    /// (`pid`) from its `tid`, so that counts by it add up the other
    /// column's counts (from its index).
    pub derived: Option<Derived>,
}

/// How a [`Column`]'s value follows from another column's.
#[derive(Clone, Debug)]
pub struct Derived {
    /// The other column.
    pub from: String,
    /// Its values, and this column's value for each (a value missing here
    /// has no one value of this column).
    pub map: Arc<HashMap<i64, i64>>,
}

/// Where a column's value comes from.
#[derive(Clone, Debug)]
pub enum Read {
    /// The record's time: the producer's timestamp if it gave one, else
    /// its arrival time.
    Time,
    /// A payload field.
    Field(Field),
    /// An IP address of either family (see [`Kind::Addr`]).
    Addr(AddrFields),
    /// The payload's bytes from an offset on (captured packet bytes):
    /// shown as text, not compared.
    Bytes(u32),
    /// A 128-bit id in two `i64` fields from an offset, the high 64 bits
    /// first (see [`Kind::Id`]).
    Id(u32),
}

/// Where a record keeps an address of either family: its IPv4 form, its
/// IPv6 form and the family (4 or 6) that says which one holds.
#[derive(Clone, Debug)]
pub struct AddrFields {
    /// The family field.
    pub family: Field,
    /// The IPv4 address, a host-order `u32`.
    pub v4: Field,
    /// Byte offset of the 16-byte IPv6 address, network order (numbered
    /// in the column's [`Kind::Addr`] table).
    pub v6: u32,
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
    /// An IP address: an IPv4 address is its host-order integer, an IPv6
    /// address 2^32 plus its number in the table (values are `i64`, an
    /// IPv6 address 128 bits). Shown and written as `10.0.0.1` or `::1`.
    Addr(Arc<Addresses>),
    /// Bytes shown as text, printable ASCII as is and the rest escaped
    /// (`\r`, `\x00`).
    Bytes,
    /// A 64-bit id (a W3C span id), shown and written as 16 hex digits.
    Hex,
    /// A 128-bit id (a W3C trace id), written as 32 hex digits. Its value
    /// is its low 64 bits (random in a W3C id: two ids that share them
    /// are one in 2^64), so it compares and groups without a table; the
    /// table remembers the whole ids met, to show them.
    Id(Arc<Ids>),
}

impl Kind {
    /// Whether values show as text (names, addresses, bytes, ids) rather
    /// than as numbers.
    pub fn is_text(&self) -> bool {
        matches!(
            self,
            Self::Named(_) | Self::Addr(_) | Self::Bytes | Self::Hex | Self::Id(_)
        )
    }
}

/// The whole 128-bit ids of a [`Kind::Id`] column by their values (low
/// 64 bits), as queries met them: the first [`MAX_IDS`] only, so that a
/// scan of millions of ids holds no more.
#[derive(Debug, Default)]
pub struct Ids(Mutex<HashMap<i64, u128>>);

/// Ids an [`Ids`] remembers at most.
pub const MAX_IDS: usize = 1 << 16;

impl Ids {
    /// The value standing for `id`, which is remembered while there is room.
    pub fn value(&self, id: u128) -> i64 {
        let value = (id as u64).cast_signed();
        let mut ids = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if ids.len() < MAX_IDS {
            ids.entry(value).or_insert(id);
        }
        value
    }

    /// The whole id of `value`, when it was met with room to remember it.
    pub fn id(&self, value: i64) -> Option<u128> {
        let ids = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        ids.get(&value).copied()
    }
}

/// A 128-bit id from its 32 hex digits.
pub fn parse_id(text: &str) -> Option<u128> {
    (text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| u128::from_str_radix(text, 16).ok())
        .flatten()
}

/// Numbers for the IPv6 addresses of [`Kind::Addr`] columns, given in the
/// order addresses are first met (by the query's literals or its records),
/// so that an address compares, groups and shows as one `i64`. Lives as
/// long as the catalog: it grows with the distinct IPv6 addresses queried.
#[derive(Debug, Default)]
pub struct Addresses(Mutex<AddressTable>);

#[derive(Debug, Default)]
struct AddressTable {
    numbers: HashMap<Ipv6Addr, i64>,
    addresses: Vec<Ipv6Addr>,
}

/// Where IPv6 numbers start: above every IPv4 address.
const V6_BASE: i64 = 1 << 32;

impl Addresses {
    /// The value standing for `address`.
    pub fn value(&self, address: IpAddr) -> i64 {
        match address {
            IpAddr::V4(v4) => i64::from(u32::from(v4)),
            IpAddr::V6(v6) => {
                let mut table = self.0.lock().unwrap_or_else(PoisonError::into_inner);
                let count = i64::try_from(table.addresses.len()).expect("fewer than 2^63");
                let next = V6_BASE + count;
                let table = &mut *table;
                *table.numbers.entry(v6).or_insert_with(|| {
                    table.addresses.push(v6);
                    next
                })
            }
        }
    }

    /// The address `value` stands for; `None` for a value no address has.
    pub fn address(&self, value: i64) -> Option<IpAddr> {
        if let Ok(v4) = u32::try_from(value) {
            return Some(IpAddr::V4(Ipv4Addr::from(v4)));
        }
        let table = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let at = usize::try_from(value.checked_sub(V6_BASE)?).ok()?;
        table.addresses.get(at).copied().map(IpAddr::V6)
    }
}

impl AddrFields {
    /// The record's address as a value of `table`.
    fn value(&self, payload: &[u8], table: &Addresses) -> Option<i64> {
        if self.family.read(payload)? == 4 {
            return self.v4.read(payload);
        }
        let at = self.v6 as usize;
        let bytes: [u8; 16] = payload.get(at..at + 16)?.try_into().ok()?;
        Some(table.value(IpAddr::V6(Ipv6Addr::from(bytes))))
    }
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
                    derived: None,
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
                        derived: None,
                    }
                }));
                SourceColumns {
                    id: source.id,
                    name: source.name.clone(),
                    columns,
                    span: None,
                    late: None,
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

    /// Says that column `name`'s value follows from column `from`'s by
    /// `map` (see [`Column::derived`]).
    pub fn derive(&mut self, name: &str, from: &str, map: &Arc<HashMap<i64, i64>>) {
        if let Some(column) = self.columns.iter_mut().find(|c| c.name == name) {
            column.derived = Some(Derived {
                from: from.to_owned(),
                map: Arc::clone(map),
            });
        }
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

    /// Leaves column `name` out of record listings (`fields` still shows it).
    pub fn hide(&mut self, name: &str) {
        if let Some(column) = self.columns.iter_mut().find(|c| c.name == name) {
            column.hidden = true;
        }
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

    /// Makes column `name`, an IPv4 field, an address of either family:
    /// column `family` says which, the IPv6 form is 16 bytes at `v6`.
    pub fn set_address(
        &mut self,
        name: &str,
        family: &str,
        v6: u32,
        table: &Arc<Addresses>,
    ) -> Option<()> {
        let Read::Field(family) = &self.column(family)?.1.read else {
            return None;
        };
        let family = family.clone();
        let at = self.column(name)?.0;
        let column = &mut self.columns[at];
        let Read::Field(v4) = &column.read else {
            return None;
        };
        column.read = Read::Addr(AddrFields {
            family,
            v4: v4.clone(),
            v6,
        });
        column.kind = Kind::Addr(table.clone());
        // An index over the IPv4 field knows nothing of IPv6 addresses.
        column.index = None;
        column.partitioned.clear();
        Some(())
    }

    /// Makes column `name` a 128-bit id: its field the high 64 bits, field
    /// `low` (hidden) the low ones.
    pub fn set_id(&mut self, name: &str, low: &str, table: &Arc<Ids>) -> Option<()> {
        let low = self.column(low)?.0;
        self.columns[low].hidden = true;
        let at = self.column(name)?.0;
        let column = &mut self.columns[at];
        let Read::Field(high) = &column.read else {
            return None;
        };
        column.read = Read::Id(high.offset);
        column.kind = Kind::Id(table.clone());
        Some(())
    }

    /// Adds column `name` showing the payload's bytes from offset `from`.
    pub fn add_bytes(&mut self, name: &str, from: u32) {
        self.columns.push(Column {
            name: name.to_owned(),
            read: Read::Bytes(from),
            kind: Kind::Bytes,
            hidden: false,
            index: None,
            partitioned: Vec::new(),
            derived: None,
        });
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
    /// The column's value in a record, `None` when the payload is short
    /// or the column holds bytes.
    pub fn value(&self, time: u64, payload: &[u8]) -> Option<i64> {
        match &self.read {
            Read::Time => i64::try_from(time).ok(),
            Read::Field(field) => field.read(payload),
            Read::Addr(fields) => match &self.kind {
                Kind::Addr(table) => fields.value(payload, table),
                // Shown another way (`set_kind`): IPv4 addresses only.
                _ => fields.v4.read(payload),
            },
            Read::Bytes(_) => None,
            Read::Id(_) => {
                let id = self.id(payload)?;
                match &self.kind {
                    Kind::Id(table) => Some(table.value(id)),
                    _ => Some((id >> 64) as i64),
                }
            }
        }
    }

    /// The whole 128-bit id a [`Read::Id`] column holds in a record.
    pub fn id(&self, payload: &[u8]) -> Option<u128> {
        let Read::Id(at) = self.read else {
            return None;
        };
        let half = |from: usize| -> Option<u64> {
            Some(u64::from_le_bytes(
                payload.get(from..from + 8)?.try_into().ok()?,
            ))
        };
        let at = at as usize;
        Some(u128::from(half(at)?) << 64 | u128::from(half(at + 8)?))
    }

    /// The bytes a [`Read::Bytes`] column holds in a record.
    pub fn bytes<'a>(&self, payload: &'a [u8]) -> Option<&'a [u8]> {
        match self.read {
            Read::Bytes(from) => payload.get(from as usize..),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_number_ipv6_above_every_ipv4_and_show_them_back() {
        let table = Addresses::default();
        let v4: IpAddr = "255.255.255.255".parse().unwrap();
        let a: IpAddr = "::1".parse().unwrap();
        let b: IpAddr = "fe80::1".parse().unwrap();
        assert_eq!(table.value(v4), 0xffff_ffff);
        let (va, vb) = (table.value(a), table.value(b));
        assert_eq!((va, vb), (V6_BASE, V6_BASE + 1));
        assert_eq!(table.value(a), va, "an address keeps its number");
        for (value, address) in [(va, a), (vb, b), (0xffff_ffff, v4)] {
            assert_eq!(table.address(value), Some(address));
        }
        assert_eq!(table.address(V6_BASE + 2), None);
        assert_eq!(table.address(-1), None);
    }

    /// A 128-bit id's value is its low 64 bits; the table shows the whole
    /// id back, and holds at most `MAX_IDS` of them however many are read.
    #[test]
    fn ids_compare_by_their_low_bits_and_show_whole_within_the_table_s_room() {
        let table = Ids::default();
        let id = parse_id("4bf92f3577b34da6a3ce929d0e0e4736").unwrap();
        let value = table.value(id);
        assert_eq!(value.cast_unsigned(), 0xa3ce_929d_0e0e_4736);
        assert_eq!(table.id(value), Some(id));
        for low in 0..(MAX_IDS as u128 + 10) {
            table.value(1 << 64 | low);
        }
        assert_eq!(table.0.lock().unwrap().len(), MAX_IDS);
        assert_eq!(
            parse_id("4bf92f3577b34da6a3ce929d0e0e473"),
            None,
            "31 digits"
        );
        assert_eq!(parse_id("+bf92f3577b34da6a3ce929d0e0e4736"), None);
    }
}
