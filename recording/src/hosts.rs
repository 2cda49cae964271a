//! What hosts exchange about each other: a connection's two ends as one
//! host sees them, and wall-clock times, which every host converts to and
//! from its own `CLOCK_MONOTONIC` with one fixed offset.

use serde::{Deserialize, Serialize};

/// One end of a connection: an IPv4 address (host order) and a port.
pub type End = (u32, u16);

/// A connection as one host sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Conn {
    /// This host's end.
    pub local: End,
    /// The other host's.
    pub remote: End,
}

impl Conn {
    /// The same connection as the other end sees it.
    #[must_use]
    pub fn reversed(self) -> Self {
        Self {
            local: self.remote,
            remote: self.local,
        }
    }
}

/// `CLOCK_REALTIME` minus `CLOCK_MONOTONIC`, taken once: every wall time
/// this recorder sends or compares (windows, segments) is converted alike,
/// where each fresh reading would differ by the time between its two clock
/// reads.
fn wall_offset() -> i64 {
    static OFFSET: std::sync::OnceLock<i64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(weft_capture::metadata::wall_offset_ns)
}

/// Wall-clock ns since the epoch of monotonic time `mono`.
pub fn wall(mono: u64) -> i64 {
    i64::try_from(mono)
        .unwrap_or(i64::MAX)
        .saturating_add(wall_offset())
}

/// Monotonic ns of wall-clock time `wall_ns`.
pub fn monotonic(wall_ns: i64) -> u64 {
    u64::try_from(wall_ns.saturating_sub(wall_offset())).unwrap_or(0)
}

/// This host's wall clock, ns since the epoch.
pub fn now_wall() -> i64 {
    wall(weft_store::now_ns())
}
