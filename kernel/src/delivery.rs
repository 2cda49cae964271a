//! What one ring delivered: records produced, drained and dropped because
//! the ring was full (per CPU). Syscalls and the other sources share it;
//! each adds the counters of its own kind of loss. Events the kernel ran
//! no program for (`skipped`) were never produced: they are counted apart.

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Records the kernel side produced (emitted or dropped).
    pub seen: u64,
    /// Records drained by weft.
    pub received: u64,
    /// Records dropped because the ring was full.
    pub ring_full: u64,
    pub ring_full_per_cpu: Vec<u64>,
    /// The fullest any of its rings came, in percent (read as each batch
    /// is consumed): how near it came to losing records (`--ring-size`).
    pub ring_peak_percent: u8,
    /// Events whose program the kernel did not run (see
    /// [`crate::ebpf::skipped`]), lost before any record was made.
    pub skipped: u64,
}

impl Delivery {
    /// From records drained, the per-CPU counts of produced and ring-full
    /// records, and the rings' peak fill.
    pub fn new(
        received: u64,
        seen_per_cpu: &[u64],
        ring_full_per_cpu: Vec<u64>,
        ring_peak_percent: u8,
    ) -> Self {
        Self {
            seen: seen_per_cpu.iter().sum(),
            received,
            ring_full: ring_full_per_cpu.iter().sum(),
            ring_full_per_cpu,
            ring_peak_percent,
            skipped: 0,
        }
    }

    /// With `skipped` events the kernel ran no program for.
    #[must_use]
    pub fn with_skipped(self, skipped: u64) -> Self {
        Self { skipped, ..self }
    }

    /// Whether every record is accounted for: `received + ring_full == seen`.
    pub fn balanced(&self) -> bool {
        self.received + self.ring_full == self.seen
    }

    /// Says so on stderr when records of `name` are unaccounted for
    /// (never expected).
    pub fn report_mismatch(&self, name: &str) {
        if !self.balanced() {
            log::warn!(
                "weft: {name}: accounting mismatch: received {} + ring full {} != seen {}",
                self.received,
                self.ring_full,
                self.seen,
            );
        }
    }
}
