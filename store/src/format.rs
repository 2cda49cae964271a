//! The on-disk format: file headers, record-log blocks, record framing, and
//! the fixed-size entries of the chunk and time logs. See `docs/format.md`.
//!
//! A record-log block (one chunk) is `block_size` bytes:
//!
//! ```text
//! 0        4        8                16               24
//! +--------+--------+----------------+----------------+--------------------
//! | crc32  | used   | block number   | base ts (ns)   | records ... | zero pad
//! +--------+--------+----------------+----------------+--------------------
//! crc32 covers bytes 4..block_size; `used` counts bytes from 0 to the end of
//! the last record.
//! ```
//!
//! A record is framed as four LEB128 varints and the payload:
//!
//! ```text
//! (source << 1 | has_producer_ts) | len | ts - base ts | addr - prev addr of source (0: none)
//! [ zigzag(producer ts - ts) ]  payload[len]
//! ```
//!
//! Worked example: source 3's 48-byte record 1.2 µs after the block's first
//! record, 70 bytes after its previous record, costs 1 + 1 + 2 + 1 = 5 header
//! bytes: 53 bytes stored.
#![expect(
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    reason = "zigzag encoding reinterprets i64 and u64 bits on purpose"
)]

use crate::error::{Error, Result};

/// Magic at the start of every store file; the last byte is the format version.
pub const MAGIC: [u8; 7] = *b"WEFTST\0";

/// Versions of the on-disk format this build reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatVersion {
    /// The first format: blocks with CRC32, LEB128 record headers.
    V1 = 1,
    /// Adds `values.log` (each chunk's values per bin) and its place in
    /// the time entry. Captures of version 1 are still read and appended
    /// to, without values.
    V2 = 2,
    /// Adds `groups.log`: the summaries of each run of whole chunks merged,
    /// so that a question over many chunks reads one summary per run.
    /// Captures of version 2 are still read and appended to, without them.
    V3 = 3,
    /// The same files; under a disk budget the time, chunk and groups logs
    /// free the entries of deleted segments (holes that read as zeros),
    /// which a reader of version 3 would take for damage. Captures of
    /// version 3 are still read and appended to without freeing them.
    V4 = 4,
    /// The same files; each chunk's summaries, and each group's, end with
    /// one more whose count is the CRC-32 of the others
    /// ([`Summary::closing`]), so that a summary copied over a neighbour
    /// (each intact on its own) is found. Captures of version 4 are still
    /// read and appended to without it.
    #[default]
    V5 = 5,
}

impl FormatVersion {
    /// The version new files are written with.
    pub const CURRENT: Self = Self::V5;

    /// Whether captures of this version keep a values log.
    pub fn has_values(self) -> bool {
        self != Self::V1
    }

    /// Whether captures of this version keep a groups log.
    pub fn has_groups(self) -> bool {
        matches!(self, Self::V3 | Self::V4 | Self::V5)
    }

    /// Whether a chunk's and a group's summaries end with the summary of
    /// their checksum ([`Summary::closing`]).
    pub fn closes_summaries(self) -> bool {
        self == Self::V5
    }

    /// Whether a disk budget frees the time, chunk and groups-log entries
    /// of the segments it deletes (the values log's are freed from
    /// version 2 on).
    pub fn frees_entries(self) -> bool {
        matches!(self, Self::V4 | Self::V5)
    }

    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(Self::V1),
            2 => Some(Self::V2),
            3 => Some(Self::V3),
            4 => Some(Self::V4),
            5 => Some(Self::V5),
            _ => None,
        }
    }
}

/// Size of every file's header.
pub const FILE_HEADER_LEN: usize = 16;

/// What a file holds; part of its header so files cannot be mixed up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FileKind {
    /// A segment of the record log.
    Records = 1,
    /// The chunk-index log.
    Chunks = 2,
    /// The time-index log.
    Time = 3,
    /// The values log: each chunk's values per bin.
    Values = 4,
    /// The groups log: runs of chunks' summaries merged.
    Groups = 5,
    /// The rollups log: deleted segments' summaries, kept after their records.
    Rollups = 6,
}

