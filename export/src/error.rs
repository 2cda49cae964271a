//! The export crate's one error type.

use std::{io, path::PathBuf};

/// What an export can fail with; the message is the whole line a user
/// sees, with the error it wraps (as the store's and the capture's are).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The capture could not be opened or read as a capture, or the
    /// export's query does not fit it.
    #[error(transparent)]
    Capture(#[from] weft_capture::Error),
    /// The export's options do not fit together, or the capture has no
    /// records of the kind the format writes.
    #[error("{0}")]
    Refused(String),
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
}

/// `Err(Error::Refused(..))` from a format string.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Refused(format!($($arg)*)))
    };
}
pub(crate) use refuse;
