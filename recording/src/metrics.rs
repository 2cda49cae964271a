//! `weft record --metrics ADDR`: the recorder's counters and live latency
//! quantiles in Prometheus's text format, on `http://ADDR/metrics`, for a
//! Prometheus server to scrape:
//!
//! - `weft_records_total{source}` and `weft_lost_total{source}`: records
//!   received and lost (ring full) so far, as counters (`rate()` gives
//!   records/s);
//! - `weft_syscall_latency_seconds{syscall, quantile}` and
//!   `weft_syscall_calls{syscall}`: exact quantiles and the count of each
//!   syscall's durations over the last `--metrics-window`, answered by the
//!   query `weft query --live` would answer at that instant.
//!
//! One thread answers scrapes one at a time; a query costs what the same
//! live query costs, once per scrape.

use std::{
    fmt::Write as _,
    io::{BufRead as _, BufReader, Write as _},
    net::{SocketAddr, TcpListener, TcpStream},
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use anyhow::{Context as _, Result};
use weft_store::Reader;

use crate::answer::{self, Format};

/// The quantiles each syscall's latency is given at.
const QUANTILES: [&str; 5] = ["0.5", "0.9", "0.99", "0.999", "0.9999"];

/// What a scrape reads.
pub struct Metrics {
    pub reader: Reader,
    pub dir: PathBuf,
    pub health: Arc<Mutex<weft_query::health::Health>>,
    pub window: Duration,
}

/// Binds `addr` (an error when it cannot: the user asked for metrics) and
/// answers scrapes from a background thread.
pub fn serve(addr: SocketAddr, metrics: Metrics) -> Result<()> {
    let listener = TcpListener::bind(addr)
        .with_context(|| format!("--metrics: failed to listen on {addr}"))?;
    std::thread::Builder::new()
        .name("weft-metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                // A scraper that hangs up must not stop the next one.
                let _ = answer(&stream, &metrics);
            }
        })
        .context("failed to start the metrics thread")?;
    eprintln!("weft: metrics on http://{addr}/metrics");
    Ok(())
}

/// Answers one HTTP request: the metrics for `GET /metrics`, 404 else.
fn answer(stream: &TcpStream, metrics: &Metrics) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut request = String::new();
    BufReader::new(stream).read_line(&mut request)?;
    let path = request.split_whitespace().nth(1).unwrap_or_default();
    let (status, body) = if path == "/metrics" || path.starts_with("/metrics?") {
        match text(metrics) {
            Ok(body) => ("200 OK", body),
            Err(error) => ("500 Internal Server Error", format!("{error:#}\n")),
        }
    } else {
        ("404 Not Found", "weft serves /metrics only\n".to_owned())
    };
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    Ok(())
}

/// The metrics, in Prometheus's text exposition format.
fn text(metrics: &Metrics) -> Result<String> {
    let health = metrics
        .health
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let mut out = String::new();
    let sources = &health.sources;
    counter(
        &mut out,
        "weft_records_total",
        "Records received from the kernel",
        sources.iter().map(|s| (&s.name, s.received)),
    );
    counter(
        &mut out,
        "weft_lost_total",
        "Records lost before weft could read them (ring full)",
        sources.iter().map(|s| (&s.name, s.lost)),
    );
    latencies(metrics, &mut out)?;
    Ok(out)
}

/// A counter per source, with its help and type lines.
fn counter<'a>(
    out: &mut String,
    metric: &str,
    help: &str,
    values: impl Iterator<Item = (&'a String, u64)>,
) {
    let _ = writeln!(
        out,
        "# HELP {metric} {help}, per source.\n# TYPE {metric} counter"
    );
    for (source, value) in values {
        let _ = writeln!(out, "{metric}{{source=\"{source}\"}} {value}");
    }
}

/// Each syscall's exact latency quantiles and count over the window.
fn latencies(metrics: &Metrics, out: &mut String) -> Result<()> {
    let window = metrics.window.as_nanos();
    let percentiles: Vec<String> = QUANTILES
        .iter()
        .map(|q| format!("p{}(dur)", percentile(q)))
        .collect();
    let text = format!(
        "syscalls | count, {} by name last {window}ns",
        percentiles.join(", ")
    );
    let snapshot = metrics.reader.snapshot();
    let now = weft_store::now_ns();
    let lines = answer::answer(
        &snapshot,
        &metrics.dir,
        &text,
        Format::Json,
        Some(now),
        false,
    )?;
    let seconds = metrics.window.as_secs_f64();
    let _ = writeln!(
        out,
        "# HELP weft_syscall_latency_seconds Exact syscall latency quantiles over the last {seconds} s, per syscall."
    );
    out.push_str("# TYPE weft_syscall_latency_seconds gauge\n");
    let rows: Vec<serde_json::Value> = lines
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    for row in &rows {
        let name = row["name"].as_str().unwrap_or_default();
        for (quantile, column) in QUANTILES.iter().zip(&percentiles) {
            if let Some(ns) = row[column.as_str()].as_u64() {
                let _ = writeln!(
                    out,
                    "weft_syscall_latency_seconds{{syscall=\"{name}\",quantile=\"{quantile}\"}} {}",
                    ns as f64 / 1e9
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "# HELP weft_syscall_calls Syscalls made over the last {seconds} s, per syscall."
    );
    out.push_str("# TYPE weft_syscall_calls gauge\n");
    for row in &rows {
        let name = row["name"].as_str().unwrap_or_default();
        let _ = writeln!(
            out,
            "weft_syscall_calls{{syscall=\"{name}\"}} {}",
            row["count"]
        );
    }
    Ok(())
}

/// `0.999` as the query language's percentile: `99.9`.
fn percentile(quantile: &str) -> String {
    let digits = quantile.trim_start_matches("0.");
    match digits.len() {
        1 => format!("{digits}0"),
        2 => digits.to_owned(),
        _ => format!("{}.{}", &digits[..2], &digits[2..]),
    }
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn quantiles_are_the_query_languages_percentiles() {
        let names: Vec<String> = super::QUANTILES.iter().map(|q| percentile(q)).collect();
        assert_eq!(names, ["50", "90", "99", "99.9", "99.99"]);
    }
}
