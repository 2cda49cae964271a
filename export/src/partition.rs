//! `weft export --format parquet --partition -o ROOT`: a fleet's captures
//! as one table. Rows go to Hive-style partitions,
//! `ROOT/host=H/source=S/date=YYYY-MM-DD/hour=HH/part-ID.parquet` (UTC, by
//! each record's own time), and every row also carries its host in a
//! `hostname` column, so a file taken out of the tree still says where it
//! came from (Spark refuses a column named like a partition key). `ID` is
//! the capture's start, so exporting a capture again replaces its files and
//! many hosts' exports side by side never collide.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

use weft_query::{Cell, Header, Kind};

use super::{Sink, wall::WallClock};
use crate::{Compression, Error, FileFormat, Result};

/// The partitions of one export, each written under a temporary name until
/// all are complete.
pub struct Partitions {
    /// `ROOT/host=H/source=S`.
    base: PathBuf,
    host: String,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC` of the capture.
    wall_offset: i64,
    /// `part-ID.parquet`.
    file: String,
    /// By `date=…/hour=…`: the temporary file, its final name, its rows.
    open: BTreeMap<String, (PathBuf, PathBuf, Sink)>,
    /// `wall_time` after `time`.
    wall: WallClock,
    compression: Compression,
}

impl Partitions {
    pub fn new(root: &Path, host: &str, source: &str, wall_offset: i64, id: u64) -> Self {
        Self {
            base: root
                .join(format!("host={host}"))
                .join(format!("source={source}")),
            host: host.to_owned(),
            wall_offset,
            file: format!("part-{id}.parquet"),
            open: BTreeMap::new(),
            wall: WallClock::new(Some(wall_offset)),
            compression: Compression::default(),
        }
    }

    /// With Parquet files compressed with `compression`.
    #[must_use]
    pub fn compressed(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Adds one row to the partition of its time (the first time column).
    pub fn row(&mut self, headers: &[Header], cells: Vec<Cell>) -> Result<()> {
        let time = headers
            .iter()
            .position(|h| matches!(h.kind, Kind::Time))
            .and_then(|i| match cells.get(i) {
                Some(Cell::Int(ns)) => Some(*ns),
                _ => None,
            })
            .ok_or_else(|| {
                Error::Refused(
                    "--partition needs each row's time, and this source's rows have none".into(),
                )
            })?;
        let key = hour_of(time.saturating_add(self.wall_offset));
        if !self.open.contains_key(&key) {
            let dir = self.base.join(&key);
            fs::create_dir_all(&dir).map_err(|error| Error::File {
                doing: "failed to create",
                path: dir.clone(),
                error,
            })?;
            let path = dir.join(&self.file);
            let (tmp, file) = super::create_temp(&path)?;
            let sink = Sink::new(FileFormat::Parquet, file, self.compression);
            self.open.insert(key.clone(), (tmp, path, sink));
        }
        let (tmp, _, sink) = self.open.get_mut(&key).expect("opened above");
        let (headers, cells) = self.wall.row(headers, cells);
        let (headers, cells) = with_host(headers, cells, &self.host);
        sink.row(&headers, cells).map_err(|e| e.writing(tmp))
    }

    /// Completes every partition and puts each in place; how many files.
    pub fn finish(self) -> Result<usize> {
        let count = self.open.len();
        let mut done = Vec::new();
        for (_, (tmp, path, sink)) in self.open {
            // Rows came, so the sink has its schema already.
            sink.finish(&[]).map_err(|e| e.writing(&tmp))?;
            done.push((tmp, path));
        }
        for (tmp, path) in done {
            super::rename(&tmp, &path)?;
        }
        Ok(count)
    }

    /// Removes the temporary files of an export that failed.
    pub fn abandon(self) {
        for (tmp, ..) in self.open.values() {
            let _ = fs::remove_file(tmp);
        }
    }
}

/// The row with the host as its first column.
fn with_host(headers: &[Header], cells: Vec<Cell>, host: &str) -> (Vec<Header>, Vec<Cell>) {
    let mut all = vec![Header {
        name: "hostname".into(),
        kind: Kind::Bytes,
    }];
    all.extend(headers.iter().cloned());
    let mut row = vec![Cell::Text(host.to_owned())];
    row.extend(cells);
    (all, row)
}

/// `date=YYYY-MM-DD/hour=HH` (UTC) of a wall-clock time in ns, as the
/// query language prints times (`YYYY-MM-DD HH:MM:SS.ffffff`).
fn hour_of(unix_ns: i64) -> String {
    let printed = weft_query::answer::time(unix_ns, Some(0));
    let (date, clock) = printed.split_once(' ').expect("a date, then a time");
    format!("date={date}/hour={}", &clock[..2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_are_utc_dates_and_hours() {
        assert_eq!(hour_of(0), "date=1970-01-01/hour=00");
        // 2000-02-29 23:59:59 and a second later.
        assert_eq!(hour_of(951_868_799_000_000_000), "date=2000-02-29/hour=23");
        assert_eq!(hour_of(951_868_800_000_000_000), "date=2000-03-01/hour=00");
        // 2026-11-25 18:30:00.
        assert_eq!(
            hour_of(1_795_631_400_000_000_000),
            "date=2026-11-25/hour=18"
        );
    }
}
