//! weft's kernel side: loads its eBPF objects, attaches their programs,
//! and drains the rings they fill.
//!
//! Must not depend on the command line (clap), the store or the query
//! language: callers hand it plain options (filters, ring sizes, which
//! sources) and take records and loss counters back.
//!
//! # Overview
//!
//! - [`ebpf`]: the embedded objects, privileges, tracefs, the `bpf()` call.
//! - [`rings`]: the per-CPU ring arrays, made while the object loads.
//! - [`syscall`]: the syscall probe, and [`batches`], the records its CPUs
//!   gather before sending; [`events`]: the other event sources,
//!   whose programs and attach points [`source`] lists; [`tc`] and
//!   [`clsact`]: the packet source's classifiers on network interfaces.
//! - [`oneliner`]: the one-liners' kernel side: what the kernel offers their
//!   checker, and the generic programs that run them.
//! - [`delivery`]: what a ring delivered and lost.
//! - [`doctor`]: what this kernel and process offer weft, checked.

pub mod batches;
pub mod clsact;
pub mod counters;
pub mod delivery;
pub mod doctor;
pub mod ebpf;
pub mod error;
pub mod events;
pub mod oneliner;
pub mod rings;
pub mod source;
pub mod syscall;
pub mod tc;
