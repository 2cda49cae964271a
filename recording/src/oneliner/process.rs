//! The process a one-liner follows and ends with: the `-c` command it
//! runs, or the `-p` process it watches.

use std::{
    ffi::CString,
    os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd},
};

use crate::error::{Context as _, Result, bail};

/// What the program ends with, besides Ctrl-C and `exit()`.
pub enum Process {
    /// `-c`: the command weft runs.
    Command(HeldChild),
    /// `-p`: a process that was already running.
    Watched(Watched),
}

impl Process {
    /// The `-c` command's pid, for `cpid`; 0 without one.
    pub fn cpid(&self) -> u32 {
        match self {
            Self::Command(child) => child.id(),
            Self::Watched(_) => 0,
        }
    }

    /// Lets the command run, now that the probes are attached.
    pub fn release(&self) {
        if let Self::Command(child) = self {
            child.release();
        }
    }

    /// Whether the process has ended.
    pub fn ended(&mut self) -> bool {
        match self {
            Self::Command(child) => child.exited(),
            Self::Watched(watched) => watched.ended(),
        }
    }
}

/// A running process that weft did not start (`-p PID`), held by a pidfd,
/// which stays that process's even if its pid is used again.
pub struct Watched {
    pidfd: OwnedFd,
}

impl Watched {
    pub fn open(pid: u32) -> Result<Self> {
        let pid =
            (libc::pid_t::try_from(pid).ok()).with_context(|| format!("-p {pid}: not a pid"))?;
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::ESRCH) {
                bail!("-p {pid}: no such process");
            }
            return Err(error).with_context(|| format!("-p {pid}: pidfd_open failed"));
        }
        // SAFETY: the syscall returned a new fd that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
        Ok(Self { pidfd })
    }

    /// Whether the process has exited: its pidfd reads ready then.
    fn ended(&self) -> bool {
        let mut poll = libc::pollfd {
            fd: self.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one fd we own, without waiting.
        unsafe { libc::poll(&raw mut poll, 1, 0) > 0 }
    }
}

/// The `-c` command: forked, stopped before it execs until
/// [`HeldChild::release`], so its pid is known before the probes attach and
/// every event of the command comes after.
pub struct HeldChild {
    pid: libc::pid_t,
    exited: bool,
}

impl HeldChild {
    /// Forks a child that stops itself, then execs `command` (split on
    /// blanks, like bpftrace's -c); waits until it is stopped.
    pub fn spawn(command: &str) -> Result<Self> {
        let words: Vec<&str> = command.split_whitespace().collect();
        Self::spawn_words(&words, false)
    }

    /// As [`HeldChild::spawn`], the program and its arguments apart; with
    /// `quiet`, its stdin is `/dev/null` and its stdout goes where weft's
    /// stderr goes (the terminal UI's log), off the terminal.
    pub fn spawn_words(words: &[&str], quiet: bool) -> Result<Self> {
        let command = words.join(" ");
        let program = executable(words.first().context("-c needs a command")?)?;
        let words = words
            .iter()
            .map(|w| CString::new(*w))
            .collect::<Result<Vec<_>, _>>()
            .ok()
            .context("-c: a word holds a NUL byte")?;
        let mut argv: Vec<*const libc::c_char> = words.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let dev_null = c"/dev/null";
        // SAFETY: the child only calls async-signal-safe functions (open,
        // dup2, close, raise, execv, _exit) on memory prepared before the
        // fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(std::io::Error::last_os_error()).context("fork failed");
        }
        if pid == 0 {
            // SAFETY: see above.
            unsafe {
                if quiet {
                    let null = libc::open(dev_null.as_ptr(), libc::O_RDONLY);
                    if null >= 0 {
                        libc::dup2(null, 0);
                        libc::close(null);
                    }
                    libc::dup2(2, 1);
                }
                libc::raise(libc::SIGSTOP);
                libc::execv(program.as_ptr(), argv.as_ptr());
                libc::_exit(127);
            }
        }
        let mut status = 0;
        // SAFETY: waits for our own child to stop; WUNTRACED does not reap it.
        let rc = unsafe { libc::waitpid(pid, &raw mut status, libc::WUNTRACED) };
        if rc != pid || !libc::WIFSTOPPED(status) {
            bail!("`{command}` did not start");
        }
        Ok(Self { pid, exited: false })
    }

    pub fn id(&self) -> u32 {
        self.pid.cast_unsigned()
    }

    /// Lets the command run.
    pub fn release(&self) {
        // SAFETY: signals our own child.
        unsafe { libc::kill(self.pid, libc::SIGCONT) };
    }

    /// Whether the command has exited (reaping it when it has).
    fn exited(&mut self) -> bool {
        let mut status = 0;
        // SAFETY: polls our own child without blocking.
        if !self.exited
            && unsafe { libc::waitpid(self.pid, &raw mut status, libc::WNOHANG) } == self.pid
        {
            self.exited = libc::WIFEXITED(status) || libc::WIFSIGNALED(status);
        }
        self.exited
    }
}

impl HeldChild {
    /// Waits until the command has exited, and reaps it.
    pub fn wait(&mut self) {
        while !self.exited {
            let mut status = 0;
            // SAFETY: waits for our own child.
            let rc = unsafe { libc::waitpid(self.pid, &raw mut status, 0) };
            self.exited = if rc == self.pid {
                libc::WIFEXITED(status) || libc::WIFSIGNALED(status)
            } else {
                // Interrupted, or no such child left to wait for.
                std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR)
            };
        }
    }
}

impl Drop for HeldChild {
    /// Kills the command if it still runs, and reaps it: on every way out,
    /// errors included, so no stopped child is left holding weft's pipes.
    fn drop(&mut self) {
        if !self.exited() {
            // SAFETY: signals and reaps our own child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// The path of `program` as execvp would find it, checked before the fork.
fn executable(program: &str) -> Result<CString> {
    use std::os::unix::fs::PermissionsExt as _;
    let runnable = |p: &std::path::Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let path = if program.contains('/') {
        Some(std::path::PathBuf::from(program)).filter(|p| runnable(p))
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(program))
                .find(|p| runnable(p))
        })
    };
    let path =
        path.with_context(|| format!("-c: `{program}` is not an executable file or in PATH"))?;
    CString::new(path.into_os_string().into_encoded_bytes())
        .ok()
        .context("-c: the path holds a NUL byte")
}
