//! The consumer side of a BPF ring buffer (`BPF_MAP_TYPE_RINGBUF`), read in
//! batches: one look at the producer position, every record up to it handed
//! out in place, one store of the consumer position.
//!
//! aya's `RingBuf::next` reads the producer position and writes the consumer
//! position once per record, and hands records out one call at a time. At
//! 4 M records/s that bookkeeping, and a drain loop that cannot stop until
//! the ring is empty, were most of weft's ingest cost; here a drain is one
//! bounded batch.
//!
//! The memory layout is the kernel's (`kernel/bpf/ringbuf.c`):
//!
//! ```text
//!  mmap offset 0          page: consumer position (u64), read-write
//!  mmap offset PAGE       page: producer position (u64), read-only
//!  mmap offset 2*PAGE     data: SIZE bytes, mapped twice in a row, so a
//!                         record that wraps is contiguous in memory
//!
//!  a record at position p (8-byte aligned), at data[p & (SIZE - 1)]:
//!  +------------------------------+------------+---------------------+
//!  | len: u32                     | pg_off: u32| len bytes of payload|
//!  | bit 31 busy, bit 30 discard  |            | (padded to 8 bytes) |
//!  +------------------------------+------------+---------------------+
//! ```
//!
//! A busy record is still being written: the batch ends before it. A
//! discarded one is skipped.
//!
//! ```
//! use weft_abi::ring::Ring;
//! let mut ring = Ring::in_memory(4096);
//! assert!(ring.push(b"a record"));
//! let mut seen = Vec::new();
//! let drained = ring.drain(usize::MAX, |record| seen.push(record.to_vec()));
//! assert_eq!((drained.records, seen), (1, vec![b"a record".to_vec()]));
//! ```

use std::{
    boxed::Box,
    format, io,
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd},
    sync::atomic::{AtomicU32, AtomicU64, Ordering},
    vec,
    vec::Vec,
};

use crate::mapping::Mapping;

/// Set in a record's length while the producer still writes it.
const BUSY: u32 = 1 << 31;
/// Set in a record's length when the producer gave it up.
const DISCARD: u32 = 1 << 30;
/// Bytes of a record's header (`struct bpf_ringbuf_hdr`).
pub const HEADER: usize = 8;

/// What one [`Ring::drain`] took out of the ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Records handed to the caller (discarded ones are not counted).
    pub records: u64,
    /// Ring bytes consumed, headers and padding included.
    pub bytes: u64,
    /// Whether records were left in the ring because the budget ran out.
    pub more: bool,
    /// The time of the earliest record [`drain_merged`] left in its ring
    /// as newer than it was asked for.
    pub held: Option<u64>,
}

/// The reading end of one BPF ring buffer.
pub struct Ring {
    memory: Memory,
    /// Data size minus one (the size is a power of two).
    mask: u64,
    /// The most bytes waiting at the end of a batch, before its space was
    /// freed: how near the ring came to full, which the loss counters say
    /// only once it is.
    peak: u64,
}

/// Where a ring's pages live.
enum Memory {
    /// The kernel's pages, mapped from the map's file descriptor.
    Mapped {
        /// The map, kept open so that callers can poll it.
        fd: OwnedFd,
        /// The consumer position's page, read-write.
        consumer: Mapping,
        /// The producer position's page, then the data twice, read-only.
        producer: Mapping,
        page: usize,
    },
    /// A ring in weft's own memory, with the kernel's layout: for tests and
    /// benchmarks that need no root. `data` holds the data twice, as the
    /// kernel maps it.
    Heap {
        consumer: Box<AtomicU64>,
        producer: Box<AtomicU64>,
        data: Vec<u64>,
    },
}

// SAFETY: the mapped pages belong to the ring alone, and the producer side
// is the kernel, which synchronises through the positions' atomics.
unsafe impl Send for Memory {}

