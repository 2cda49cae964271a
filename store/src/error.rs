//! The store's one error type.

use std::{io, path::PathBuf};

/// Everything a store operation can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call on a store file failed.
    #[error("{call} {path}: {error}")]
    Io {
        /// The call, e.g. `write` or `fsync`.
        call: &'static str,
        /// The file it was made on.
        path: PathBuf,
        /// What the kernel said (in the message, not as a `source`, so an
        /// error chain does not print it twice).
        error: io::Error,
    },
    /// A path weft refuses to use: a link inside a capture, a file that is
    /// not a regular file, a directory another user may write to.
    #[error("{path} {what}")]
    Unsafe {
        /// The path.
        path: PathBuf,
        /// Why it is refused, and what to do.
        what: String,
    },
    /// A file's bytes are not what the format says they must be.
    #[error("{path} at offset {offset}: {what}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the bad part (a line number for `meta`).
        offset: u64,
        /// What is wrong there.
        what: String,
    },
    /// A capture that closed cleanly is not whole: what recovery would cut
    /// from a crashed capture's tail.
    #[error("{dir} closed cleanly but is damaged: {what}")]
    Damaged {
        /// The capture directory.
        dir: PathBuf,
        /// The first damage found: file, offset, what.
        what: String,
    },
    /// A file was written by a newer (or unknown) format version.
    #[error("{path}: format version {version} is not supported (this build reads versions 1 to 5)")]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version byte found.
        version: u8,
    },
    /// A record does not fit in one chunk.
    #[error("a record of {size} bytes does not fit a {block_size}-byte chunk")]
    RecordTooLarge {
        /// The payload's size.
        size: usize,
        /// The store's chunk size.
        block_size: u32,
    },
    /// A source or index id that was never defined.
    #[error("unknown {what} {id}")]
    Unknown {
        /// `source` or `index`.
        what: &'static str,
        /// The id asked for.
        id: u32,
    },
    /// Bad arguments to a definition or query.
    #[error("{0}")]
    Invalid(String),
    /// An earlier write failed; the store refuses further writes.
    #[error("the store is poisoned by an earlier write failure: {0}")]
    Poisoned(String),
    /// The data asked for was deleted by the disk budget.
    #[error("chunk {chunk} was deleted by the disk budget")]
    Expired {
        /// The chunk asked for.
        chunk: u64,
    },
}

/// `Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps an `io::Error` with the call and the path.
pub fn io<'a>(
    call: &'static str,
    path: &'a std::path::Path,
) -> impl FnOnce(io::Error) -> Error + 'a {
    move |error| Error::Io {
        call,
        path: path.to_owned(),
        error,
    }
}
