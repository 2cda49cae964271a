//! Sources, their fields, and the indexes over them; persisted in the capture
//! directory's `meta` file so a reopened store knows how to read its records.

use std::{fmt::Write as _, io::Write as _};

use crate::{
    dir::Dir,
    error::{Error, Result, io},
};

/// A source id, assigned by [`crate::Store::define_source`].
pub type SourceId = u16;
/// An index id, assigned by [`crate::Store::define_index`]; 0 is reserved for
/// the implicit per-source index (one bin, every record).
pub type IndexId = u16;

/// Integer types a field can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// Unsigned, 1 byte.
    U8,
    /// Unsigned, 2 bytes.
    U16,
    /// Unsigned, 4 bytes.
    U32,
    /// Unsigned, 8 bytes (values above `i64::MAX` saturate when read).
    U64,
    /// Signed, 4 bytes.
    I32,
    /// Signed, 8 bytes.
    I64,
}

impl FieldKind {
    fn name(self) -> &'static str {
        match self {
            Self::U8 => "u8",
            Self::U16 => "u16",
            Self::U32 => "u32",
            Self::U64 => "u64",
            Self::I32 => "i32",
            Self::I64 => "i64",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [
            Self::U8,
            Self::U16,
            Self::U32,
            Self::U64,
            Self::I32,
            Self::I64,
        ]
        .into_iter()
        .find(|kind| kind.name() == name)
    }
}

/// A little-endian integer at a fixed offset of a record's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// One word, unique within its source.
    pub name: String,
    /// Byte offset in the payload.
    pub offset: u32,
    /// Integer type.
    pub kind: FieldKind,
}

impl Field {
    /// A field called `name` of type `kind` at byte `offset`.
    pub fn new(name: &str, offset: u32, kind: FieldKind) -> Self {
        Self {
            name: name.to_owned(),
            offset,
            kind,
        }
    }

    /// The field's value in `payload`, or `None` when the payload is too short.
    /// `u64` values above `i64::MAX` saturate.
    #[inline]
    pub fn read(&self, payload: &[u8]) -> Option<i64> {
        /// The `N` bytes at `at`, as a fixed-size array (a plain load,
        /// where a slice of the kind's size would be a call to memcpy).
        fn bytes<const N: usize>(payload: &[u8], at: usize) -> Option<[u8; N]> {
            payload.get(at..at + N)?.try_into().ok()
        }
        let at = self.offset as usize;
        Some(match self.kind {
            FieldKind::U8 => i64::from(*payload.get(at)?),
            FieldKind::U16 => i64::from(u16::from_le_bytes(bytes(payload, at)?)),
            FieldKind::U32 => i64::from(u32::from_le_bytes(bytes(payload, at)?)),
            FieldKind::U64 => {
                i64::try_from(u64::from_le_bytes(bytes(payload, at)?)).unwrap_or(i64::MAX)
            }
            FieldKind::I32 => i64::from(i32::from_le_bytes(bytes(payload, at)?)),
            FieldKind::I64 => i64::from_le_bytes(bytes(payload, at)?),
        })
    }
}

/// A source: a named stream of records with a schema of fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// Assigned in definition order, from 0.
    pub id: SourceId,
    /// One word, unique in the store.
    pub name: String,
    /// The payload's schema.
    pub fields: Vec<Field>,
}

