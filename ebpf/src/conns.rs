//! The connection source: `sock:sock_send_length` and
//! `sock:sock_recv_length`, which the thread that sends or receives runs,
//! give the socket; its addresses and ports are read from the kernel's
//! `struct sock_common` at offsets user space writes into the globals below
//! (stable since Linux 2.6; IPv6 addresses are not read yet). A thread's
//! use of a socket in one direction is recorded once per `RENOTE_NS`:
//! the table of what was noted costs a lookup per call, a record only when
//! something new is seen.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::{map, tracepoint},
    maps::LruHashMap,
    programs::TracePointContext,
};
use weft_abi::{
    conns::{ConnEvent, Direction, RENOTE_NS},
    events::{Header, Source},
};

use crate::{
    events::{self, Event},
    tracepoint,
};

#[unsafe(no_mangle)]
static CONNS_SK_OFFSET: u32 = 8;
#[unsafe(no_mangle)]
static CONNS_FAMILY_OFFSET: u32 = 16;
#[unsafe(no_mangle)]
static CONNS_PROTOCOL_OFFSET: u32 = 18;
#[unsafe(no_mangle)]
static CONNS_RET_OFFSET: u32 = 20;

/// `struct sock_common`: `skc_daddr` at 0, `skc_rcv_saddr` at 4,
/// `skc_dport` (network order) at 12, `skc_num` (host order) at 14.
const SKC_DADDR: usize = 0;
const SKC_RCV_SADDR: usize = 4;
const SKC_DPORT: usize = 12;
const SKC_NUM: usize = 14;

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
const IPPROTO_TCP: u16 = 6;
const IPPROTO_UDP: u16 = 17;

/// What was noted, per thread, socket and direction: when it last was.
#[repr(C)]
#[derive(Clone, Copy)]
struct Noted {
    sk: u64,
    tid: u32,
    dir: u32,
}

#[map]
static CONNS_NOTED: LruHashMap<Noted, u64> = LruHashMap::with_max_entries(1 << 16, 0);

impl Event for ConnEvent {
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}

#[tracepoint]
pub fn conns_send(ctx: TracePointContext) -> i32 {
    used(&ctx, Direction::Send);
    0
}

#[tracepoint]
pub fn conns_recv(ctx: TracePointContext) -> i32 {
    used(&ctx, Direction::Recv);
    0
}

#[inline(always)]
fn used(ctx: &TracePointContext, dir: Direction) {
    let family = tracepoint::field::<u16>(ctx, &CONNS_FAMILY_OFFSET).unwrap_or(0);
    let protocol = tracepoint::field::<u16>(ctx, &CONNS_PROTOCOL_OFFSET).unwrap_or(0);
    if !matches!(family, AF_INET | AF_INET6) || !matches!(protocol, IPPROTO_TCP | IPPROTO_UDP) {
        return;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let (pid, tid) = ((pid_tgid >> 32) as u32, pid_tgid as u32);
    if !events::wants_current(pid) {
        return;
    }
    let Some(sk) = tracepoint::field::<u64>(ctx, &CONNS_SK_OFFSET) else {
        return;
    };
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    let noted = Noted {
        sk,
        tid,
        dir: dir as u32,
    };
    if let Some(last) = CONNS_NOTED.get_ptr_mut(noted) {
        // SAFETY: a valid map value; a racing update only renotes early.
        let last = unsafe { &mut *last };
        if now.wrapping_sub(*last) < RENOTE_NS {
            return;
        }
        *last = now;
    } else if CONNS_NOTED.insert(&noted, &now, 0).is_err() {
        return;
    }
    let read = |at: usize| -> u32 {
        // SAFETY: bpf_probe_read_kernel checks the address.
        unsafe { bpf_probe_read_kernel((sk as usize + at) as *const u32) }.unwrap_or(0)
    };
    let ports = read(SKC_DPORT);
    let v4 = family == AF_INET;
    events::emit(
        Source::Conns,
        ConnEvent {
            header: Header::default(),
            ts_ns: now,
            pid,
            tid,
            saddr: if v4 { u32::from_be(read(SKC_RCV_SADDR)) } else { 0 },
            daddr: if v4 { u32::from_be(read(SKC_DADDR)) } else { 0 },
            saddr6: [0; 16],
            daddr6: [0; 16],
            // Little-endian host: skc_dport (network order) is the low half.
            sport: (ports >> 16) as u16,
            dport: u16::from_be(ports as u16),
            family: if v4 { 4 } else { 6 },
            proto: protocol as u8,
            dir: dir as u8,
            pad: 0,
            bytes: tracepoint::field::<i32>(ctx, &CONNS_RET_OFFSET).unwrap_or(0),
        },
    );
}
