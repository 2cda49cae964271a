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
//! The protocol is text lines over a Unix socket (`/run/weft/app.sock`,
//! root-only unless the agent allows a group):
//!
//! ```text
//! source NAME FIELD:KIND ...      KIND: int, duration (ns) or time (CLOCK_MONOTONIC ns)
//! record NAME VALUE ...           one integer per field
//! sync                            the agent answers `ok N`: records accepted so far
//! ```
//!
//! A line the agent cannot accept gets `error LINE: why` and the connection
//! is closed; `sync` (and the next write) then fail with that message.
//! Records are buffered: call [`Client::sync`] to know they arrived.

use std::{
    io::{self, BufRead as _, BufReader, BufWriter, Write as _},
    os::unix::net::UnixStream,
    path::Path,
};

/// Where `weft record --sources app` listens.
pub const SOCKET: &str = "/run/weft/app.sock";

/// What a field's integers mean, so that queries show them right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A plain integer (an id, a count, a size).
    Int,
    /// Nanoseconds of duration.
    Duration,
    /// A `CLOCK_MONOTONIC` time in nanoseconds.
    Time,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Int => "int",
            Self::Duration => "duration",
            Self::Time => "time",
        }
    }
}

/// A connection to the agent.
pub struct Client {
    writer: BufWriter<UnixStream>,
    reader: BufReader<UnixStream>,
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
        let stream = UnixStream::connect(path)?;
        Ok(Self {
            reader: BufReader::new(stream.try_clone()?),
            writer: BufWriter::new(stream),
        })
    }

    /// Declares source `name` with its fields (names of lower-case letters,
    /// digits and `_`). Declaring it again with the same fields is allowed.
    ///
    /// # Errors
    /// When the connection fails; a rejected declaration shows at [`Client::sync`].
    pub fn define(&mut self, name: &str, fields: &[(&str, Kind)]) -> io::Result<()> {
        write!(self.writer, "source {name}")?;
        for (field, kind) in fields {
            write!(self.writer, " {field}:{}", kind.name())?;
        }
        writeln!(self.writer)
    }

    /// Sends one record of source `name`, one value per declared field.
    ///
    /// # Errors
    /// When the connection fails; a rejected record shows at [`Client::sync`].
    pub fn push(&mut self, name: &str, values: &[i64]) -> io::Result<()> {
        write!(self.writer, "record {name}")?;
        for value in values {
            write!(self.writer, " {value}")?;
        }
        writeln!(self.writer)
    }

    /// Sends everything buffered and waits for the agent's count of records
    /// accepted on this connection so far.
    ///
    /// # Errors
    /// The agent's message when it rejected a line, or the connection's error.
    pub fn sync(&mut self) -> io::Result<u64> {
        writeln!(self.writer, "sync")?;
        self.writer.flush()?;
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let line = line.trim_end();
        if let Some(count) = line.strip_prefix("ok ") {
            return count
                .parse()
                .map_err(|_| io::Error::other(format!("weft answered `{line}`")));
        }
        let message = line.strip_prefix("error ").unwrap_or(line);
        let message = if message.is_empty() {
            "weft closed the connection"
        } else {
            message
        };
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            message.to_owned(),
        ))
    }
}
