//! The packet source: TC classifiers on ingress and egress that parse the
//! link, IP and transport headers with `bpf_skb_load_bytes` (which also
//! reads non-linear data) and emit a `PacketEvent`. They never change or
//! drop a packet: both return `TC_ACT_UNSPEC`, letting the next program or
//! the stack decide.

use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, bpf_skb_load_bytes},
    macros::{classifier, map},
    maps::{HashMap, PerCpuArray},
    programs::TcContext,
};
use weft_abi::{
    events::{Counter, Header, Source},
    net::{
        Direction, EVENT_SIZE, FILTER_ADDR, FILTER_PORT, MAX_SNAPLEN, PacketEvent, PacketSnap,
    },
};

use crate::events::{self, Event};

#[unsafe(no_mangle)]
static NET_FILTER_FLAGS: u32 = 0;

/// Payload bytes to send after each record (0: none).
#[unsafe(no_mangle)]
static NET_SNAPLEN: u32 = 0;

/// Where a record and its payload bytes are put together, one per CPU:
/// too large for the stack.
#[map]
static NET_SNAP: PerCpuArray<PacketSnap> = PerCpuArray::with_max_entries(1, 0);

#[map]
static NET_PORTS: HashMap<u16, u8> = HashMap::with_max_entries(64, 0);

#[map]
static NET_ADDRS: HashMap<[u8; 16], u8> = HashMap::with_max_entries(64, 0);

const TC_ACT_UNSPEC: i32 = -1;
const ETH_HLEN: usize = 14;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86DD;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;

impl Event for PacketEvent {
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}

#[classifier]
pub fn net_ingress(ctx: TcContext) -> i32 {
    packet(&ctx, Direction::Ingress);
    TC_ACT_UNSPEC
}

#[classifier]
pub fn net_egress(ctx: TcContext) -> i32 {
    packet(&ctx, Direction::Egress);
    TC_ACT_UNSPEC
}

#[inline(always)]
fn flags() -> u32 {
    // SAFETY: read_volatile of a loader-written global.
    unsafe { core::ptr::read_volatile(&raw const NET_FILTER_FLAGS) }
}

#[inline(always)]
fn snaplen() -> u32 {
    // SAFETY: as above.
    unsafe { core::ptr::read_volatile(&raw const NET_SNAPLEN) }
}

#[inline(always)]
fn packet(ctx: &TcContext, dir: Direction) {
    // SAFETY: the context points at the kernel's __sk_buff.
    let (ifindex, protocol) = unsafe { ((*ctx.skb.skb).ifindex, (*ctx.skb.skb).protocol) };
    let protocol = u16::from_be(protocol as u16);
    // Devices without a link header (tun, wireguard) start at the IP header.
    let l3 = match ctx.load::<[u8; 2]>(12) {
        Ok(ether) if u16::from_be_bytes(ether) == protocol => ETH_HLEN,
        _ => 0,
    };
    let mut event = PacketEvent {
        ifindex,
        len: ctx.len(),
        dir: dir as u8,
        ..PacketEvent::default()
    };
    let l4 = match protocol {
        ETH_P_IP => ipv4(ctx, l3, &mut event),
        ETH_P_IPV6 => ipv6(ctx, l3, &mut event),
        _ => None,
    };
    let Some(l4) = l4 else {
        return;
    };
    let payload = transport(ctx, l4, &mut event);
    if !wanted(&event) {
        return;
    }
    // SAFETY: helper without preconditions.
    event.ts_ns = unsafe { bpf_ktime_get_ns() };
    let snaplen = snaplen();
    if snaplen == 0 {
        events::emit(Source::Net, event);
    } else {
        emit_with_payload(ctx, event, payload, snaplen);
    }
}

/// Sends `event` followed by up to `snaplen` bytes of the payload that
/// starts at offset `from`.
#[inline(always)]
fn emit_with_payload(ctx: &TcContext, mut event: PacketEvent, from: usize, snaplen: u32) {
    let Some(snap) = NET_SNAP.get_ptr_mut(0) else {
        events::count(Source::Net, Counter::RingFull);
        return;
    };
    let on_wire = ctx.len().saturating_sub(from as u32);
    let want = snaplen.min(event.payload).min(on_wire) as usize;
    let mut captured = 0;
    if want > 0 {
        // `want` is in 1..=MAX_SNAPLEN already; the mask and the + 1 say
        // so in a form the verifier follows (the helper wants at least 1).
        let len = ((want - 1) & (MAX_SNAPLEN - 1)) + 1;
        // SAFETY: `snap` is this CPU's map value, `len` bytes fit `data`.
        let loaded = unsafe {
            bpf_skb_load_bytes(
                ctx.skb.skb.cast(),
                from as u32,
                (&raw mut (*snap).data).cast(),
                len as u32,
            )
        };
        if loaded == 0 {
            captured = len;
        }
    }
    event.captured = captured as u32;
    let cpu = events::stamp(Source::Net, &mut event);
    // SAFETY: as above; the record and its captured bytes are in the value.
    let record = unsafe {
        (*snap).event = event;
        core::slice::from_raw_parts(snap.cast::<u8>(), EVENT_SIZE + captured)
    };
    events::emit_bytes(Source::Net, cpu, record);
}

