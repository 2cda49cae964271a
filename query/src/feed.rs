//! A capture as the terminal UI reads it: a live capture and a recording
//! both implement [`Feed`], so every view works on either. It lives here,
//! beside the answers it returns, so that the recording side implements it
//! without depending on the UI.

use crate::{Answer, health::Health};

/// A capture the UI can ask.
pub trait Feed: Send + Sync {
    /// Answers a query in weft's query language (docs/query.md); an error
    /// is rendered with a caret under the offending token.
    fn ask(&self, query: &str) -> Result<Answer, String>;

    /// Counters of the capture as of now.
    fn health(&self) -> Health;

    /// The sources and their fields, for completion in the query bar.
    fn schema(&self) -> Vec<(String, Vec<String>)>;

    /// The arrival times of the first and last record of a recording, in
    /// `CLOCK_MONOTONIC` ns; `None` for a live capture, whose present is
    /// "now".
    fn range(&self) -> Option<(u64, u64)>;

    /// What to call the capture in the title line.
    fn title(&self) -> String;

    /// The offset from `CLOCK_MONOTONIC` to wall-clock time, when known.
    fn wall_offset(&self) -> Option<i64>;

    /// Starts an Intel PT capture of process `pid`, whose calls join the
    /// capture's `calls` source when decoded; says what it started, or
    /// why it cannot (no PT on this CPU, a recording).
    fn capture_pt(&self, pid: u32) -> Result<String, String> {
        let _ = pid;
        Err("PT captures need a live capture".into())
    }
}
