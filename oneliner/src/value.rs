//! The language's values and their types: [`Type`] is what the checker
//! infers, [`Value`] what the runtime holds and prints.

/// The value types of the language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Int,
    Str,
    /// `(1, "a")`: the checker's tuple type of this number, which lists
    /// its elements' types (equal numbers, equal types).
    Tuple(u16),
    /// An array of this many bytes (`pton("10.0.0.1")`: 4).
    Bytes(u8),
    /// A struct or an array read whole, by the checker's number for its
    /// layout (equal numbers, equal layouts).
    Composite(u16),
}

impl Type {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Int => "an integer",
            Self::Str => "a string",
            Self::Tuple(_) => "a tuple",
            Self::Bytes(_) => "an array of bytes",
            Self::Composite(_) => "a struct or array",
        }
    }
}

/// A value of the language; map keys are lists of these.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    Int(i64),
    Str(String),
    Tuple(Vec<Value>),
    /// An array of bytes, printed as bpftrace prints one: `[10,0,0,1]`.
    Bytes(Vec<u8>),
    /// `buf()`'s bytes, which print as `%r` prints them (`ab\x00`); the
    /// checker types them as strings.
    Buf(Vec<u8>),
    /// An array read whole: `[1,2,3]`.
    Array(Vec<Value>),
    /// A struct read whole, its members in order: `{ .a = 1, .b = 2 }`.
    Record(Vec<(String, Value)>),
}

impl Value {
    /// The integer a value stands for where one is wanted: a string is
    /// true when not empty. (The checker lets no tuple get here.)
    pub(crate) fn int(&self) -> i64 {
        match self {
            Self::Int(n) => *n,
            Self::Str(s) => i64::from(!s.is_empty()),
            Self::Tuple(_) | Self::Bytes(_) | Self::Buf(_) | Self::Array(_) | Self::Record(_) => 0,
        }
    }

    /// As bpftrace prints it in a map's key: a struct without spaces
    /// (`{.m=2,.n=[1,2]}`).
    pub(crate) fn key_text(&self) -> String {
        match self {
            Self::Record(members) => {
                let members: Vec<String> = (members.iter())
                    .map(|(name, value)| format!(".{name}={}", value.key_text()))
                    .collect();
                format!("{{{}}}", members.join(","))
            }
            Self::Array(elements) => {
                let elements: Vec<String> = elements.iter().map(Self::key_text).collect();
                format!("[{}]", elements.join(","))
            }
            other => other.to_string(),
        }
    }

    /// An integer, which maps print as numbers (signed or not); any other
    /// value prints as it is.
    pub(crate) fn is_int(&self) -> bool {
        matches!(self, Self::Int(_))
    }

    pub(crate) fn truthy(&self) -> bool {
        self.int() != 0
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(n) => write!(f, "{n}"),
            Self::Str(s) => f.write_str(s),
            // As bpftrace prints one: `(1, abc, (2, 3))`.
            Self::Tuple(elements) => {
                f.write_str("(")?;
                for (i, element) in elements.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{element}")?;
                }
                f.write_str(")")
            }
            Self::Bytes(bytes) => {
                let bytes: Vec<String> = bytes.iter().map(u8::to_string).collect();
                write!(f, "[{}]", bytes.join(","))
            }
            Self::Buf(bytes) => f.write_str(&crate::format::escaped(bytes)),
            Self::Array(elements) => {
                let elements: Vec<String> = elements.iter().map(ToString::to_string).collect();
                write!(f, "[{}]", elements.join(","))
            }
            Self::Record(members) => {
                let members: Vec<String> = (members.iter())
                    .map(|(name, value)| format!(".{name} = {value}"))
                    .collect();
                write!(f, "{{ {} }}", members.join(", "))
            }
        }
    }
}

/// Bytes up to the first NUL, as text: a task name or a string the
/// kernel read, with control characters escaped (`\u{1b}`, `\r`) but for
/// newlines and tabs. They come from traced programs, which may put
/// anything there, and a terminal escape in one must not reach the
/// terminal of whoever runs the one-liner (bpftrace prints them all raw);
/// a newline or a tab moves the cursor as text does, and the data a
/// program writes (`str(args.buf, args.count)` of a `write`) holds them.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    let text = String::from_utf8_lossy(&bytes[..end]);
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return text.into_owned();
    }
    text.chars()
        .map(|c| match c {
            c if unsafe_char(c) => c.escape_default().to_string(),
            c => c.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_from_traced_programs_reach_the_terminal_with_control_characters_escaped() {
        assert_eq!(c_string(b"bash\0junk"), "bash");
        assert_eq!(
            c_string(b"evil\x1b]0;owned\x07\0"),
            "evil\\u{1b}]0;owned\\u{7}"
        );
        assert_eq!(c_string(b"two\nlines\tand\r"), "two\nlines\tand\\r");
        // The C1 control sequence introducer, as UTF-8 and as a lone byte.
        assert_eq!(c_string(b"\xc2\x9b31m"), "\\u{9b}31m");
        assert_eq!(c_string(b"\x9b31m"), "\u{fffd}31m");
    }
}
