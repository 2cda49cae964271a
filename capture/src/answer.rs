//! Answering a query on a capture directory: the query parsed, bound to
//! the capture's catalog (its sources, what their fields mean, thread
//! names), answered on a snapshot of its store, and printed. `weft query`,
//! the live socket, the metrics endpoint and the terminal UI all ask
//! through here.

use std::{
    fmt::Write as _,
    time::{Duration, Instant},
};

use weft_query::{
    Catalog,
    ast::{Stage, Time, Window},
};
use weft_store::Snapshot;

use crate::{
    error::{Error, Result, refuse},
    open::Capture,
};

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
        AnswerFormat::Table => table(answer, wall_offset),
    }
}

/// The answer as a table, and below it what a person reading it is told
/// it lacks or only approximates.
fn table(answer: &weft_query::Answer, wall_offset: Option<i64>) -> String {
    let mut text = answer.to_table(wall_offset);
    if answer.lost > 0 {
        let _ = writeln!(
            text,
            "({} records of this source were lost in this window: the answer lacks them)",
            answer.lost
        );
    }
    if let Some(note) = &answer.approximate {
        let _ = writeln!(text, "(approximate: {note})");
    }
    text
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
    let parsed = weft_query::parse(query).map_err(|e| Error::of_query(e, query, capture.dir()))?;
    ask_parsed(capture, snapshot, &parsed, query, now, full_scan)
}

/// Answers the parsed `query` (whose text, for errors, is `text`).
pub fn ask_parsed(
    capture: &Capture,
    snapshot: &Snapshot,
    parsed: &weft_query::Query,
    text: &str,
    now: Option<u64>,
    full_scan: bool,
) -> Result<(weft_query::Answer, Option<i64>)> {
    // Thread names cost a pass over the `tasks` records: only for queries
    // that name `comm` (or `pid`, counted through threads) or list records
    // (the capture keeps them once read).
    let threads =
        ["comm", "cgroup", "pid"].iter().any(|n| parsed.names(n)) || parsed.lists_records();
    let mut catalog = Catalog::clone(&*capture.catalog(snapshot, threads)?);
    catalog.now = now;
    if full_scan {
        catalog.without_indexes();
    }
    let answer = weft_query::answer(snapshot, &catalog, parsed)
        .map_err(|e| Error::of_query(e, text, capture.dir()))?;
    Ok((answer, catalog.wall_offset))
}

/// `query` over the window kept around firing `n` (1-based, as `weft query
/// DIR triggers` lists them); without a query, the firing's trigger
/// condition `| explain`: where its matching calls' time went.
pub fn over_firing(
    capture: &Capture,
    snapshot: &Snapshot,
    n: usize,
    query: Option<&str>,
    format: AnswerFormat,
) -> Result<String> {
    let started = Instant::now();
    let window = crate::extract::kept_window(snapshot, n)?;
    let text = match query {
        Some(text) => text.to_owned(),
        None => firing_condition(capture, snapshot, n)?,
    };
    let mut parsed = weft_query::parse(&text).map_err(|e| Error::Query(e.render(&text)))?;
    if query.is_some() && parsed.window.is_some() {
        refuse!("--trigger {n} sets the window: give the query without one");
    }
    // A trigger's sliding window (`dur > p99.9 last 5m`) gives way to the
    // kept one: its threshold is then over the firing's window.
    parsed.window = Some(Window::Range(
        Time::Monotonic(*window.start()),
        Time::Monotonic(*window.end()),
    ));
    if query.is_none() {
        parsed
            .stages
            .push(Stage::Explain(weft_query::Span::new(0, text.len())));
    }
    let (answer, wall_offset) = ask_parsed(capture, snapshot, &parsed, &text, None, false)?;
    Ok(print(&answer, format, wall_offset, started.elapsed()))
}

/// The condition of the trigger whose firing is `n`.
fn firing_condition(capture: &Capture, snapshot: &Snapshot, n: usize) -> Result<String> {
    let meta = snapshot.meta();
    let log = meta
        .sources
        .iter()
        .find(|s| s.name == crate::registry::TRIGGERS)
        .ok_or_else(|| Error::Refused("this capture has no trigger firings".into()))?;
    let (firings, _) = snapshot.raw_scan(log.id, 0..=u64::MAX)?;
    let trigger = (n.checked_sub(1).and_then(|i| firings.get(i)))
        .and_then(|f| f.payload.get(..8))
        .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| Error::Refused(format!("--trigger {n}: no such firing")))?;
    let metadata = capture.metadata()?;
    let rule = (metadata.sessions.iter().rev())
        .filter_map(|s| s.triggers.as_ref())
        .flat_map(|t| &t.rules)
        .find(|r| u64::try_from(r.id).ok() == Some(trigger))
        .ok_or_else(|| {
            Error::Damaged(format!(
                "--trigger {n}: its trigger {trigger} is not in weft.json"
            ))
        })?;
    if trigger == 0 || rule.condition.is_empty() {
        refuse!(
            "--trigger {n} was asked for by hand (trigger 0): it has no condition to explain; \
             give a query, e.g. 'syscalls where dur > p99.9 | explain'"
        );
    }
    Ok(rule.condition.clone())
}

/// The plan, the store's work and the time taken.
fn explain(answer: &weft_query::Answer, elapsed: Duration) -> String {
    let s = &answer.stats;
    let mut text = answer.plan.join("\n");
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "\nchunks: {} answered from summaries, {} read, {} skipped by summaries, {} expired, {} damaged and left out; {} decided by their group's summaries; {} deleted, answered for by their kept summaries\nvalue bins (quantiles, hist edges): {} chunks read for the values inside them, {} from the values log, {} from the cache of earlier queries\nrows: {}\ntime: {:.3} ms\nmemory: {:.1} MiB at most resident (this process, so far)\n",
        s.chunks_summarized,
        s.chunks_scanned,
        s.chunks_skipped,
        s.chunks_expired,
        s.chunks_damaged,
        s.chunks_in_groups,
        s.chunks_rolled_up,
        s.chunks_read_for_bins,
        s.chunks_valued_for_bins,
        s.chunks_cached_for_bins,
        answer.rows.len(),
        elapsed.as_secs_f64() * 1e3,
        crate::usage::peak_resident_kib() as f64 / 1024.0
    );
    text
}
