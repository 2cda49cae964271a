//! The wall-clock column row exports carry beside `time`: `time` is the
//! capture's `CLOCK_MONOTONIC` (time since boot, which two hosts do not
//! share); `wall_time` is the same instant in UTC ns since the Unix epoch,
//! from the capture's wall-clock offset, so rows of two hosts, or of weft
//! and a log, join on it. Parquet types it `TIMESTAMP(MICROS, UTC)`, which
//! Spark reads too (it refuses `NANOS`); `time` keeps the nanoseconds.

use weft_query::{Cell, Header, Kind};

/// The wall-clock column's name.
pub const WALL_TIME: &str = "wall_time";

/// Adds `wall_time` after a source's `time` column.
pub struct WallClock {
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC` of the capture, if it knows it.
    offset: Option<i64>,
    /// Where `time` is, and the headers with `wall_time` after it; found at
    /// the first row.
    shape: Option<(Option<usize>, Vec<Header>)>,
}

impl WallClock {
    pub fn new(offset: Option<i64>) -> Self {
        Self {
            offset,
            shape: None,
        }
    }

    /// The headers of rows with `wall_time`.
    pub fn headers(&mut self, headers: &[Header]) -> &[Header] {
        &self.shape(headers).1
    }

    /// A row with `wall_time` after `time`, and its headers.
    pub fn row(&mut self, headers: &[Header], mut cells: Vec<Cell>) -> (&[Header], Vec<Cell>) {
        let offset = self.offset.unwrap_or(0);
        let (at, headers) = self.shape(headers);
        if let Some(at) = *at {
            let wall = match cells.get(at) {
                Some(Cell::Int(ns)) => Cell::Int(ns.saturating_add(offset)),
                _ => Cell::Null,
            };
            cells.insert(at + 1, wall);
        }
        (headers, cells)
    }

    fn shape(&mut self, headers: &[Header]) -> &(Option<usize>, Vec<Header>) {
        let offset = self.offset;
        self.shape.get_or_insert_with(|| {
            let at = headers
                .iter()
                .position(|h| h.name == "time" && matches!(h.kind, Kind::Time))
                .filter(|_| offset.is_some());
            let mut all = headers.to_vec();
            if let Some(at) = at {
                all.insert(
                    at + 1,
                    Header {
                        name: WALL_TIME.into(),
                        kind: Kind::Time,
                    },
                );
            }
            (at, all)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, kind: Kind) -> Header {
        Header {
            name: name.into(),
            kind,
        }
    }

    #[test]
    fn wall_time_follows_time_by_the_offset() {
        let headers = [header("time", Kind::Time), header("dur", Kind::Duration)];
        let mut wall = WallClock::new(Some(1_000));
        let (with, cells) = wall.row(&headers, vec![Cell::Int(5), Cell::Int(7)]);
        let names: Vec<&str> = with.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["time", "wall_time", "dur"]);
        assert_eq!(cells, [Cell::Int(5), Cell::Int(1_005), Cell::Int(7)]);
        // A capture without a wall clock gets no column.
        let mut none = WallClock::new(None);
        let (with, cells) = none.row(&headers, vec![Cell::Int(5), Cell::Int(7)]);
        assert_eq!((with.len(), cells.len()), (2, 2));
    }
}