/// Fills the IPv4 fields; returns the transport header's offset.
#[inline(always)]
fn ipv4(ctx: &TcContext, at: usize, event: &mut PacketEvent) -> Option<usize> {
    let first = ctx.load::<u8>(at).ok()?;
    let header = usize::from(first & 0x0F) * 4;
    let total = u16::from_be_bytes(ctx.load::<[u8; 2]>(at + 2).ok()?);
    event.family = 4;
    event.ttl = ctx.load::<u8>(at + 8).ok()?;
    event.proto = ctx.load::<u8>(at + 9).ok()?;
    event.saddr = u32::from_be_bytes(ctx.load::<[u8; 4]>(at + 12).ok()?);
    event.daddr = u32::from_be_bytes(ctx.load::<[u8; 4]>(at + 16).ok()?);
    event.payload = u32::from(total).saturating_sub(header as u32);
    Some(at + header)
}

/// Fills the IPv6 fields; returns the transport header's offset (extension
/// headers are not followed: `proto` is then the first next-header value).
#[inline(always)]
fn ipv6(ctx: &TcContext, at: usize, event: &mut PacketEvent) -> Option<usize> {
    let payload = u16::from_be_bytes(ctx.load::<[u8; 2]>(at + 4).ok()?);
    event.family = 6;
    event.proto = ctx.load::<u8>(at + 6).ok()?;
    event.ttl = ctx.load::<u8>(at + 7).ok()?;
    event.saddr6 = ctx.load::<[u8; 16]>(at + 8).ok()?;
    event.daddr6 = ctx.load::<[u8; 16]>(at + 24).ok()?;
    event.payload = u32::from(payload);
    Some(at + 40)
}

/// Fills the ports, TCP sequence numbers and flags; returns the payload's
/// offset.
#[inline(always)]
fn transport(ctx: &TcContext, at: usize, event: &mut PacketEvent) -> usize {
    match event.proto {
        IPPROTO_TCP => {
            let Ok(tcp) = ctx.load::<[u8; 16]>(at) else {
                return at;
            };
            event.sport = u16::from_be_bytes([tcp[0], tcp[1]]);
            event.dport = u16::from_be_bytes([tcp[2], tcp[3]]);
            event.seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
            event.ack = u32::from_be_bytes([tcp[8], tcp[9], tcp[10], tcp[11]]);
            event.tcp_flags = tcp[13];
            event.window = u16::from_be_bytes([tcp[14], tcp[15]]);
            let header = u32::from(tcp[12] >> 4) * 4;
            event.payload = event.payload.saturating_sub(header);
            at + header as usize
        }
        IPPROTO_UDP => {
            let Ok(udp) = ctx.load::<[u8; 4]>(at) else {
                return at;
            };
            event.sport = u16::from_be_bytes([udp[0], udp[1]]);
            event.dport = u16::from_be_bytes([udp[2], udp[3]]);
            event.payload = event.payload.saturating_sub(8);
            at + 8
        }
        _ => at,
    }
}

/// Whether the packet passes the port and address filters.
#[inline(always)]
fn wanted(event: &PacketEvent) -> bool {
    let flags = flags();
    if flags & FILTER_PORT != 0 {
        // SAFETY: values are only tested for presence.
        let hit = unsafe {
            NET_PORTS.get(&event.sport).is_some() || NET_PORTS.get(&event.dport).is_some()
        };
        if !hit {
            return false;
        }
    }
    if flags & FILTER_ADDR != 0 {
        let (source, destination) = if event.family == 4 {
            let mut s = [0u8; 16];
            let mut d = [0u8; 16];
            s[..4].copy_from_slice(&event.saddr.to_be_bytes());
            d[..4].copy_from_slice(&event.daddr.to_be_bytes());
            (s, d)
        } else {
            (event.saddr6, event.daddr6)
        };
        // SAFETY: as above.
        let hit =
            unsafe { NET_ADDRS.get(&source).is_some() || NET_ADDRS.get(&destination).is_some() };
        if !hit {
            return false;
        }
    }
    true
}