impl Ring {
    /// Maps the ring buffer map `fd` of `size` data bytes (a power of two
    /// and a multiple of the page size, as the kernel requires), and keeps
    /// `fd`.
    ///
    /// # Errors
    /// `mmap` failing (not a ring buffer, wrong size, out of memory).
    pub fn map(fd: OwnedFd, size: usize) -> io::Result<Self> {
        let page = crate::mapping::page_size()?;
        if !size.is_power_of_two() || !size.is_multiple_of(page) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ring size {size} is not a power of two multiple of the page size"),
            ));
        }
        // The kernel checks the offsets and protections of ring buffer maps.
        let consumer = Mapping::shared(fd.as_raw_fd(), page, 0, true)?;
        let producer = Mapping::shared(fd.as_raw_fd(), page + 2 * size, page, false)?;
        Ok(Self {
            memory: Memory::Mapped {
                fd,
                consumer,
                producer,
                page,
            },
            mask: size as u64 - 1,
            peak: 0,
        })
    }

    /// An empty ring of `size` data bytes (a power of two, at least 16) in
    /// weft's own memory, filled with [`Ring::push`]: the reader's input in
    /// tests and benchmarks, laid out as the kernel lays out its rings.
    pub fn in_memory(size: usize) -> Self {
        assert!(size.is_power_of_two() && size >= 16, "ring size {size}");
        Self {
            memory: Memory::Heap {
                consumer: Box::new(AtomicU64::new(0)),
                producer: Box::new(AtomicU64::new(0)),
                data: vec![0; 2 * size / 8],
            },
            mask: size as u64 - 1,
            peak: 0,
        }
    }

    /// The ring buffer map, to poll for records (`None` for a ring in
    /// memory).
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        match &self.memory {
            Memory::Mapped { fd, .. } => Some(fd.as_fd()),
            Memory::Heap { .. } => None,
        }
    }

    /// Data bytes of the ring.
    pub fn size(&self) -> usize {
        self.mask as usize + 1
    }

    /// The most data bytes that were waiting when a batch ended.
    pub fn peak(&self) -> u64 {
        self.peak
    }

    fn consumer(&self) -> &AtomicU64 {
        match &self.memory {
            Memory::Mapped { consumer, .. } => consumer.word(0),
            Memory::Heap { consumer, .. } => consumer,
        }
    }

    fn producer(&self) -> &AtomicU64 {
        match &self.memory {
            Memory::Mapped { producer, .. } => producer.word(0),
            Memory::Heap { producer, .. } => producer,
        }
    }

    /// The start of the data area, which is mapped twice in a row.
    fn data(&self) -> *const u8 {
        match &self.memory {
            Memory::Mapped { producer, page, .. } => {
                producer.as_ptr().wrapping_add(*page).cast_const()
            }
            Memory::Heap { data, .. } => data.as_ptr().cast(),
        }
    }

    /// Hands `on_record` every record the producer has committed, in
    /// order, as it lies in the ring (no copy), up to `budget` ring bytes:
    /// the rest stays for the next drain, so that one drain never runs
    /// unbounded while producers keep pace. The consumer position moves
    /// once, after the batch, which frees its space for the producers.
    pub fn drain(&mut self, budget: usize, mut on_record: impl FnMut(&[u8])) -> Drained {
        self.drain_while(budget, |record| {
            on_record(record);
            true
        })
    }

    /// [`Ring::drain`], stopping after the record for which `on_record`
    /// returns `false` (it is consumed; the rest stays in the ring).
    pub fn drain_while(
        &mut self,
        budget: usize,
        mut on_record: impl FnMut(&[u8]) -> bool,
    ) -> Drained {
        let mut cursor = self.cursor(budget);
        while let Some(record) = cursor.peek() {
            let go_on = on_record(record);
            cursor.advance();
            if !go_on {
                break;
            }
        }
        cursor.finish()
    }

    /// A batch of at most `budget` ring bytes, read from the consumer
    /// position and consumed at [`Cursor::finish`].
    fn cursor(&mut self, budget: usize) -> Cursor<'_> {
        let consumer = self.consumer().load(Ordering::Relaxed);
        let producer = self.producer().load(Ordering::Acquire);
        Cursor {
            ring: self,
            consumer,
            producer,
            pos: consumer,
            end: producer.min(consumer.saturating_add(budget as u64)),
            next: None,
            records: 0,
        }
    }

    /// Bytes committed by the producer and not yet drained.
    pub fn pending(&self) -> u64 {
        let producer = self.producer().load(Ordering::Acquire);
        producer.saturating_sub(self.consumer().load(Ordering::Relaxed))
    }

    /// Writes a record as the kernel's reserve and submit would; `false`
    /// when the ring has no room (the kernel's "ring full"). Only rings
    /// made by [`Ring::in_memory`] take records.
    ///
    /// # Panics
    /// On a mapped ring: the kernel is its only producer.
    pub fn push(&mut self, payload: &[u8]) -> bool {
        let size = self.size();
        let consumer = self.consumer().load(Ordering::Acquire);
        let producer = self.producer().load(Ordering::Relaxed);
        let total = (HEADER + payload.len() + 7) & !7;
        if producer + total as u64 - consumer > size as u64 {
            return false;
        }
        let Memory::Heap { data, .. } = &mut self.memory else {
            panic!("only the kernel writes into a mapped ring");
        };
        let bytes: &mut [u8] = bytemuck_u64s(data);
        let mut record = vec![0u8; total];
        record[..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        record[HEADER..HEADER + payload.len()].copy_from_slice(payload);
        let offset = producer as usize & (size - 1);
        // Both copies, as the kernel's double mapping shows them: the
        // record as it lies from `offset`, and the part past the end of
        // the first copy again at the start.
        bytes[offset..offset + total].copy_from_slice(&record);
        let wrapped = (offset + total).saturating_sub(size);
        bytes[size + offset..(size + offset + total).min(2 * size)]
            .copy_from_slice(&record[..total - wrapped]);
        bytes[..wrapped].copy_from_slice(&record[total - wrapped..]);
        self.producer()
            .store(producer + total as u64, Ordering::Release);
        true
    }
}