/// `MAGIC | version | kind | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0` padded to 16 bytes;
/// bytes 9..13 hold the block size for record segments.
pub fn file_header(
    kind: FileKind,
    version: FormatVersion,
    block_size: u32,
) -> [u8; FILE_HEADER_LEN] {
    let mut header = [0; FILE_HEADER_LEN];
    header[..7].copy_from_slice(&MAGIC);
    header[7] = version as u8;
    header[8] = kind as u8;
    header[9..13].copy_from_slice(&block_size.to_le_bytes());
    header
}

/// Checks a file header; returns the format version and the block size it
/// records.
pub fn check_file_header(
    bytes: &[u8],
    kind: FileKind,
    path: &std::path::Path,
) -> Result<(FormatVersion, u32)> {
    let bad = |what: String| Error::Corrupt {
        path: path.to_owned(),
        offset: 0,
        what,
    };
    let Some(header) = bytes.get(..FILE_HEADER_LEN) else {
        return Err(bad(format!(
            "file is {} bytes, shorter than its header",
            bytes.len()
        )));
    };
    if header[..7] != MAGIC {
        return Err(bad("not a weft store file (bad magic)".into()));
    }
    let Some(version) = FormatVersion::from_byte(header[7]) else {
        return Err(Error::UnsupportedVersion {
            path: path.to_owned(),
            version: header[7],
        });
    };
    if header[8] != kind as u8 {
        return Err(bad(format!(
            "file kind {} where {:?} was expected",
            header[8], kind
        )));
    }
    let block_size = u32::from_le_bytes([header[9], header[10], header[11], header[12]]);
    Ok((version, block_size))
}

/// Bytes before the first record of a block.
pub const BLOCK_HEADER_LEN: usize = 24;

/// The fixed fields at the start of a record-log block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockHeader {
    /// Bytes in use, header included.
    pub used: u32,
    /// The block's number; its records' addresses start at `number * block_size`.
    pub number: u64,
    /// Arrival time of the block's first record.
    pub base_ts: u64,
}

impl BlockHeader {
    /// Writes the header and the checksum into `block`.
    pub fn seal(&self, block: &mut [u8]) {
        block[4..8].copy_from_slice(&self.used.to_le_bytes());
        block[8..16].copy_from_slice(&self.number.to_le_bytes());
        block[16..24].copy_from_slice(&self.base_ts.to_le_bytes());
        let crc = crc32fast::hash(&block[4..]);
        block[..4].copy_from_slice(&crc.to_le_bytes());
    }

    /// The header of a block this process sealed, not verified (its
    /// checksum covers the whole block); `None` if it is too short.
    pub fn unchecked(block: &[u8]) -> Option<Self> {
        (block.len() >= BLOCK_HEADER_LEN).then(|| Self {
            used: u32::from_le_bytes(le4(block, 4)),
            number: u64::from_le_bytes(le8(block, 8)),
            base_ts: u64::from_le_bytes(le8(block, 16)),
        })
    }

    /// Reads and verifies a block's header and checksum.
    pub fn open(block: &[u8]) -> std::result::Result<Self, String> {
        let Some(header) = Self::unchecked(block) else {
            return Err(format!(
                "block of {} bytes is shorter than its header",
                block.len()
            ));
        };
        let crc = u32::from_le_bytes(le4(block, 0));
        let actual = crc32fast::hash(&block[4..]);
        if crc != actual {
            return Err(format!(
                "block checksum {crc:#010x} does not match contents {actual:#010x}"
            ));
        }
        if (header.used as usize) < BLOCK_HEADER_LEN || header.used as usize > block.len() {
            return Err(format!(
                "block claims {} used bytes of {}",
                header.used,
                block.len()
            ));
        }
        Ok(header)
    }
}

fn le4(bytes: &[u8], at: usize) -> [u8; 4] {
    let mut out = [0; 4];
    out.copy_from_slice(&bytes[at..at + 4]);
    out
}

