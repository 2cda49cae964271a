//! The page cache source: pages added to and removed from the page cache,
//! and pages looked up by reads, per file (device, inode) and thread. Hits
//! are lookups minus adds: a cold read adds every page it looks up, a warm
//! one adds none.

use crate::events::Header;

/// Pages of one file added, removed or looked up.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageCacheEvent {
    /// Source and CPU.
    pub header: Header,
    /// Current thread (for removals, whoever evicts or truncates).
    pub tid: u32,
    /// Its thread group id.
    pub pid: u32,
    /// `CLOCK_MONOTONIC` time, in ns.
    pub ts_ns: u64,
    /// The file's inode number.
    pub ino: u64,
    /// First page index in the file.
    pub index: u64,
    /// The file system's device, as the kernel's `dev_t` (major << 20 | minor).
    pub dev: u32,
    /// Pages added, removed or looked up.
    pub pages: u32,
    /// An [`Op`] value.
    pub op: u32,
    /// Zero.
    pub pad: u32,
}

/// Size of a [`PageCacheEvent`] record.
pub const EVENT_SIZE: usize = 56;
const _: () = assert!(core::mem::size_of::<PageCacheEvent>() == EVENT_SIZE);

impl PageCacheEvent {
    /// The record at the start of `bytes` as the kernel wrote it; `None`
    /// when too short.
    #[must_use]
    pub fn read(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..EVENT_SIZE)?;
        // SAFETY: EVENT_SIZE readable bytes; every bit pattern is a valid
        // PageCacheEvent (plain integers), and the read is unaligned.
        Some(unsafe { bytes.as_ptr().cast::<Self>().read_unaligned() })
    }
}

/// What happened to the pages.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Added to the cache (a miss being filled, or a write of a new page).
    Add = 1,
    /// Removed from the cache (eviction, truncation).
    Delete = 2,
    /// Looked up by a read: the pages the read asked for.
    Lookup = 3,
}

/// A thread's last read lookup; a read larger than one batch looks up the
/// rest of its range again, and only its first lookup counts.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LastLookup {
    /// Inode of the file.
    pub ino: u64,
    /// First page of the lookup.
    pub index: u64,
    /// Last page of the lookup (the read's last page).
    pub last_index: u64,
    /// Device of the file.
    pub dev: u32,
    /// Zero.
    pub pad: u32,
}

#[cfg(feature = "pod")]
mod user {
    // SAFETY: `#[repr(C)]`, `Copy`, integers only, no padding holes.
    unsafe impl aya::Pod for super::PageCacheEvent {}
}
