//! weft's Unix sockets live in `/run/weft`: created here, stale ones (left
//! by a killed weft) replaced, and removed when dropped. And what each of
//! weft's servers (these and `--metrics`) does against its own clients:
//! [`Slots`] bound the clients served at once, [`request_line`] bounds what
//! one may send and how long it may take.

use std::{
    fs::{self, DirBuilder},
    io::{self, Read},
    net::TcpStream,
    os::unix::{
        fs::{DirBuilderExt as _, PermissionsExt as _},
        net::{UnixListener, UnixStream},
    },
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use crate::error::{Context as _, Result};

/// A bound socket's path; the file is removed on drop.
pub struct Bound {
    path: PathBuf,
}

impl Drop for Bound {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Listens at `path`, mode 0600, or 0660 with group `gid`. `None` when a
/// live weft already listens there. The directory is root's, and
/// traversable by others only when a group is allowed in.
pub fn bind(path: &Path, gid: Option<u32>) -> Result<Option<(UnixListener, Bound)>> {
    let parent = path.parent().context("socket path has a parent")?;
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(parent)
        .with_context(|| format!("failed to create {}", parent.display()))?;
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Ok(None);
        }
        let _ = fs::remove_file(path);
    }
    let listener = UnixListener::bind(path)
        .with_context(|| format!("failed to listen on {}", path.display()))?;
    let bound = Bound {
        path: path.to_owned(),
    };
    let mode = if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid))
            .with_context(|| format!("failed to give {} to group {gid}", path.display()))?;
        fs::set_permissions(parent, fs::Permissions::from_mode(0o711))?;
        0o660
    } else {
        0o600
    };
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("failed to restrict {}", path.display()))?;
    Ok(Some((listener, bound)))
}

/// At most so many clients served at once.
#[derive(Clone)]
pub struct Slots {
    taken: Arc<AtomicUsize>,
    max: usize,
}

/// One client's place among [`Slots`], freed when dropped.
pub struct Slot(Arc<AtomicUsize>);

impl Slots {
    pub fn new(max: usize) -> Self {
        Self {
            taken: Arc::default(),
            max,
        }
    }

    /// A slot, or `None` when all are taken (the caller closes the client).
    pub fn take(&self) -> Option<Slot> {
        let free = self.taken.fetch_add(1, Ordering::AcqRel) < self.max;
        let slot = Slot(Arc::clone(&self.taken));
        free.then_some(slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A stream whose reads can time out: TCP and Unix sockets.
pub trait Timed {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
}

impl Timed for TcpStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
}

impl Timed for UnixStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, timeout)
    }
}

/// A request's first line (without its newline), read within `timeout` in
/// all (not per read: a client sending a byte a second is cut off too);
/// `None` when it reaches `max` bytes unended. Nothing after the line is
/// read: a request is its first line.
pub fn request_line<S: Timed>(
    stream: &S,
    max: usize,
    timeout: Duration,
) -> io::Result<Option<String>>
where
    for<'a> &'a S: Read,
{
    let line = read_until(stream, max, timeout, |read| read.ends_with(b"\n"))?;
    Ok(line.map(|line| {
        String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(&line)).into_owned()
    }))
}

/// An HTTP request's head (its request line and headers, up to the empty
/// line that ends them), read as [`request_line`] reads a line: within
/// `timeout` in all, `None` when it reaches `max` bytes unended.
pub fn request_head<S: Timed>(
    stream: &S,
    max: usize,
    timeout: Duration,
) -> io::Result<Option<String>>
where
    for<'a> &'a S: Read,
{
    let ended = |read: &[u8]| read.ends_with(b"\n\n") || read.ends_with(b"\n\r\n");
    let head = read_until(stream, max, timeout, ended)?;
    Ok(head.map(|head| String::from_utf8_lossy(&head).into_owned()))
}

/// Bytes read until `ended` says so or the stream ends, within `timeout`
/// in all; `None` when `max` bytes came first.
fn read_until<S: Timed>(
    stream: &S,
    max: usize,
    timeout: Duration,
    ended: impl Fn(&[u8]) -> bool,
) -> io::Result<Option<Vec<u8>>>
where
    for<'a> &'a S: Read,
{
    let deadline = Instant::now() + timeout;
    let mut read = Vec::new();
    let mut byte = [0u8; 1];
    // A byte at a time, so that nothing after the end is taken from the
    // stream; requests are a few hundred bytes.
    while read.len() < max {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        if (&mut &*stream).read(&mut byte)? == 0 {
            return Ok(Some(read));
        }
        read.push(byte[0]);
        if ended(&read) {
            return Ok(Some(read));
        }
    }
    Ok(None)
}