/// One batch of a ring: records are looked at in place, and the ones
/// passed are consumed all at once at the end.
struct Cursor<'a> {
    ring: &'a mut Ring,
    consumer: u64,
    producer: u64,
    /// The position of the next record to look at.
    pos: u64,
    end: u64,
    /// The record [`Cursor::peek`] found: its position past it, and where
    /// its payload lies in the data area.
    next: Option<(u64, usize, usize)>,
    records: u64,
}

impl Cursor<'_> {
    /// The next committed record of the batch, left in place until
    /// [`Cursor::advance`]; `None` at the batch's end, at a record still
    /// being written, or at one that would cross the budget (unless it is
    /// the batch's first: a record larger than the budget still goes).
    fn peek(&mut self) -> Option<&[u8]> {
        if self.next.is_none() {
            self.next = self.find();
        }
        let (_, offset, len) = self.next?;
        // SAFETY: `find` saw the record committed (not busy), `len` bytes
        // follow its header, and the double mapping keeps a record that
        // wraps contiguous (len <= size). The producer does not reuse the
        // space before the consumer position passes it, in `finish`.
        Some(unsafe { std::slice::from_raw_parts(self.ring.data().add(offset), len) })
    }

    /// Passes the record [`Cursor::peek`] returned.
    fn advance(&mut self) {
        if let Some((past, _, _)) = self.next.take() {
            self.pos = past;
            self.records += 1;
        }
    }

    /// Whether the batch ended with committed records left: its budget
    /// was spent (not at a record still being written).
    fn spent(&self) -> bool {
        self.pos < self.producer && self.len_word() & BUSY == 0
    }

    /// The length word of the record at `pos`.
    fn len_word(&self) -> u32 {
        let offset = (self.pos & self.ring.mask) as usize;
        // SAFETY: `offset` is within the first copy of the data, 8-aligned
        // as the kernel aligns records; the length word is written
        // atomically by the producer.
        #[expect(
            clippy::cast_ptr_alignment,
            reason = "the kernel aligns records to 8 bytes, and the data area to a page"
        )]
        unsafe {
            (*self.ring.data().add(offset).cast::<AtomicU32>()).load(Ordering::Acquire)
        }
    }

    /// Moves past discarded records to the next committed one: its end
    /// position, payload offset and length.
    fn find(&mut self) -> Option<(u64, usize, usize)> {
        while self.pos < self.end {
            let offset = (self.pos & self.ring.mask) as usize;
            let len_word = self.len_word();
            if len_word & BUSY != 0 {
                return None;
            }
            let len = (len_word & !(BUSY | DISCARD)) as usize;
            let past = self.pos + ((HEADER + len + 7) & !7) as u64;
            if past > self.end && self.pos > self.consumer {
                // Over the budget: leave it whole for the next drain.
                return None;
            }
            if len_word & DISCARD == 0 {
                return Some((past, offset + HEADER, len));
            }
            self.pos = past;
        }
        None
    }

    /// Consumes every record passed, freeing their space for the producer.
    fn finish(self) -> Drained {
        // The ring is at its fullest just before its space is freed: the
        // producer has gone on while the batch was read.
        let producer = self.ring.producer().load(Ordering::Acquire);
        let ring = &mut *self.ring;
        ring.peak = ring.peak.max(producer.saturating_sub(self.consumer));
        ring.consumer().store(self.pos, Ordering::Release);
        Drained {
            records: self.records,
            bytes: self.pos - self.consumer,
            more: self.pos < self.producer,
            held: None,
        }
    }
}