/// Value bins of an index: sorted boundaries `b0 < b1 < ... < bk-1`.
///
/// Bin 0 holds values below `b0` (low outliers), bin `i` holds `[b(i-1), bi)`,
/// and bin `k` holds values at or above `bk-1` (high outliers). An exact-match
/// index on value `v` is `[v, v + 1]`: bin 1 holds exactly `v`.
///
/// Finding a value's bin is on the append path of every indexed record, so
/// it is a few shifts and a table look-up rather than a search:
///
/// ```text
///  value v >= 0, bit length k        slot
///  k <= 5 (v < 32)                   v
///  k >= 6                            32 + (k - 6) * 16 + (the 4 bits after v's top bit)
///
///  slots[s] = bin of the smallest value of slot s; v's bin is in
///  slots[s] ..= slots[s + 1], and a slot is at most 1/16 of its octave
///  wide: latency bins 10% apart have at most one boundary in it.
/// ```
///
/// Boundaries that are consecutive integers (an exact-match index over
/// `0..=n`) take their bin by one subtraction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bins {
    boundaries: Vec<i64>,
    /// The bin of each slot's smallest value, and one past the last slot
    /// (the bin of `i64::MAX`).
    slots: Vec<u32>,
    /// Whether the boundaries are `b0, b0 + 1, b0 + 2, ...`.
    dense: bool,
}

/// Slots of values below 32 (one each).
const SMALL_SLOTS: u32 = 32;
/// Bits after the top bit that pick a slot within an octave.
const SLOT_BITS: u32 = 4;

/// The slot of a non-negative `value` (see [`Bins`]).
#[inline]
fn slot_of(value: i64) -> usize {
    let value = value.unsigned_abs();
    let bits = 64 - value.leading_zeros();
    if bits <= 5 {
        return value as usize;
    }
    let sub = (value >> (bits - 1 - SLOT_BITS)) as u32 & ((1 << SLOT_BITS) - 1);
    (SMALL_SLOTS + ((bits - 6) << SLOT_BITS) + sub) as usize
}

/// The smallest value of slot `slot`.
fn slot_start(slot: u32) -> i64 {
    if slot < SMALL_SLOTS {
        return i64::from(slot);
    }
    let bits = (slot - SMALL_SLOTS) / (1 << SLOT_BITS) + 6;
    let sub = i64::from((slot - SMALL_SLOTS) % (1 << SLOT_BITS));
    ((1 << SLOT_BITS) + sub) << (bits - 1 - SLOT_BITS)
}

impl Bins {
    /// Checks that `boundaries` is non-empty and strictly increasing.
    pub fn new(boundaries: Vec<i64>) -> Result<Self> {
        if boundaries.is_empty() || boundaries.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::Invalid(format!(
                "bin boundaries must be non-empty and strictly increasing, got {boundaries:?}"
            )));
        }
        let count = |value: i64| boundaries.partition_point(|b| *b <= value) as u32;
        let last_slot = slot_of(i64::MAX) as u32;
        let slots = (0..=last_slot)
            .map(|slot| count(slot_start(slot)))
            .chain([count(i64::MAX)])
            .collect();
        let dense = boundaries
            .windows(2)
            .all(|w| w[0].checked_add(1) == Some(w[1]));
        Ok(Self {
            boundaries,
            slots,
            dense,
        })
    }

    /// Number of bins, outliers included.
    pub fn len(&self) -> usize {
        self.boundaries.len() + 1
    }

    /// Never true: there are always the two outlier bins.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bin `value` falls in.
    #[inline]
    pub fn bin_of(&self, value: i64) -> u32 {
        let last = self.boundaries.len() as u32;
        if self.dense {
            let offset = i128::from(value) - i128::from(self.boundaries[0]) + 1;
            return offset.clamp(0, i128::from(last)).unsigned_abs() as u32;
        }
        if value < 0 {
            return self.boundaries.partition_point(|b| *b <= value) as u32;
        }
        let slot = slot_of(value);
        let (mut bin, hi) = (self.slots[slot], self.slots[slot + 1]);
        if hi - bin > 4 {
            let between = &self.boundaries[bin as usize..hi as usize];
            return bin + between.partition_point(|b| *b <= value) as u32;
        }
        while bin < hi && self.boundaries[bin as usize] <= value {
            bin += 1;
        }
        bin
    }

    /// The half-open value range `[lo, hi)` of `bin`; outlier bins are open-ended
    /// (`hi` is `None` for the high outliers).
    pub fn range(&self, bin: u32) -> (i64, Option<i64>) {
        let bin = bin as usize;
        let lo = if bin == 0 {
            i64::MIN
        } else {
            self.boundaries[bin - 1]
        };
        (lo, self.boundaries.get(bin).copied())
    }

    /// The sorted boundaries the bins were made from.
    pub fn boundaries(&self) -> &[i64] {
        &self.boundaries
    }
}

