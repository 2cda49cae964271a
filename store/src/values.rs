//! The values log: per chunk, the distinct values each value bin holds,
//! with how often each occurs. An exact percentile needs the values of the
//! bin it falls in; without this it reads every chunk holding that bin (a
//! flood puts one bin in every chunk), with it a few bytes per chunk.
//!
//! The flusher derives an entry from the sealed block, off the append path,
//! and writes it before the chunk's time entry, which points at it. An
//! entry (see `docs/format.md`):
//!
//! ```text
//! crc32 u32 | chunk u64 | len u32 | sections[len]
//! section: index | bin | runs | bytes | runs x (value delta, count)   (varints)
//! ```
//!
//! There is one section per (index, global bin) the chunk's summaries
//! hold, in no set order; its runs ascend by value. A section's first
//! value is zigzag-coded, each later one is its distance from the previous.
//!
//! Sections of index 0 (which has no values) hold instead copies of the
//! records of a source the chunk holds a few of ([`COPIED_RECORDS`]), the
//! source's id as their bin: see [`copies`]. Sections whose index word has
//! bit 32 set ([`KEYED`]) hold one index's values of one key of another
//! (a thread's latencies): see [`split`].
#![expect(
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "zigzag encoding reinterprets i64 and u64 bits on purpose"
)]

use std::collections::HashMap;

use foldhash::fast::FixedState;

use crate::{
    cache::Runs,
    format::{BlockHeader, Spans, Summary, back_chain, get_varint, push_varint},
    schema::{Bins, Index, IndexId, Meta, SourceId},
};

/// Bytes before an entry's sections.
pub const ENTRY_HEADER_LEN: usize = 4 + 8 + 4;

/// A source with at most this many records in a chunk has them copied
/// into the chunk's values entry, so that reading them reads that entry
/// (a few hundred bytes), not the block. Thread names (`tasks`) lie a few
/// to a chunk across a whole flood: every listing names its threads, and
/// reading each block for them took 150 ms of a 200 ms listing of 46 M
/// records.
pub(crate) const COPIED_RECORDS: u64 = 64;
/// Bytes of one source's records a chunk copies, at most.
const COPIED_BYTES: usize = 4096;
/// Bytes of copies in one entry, at most (6 % of the default 256 KiB chunk).
const COPIED_PER_CHUNK: usize = 16384;

/// The values-log entry of chunk `chunk`, from the values its records put
/// in wide bins (gathered by the writer) and its `summaries`: the runs of
/// every bin of every index covering it, then copies of the records of
/// sources with few records in `block` (the sealed chunk).
pub(crate) fn entry(
    meta: &Meta,
    chunk: u64,
    wide: Wide,
    summaries: &[Summary],
    block: &[u8],
) -> Vec<u8> {
    let index = |id: IndexId| meta.indexes.get(usize::from(id).wrapping_sub(1));
    let mut out = vec![0; ENTRY_HEADER_LEN];
    let mut sections = Sections::default();
    for (p, count) in counted(wide.packed, wide.repeated) {
        let (id, bin, offset) = unpack(p);
        let Some(index) = index(id) else { continue };
        let (lo, _) = index.bins.range(bin % index.bins.len() as u32);
        sections.add(&mut out, key(id, bin), lo + offset, count);
    }
    for (value, count) in counted(wide.rest, Vec::new()) {
        sections.add(&mut out, value.0, value.1, count);
    }
    // Bins one value wide need no records: the summary's count is the run.
    for s in summaries.iter().filter(|s| s.index != 0) {
        let narrow = index(s.index)
            .filter(|i| i.covers(chunk))
            .and_then(|index| {
                let bin = s.bin % index.bins.len() as u32;
                (width(&index.bins, bin) == Some(1)).then(|| index.bins.range(bin).0)
            });
        if let Some(lo) = narrow {
            sections.add(&mut out, key(s.index, s.bin), lo, s.count);
        }
    }
    sections.finish(&mut out);
    let base = chunk * u64::from(meta.block_size);
    for key in meta.indexes.iter().filter(|i| i.covers(chunk)) {
        let keyed = wide.keyed.iter().find(|k| k.index == key.id);
        split(&mut out, meta, key, (chunk, block), summaries, keyed);
    }
    copies(&mut out, block, base, summaries);
    let len = u32::try_from(out.len() - ENTRY_HEADER_LEN).unwrap_or(u32::MAX);
    out[4..12].copy_from_slice(&chunk.to_le_bytes());
    out[12..16].copy_from_slice(&len.to_le_bytes());
    let crc = crc32fast::hash(&out[4..]);
    out[..4].copy_from_slice(&crc.to_le_bytes());
    out
}

