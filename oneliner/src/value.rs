//! The language's values and their types: [`Type`] is what the checker
//! infers, [`Value`] what the runtime holds and prints.

/// The value types of the language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Int,
    Str,
}

impl Type {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Int => "an integer",
            Self::Str => "a string",
        }
    }
}

/// A value of the language; map keys are lists of these.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    Int(i64),
    Str(String),
}

impl Value {
    pub(crate) fn int(&self) -> i64 {
        match self {
            Self::Int(n) => *n,
            Self::Str(s) => i64::from(!s.is_empty()),
        }
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
        }
    }
}

/// Bytes up to the first NUL, as text: a task name or a string the
/// kernel read.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
