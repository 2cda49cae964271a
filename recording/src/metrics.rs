//! `weft record --metrics ADDR`: the recorder's counters and live latency
//! quantiles in Prometheus's exposition formats, on `http://ADDR/metrics`, for a
//! Prometheus server to scrape:
//!
//! - `weft_records_total{source}` and `weft_lost_total{source}`: records
//!   received and lost (ring full) so far, as counters (`rate()` gives
//!   records/s);
//! - `weft_syscall_latency_seconds{syscall, quantile}` and
//!   `weft_syscall_calls{syscall}`: this host's exact quantiles and the
//!   count of each syscall's durations over the last `--metrics-window`,
//!   answered by the query `weft query --live` would answer at that
//!   instant (per host: quantiles of hosts do not combine);
//! - `weft_syscall_duration_seconds{syscall}`: each syscall's durations
//!   since the recording started as a histogram (`histogram.rs`), whose
//!   buckets sum across hosts into fleet quantiles: classic buckets in the
//!   text format, native ones too in protobuf, which a Prometheus server
//!   asks for when its native histograms are on (`exposition.rs`).
//!
//! A thread per client answers it, at most [`MAX_CLIENTS`] at once (a
//! connection past them is closed at once); a client has
//! [`CLIENT_TIMEOUT`] to send its request head of at most [`MAX_REQUEST`]
//! bytes and to take the answer, so a slow or endless client holds a slot
//! for two seconds at most and no scrape waits behind it. A query costs
//! what the same live query costs, once per scrape.

use std::{
    io::Write as _,
    net::{SocketAddr, TcpListener, TcpStream},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use crate::error::{Context as _, Result};
use weft_query::health::SourceHealth;
use weft_store::Reader;

use crate::{
    exposition::{self, Kind, MetricFamily},
    socket::{self, Slots},
};
use weft_capture::{
    answer::{self, AnswerFormat},
    open::Capture,
};

/// The quantiles each syscall's latency is given at.
const QUANTILES: [&str; 5] = ["0.5", "0.9", "0.99", "0.999", "0.9999"];

/// What a scrape reads.
pub struct Metrics {
    pub reader: Reader,
    pub capture: Capture,
    pub health: Arc<Mutex<weft_query::health::Health>>,
    /// Each syscall's latency histogram since the recording started.
    pub latencies: crate::histogram::Shared,
    pub window: Duration,
}

/// Clients answered at once.
pub const MAX_CLIENTS: usize = 8;

/// The most of a request read before its line must have ended.
pub const MAX_REQUEST: usize = 8 << 10;

/// How long a client has to send its request line, and to take the answer.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// Binds `addr` (an error when it cannot: the user asked for metrics) and
/// answers scrapes from background threads; returns the address bound.
pub fn serve(addr: SocketAddr, metrics: Metrics) -> Result<SocketAddr> {
    let listener = TcpListener::bind(addr)
        .with_context(|| format!("--metrics: failed to listen on {addr}"))?;
    let bound = listener.local_addr()?;
    let metrics = Arc::new(metrics);
    let slots = Slots::new(MAX_CLIENTS);
    std::thread::Builder::new()
        .name("weft-metrics".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let Some(slot) = slots.take() else {
                    // Full: closed at once, the scraper retries.
                    continue;
                };
                let metrics = Arc::clone(&metrics);
                // A client that misbehaves, or a thread that cannot start,
                // only loses its own answer; the slot is freed either way.
                let _ = std::thread::Builder::new()
                    .name("weft-metrics-client".into())
                    .spawn(move || {
                        let _ = answer(&stream, &metrics);
                        drop(slot);
                    });
            }
        })
        .context("failed to start the metrics thread")?;
    log::info!("weft: metrics on http://{bound}/metrics");
    Ok(bound)
}

/// Answers one HTTP request: the metrics for `GET /metrics` (in protobuf
/// when the scraper's `Accept` takes it, else text), 404 else, 400 for a
/// request head that does not end within [`MAX_REQUEST`].
fn answer(stream: &TcpStream, metrics: &Metrics) -> Result<()> {
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let head = socket::request_head(stream, MAX_REQUEST, CLIENT_TIMEOUT)?;
    let path = head
        .as_deref()
        .and_then(|head| head.split_whitespace().nth(1))
        .unwrap_or_default();
    let plain = |text: &str| (exposition::TEXT, text.as_bytes().to_vec());
    let (status, (kind, body)) = if head.is_none() {
        ("400 Bad Request", plain("the request is too long\n"))
    } else if path == "/metrics" || path.starts_with("/metrics?") {
        match families(metrics) {
            Ok(families) if head.as_deref().is_some_and(exposition::wants_protobuf) => (
                "200 OK",
                (exposition::PROTOBUF, exposition::protobuf(&families)),
            ),
            Ok(families) => ("200 OK", plain(&exposition::text(&families))),
            Err(error) => ("500 Internal Server Error", plain(&format!("{error:#}\n"))),
        }
    } else {
        ("404 Not Found", plain("weft serves /metrics only\n"))
    };
    let mut out = stream;
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    out.write_all(&body)?;
    Ok(())
}