/// The distinct items of `items` and `repeated` (each with a count) with
/// how often each occurs, ascending. A chunk's thousands of values hold a
/// few hundred distinct ones: counted first, only those are sorted. Under
/// the getppid flood this took the values log from 15 % of `weft record`'s
/// CPU samples to 8 %.
fn counted<T: Copy + Ord + std::hash::Hash>(
    items: Vec<T>,
    repeated: Vec<(T, u64)>,
) -> Vec<(T, u64)> {
    let mut counts: HashMap<T, u64, FixedState> = HashMap::default();
    for item in items {
        *counts.entry(item).or_default() += 1;
    }
    for (item, n) in repeated {
        *counts.entry(item).or_default() += n;
    }
    let mut counted: Vec<(T, u64)> = counts.into_iter().collect();
    counted.sort_unstable_by_key(|(item, _)| *item);
    counted
}

/// How many values value bin `bin` holds; `None` for the high outliers.
fn width(bins: &Bins, bin: u32) -> Option<i128> {
    let (lo, hi) = bins.range(bin);
    hi.map(|hi| i128::from(hi) - i128::from(lo))
}

/// The index word of sections keeping index `values`'s values apart per
/// value of index `key`: above every index id, so that readers from before
/// them skip them.
const KEYED: u64 = 1 << 32;

fn keyed(key: IndexId, values: IndexId) -> u64 {
    KEYED | u64::from(key) << 16 | u64::from(values)
}

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

fn unzigzag(word: u64) -> i64 {
    (word >> 1) as i64 ^ -((word & 1) as i64)
}

fn key(index: IndexId, bin: u32) -> u64 {
    u64::from(index) << 32 | u64::from(bin)
}

/// Bits of a packed value's distance from its bin's lower bound.
const OFFSET_BITS: u32 = 36;

/// A value as one sortable word: its index (8 bits), its global bin (20
/// bits: at most 2^20 per index) and its distance from the bin's lower
/// bound. Counting and sorting words is quicker than pairs.
fn pack(index: IndexId, bin: u32, offset: u64) -> Option<u64> {
    (index < 1 << 8 && bin < 1 << 20 && offset < 1 << OFFSET_BITS)
        .then(|| (u64::from(index) << 20 | u64::from(bin)) << OFFSET_BITS | offset)
}

fn unpack(p: u64) -> (IndexId, u32, i64) {
    let offset = p & ((1 << OFFSET_BITS) - 1);
    let key = p >> OFFSET_BITS;
    (
        (key >> 20) as IndexId,
        (key & ((1 << 20) - 1)) as u32,
        offset as i64,
    )
}

/// How the values of one value bin reach the values log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinValues {
    /// One value wide: the summary's count says it all.
    Narrow,
    /// Packed as a distance from the bin's lower bound.
    Packed { lo: i64 },
    /// Too wide to pack: kept as (key, value).
    Unpacked,
}

impl BinValues {
    /// Each value bin's way, in bin order.
    pub(crate) fn of(bins: &Bins) -> Vec<Self> {
        (0..bins.len() as u32)
            .map(|bin| {
                let lo = bins.range(bin).0;
                match width(bins, bin) {
                    Some(1) => Self::Narrow,
                    Some(width) if width <= 1 << OFFSET_BITS => Self::Packed { lo },
                    _ => Self::Unpacked,
                }
            })
            .collect()
    }
}

