//! Per-CPU counters in an mmapable array, a row of slots per CPU, which
//! user space reads from memory (see `weft_abi::counters`).

use aya_ebpf::{bindings::BPF_F_MMAPABLE, btf_maps::Array, helpers::bpf_get_smp_processor_id};

/// A counter array: one entry here; user space makes a row per possible CPU.
pub type Counters = Array<u64, 1, { BPF_F_MMAPABLE as usize }>;

/// Adds `n` to slot `slot` of this CPU's row (`row` slots long) of `counters`.
#[inline(always)]
pub fn add(counters: &Counters, row: u32, slot: u32, n: u64) {
    // SAFETY: no preconditions. A program does not migrate while it runs,
    // so the row stays this CPU's.
    let cpu = unsafe { bpf_get_smp_processor_id() };
    add_on(counters, cpu, row, slot, n);
}

/// [`add`] for a caller that has read this CPU's number, `cpu`, already.
#[inline(always)]
pub fn add_on(counters: &Counters, cpu: u32, row: u32, slot: u32, n: u64) {
    if let Some(slot) = counters.get_ptr_mut(cpu * row + slot) {
        // Atomic: a program may be preempted on this CPU by another that
        // counts in the same row. SAFETY: the slot is a valid, aligned u64
        // map value.
        unsafe {
            core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
                slot, n,
            )
        };
    }
}
