//! `weft query DIR 'QUERY'` and `weft query --live 'QUERY'`: answers a query
//! on a capture directory, or on the running recorder through its socket,
//! as a table, JSON lines or CSV, or explains how it was answered.

use std::{
    fmt::Write as _,
    io::{ErrorKind, Write as _},
    path::Path,
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, anyhow, bail};
use weft_recording::capture;
use weft_store::Snapshot;

use crate::{
    cli::{OutputFormat, QueryArgs},
    live::client,
};

pub fn run(args: &QueryArgs) -> Result<ExitCode> {
    let text = match (args.live, &args.args[..]) {
        (true, [query]) => client::ask(query, args.format(), args.full_scan)?,
        (false, [dir, query]) => {
            let dir = Path::new(dir);
            let snapshot = capture::open(dir, args.skip_damaged)?;
            answer(&snapshot, dir, query, args.format(), None, args.full_scan)?
        }
        (true, _) => bail!("with --live, give only the query (no directory)"),
        (false, _) => bail!("give the capture directory and the query"),
    };
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        // A closed pipe (`| head`) is the reader's choice, not an error.
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(e).context("failed to write the answer"),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Answers `query` on `snapshot` of the capture in `dir`, printed in
/// `format`; `now` is the present for live captures. A query error is
/// rendered with a caret under the offending token.
pub fn answer(
    snapshot: &Snapshot,
    dir: &Path,
    query: &str,
    format: OutputFormat,
    now: Option<u64>,
    full_scan: bool,
) -> Result<String> {
    let started = Instant::now();
    let (answer, wall_offset) = ask(snapshot, dir, query, now, full_scan)?;
    Ok(match format {
        OutputFormat::Explain => explain(&answer, started.elapsed()),
        OutputFormat::Json => answer.to_json_lines(),
        OutputFormat::Csv => answer.to_csv(),
        OutputFormat::Table => answer.to_table(wall_offset),
    })
}

/// Answers `query` on `snapshot` of the capture in `dir`, with the
/// capture's wall-clock offset for printing times.
pub fn ask(
    snapshot: &Snapshot,
    dir: &Path,
    query: &str,
    now: Option<u64>,
    full_scan: bool,
) -> Result<(weft_query::Answer, Option<i64>)> {
    let failed = |error: weft_query::Error| match error {
        weft_query::Error::Query { .. } => anyhow!("{}", error.render(query)),
        other => anyhow!(other).context(format!("failed to query {}", dir.display())),
    };
    let parsed = weft_query::parse(query).map_err(failed)?;
    let metadata = capture::read_metadata(dir)?;
    // Thread names cost a pass over the chunk index: only for queries that
    // name `comm` or list records.
    let threads = parsed.names("comm") || parsed.lists_records();
    let mut catalog = capture::catalog(snapshot, &metadata, threads)?;
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
