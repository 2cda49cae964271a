//! The packet source: one record per IPv4 or IPv6 packet seen by TC on
//! ingress or egress of the chosen interfaces, with its addresses, ports,
//! TCP flags and sequence numbers.

use crate::events::Header;

/// One packet.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketEvent {
    /// Source and CPU.
    pub header: Header,
    /// Interface index.
    pub ifindex: u32,
    /// Bytes on the wire as TC sees them (link header included).
    pub len: u32,
    /// `CLOCK_MONOTONIC` time, in ns.
    pub ts_ns: u64,
    /// IPv4 source address as a host-order integer (0 for IPv6).
    pub saddr: u32,
    /// IPv4 destination address as a host-order integer (0 for IPv6).
    pub daddr: u32,
    /// IPv6 source address, network order (zero for IPv4).
    pub saddr6: [u8; 16],
    /// IPv6 destination address, network order (zero for IPv4).
    pub daddr6: [u8; 16],
    /// Source port (TCP, UDP), host order.
    pub sport: u16,
    /// Destination port, host order.
    pub dport: u16,
    /// 4 or 6.
    pub family: u8,
    /// IP protocol number (6 TCP, 17 UDP, 1 ICMP, 58 ICMP for IPv6).
    pub proto: u8,
    /// A [`Direction`] value.
    pub dir: u8,
    /// TCP flags byte (FIN 1, SYN 2, RST 4, PSH 8, ACK 16, URG 32, ECE 64, CWR 128).
    pub tcp_flags: u8,
    /// TCP sequence number.
    pub seq: u32,
    /// TCP acknowledgement number.
    pub ack: u32,
    /// Bytes of transport payload (after the TCP or UDP header; for other
    /// protocols, after the IP header).
    pub payload: u32,
    /// How many of the payload's first bytes follow the record (at most
    /// the snap length; 0 without one).
    pub captured: u32,
    /// TCP receive window as sent (not scaled: the scale is in the SYN's
    /// options, which are not kept).
    pub window: u16,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// Zero.
    pub pad: [u8; 5],
}

impl PacketEvent {
    /// The record at the start of `bytes` as the kernel wrote it; `None`
    /// when too short.
    #[must_use]
    pub fn read(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..EVENT_SIZE)?;
        // SAFETY: EVENT_SIZE readable bytes; every bit pattern is a valid
        // PacketEvent (plain integers), and the read is unaligned.
        Some(unsafe { bytes.as_ptr().cast::<Self>().read_unaligned() })
    }
}

/// A [`PacketEvent`] with room for the payload bytes of a snap length:
/// the kernel fills one per CPU and sends its first
/// `EVENT_SIZE + captured` bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct PacketSnap {
    /// The record.
    pub event: PacketEvent,
    /// The payload's first bytes.
    pub data: [u8; MAX_SNAPLEN],
}

/// The largest snap length (a power of two: the kernel bounds lengths
/// with a mask the verifier can follow).
pub const MAX_SNAPLEN: usize = 1024;
const _: () = assert!(MAX_SNAPLEN.is_power_of_two());

/// Name of the global holding the snap length (0: no payload bytes).
pub const SNAPLEN_GLOBAL: &str = "NET_SNAPLEN";

/// Size of a [`PacketEvent`] record.
pub const EVENT_SIZE: usize = 96;

/// Size of a [`PacketEvent`] record in captures made before it kept the
/// TCP window and the TTL (their records end after `captured`).
pub const EVENT_SIZE_BEFORE_TTL: usize = 88;
const _: () = assert!(core::mem::size_of::<PacketEvent>() == EVENT_SIZE);

/// Which way a packet went.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Received.
    Ingress = 0,
    /// Sent.
    Egress = 1,
}

/// Only packets with a port in the port set (source or destination).
pub const FILTER_PORT: u32 = 1 << 0;
/// Only packets with an address in the address set (source or destination).
pub const FILTER_ADDR: u32 = 1 << 1;

/// Name of the port filter set (`u16` host-order ports).
pub const PORTS_MAP: &str = "NET_PORTS";
/// Name of the address filter set (16-byte keys: IPv6, or IPv4 in the
/// first four bytes, network order, the rest zero).
pub const ADDRS_MAP: &str = "NET_ADDRS";
/// Name of the global holding the filter flags.
pub const FLAGS_GLOBAL: &str = "NET_FILTER_FLAGS";

#[cfg(feature = "pod")]
mod user {
    // SAFETY: `#[repr(C)]`, `Copy`, integers only, no padding holes.
    unsafe impl aya::Pod for super::PacketEvent {}
}
