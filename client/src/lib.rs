//! Push your program's own records into a running `weft record --sources app`:
//! a request id and its latency, a queue depth, anything made of integers.
//! They become a source like weft's own, queried and correlated the same way
//! (`weft query DIR 'requests | p99(latency)'`).
//!
//! Depends on nothing, not even weft's other crates: applications link it.
//!
//! ```no_run
//! use weft_client::{Client, Kind};
//! let mut weft = Client::connect()?;
//! weft.define("requests", &[("id", Kind::Int), ("latency", Kind::Duration)])?;
//! weft.push("requests", &[42, 1_250_000])?;
//! assert_eq!(weft.sync()?, 1); // the agent has accepted one record
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A request's W3C trace context links its record to the tracing UI that
//! shows its spans: a `trace_id` field takes the trace id's two halves,
//! a `span_id` field the span id ([`traceparent`] reads both from the
//! header).
//!
//! ```no_run
//! use weft_client::{Client, Kind, traceparent};
//! let mut weft = Client::connect()?;
//! let fields = [("latency", Kind::Duration), ("trace", Kind::TraceId), ("span", Kind::SpanId)];
//! weft.define("requests", &fields)?;
//! let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
//! if let Some(([high, low], span)) = traceparent(header) {
//!     weft.push("requests", &[1_250_000, high, low, span])?;
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The protocol is text lines over a Unix socket (`/run/weft/app.sock`,
//! root-only unless the agent allows a group), defined in [`protocol`]. A
//! line the agent cannot accept gets `error LINE: why` and the connection
//! is closed; `sync` (and the next push) then fail with that message.
//!
//! [`Client::push`] never blocks the application, as OpenTelemetry's SDKs
//! do not: records go to a bounded queue that a thread of the client's own
//! writes to the socket, and a record that finds the queue full (weft
//! lagging, or not reading) is dropped and counted ([`Client::dropped`]);
//! the count reaches the agent too, which reports it as the source's loss.
//! [`Client::push_wait`] waits for room instead. Call [`Client::sync`] to
//! know the records arrived.

pub mod protocol;

use std::{
    io::{self, BufRead as _, BufReader, BufWriter, Write as _},
    os::unix::net::UnixStream,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel},
    },
    time::Duration,
};

use protocol::{Answer, Request};
pub use protocol::{Kind, SOCKET, span_id, trace_id, traceparent};

/// Records the queue holds by default before [`Client::push`] drops.
pub const QUEUE: usize = 1 << 16;

/// How long dropping a [`Client`] waits for its queue to be sent.
const LINGER: Duration = Duration::from_secs(1);

/// What the application hands the writer thread.
enum Line {
    /// A line to send as it is.
    Text(String),
    /// Send everything, then `sync`, and answer here.
    Sync(SyncSender<io::Result<u64>>),
}

/// A connection to the agent.
pub struct Client {
    queue: Option<SyncSender<Line>>,
    /// Disconnected once the writer thread has ended.
    writer_done: Receiver<()>,
    dropped: Arc<AtomicU64>,
    /// Why the connection failed, once it has.
    failed: Arc<Mutex<Option<String>>>,
}

impl Client {
    /// Connects to the agent at [`SOCKET`].
    ///
    /// # Errors
    /// When no agent listens there, or this process may not connect.
    pub fn connect() -> io::Result<Self> {
        Self::connect_to(SOCKET)
    }

    /// Connects to the agent listening at `path`.
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub fn connect_to(path: impl AsRef<Path>) -> io::Result<Self> {
        Self::with_queue(path, QUEUE)
    }

