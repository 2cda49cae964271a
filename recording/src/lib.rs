//! weft's recording side: what happens to records once `weft-kernel` has
//! drained them, up to the store.
//!
//! Must not depend on the command line (clap): the binary resolves its
//! arguments into the plain values these modules take. Nor on Intel PT
//! decoding: decoded calls arrive as `weft_capture::pt_calls::Decoded`.
//!
//! # Overview
//!
//! - [`record`]: a recording from its [`record::RecordPlan`]: probes, store,
//!   sockets, the session, and the report of what was kept and lost;
//!   [`recorder`]: its consumer, the store plus the intake of each record
//!   and the stages of each tick; [`error`]: what any of it can fail with.
//! - [`session`]: the capture loop `stat` and `record` share: drain every
//!   probe's rings on a timer, tick, stop, detach, account for every record;
//!   [`probe`]: the shape its probes share, whatever their family.
//! - [`stat`]: per-syscall counts, rates and latency percentiles per
//!   interval, as `weft stat` prints them.
//! - What reads a capture (its directory and `weft.json`, the sources'
//!   schemas, the catalog, answers, the UI's feeds) is `weft-capture`;
//!   [`hooks`] finds each of its sources' kernel side.
//! - [`trigger`]: conditions tested on every record stored; a match keeps
//!   the window around it (and may take Intel PT, through the binary).
//! - [`app`]: records applications push through a Unix socket;
//!   [`live`]: queries, manual triggers and PT imports asked of the running
//!   recorder through its socket; [`metrics`]: its counters and latency
//!   quantiles for Prometheus, with [`histogram`]'s latency histograms;
//!   [`peers`]: the peer port other hosts' weft
//!   ask fleet queries and firings on, [`travel`]: firings sent along a
//!   thread's connections ([`hosts`]: connections and wall-clock times as
//!   hosts exchange them), [`segments`]: the clocks of two hosts bounded
//!   by the TCP segments both saw; [`socket`]: weft's Unix sockets in `/run/weft`.
//! - [`oneliner`]: a bpftrace-style one-liner run on the kernel's events,
//!   its maps printed, its matched events optionally kept in a capture;
//!   [`output`]: the file a user names for its output, opened safely.

pub mod app;
pub mod command;
pub mod error;
pub mod exposition;
mod files;
mod frames;
pub mod histogram;
pub mod hosts;
pub mod live;
pub mod losses;
pub mod metrics;
pub mod oneliner;
pub mod output;
pub mod peers;
pub mod probe;
pub mod record;
pub mod recorder;
pub mod segments;
pub mod session;
pub mod socket;
pub mod stat;
pub mod travel;
pub mod trigger;

use weft_capture::sources::Spec;
use weft_kernel::source::SourceHooks;

/// The kernel side of every source `weft_capture::sources` describes.
const HOOKS: [&SourceHooks; 8] = [
    &weft_kernel::source::SCHED,
    &weft_kernel::source::BLOCK,
    &weft_kernel::source::PAGECACHE,
    &weft_kernel::source::NET,
    &weft_kernel::source::SWITCH,
    &weft_kernel::source::CONNS,
    &weft_kernel::source::STACKS,
    &weft_kernel::source::ARGS,
];

/// The kernel side of `spec`: its programs and attach points.
pub fn hooks(spec: &Spec) -> &'static SourceHooks {
    HOOKS
        .into_iter()
        .find(|h| h.name == spec.name)
        .expect("every source described has a kernel side")
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_source_has_its_kernel_side_with_the_same_record() {
        for spec in weft_capture::sources::ALL {
            assert_eq!(super::hooks(spec).size, spec.size, "{}", spec.name);
        }
        assert_eq!(super::HOOKS.len(), weft_capture::sources::ALL.len());
    }
}
