//! The text protocol between a program and weft's agent, owned here and
//! read by the agent (`weft-recording`'s `app`): one line per message,
//! over a Unix socket.
//!
//! ```text
//! source NAME FIELD[:KIND] ...    KIND: int (the default), duration (ns), time (CLOCK_MONOTONIC ns),
//!                                 trace_id or span_id (a W3C trace context's ids)
//! record NAME VALUE ...           one integer per field (decimal, or 0x and up to 16 hex
//!                                 digits), two for a trace_id (its high 64 bits, then its low)
//! dropped N                       N more records the client dropped (the agent counts them)
//! sync                            the agent answers `ok N`: records accepted so far
//! ```
//!
//! A line the agent cannot accept is answered `error LINE: why`, and the
//! agent closes the connection.

use std::{borrow::Cow, fmt};

/// Where `weft record --sources app` listens.
pub const SOCKET: &str = "/run/weft/app.sock";

/// Fields per source, at most.
pub const MAX_FIELDS: usize = 32;

/// What a field's integers mean, so that queries show them right.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A plain integer (an id, a count, a size).
    Int,
    /// Nanoseconds of duration.
    Duration,
    /// A `CLOCK_MONOTONIC` time in nanoseconds.
    Time,
    /// A W3C trace id (`traceparent`'s 128 bits): two values in a record,
    /// its high 64 bits and its low ([`trace_id`]). Shown as 32 hex digits.
    TraceId,
    /// A W3C span (parent) id, 64 bits ([`span_id`]). Shown as 16 hex digits.
    SpanId,
}

impl Kind {
    /// The kind's word in a `source` line.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Int => "int",
            Self::Duration => "duration",
            Self::Time => "time",
            Self::TraceId => "trace_id",
            Self::SpanId => "span_id",
        }
    }

    /// The kind `word` names.
    #[must_use]
    pub fn parse(word: &str) -> Option<Self> {
        [
            Self::Int,
            Self::Duration,
            Self::Time,
            Self::TraceId,
            Self::SpanId,
        ]
        .into_iter()
        .find(|kind| kind.name() == word)
    }

    /// The values a field of this kind takes in a record.
    #[must_use]
    pub fn values(self) -> usize {
        match self {
            Self::TraceId => 2,
            _ => 1,
        }
    }
}

/// A W3C trace id, 32 hex digits not all zero, as a record's two values
/// for a [`Kind::TraceId`] field.
#[must_use]
pub fn trace_id(hex: &str) -> Option<[i64; 2]> {
    let id = u128::from_str_radix(hex, 16).ok().filter(|id| *id != 0);
    let id = id.filter(|_| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))?;
    Some([((id >> 64) as u64).cast_signed(), (id as u64).cast_signed()])
}

/// A W3C span id, 16 hex digits not all zero, as a record's value for a
/// [`Kind::SpanId`] field.
#[must_use]
pub fn span_id(hex: &str) -> Option<i64> {
    let id = u64::from_str_radix(hex, 16).ok().filter(|id| *id != 0);
    id.filter(|_| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(u64::cast_signed)
}

/// The trace id and the parent (span) id of a W3C `traceparent` header
/// (`00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01`), as
/// [`trace_id`] and [`span_id`] give them.
#[must_use]
pub fn traceparent(header: &str) -> Option<([i64; 2], i64)> {
    let mut parts = header.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    // Version ff is invalid; later versions may add parts after these four.
    let version_ok =
        version.len() == 2 && version != "ff" && u8::from_str_radix(version, 16).is_ok();
    let flags_ok = flags.len() == 2 && u8::from_str_radix(flags, 16).is_ok();
    if !version_ok || !flags_ok || (version == "00" && parts.next().is_some()) {
        return None;
    }
    Some((trace_id(trace)?, span_id(span)?))
}

/// A record's value: a decimal integer, or `0x` and 1 to 16 hex digits
/// (the 64 bits as they are, as an id's are written).
fn value(word: &str) -> Option<i64> {
    match word.strip_prefix("0x") {
        Some(hex) if (1..=16).contains(&hex.len()) => {
            u64::from_str_radix(hex, 16).ok().map(u64::cast_signed)
        }
        Some(_) => None,
        None => word.parse().ok(),
    }
}

/// A line a program sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// A source and its fields; declaring it again with the same fields is
    /// allowed.
    Source {
        name: &'a str,
        fields: Vec<(&'a str, Kind)>,
    },
    /// A record of a declared source, one value per field.
    Record {
        name: &'a str,
        values: Cow<'a, [i64]>,
    },
    /// Records the client dropped since it last said so.
    Dropped(u64),
    /// Asks for the count of records accepted so far.
    Sync,
}

impl<'a> Request<'a> {
    /// The message `line` (without its newline) is, or why it is none: a
    /// name of other characters than `a-z`, `0-9` and `_`, an unknown kind,
    /// a value that is no integer, an unknown first word.
    ///
    /// # Errors
    /// Why the line is no message, in words for the sender.
    pub fn parse(line: &'a str) -> Result<Self, String> {
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "sync" if rest.is_empty() => Ok(Self::Sync),
            "source" => source(rest),
            "record" => {
                let mut words = rest.split(' ');
                let name = words.next().unwrap_or_default();
                let values = words
                    .map(|w| value(w).ok_or_else(|| format!("`{w}` is not an integer")))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Self::Record {
                    name,
                    values: values.into(),
                })
            }
            "dropped" => rest
                .parse()
                .map(Self::Dropped)
                .map_err(|_| format!("`dropped` takes a count, not `{rest}`")),
            word => Err(format!(
                "unknown message `{word}` (source, record, dropped or sync)"
            )),
        }
    }
}

