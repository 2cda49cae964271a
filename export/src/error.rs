//! The export crate's one error type.

use std::{io, path::PathBuf};

/// What an export can fail with; the message is the whole line a user
/// sees, with the error it wraps (as the store's and the capture's are).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The capture could not be opened or read as a capture.
    #[error(transparent)]
    Capture(#[from] weft_capture::Error),
    /// The export's options do not fit together, or the capture has no
    /// records of the kind the format writes.
    #[error("{0}")]
    Refused(String),
    /// The export's query does not parse or does not fit the capture,
    /// rendered with the place it went wrong.
    #[error("{0}")]
    Query(String),
    /// The store failed while the export's query read the capture.
    #[error("failed to read {}: {error}", .dir.display())]
    Read {
        dir: PathBuf,
        error: weft_query::Error,
    },
    /// Writing an output file failed.
    #[error("failed to write {}: {error}", .path.display())]
    Write { path: PathBuf, error: Box<Error> },
    /// Creating or renaming an output file or directory failed.
    #[error("{doing} {}: {error}", .path.display())]
    File {
        doing: &'static str,
        path: PathBuf,
        error: io::Error,
    },
    /// Putting a finished file in place failed.
    #[error("failed to rename {} to {}: {error}", .from.display(), .to.display())]
    Rename {
        from: PathBuf,
        to: PathBuf,
        error: io::Error,
    },
    /// A store read outside a query failed.
    #[error(transparent)]
    Store(#[from] weft_store::Error),
    /// A write to an output failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The Parquet writer failed.
    #[error(transparent)]
    Parquet(#[from] parquet::errors::ParquetError),
}

/// An export's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps `self` as the failure to write `path`.
    pub(crate) fn writing(self, path: &std::path::Path) -> Self {
        Self::Write {
            path: path.to_owned(),
            error: Box::new(self),
        }
    }

    /// A query's error: rendered under its text, or a read of capture `dir`.
    pub(crate) fn of_query(error: weft_query::Error, text: &str, dir: &std::path::Path) -> Self {
        match error {
            weft_query::Error::Query { .. } => Self::Query(error.render(text)),
            error => Self::Read {
                dir: dir.to_owned(),
                error,
            },
        }
    }
}

/// `Err(Error::Refused(..))` from a format string.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Refused(format!($($arg)*)))
    };
}
pub(crate) use refuse;