/// The values a chunk's records put in bins wider than one value. The
/// writer gathers them as it bins each record for the summaries, so the
/// flusher need not decode the block again (it did, and that was a quarter
/// of `weft record`'s CPU under a flood).
#[derive(Debug, Default)]
pub(crate) struct Wide {
    packed: Vec<u64>,
    /// Packed values added more than once in a row, with their counts.
    repeated: Vec<(u64, u64)>,
    rest: Vec<(u64, i64)>,
    /// Per key index that splits another's values, the (key, value) of
    /// each of its source's records, as the writer read them: [`split`]
    /// takes them instead of walking the block's chain again.
    pub(crate) keyed: Vec<Keyed>,
}

/// The (key, value) pairs of one key index's records in a chunk, oldest
/// first; `complete` unless a record had a value and no key (then readers
/// read the records, and no split is written).
#[derive(Debug)]
pub(crate) struct Keyed {
    pub(crate) index: IndexId,
    pub(crate) pairs: Vec<(i64, i64)>,
    pub(crate) complete: bool,
}

impl Wide {
    /// Adds `value` `n` times; it lies in value bin `way` of `index`,
    /// global bin `bin`.
    #[inline]
    pub(crate) fn add(&mut self, index: IndexId, bin: u32, way: BinValues, value: i64, n: u64) {
        let packed = match way {
            BinValues::Narrow => return,
            BinValues::Packed { lo } => pack(index, bin, value.wrapping_sub(lo) as u64),
            BinValues::Unpacked => None,
        };
        match packed {
            Some(p) if n == 1 => self.packed.push(p),
            Some(p) => self.repeated.push((p, n)),
            None => {
                let item = (key(index, bin), value);
                self.rest.extend(std::iter::repeat_n(item, n as usize));
            }
        }
    }

    /// The values gathered so far; leaves room for as many again.
    pub(crate) fn take(&mut self) -> Self {
        let room = Self {
            packed: Vec::with_capacity(self.packed.len()),
            repeated: Vec::new(),
            rest: Vec::new(),
            keyed: Vec::new(),
        };
        std::mem::replace(self, room)
    }
}

/// Sections being written: the open one's key, runs and bytes.
#[derive(Default)]
struct Sections {
    open: Option<(u64, i64, u64)>,
    runs: u64,
    body: Vec<u8>,
}

impl Sections {
    /// Adds `count` occurrences of `value` to the section of `key` (keys
    /// and values come ascending).
    fn add(&mut self, out: &mut Vec<u8>, key: u64, value: i64, count: u64) {
        match &mut self.open {
            Some((k, last, n)) if *k == key && *last == value => *n += count,
            _ => {
                if self.open.is_some_and(|(k, _, _)| k != key) {
                    self.finish(out);
                }
                self.close_run();
                let delta = match self.open {
                    Some((_, last, _)) => value.wrapping_sub(last) as u64,
                    None => zigzag(value),
                };
                push_varint(&mut self.body, delta);
                self.runs += 1;
                self.open = Some((key, value, count));
            }
        }
    }

    /// Writes the open run's count.
    fn close_run(&mut self) {
        if let Some((_, _, n)) = self.open {
            push_varint(&mut self.body, n);
        }
    }

    /// Writes the open section to `out`.
    fn finish(&mut self, out: &mut Vec<u8>) {
        let Some((key, _, _)) = self.open else {
            return;
        };
        self.close_run();
        push_varint(out, key >> 32);
        push_varint(out, key & u64::from(u32::MAX));
        push_varint(out, self.runs);
        push_varint(out, self.body.len() as u64);
        out.append(&mut self.body);
        self.open = None;
        self.runs = 0;
    }
}

