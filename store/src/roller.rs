//! The flusher's side of `rollups.log` (see `rollup`): an entry per
//! deleted segment, merged into coarser time buckets as they age.
//!
//! The log is appended to per deleted segment and rewritten (a new file
//! renamed over it) only when it has doubled since it was last rewritten,
//! outgrown its share, or holds entries well past the retention: each byte
//! is rewritten a bounded number of times.

use std::{fs::File, io::Write as _, os::unix::fs::FileExt as _, sync::Arc};

use crate::{
    config::{Config, Durability},
    dir::Dir,
    error::{Error, Result, io},
    format::{
        FILE_HEADER_LEN, FileKind, FormatVersion, GROUP_ENTRY_LEN, GroupEntry, Merged, file_header,
    },
    keys::KeyRange,
    rollup::{ROLLUPS, Rollups},
    shared::Snapshot,
};

const ROLLUPS_TMP: &str = "rollups.log.tmp";

/// Bucket widths entries are merged into as they age, shortest first; an
/// entry `age` old goes into the widest that is at most `age / AGE_RATIO`.
const WIDTHS: [u64; 5] = [
    1_000_000_000,
    10_000_000_000,
    60_000_000_000,
    600_000_000_000,
    3_600_000_000_000,
];
const AGE_RATIO: u64 = 60;

/// The log is not rewritten for growth below this size.
const REWRITE_FLOOR: u64 = 64 << 10;

/// The flusher's side: appends an entry per deleted segment, rewrites the
/// log coarser as it ages, and publishes what readers may use.
pub(crate) struct Roller {
    dir: Arc<Dir>,
    file: Arc<File>,
    end: u64,
    /// `end` after the last rewrite.
    rewritten: u64,
    retain: u64,
    published: Arc<Rollups>,
}

impl Roller {
    /// Opens (or creates) the log, leaving out a torn tail. A log whose
    /// header is damaged is begun again: it only ever adds approximate
    /// answers, and must not stop a recording.
    pub fn open(dir: &Arc<Dir>, retain: u64) -> Result<Self> {
        dir.remove_if_present(ROLLUPS_TMP)?;
        let (rollups, end) = match Rollups::load(dir) {
            Ok((rollups, end)) if dir.contains(ROLLUPS) => (rollups, end),
            Err(Error::Io { call, path, error }) => return Err(Error::Io { call, path, error }),
            _ => {
                dir.remove_if_present(ROLLUPS)?;
                let file = dir.create(ROLLUPS)?;
                let header = file_header(FileKind::Rollups, FormatVersion::CURRENT, 0);
                file.write_all_at(&header, 0)
                    .map_err(io("write", &dir.join(ROLLUPS)))?;
                dir.sync()?;
                (Rollups::default(), FILE_HEADER_LEN as u64)
            }
        };
        let file = Arc::new(dir.open_file_rw(ROLLUPS)?);
        file.set_len(end)
            .map_err(io("truncate", &dir.join(ROLLUPS)))?;
        let published = Arc::new(Rollups::new(Arc::clone(&file), rollups.entries));
        Ok(Self {
            dir: Arc::clone(dir),
            file,
            end,
            rewritten: end,
            retain,
            published,
        })
    }

    /// What readers may use now.
    pub fn published(&self) -> Arc<Rollups> {
        Arc::clone(&self.published)
    }

    /// Appends the summaries of `chunks` (a segment about to be deleted,
    /// its records spanning `time`) merged into one entry.
    pub fn roll(
        &mut self,
        snapshot: &Snapshot,
        chunks: std::ops::Range<u64>,
        time: (u64, u64),
        config: &Config,
    ) -> Result<()> {
        let meta = snapshot.meta();
        let all = 0..=u32::MAX;
        let mut keys: Vec<KeyRange> = (0..meta.sources.len())
            .filter_map(|s| u16::try_from(s).ok())
            .map(|s| (s, 0, all.clone()))
            .collect();
        keys.extend(meta.indexes.iter().map(|i| (i.source, i.id, all.clone())));
        keys.sort_by_key(|(s, i, _)| (*s, *i));
        let mut merged = Merged::new(chunks.start, time);
        let read = snapshot.for_each_span(chunks.clone(), &keys, |chunk, _| {
            merged.add(&chunk.summaries);
            Ok(true)
        });
        if read.is_err() {
            // Damaged summaries: the segment goes without its rollup rather
            // than the recording stopping.
            return Ok(());
        }
        merged.entry.chunks = u32::try_from(chunks.end - chunks.start)
            .map_err(|_| Error::Invalid("a segment of more than 2^32 chunks".into()))?;
        let (entry, bytes) = merged.encode(false)?;
        let path = self.dir.join(ROLLUPS);
        self.file
            .write_all_at(&bytes, self.end)
            .map_err(io("write", &path))?;
        if config.durability == Durability::Sync {
            self.file.sync_data().map_err(io("fdatasync", &path))?;
        }
        let mut entries = self.published.entries.clone();
        entries.push((entry, self.end + GROUP_ENTRY_LEN as u64));
        self.end += bytes.len() as u64;
        self.published = Arc::new(Rollups::new(Arc::clone(&self.file), entries));
        Ok(())
    }

