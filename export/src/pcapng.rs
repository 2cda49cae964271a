//! `weft export --source net --format pcapng`: the `net` source's packets
//! for Wireshark and tshark. The kernel kept each packet's header fields
//! and its payload's first `--snaplen` bytes, not its bytes as they were,
//! so each packet is written as the IP packet those make (link type RAW):
//! the IPv4 or IPv6 header, the TCP or UDP header with the recorded ports,
//! sequence numbers and flags, then the kept payload bytes. Lengths say how
//! long the packet was; IP options, TTLs and transport checksums are not
//! known and are written as 0 (an IPv4 header checksum is computed).

use std::{
    collections::HashMap,
    io::{self, Write},
};

use weft_abi::net::{EVENT_SIZE, EVENT_SIZE_BEFORE_TTL, PacketEvent};
use weft_capture::sources::STORED_FROM;
use weft_store::Snapshot;

/// pcapng block types and the link type of raw IP packets.
const SECTION_HEADER: u32 = 0x0A0D_0D0A;
const INTERFACE: u32 = 1;
const ENHANCED_PACKET: u32 = 6;
const LINKTYPE_RAW: u16 = 101;
/// Options: end, `if_name`, `if_tsresol`, `epb_flags`, `shb_userappl`.
const END: u16 = 0;
const IF_NAME: u16 = 2;
const IF_TSRESOL: u16 = 9;
const EPB_FLAGS: u16 = 2;
const SHB_USERAPPL: u16 = 4;

