//! The correlation timeline: every source's records counted on one time
//! axis around an instant — a record chosen in the query view, or the
//! slowest syscall of the window — zoomable from ±1 s to ±60 s.

use weft_query::{Answer, Cell};

/// Half-widths of the axis, in ns.
pub const SPANS: [u64; 6] = [
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
    30_000_000_000,
    60_000_000_000,
];

/// Buckets on the axis: it fits an 80-column terminal with names and totals.
pub const COLUMNS: usize = 60;

/// The instant the axis is centred on.
#[derive(Clone, Debug, PartialEq)]
pub struct Anchor {
    /// `CLOCK_MONOTONIC` ns.
    pub time: u64,
    /// What happened then, e.g. `read 1.20s`.
    pub what: String,
    /// The thread it happened on, when the record says.
    pub tid: Option<i64>,
}

/// One source's counts, a bucket per column.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub source: String,
    pub counts: Vec<u64>,
}

#[derive(Clone, Debug)]
pub struct Timeline {
    pub anchor: Option<Anchor>,
    /// Index into [`SPANS`].
    pub span: usize,
    pub series: Vec<Series>,
}

impl Default for Timeline {
    fn default() -> Self {
        Self {
            anchor: None,
            span: 2,
            series: Vec::new(),
        }
    }
}

impl Timeline {
    pub fn span_ns(&self) -> u64 {
        SPANS[self.span]
    }

    /// The axis: the anchor ± the span.
    pub fn range(&self) -> Option<(u64, u64)> {
        let time = self.anchor.as_ref()?.time;
        Some((time.saturating_sub(self.span_ns()), time + self.span_ns()))
    }

    fn bucket_ns(&self) -> u64 {
        2 * self.span_ns() / COLUMNS as u64
    }

    /// `source`'s records counted per bucket of the axis.
    pub fn query(&self, source: &str) -> Option<String> {
        let (from, to) = self.range()?;
        Some(format!(
            "{source} | count every {}us [{from}, {to}]",
            self.bucket_ns() / 1000
        ))
    }

    /// The records of `source` on the axis: of the anchor's thread when
    /// `threaded` (the source has a `tid`) and the anchor has one.
    pub fn records_query(&self, source: &str, threaded: bool) -> Option<String> {
        let (from, to) = self.range()?;
        let thread = match self.anchor.as_ref()?.tid {
            Some(tid) if threaded => format!(" where tid = {tid}"),
            _ => String::new(),
        };
        Some(format!("{source}{thread} [{from}, {to}] | limit 500"))
    }

    /// Takes the answer to [`Timeline::query`] for `source`.
    pub fn apply(&mut self, source: &str, answer: &Answer) {
        let Some((from, _)) = self.range() else {
            return;
        };
        let column = |name: &str| answer.columns.iter().position(|h| h.name == name);
        let (Some(time), Some(count)) = (column("time"), column("count")) else {
            return;
        };
        let mut counts = vec![0; COLUMNS];
        for row in &answer.rows {
            if let (Cell::Int(t), Cell::Int(n)) = (&row[time], &row[count]) {
                // Buckets align to whole wall-clock intervals, so the first
                // may start a little before the axis.
                let offset = t.unsigned_abs().saturating_sub(from) / self.bucket_ns();
                counts[(offset as usize).min(COLUMNS - 1)] += n.unsigned_abs();
            }
        }
        match self.series.iter_mut().find(|s| s.source == source) {
            Some(series) => series.counts = counts,
            None => self.series.push(Series {
                source: source.to_owned(),
                counts,
            }),
        }
    }

    /// Narrower (`inward`) or wider axis; the counts are stale until
    /// the next answers.
    pub fn zoom(&mut self, inward: bool) {
        self.span = if inward {
            self.span.saturating_sub(1)
        } else {
            (self.span + 1).min(SPANS.len() - 1)
        };
        self.series.clear();
    }

    /// Centres the axis on `anchor`; the counts are stale until the next
    /// answers.
    pub fn center(&mut self, anchor: Anchor) {
        self.anchor = Some(anchor);
        self.series.clear();
    }
}

/// The instant of `row` of `answer`, which needs a `time` column; the other
/// columns (name, duration, thread) say what happened.
pub fn anchor_of(answer: &Answer, row: usize) -> Option<Anchor> {
    let time = answer.columns.iter().position(|h| h.name == "time")?;
    let Cell::Int(t) = answer.rows.get(row)?[time] else {
        return None;
    };
    let what: Vec<String> = ["name", "dur", "comm", "tid"]
        .iter()
        .filter_map(|name| answer.columns.iter().position(|h| h.name == *name))
        .map(|c| answer.text(row, c, None))
        .collect();
    let tid = answer
        .columns
        .iter()
        .position(|h| h.name == "tid")
        .and_then(|c| match answer.rows[row][c] {
            Cell::Int(tid) => Some(tid),
            _ => None,
        });
    Some(Anchor {
        time: t.unsigned_abs(),
        what: what.join(" "),
        tid,
    })
}