/// An index: value bins over one field of one source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Index {
    /// Assigned in definition order, from 1.
    pub id: IndexId,
    /// The source whose records it bins.
    pub source: SourceId,
    /// One word.
    pub name: String,
    /// The field whose value is binned.
    pub field: Field,
    /// The value bins.
    pub bins: Bins,
    /// First chunk the index summarises; earlier chunks are scanned.
    pub from_chunk: u64,
    /// Chunk at which the index was closed, if it was.
    pub until_chunk: Option<u64>,
    /// Bins kept apart per value of a second field, if any.
    pub partition: Option<Partition>,
    /// An index (without parts) whose values the values log keeps apart per
    /// value of this one, in chunks where this one sees several: a thread's
    /// latencies, so that `p99(dur) by pid` reads the values log, not the
    /// records, where threads interleave.
    pub splits: Option<IndexId>,
}

/// Splits an index's bins by the value of a second field (a syscall's
/// number for its latency): summaries then answer "p99 latency of sendto"
/// as well as "p99 latency".
///
/// Part `p` (a value `0 <= p < count` of the field; every other value is
/// part `count`) holds bins `p * B .. (p + 1) * B` of the index, where `B`
/// is the number of value bins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Partition {
    /// The field whose value picks the part.
    pub field: Field,
    /// Parts for the values `0..count`; one more holds the rest.
    pub count: u32,
}

impl Index {
    /// Whether chunk `chunk` has summaries for this index.
    pub fn covers(&self, chunk: u64) -> bool {
        chunk >= self.from_chunk && self.until_chunk.is_none_or(|end| chunk < end)
    }

    /// Parts: 1 without a partition.
    pub fn parts(&self) -> u32 {
        self.partition.as_ref().map_or(1, |p| p.count + 1)
    }

    /// The part of a record's payload (0 without a partition).
    pub fn part_of(&self, payload: &[u8]) -> u32 {
        self.partition.as_ref().map_or(0, |p| {
            p.field
                .read(payload)
                .and_then(|v| u32::try_from(v).ok())
                .filter(|v| *v < p.count)
                .unwrap_or(p.count)
        })
    }

    /// The summary bin of value bin `value_bin` in part `part`.
    pub fn bin(&self, part: u32, value_bin: u32) -> u32 {
        part * self.bins.len() as u32 + value_bin
    }
}

/// Everything the `meta` file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// Bytes per chunk.
    pub block_size: u32,
    /// Chunks per record-log segment file.
    pub blocks_per_segment: u32,
    /// Sources by id.
    pub sources: Vec<Source>,
    /// Indexes by id minus one.
    pub indexes: Vec<Index>,
    /// Pinned time windows, kept by the disk budget.
    pub pins: Vec<(u64, u64)>,
    /// What the capture held when it was last closed cleanly; `None`
    /// while a writer has it open, after a crash, and in captures from
    /// before this was kept. Recovery cuts a torn tail only without it:
    /// damage to a closed capture is an error.
    pub closed: Option<Closed>,
    /// The format the capture's logs are written in: from their file
    /// headers, not from the `meta` file.
    pub format: crate::FormatVersion,
}

/// A clean close: what a whole capture holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Closed {
    /// Chunks written.
    pub chunks: u64,
    /// Record segments the disk budget or retention deleted, ascending:
    /// any other segment missing is lost.
    pub deleted: Vec<u64>,
    /// Where the groups log ends: with it a reader checks the logs' ends
    /// without walking them. `None` in captures closed before it was kept.
    pub groups_end: Option<u64>,
}

