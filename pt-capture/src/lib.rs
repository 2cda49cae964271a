//! weft's Intel PT capture: one window of PT over the CPUs a process or
//! cgroup may run on, with the context switches on them, written to a new
//! directory; and the decoding of such a directory (or a perf.data file,
//! or a raw trace) whole, each trace with its code, clock and threads,
//! over `weft-pt`'s decoder.
//!
//! All of weft's PT hardware access is here: the PMU's capabilities, the
//! `perf_event` per CPU and its AUX area, the window; `weft-pt` is a pure
//! decoder that makes no system call. The context switches come from one
//! of weft's eBPF sources (`weft-kernel`). Must not depend on the command
//! line or the store.
//!
//! # Overview
//!
//! - [`caps`]: what the CPU's PT can do, from sysfs.
//! - [`window`]: the plan of a window and the window itself, over any
//!   [`window::Traced`] event; [`perf_event`] is the kernel's.
//! - [`take`]: what to trace ([`take::Options`]), and the window taken.
//! - [`switches`]: the context switches recorded while PT runs.
//! - [`dir`]: the capture directory, written once and read back whole.
//! - [`error`]: what any of it can fail with.
//! - [`decode`]: a recording decoded whole (a raw trace, perf.data or a
//!   capture directory), each trace with its code, clock and threads.

pub mod caps;
pub mod decode;
pub mod dir;
pub mod error;
pub mod perf_event;
pub mod switches;
pub mod take;
pub mod window;