/// Appends a section of index 0 per source with few records in `block`
/// (at address `base`), smallest first while they fit:
///
/// ```text
/// section: 0 | source | records | bytes | base_ts | records x (offset, record as framed)
/// ```
///
/// Each record is copied as the block frames it (header and payload), after
/// its offset in the block: its address, timestamp and back-pointer read
/// back as from the block (`base_ts` is the block's).
fn copies(out: &mut Vec<u8>, block: &[u8], base: u64, summaries: &[Summary]) {
    let Some(base_ts) = BlockHeader::unchecked(block).map(|h| h.base_ts) else {
        return;
    };
    // Per source: its records' (start, end) in the block, newest first, and their bytes.
    let mut found: Vec<(SourceId, Spans, usize)> = summaries
        .iter()
        .filter(|s| s.index == 0 && s.count <= COPIED_RECORDS)
        .filter_map(|s| {
            let spans = back_chain(block, base, base_ts, s.last_addr).ok()?;
            let bytes = spans.iter().map(|(start, _, end)| end - start).sum();
            (bytes <= COPIED_BYTES).then_some((s.source, spans, bytes))
        })
        .collect();
    found.sort_by_key(|(_, _, bytes)| *bytes);
    let mut room = COPIED_PER_CHUNK;
    for (source, spans, bytes) in found {
        let Some(left) = room.checked_sub(bytes) else {
            break;
        };
        room = left;
        let mut body = Vec::with_capacity(bytes + 8 * spans.len() + 10);
        push_varint(&mut body, base_ts);
        for (start, _, end) in spans.iter().rev() {
            push_varint(&mut body, *start as u64);
            body.extend_from_slice(&block[*start..*end]);
        }
        push_varint(out, 0);
        push_varint(out, u64::from(source));
        push_varint(out, spans.len() as u64);
        push_varint(out, body.len() as u64);
        out.append(&mut body);
    }
}

/// Appends the section keeping the values of the index `key` splits apart
/// per value of `key`, when the chunk's records of its source show `key`
/// several values: one outer section (which other readers skip at once)
/// holding an inner section per key and value bin, in no set order:
///
/// ```text
/// section: KEYED | key << 16 | values | 0 | inner sections | bytes | inner...
/// inner: key | bin | runs | bytes | count | max - min | rest (low, high 64 bits)
///        | runs x (value delta, count)
/// ```
///
/// `key` and the first value (the smallest) are zigzag-coded; `rest` is
/// the sum of each value's distance from the smallest, so the sum is
/// `count * min + rest`. Nothing is written when a record with a value has
/// no key: readers then read the records.
fn split(
    out: &mut Vec<u8>,
    meta: &Meta,
    key: &Index,
    (chunk, block): (u64, &[u8]),
    summaries: &[Summary],
    pairs: Option<&Keyed>,
) {
    let values = key.splits.and_then(|id| meta.index(id).ok());
    let Some(values) = values.filter(|v| v.covers(chunk) && v.parts() == 1) else {
        return;
    };
    let base = chunk * u64::from(meta.block_size);
    let base_ts = BlockHeader::unchecked(block).map(|h| h.base_ts);
    let ours = |s: &&Summary| s.source == key.source && s.count > 0;
    let mut keys = summaries.iter().filter(ours).filter(|s| s.index == key.id);
    let one = keys.next().is_some_and(|first| {
        first.min == first.max && keys.all(|s| s.min == first.min && s.max == first.min)
    });
    let last = summaries.iter().filter(ours).find(|s| s.index == 0);
    let (Some(base_ts), Some(last), false) = (base_ts, last, one) else {
        return;
    };
    let mut by_key = ByKey::default();
    match pairs {
        // Newest first, as the chain gives them.
        Some(pairs) if pairs.complete => {
            for &(k, value) in pairs.pairs.iter().rev() {
                by_key.add(k, value);
            }
        }
        Some(_) => return,
        None => {
            let Ok(spans) = back_chain(block, base, base_ts, last.last_addr) else {
                return;
            };
            for (_, payload, end) in spans {
                let payload = &block[payload..end];
                let Some(value) = values.field.read(payload) else {
                    continue;
                };
                let Some(k) = key.field.read(payload) else {
                    return;
                };
                by_key.add(k, value);
            }
        }
    }
    let (mut inner, mut body) = (Vec::new(), Vec::new());
    let mut sections = 0;
    for (k, mut found) in by_key.keys {
        // Ascending values lie bin after bin.
        found.sort_unstable();
        let mut rest = &found[..];
        while let Some(&first) = rest.first() {
            let bin = values.bins.bin_of(first);
            let end = (values.bins.range(bin).1)
                .map_or(rest.len(), |hi| rest.partition_point(|v| *v < hi));
            push_keyed(&mut inner, &mut body, k, bin, &rest[..end]);
            sections += 1;
            rest = &rest[end..];
        }
    }
    push_varint(out, keyed(key.id, values.id));
    push_varint(out, 0);
    push_varint(out, sections);
    push_varint(out, inner.len() as u64);
    out.append(&mut inner);
}

