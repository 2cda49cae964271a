//! The text protocol between a program and weft's agent, owned here and
//! read by the agent (`weft-recording`'s `app`): one line per message,
//! over a Unix socket.
//!
//! ```text
//! source NAME FIELD[:KIND] ...    KIND: int (the default), duration (ns) or time (CLOCK_MONOTONIC ns)
//! record NAME VALUE ...           one integer per field
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
}

impl Kind {
    /// The kind's word in a `source` line.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Int => "int",
            Self::Duration => "duration",
            Self::Time => "time",
        }
    }

    /// The kind `word` names.
    #[must_use]
    pub fn parse(word: &str) -> Option<Self> {
        [Self::Int, Self::Duration, Self::Time]
            .into_iter()
            .find(|kind| kind.name() == word)
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
                    .map(|w| w.parse().map_err(|_| format!("`{w}` is not an integer")))
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
                format!("field {field}: kind `{kind}` is not int, duration or time")
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
    fn bad_lines_say_why() {
        let why = |line| Request::parse(line).unwrap_err();
        assert!(why("source Req x").contains("source name `Req`"));
        assert!(why("source req x:float").contains("kind `float`"));
        assert!(why("source req x x").contains("declared twice"));
        assert!(why("source req").contains("1 to 32 fields"));
        assert!(why("record req 1 two").contains("`two` is not an integer"));
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