    /// Connects to the agent at `path`, with room for `records` records
    /// (at least one) waiting to be written.
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub fn with_queue(path: impl AsRef<Path>, records: usize) -> io::Result<Self> {
        let stream = UnixStream::connect(path)?;
        let reader = BufReader::new(stream.try_clone()?);
        let (queue, lines) = sync_channel(records.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(Mutex::new(None));
        let (done, writer_done) = sync_channel(0);
        {
            let (dropped, failed) = (dropped.clone(), failed.clone());
            std::thread::Builder::new()
                .name("weft-client".into())
                .spawn(move || {
                    let _done: SyncSender<()> = done;
                    write_lines(&lines, stream, reader, &dropped, &failed);
                })?;
        }
        Ok(Self {
            queue: Some(queue),
            writer_done,
            dropped,
            failed,
        })
    }

    /// Declares source `name` with its fields (names of lower-case letters,
    /// digits and `_`). Declaring it again with the same fields is allowed.
    /// Waits for room in the queue: a declaration is never dropped.
    ///
    /// # Errors
    /// When the connection has failed; a rejected declaration shows at
    /// [`Client::sync`].
    pub fn define(&mut self, name: &str, fields: &[(&str, Kind)]) -> io::Result<()> {
        let fields = fields.to_vec();
        self.send(Line::Text(Request::Source { name, fields }.to_string()))
    }

    /// Queues one record of source `name`, one value per declared field,
    /// without waiting: when the queue is full the record is dropped and
    /// counted.
    ///
    /// # Errors
    /// When the connection has failed; a rejected record shows at
    /// [`Client::sync`].
    pub fn push(&mut self, name: &str, values: &[i64]) -> io::Result<()> {
        let queue = self.queue()?;
        match queue.try_send(Line::Text(record(name, values))) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(TrySendError::Disconnected(_)) => Err(self.failure()),
        }
    }

    /// As [`Client::push`], but waits for room rather than dropping.
    ///
    /// # Errors
    /// As [`Client::push`].
    pub fn push_wait(&mut self, name: &str, values: &[i64]) -> io::Result<()> {
        self.send(Line::Text(record(name, values)))
    }

    /// Records [`Client::push`] dropped so far because the queue was full.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Sends everything queued and waits for the agent's count of records
    /// accepted on this connection so far.
    ///
    /// # Errors
    /// The agent's message when it rejected a line, or the connection's error.
    pub fn sync(&mut self) -> io::Result<u64> {
        let (answer, answered) = sync_channel(1);
        self.send(Line::Sync(answer))?;
        answered.recv().map_err(|_| self.failure())?
    }

    fn send(&self, line: Line) -> io::Result<()> {
        self.queue()?.send(line).map_err(|_| self.failure())
    }

    fn queue(&self) -> io::Result<&SyncSender<Line>> {
        match (&self.queue, self.failed.lock().ok().and_then(|f| f.clone())) {
            (Some(queue), None) => Ok(queue),
            _ => Err(self.failure()),
        }
    }

    /// Why the writer stopped.
    fn failure(&self) -> io::Error {
        let why = self.failed.lock().ok().and_then(|f| f.clone());
        io::Error::new(
            io::ErrorKind::BrokenPipe,
            why.unwrap_or_else(|| "weft closed the connection".to_owned()),
        )
    }
}

impl Drop for Client {
    /// Lets the writer send what is queued, waiting for it at most
    /// [`LINGER`]: an agent that reads nothing must not hold the
    /// application at its exit either.
    fn drop(&mut self) {
        self.queue = None;
        let _ = self.writer_done.recv_timeout(LINGER);
    }
}

fn record(name: &str, values: &[i64]) -> String {
    let values = values.into();
    Request::Record { name, values }.to_string()
}