/// Writes pcapng blocks to `out`, one interface block per interface the
/// first time one of its packets comes.
pub struct Writer<W: Write> {
    out: W,
    /// Interface ids, by ifindex, in the order their blocks were written.
    interfaces: Vec<u32>,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC` of the capture, to stamp packets
    /// with wall-clock times.
    wall_offset: i64,
    /// Interface names by index, as the capture noted them when it was
    /// recorded; others are named as this machine names them now.
    names: HashMap<u32, String>,
    /// Bytes of a packet event in this capture's records (captures before
    /// the TCP window and TTL were kept have shorter ones).
    event_size: usize,
}

impl<W: Write> Writer<W> {
    /// Starts a section for the packets of a capture with `wall_offset`
    /// and the interface `names` it noted.
    pub fn new(mut out: W, wall_offset: i64, names: HashMap<u32, String>) -> io::Result<Self> {
        let mut body = Vec::new();
        body.extend(0x1A2B_3C4Du32.to_le_bytes());
        body.extend(1u16.to_le_bytes());
        body.extend(0u16.to_le_bytes());
        // Section length: not given.
        body.extend((-1i64).to_le_bytes());
        let app = format!("weft {}", env!("CARGO_PKG_VERSION"));
        option(&mut body, SHB_USERAPPL, app.as_bytes());
        option(&mut body, END, &[]);
        block(&mut out, SECTION_HEADER, &body)?;
        Ok(Self {
            out,
            interfaces: Vec::new(),
            wall_offset,
            names,
            event_size: EVENT_SIZE,
        })
    }

    /// Writes one stored `net` record (its payload as the store keeps it).
    /// Records too short to be packets are an error naming their time.
    pub fn packet(&mut self, stored: &[u8], ts: u64) -> io::Result<()> {
        let (event, data) = decode(stored, self.event_size).ok_or_else(|| {
            io::Error::other(format!(
                "the net record at {ts} ns is too short to be a packet"
            ))
        })?;
        let interface = self.interface(event.ifindex)?;
        let (packet, original) = rebuild(&event, data);
        let wall = u64::try_from(i64::try_from(event.ts_ns).unwrap_or(i64::MAX) + self.wall_offset)
            .unwrap_or(0);
        let mut body = Vec::with_capacity(packet.len() + 40);
        body.extend(interface.to_le_bytes());
        body.extend(((wall >> 32) as u32).to_le_bytes());
        body.extend((wall as u32).to_le_bytes());
        body.extend(
            u32::try_from(packet.len())
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        body.extend(original.to_le_bytes());
        body.extend(&packet);
        pad(&mut body);
        // Direction: inbound 1, outbound 2.
        let flags: u32 = if event.dir == 0 { 1 } else { 2 };
        option(&mut body, EPB_FLAGS, &flags.to_le_bytes());
        option(&mut body, END, &[]);
        block(&mut self.out, ENHANCED_PACKET, &body)
    }

    /// The id of `ifindex`'s interface block, written the first time.
    fn interface(&mut self, ifindex: u32) -> io::Result<u32> {
        if let Some(id) = self.interfaces.iter().position(|i| *i == ifindex) {
            return Ok(id as u32);
        }
        let mut body = Vec::new();
        body.extend(LINKTYPE_RAW.to_le_bytes());
        body.extend(0u16.to_le_bytes());
        // Snap length: none.
        body.extend(0u32.to_le_bytes());
        let name = (self.names.get(&ifindex).cloned()).unwrap_or_else(|| interface_name(ifindex));
        option(&mut body, IF_NAME, name.as_bytes());
        // Times in ns.
        option(&mut body, IF_TSRESOL, &[9]);
        option(&mut body, END, &[]);
        block(&mut self.out, INTERFACE, &body)?;
        self.interfaces.push(ifindex);
        Ok(self.interfaces.len() as u32 - 1)
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Every packet of `snapshot`'s `net` source, in time order, to `writer`.
/// Returns how many were written.
pub fn write_all<W: Write>(snapshot: &Snapshot, writer: &mut Writer<W>) -> crate::Result<u64> {
    let Some(net) = snapshot.meta().sources.iter().find(|s| s.name == "net") else {
        crate::error::refuse!("the capture has no net source (record it with --sources net)");
    };
    // A capture from before the window and TTL has no such fields.
    writer.event_size = if net.fields.iter().any(|f| f.name == "window") {
        EVENT_SIZE
    } else {
        EVENT_SIZE_BEFORE_TTL
    };
    let (mut written, mut failed) = (0, None);
    snapshot.raw_scan_each(net.id, 0..=u64::MAX, |record| {
        if failed.is_none() {
            match writer.packet(record.payload, record.ts) {
                Ok(()) => written += 1,
                Err(error) => failed = Some(error),
            }
        }
    })?;
    match failed {
        Some(error) => Err(error.into()),
        None => Ok(written),
    }
}

/// The packet event a stored record holds (its source field was dropped
/// when it was stored), `event_size` bytes long when it was written, and
/// the payload bytes after it.
fn decode(stored: &[u8], event_size: usize) -> Option<(PacketEvent, &[u8])> {
    let size = event_size.min(EVENT_SIZE) - STORED_FROM;
    let fixed = stored.get(..size)?;
    let mut bytes = vec![0u8; STORED_FROM];
    bytes.extend_from_slice(fixed);
    // What an older record lacks reads as zero.
    bytes.resize(EVENT_SIZE, 0);
    // SAFETY: `bytes` holds size_of::<PacketEvent>() bytes, and every bit
    // pattern is a valid PacketEvent (plain integers).
    let event = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<PacketEvent>()) };
    let kept = (event.captured as usize).min(stored.len() - size);
    Some((event, &stored[size..size + kept]))
}

/// The IP packet `event` describes with `data` as its payload's first
/// bytes, and how long the whole packet was.
fn rebuild(event: &PacketEvent, data: &[u8]) -> (Vec<u8>, u32) {
    let transport = match event.proto {
        6 => tcp_header(event),
        17 => udp_header(event),
        _ => Vec::new(),
    };
    let inner = transport.len() as u32 + event.payload;
    let mut packet = if event.family == 6 {
        ipv6_header(event, inner)
    } else {
        ipv4_header(event, inner)
    };
    let original = packet.len() as u32 + inner;
    packet.extend(transport);
    packet.extend(data);
    (packet, original)
}

fn ipv4_header(event: &PacketEvent, inner: u32) -> Vec<u8> {
    let total = u16::try_from(20 + inner).unwrap_or(u16::MAX);
    let mut header = vec![0x45, 0];
    header.extend(total.to_be_bytes());
    // Identification, flags and fragment offset: not kept.
    header.extend([0, 0, 0, 0]);
    header.push(event.ttl);
    header.push(event.proto);
    header.extend([0, 0]);
    header.extend(event.saddr.to_be_bytes());
    header.extend(event.daddr.to_be_bytes());
    let sum = checksum(&header);
    header[10..12].copy_from_slice(&sum.to_be_bytes());
    header
}

fn ipv6_header(event: &PacketEvent, inner: u32) -> Vec<u8> {
    let mut header = vec![0x60, 0, 0, 0];
    header.extend(u16::try_from(inner).unwrap_or(u16::MAX).to_be_bytes());
    header.push(event.proto);
    header.push(event.ttl);
    header.extend(event.saddr6);
    header.extend(event.daddr6);
    header
}

fn tcp_header(event: &PacketEvent) -> Vec<u8> {
    let mut header = Vec::with_capacity(20);
    header.extend(event.sport.to_be_bytes());
    header.extend(event.dport.to_be_bytes());
    header.extend(event.seq.to_be_bytes());
    header.extend(event.ack.to_be_bytes());
    // Data offset 5 words (options not kept), then the flags.
    header.extend([5 << 4, event.tcp_flags]);
    header.extend(event.window.to_be_bytes());
    // Checksum, urgent pointer: not kept.
    header.extend([0; 4]);
    header
}

fn udp_header(event: &PacketEvent) -> Vec<u8> {
    let mut header = Vec::with_capacity(8);
    header.extend(event.sport.to_be_bytes());
    header.extend(event.dport.to_be_bytes());
    header.extend(
        u16::try_from(8 + event.payload)
            .unwrap_or(u16::MAX)
            .to_be_bytes(),
    );
    header.extend([0, 0]);
    header
}

/// The Internet checksum of an IPv4 header (RFC 1071).
fn checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|pair| u32::from(u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The interface's name where this machine still has it, else its index.
fn interface_name(ifindex: u32) -> String {
    let index_of = |name: &str| {
        let text = std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex")).ok()?;
        text.trim().parse::<u32>().ok()
    };
    let found = std::fs::read_dir("/sys/class/net").ok().and_then(|dir| {
        dir.filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .find(|name| index_of(name) == Some(ifindex))
    });
    found.unwrap_or_else(|| format!("ifindex {ifindex}"))
}

fn option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    body.extend(code.to_le_bytes());
    body.extend(u16::try_from(value.len()).unwrap_or(u16::MAX).to_le_bytes());
    body.extend(value);
    pad(body);
}

fn pad(body: &mut Vec<u8>) {
    body.resize(body.len().next_multiple_of(4), 0);
}

/// A block: type, total length, body, total length again.
fn block(out: &mut impl Write, kind: u32, body: &[u8]) -> io::Result<()> {
    let total = u32::try_from(body.len() + 12).unwrap_or(u32::MAX);
    out.write_all(&kind.to_le_bytes())?;
    out.write_all(&total.to_le_bytes())?;
    out.write_all(body)?;
    out.write_all(&total.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ipv4_checksum_is_rfc_1071s() {
        // The example header of RFC 1071's errata / Wikipedia.
        let header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&header), 0xb861);
    }

    #[test]
    fn a_tcp_packet_is_rebuilt_with_its_fields_and_kept_bytes() {
        let event = PacketEvent {
            family: 4,
            proto: 6,
            saddr: 0x7f00_0001,
            daddr: 0x7f00_0002,
            sport: 40_000,
            dport: 80,
            seq: 7,
            ack: 9,
            tcp_flags: 0x18,
            payload: 100,
            captured: 3,
            ttl: 64,
            window: 512,
            ..PacketEvent::default()
        };
        let (packet, original) = rebuild(&event, b"GET");
        assert_eq!(original, 20 + 20 + 100);
        assert_eq!(packet.len(), 20 + 20 + 3);
        assert_eq!(&packet[2..4], &140u16.to_be_bytes());
        assert_eq!(&packet[12..16], &[127, 0, 0, 1]);
        assert_eq!(&packet[20..22], &40_000u16.to_be_bytes());
        assert_eq!(packet[33], 0x18);
        assert_eq!(packet[8], 64, "TTL");
        assert_eq!(&packet[34..36], &512u16.to_be_bytes(), "window");
        assert_eq!(&packet[40..], b"GET");
        assert_eq!(checksum(&packet[..20]), 0, "a valid header sums to zero");
    }
}

#[cfg(test)]
mod older {
    use super::*;

    #[test]
    fn a_record_from_before_the_window_and_ttl_reads_them_as_zero() {
        // 88 bytes of event, then 2 bytes of payload.
        let mut stored = vec![0u8; EVENT_SIZE_BEFORE_TTL - STORED_FROM];
        let captured = std::mem::offset_of!(PacketEvent, captured) - STORED_FROM;
        stored[captured] = 2;
        stored.extend_from_slice(b"hi");
        let (event, data) = decode(&stored, EVENT_SIZE_BEFORE_TTL).unwrap();
        assert_eq!((event.ttl, event.window, data), (0, 0, &b"hi"[..]));
    }
}
