//! The block I/O source: one record per completed request, with its device,
//! sector, size, operation and latency from issue to completion.
//!
//! The kernel side pairs `block:block_rq_issue` with `block:block_rq_complete`
//! by (device, sector, operation), as the tracepoints offer no request
//! pointer. A request issued while an identical one is in flight is counted
//! as `TableFull` and not recorded, rather than mispaired.

use crate::events::Header;

/// One completed block request.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockEvent {
    /// Source and CPU.
    pub header: Header,
    /// Thread that issued it (often a kernel worker for buffered writes).
    pub tid: u32,
    /// Its thread group id.
    pub pid: u32,
    /// `CLOCK_MONOTONIC` time of completion, in ns.
    pub ts_ns: u64,
    /// Time from issue to completion, in ns.
    pub latency_ns: u64,
    /// First sector (512 bytes each).
    pub sector: u64,
    /// Device, as the kernel's `dev_t`: major << 20 | minor.
    pub dev: u32,
    /// Bytes requested.
    pub bytes: u32,
    /// An [`Op`] value.
    pub op: u32,
    /// 0, or the negative errno the request completed with.
    pub error: i32,
}

/// Size of a [`BlockEvent`] record.
pub const EVENT_SIZE: usize = 56;
const _: () = assert!(core::mem::size_of::<BlockEvent>() == EVENT_SIZE);

impl BlockEvent {
    /// The record at the start of `bytes` as the kernel wrote it; `None`
    /// when too short.
    #[must_use]
    pub fn read(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..EVENT_SIZE)?;
        // SAFETY: EVENT_SIZE readable bytes; every bit pattern is a valid
        // BlockEvent (plain integers), and the read is unaligned.
        Some(unsafe { bytes.as_ptr().cast::<Self>().read_unaligned() })
    }
}

impl Op {
    /// The letter the block tracepoints' `rwbs` starts with.
    #[must_use]
    pub fn letter(op: u32) -> u8 {
        match op {
            1 => b'R',
            2 => b'W',
            3 => b'D',
            4 => b'F',
            _ => b'N',
        }
    }
}

/// A request's operation, from the tracepoints' `rwbs` letters.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// Anything else (`N`, driver-private).
    Other = 0,
    /// `R`.
    Read = 1,
    /// `W`, also with a preflush (`FW`).
    Write = 2,
    /// `D`.
    Discard = 3,
    /// `F` alone: a cache flush (not recorded: see `ebpf/src/block.rs`).
    Flush = 4,
}

/// The key pairing issue with completion.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestKey {
    /// First sector.
    pub sector: u64,
    /// Device (`dev_t`).
    pub dev: u32,
    /// An [`Op`] value: a read and a write of one sector may be in flight
    /// together.
    pub op: u32,
}

/// What the kernel side keeps between issue and completion.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Issued {
    /// When it was issued, in ns.
    pub issue_ns: u64,
    /// Issuing thread.
    pub tid: u32,
    /// Its thread group id.
    pub pid: u32,
    /// Bytes requested.
    pub bytes: u32,
    /// An [`Op`] value.
    pub op: u32,
}

#[cfg(feature = "pod")]
mod user {
    // SAFETY: `#[repr(C)]`, `Copy`, integers only, no padding holes.
    unsafe impl aya::Pod for super::BlockEvent {}
}