/// The writer thread: sends each line, flushing whenever the queue runs
/// dry, and tells the agent of the records dropped since it last did.
fn write_lines(
    lines: &Receiver<Line>,
    stream: UnixStream,
    mut reader: BufReader<UnixStream>,
    dropped: &AtomicU64,
    failed: &Mutex<Option<String>>,
) {
    let mut out = BufWriter::new(stream);
    let mut told = 0;
    let fail = |why: String| {
        if let Ok(mut failed) = failed.lock() {
            failed.get_or_insert(why);
        }
    };
    // A write fails once the agent has closed the connection, which it
    // does after answering a bad line: its answer says why.
    let why = |error: io::Error, reader: &mut BufReader<UnixStream>| match read_count(reader) {
        Err(answer) if answer.kind() == io::ErrorKind::InvalidData => answer,
        _ => error,
    };
    loop {
        let line = match lines.try_recv() {
            Ok(line) => line,
            Err(TryRecvError::Empty) => {
                if let Err(error) = out.flush() {
                    return fail(why(error, &mut reader).to_string());
                }
                match lines.recv() {
                    Ok(line) => line,
                    Err(_) => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        let now = dropped.load(Ordering::Relaxed);
        if now > told && writeln!(out, "{}", Request::Dropped(now - told)).is_ok() {
            told = now;
        }
        let sent = match line {
            Line::Text(text) => writeln!(out, "{text}"),
            Line::Sync(answer) => {
                let result = match writeln!(out, "{}", Request::Sync).and_then(|()| out.flush()) {
                    Ok(()) => read_count(&mut reader),
                    Err(error) => Err(why(error, &mut reader)),
                };
                if let Err(error) = &result {
                    fail(error.to_string());
                }
                let _ = answer.send(result);
                continue;
            }
        };
        if let Err(error) = sent {
            return fail(why(error, &mut reader).to_string());
        }
    }
    let now = dropped.load(Ordering::Relaxed);
    if now > told {
        let _ = writeln!(out, "{}", Request::Dropped(now - told));
    }
    let _ = out.flush();
}

/// The agent's answer to `sync`.
fn read_count(reader: &mut BufReader<UnixStream>) -> io::Result<u64> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    match Answer::parse(line.trim_end()) {
        Answer::Accepted(count) => Ok(count),
        Answer::Rejected(why) => Err(io::Error::new(io::ErrorKind::InvalidData, why)),
    }
}

#[cfg(test)]
mod tests {
    use std::{
        io::{BufRead as _, BufReader, Write as _},
        os::unix::net::UnixListener,
        sync::mpsc,
        thread::JoinHandle,
        time::Instant,
    };

    use super::*;

    /// A stand-in agent at a fresh path: it reads nothing until `go`
    /// fires, then counts records and `dropped` lines and answers `sync`.
    fn agent() -> (std::path::PathBuf, mpsc::Sender<()>, JoinHandle<(u64, u64)>) {
        let path = std::env::temp_dir().join(format!(
            "weft-client-test-{}-{:?}.sock",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        let (go, wait) = mpsc::channel();
        let agent = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            wait.recv().unwrap();
            let (mut records, mut dropped) = (0, 0);
            let mut out = &stream;
            for line in BufReader::new(&stream).lines().map_while(Result::ok) {
                if line.starts_with("record ") {
                    records += 1;
                } else if let Some(n) = line.strip_prefix("dropped ") {
                    dropped += n.parse::<u64>().unwrap();
                } else if line == "sync" {
                    writeln!(out, "ok {records}").unwrap();
                }
            }
            (records, dropped)
        });
        (path, go, agent)
    }

    #[test]
    fn a_lagging_agent_never_blocks_push_and_every_drop_is_counted_and_told() {
        let (path, go, agent) = agent();
        let mut client = Client::with_queue(&path, 1000).unwrap();
        client.define("requests", &[("id", Kind::Int)]).unwrap();
        let pushed = 200_000;
        let started = Instant::now();
        for id in 0..pushed {
            client.push("requests", &[id]).unwrap();
        }
        // The agent reads nothing yet: the socket's buffer and the queue
        // fill, and push drops instead of waiting.
        let took = started.elapsed();
        assert!(took < Duration::from_secs(2), "push waited: {took:?}");
        let dropped = client.dropped();
        assert!(dropped > 0, "nothing was dropped");
        go.send(()).unwrap();
        let accepted = client.sync().unwrap();
        assert_eq!(accepted + dropped, pushed.unsigned_abs());
        drop(client);
        let (records, told) = agent.join().unwrap();
        assert_eq!((records, told), (accepted, dropped));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn dropping_the_client_waits_at_most_a_second_for_an_agent_that_reads_nothing() {
        let (path, go, agent) = agent();
        let mut client = Client::with_queue(&path, 1000).unwrap();
        for id in 0..200_000 {
            client.push("requests", &[id]).unwrap();
        }
        let started = Instant::now();
        drop(client);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(3), "drop waited {took:?}");
        go.send(()).unwrap();
        let _ = agent.join();
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn the_agent_s_refusal_is_the_error_sync_returns() {
        let path =
            std::env::temp_dir().join(format!("weft-client-refuse-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        let agent = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(&stream).read_line(&mut line).unwrap();
            writeln!(
                &mut &stream,
                "error 1: source `x` was not declared on this connection"
            )
            .unwrap();
        });
        let mut client = Client::connect_to(&path).unwrap();
        client.push_wait("x", &[1]).unwrap();
        agent.join().unwrap();
        let error = client.sync().unwrap_err();
        assert!(error.to_string().contains("was not declared"), "{error}");
        assert!(
            client.push("x", &[2]).is_err(),
            "a failed connection stays failed"
        );
        let _ = std::fs::remove_file(&path);
    }
}
