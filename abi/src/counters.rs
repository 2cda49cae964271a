//! Counters the BPF programs keep per CPU: an mmapable array of `u64`, a
//! row of slots per possible CPU (the CPU's number times the row, plus the
//! counter). User space reads them from memory, never through `bpf()`: a
//! map call stops the kernel running classic tracepoint and kprobe
//! programs on its CPU while it lasts (`bpf_prog_active`), so reading
//! counters so would lose the very events they count.

/// Slots in each CPU's row of an array holding `counters` counters: whole
/// 64-byte cache lines, so that no two CPUs write to one line.
#[must_use]
pub const fn row(counters: u32) -> u32 {
    counters.next_multiple_of(8)
}