/// Drains each of `rings` once as [`drain_each`] does, handing
/// `on_record` the records of all of them in the order of their times
/// (`time` reads a record's): each ring holds its CPU's records in order,
/// and this merges them, so that what a process did on one CPU and then
/// another comes out in that order. Stops after the record for which
/// `on_record` returns `false`.
///
/// A record on one CPU may be committed after a later one on another: the
/// records newer than `until` stay in their rings for a later drain
/// ([`Drained::held`] says since when), unless a ring is half full, when
/// all go. And where one ring's batch ends with records left in it (its
/// budget spent, or a record still being written), the batch ends there,
/// as the others' later records may come after those.
pub fn drain_merged(
    rings: &mut [Ring],
    time: impl Fn(&[u8]) -> u64,
    until: u64,
    mut on_record: impl FnMut(&[u8]) -> bool,
) -> Drained {
    use std::{cmp::Reverse, collections::BinaryHeap};
    let full = rings
        .iter()
        .any(|ring| ring.pending() * 2 >= ring.size() as u64);
    let until = if full { u64::MAX } else { until };
    let mut cursors: Vec<Cursor<'_>> = rings
        .iter_mut()
        .map(|ring| {
            let budget = ring.size() / 4;
            ring.cursor(budget)
        })
        .collect();
    // The next record's time of each ring that has one.
    let mut heads: BinaryHeap<Reverse<(u64, usize)>> = cursors
        .iter_mut()
        .enumerate()
        .filter_map(|(i, cursor)| Some(Reverse((time(cursor.peek()?), i))))
        .collect();
    let (mut stopped, mut cut, mut held) = (false, false, None);
    'rings: while let Some(Reverse((at, i))) = heads.pop() {
        if at > until {
            held = Some(at);
            break;
        }
        let cursor = &mut cursors[i];
        // Take this ring's records while none of another ring comes
        // first: with one busy ring (most of the time) the heap is not
        // touched per record.
        let limit = heads
            .peek()
            .map_or(u64::MAX, |Reverse((next, _))| *next)
            .min(until);
        loop {
            let Some(record) = cursor.peek() else {
                // A record still being written is as new as now, past
                // `until` but where every ring is taken.
                cut = cursor.spent();
                if cut {
                    break 'rings;
                }
                break;
            };
            let at = time(record);
            if at > limit {
                heads.push(Reverse((at, i)));
                break;
            }
            let go_on = on_record(record);
            cursor.advance();
            if !go_on {
                stopped = true;
                break 'rings;
            }
        }
    }
    let mut total = Drained::default();
    for cursor in cursors {
        let drained = cursor.finish();
        total.records += drained.records;
        total.bytes += drained.bytes;
        total.more |= drained.more;
    }
    // Held records are more for later, not for a drain at once.
    total.more = stopped || cut;
    total.held = held;
    total
}