/// A chunk's values per key, as [`split`] gathers them: per key, in the
/// order first seen, its values.
#[derive(Default)]
struct ByKey {
    keys: Vec<(i64, Vec<i64>)>,
    slots: HashMap<i64, usize, FixedState>,
    /// The last key and its slot: a thread's records come in runs.
    last: Option<(i64, usize)>,
}

impl ByKey {
    fn add(&mut self, key: i64, value: i64) {
        let slot = match self.last {
            Some((last, slot)) if last == key => slot,
            _ => {
                let next = self.keys.len();
                let slot = *self.slots.entry(key).or_insert(next);
                if slot == next {
                    self.keys.push((key, Vec::new()));
                }
                self.last = Some((key, slot));
                slot
            }
        };
        self.keys[slot].1.push(value);
    }
}

/// Appends the inner section of one key's `values` (ascending) in value
/// bin `bin` (see [`split`]); `body` is room for its runs, reused from
/// section to section (an allocation each was a tenth of the flusher's
/// instructions).
fn push_keyed(inner: &mut Vec<u8>, body: &mut Vec<u8>, key: i64, bin: u32, values: &[i64]) {
    let (min, max) = (values[0], values[values.len() - 1]);
    // Each value's distance from the smallest: never negative.
    let rest: u128 = (values.iter())
        .map(|v| (i128::from(*v) - i128::from(min)) as u128)
        .sum();
    body.clear();
    push_varint(body, values.len() as u64);
    push_varint(body, max.wrapping_sub(min) as u64);
    push_varint(body, rest as u64);
    push_varint(body, (rest >> 64) as u64);
    let mut runs = 0;
    let mut last: Option<i64> = None;
    for run in values.chunk_by(|a, b| a == b) {
        let value = run[0];
        let delta = last.map_or(zigzag(value), |l| value.wrapping_sub(l) as u64);
        push_varint(body, delta);
        push_varint(body, run.len() as u64);
        last = Some(value);
        runs += 1;
    }
    push_varint(inner, zigzag(key));
    push_varint(inner, u64::from(bin));
    push_varint(inner, runs);
    push_varint(inner, body.len() as u64);
    inner.extend_from_slice(body);
}

/// One key's values in one value bin of one chunk: a section [`split`] wrote.
/// Its totals and values are decoded when asked for: a reader gathering
/// values wants few of an entry's bins.
#[derive(Clone, Debug)]
pub(crate) struct KeyedBin<'a> {
    pub key: i64,
    pub bin: u32,
    runs: u64,
    /// The totals, then the runs.
    body: &'a [u8],
}

/// A [`KeyedBin`]'s count, sum and bounds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyedTotals {
    pub count: u64,
    pub sum: i128,
    pub min: i64,
    pub max: i64,
}

