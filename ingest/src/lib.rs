//! weft's ingest path: records leave the kernel's per-CPU BPF ring buffers
//! in bounded batches and go into the store with one copy.
//!
//! Depends on `weft-probes` (the records' layout) and `weft-store` only: no
//! aya (a ring is mapped from its file descriptor), no queries, no command line.
//!
//! # Overview
//!
//! - [`ring`]: the consumer side of a BPF ring buffer, mapped from its map's
//!   file descriptor (or laid out in memory for tests and benchmarks), read
//!   a batch at a time.
//! - [`syscalls`]: the `syscalls` source's store schema and the sink that
//!   appends the syscall probe's records; [`tasks`]: thread names, noted
//!   once per thread.
//!
//! ```
//! use weft_ingest::ring::Ring;
//! let mut ring = Ring::in_memory(4096);
//! assert!(ring.push(b"a record"));
//! let mut seen = Vec::new();
//! let drained = ring.drain(usize::MAX, |record| seen.push(record.to_vec()));
//! assert_eq!((drained.records, seen), (1, vec![b"a record".to_vec()]));
//! ```
//!
//! It is not: the eBPF loader (aya, in `agent/`), nor the recording
//! session's policy (triggers, sockets), which call into it. It needs no
//! root: its benchmark (`cargo xtask bench ingest`) runs the real path on
//! rings in memory.
#![deny(missing_docs)]

pub mod ring;
pub mod syscalls;
pub mod tasks;
