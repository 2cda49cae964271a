//! Answering a query on a capture directory: the query parsed, bound to
//! the capture's catalog (its sources, what their fields mean, thread
//! names), answered on a snapshot of its store, and printed. `weft query`,
//! the live socket, the metrics endpoint and the terminal UI all ask
//! through here.

use std::{
    fmt::Write as _,
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow};
use weft_query::Catalog;
use weft_store::Snapshot;

use crate::open::Capture;

/// How an answer is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnswerFormat {
    /// Aligned columns, times as wall-clock when the capture knows its offset.
    Table,
    /// One JSON object per row.
    Json,
    /// A header line and comma-separated rows.
    Csv,
    /// The plan, the store's work and the time taken, instead of the rows.
    Explain,
}

impl AnswerFormat {
    /// The format's name on the live socket.
    pub fn name(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::Json => "json",
            Self::Csv => "csv",
            Self::Explain => "explain",
        }
    }

    /// The format called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Table, Self::Json, Self::Csv, Self::Explain]
            .into_iter()
            .find(|f| f.name() == name)
    }
}

/// Answers `query` on `snapshot` of `capture`, printed in `format`;
/// `now` is the present for live captures. A query error is rendered with
/// a caret under the offending token.
pub fn answer(
    capture: &Capture,
    snapshot: &Snapshot,
    query: &str,
    format: AnswerFormat,
    now: Option<u64>,
    full_scan: bool,
) -> Result<String> {
    let started = Instant::now();
    let (answer, wall_offset) = ask(capture, snapshot, query, now, full_scan)?;
    Ok(print(&answer, format, wall_offset, started.elapsed()))
}

/// `answer` printed in `format`; `elapsed` is the time it took.
pub fn print(
    answer: &weft_query::Answer,
    format: AnswerFormat,
    wall_offset: Option<i64>,
    elapsed: Duration,
) -> String {
    match format {
        AnswerFormat::Explain => explain(answer, elapsed),
        AnswerFormat::Json => answer.to_json_lines(),
        AnswerFormat::Csv => answer.to_csv(),
        // A person reading the table is told what it lacks.
        AnswerFormat::Table if answer.lost > 0 => format!(
            "{}({} records of this source were lost in this window: the answer lacks them)\n",
            answer.to_table(wall_offset),
            answer.lost
        ),
        AnswerFormat::Table => answer.to_table(wall_offset),
    }
}

/// Answers `query` on `snapshot` of `capture`, with the capture's
/// wall-clock offset for printing times.
pub fn ask(
    capture: &Capture,
    snapshot: &Snapshot,
    query: &str,
    now: Option<u64>,
    full_scan: bool,
) -> Result<(weft_query::Answer, Option<i64>)> {
    let failed = |error: weft_query::Error| match error {
        weft_query::Error::Query { .. } => anyhow!("{}", error.render(query)),
        other => anyhow!(other).context(format!("failed to query {}", capture.dir().display())),
    };
    let parsed = weft_query::parse(query).map_err(failed)?;
    // Thread names cost a pass over the `tasks` records: only for queries
    // that name `comm` or list records (the capture keeps them once read).
    let threads = parsed.names("comm") || parsed.lists_records();
    let mut catalog = Catalog::clone(&*capture.catalog(snapshot, threads)?);
    catalog.now = now;
    if full_scan {
        catalog.without_indexes();
    }
    let answer = weft_query::answer(snapshot, &catalog, &parsed).map_err(failed)?;
    Ok((answer, catalog.wall_offset))
}

/// The plan, the store's work and the time taken.
fn explain(answer: &weft_query::Answer, elapsed: Duration) -> String {
    let s = &answer.stats;
    let mut text = answer.plan.join("\n");
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "\nchunks: {} answered from summaries, {} read, {} skipped by summaries, {} expired, {} damaged and left out; {} decided by their group's summaries\nvalue bins (quantiles, hist edges): {} chunks read for the values inside them, {} from the values log, {} from the cache of earlier queries\nrows: {}\ntime: {:.3} ms\n",
        s.chunks_summarized,
        s.chunks_scanned,
        s.chunks_skipped,
        s.chunks_expired,
        s.chunks_damaged,
        s.chunks_in_groups,
        s.chunks_read_for_bins,
        s.chunks_valued_for_bins,
        s.chunks_cached_for_bins,
        answer.rows.len(),
        elapsed.as_secs_f64() * 1e3
    );
    text
}
