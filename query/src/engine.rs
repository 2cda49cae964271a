//! The state one query runs with: the snapshot and catalog it reads, the
//! capture's clock, and the plan and store work it writes down as it goes.
//! The stages that use it each add their methods: `plan.rs` resolves a
//! query's head and picks its scans, `scan.rs` runs them, `correlate.rs`
//! finds the anchors of a correlation, `summarize.rs` aggregates.

use std::{collections::HashMap, ops::RangeInclusive};

use weft_store::{IndexId, QueryStats, Snapshot};

use crate::{
    answer::duration,
    ast::{Name, Time, Window},
    bind::Pred,
    catalog::{Catalog, SourceColumns},
    error::{Error, Result},
};

pub(crate) struct Engine<'a> {
    pub(crate) snapshot: &'a Snapshot,
    pub(crate) catalog: &'a Catalog,
    /// Arrival time of the capture's first record.
    pub(crate) first: u64,
    /// "now": arrival time of the capture's last record.
    pub(crate) now: u64,
    pub(crate) plan: Vec<String>,
    pub(crate) stats: QueryStats,
    /// Conditions made from percentile thresholds: the most selective.
    pub(crate) thresholds: Vec<Pred>,
    /// A correlation's intervals given from outside (a fleet's anchors,
    /// on this capture's clock), used instead of its sub-query's.
    pub(crate) given: Option<Vec<(u64, u64)>>,
}

/// What a query's head picks: its source, window, anchors and condition.
pub(crate) struct Selection<'a> {
    pub(crate) source: &'a SourceColumns,
    pub(crate) window: RangeInclusive<u64>,
    pub(crate) near: Option<Near>,
    pub(crate) pred: Option<Pred>,
}

/// How records are fetched: which index narrows the scan, and what is then
/// tested on each record.
pub(crate) struct Scan {
    /// The index, the part of a partitioned one, and the value range.
    pub(crate) index: Option<(IndexId, Option<u32>, RangeInclusive<i64>)>,
    pub(crate) pred: Option<Pred>,
}

/// Time intervals around anchor records, per value of the `same` fields.
pub(crate) struct Near {
    /// Merged intervals of all anchors, for scanning.
    pub(crate) all: Vec<(u64, u64)>,
    /// Merged intervals per `same` key.
    pub(crate) by_key: HashMap<Vec<i64>, Vec<(u64, u64)>>,
    /// Columns of the scanned source that make the key.
    pub(crate) same: Vec<usize>,
    /// Intervals are in arrival time (`around`, like windows, so that the
    /// store's summaries can answer them), else in the records' own time
    /// (`during`, which needs the precision of the producer's clock).
    pub(crate) by_arrival: bool,
}

impl Near {
    pub(crate) fn holds(
        &self,
        source: &SourceColumns,
        time: u64,
        arrival: u64,
        payload: &[u8],
    ) -> bool {
        let key: Vec<i64> = self
            .same
            .iter()
            .map(|c| source.columns[*c].value(time, payload).unwrap_or(i64::MIN))
            .collect();
        // A late source's records are placed by their own time.
        let at = if self.by_arrival && source.late.is_none() {
            arrival
        } else {
            time
        };
        self.by_key.get(&key).is_some_and(|spans| within(spans, at))
    }
}

/// Whether `t` lies in one of the sorted, disjoint `spans`.
fn within(spans: &[(u64, u64)], t: u64) -> bool {
    let i = spans.partition_point(|(lo, _)| *lo <= t);
    i > 0 && spans[i - 1].1 >= t
}

/// Sorts and merges overlapping intervals.
pub(crate) fn merge(mut spans: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (lo, hi) in spans {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

impl<'a> Engine<'a> {
    pub(crate) fn new(snapshot: &'a Snapshot, catalog: &'a Catalog) -> Result<Self> {
        let range = snapshot.time_range()?;
        Ok(Self {
            snapshot,
            catalog,
            first: range.as_ref().map_or(0, |r| *r.start()),
            now: catalog.now.unwrap_or_else(|| range.map_or(0, |r| *r.end())),
            plan: Vec::new(),
            stats: QueryStats::default(),
            thresholds: Vec::new(),
            given: None,
        })
    }

    /// An engine over the same capture and clock, for another thread:
    /// its plan and stats start empty, to be added to this one's.
    pub(crate) fn helper(&self) -> Self {
        Self {
            plan: Vec::new(),
            stats: QueryStats::default(),
            thresholds: self.thresholds.clone(),
            given: self.given.clone(),
            ..*self
        }
    }

    pub(crate) fn source(&self, name: &Name) -> Result<&'a SourceColumns> {
        self.catalog.source(&name.text).ok_or_else(|| {
            let names: Vec<&str> = self
                .catalog
                .sources
                .iter()
                .map(|s| s.name.as_str())
                .collect();
            Error::spanned(
                name.span,
                format!(
                    "no source `{}` in this capture (sources: {})",
                    name.text,
                    names.join(", ")
                ),
            )
        })
    }

    pub(crate) fn add(&mut self, stats: QueryStats) {
        self.stats.absorb(&stats);
    }

    /// The window in arrival time.
    pub(crate) fn window(
        &mut self,
        window: Option<&Window>,
        at: &Name,
    ) -> Result<RangeInclusive<u64>> {
        let shift = |base: u64, by: i64| base.saturating_add_signed(by);
        let range = match window {
            None => 0..=u64::MAX,
            Some(Window::Last(ns)) => shift(self.now, -ns)..=self.now,
            Some(Window::Range(from, to)) => {
                let (from, to) = (self.time(from)?, self.time(to)?);
                if from > to {
                    return Err(Error::spanned(at.span, "the window ends before it starts"));
                }
                from..=to
            }
        };
        if window.is_some() {
            let rel = |t: u64| duration(t as f64 - self.first as f64);
            self.plan.push(format!(
                "window: start+{} .. start+{} of the capture",
                rel(*range.start()),
                rel(*range.end())
            ));
        }
        Ok(range)
    }

    fn time(&self, time: &Time) -> Result<u64> {
        let shift = |base: u64, by: i64| base.saturating_add_signed(by);
        Ok(match time {
            Time::Now(by) => shift(self.now, *by),
            Time::Start(by) => shift(self.first, *by),
            Time::Monotonic(t) => *t,
            Time::Wall(wall, span) => {
                let offset = self.catalog.wall_offset.ok_or_else(|| {
                    Error::spanned(*span, "this capture has no wall-clock reference; use `now-…`, `start+…` or monotonic ns")
                })?;
                u64::try_from(wall - offset).unwrap_or(0)
            }
        })
    }
}