/// The fullest any of `rings` was when a batch ended, in percent of its
/// size (rounded up, so that 0 means never more than empty).
#[must_use]
pub fn peak_percent(rings: &[Ring]) -> u8 {
    rings
        .iter()
        .map(|ring| (ring.peak() * 100).div_ceil(ring.size() as u64))
        .max()
        .map_or(0, |percent| percent.min(100) as u8)
}

/// Drains each of `rings` once, at most a quarter of its size (so that a
/// capture loop gets its turn between batches while producers keep
/// pace), handing `on_record` each record with the time its ring's batch
/// began: its arrival time, read once per batch rather than per record.
/// Stops at the first record for which `on_record` returns `false`.
pub fn drain_each(rings: &mut [Ring], mut on_record: impl FnMut(u64, &[u8]) -> bool) -> Drained {
    let mut total = Drained::default();
    for ring in rings {
        let now = now_ns();
        let mut stopped = false;
        let drained = ring.drain_while(ring.size() / 4, |record| {
            stopped = !on_record(now, record);
            !stopped
        });
        total.records += drained.records;
        total.bytes += drained.bytes;
        total.more |= drained.more;
        if stopped {
            total.more = true;
            break;
        }
    }
    total
}

/// The bytes of `words`.
fn bytemuck_u64s(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: u8 has no alignment or validity requirements, and the length
    // covers exactly the same memory.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 8) }
}

