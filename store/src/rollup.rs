//! Summaries that outlive their records ([`Config::retain_summaries`]).
//!
//! When retirement deletes a record segment, its chunks' summaries are
//! merged into one entry of `rollups.log` first (the groups log's entry
//! format). As entries age they are merged into coarser time buckets, a
//! bucket about a sixtieth of their age wide (1 s, 10 s, 1 min, 10 min,
//! 1 h), so a week of them is a few thousand entries; past the retention,
//! or past the log's share of the disk budget, the oldest go. Queries over
//! a window whose records are gone answer from them, approximately.
//!
//! This module reads the log (a snapshot's view of it); the flusher writes
//! and ages it (`roller`). Readers hold the file they opened, so a rewrite
//! never changes what a snapshot reads.

use std::{fs::File, os::unix::fs::FileExt as _, sync::Arc};

use crate::{
    dir::Dir,
    error::{Error, Result, io},
    format::{
        FILE_HEADER_LEN, FileKind, GROUP_ENTRY_LEN, GroupEntry, SUMMARY_LEN, Summary,
        check_file_header,
    },
    keys::{KeyRange, entry_summaries},
};

/// The log's name in a capture directory.
pub(crate) const ROLLUPS: &str = "rollups.log";
/// The rollups a snapshot reads: the file as it was when they were
/// published, and its entries in chunk (and time) order with the offset of
/// each one's summaries.
#[derive(Default)]
pub(crate) struct Rollups {
    file: Option<Arc<File>>,
    pub entries: Vec<(GroupEntry, u64)>,
}

impl Rollups {
    /// Those of `file`, whose entries are `entries` (with where each
    /// one's summaries start).
    pub fn new(file: Arc<File>, entries: Vec<(GroupEntry, u64)>) -> Self {
        Self {
            file: Some(file),
            entries,
        }
    }

    /// The entries of `rollups.log`, up to the first that does not decode,
    /// is out of order, or whose summaries run past the file's end; and
    /// where that is. No file: none.
    pub fn load(dir: &Dir) -> Result<(Self, u64)> {
        if !dir.contains(ROLLUPS) {
            return Ok((Self::default(), 0));
        }
        let file = dir.open_file(ROLLUPS)?;
        let path = dir.join(ROLLUPS);
        let size = file.metadata().map_err(io("stat", &path))?.len();
        let mut header = [0; FILE_HEADER_LEN];
        file.read_exact_at(&mut header, 0)
            .map_err(io("read", &path))?;
        check_file_header(&header, FileKind::Rollups, &path)?;
        let mut entries: Vec<(GroupEntry, u64)> = Vec::new();
        let mut at = FILE_HEADER_LEN as u64;
        let mut raw = [0; GROUP_ENTRY_LEN];
        while file.read_exact_at(&mut raw, at).is_ok() {
            let Some(entry) = GroupEntry::decode(&raw) else {
                break;
            };
            let end = at.saturating_add(entry.len() as u64);
            let follows = entries
                .last()
                .is_none_or(|(last, _)| last.range().end <= entry.first_chunk);
            if end > size || !follows {
                break;
            }
            entries.push((entry, at + GROUP_ENTRY_LEN as u64));
            at = end;
        }
        let file = Some(Arc::new(file));
        Ok((Self { file, entries }, at))
    }

    /// The summaries of entry `i` that `keys` want (all, without), each
    /// checked.
    pub fn summaries(
        &self,
        dir: &Dir,
        i: usize,
        keys: Option<&[KeyRange]>,
    ) -> Result<Vec<Summary>> {
        let (entry, at) = self.entries[i];
        let mut raw = vec![0; entry.summaries as usize * SUMMARY_LEN];
        if let Some(file) = &self.file {
            file.read_exact_at(&mut raw, at)
                .map_err(io("read", &dir.join(ROLLUPS)))?;
        }
        entry_summaries(&raw, &entry, keys).map_err(|i| Error::Corrupt {
            path: dir.join(ROLLUPS),
            offset: at.saturating_add((i * SUMMARY_LEN) as u64),
            what: format!(
                "summary of deleted chunks {:?} fails its checksum",
                entry.range()
            ),
        })
    }
}