/// The largest `meta` a store writes is far smaller (a few sources and
/// indexes, pinned windows): a larger one is refused before it is read.
const MAX_META_BYTES: u64 = 16 << 20;

/// The largest chunk a store writes (and so a reader allocates).
pub(crate) const MAX_BLOCK_SIZE: u32 = 64 << 20;

/// The most chunks one record segment holds.
pub(crate) const MAX_BLOCKS_PER_SEGMENT: u32 = 1 << 20;

/// Checks a chunk size and segment length as the writer accepts them.
pub(crate) fn check_layout(
    block_size: u32,
    blocks_per_segment: u32,
) -> std::result::Result<(), String> {
    if !block_size.is_power_of_two() || !(4096..=MAX_BLOCK_SIZE).contains(&block_size) {
        return Err(format!(
            "block size {block_size} must be a power of two from 4096 to {MAX_BLOCK_SIZE}"
        ));
    }
    if !(1..=MAX_BLOCKS_PER_SEGMENT).contains(&blocks_per_segment) {
        return Err(format!(
            "blocks per segment {blocks_per_segment} must be from 1 to {MAX_BLOCKS_PER_SEGMENT}"
        ));
    }
    Ok(())
}

/// The first line of `meta`. Version 2 always ends with a `crc` line, so
/// a cut that happens to fall between lines is caught too; version 1
/// (captures from before the checksum) may lack it.
const META_HEADER: &str = "weft-store meta 2";
const META_HEADER_V1: &str = "weft-store meta 1";

impl Meta {
    /// The source `id`, or [`Error::Unknown`].
    pub fn source(&self, id: SourceId) -> Result<&Source> {
        self.sources.get(usize::from(id)).ok_or(Error::Unknown {
            what: "source",
            id: u32::from(id),
        })
    }

    /// The index `id`, or [`Error::Unknown`].
    pub fn index(&self, id: IndexId) -> Result<&Index> {
        id.checked_sub(1)
            .and_then(|i| self.indexes.get(usize::from(i)))
            .ok_or(Error::Unknown {
                what: "index",
                id: u32::from(id),
            })
    }

    fn render(&self) -> String {
        let mut out = format!(
            "{META_HEADER}\nblock_size {}\nblocks_per_segment {}\n",
            self.block_size, self.blocks_per_segment
        );
        for source in &self.sources {
            let fields: Vec<String> = source
                .fields
                .iter()
                .map(|f| format!("{}:{}:{}", f.name, f.offset, f.kind.name()))
                .collect();
            let _ = writeln!(
                out,
                "source {} {} {}",
                source.id,
                source.name,
                fields.join(",")
            );
        }
        for index in &self.indexes {
            let bins = bounds_text(index.bins.boundaries(), self.format.has_groups());
            let until = index
                .until_chunk
                .map_or_else(|| "-".to_owned(), |c| c.to_string());
            let f = &index.field;
            let partition = index.partition.as_ref().map_or_else(String::new, |p| {
                let f = &p.field;
                format!(" {}:{}:{}:{}", f.name, f.offset, f.kind.name(), p.count)
            });
            let splits = index
                .splits
                .map_or_else(String::new, |id| format!(" splits={id}"));
            let _ = writeln!(
                out,
                "index {} {} {} {}:{}:{} {} {} {}{partition}{splits}",
                index.id,
                index.source,
                index.name,
                f.name,
                f.offset,
                f.kind.name(),
                index.from_chunk,
                until,
                bins
            );
        }
        for (start, end) in &self.pins {
            let _ = writeln!(out, "pin {start} {end}");
        }
        if let Some(closed) = &self.closed {
            let deleted: Vec<i64> = closed
                .deleted
                .iter()
                .map(|s| i64::try_from(*s).unwrap_or(i64::MAX))
                .collect();
            let _ = write!(
                out,
                "closed {} deleted {}",
                closed.chunks,
                bounds_text(&deleted, true)
            );
            if let Some(end) = closed.groups_end {
                let _ = write!(out, " groups_end {end}");
            }
            out.push('\n');
        }
        // Last, over every byte before it.
        let _ = writeln!(out, "crc {:08x}", crc32fast::hash(out.as_bytes()));
        out
    }