fn le8(bytes: &[u8], at: usize) -> [u8; 8] {
    let mut out = [0; 8];
    out.copy_from_slice(&bytes[at..at + 8]);
    out
}

/// Reads a LEB128 value at `*at`, advancing it.
#[inline]
pub fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    // Most varints of the logs (counts, bins, deltas) fit one byte.
    let first = *bytes.get(*at)?;
    if first & 0x80 == 0 {
        *at += 1;
        return Some(u64::from(first));
    }
    get_long_varint(bytes, at)
}

/// [`get_varint`] of two bytes or more.
#[inline(never)]
fn get_long_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The most header bytes a record can take: four 10-byte varints plus one.
pub const MAX_RECORD_HEADER: usize = 50;

/// An encoded record header, on the stack: the append path allocates nothing.
pub struct HeaderBytes {
    bytes: [u8; MAX_RECORD_HEADER],
    len: usize,
}

impl HeaderBytes {
    /// The encoded bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Appends `value` to `out` as LEB128, a byte at a time (most are one or
/// two bytes: a copy through a buffer cost a call to memcpy each).
#[inline]
pub fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Writes `value` as LEB128 at `out[at..]`; returns the end.
#[inline]
fn put(out: &mut [u8], mut at: usize, mut value: u64) -> usize {
    while value >= 0x80 {
        out[at] = (value as u8) | 0x80;
        at += 1;
        value >>= 7;
    }
    out[at] = value as u8;
    at + 1
}

/// A decoded record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordHeader {
    pub source: u16,
    pub len: u32,
    pub ts: u64,
    /// Address of the previous record of the same source, if any.
    pub prev: Option<u64>,
    pub producer_ts: Option<u64>,
}

impl RecordHeader {
    /// The header of a record at `addr` in a block based at `base_ts`.
    #[inline]
    pub fn encode(&self, addr: u64, base_ts: u64) -> HeaderBytes {
        let mut out = HeaderBytes {
            bytes: [0; MAX_RECORD_HEADER],
            len: 0,
        };
        out.len = self.encode_into(&mut out.bytes, addr, base_ts);
        out
    }

    /// Writes the header into `out` (at least [`MAX_RECORD_HEADER`] bytes)
    /// and returns its length: the append path's way to skip a copy.
    #[inline]
    pub fn encode_into(&self, out: &mut [u8], addr: u64, base_ts: u64) -> usize {
        let mut len = put(
            out,
            0,
            u64::from(self.source) << 1 | u64::from(self.producer_ts.is_some()),
        );
        len = put(out, len, u64::from(self.len));
        len = put(out, len, self.ts - base_ts);
        len = put(out, len, self.prev.map_or(0, |prev| addr - prev));
        if let Some(producer) = self.producer_ts {
            let delta = producer.wrapping_sub(self.ts) as i64;
            len = put(out, len, ((delta << 1) ^ (delta >> 63)) as u64);
        }
        len
    }

    /// Decodes the header of the record at `addr` starting at `*at`.
    pub fn decode(bytes: &[u8], at: &mut usize, addr: u64, base_ts: u64) -> Option<Self> {
        let tag = get_varint(bytes, at)?;
        let len = u32::try_from(get_varint(bytes, at)?).ok()?;
        let ts = base_ts.checked_add(get_varint(bytes, at)?)?;
        let back = get_varint(bytes, at)?;
        let prev = if back == 0 {
            None
        } else {
            Some(addr.checked_sub(back)?)
        };
        let producer_ts = if tag & 1 == 1 {
            let zigzag = get_varint(bytes, at)?;
            let delta = (zigzag >> 1) as i64 ^ -((zigzag & 1) as i64);
            Some(ts.wrapping_add(delta as u64))
        } else {
            None
        };
        Some(Self {
            source: u16::try_from(tag >> 1).ok()?,
            len,
            ts,
            prev,
            producer_ts,
        })
    }
}