impl KeyedBin<'_> {
    /// Its count, sum and bounds; `None` if they do not decode.
    pub(crate) fn totals(&self) -> Option<KeyedTotals> {
        let mut at = 0;
        let mut next = || get_varint(self.body, &mut at);
        let (count, spread, low, high) = (next()?, next()?, next()?, next()?);
        // The smallest value is the first run's.
        let min = unzigzag(get_varint(&self.body[at..], &mut 0)?);
        let rest = i128::try_from(u128::from(high) << 64 | u128::from(low)).ok()?;
        Some(KeyedTotals {
            count,
            sum: i128::from(min)
                .checked_mul(i128::from(count))?
                .checked_add(rest)?,
            min,
            max: min.checked_add_unsigned(spread)?,
        })
    }

    /// Its values, ascending, each with its count; `None` if they do not
    /// decode.
    pub(crate) fn runs(&self) -> Option<Runs> {
        let mut at = 0;
        for _ in 0..4 {
            get_varint(self.body, &mut at)?;
        }
        decode_runs(&self.body[at..], self.runs)
    }
}

/// The sections of a checked entry's `sections` keeping index `values`'s
/// values apart per value of index `key` (see [`split`]); `None` if the
/// entry has none, or one's place does not decode.
pub(crate) fn keyed_of(
    sections: &[u8],
    key: IndexId,
    values: IndexId,
) -> Option<Vec<KeyedBin<'_>>> {
    let word = keyed(key, values);
    let (_, _, count, mut inner) = each_section(sections)
        .map_while(|section| section)
        .find(|(index, ..)| *index == word)?;
    let mut found = Vec::with_capacity(usize::try_from(count).ok()?.min(inner.len()));
    for _ in 0..count {
        let mut at = 0;
        let mut next = || get_varint(inner, &mut at);
        let (k, bin, runs, len) = (next()?, next()?, next()?, next()?);
        let end = at.checked_add(usize::try_from(len).ok()?)?;
        let body = inner.get(at..end)?;
        inner = &inner[end..];
        found.push(KeyedBin {
            key: unzigzag(k),
            bin: u32::try_from(bin).ok()?,
            runs,
            body,
        });
    }
    inner.is_empty().then_some(found)
}

/// The copied records of `source` in a checked entry's `sections`: how
/// many, and the section's body (see [`copies`]); `None` when the entry
/// has none (the chunk holds many of them, or was written before copies).
pub(crate) fn copies_of(sections: &[u8], source: SourceId) -> Option<(u64, &[u8])> {
    each_section(sections)
        .map_while(|section| section)
        .find(|(index, bin, _, _)| *index == 0 && *bin == u64::from(source))
        .map(|(_, _, records, body)| (records, body))
}

/// Each section of a checked entry: its index, bin (for index 0, a
/// source), runs (records) and body; `None` (then nothing more) where one
/// does not decode.
fn each_section(sections: &[u8]) -> impl Iterator<Item = Option<(u64, u64, u64, &[u8])>> {
    let mut at = 0;
    let mut broken = false;
    std::iter::from_fn(move || {
        if broken || at >= sections.len() {
            return None;
        }
        let section = (|| {
            let index = get_varint(sections, &mut at)?;
            let bin = get_varint(sections, &mut at)?;
            let runs = get_varint(sections, &mut at)?;
            let len = usize::try_from(get_varint(sections, &mut at)?).ok()?;
            let body = sections.get(at..at.checked_add(len)?)?;
            at += len;
            Some((index, bin, runs, body))
        })();
        broken = section.is_none();
        Some(section)
    })
}

/// Checks an entry read from the values log: its checksum, chunk and length.
pub(crate) fn check(entry: &[u8], chunk: u64) -> Result<&[u8], String> {
    let (Some(head), Some(sections)) =
        (entry.get(..ENTRY_HEADER_LEN), entry.get(ENTRY_HEADER_LEN..))
    else {
        return Err(format!("values of chunk {chunk} are cut short"));
    };
    let crc = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    if crc != crc32fast::hash(&entry[4..]) {
        return Err(format!("values of chunk {chunk} fail their checksum"));
    }
    let mut number = [0; 8];
    number.copy_from_slice(&head[4..12]);
    let len = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
    if u64::from_le_bytes(number) != chunk || len as usize != sections.len() {
        return Err(format!("values entry is not that of chunk {chunk}"));
    }
    Ok(sections)
}