    /// Writes the file atomically (temp file, fsync, rename, fsync dir), mode
    /// 0600. A `meta.tmp` left by a save that was killed is removed first:
    /// it was never renamed into place, so it holds nothing the capture
    /// needs, and keeping it would fail every later save.
    pub fn save(&self, dir: &Dir) -> Result<()> {
        dir.remove_if_present("meta.tmp")?;
        let mut file = dir.create("meta.tmp")?;
        let tmp = dir.join("meta.tmp");
        file.write_all(self.render().as_bytes())
            .map_err(io("write", &tmp))?;
        file.sync_all().map_err(io("fsync", &tmp))?;
        dir.rename("meta.tmp", "meta")?;
        dir.sync()
    }

    /// Reads `dir/meta`; a malformed line is [`Error::Corrupt`] with its line number.
    pub fn load(dir: &Dir) -> Result<Self> {
        let path = dir.join("meta");
        let bytes = dir.read("meta", MAX_META_BYTES)?;
        let text = String::from_utf8(bytes).map_err(|e| Error::Corrupt {
            path: path.clone(),
            offset: e.utf8_error().valid_up_to() as u64,
            what: "not UTF-8 text".into(),
        })?;
        let corrupt = |(line, what)| Error::Corrupt {
            path: path.clone(),
            offset: line,
            what,
        };
        read_meta(&text).map_err(corrupt)
    }
}

/// Parses `meta` after checking its checksum line.
fn read_meta(text: &str) -> std::result::Result<Meta, (u64, String)> {
    let body = checked(text)?;
    if text.starts_with(META_HEADER) && body.len() == text.len() {
        let line = text.lines().count() as u64;
        return Err((
            line,
            "the file is cut short (its checksum line is missing)".into(),
        ));
    }
    parse_meta(body)
}

/// The text before `meta`'s last line, `crc XXXXXXXX`, when that holds
/// the text's CRC-32; all of it when there is no such line (captures from
/// before it was kept). Errors carry the 1-based line number.
fn checked(text: &str) -> std::result::Result<&str, (u64, String)> {
    let trimmed = text.strip_suffix('\n').unwrap_or(text);
    let Some((body, last)) = trimmed.rsplit_once('\n') else {
        return Ok(text);
    };
    let Some(crc) = last.strip_prefix("crc ") else {
        return Ok(text);
    };
    // The body with its last newline, as `render` hashed it.
    let body = &text[..=body.len()];
    let line = body.lines().count() as u64 + 1;
    match u32::from_str_radix(crc, 16) {
        Ok(crc) if crc == crc32fast::hash(body.as_bytes()) => Ok(body),
        Ok(_) => Err((line, "the file fails its checksum".into())),
        Err(_) => Err((line, format!("bad checksum line `{last}`"))),
    }
}