/// Where records lie in a block: each one's start, its payload's start
/// and its payload's end.
pub type Spans = Vec<(usize, usize, usize)>;

/// Where the records of one source lie in `block` (at address `base`,
/// based at `base_ts`), from the one at `last` back through their
/// back-pointers while they stay in the block, newest first: each one's
/// start, its payload's start and end. `Err(offset)`: the record there
/// does not decode.
pub fn back_chain(
    block: &[u8],
    base: u64,
    base_ts: u64,
    last: u64,
) -> std::result::Result<Spans, usize> {
    let mut spans = Vec::new();
    let mut addr = Some(last);
    while let Some(a) = addr.filter(|a| *a >= base + BLOCK_HEADER_LEN as u64) {
        let start = usize::try_from(a - base).unwrap_or(usize::MAX);
        let mut at = start;
        let header = RecordHeader::decode(block, &mut at, a, base_ts).ok_or(start)?;
        let end = (at.checked_add(header.len as usize))
            .filter(|e| *e <= block.len())
            .ok_or(start)?;
        spans.push((start, at, end));
        addr = header.prev;
    }
    Ok(spans)
}

/// One (source, index, bin) summary of one chunk: a chunk-log entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Summary {
    pub chunk: u64,
    pub source: u16,
    /// Index id; 0 is the implicit per-source index with one bin.
    pub index: u16,
    pub bin: u32,
    pub count: u64,
    pub sum: i128,
    pub min: i64,
    pub max: i64,
    pub first_ts: u64,
    pub last_ts: u64,
    /// Address of the last record in this bin.
    pub last_addr: u64,
}

/// Size of an encoded [`Summary`]: the fields plus a CRC32.
pub const SUMMARY_LEN: usize = 8 + 2 + 2 + 4 + 8 + 16 + 8 + 8 + 8 + 8 + 8 + 4;

/// The key of the summary that closes a chunk's or group's summaries
/// (version 5): no source, index and bin have it.
pub const CLOSING_KEY: (u16, u16, u32) = (u16::MAX, u16::MAX, u32::MAX);

/// Whether `raw`, a chunk's or group's encoded summaries in version 5,
/// ends with the summary of `chunk` closing them, whose count is the
/// CRC-32 of the others.
pub fn closed_whole(raw: &[u8], chunk: u64) -> bool {
    let Some(split) = raw.len().checked_sub(SUMMARY_LEN) else {
        return false;
    };
    let (rest, last) = raw.split_at(split);
    Summary::decode(last).is_some_and(|s| s == Summary::closing(chunk, rest))
}

impl Summary {
    /// The summary that closes `summaries` (the encoded summaries of
    /// `chunk`, or of the group it begins) in version 5: its count is the
    /// CRC-32 of their fields, each summary's own CRC left out. Each
    /// summary's checksum finds damage inside it; this one finds a summary
    /// copied over its neighbour. (Over whole summaries it would find
    /// nothing: a CRC run over data followed by that data's CRC always
    /// ends in the same state, so the CRC of any run of intact summaries
    /// depends only on how many there are.)
    pub fn closing(chunk: u64, summaries: &[u8]) -> Self {
        let (source, index, bin) = CLOSING_KEY;
        let mut crc = crc32fast::Hasher::new();
        for summary in summaries.chunks(SUMMARY_LEN) {
            crc.update(&summary[..summary.len().min(SUMMARY_LEN - 4)]);
        }
        Self {
            chunk,
            source,
            index,
            bin,
            count: u64::from(crc.finalize()),
            ..Self::default()
        }
    }

    /// Adds `s` (of a later chunk, same key) into this one: counts and sums
    /// added, the smallest `min` and `first_ts`, the largest of the rest.
    pub fn absorb(&mut self, s: &Self) {
        self.count = self.count.saturating_add(s.count);
        self.sum = self.sum.saturating_add(s.sum);
        self.min = self.min.min(s.min);
        self.max = self.max.max(s.max);
        self.first_ts = self.first_ts.min(s.first_ts);
        self.last_ts = self.last_ts.max(s.last_ts);
        self.last_addr = self.last_addr.max(s.last_addr);
    }