    /// Rewrites the log when it is due (see the module's comment): entries
    /// past the retention before `newest` left out, then the oldest while
    /// the rest exceed `share` bytes, the others merged by age.
    pub fn age(&mut self, newest: u64, share: u64, durability: Durability) -> Result<()> {
        let entries = &self.published.entries;
        let stale = |e: &GroupEntry| e.last_ts.saturating_add(self.retain) < newest;
        let overdue = entries.first().is_some_and(|(e, _)| {
            e.last_ts
                .saturating_add(self.retain.saturating_add(self.retain / 4))
                < newest
        });
        let grown = self.end > REWRITE_FLOOR.max(self.rewritten.saturating_mul(2));
        if !(overdue || grown || self.end > share) {
            return Ok(());
        }
        let mut from = entries.partition_point(|(e, _)| stale(e));
        let mut bytes: u64 = entries[from..].iter().map(|(e, _)| e.len() as u64).sum();
        while bytes > share.saturating_sub(FILE_HEADER_LEN as u64) && from < entries.len() {
            bytes -= entries[from].0.len() as u64;
            from += 1;
        }
        self.rewrite(from, newest, durability)
    }

    /// Writes entries `from..` into a new log, merging neighbours that fall
    /// in one bucket of the width their age calls for, and puts it in place.
    fn rewrite(&mut self, from: usize, newest: u64, durability: Durability) -> Result<()> {
        let tmp = self.dir.join(ROLLUPS_TMP);
        self.dir.remove_if_present(ROLLUPS_TMP)?;
        let mut out = std::io::BufWriter::new(self.dir.create(ROLLUPS_TMP)?);
        out.write_all(&file_header(FileKind::Rollups, FormatVersion::CURRENT, 0))
            .map_err(io("write", &tmp))?;
        let mut written = Vec::new();
        let mut end = FILE_HEADER_LEN as u64;
        let mut flush = |merged: Merged, out: &mut std::io::BufWriter<File>| -> Result<()> {
            let (entry, bytes) = merged.encode(false)?;
            out.write_all(&bytes).map_err(io("write", &tmp))?;
            written.push((entry, end + GROUP_ENTRY_LEN as u64));
            end += bytes.len() as u64;
            Ok(())
        };
        let mut current: Option<Merged> = None;
        for i in from..self.published.entries.len() {
            let (entry, _) = self.published.entries[i];
            // A damaged entry is left out of the new log.
            let Ok(summaries) = self.published.summaries(&self.dir, i, None) else {
                continue;
            };
            let width = width_for(newest.saturating_sub(entry.last_ts));
            match &mut current {
                Some(merged) if takes(merged, &entry, width) => {
                    merged.entry.chunks += entry.chunks;
                    merged.entry.last_ts = merged.entry.last_ts.max(entry.last_ts);
                    merged.add(&summaries);
                }
                _ => {
                    if let Some(done) = current.take() {
                        flush(done, &mut out)?;
                    }
                    let mut merged =
                        Merged::new(entry.first_chunk, (entry.first_ts, entry.last_ts));
                    merged.entry.chunks = entry.chunks;
                    merged.add(&summaries);
                    current = Some(merged);
                }
            }
        }
        if let Some(done) = current {
            flush(done, &mut out)?;
        }
        let file = out
            .into_inner()
            .map_err(|e| io("write", &tmp)(e.into_error()))?;
        // Buffered, as the chunks are: a flusher waiting on the disk here
        // would hold up the records behind it (the rename alone keeps
        // readers from ever seeing half a log).
        if durability == Durability::Sync {
            file.sync_all().map_err(io("fsync", &tmp))?;
        }
        self.dir.rename(ROLLUPS_TMP, ROLLUPS)?;
        if durability == Durability::Sync {
            self.dir.sync()?;
        }
        let file = Arc::new(file);
        self.file = Arc::clone(&file);
        self.end = end;
        self.rewritten = end;
        self.published = Arc::new(Rollups::new(file, written));
        Ok(())
    }
}

/// The bucket width for an entry `age` ns old (0: not merged yet).
fn width_for(age: u64) -> u64 {
    let most = age / AGE_RATIO;
    WIDTHS
        .iter()
        .rev()
        .find(|w| **w <= most)
        .copied()
        .unwrap_or(0)
}

/// Whether `next` (the entry after `merged`) joins it: its chunks follow
/// on, and both begin in one bucket `width` wide (so a merged entry spans
/// at most the width and its last part).
fn takes(merged: &Merged, next: &GroupEntry, width: u64) -> bool {
    width > 0
        && merged.entry.range().end == next.first_chunk
        && merged.entry.chunks.checked_add(next.chunks).is_some()
        && merged.entry.first_ts / width == next.first_ts / width
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_grow_with_age() {
        let s = 1_000_000_000;
        assert_eq!(width_for(30 * s), 0);
        assert_eq!(width_for(60 * s), s);
        assert_eq!(width_for(10 * 60 * s), 10 * s);
        assert_eq!(width_for(3600 * s), 60 * s);
        assert_eq!(width_for(7 * 24 * 3600 * s), 3600 * s);
    }
}
