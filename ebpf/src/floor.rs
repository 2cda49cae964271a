//! Empty programs on the hooks the syscall probe can use. They measure the
//! floor — what merely being attached costs — for `cargo xtask bench
//! probe-effect`, and compare the hook kinds. weft itself never loads them.

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
