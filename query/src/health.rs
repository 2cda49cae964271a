//! A capture's counters as its readers see them: what each source
//! received and lost, how far the drain lags, what the capture takes on
//! disk. The recorder fills them every second; the terminal UI and the
//! metrics endpoint show them beside the answers to queries.

/// The capture's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Health {
    /// Per source: records received and lost so far.
    pub sources: Vec<SourceHealth>,
    /// Longest time from a kernel record's timestamp to its arrival in the
    /// store, over the last second.
    pub drain_lag_ns: u64,
    /// Bytes the capture takes on disk.
    pub disk_bytes: u64,
    /// Kept windows (trigger pins) the disk budget released, the oldest,
    /// past their share of it.
    pub pins_released: u64,
    /// weft's own CPU time since the capture began, in thousandths of one
    /// CPU (every thread: draining, storing, the UI, its queries); `None`
    /// where no weft is recording (a capture read back).
    pub cpu_permille: Option<u64>,
    /// The syscall probe's programs' time per syscall, in ns, from the
    /// runs sampled with the kernel's BPF statistics on; `None` without a
    /// sample (or a syscall probe).
    pub bpf_ns_per_syscall: Option<u64>,
    /// The capture has stopped (a live recorder was signalled or failed):
    /// its readers stop asking.
    pub ended: bool,
}

/// One source's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceHealth {
    /// The source's name, as queries name it.
    pub name: String,
    /// Records that reached the store.
    pub received: u64,
    /// Records lost on the way, for any reason.
    pub lost: u64,
}
