//! Empty programs on the hooks the syscall probe can use. They measure the
//! floor — what merely being attached costs — for `cargo xtask bench
//! probe-effect`, and compare the hook kinds; a pair that does only what
//! exact pairing needs is the floor weft's probe is held to; beside them,
//! one program per operation of the probe says what each costs. weft itself never loads them.

use aya_ebpf::{
    macros::{btf_tracepoint, raw_tracepoint, tracepoint},
    programs::{BtfTracePointContext, RawTracePointContext, TracePointContext},
};

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn floor_raw_enter(_ctx: RawTracePointContext) -> i32 {
    0
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn floor_raw_exit(_ctx: RawTracePointContext) -> i32 {
    0
}

#[btf_tracepoint(function = "sys_enter")]
pub fn floor_btf_enter(_ctx: BtfTracePointContext) -> i32 {
    0
}

#[btf_tracepoint(function = "sys_exit")]
pub fn floor_btf_exit(_ctx: BtfTracePointContext) -> i32 {
    0
}

#[tracepoint]
pub fn floor_tp_enter(_ctx: TracePointContext) -> u32 {
    0
}

#[tracepoint]
pub fn floor_tp_exit(_ctx: TracePointContext) -> u32 {
    0
}

/// The exact-pairing floor: what pairing every call exactly cannot do
/// without — an empty program on each hook, a clock read at each, and the
/// thread's slot found (made at the entry) in task storage. weft's syscall
/// probe is measured against this pair, since its two clock reads and two
/// storage gets alone cost more than the empty programs' margin allows.
mod pairing {
    use aya_ebpf::{
        helpers::bpf_ktime_get_ns,
        macros::{btf_map, raw_tracepoint},
        programs::RawTracePointContext,
    };

    use crate::task_storage::TaskStorage;

    #[btf_map]
    static PAIRING_STORAGE: TaskStorage<u64> = TaskStorage::new();

    #[raw_tracepoint(tracepoint = "sys_enter")]
    pub fn floor_pairing_enter(_ctx: RawTracePointContext) -> i32 {
        // SAFETY: helper without preconditions.
        let now = unsafe { bpf_ktime_get_ns() };
        if let Some(slot) = PAIRING_STORAGE.current(true) {
            // SAFETY: the task's own storage.
            unsafe { *slot = now };
        }
        0
    }

    /// Writes the duration back to the slot, as the probe clears its
    /// entry there, so the compiler keeps the read and the subtraction.
    #[raw_tracepoint(tracepoint = "sys_exit")]
    pub fn floor_pairing_exit(_ctx: RawTracePointContext) -> i32 {
        if let Some(slot) = PAIRING_STORAGE.current(false) {
            // SAFETY: helper without preconditions; the task's own storage.
            unsafe { *slot = bpf_ktime_get_ns().wrapping_sub(*slot) };
        }
        0
    }
}

/// One operation of the syscall probe each, on `sys_enter` beside
/// `floor_raw_enter`: what each costs per call is its run time above the
/// empty program's, measured side by side in one run.
mod costs {
    use aya_ebpf::{
        bindings::BPF_RB_NO_WAKEUP,
        btf_maps::RingBuf,
        helpers::{bpf_get_current_pid_tgid, bpf_get_smp_processor_id, bpf_ktime_get_ns},
        macros::{btf_map, map, raw_tracepoint},
        maps::PerCpuArray,
        programs::RawTracePointContext,
    };
    use weft_abi::syscall::{Batch, SyscallEvent};

    use crate::{syscall, task_storage::TaskStorage};

    #[btf_map]
    static COST_STORAGE: TaskStorage<u64> = TaskStorage::new();

    #[map]
    static COST_COUNTER: PerCpuArray<u64> = PerCpuArray::with_max_entries(1, 0);

    /// The loop runs on one CPU, so one batch serves.
    #[map]
    static COST_BATCH: PerCpuArray<Batch> = PerCpuArray::with_max_entries(1, 0);

    /// One page here, since every load of this object makes its maps;
    /// weft-floor makes it 16 MiB and drains it, so reserving never finds
    /// it full.
    #[btf_map]
    static COST_RING: RingBuf<SyscallEvent, 4096> = RingBuf::new();

    // The helpers are calls the compiler cannot remove, so their results
    // may go unused.

    #[raw_tracepoint(tracepoint = "sys_enter")]
    pub fn cost_pid_tgid(_ctx: RawTracePointContext) -> i32 {
        bpf_get_current_pid_tgid();
        0
    }

    #[raw_tracepoint(tracepoint = "sys_enter")]
    pub fn cost_ktime(_ctx: RawTracePointContext) -> i32 {
        // SAFETY: helper without preconditions.
        unsafe { bpf_ktime_get_ns() };
        0
    }

    #[raw_tracepoint(tracepoint = "sys_enter")]
    pub fn cost_cpu(_ctx: RawTracePointContext) -> i32 {
        // SAFETY: helper without preconditions.
        unsafe { bpf_get_smp_processor_id() };
        0
    }

    /// As the probe does at the entry: the thread's slot, made if missing.
    #[raw_tracepoint(tracepoint = "sys_enter")]
    pub fn cost_task_storage(_ctx: RawTracePointContext) -> i32 {
        if let Some(slot) = COST_STORAGE.current(true) {
            // SAFETY: the task's own storage.
            unsafe { *slot = 1 };
        }
        0
    }

    /// The per-CPU counter the probe bumps for each record.
    #[raw_tracepoint(tracepoint = "sys_enter")]
    pub fn cost_counter(_ctx: RawTracePointContext) -> i32 {
        if let Some(slot) = COST_COUNTER.get_ptr_mut(0) {
            // SAFETY: a valid, aligned u64 map value.
            unsafe {
                core::intrinsics::atomic_xadd::<
                    u64,
                    u64,
                    { core::intrinsics::AtomicOrdering::Relaxed },
                >(slot, 1)
            };
        }
        0
    }

    /// A record appended to a batch as the probe does, the batch sent to
    /// the ring once full.
    #[raw_tracepoint(tracepoint = "sys_enter")]
    pub fn cost_batch(_ctx: RawTracePointContext) -> i32 {
        if let Some(batch) = COST_BATCH.get_ptr_mut(0) {
            // SAFETY: this CPU's batch; nothing else uses it.
            syscall::append(unsafe { &mut *batch }, SyscallEvent::default(), || {
                Some(&COST_RING)
            });
        }
        0
    }

    /// One record reserved, written and submitted without a wakeup.
    #[raw_tracepoint(tracepoint = "sys_enter")]
    pub fn cost_ring(_ctx: RawTracePointContext) -> i32 {
        if let Some(mut entry) = COST_RING.reserve(0) {
            entry.write(SyscallEvent::default());
            entry.submit(BPF_RB_NO_WAKEUP.into());
        }
        0
    }
}
