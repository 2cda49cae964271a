//! The contract between weft's eBPF programs and user space: the `#[repr(C)]`
//! records the kernel side emits, the configuration it reads, the counters it
//! keeps, and (with `user`) the reading end of the ring buffers it fills.
//!
//! Depends on no other weft crate (aya only with the `pod` feature): the eBPF
//! programs and every user-space crate build on it, so it must stay below them.
//!
//! # Overview
//!
//! Each probe family has one module here with the same name as its program in
//! `ebpf/` and its consumer in `kernel/`. Everything is `no_std` and
//! dependency-free so that the eBPF crate can use it; the `user` feature adds
//! the x86-64 syscall name table and [`ring`], the consumer side of a BPF ring
//! buffer laid out as the kernel lays it out; `pod` adds the `aya::Pod` impls
//! the loader needs (only `weft-kernel` links aya).
//!
//! ```
//! use weft_abi::syscall::{SyscallEvent, EVENT_SIZE};
//! assert_eq!(core::mem::size_of::<SyscallEvent>(), EVENT_SIZE);
//! ```
#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "user")]
extern crate std;

pub mod args;
pub mod block;
pub mod conns;
pub mod counters;
pub mod events;
#[cfg(feature = "user")]
pub mod mapping;
pub mod net;
pub mod oneliner;
pub mod pagecache;
#[cfg(feature = "user")]
pub mod ring;
pub mod sched;
pub mod stacks;
pub mod switch;
pub mod syscall;
#[cfg(feature = "user")]
pub mod syscall_names;
pub mod tracefs;

/// A task name as the kernel keeps it (`task_struct::comm`): at most 15
/// bytes, NUL-padded to 16, as the programs' comm filters compare it.
#[must_use]
pub fn comm_bytes(comm: &str) -> [u8; 16] {
    let mut bytes = [0; 16];
    let len = comm.len().min(15);
    bytes[..len].copy_from_slice(&comm.as_bytes()[..len]);
    bytes
}
