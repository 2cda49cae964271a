//! The PT capture crate's one error type.

use std::{io, path::PathBuf};

use crate::{caps::Unsupported, window::PlanError};

/// What taking, saving or decoding a PT capture can fail with. The message
/// is the whole line a user sees, with what went wrong under it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// This CPU or VM has no Intel PT weft can use.
    #[error(transparent)]
    Unsupported(#[from] Unsupported),
    /// The window asked for does not fit the hardware or its limits.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The context-switch source did not load.
    #[error(transparent)]
    Kernel(#[from] weft_kernel::error::Error),
    /// A file could not be read, created or written.
    #[error("{doing} {}: {error}", .path.display())]
    File {
        doing: &'static str,
        path: PathBuf,
        error: io::Error,
    },
    /// A system call on the traced CPUs or process failed.
    #[error("{doing}: {error}")]
    Io { doing: String, error: io::Error },
    /// A capture directory, perf.data file or memory map holds what weft
    /// does not read there: where and what.
    #[error("{0}")]
    Damaged(String),
    /// A perf.data file the decoder cannot read.
    #[error("{path}: {error}")]
    Perf {
        path: String,
        error: weft_pt::perf_data::PerfError,
    },
    /// A code file or memory map the decoder cannot use.
    #[error("{0}")]
    Image(#[from] weft_pt::image::ImageError),
    /// What was asked cannot be decoded as given: the code not named, a
    /// trace without what it needs.
    #[error("{0}")]
    Refused(String),
    /// Writing a decoded step out failed.
    #[error(transparent)]
    Write(io::Error),
}

/// A PT capture result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A file's error, for `map_err`.
    pub(crate) fn file(
        doing: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(io::Error) -> Self {
        move |error| Self::File {
            doing,
            path: path.to_owned(),
            error,
        }
    }
}

/// `return Err(Error::Refused(..))` from a format string.
macro_rules! refuse {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Refused(format!($($arg)*)))
    };
}
pub(crate) use refuse;