/// The metrics, as metric families.
fn families(metrics: &Metrics) -> Result<Vec<MetricFamily>> {
    let health = metrics
        .health
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let sources = &health.sources;
    let per_source = |name: &str, help: &str, value: fn(&SourceHealth) -> u64| {
        let mut family = MetricFamily::new(name, &format!("{help}, per source."), Kind::Counter);
        for source in sources {
            family.push(&[("source", &source.name)], value(source) as f64);
        }
        family
    };
    let mut families = vec![
        per_source(
            "weft_records_total",
            "Records received from the kernel",
            |s| s.received,
        ),
        per_source(
            "weft_lost_total",
            "Records lost before weft could read them (ring full)",
            |s| s.lost,
        ),
    ];
    families.extend(latencies(metrics)?);
    families.push(
        metrics
            .latencies
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .family(),
    );
    Ok(families)
}

/// Each syscall's exact latency quantiles and count over the window.
fn latencies(metrics: &Metrics) -> Result<[MetricFamily; 2]> {
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
        &metrics.capture,
        &snapshot,
        &text,
        AnswerFormat::Json,
        Some(now),
        false,
    )?;
    let seconds = metrics.window.as_secs_f64();
    let mut quantiles = MetricFamily::new(
        "weft_syscall_latency_seconds",
        &format!(
            "This host's exact syscall latency quantiles over the last {seconds} s, per syscall: never average or sum them across hosts (use weft_syscall_duration_seconds)."
        ),
        Kind::Gauge,
    );
    let mut calls = MetricFamily::new(
        "weft_syscall_calls",
        &format!("Syscalls made over the last {seconds} s, per syscall."),
        Kind::Gauge,
    );
    for line in lines.lines() {
        let row: serde_json::Value = serde_json::from_str(line)?;
        let name = row["name"].as_str().unwrap_or_default();
        for (quantile, column) in QUANTILES.iter().zip(&percentiles) {
            if let Some(ns) = row[column.as_str()].as_u64() {
                quantiles.push(
                    &[("syscall", name), ("quantile", quantile)],
                    ns as f64 / 1e9,
                );
            }
        }
        let count = row["count"].as_u64().unwrap_or(0);
        calls.push(&[("syscall", name)], count as f64);
    }
    Ok([quantiles, calls])
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
    use std::{
        io::{Read as _, Write as _},
        path::PathBuf,
        time::Instant,
    };

    use super::*;

    /// A server of an empty store's metrics, on a free loopback port.
    fn server(name: &str) -> (SocketAddr, weft_store::Store, PathBuf) {
        let dir = std::env::temp_dir().join(format!("weft-metrics-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = weft_store::Store::open(&dir, &weft_store::Config::default()).unwrap();
        let metrics = Metrics {
            reader: store.reader(),
            capture: Capture::open(&dir).unwrap(),
            health: Arc::default(),
            latencies: Arc::default(),
            window: Duration::from_secs(1),
        };
        (
            serve("127.0.0.1:0".parse().unwrap(), metrics).unwrap(),
            store,
            dir,
        )
    }

    /// The status line of `request`'s answer, and how long it took.
    fn ask(addr: SocketAddr, request: &[u8]) -> (String, Duration) {
        let start = Instant::now();
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(request).unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let status = answer.lines().next().unwrap_or_default().to_owned();
        (status, start.elapsed())
    }

    #[test]
    fn endless_and_slow_clients_free_their_slots_in_time() {
        let (addr, store, dir) = server("slow");
        // Clients that never end their request line, more than the slots.
        let stalled: Vec<TcpStream> = (0..MAX_CLIENTS + 2)
            .map(|_| {
                let mut stream = TcpStream::connect(addr).unwrap();
                stream.write_all(b"GET /metrics").unwrap();
                stream
            })
            .collect();
        // Each gives up its slot within the timeout; a scrape then answers.
        std::thread::sleep(CLIENT_TIMEOUT + Duration::from_millis(500));
        let (status, took) = ask(addr, b"GET /nothing HTTP/1.1\r\n\r\n");
        assert_eq!(status, "HTTP/1.1 404 Not Found");
        assert!(took < Duration::from_secs(1), "{took:?}");
        // An endless line is cut at its bound, not read for ever (sent to
        // the bound exactly, so that the client reads the answer).
        let mut long = b"GET /".to_vec();
        long.resize(MAX_REQUEST, b'a');
        let (status, _) = ask(addr, &long);
        assert_eq!(status, "HTTP/1.1 400 Bad Request");
        // So are endless headers after a whole request line.
        let mut headers = b"GET /metrics HTTP/1.1\r\n".to_vec();
        while headers.len() < MAX_REQUEST {
            headers.extend_from_slice(b"X-Padding: aaaaaaaa\r\n");
        }
        headers.truncate(MAX_REQUEST);
        let (status, _) = ask(addr, &headers);
        assert_eq!(status, "HTTP/1.1 400 Bad Request");
        drop(stalled);
        store.close().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn quantiles_are_the_query_languages_percentiles() {
        let names: Vec<String> = super::QUANTILES.iter().map(|q| percentile(q)).collect();
        assert_eq!(names, ["50", "90", "99", "99.9", "99.99"]);
    }
}