/// `CLOCK_MONOTONIC` now, in ns: the clock of `bpf_ktime_get_ns`, which
/// stamps the records, so that an arrival time compares with theirs.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut ts) };
    // A monotonic clock is never negative.
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain_all(ring: &mut Ring, budget: usize) -> (Vec<Vec<u8>>, Drained) {
        let mut got = Vec::new();
        let drained = ring.drain(budget, |r| got.push(r.to_vec()));
        (got, drained)
    }

    #[test]
    fn drain_returns_records_in_order_with_their_lengths() {
        let mut ring = Ring::in_memory(4096);
        assert!(ring.push(&[1, 2, 3]));
        assert!(ring.push(&[4; 40]));
        assert!(ring.push(&[]));
        let (got, drained) = drain_all(&mut ring, usize::MAX);
        assert_eq!(got, vec![vec![1, 2, 3], vec![4; 40], vec![]]);
        assert_eq!(
            drained,
            Drained {
                records: 3,
                bytes: 16 + 48 + 8,
                more: false,
                held: None,
            }
        );
        assert_eq!(ring.pending(), 0);
    }

    #[test]
    fn drain_stops_at_the_budget_and_goes_on_next_time() {
        let mut ring = Ring::in_memory(4096);
        for i in 0..10u8 {
            assert!(ring.push(&[i; 40]));
        }
        let (got, drained) = drain_all(&mut ring, 100);
        assert_eq!(got.len(), 2, "two 48-byte records fit 100 bytes");
        assert!(drained.more);
        let (rest, drained) = drain_all(&mut ring, usize::MAX);
        assert_eq!(rest.len(), 8);
        assert_eq!(rest[0], vec![2; 40]);
        assert!(!drained.more);
    }

    #[test]
    fn drain_takes_one_record_larger_than_the_budget() {
        let mut ring = Ring::in_memory(4096);
        assert!(ring.push(&[7; 200]));
        let (got, drained) = drain_all(&mut ring, 16);
        assert_eq!(got, vec![vec![7; 200]]);
        assert!(!drained.more);
    }

    #[test]
    fn push_full_ring_is_refused_until_drained() {
        let mut ring = Ring::in_memory(256);
        let pushed = (0..10).take_while(|_| ring.push(&[9; 56])).count();
        assert_eq!(pushed, 4, "256 bytes hold four 64-byte records");
        assert!(!ring.push(&[9; 56]));
        drain_all(&mut ring, usize::MAX);
        assert!(ring.push(&[9; 56]));
    }

    #[test]
    fn drain_record_that_wraps_is_whole() {
        let mut ring = Ring::in_memory(128);
        for round in 0..20u8 {
            let payload: Vec<u8> = (0..44).map(|i| i ^ round).collect();
            assert!(ring.push(&payload));
            let (got, _) = drain_all(&mut ring, usize::MAX);
            assert_eq!(got, vec![payload], "round {round}");
        }
    }

    #[test]
    fn drain_while_stops_after_the_refused_record() {
        let mut ring = Ring::in_memory(4096);
        for i in 0..5u8 {
            assert!(ring.push(&[i]));
        }
        let mut got = Vec::new();
        let drained = ring.drain_while(usize::MAX, |r| {
            got.push(r[0]);
            r[0] < 2
        });
        assert_eq!(got, vec![0, 1, 2]);
        assert!(drained.more);
        assert_eq!(drain_all(&mut ring, usize::MAX).0, vec![vec![3], vec![4]]);
    }

    #[test]
    fn drain_skips_discarded_and_stops_at_busy() {
        let mut ring = Ring::in_memory(4096);
        assert!(ring.push(&[1; 8]));
        assert!(ring.push(&[2; 8]));
        assert!(ring.push(&[3; 8]));
        let Memory::Heap { data, .. } = &mut ring.memory else {
            unreachable!()
        };
        // The first record discarded, the third still being written.
        data[0] |= u64::from(DISCARD);
        data[4] |= u64::from(BUSY);
        let (got, drained) = drain_all(&mut ring, usize::MAX);
        assert_eq!(got, vec![vec![2; 8]]);
        assert_eq!(drained.bytes, 32);
        assert!(drained.more);
    }

    /// A record whose first 8 bytes are its time.
    fn at(time: u64) -> [u8; 8] {
        time.to_le_bytes()
    }

    fn time_of(record: &[u8]) -> u64 {
        u64::from_le_bytes(record[..8].try_into().expect("8 bytes"))
    }

    #[test]
    fn peak_is_the_fullest_a_ring_was_when_a_batch_ended() {
        let mut rings = [Ring::in_memory(4096), Ring::in_memory(4096)];
        assert_eq!(peak_percent(&rings), 0);
        // 16 bytes each: 100 records are 1600 of 4096 bytes, 40 %.
        for t in 0..100 {
            assert!(rings[1].push(&at(t)));
        }
        drain_each(&mut rings, |_, _| true);
        assert_eq!(rings[1].peak(), 1600);
        // Emptier batches later do not lower it; one record rounds up.
        assert!(rings[0].push(&at(0)));
        drain_each(&mut rings, |_, _| true);
        assert_eq!((rings[0].peak(), peak_percent(&rings)), (16, 40));
        assert_eq!(peak_percent(&rings[..1]), 1);
    }

    #[test]
    fn drain_merged_hands_out_every_ring_s_records_in_time_order() {
        let mut rings = [
            Ring::in_memory(4096),
            Ring::in_memory(4096),
            Ring::in_memory(4096),
        ];
        for (ring, times) in rings.iter_mut().zip([&[1, 4, 5, 9][..], &[2, 3, 8], &[]]) {
            for &t in times {
                assert!(ring.push(&at(t)));
            }
        }
        let mut seen = Vec::new();
        let drained = drain_merged(&mut rings, time_of, u64::MAX, |r| {
            seen.push(time_of(r));
            true
        });
        assert_eq!(seen, [1, 2, 3, 4, 5, 8, 9]);
        assert_eq!(
            (drained.records, drained.bytes, drained.more),
            (7, 7 * 16, false)
        );
        assert!(rings.iter().all(|r| r.pending() == 0));
    }

    #[test]
    fn drain_merged_stops_after_the_refused_record_and_keeps_the_rest() {
        let mut rings = [Ring::in_memory(4096), Ring::in_memory(4096)];
        for (ring, times) in rings.iter_mut().zip([[1, 3], [2, 4]]) {
            for t in times {
                assert!(ring.push(&at(t)));
            }
        }
        let mut seen = Vec::new();
        let drained = drain_merged(&mut rings, time_of, u64::MAX, |r| {
            seen.push(time_of(r));
            seen.len() < 2
        });
        assert_eq!(
            (seen.as_slice(), drained.records, drained.more),
            (&[1, 2][..], 2, true)
        );
        let mut rest = Vec::new();
        drain_merged(&mut rings, time_of, u64::MAX, |r| {
            rest.push(time_of(r));
            true
        });
        assert_eq!(rest, [3, 4]);
    }

    #[test]
    fn a_ring_whose_budget_is_spent_ends_the_merged_batch() {
        let mut rings = [Ring::in_memory(4096), Ring::in_memory(4096)];
        // A quarter of the first ring is its records 0..64; the second
        // ring's 70 comes after its 64..70, handed in the next batch.
        for t in 0..100 {
            assert!(rings[0].push(&at(t)));
        }
        assert!(rings[1].push(&at(70)));
        let mut seen = Vec::new();
        while seen.len() < 101 {
            let drained = drain_merged(&mut rings, time_of, u64::MAX, |r| {
                seen.push(time_of(r));
                true
            });
            assert!(drained.records > 0);
        }
        assert!(seen.is_sorted(), "{seen:?}");
    }

    #[test]
    fn records_newer_than_asked_for_stay_in_their_ring() {
        let mut rings = [Ring::in_memory(4096), Ring::in_memory(4096)];
        for (ring, times) in rings.iter_mut().zip([[1, 5], [3, 7]]) {
            for t in times {
                assert!(ring.push(&at(t)));
            }
        }
        let mut seen = Vec::new();
        let drained = drain_merged(&mut rings, time_of, 4, |r| {
            seen.push(time_of(r));
            true
        });
        assert_eq!(seen, [1, 3]);
        assert_eq!((drained.more, drained.held), (false, Some(5)));
        // A ring half full takes every record, whatever it was asked.
        for t in 8..8 + 2048 / 16 {
            assert!(rings[1].push(&at(t)));
        }
        let drained = drain_merged(&mut rings, time_of, 4, |r| {
            seen.push(time_of(r));
            true
        });
        assert_eq!((drained.held, seen[2..5].to_vec()), (None, vec![5, 7, 8]));
    }

    #[test]
    fn drain_merged_takes_a_quarter_of_each_ring() {
        let mut rings = [Ring::in_memory(4096), Ring::in_memory(4096)];
        // 16 bytes each: a quarter of the ring is 64 records.
        for t in 0..100 {
            assert!(rings[0].push(&at(t)));
        }
        assert!(rings[1].push(&at(50)));
        let mut seen = Vec::new();
        let drained = drain_merged(&mut rings, time_of, u64::MAX, |r| {
            seen.push(time_of(r));
            true
        });
        assert_eq!((drained.records, drained.more), (65, true));
        assert!(seen.is_sorted(), "{seen:?}");
        assert_eq!(rings[0].pending(), 36 * 16);
    }
}
