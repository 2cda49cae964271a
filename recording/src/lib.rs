//! weft's recording side: what happens to records once `weft-kernel` has
//! drained them, up to the store.
//!
//! Must not depend on the command line (clap): the binary resolves its
//! arguments into the plain values these modules take. Nor on Intel PT
//! decoding: decoded calls arrive as [`pt_calls::Decoded`].
//!
//! # Overview
//!
//! - [`record`]: a recording from its [`record::Plan`]: probes, store,
//!   sockets, the session, and the report of what was kept and lost.
//! - [`replay`]: a recording played into a new capture as if its records
//!   were arriving now, for the terminal UI.
//! - [`session`]: the capture loop `stat` and `record` share: drain every
//!   probe's rings on a timer, tick, stop, detach, account for every record;
//!   [`probe`]: the shape its probes share, whatever their family.
//! - [`stat`]: per-syscall counts, rates and latency percentiles per
//!   interval, as `weft stat` prints them.
//! - [`capture`]: a capture directory as weft writes it, and the catalog
//!   queries bind to; [`sources`]: each event source's store schema and
//!   what its columns mean; [`registry`]: the names of weft's own sources;
//!   [`tasks`]: thread names read back; [`pt_calls`]: decoded Intel PT
//!   calls as a source.
//! - [`trigger`]: conditions tested on every record stored; a match keeps
//!   the window around it (and may take Intel PT, through the binary);
//!   [`extract`]: a kept window copied into a capture of its own.
//! - [`app`]: records applications push through a Unix socket;
//!   [`live`]: queries, manual triggers and PT imports asked of the running
//!   recorder through its socket; [`metrics`]: its counters and latency
//!   quantiles for Prometheus; [`socket`]: weft's Unix sockets in
//!   `/run/weft`.
//! - [`feed`]: live captures and recordings as the terminal UI reads them.
//! - [`answer`]: a query answered on a capture directory and printed;
//!   [`info`]: what a capture holds, as `weft info` shows it.
//! - [`oneliner`]: a bpftrace-style one-liner run on the kernel's events,
//!   its maps printed, its matched events optionally kept in a capture;
//!   [`output`]: the file a user names for its output, opened safely.

pub mod answer;
pub mod app;
pub mod capture;
pub mod extract;
pub mod feed;
pub mod info;
pub mod live;
pub mod metrics;
pub mod oneliner;
pub mod output;
pub mod probe;
pub mod pt_calls;
pub mod record;
pub mod registry;
pub mod replay;
pub mod session;
pub mod socket;
pub mod sources;
pub mod stat;
pub mod tasks;
pub mod trigger;
