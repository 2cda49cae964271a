//! weft's ingest path: the records drained from the kernel's per-CPU BPF
//! ring buffers (`weft_abi::ring`) go into the store with one copy.
//!
//! Depends on `weft-abi` (the records' layout and the rings' reading end)
//! and `weft-store` only: no aya, no queries, no command line.
//!
//! # Overview
//!
//! - [`syscalls`]: the `syscalls` source's store schema and the sink that
//!   appends the syscall probe's records; [`tasks`]: thread names, noted
//!   once per thread.
//!
//! It is not: the eBPF loader (aya, in `weft-kernel`), nor the recording
//! session's policy (triggers, sockets), which call into it. It needs no
//! root: its benchmark (`cargo xtask bench ingest`) runs the real path on
//! rings in memory.
#![deny(missing_docs)]

pub mod schema;
pub mod syscalls;
pub mod tasks;
