//! The recording crate's one error type, and the context its calls add.

use std::io;

/// What a recording, a one-liner's run, `stat` or the live sockets can
/// fail with. The message is the whole line a user sees; [`Error::kernel`]
/// finds the kernel's own error under any context, for the binary's exit
/// status.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Loading, attaching or reading the eBPF programs failed.
    #[error(transparent)]
    Kernel(#[from] weft_kernel::error::Error),
    /// The capture could not be read or written as a capture.
    #[error(transparent)]
    Capture(#[from] weft_capture::Error),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] weft_store::Error),
    /// The peer channel failed.
    #[error(transparent)]
    Peer(#[from] weft_peer::Error),
    /// A one-liner, a trigger or a query that does not parse or check,
    /// rendered under its text.
    #[error("{0}")]
    Program(String),
    /// What was asked cannot be done: a process that is not there, a
    /// group, a socket another weft holds.
    #[error("{0}")]
    Invalid(String),
    /// A system call failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// An Intel PT capture or its decoding failed: the binary's PT crates,
    /// which recording does not link, say what.
    #[error("{0}")]
    Pt(String),
    /// A message on a socket that is not the JSON it must be.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// `error` met while weft was `doing` something larger.
    #[error("{doing}: {error}")]
    While { doing: String, error: Box<Error> },
}

/// A recording result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The kernel's error under every context, where the kernel failed.
    pub fn kernel(&self) -> Option<&weft_kernel::error::Error> {
        match self {
            Self::Kernel(error) => Some(error),
            Self::While { error, .. } => error.kernel(),
            _ => None,
        }
    }

    /// `self`, met while weft was `doing` something larger.
    #[must_use]
    pub fn within(self, doing: impl Into<String>) -> Self {
        Self::While {
            doing: doing.into(),
            error: Box::new(self),
        }
    }
}

/// What weft was doing when a call failed, or what it found missing.
pub(crate) trait Context<T> {
    fn context(self, doing: &str) -> Result<T>;
    fn with_context<S: Into<String>>(self, doing: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, doing: &str) -> Result<T> {
        self.with_context(|| doing)
    }

    fn with_context<S: Into<String>>(self, doing: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|error| error.into().within(doing()))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, missing: &str) -> Result<T> {
        self.with_context(|| missing)
    }

    fn with_context<S: Into<String>>(self, missing: impl FnOnce() -> S) -> Result<T> {
        self.ok_or_else(|| Error::Invalid(missing().into()))
    }
}

/// `return Err(Error::Invalid(..))` from a format string.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Invalid(format!($($arg)*)))
    };
}
pub(crate) use bail;