/// The runs of global bins `bins` of `index` in a checked entry's
/// `sections`, in the order asked; `None` if a bin has no section or a
/// section does not decode.
pub(crate) fn runs_of(sections: &[u8], index: IndexId, bins: &[u32]) -> Option<Vec<Runs>> {
    let mut found: Vec<Option<Runs>> = vec![None; bins.len()];
    for section in each_section(sections) {
        let (here, bin, runs, body) = section?;
        if here != u64::from(index) {
            continue;
        }
        if let Some(slot) = bins.iter().position(|b| u64::from(*b) == bin) {
            found[slot] = Some(decode_runs(body, runs)?);
        }
    }
    found.into_iter().collect()
}

/// The sections of `index` in a checked entry's `sections` whose global
/// bin `wanted` picks: the bin and its runs (the others are skipped
/// undecoded); `None` if a section does not decode.
pub(crate) fn sections_of(
    sections: &[u8],
    index: IndexId,
    wanted: impl Fn(u32) -> bool,
) -> Option<Vec<(u32, Runs)>> {
    let mut found = Vec::new();
    for section in each_section(sections) {
        let (here, bin, runs, body) = section?;
        let bin = u32::try_from(bin).ok()?;
        if here == u64::from(index) && wanted(bin) {
            found.push((bin, decode_runs(body, runs)?));
        }
    }
    Some(found)
}

fn decode_runs(body: &[u8], runs: u64) -> Option<Runs> {
    let mut out = Vec::with_capacity(usize::try_from(runs).ok()?.min(body.len()));
    let mut at = 0;
    let mut value: Option<i64> = None;
    for _ in 0..runs {
        let delta = get_varint(body, &mut at)?;
        let next = match value {
            Some(last) => last.checked_add_unsigned(delta)?,
            None => unzigzag(delta),
        };
        let count = u32::try_from(get_varint(body, &mut at)?).ok()?;
        out.push((next, count));
        value = Some(next);
    }
    (at == body.len()).then(|| out.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_round_trip_any_values() {
        let values = [i64::MIN, -5, -5, 0, 7, 7, 7, i64::MAX];
        let mut out = Vec::new();
        let mut sections = Sections::default();
        for v in values {
            sections.add(&mut out, key(3, 9), v, 1);
        }
        sections.add(&mut out, key(3, 1_000_000), 42, 5);
        sections.add(&mut out, key(4, 9), 1, 2);
        sections.finish(&mut out);
        let runs = runs_of(&out, 3, &[1_000_000, 9]).unwrap();
        assert_eq!(&*runs[0], &[(42, 5)]);
        assert_eq!(
            &*runs[1],
            &[(i64::MIN, 1), (-5, 2), (0, 1), (7, 3), (i64::MAX, 1)]
        );
        assert_eq!(&*runs_of(&out, 4, &[9]).unwrap()[0], &[(1, 2)]);
        assert!(runs_of(&out, 4, &[10]).is_none(), "no such section");
        assert!(
            runs_of(&out[..out.len() - 1], 4, &[9]).is_none(),
            "cut short"
        );
    }

    #[test]
    fn packed_values_sort_by_index_bin_then_value() {
        let a = pack(1, 5, 3).unwrap();
        let b = pack(1, 6, 0).unwrap();
        let c = pack(2, 0, 0).unwrap();
        assert!(a < b && b < c);
        assert_eq!(unpack(a), (1, 5, 3));
        assert_eq!(pack(0, 0, 1 << OFFSET_BITS), None);
        assert_eq!(pack(256, 0, 0), None);
    }
}