    pub fn encode(&self) -> [u8; SUMMARY_LEN] {
        let Self {
            chunk,
            source,
            index,
            bin,
            count,
            sum,
            min,
            max,
            first_ts,
            last_ts,
            last_addr,
        } = *self;
        let mut out = [0; SUMMARY_LEN];
        let mut w = Writer(&mut out, 0);
        w.put(&chunk.to_le_bytes());
        w.put(&source.to_le_bytes());
        w.put(&index.to_le_bytes());
        w.put(&bin.to_le_bytes());
        w.put(&count.to_le_bytes());
        w.put(&sum.to_le_bytes());
        w.put(&min.to_le_bytes());
        w.put(&max.to_le_bytes());
        w.put(&first_ts.to_le_bytes());
        w.put(&last_ts.to_le_bytes());
        w.put(&last_addr.to_le_bytes());
        let crc = crc32fast::hash(&out[..SUMMARY_LEN - 4]);
        out[SUMMARY_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// The (source, index, bin) of an encoded summary, unchecked: lets a
    /// reader skip the summaries it does not want without decoding them.
    pub fn key(bytes: &[u8]) -> Option<(u16, u16, u32)> {
        let key = bytes.get(8..16)?;
        Some((
            u16::from_le_bytes([key[0], key[1]]),
            u16::from_le_bytes([key[2], key[3]]),
            u32::from_le_bytes([key[4], key[5], key[6], key[7]]),
        ))
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..SUMMARY_LEN)?;
        let crc = u32::from_le_bytes(le4(bytes, SUMMARY_LEN - 4));
        if crc != crc32fast::hash(&bytes[..SUMMARY_LEN - 4]) {
            return None;
        }
        let mut r = Reader(bytes, 0);
        Some(Self {
            chunk: u64::from_le_bytes(r.take()),
            source: u16::from_le_bytes(r.take()),
            index: u16::from_le_bytes(r.take()),
            bin: u32::from_le_bytes(r.take()),
            count: u64::from_le_bytes(r.take()),
            sum: i128::from_le_bytes(r.take()),
            min: i64::from_le_bytes(r.take()),
            max: i64::from_le_bytes(r.take()),
            first_ts: u64::from_le_bytes(r.take()),
            last_ts: u64::from_le_bytes(r.take()),
            last_addr: u64::from_le_bytes(r.take()),
        })
    }
}

/// One chunk's time-log entry: the commit point of a flushed chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TimeEntry {
    pub chunk: u64,
    pub first_ts: u64,
    pub last_ts: u64,
    /// Index of the chunk's first summary in the chunk log.
    pub first_summary: u64,
    pub summaries: u32,
    /// Records in the chunk.
    pub records: u32,
    /// Where the chunk's entry in the values log starts (format 2).
    pub values_at: u64,
    /// Its length; 0 when the chunk has none (format 1, or not flushed).
    pub values_len: u32,
}

/// Size of an encoded [`TimeEntry`] with its CRC32, in the current format.
pub const TIME_ENTRY_LEN: usize = 8 * 4 + 4 + 4 + 8 + 4 + 4;

impl TimeEntry {
    /// Size of an encoded entry in format `version`.
    pub const fn len(version: FormatVersion) -> usize {
        match version {
            FormatVersion::V1 => TIME_ENTRY_LEN - 12,
            FormatVersion::V2 | FormatVersion::V3 | FormatVersion::V4 | FormatVersion::V5 => {
                TIME_ENTRY_LEN
            }
        }
    }

