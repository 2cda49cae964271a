//! The one error type of the crate. Errors in the query text carry the span
//! of the offending token so the caller can point at it with a caret.

use std::fmt::Write as _;

/// A byte range of the query text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// Byte offset of the first character.
    pub start: usize,
    /// Length in bytes (at least 1 when shown).
    pub len: usize,
}

impl Span {
    /// The span of `len` bytes from `start`.
    pub fn new(start: usize, len: usize) -> Self {
        Self { start, len }
    }

    /// The smallest span covering both.
    #[must_use]
    pub fn to(self, other: Span) -> Span {
        let end = (other.start + other.len).max(self.start + self.len);
        Span::new(self.start, end - self.start)
    }
}

/// What went wrong with a query.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The text is not a valid query, or names something that does not exist.
    #[error("at {}: {message}", span.start)]
    Query {
        /// Where in the text.
        span: Span,
        /// What was wrong, and what was expected.
        message: String,
    },
    /// A host of a fleet query could not answer, or answered what does
    /// not fit the others' answers.
    #[error("host {host}: {message}")]
    Host {
        /// The host's name (a capture directory or a peer address).
        host: String,
        /// What went wrong.
        message: String,
    },
    /// The capture could not answer.
    #[error(transparent)]
    Store(#[from] weft_store::Error),
}

impl Error {
    /// A query error at `len` bytes from `start`.
    pub fn at(start: usize, len: usize, message: impl Into<String>) -> Self {
        Self::Query {
            span: Span::new(start, len),
            message: message.into(),
        }
    }

    /// A query error over `span`.
    pub fn spanned(span: Span, message: impl Into<String>) -> Self {
        Self::Query {
            span,
            message: message.into(),
        }
    }

    /// The message with the query text and a caret line under the
    /// offending token, for people.
    pub fn render(&self, text: &str) -> String {
        let Self::Query { span, message } = self else {
            return self.to_string();
        };
        let start = span.start.min(text.len());
        let width = text[start..].chars().take(span.len.max(1)).count().max(1);
        let mut out = format!("{message}\n  {text}\n  ");
        let _ = write!(
            out,
            "{}{}",
            " ".repeat(text[..start].chars().count()),
            "^".repeat(width)
        );
        out
    }
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_points_at_the_token() {
        let e = Error::at(15, 4, "unknown field `durr`");
        assert_eq!(
            e.render("syscalls where durr > 1"),
            "unknown field `durr`\n  syscalls where durr > 1\n                 ^^^^"
        );
    }

    #[test]
    fn render_at_end_shows_one_caret() {
        let e = Error::at(8, 0, "expected a field");
        assert_eq!(
            e.render("a where "),
            "expected a field\n  a where \n          ^"
        );
    }
}
