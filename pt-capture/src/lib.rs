//! weft's Intel PT capture: one window of PT over the CPUs a process or
//! cgroup may run on, with the context switches on them, written to a new
//! directory; and the decoding of such a directory (or a perf.data file,
//! or a raw trace) whole, each trace with its code, clock and threads,
//! over `weft-pt`'s decoder.
//!
//! Beside `weft-pt` (decoding, and the `perf_event` plumbing of a window)
//! rather than in it, because the context switches come from one of weft's
//! eBPF sources (`weft-kernel`), and `weft-pt` knows no eBPF. Must not
//! depend on the command line or the store.
//!
//! # Overview
//!
//! - [`take`]: what to trace ([`take::Options`]), and the window itself.
//! - [`switches`]: the context switches recorded while PT runs.
//! - [`dir`]: the capture directory, written once and read back whole.
//! - [`decode`]: a recording decoded whole (a raw trace, perf.data or a
//!   capture directory), each trace with its code, clock and threads.

pub mod decode;
pub mod dir;
pub mod switches;
pub mod take;