    /// The entry in format `version`: the first [`TimeEntry::len`] bytes.
    pub fn encode(&self, version: FormatVersion) -> [u8; TIME_ENTRY_LEN] {
        let Self {
            chunk,
            first_ts,
            last_ts,
            first_summary,
            summaries,
            records,
            values_at,
            values_len,
        } = *self;
        let mut out = [0; TIME_ENTRY_LEN];
        let mut w = Writer(&mut out, 0);
        w.put(&chunk.to_le_bytes());
        w.put(&first_ts.to_le_bytes());
        w.put(&last_ts.to_le_bytes());
        w.put(&first_summary.to_le_bytes());
        w.put(&summaries.to_le_bytes());
        w.put(&records.to_le_bytes());
        if version.has_values() {
            w.put(&values_at.to_le_bytes());
            w.put(&values_len.to_le_bytes());
        }
        let end = w.1;
        let crc = crc32fast::hash(&out[..end]);
        out[end..end + 4].copy_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8], version: FormatVersion) -> Option<Self> {
        let len = Self::len(version);
        let bytes = bytes.get(..len)?;
        let crc = u32::from_le_bytes(le4(bytes, len - 4));
        if crc != crc32fast::hash(&bytes[..len - 4]) {
            return None;
        }
        let mut r = Reader(bytes, 0);
        let mut entry = Self {
            chunk: u64::from_le_bytes(r.take()),
            first_ts: u64::from_le_bytes(r.take()),
            last_ts: u64::from_le_bytes(r.take()),
            first_summary: u64::from_le_bytes(r.take()),
            summaries: u32::from_le_bytes(r.take()),
            records: u32::from_le_bytes(r.take()),
            ..Self::default()
        };
        if version.has_values() {
            entry.values_at = u64::from_le_bytes(r.take());
            entry.values_len = u32::from_le_bytes(r.take());
        }
        Some(entry)
    }
}

/// The head of one entry of the groups log (format 3): a run of whole
/// chunks whose summaries follow it merged, one per (source, index, bin)
/// that any of the chunks holds, ascending by key like a chunk's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupEntry {
    pub first_chunk: u64,
    pub chunks: u32,
    pub summaries: u32,
    pub first_ts: u64,
    pub last_ts: u64,
}

/// Size of an encoded [`GroupEntry`] with its CRC32.
pub const GROUP_ENTRY_LEN: usize = 8 + 4 + 4 + 8 + 8 + 4;

impl GroupEntry {
    /// The chunks the entry merges.
    pub fn range(&self) -> std::ops::Range<u64> {
        self.first_chunk..self.first_chunk + u64::from(self.chunks)
    }

    /// Bytes of the entry and its summaries.
    pub fn len(&self) -> usize {
        GROUP_ENTRY_LEN + self.summaries as usize * SUMMARY_LEN
    }

    pub fn encode(&self) -> [u8; GROUP_ENTRY_LEN] {
        let mut out = [0; GROUP_ENTRY_LEN];
        let mut w = Writer(&mut out, 0);
        w.put(&self.first_chunk.to_le_bytes());
        w.put(&self.chunks.to_le_bytes());
        w.put(&self.summaries.to_le_bytes());
        w.put(&self.first_ts.to_le_bytes());
        w.put(&self.last_ts.to_le_bytes());
        let crc = crc32fast::hash(&out[..GROUP_ENTRY_LEN - 4]);
        out[GROUP_ENTRY_LEN - 4..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..GROUP_ENTRY_LEN)?;
        let crc = u32::from_le_bytes(le4(bytes, GROUP_ENTRY_LEN - 4));
        if crc != crc32fast::hash(&bytes[..GROUP_ENTRY_LEN - 4]) {
            return None;
        }
        let mut r = Reader(bytes, 0);
        let entry = Self {
            first_chunk: u64::from_le_bytes(r.take()),
            chunks: u32::from_le_bytes(r.take()),
            summaries: u32::from_le_bytes(r.take()),
            first_ts: u64::from_le_bytes(r.take()),
            last_ts: u64::from_le_bytes(r.take()),
        };
        // A group of no chunks, or one whose chunk numbers run past
        // u64::MAX, is no group a writer makes (its checksum may have been
        // recomputed over damage): callers take `range()` on trust.
        let whole = entry
            .first_chunk
            .checked_add(u64::from(entry.chunks))
            .is_some();
        (entry.chunks > 0 && whole).then_some(entry)
    }
}

