//! Errors in a program's text carry the span of the offending token, so the
//! caller can print the line with a caret under it.

/// A byte range of the program text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// Byte offset of the first character.
    pub start: usize,
    /// Length in bytes (at least one caret is shown).
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

/// What is wrong with a program, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// Where in the text.
    pub span: Span,
    /// What was wrong, and what was expected.
    pub message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at {}: {}", self.span.start, self.message)
    }
}

impl std::error::Error for Error {}

impl Error {
    /// An error over `span`.
    pub fn new(span: Span, message: impl Into<String>) -> Self {
        Self {
            span,
            message: message.into(),
        }
    }

    /// The message, then the line of `text` holding the error with carets
    /// under the offending token (a multi-line program shows its line number).
    pub fn render(&self, text: &str) -> String {
        let start = self.span.start.min(text.len());
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line = &text[line_start..line_end];
        let column = text[line_start..start].chars().count();
        let width = text[start..line_end]
            .chars()
            .take(self.span.len.max(1))
            .count()
            .max(1);
        let number = text[..line_start].matches('\n').count() + 1;
        let prefix = if text.contains('\n') {
            format!("line {number}: ")
        } else {
            String::new()
        };
        format!(
            "{}\n  {prefix}{line}\n  {}{}",
            self.message,
            " ".repeat(prefix.chars().count() + column),
            "^".repeat(width)
        )
    }
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caret_under_the_token() {
        let e = Error::new(Span::new(8, 3), "unknown builtin `pdi`");
        assert_eq!(
            e.render("BEGIN { pdi }"),
            "unknown builtin `pdi`\n  BEGIN { pdi }\n          ^^^"
        );
    }

    #[test]
    fn multi_line_programs_name_the_line() {
        let e = Error::new(Span::new(12, 1), "expected `;`");
        assert_eq!(
            e.render("BEGIN {\n  x y\n}"),
            "expected `;`\n  line 2:   x y\n              ^"
        );
    }
}
