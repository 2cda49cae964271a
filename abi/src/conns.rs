//! The connection source: which thread used which TCP or UDP socket, from
//! `sock:sock_send_length` and `sock:sock_recv_length` (run by the thread
//! that sends or receives): its addresses and ports, at most once a second
//! per thread, socket and direction, so that "which connections did this
//! thread use" costs a table lookup per call, not a record.

use crate::events::Header;

/// One thread's use of one socket.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnEvent {
    /// Source and CPU.
    pub header: Header,
    /// `CLOCK_MONOTONIC` time of the call, in ns.
    pub ts_ns: u64,
    /// The thread's process.
    pub pid: u32,
    /// The thread.
    pub tid: u32,
    /// This end's IPv4 address as a host-order integer (0 for IPv6).
    pub saddr: u32,
    /// The other end's IPv4 address as a host-order integer (0 for IPv6,
    /// and for an unconnected UDP socket).
    pub daddr: u32,
    /// This end's IPv6 address, network order (zero for IPv4).
    pub saddr6: [u8; 16],
    /// The other end's IPv6 address, network order (zero for IPv4).
    pub daddr6: [u8; 16],
    /// This end's port, host order.
    pub sport: u16,
    /// The other end's port, host order.
    pub dport: u16,
    /// 4 or 6.
    pub family: u8,
    /// IP protocol number (6 TCP, 17 UDP).
    pub proto: u8,
    /// A [`Direction`] value.
    pub dir: u8,
    /// Zero.
    pub pad: u8,
    /// Bytes the call moved (or a negative errno).
    pub bytes: i32,
}

impl ConnEvent {
    /// The record at the start of `bytes` as the kernel wrote it; `None`
    /// when too short.
    #[must_use]
    pub fn read(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..EVENT_SIZE)?;
        // SAFETY: EVENT_SIZE readable bytes; every bit pattern is a valid
        // ConnEvent (plain integers), and the read is unaligned.
        Some(unsafe { bytes.as_ptr().cast::<Self>().read_unaligned() })
    }
}

/// Size of a [`ConnEvent`] record.
pub const EVENT_SIZE: usize = 80;
const _: () = assert!(core::mem::size_of::<ConnEvent>() == EVENT_SIZE);

/// Which way the call moved data.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// `recvmsg` and friends.
    Recv = 0,
    /// `sendmsg` and friends.
    Send = 1,
}

/// How long a thread's use of a socket in one direction stays noted
/// before it is recorded again, ns.
pub const RENOTE_NS: u64 = 1_000_000_000;

#[cfg(feature = "pod")]
mod user {
    // SAFETY: `#[repr(C)]`, `Copy`, integers only, no padding holes.
    unsafe impl aya::Pod for super::ConnEvent {}
}
