//! A shared mapping of a file descriptor's memory: what the kernel shares
//! with weft (a BPF ring buffer's pages, an mmapable BPF array, a perf
//! event's buffers), unmapped when dropped. Every such mapping in weft is
//! one of these.

use std::{io, os::fd::RawFd, ptr::NonNull, sync::atomic::AtomicU64};

/// `len` bytes of `fd` from `offset`, shared with the kernel.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
}

// SAFETY: the mapping is plain shared memory; the words the kernel and
// weft both write are accessed atomically.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` at `offset`, readable, and writable when
    /// `writable`.
    ///
    /// # Errors
    /// What `mmap` says (the kernel checks the length, offset and
    /// protection against what the descriptor allows).
    pub fn shared(fd: RawFd, len: usize, offset: usize, writable: bool) -> io::Result<Self> {
        let prot = libc::PROT_READ | if writable { libc::PROT_WRITE } else { 0 };
        let offset = libc::off_t::try_from(offset).map_err(io::Error::other)?;
        // SAFETY: a fresh shared mapping of the descriptor; checked below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd,
                offset,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(Self { ptr, len, writable })
    }

    /// The values of an mmapable BPF array (`fd`), `bytes` of them: the
    /// kernel rounds each value up to 8 bytes, and the mapping to whole
    /// pages, and checks its length against the array's.
    ///
    /// # Errors
    /// What `mmap` says.
    pub fn array(fd: RawFd, bytes: usize, writable: bool) -> io::Result<Self> {
        Self::shared(fd, bytes.next_multiple_of(page_size()?), 0, writable)
    }

    /// The first byte (page-aligned).
    #[must_use]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Bytes mapped.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is mapped (never: `mmap` refuses a length of 0).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether weft may write it.
    #[must_use]
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The bytes, as the kernel last wrote them.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `len` bytes are mapped for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The 64-bit word at `offset`, shared with the kernel.
    ///
    /// # Panics
    /// When `offset` is not 8-aligned or the word is not inside.
    #[must_use]
    #[allow(
        clippy::cast_ptr_alignment,
        reason = "the mapping is page-aligned and the offset a multiple of 8"
    )]
    pub fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset + 8 <= self.len && offset.is_multiple_of(8));
        // SAFETY: in bounds and aligned (the mapping is page-aligned).
        unsafe { &*self.ptr.as_ptr().add(offset).cast::<AtomicU64>() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping what `shared` mapped, once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The system's page size.
///
/// # Errors
/// When `sysconf` gives none.
pub fn page_size() -> io::Result<usize> {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .map_err(|_| io::Error::other("no page size"))
}