/// Parses `meta`; errors carry the 1-based line number.
fn parse_meta(text: &str) -> std::result::Result<Meta, (u64, String)> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, META_HEADER | META_HEADER_V1)) => {}
        _ => return Err((1, format!("first line is not `{META_HEADER}`"))),
    }
    let mut meta = Meta::default();
    for (n, line) in lines {
        let n = n as u64 + 1;
        let words: Vec<&str> = line.split(' ').collect();
        let bad = |what: &str| (n, format!("{what}: `{line}`"));
        let num = |s: &str| s.parse::<u64>().map_err(|_| bad("bad number"));
        match words.as_slice() {
            ["block_size", v] => meta.block_size = num(v)? as u32,
            ["blocks_per_segment", v] => meta.blocks_per_segment = num(v)? as u32,
            ["source", id, name, fields] => {
                let fields = if fields.is_empty() {
                    Vec::new()
                } else {
                    fields
                        .split(',')
                        .map(parse_field)
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| bad("bad field"))?
                };
                meta.sources.push(Source {
                    id: num(id)? as SourceId,
                    name: (*name).to_owned(),
                    fields,
                });
            }
            [
                "index",
                id,
                source,
                name,
                field,
                from,
                until,
                bins,
                rest @ ..,
            ] if rest.len() <= 2 => {
                let (partition, splits) = index_tail(rest).ok_or_else(|| bad("bad index"))?;
                let bins = parse_bounds(bins).ok_or_else(|| bad("bad bins"))?;
                meta.indexes.push(Index {
                    id: num(id)? as IndexId,
                    source: num(source)? as SourceId,
                    name: (*name).to_owned(),
                    field: parse_field(field).ok_or_else(|| bad("bad field"))?,
                    bins: Bins::new(bins).map_err(|e| bad(&e.to_string()))?,
                    from_chunk: num(from)?,
                    until_chunk: if *until == "-" {
                        None
                    } else {
                        Some(num(until)?)
                    },
                    partition,
                    splits,
                });
            }
            ["pin", start, end] => meta.pins.push((num(start)?, num(end)?)),
            ["closed", chunks, "deleted", deleted, ends @ ..] => {
                let groups_end = match ends {
                    [] => None,
                    ["groups_end", end] => Some(num(end)?),
                    _ => return Err(bad("bad closed line")),
                };
                let deleted = match *deleted {
                    "" => Vec::new(),
                    text => parse_bounds(text)
                        .and_then(|s| s.into_iter().map(|s| u64::try_from(s).ok()).collect())
                        .ok_or_else(|| bad("bad segments"))?,
                };
                meta.closed = Some(Closed {
                    chunks: num(chunks)?,
                    deleted,
                    groups_end,
                });
            }
            _ => return Err(bad("unknown line")),
        }
    }
    if meta.block_size == 0 || meta.blocks_per_segment == 0 {
        return Err((1, "block_size and blocks_per_segment must be set".into()));
    }
    // Readers allocate blocks of this size: bound it as the writer does.
    if let Err(what) = check_layout(meta.block_size, meta.blocks_per_segment) {
        return Err((1, what));
    }
    Ok(meta)
}

/// The optional words ending an `index` line: a partition
/// (`field:offset:kind:count`) and the index whose values it splits
/// (`splits=ID`), in that order; `None` if malformed.
fn index_tail(words: &[&str]) -> Option<(Option<Partition>, Option<IndexId>)> {
    let (splits, rest) = match words.split_last() {
        Some((last, rest)) if last.starts_with("splits=") => {
            (Some(last["splits=".len()..].parse().ok()?), rest)
        }
        _ => (None, words),
    };
    let partition = match rest {
        [] => None,
        [text] => {
            let (field, count) = text.rsplit_once(':')?;
            Some(Partition {
                field: parse_field(field)?,
                count: count.parse().ok()?,
            })
        }
        _ => return None,
    };
    Some((partition, splits))
}

/// Bin boundaries as `meta` holds them: comma-separated, and (in format 3)
/// runs of three or more consecutive integers as `first..=last`, so an
/// exact index over ports is 8 bytes rather than 380 KB that every query
/// would parse.
fn bounds_text(bounds: &[i64], runs: bool) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < bounds.len() {
        let mut j = i;
        while runs && j + 1 < bounds.len() && bounds[j + 1] == bounds[j] + 1 {
            j += 1;
        }
        if j >= i + 2 {
            out.push(format!("{}..={}", bounds[i], bounds[j]));
        } else {
            j = i;
            out.push(bounds[i].to_string());
        }
        i = j + 1;
    }
    out.join(",")
}