/// A groups-log (or rollups-log) entry being built: its header and its
/// summaries merged per (source, index, bin) as chunks or entries are
/// added.
pub struct Merged {
    pub entry: GroupEntry,
    summaries: std::collections::BTreeMap<(u16, u16, u32), Summary>,
}

impl Merged {
    /// An entry of no chunks yet, from `first_chunk`, over `first_ts..=last_ts`.
    pub fn new(first_chunk: u64, (first_ts, last_ts): (u64, u64)) -> Self {
        Self {
            entry: GroupEntry {
                first_chunk,
                chunks: 0,
                summaries: 0,
                first_ts,
                last_ts,
            },
            summaries: std::collections::BTreeMap::new(),
        }
    }

    /// Merges `summaries` (of a later chunk or entry) in.
    pub fn add(&mut self, summaries: &[Summary]) {
        for s in summaries {
            self.summaries
                .entry((s.source, s.index, s.bin))
                .and_modify(|m| m.absorb(s))
                .or_insert(Summary {
                    chunk: self.entry.first_chunk,
                    ..*s
                });
        }
    }

    /// The entry's header and its bytes, its summaries ending with their
    /// closing summary if `closed` (format 5's groups).
    pub fn encode(self, closed: bool) -> Result<(GroupEntry, Vec<u8>)> {
        let Self {
            mut entry,
            summaries,
        } = self;
        let mut bytes: Vec<u8> = summaries.values().flat_map(Summary::encode).collect();
        if closed {
            bytes.extend(Summary::closing(entry.first_chunk, &bytes).encode());
        }
        entry.summaries = u32::try_from(bytes.len() / SUMMARY_LEN)
            .map_err(|_| Error::Invalid("more than 2^32 summaries in one entry".into()))?;
        let mut out = entry.encode().to_vec();
        out.extend(bytes);
        Ok((entry, out))
    }
}

struct Writer<'a>(&'a mut [u8], usize);

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.0[self.1..self.1 + bytes.len()].copy_from_slice(bytes);
        self.1 += bytes.len();
    }
}

