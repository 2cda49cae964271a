//! The shared per-CPU rings, counters and task filters of every source but
//! syscalls (see `weft_abi::events`).

use aya_ebpf::{
    bindings::BPF_RB_NO_WAKEUP,
    btf_maps::{ArrayOfMaps, RingBuf},
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_smp_processor_id},
    macros::{btf_map, map},
    maps::HashMap,
};
use weft_abi::{
    events::{
        COUNTER_ROW, COUNTERS, Counter, EventConfig, FILTER_CGROUP, FILTER_COMM, FILTER_PID, Header,
        Source,
    },
    syscall::MAX_CPUS,
};

use crate::counters::{self, Counters};

#[unsafe(no_mangle)]
static EVENT_CONFIG: EventConfig = EventConfig::ALL;

/// One ring per CPU; user space creates the rings at the size asked for.
#[btf_map]
static EVENT_RINGS: ArrayOfMaps<RingBuf<u8, { 1 << 16 }>, { MAX_CPUS as usize }> =
    ArrayOfMaps::new();

#[btf_map]
static EVENT_COUNTERS: Counters = Counters::new();

#[map]
static EVENT_PIDS: HashMap<u32, u8> = HashMap::with_max_entries(1024, 0);

/// The configuration, read in place (see `syscall::config`).
#[inline(always)]
pub fn config() -> &'static EventConfig {
    // SAFETY: the pointer is to a static, so it is valid for 'static.
    unsafe { &*core::ptr::read_volatile(&&raw const EVENT_CONFIG) }
}

#[inline(always)]
pub fn count(source: Source, counter: Counter) {
    let slot = source as u32 * COUNTERS + counter as u32;
    counters::add(&EVENT_COUNTERS, COUNTER_ROW, slot, 1);
}

/// Whether the current thread (of thread group `tgid`) passes every filter.
#[inline(always)]
pub fn wants_current(tgid: u32) -> bool {
    let config = config();
    if tgid == config.ignore_tgid {
        return false;
    }
    // SAFETY: the value is only tested for presence.
    if config.flags & FILTER_PID != 0 && unsafe { EVENT_PIDS.get(&tgid) }.is_none() {
        return false;
    }
    if config.flags & FILTER_COMM != 0 {
        match bpf_get_current_comm() {
            Ok(comm) if comm == config.comm => {}
            _ => return false,
        }
    }
    // SAFETY: helper without preconditions.
    config.flags & FILTER_CGROUP == 0 || unsafe { bpf_get_current_cgroup_id() } == config.cgroup
}

/// A record whose first field is a [`Header`].
pub trait Event: Copy {
    fn header_mut(&mut self) -> &mut Header;
}

/// Fills `event`'s header and counts it as seen; returns this CPU.
#[inline(always)]
pub fn stamp<T: Event>(source: Source, event: &mut T) -> u32 {
    // SAFETY: helper without preconditions.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let seen = source as u32 * COUNTERS + Counter::Seen as u32;
    counters::add_on(&EVENT_COUNTERS, cpu, COUNTER_ROW, seen, 1);
    *event.header_mut() = Header {
        source: source as u32,
        cpu,
    };
    cpu
}

/// Writes `event` into this CPU's ring, filling its header, and counts it.
#[inline(always)]
pub fn emit<T: Event + 'static>(source: Source, mut event: T) {
    let cpu = stamp(source, &mut event);
    let Some(ring) = EVENT_RINGS.get(cpu) else {
        count(source, Counter::RingFull);
        return;
    };
    match ring.reserve_untyped::<T>(0) {
        Some(mut entry) => {
            entry.write(event);
            // No wakeup per record: user space drains on a timer.
            entry.submit(BPF_RB_NO_WAKEUP.into());
        }
        None => count(source, Counter::RingFull),
    }
}

/// Copies `record`, whose header [`stamp`] filled on `cpu`, into that CPU's
/// ring: for records whose length is known only at run time.
#[inline(always)]
pub fn emit_bytes(source: Source, cpu: u32, record: &[u8]) {
    let sent = EVENT_RINGS
        .get(cpu)
        .is_some_and(|ring| ring.output_untyped::<[u8]>(record, BPF_RB_NO_WAKEUP.into()).is_ok());
    if !sent {
        count(source, Counter::RingFull);
    }
}
