//! One query over many hosts' captures (`weft query --fleet`), exact, with
//! no host sending its records.
//!
//! Each host answers with mergeable aggregates ([`wire::Part`]): counts,
//! sums and extremes add up, and a quantile's values are counted in
//! log-spaced bins that every host draws alike ([`wire::bin_of`]). The
//! asker merges the bins, picks the bin that holds each quantile's rank,
//! and asks each host only for its values inside that bin; when a bin
//! holds too many values to send, hosts count them per piece of the bin
//! and the asker narrows to the piece that holds the rank, round by round.
//! The transport is the caller's ([`Host`]): a capture directory read in
//! this process, or a recorder at a peer address.

mod host;
mod merge;
pub mod wire;

pub use host::reply;
pub use merge::{FleetAnswer, Host, Traffic, answer};
