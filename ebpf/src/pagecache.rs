//! The page cache source: `filemap:mm_filemap_add_to_page_cache`,
//! `filemap:mm_filemap_delete_from_page_cache` and, where the kernel has it
//! (6.10 on), `filemap:mm_filemap_get_pages` for read lookups. Offsets come
//! from tracefs through the globals below; an absent field's offset is
//! `u32::MAX`.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{btf_map, tracepoint},
    programs::TracePointContext,
};
use weft_abi::{
    events::{Header, Source},
    pagecache::{LastLookup, Op, PageCacheEvent},
};

use crate::{
    events::{self, Event},
    task_storage::TaskStorage,
    tracepoint,
};

#[unsafe(no_mangle)]
static PAGECACHE_INO_OFFSET: u32 = 16;
#[unsafe(no_mangle)]
static PAGECACHE_INDEX_OFFSET: u32 = 24;
#[unsafe(no_mangle)]
static PAGECACHE_DEV_OFFSET: u32 = 32;
/// `order` of the added or removed folio (absent before 6.3: one page).
#[unsafe(no_mangle)]
static PAGECACHE_ORDER_OFFSET: u32 = 36;
#[unsafe(no_mangle)]
static PAGECACHE_LOOKUP_INO_OFFSET: u32 = 8;
#[unsafe(no_mangle)]
static PAGECACHE_LOOKUP_DEV_OFFSET: u32 = 16;
#[unsafe(no_mangle)]
static PAGECACHE_LOOKUP_INDEX_OFFSET: u32 = 24;
#[unsafe(no_mangle)]
static PAGECACHE_LOOKUP_LAST_OFFSET: u32 = 32;

#[btf_map]
static PAGECACHE_LAST_LOOKUP: TaskStorage<LastLookup> = TaskStorage::new();

impl Event for PageCacheEvent {
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}

#[inline(always)]
fn emit(pid_tgid: u64, ino: u64, index: u64, dev: u32, pages: u32, op: Op) {
    events::emit(
        Source::PageCache,
        PageCacheEvent {
            header: Header::default(),
            tid: pid_tgid as u32,
            pid: (pid_tgid >> 32) as u32,
            // SAFETY: helper without preconditions.
            ts_ns: unsafe { bpf_ktime_get_ns() },
            ino,
            index,
            dev,
            pages,
            op: op as u32,
            pad: 0,
        },
    );
}

#[inline(always)]
fn added_or_deleted(ctx: &TracePointContext, op: Op) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !events::wants_current((pid_tgid >> 32) as u32) {
        return;
    }
    let order = tracepoint::field::<u8>(ctx, &PAGECACHE_ORDER_OFFSET).unwrap_or(0) & 31;
    emit(
        pid_tgid,
        tracepoint::field::<u64>(ctx, &PAGECACHE_INO_OFFSET).unwrap_or(0),
        tracepoint::field::<u64>(ctx, &PAGECACHE_INDEX_OFFSET).unwrap_or(0),
        tracepoint::field::<u32>(ctx, &PAGECACHE_DEV_OFFSET).unwrap_or(0),
        1 << order,
        op,
    );
}

#[tracepoint]
pub fn pagecache_add(ctx: TracePointContext) -> i32 {
    added_or_deleted(&ctx, Op::Add);
    0
}

#[tracepoint]
pub fn pagecache_delete(ctx: TracePointContext) -> i32 {
    added_or_deleted(&ctx, Op::Delete);
    0
}

/// A read looks up pages `index..=last_index`; a read longer than one batch
/// looks up the rest of its range again with a higher `index` and the same
/// `last_index`, and those repeats are not counted again.
#[tracepoint]
pub fn pagecache_lookup(ctx: TracePointContext) -> i32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !events::wants_current((pid_tgid >> 32) as u32) {
        return 0;
    }
    let (Some(ino), Some(dev), Some(index), Some(last_index)) = (
        tracepoint::field::<u64>(&ctx, &PAGECACHE_LOOKUP_INO_OFFSET),
        tracepoint::field::<u32>(&ctx, &PAGECACHE_LOOKUP_DEV_OFFSET),
        tracepoint::field::<u64>(&ctx, &PAGECACHE_LOOKUP_INDEX_OFFSET),
        tracepoint::field::<u64>(&ctx, &PAGECACHE_LOOKUP_LAST_OFFSET),
    ) else {
        return 0;
    };
    if let Some(last) = PAGECACHE_LAST_LOOKUP.current(true) {
        // SAFETY: the task's own storage; only this thread's programs touch it.
        let last = unsafe { &mut *last };
        let repeat = last.ino == ino
            && last.dev == dev
            && last.last_index == last_index
            && index > last.index;
        *last = LastLookup {
            ino,
            index,
            last_index,
            dev,
            pad: 0,
        };
        if repeat {
            return 0;
        }
    }
    let pages = last_index.saturating_sub(index) + 1;
    emit(
        pid_tgid,
        ino,
        index,
        dev,
        pages.min(u64::from(u32::MAX)) as u32,
        Op::Lookup,
    );
    0
}
