//! The capture crate's one error type.

use std::{io, path::PathBuf};

/// What reading a capture, answering from it or writing one can fail with.
///
/// Each variant's message is the whole line a user sees: an error it wraps
/// is in the message, not a `source`, as the store's are, so that every
/// way of printing it (a log line, a UI, a reply to a peer) says it all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store of a capture directory could not be opened.
    #[error("failed to open {}: {error}", .dir.display())]
    Open {
        dir: PathBuf,
        error: weft_store::Error,
    },
    /// The store of a capture being written failed to close.
    #[error("failed to finish the capture: {0}")]
    Finish(weft_store::Error),
    /// A store operation on an open capture failed.
    #[error(transparent)]
    Store(#[from] weft_store::Error),
    /// A file weft reads or writes failed; `doing` says what weft was at
    /// ("failed to write").
    #[error("{doing} {}: {error}", .path.display())]
    File {
        doing: &'static str,
        path: PathBuf,
        error: io::Error,
    },
    /// A system call on something other than a named file failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// `weft.json` or a fleet message is not what weft wrote: `what` says
    /// which and how.
    #[error("{what}: {error}")]
    Json {
        what: String,
        error: serde_json::Error,
    },
    /// A capture that is damaged or not a capture.
    #[error("{0}")]
    Damaged(String),
    /// A query that does not parse or does not fit the capture, rendered
    /// with the place it went wrong.
    #[error("{0}")]
    Query(String),
    /// A query the store could not answer from a capture.
    #[error("failed to query {}: {error}", .dir.display())]
    Answer {
        dir: PathBuf,
        error: weft_query::Error,
    },
    /// A query over a fleet's hosts failed on a host or between them.
    #[error(transparent)]
    Fleet(weft_query::Error),
    /// What was asked of a capture is not in it or not possible: a firing
    /// it does not hold, a flag that does not fit, a directory in the way.
    #[error("{0}")]
    Refused(String),
}

/// A capture operation's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A query error as a user sees it: a syntax or binding error
    /// rendered under the query's text, anything else with the capture.
    pub fn of_query(error: weft_query::Error, query: &str, dir: &std::path::Path) -> Self {
        match error {
            weft_query::Error::Query { .. } => Self::Query(error.render(query)),
            error => Self::Answer {
                dir: dir.to_owned(),
                error,
            },
        }
    }
}

/// `Err(Error::Refused(..))` from a format string, as `anyhow::bail!` was.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Refused(format!($($arg)*)))
    };
}
pub(crate) use refuse;
