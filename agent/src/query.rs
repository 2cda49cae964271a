//! `weft query DIR 'QUERY'`: answers a query on a capture directory, as a
//! table, JSON lines or CSV, or explains how it was answered.

use std::{
    fmt::Write as _,
    io::{ErrorKind, Write as _},
    process::ExitCode,
    time::Instant,
};

use anyhow::{Context as _, Result, anyhow};

use crate::{capture, cli::QueryArgs};

pub fn run(args: &QueryArgs) -> Result<ExitCode> {
    let dir = &args.dir;
    let metadata = capture::read_metadata(dir)?;
    let (snapshot, _) = weft_store::open_read_only(dir)
        .with_context(|| format!("failed to open {}", dir.display()))?;
    let catalog = capture::catalog(&snapshot, &metadata)?;
    let started = Instant::now();
    let answer =
        weft_query::run(&snapshot, &catalog, &args.query).map_err(|error| match error {
            weft_query::Error::Query { .. } => anyhow!("{}", error.render(&args.query)),
            other => anyhow!(other).context(format!("failed to query {}", dir.display())),
        })?;
    let elapsed = started.elapsed();
    let text = if args.explain {
        explain(&answer, elapsed)
    } else if args.json {
        answer.to_json_lines()
    } else if args.csv {
        answer.to_csv()
    } else {
        answer.to_table(catalog.wall_offset)
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

/// The plan, the store's work and the time taken.
fn explain(answer: &weft_query::Answer, elapsed: std::time::Duration) -> String {
    let s = &answer.stats;
    let mut text = answer.plan.join("\n");
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "\nchunks: {} answered from summaries, {} read, {} skipped by summaries, {} expired\nrows: {}\ntime: {:.3} ms\n",
        s.chunks_summarized,
        s.chunks_scanned,
        s.chunks_skipped,
        s.chunks_expired,
        answer.rows.len(),
        elapsed.as_secs_f64() * 1e3
    );
    text
}