/// A `source` line's name and fields, checked.
fn source(rest: &str) -> Result<Request<'_>, String> {
    let mut words = rest.split(' ');
    let name = words.next().unwrap_or_default();
    check_name("source", name)?;
    let fields = words
        .map(|word| {
            let (field, kind) = word.split_once(':').unwrap_or((word, "int"));
            check_name("field", field)?;
            let kind = Kind::parse(kind).ok_or_else(|| {
                format!(
                    "field {field}: kind `{kind}` is not int, duration, time, trace_id or span_id"
                )
            })?;
            Ok((field, kind))
        })
        .collect::<Result<Vec<_>, String>>()?;
    if fields.is_empty() || fields.len() > MAX_FIELDS {
        return Err(format!("a source has 1 to {MAX_FIELDS} fields"));
    }
    if let Some((i, (field, _))) = (fields.iter().enumerate())
        .find(|(i, (field, _))| fields[..*i].iter().any(|(f, _)| f == field))
    {
        return Err(format!("field {field} is declared twice (field {})", i + 1));
    }
    Ok(Request::Source { name, fields })
}

/// Names of sources and fields: 1 to 32 of `a-z`, `0-9` and `_`, starting
/// with a letter.
fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what} name `{name}`: use 1 to 32 of a-z, 0-9 and _, starting with a letter"
        ))
    }
}

impl fmt::Display for Request<'_> {
    /// The line, without its newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Source { name, fields } => {
                write!(f, "source {name}")?;
                fields
                    .iter()
                    .try_for_each(|(field, kind)| write!(f, " {field}:{}", kind.name()))
            }
            Self::Record { name, values } => {
                write!(f, "record {name}")?;
                values.iter().try_for_each(|value| write!(f, " {value}"))
            }
            Self::Dropped(n) => write!(f, "dropped {n}"),
            Self::Sync => f.write_str("sync"),
        }
    }
}

/// The agent's answer to a `sync` (`ok N`), or to a line it rejected
/// (`error LINE: why`, 1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Accepted(u64),
    Rejected(String),
}

impl Answer {
    /// The answer `line` (without its newline) is; anything else is a
    /// rejection saying so.
    #[must_use]
    pub fn parse(line: &str) -> Self {
        if let Some(count) = line.strip_prefix("ok ") {
            return count.parse().map_or_else(
                |_| Self::Rejected(format!("weft answered `{line}`")),
                Self::Accepted,
            );
        }
        let message = line.strip_prefix("error ").unwrap_or(line);
        Self::Rejected(if message.is_empty() {
            "weft closed the connection".to_owned()
        } else {
            message.to_owned()
        })
    }

    /// The answer to line `number` (1-based) rejected for `why`.
    #[must_use]
    pub fn rejected(number: u64, why: &str) -> Self {
        Self::Rejected(format!("{number}: {why}"))
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Accepted(n) => write!(f, "ok {n}"),
            Self::Rejected(why) => write!(f, "error {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_reads_back_as_written() {
        let requests = [
            Request::Source {
                name: "requests",
                fields: vec![
                    ("id", Kind::Int),
                    ("latency", Kind::Duration),
                    ("at", Kind::Time),
                ],
            },
            Request::Record {
                name: "requests",
                values: vec![42, -1, i64::MAX].into(),
            },
            Request::Dropped(7),
            Request::Sync,
        ];
        for request in requests {
            let line = request.to_string();
            assert_eq!(Request::parse(&line), Ok(request), "{line}");
        }
        for answer in [Answer::Accepted(3), Answer::rejected(2, "why")] {
            assert_eq!(Answer::parse(&answer.to_string()), answer);
        }
    }

    #[test]
    fn w3c_ids_are_a_record_s_values() {
        let header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let (trace, span) = traceparent(header).unwrap();
        assert_eq!(trace, trace_id("4bf92f3577b34da6a3ce929d0e0e4736").unwrap());
        assert_eq!(
            (trace[0].cast_unsigned(), trace[1].cast_unsigned()),
            (0x4bf9_2f35_77b3_4da6, 0xa3ce_929d_0e0e_4736)
        );
        assert_eq!(span, 0x00f0_67aa_0ba9_02b7);
        // Ids of all zeros are invalid, as are other lengths and versions.
        assert_eq!(trace_id(&"0".repeat(32)), None);
        assert_eq!(span_id("00f067aa0ba902b"), None);
        assert_eq!(
            traceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            None
        );
        // A record carries them as written: high, low, span, in hex or not.
        let line = "record req 0x4bf92f3577b34da6 0xa3ce929d0e0e4736 0x00f067aa0ba902b7";
        let Ok(Request::Record { values, .. }) = Request::parse(line) else {
            panic!("{line}");
        };
        assert_eq!(*values, [trace[0], trace[1], span]);
        assert_eq!(Kind::parse("trace_id").map(Kind::values), Some(2));
    }

    #[test]
    fn bad_lines_say_why() {
        let why = |line| Request::parse(line).unwrap_err();
        assert!(why("source Req x").contains("source name `Req`"));
        assert!(why("source req x:float").contains("kind `float`"));
        assert!(why("source req x x").contains("declared twice"));
        assert!(why("source req").contains("1 to 32 fields"));
        assert!(why("record req 1 two").contains("`two` is not an integer"));
        assert!(why("record req 0x10000000000000000").contains("is not an integer"));
        assert!(why("dropped many").contains("takes a count"));
        assert!(why("hello").contains("unknown message `hello`"));
        assert_eq!(
            Request::parse("source req id"),
            Ok(Request::Source {
                name: "req",
                fields: vec![("id", Kind::Int)],
            })
        );
    }
}
