//! The kernel crate's one error type, and the context its calls add.

use std::io;

/// What loading, attaching or reading weft's eBPF programs can fail with.
/// The message is the whole line a user sees, with what went wrong under
/// it; [`Error::needs_root`] and [`Error::kernel_refused`] tell the binary
/// which exit status to give.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// This process lacks the privileges to trace: root, or `CAP_BPF` and
    /// `CAP_PERFMON`.
    #[error("{0}")]
    NeedsRoot(&'static str),
    /// A call into the kernel failed: `doing` says what weft was at.
    #[error("{}", line(.doing, .cause))]
    Kernel { doing: String, cause: Box<Cause> },
    /// Something the object, the kernel or the machine does not have: a
    /// program or map of the object, a PMU, a tracepoint's field.
    #[error("{0}")]
    Missing(String),
    /// What was asked cannot be done here: an interface that is not there,
    /// a source this kernel cannot give.
    #[error("{0}")]
    Invalid(String),
    /// A function a probe names is not in the kernel (a module not loaded,
    /// or one it cannot probe) or in the file's symbol tables.
    #[error("{place} has no function {function} to probe")]
    NoFunction {
        /// `the kernel`, or the file's path.
        place: String,
        function: String,
    },
    /// A one-liner's plan does not fit the kernel's configuration.
    #[error(transparent)]
    TooLarge(#[from] weft_oneliner::check::lower::TooLarge),
    /// `error` met while weft was `doing` something larger.
    #[error("{doing}: {error}")]
    While { doing: String, error: Box<Error> },
}

/// What the kernel (or aya on its behalf) said.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Cause {
    #[error(transparent)]
    Ebpf(#[from] aya::EbpfError),
    #[error(transparent)]
    Program(#[from] aya::programs::ProgramError),
    #[error(transparent)]
    Map(#[from] aya::maps::MapError),
    #[error(transparent)]
    Btf(#[from] aya::BtfError),
    #[error(transparent)]
    Log(#[from] aya_log::Error),
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(transparent)]
    Syscall(#[from] aya::sys::SyscallError),
    #[error(transparent)]
    Pin(#[from] aya::pin::PinError),
    #[error(transparent)]
    Symbols(#[from] weft_symbols::Error),
}

/// A kernel crate result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error under every `While`.
    pub fn innermost(&self) -> &Self {
        match self {
            Self::While { error, .. } => error.innermost(),
            other => other,
        }
    }

    /// Whether this process lacks the privileges to trace.
    pub fn needs_root(&self) -> bool {
        matches!(self.innermost(), Self::NeedsRoot(_))
    }

    /// The `errno` the kernel answered with, where a system call failed.
    pub fn raw_os_error(&self) -> Option<i32> {
        let Self::Kernel { cause, .. } = self.innermost() else {
            return None;
        };
        let mut next = Some(cause.inner());
        while let Some(error) = next {
            if let Some(errno) = error
                .downcast_ref::<io::Error>()
                .and_then(io::Error::raw_os_error)
            {
                return Some(errno);
            }
            next = error.source();
        }
        None
    }

    /// Whether the kernel refused what weft asked of it: a program its
    /// verifier rejects, a map or probe it does not create or attach.
    pub fn kernel_refused(&self) -> bool {
        let Self::Kernel { cause, .. } = self.innermost() else {
            return false;
        };
        matches!(
            **cause,
            Cause::Ebpf(_) | Cause::Program(_) | Cause::Map(_) | Cause::Btf(_)
        )
    }
}

impl Cause {
    /// The error it holds (`transparent` hands on that error's source, not
    /// the error itself).
    fn inner(&self) -> &(dyn std::error::Error + 'static) {
        match self {
            Self::Ebpf(error) => error,
            Self::Program(error) => error,
            Self::Map(error) => error,
            Self::Btf(error) => error,
            Self::Log(error) => error,
            Self::Io(error) => error,
            Self::Syscall(error) => error,
            Self::Pin(error) => error,
            Self::Symbols(error) => error,
        }
    }
}

impl<E: Into<Cause>> From<E> for Error {
    fn from(cause: E) -> Self {
        Self::Kernel {
            doing: String::new(),
            cause: Box::new(cause.into()),
        }
    }
}

/// `doing: cause`, the cause with every error under it (aya's errors wrap
/// the system call's).
fn line(doing: &str, cause: &Cause) -> String {
    let mut line = doing.to_owned();
    let mut next: Option<&dyn std::error::Error> = Some(cause);
    while let Some(error) = next {
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&error.to_string());
        next = error.source();
    }
    line
}

/// What weft was doing when a call failed, or what it found missing: the
/// kernel crate's counterpart of `anyhow::Context`, which keeps the
/// error's kind.
pub(crate) trait Context<T> {
    fn context(self, doing: &str) -> Result<T>;
    fn with_context<S: Into<String>>(self, doing: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: Into<Cause>> Context<T> for std::result::Result<T, E> {
    fn context(self, doing: &str) -> Result<T> {
        self.with_context(|| doing)
    }

    fn with_context<S: Into<String>>(self, doing: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|cause| Error::Kernel {
            doing: doing().into(),
            cause: Box::new(cause.into()),
        })
    }
}

impl<T> Context<T> for Result<T> {
    fn context(self, doing: &str) -> Result<T> {
        self.with_context(|| doing)
    }

    fn with_context<S: Into<String>>(self, doing: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|error| Error::While {
            doing: doing().into(),
            error: Box::new(error),
        })
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, missing: &str) -> Result<T> {
        self.with_context(|| missing)
    }

    fn with_context<S: Into<String>>(self, missing: impl FnOnce() -> S) -> Result<T> {
        self.ok_or_else(|| Error::Missing(missing().into()))
    }
}

/// `return Err(Error::Invalid(..))` from a format string.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::Error::Invalid(format!($($arg)*)))
    };
}
pub(crate) use bail;

#[cfg(test)]
mod tests {
    use super::*;

    /// The binary's exit status rests on these: privileges, the kernel's
    /// refusals, and everything else told apart.
    #[test]
    fn errors_say_what_they_are() {
        let root = Error::NeedsRoot("needs root");
        assert!(root.needs_root() && !root.kernel_refused());
        let refused: Result<()> = Err(aya::programs::ProgramError::NotLoaded).context("attaching");
        let refused = refused.unwrap_err();
        assert!(refused.kernel_refused() && !refused.needs_root());
        assert!(refused.to_string().starts_with("attaching: "), "{refused}");
        let io: Result<()> = Err(io::Error::from_raw_os_error(libc::ENOENT)).context("reading");
        assert!(!io.unwrap_err().kernel_refused());
        // The kprobe PMU's answer for a function the kernel lacks, under
        // the attach's context: the one-liner leaves that attach point out.
        let open: Result<()> =
            Err(io::Error::from_raw_os_error(libc::ENOENT)).context("perf_event_open failed");
        let attach = open.context("failed to attach kprobe:f").unwrap_err();
        assert_eq!(attach.raw_os_error(), Some(libc::ENOENT));
        let syscall = aya::programs::ProgramError::SyscallError(aya::sys::SyscallError {
            call: "perf_event_open",
            io_error: io::Error::from_raw_os_error(libc::EINVAL),
        });
        let syscall: Result<()> = Err(syscall).context("attaching");
        assert_eq!(syscall.unwrap_err().raw_os_error(), Some(libc::EINVAL));
        let missing = None::<u32>.context("the probe has no pid map").unwrap_err();
        assert_eq!(missing.to_string(), "the probe has no pid map");
        assert!(!missing.needs_root() && !missing.kernel_refused());
    }
}
