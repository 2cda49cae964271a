//! Freeing the index-log entries of the segments the disk budget deletes,
//! and reading the logs past what was freed.
//!
//! The chunk, values, groups and time logs are addressed by offset (a time
//! entry by its chunk's number, summaries and values by the offsets in
//! it), so they cannot be cut from the front. Instead the flusher punches
//! a hole over a deleted segment's entries: the file keeps its size, reads
//! there see zeros, and the file system frees the blocks. A ring that runs
//! for a day keeps only the blocks of the entries it still holds.
//!
//! Readers never read a deleted chunk's time entry (see
//! `Snapshot::deleted_entry`); recovery and `check` take a zeroed entry in
//! a deleted segment for what it is; walks of the groups log step over the
//! holes with [`GroupWalk`].

use std::{fs::File, os::unix::fs::FileExt as _};

use crate::format::{FILE_HEADER_LEN, GROUP_ENTRY_LEN, GroupEntry};

/// How far before a deleted segment's first entry a hole may begin, at
/// most: holes free whole file-system blocks, so the part of a block that
/// the previous (deleted) segment's entries shared with this one's is
/// punched again to free that block too.
const BLOCK_REACH: u64 = 64 << 10;

/// Frees the entries in `[start, end)` of a log, given that every byte in
/// `[freed, start)` belongs to deleted chunks too (it may be punched again
/// to free a block the two share); returns the bytes freed (an estimate: 0
/// where the file system cannot punch holes, and the entries then stay,
/// which costs only disk).
pub(crate) fn free(file: &File, freed: u64, (start, end): (u64, u64)) -> u64 {
    let from = freed.max(start.saturating_sub(BLOCK_REACH) / 4096 * 4096);
    punch_hole(file, from.min(start), end)
}

/// Frees the disk blocks of `[from, to)` in `file`, keeping its size (reads
/// there see zeros); returns the bytes asked to be freed, 0 when the file
/// system cannot.
pub(crate) fn punch_hole(file: &File, from: u64, to: u64) -> u64 {
    use std::os::fd::AsRawFd as _;
    let (Ok(offset), Ok(len)) = (
        libc::off64_t::try_from(from),
        libc::off64_t::try_from(to.saturating_sub(from)),
    ) else {
        return 0;
    };
    if len == 0 {
        return 0;
    }
    // SAFETY: the call only reads its integer arguments and changes no
    // memory of ours.
    let done = unsafe {
        libc::fallocate64(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        )
    };
    if done == 0 { len.unsigned_abs() } else { 0 }
}

/// Where the data of `file` goes on at or after `at` (`lseek(SEEK_DATA)`):
/// past a hole, to the block that holds data again; `at` itself when it
/// holds data or the file system cannot tell.
fn next_data(file: &File, at: u64) -> u64 {
    use std::os::fd::AsRawFd as _;
    let Ok(offset) = libc::off64_t::try_from(at) else {
        return at;
    };
    // SAFETY: the call reads its integer arguments; the descriptor is
    // `file`'s, open for the call's length, and pread (which the walk uses)
    // does not use its position.
    let data = unsafe { libc::lseek64(file.as_raw_fd(), offset, libc::SEEK_DATA) };
    u64::try_from(data).map_or(at, |data| data.max(at))
}

/// The entries of a groups log in order, stepping over the holes the
/// budget punched: an entry that does not decode where the bytes are
/// zeros starts a freed stretch, and the walk goes on with the first
/// entry after it. It stops at anything else that does not decode, at an
/// entry out of chunk order or past `end`; [`GroupWalk::at`] is then
/// where it stopped.
pub(crate) struct GroupWalk<'a> {
    file: &'a File,
    /// Where the next entry begins.
    pub at: u64,
    end: u64,
    next_chunk: u64,
}

impl<'a> GroupWalk<'a> {
    /// A walk of `file`'s entries that lie before `end`.
    pub fn new(file: &'a File, end: u64) -> Self {
        Self {
            file,
            at: FILE_HEADER_LEN as u64,
            end,
            next_chunk: 0,
        }
    }

    /// Fills `buf` from offset `at` of the log.
    fn read(&self, buf: &mut [u8], at: u64) -> Option<()> {
        self.file.read_exact_at(buf, at).ok()
    }

    /// The header-sized bytes at `at`.
    fn head(&self, at: u64) -> Option<[u8; GROUP_ENTRY_LEN]> {
        let mut head = [0u8; GROUP_ENTRY_LEN];
        self.read(&mut head, at)?;
        Some(head)
    }

    /// The entry at `at`, if it decodes, follows the last and fits.
    fn entry_at(&self, at: u64) -> Option<GroupEntry> {
        self.decode(&self.head(at)?, at)
    }

    /// The entry `head` (read at `at`), if it decodes, follows the last
    /// and fits.
    fn decode(&self, head: &[u8], at: u64) -> Option<GroupEntry> {
        GroupEntry::decode(head)
            .filter(|e| e.first_chunk >= self.next_chunk && at + e.len() as u64 <= self.end)
    }

    /// The first entry after the freed (zero) stretch that starts at
    /// `self.at`, and where it lies; when the stretch reaches `end`, none,
    /// and the walk is at `end` (everything was read).
    fn after_hole(&mut self) -> Option<(u64, GroupEntry)> {
        let mut at = self.at;
        let mut window = vec![0u8; 4096];
        loop {
            at = next_data(self.file, at);
            if at >= self.end {
                self.at = self.end;
                return None;
            }
            let len = window.len().min(usize::try_from(self.end - at).ok()?);
            self.read(&mut window[..len], at)?;
            let Some(nonzero) = window[..len].iter().position(|b| *b != 0) else {
                at += len as u64;
                continue;
            };
            // An entry begins with its first chunk's number, whose low
            // bytes may be zeros.
            let first = at + nonzero as u64;
            return (first.saturating_sub(8).max(self.at)..=first)
                .find_map(|start| Some((start, self.entry_at(start)?)));
        }
    }
}

impl Iterator for GroupWalk<'_> {
    /// An entry and the offset of its header.
    type Item = (u64, GroupEntry);

    fn next(&mut self) -> Option<Self::Item> {
        if self.at + GROUP_ENTRY_LEN as u64 > self.end {
            return None;
        }
        let head = self.head(self.at)?;
        let found = match self.decode(&head, self.at) {
            Some(entry) => Some((self.at, entry)),
            // Freed: zeros where an entry was.
            None if head.iter().all(|b| *b == 0) => self.after_hole(),
            None => None,
        };
        let (at, entry) = found?;
        self.at = at + entry.len() as u64;
        self.next_chunk = entry.range().end;
        Some((at, entry))
    }
}