/// Reads [`bounds_text`]'s form (either version); `None` if malformed or
/// absurdly long.
fn parse_bounds(text: &str) -> Option<Vec<i64>> {
    /// More bins than any index weft makes (ports: 65,536).
    const MAX: usize = 1 << 20;
    let mut bounds = Vec::new();
    for word in text.split(',') {
        match word.split_once("..=") {
            Some((first, last)) => {
                let (first, last): (i64, i64) = (first.parse().ok()?, last.parse().ok()?);
                let n = usize::try_from(i128::from(last) - i128::from(first) + 1).ok()?;
                if first >= last || bounds.len() + n > MAX {
                    return None;
                }
                bounds.extend(first..=last);
            }
            None => bounds.push(word.parse().ok()?),
        }
        if bounds.len() > MAX {
            return None;
        }
    }
    Some(bounds)
}

fn parse_field(text: &str) -> Option<Field> {
    let mut parts = text.split(':');
    let (name, offset, kind) = (parts.next()?, parts.next()?, parts.next()?);
    Some(Field::new(
        name,
        offset.parse().ok()?,
        FieldKind::parse(kind)?,
    ))
}

/// Names are single words so the `meta` file stays line- and space-separated.
pub fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == ',' || c == ':') {
        return Err(Error::Invalid(format!(
            "name `{name}` must be one word without `,` or `:`"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leftover_temporary_meta_does_not_block_a_save() {
        let path = std::env::temp_dir().join(format!("weft-meta-tmp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let dir = Dir::open_to_write(&path).unwrap();
        // A save killed between creating and renaming its temporary file.
        std::fs::write(path.join("meta.tmp"), "half a meta").unwrap();
        let meta = Meta {
            block_size: 4096,
            blocks_per_segment: 8,
            ..Meta::default()
        };
        meta.save(&dir).unwrap();
        assert_eq!(Meta::load(&dir).unwrap().block_size, 4096);
        assert!(!path.join("meta.tmp").exists());
        std::fs::remove_dir_all(&path).unwrap();
    }

    #[test]
    fn bin_of_agrees_with_a_search_of_every_boundary() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let edges = [0, 1, 2, 3, 1 << 20, (1 << 20) - 1, i64::MAX, i64::MIN, -1];
        for round in 0..200 {
            // Boundaries of every scale: a few, many, negative, huge.
            let count = 1 + next() % if round % 2 == 0 { 8 } else { 300 };
            let shift = next() % 63;
            let mut bounds: Vec<i64> = (0..count)
                .map(|_| (next() >> shift).cast_signed() - if round % 3 == 0 { 1 << 20 } else { 0 })
                .collect();
            bounds.extend(edges.iter().copied().filter(|_| next() % 4 == 0));
            bounds.sort_unstable();
            bounds.dedup();
            let bins = Bins::new(bounds.clone()).unwrap();
            let random: Vec<i64> = (0..100)
                .map(|_| {
                    let shift = next() % 64;
                    (next() >> shift).cast_signed()
                })
                .collect();
            let values = bounds
                .iter()
                .flat_map(|b| [b.saturating_sub(1), *b, b.saturating_add(1)])
                .chain(edges)
                .chain(random);
            for value in values {
                let plain = bounds.partition_point(|b| *b <= value) as u32;
                assert_eq!(bins.bin_of(value), plain, "{value} in {bounds:?}");
            }
        }
    }

    #[test]
    fn bins_outliers_and_ranges() {
        let bins = Bins::new(vec![10, 20, 30]).unwrap();
        assert_eq!(bins.len(), 4);
        assert_eq!(
            [
                bins.bin_of(-5),
                bins.bin_of(10),
                bins.bin_of(29),
                bins.bin_of(30)
            ],
            [0, 1, 2, 3]
        );
        assert_eq!(bins.range(0), (i64::MIN, Some(10)));
        assert_eq!(bins.range(3), (30, None));
        assert!(Bins::new(vec![]).is_err());
        assert!(Bins::new(vec![3, 3]).is_err());
    }

    #[test]
    fn field_reads_little_endian_and_short_payload() {
        let payload = [0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0];
        assert_eq!(Field::new("a", 0, FieldKind::I32).read(&payload), Some(-1));
        assert_eq!(
            Field::new("a", 0, FieldKind::U32).read(&payload),
            Some(0xffff_ffff)
        );
        assert_eq!(Field::new("a", 4, FieldKind::U8).read(&payload), Some(1));
        assert_eq!(Field::new("a", 4, FieldKind::U64).read(&payload), None);
    }

    #[test]
    fn meta_round_trip_and_bad_line() {
        let meta = Meta {
            block_size: 4096,
            blocks_per_segment: 8,
            sources: vec![Source {
                id: 0,
                name: "sys".into(),
                fields: vec![Field::new("lat", 8, FieldKind::U64)],
            }],
            indexes: vec![
                Index {
                    id: 1,
                    source: 0,
                    name: "lat".into(),
                    field: Field::new("lat", 8, FieldKind::U64),
                    bins: Bins::new(vec![1, 10, 100]).unwrap(),
                    from_chunk: 3,
                    until_chunk: Some(9),
                    partition: None,
                    splits: None,
                },
                Index {
                    id: 2,
                    source: 0,
                    name: "lat_by_nr".into(),
                    field: Field::new("lat", 8, FieldKind::U64),
                    bins: Bins::new(vec![1, 10, 100]).unwrap(),
                    from_chunk: 0,
                    until_chunk: None,
                    partition: Some(Partition {
                        field: Field::new("nr", 0, FieldKind::U32),
                        count: 512,
                    }),
                    splits: Some(1),
                },
            ],
            pins: vec![(5, 6)],
            closed: Some(Closed {
                chunks: 12,
                deleted: vec![0, 1, 2, 5],
                groups_end: Some(4096),
            }),
            ..Meta::default()
        };
        let text = meta.render();
        assert!(
            text.contains("closed 12 deleted 0..=2,5 groups_end 4096\n"),
            "{text}"
        );
        assert_eq!(read_meta(&text), Ok(meta.clone()));
        // A capture closed before the groups log's end was kept.
        let body = text.rsplit_once("crc").unwrap().0;
        let before = parse_meta(&body.replace(" groups_end 4096", "")).unwrap();
        assert_eq!(before.closed.unwrap().groups_end, None);
        let broken = text.replace("pin 5 6", "pin five 6");
        assert_eq!(
            read_meta(&broken).unwrap_err().1,
            "the file fails its checksum"
        );
        assert_eq!(parse_meta(&broken).unwrap_err().0, 7);
        // A version 2 file cut between lines is caught.
        let cut = text.rsplit_once("closed").unwrap().0;
        let error = read_meta(cut).unwrap_err().1;
        assert!(error.contains("cut short"), "{error}");
        // Captures from before the checksum line still read.
        let old = cut.replace(META_HEADER, META_HEADER_V1);
        let meta = Meta {
            closed: None,
            ..meta
        };
        assert_eq!(read_meta(&old), Ok(meta));
    }

    #[test]
    fn bounds_keep_runs_short_and_read_back() {
        let bounds: Vec<i64> = [-5, 0, 1, 2, 3, 10, 11, 20]
            .into_iter()
            .chain(100..65_636)
            .collect();
        let text = bounds_text(&bounds, true);
        assert_eq!(text, "-5,0..=3,10,11,20,100..=65635");
        assert_eq!(parse_bounds(&text), Some(bounds.clone()));
        let plain = bounds_text(&bounds, false);
        assert_eq!(plain.split(',').count(), bounds.len());
        assert_eq!(parse_bounds(&plain), Some(bounds));
        for bad in ["", "1,,2", "3..=1", "1..=x", "0..=9223372036854775807"] {
            assert_eq!(parse_bounds(bad), None, "{bad}");
        }
    }
}
