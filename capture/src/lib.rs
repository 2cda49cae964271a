//! A weft capture read: what every asker of a capture shares, whether
//! the capture is being recorded now or was recorded long ago.
//!
//! Must not depend on the kernel side (`weft-kernel`, aya), the command
//! line (clap) or Intel PT decoding: `weft query`, `info`, `export` and
//! the UI's recording view read captures on machines that never load an
//! eBPF program. `weft-recording` writes captures with what is here.
//!
//! # Overview
//!
//! - [`capture`]: a capture directory as weft writes it (the disk
//!   reserve, a new session) and the catalog queries bind to;
//!   [`metadata`]: `weft.json`, typed, and its checksum;
//!   [`sources`]: each event source's store schema and what its columns
//!   mean; [`registry`]: the names of weft's own sources; [`tasks`]:
//!   thread names read back; [`pt_calls`]: decoded Intel PT calls as a
//!   source.
//! - [`open`]: a capture opened for reading, its catalog kept between
//!   questions; [`answer`]: a query answered on it and printed;
//!   [`info`]: what a capture holds, as `weft info` shows it; [`fleet`]:
//!   a capture as one host of a query over many (`weft query --fleet`).
//! - [`extract`]: a kept window copied into a capture of its own;
//!   [`replay`]: a recording played into a new capture as if its records
//!   were arriving now, for the terminal UI.
//! - [`feed`]: live captures and recordings as the terminal UI reads them;
//!   [`fleet_feed`]: several hosts' captures as one, on one clock.
//! - [`error`]: what any of it can fail with.

pub mod answer;
pub mod capture;
pub mod diff;
pub mod error;
pub mod extract;
pub mod feed;
pub mod fleet;
pub mod fleet_feed;
pub mod info;
pub mod metadata;
pub mod open;
pub mod pt_calls;
pub mod registry;
pub mod replay;
pub mod sources;
pub mod tasks;
pub mod usage;

pub use error::{Error, Result};
