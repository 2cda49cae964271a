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
}

impl Type {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Int => "an integer",
            Self::Str => "a string",
            Self::Tuple(_) => "a tuple",
        }
    }
}

/// A value of the language; map keys are lists of these.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Value {
    Int(i64),
    Str(String),
    Tuple(Vec<Value>),
}

impl Value {
    /// The integer a value stands for where one is wanted: a string is
    /// true when not empty. (The checker lets no tuple get here.)
    pub(crate) fn int(&self) -> i64 {
        match self {
            Self::Int(n) => *n,
            Self::Str(s) => i64::from(!s.is_empty()),
            Self::Tuple(_) => 0,
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
        }
    }
}

/// Bytes up to the first NUL, as text: a task name or a string the
/// kernel read.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}
