//! The block I/O source: `block:block_rq_issue` remembers each request by
//! (device, sector), `block:block_rq_complete` emits a `BlockEvent`. Field
//! offsets come from tracefs through the globals below.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{map, tracepoint},
    maps::HashMap,
    programs::TracePointContext,
};
use weft_abi::{
    block::{BlockEvent, Issued, Op, RequestKey},
    events::{Counter, Header, Source},
};

use crate::{
    events::{self, Event},
    tracepoint,
};

#[unsafe(no_mangle)]
static BLOCK_ISSUE_DEV_OFFSET: u32 = 8;
#[unsafe(no_mangle)]
static BLOCK_ISSUE_SECTOR_OFFSET: u32 = 16;
#[unsafe(no_mangle)]
static BLOCK_ISSUE_BYTES_OFFSET: u32 = 28;
#[unsafe(no_mangle)]
static BLOCK_ISSUE_RWBS_OFFSET: u32 = 34;
#[unsafe(no_mangle)]
static BLOCK_DONE_DEV_OFFSET: u32 = 8;
#[unsafe(no_mangle)]
static BLOCK_DONE_SECTOR_OFFSET: u32 = 16;
#[unsafe(no_mangle)]
static BLOCK_DONE_ERROR_OFFSET: u32 = 28;
#[unsafe(no_mangle)]
static BLOCK_DONE_RWBS_OFFSET: u32 = 34;

/// Insert only when absent (`BPF_NOEXIST`).
const BPF_NOEXIST: u64 = 1;

/// Requests in flight. Devices queue at most a few thousand.
#[map]
static BLOCK_INFLIGHT: HashMap<RequestKey, Issued> = HashMap::with_max_entries(1 << 14, 0);

impl Event for BlockEvent {
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}

/// The operation from the first letters of `rwbs` ("R", "WS", "FWS", "D", "F").
#[inline(always)]
fn op(rwbs: [u8; 2]) -> Op {
    match rwbs {
        [b'R', _] => Op::Read,
        [b'W', _] | [b'F', b'W'] => Op::Write,
        [b'D', _] => Op::Discard,
        [b'F', _] => Op::Flush,
        _ => Op::Other,
    }
}

#[tracepoint]
pub fn block_rq_issue(ctx: TracePointContext) -> i32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let pid = (pid_tgid >> 32) as u32;
    if !events::wants_current(pid) {
        return 0;
    }
    let (Some(dev), Some(sector)) = (
        tracepoint::field::<u32>(&ctx, &BLOCK_ISSUE_DEV_OFFSET),
        tracepoint::field::<u64>(&ctx, &BLOCK_ISSUE_SECTOR_OFFSET),
    ) else {
        return 0;
    };
    let op = op(tracepoint::field::<[u8; 2]>(&ctx, &BLOCK_ISSUE_RWBS_OFFSET).unwrap_or([0; 2]));
    // A cache flush completes with another sector than it was issued with,
    // and flushes of one device overlap: the tracepoints cannot pair them.
    if op == Op::Flush {
        return 0;
    }
    let op = op as u32;
    let issued = Issued {
        // SAFETY: helper without preconditions.
        issue_ns: unsafe { bpf_ktime_get_ns() },
        tid: pid_tgid as u32,
        pid,
        bytes: tracepoint::field::<u32>(&ctx, &BLOCK_ISSUE_BYTES_OFFSET).unwrap_or(0),
        op,
    };
    let key = RequestKey { sector, dev, op };
    // Full, or an identical request in flight: counted, never mispaired.
    if BLOCK_INFLIGHT.insert(key, issued, BPF_NOEXIST).is_err() {
        events::count(Source::Block, Counter::TableFull);
    }
    0
}

#[tracepoint]
pub fn block_rq_complete(ctx: TracePointContext) -> i32 {
    let (Some(dev), Some(sector)) = (
        tracepoint::field::<u32>(&ctx, &BLOCK_DONE_DEV_OFFSET),
        tracepoint::field::<u64>(&ctx, &BLOCK_DONE_SECTOR_OFFSET),
    ) else {
        return 0;
    };
    let op =
        op(tracepoint::field::<[u8; 2]>(&ctx, &BLOCK_DONE_RWBS_OFFSET).unwrap_or([0; 2])) as u32;
    let key = RequestKey { sector, dev, op };
    // SAFETY: the value is copied out before the entry is removed.
    let Some(issued) = (unsafe { BLOCK_INFLIGHT.get(key) }).copied() else {
        return 0;
    };
    let _ = BLOCK_INFLIGHT.remove(key);
    // SAFETY: helper without preconditions.
    let now = unsafe { bpf_ktime_get_ns() };
    events::emit(
        Source::Block,
        BlockEvent {
            header: Header::default(),
            tid: issued.tid,
            pid: issued.pid,
            ts_ns: now,
            latency_ns: now.wrapping_sub(issued.issue_ns),
            sector,
            dev,
            bytes: issued.bytes,
            op: issued.op,
            error: tracepoint::field::<i32>(&ctx, &BLOCK_DONE_ERROR_OFFSET).unwrap_or(0),
        },
    );
    0
}