struct Reader<'a>(&'a [u8], usize);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        out.copy_from_slice(&self.0[self.1..self.1 + N]);
        self.1 += N;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_and_cutoff() {
        for value in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            let mut bytes = [0; MAX_RECORD_HEADER];
            let len = put(&mut bytes, 0, value);
            let out = &bytes[..len];
            let mut at = 0;
            assert_eq!(get_varint(out, &mut at), Some(value));
            assert_eq!(at, out.len());
            let mut at = 0;
            assert_eq!(
                get_varint(&out[..out.len() - 1], &mut at),
                None,
                "cutoff {value}"
            );
        }
    }

    #[test]
    fn record_header_round_trip() {
        let header = RecordHeader {
            source: 3,
            len: 48,
            ts: 1_001_200,
            prev: Some(930),
            producer_ts: Some(999_000),
        };
        let encoded = header.encode(1000, 1_000_000);
        let out = encoded.as_slice();
        let mut at = 0;
        assert_eq!(
            RecordHeader::decode(out, &mut at, 1000, 1_000_000),
            Some(header)
        );
        assert_eq!(at, out.len());
        let mut at = 0;
        assert_eq!(
            RecordHeader::decode(&out[..out.len() - 1], &mut at, 1000, 1_000_000),
            None
        );
    }

    #[test]
    fn record_header_worked_example_is_five_bytes() {
        let header = RecordHeader {
            source: 3,
            len: 48,
            ts: 1_200,
            prev: Some(930),
            producer_ts: None,
        };
        assert_eq!(header.encode(1000, 0).as_slice().len(), 5);
    }

    #[test]
    fn block_header_round_trip_cutoff_and_flip() {
        let mut block = vec![0u8; 256];
        block[30] = 7;
        let header = BlockHeader {
            used: 31,
            number: 9,
            base_ts: 42,
        };
        header.seal(&mut block);
        assert_eq!(BlockHeader::open(&block), Ok(header));
        assert!(BlockHeader::open(&block[..10]).is_err());
        for i in [0, 5, 30, 255] {
            let mut flipped = block.clone();
            flipped[i] ^= 0x10;
            assert!(BlockHeader::open(&flipped).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn summary_and_time_entry_round_trip_cutoff_and_flip() {
        let summary = Summary {
            chunk: 1,
            source: 2,
            index: 3,
            bin: 4,
            count: 5,
            sum: -6,
            min: -7,
            max: 8,
            first_ts: 9,
            last_ts: 10,
            last_addr: 11,
        };
        let bytes = summary.encode();
        assert_eq!(Summary::decode(&bytes), Some(summary));
        assert_eq!(Summary::decode(&bytes[..SUMMARY_LEN - 1]), None);
        let mut flipped = bytes;
        flipped[20] ^= 1;
        assert_eq!(Summary::decode(&flipped), None);

        let entry = TimeEntry {
            chunk: 1,
            first_ts: 2,
            last_ts: 3,
            first_summary: 4,
            summaries: 5,
            records: 6,
            values_at: 7,
            values_len: 8,
        };
        for version in [
            FormatVersion::V1,
            FormatVersion::V2,
            FormatVersion::V3,
            FormatVersion::V4,
            FormatVersion::V5,
        ] {
            let len = TimeEntry::len(version);
            let bytes = entry.encode(version);
            let expected = match version {
                FormatVersion::V1 => TimeEntry {
                    values_at: 0,
                    values_len: 0,
                    ..entry
                },
                FormatVersion::V2 | FormatVersion::V3 | FormatVersion::V4 | FormatVersion::V5 => {
                    entry
                }
            };
            assert_eq!(TimeEntry::decode(&bytes[..len], version), Some(expected));
            assert_eq!(TimeEntry::decode(&bytes[..len - 1], version), None);
            let mut flipped = bytes;
            flipped[len - 5] ^= 1;
            assert_eq!(TimeEntry::decode(&flipped, version), None);
        }
    }

    #[test]
    fn file_header_checks() {
        let path = std::path::Path::new("x");
        let header = file_header(FileKind::Records, FormatVersion::CURRENT, 4096);
        assert_eq!(
            check_file_header(&header, FileKind::Records, path).unwrap(),
            (FormatVersion::CURRENT, 4096)
        );
        assert!(check_file_header(&header, FileKind::Time, path).is_err());
        let mut future = header;
        future[7] = 99;
        assert!(matches!(
            check_file_header(&future, FileKind::Records, path),
            Err(Error::UnsupportedVersion { version: 99, .. })
        ));
        assert!(check_file_header(&header[..3], FileKind::Records, path).is_err());
    }

    #[test]
    fn group_entries_round_trip_and_fail_their_checksum() {
        let entry = GroupEntry {
            first_chunk: 128,
            chunks: 64,
            summaries: 3,
            first_ts: 10,
            last_ts: 20,
        };
        let bytes = entry.encode();
        assert_eq!(GroupEntry::decode(&bytes), Some(entry));
        assert_eq!(entry.range(), 128..192);
        assert_eq!(entry.len(), GROUP_ENTRY_LEN + 3 * SUMMARY_LEN);
        assert_eq!(GroupEntry::decode(&bytes[..GROUP_ENTRY_LEN - 1]), None);
        let mut flipped = bytes;
        flipped[9] ^= 1;
        assert_eq!(GroupEntry::decode(&flipped), None);
        let empty = GroupEntry { chunks: 0, ..entry }.encode();
        assert_eq!(GroupEntry::decode(&empty), None, "a group of no chunks");
        let past_the_end = GroupEntry {
            first_chunk: u64::MAX - 3,
            chunks: 4,
            ..entry
        };
        assert_eq!(GroupEntry::decode(&past_the_end.encode()), None);
        let last = GroupEntry {
            chunks: 3,
            ..past_the_end
        };
        assert_eq!(GroupEntry::decode(&last.encode()), Some(last));
    }
}
