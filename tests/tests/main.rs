//! weft's integration tests, one binary, one module per area.
//!
//! The host runs them all; the VMs that boot other kernels run only the
//! modules that depend on the kernel, all but `pt`, `faults`, `query` and
//! `errors`, and the few `trace` tests of the language alone (`HOST_ONLY`
//! in `xtask/src/vm.rs`): a test that exercises the kernel belongs in
//! another module.

// `weft stat` on the running kernel: exact counts, loss accounting, latency, filters.
mod stat;
// `weft record` and `weft info`: captures hold exactly what happened and reopen.
mod record;
// The fastest one-core syscall flood under `weft record`: nothing lost, or
// every loss counted and the stop on time.
mod flood;
// `weft query` on recordings: known facts, exact percentiles, errors, live reads.
mod query;
// `weft doctor`: what the kernel offers, with a real probe load.
mod doctor;
// Bad input and missing privileges: one-line errors, non-zero exits
// (command lines and captures, never a kernel's answer).
mod errors;
// The other sources (sched, ...): each records a known workload exactly.
mod sources;
// `weft trace`: bpftrace one-liners, compared with bpftrace; broken programs.
mod trace;
// `weft tui` in a real terminal (tmux): live and on a recording.
mod tui;
// Triggers: a ring that keeps the windows around anomalies.
mod triggers;
// Many hosts as network namespaces: triggers that travel, fleet queries.
mod fleet;
// `weft pt`: PT decoding through the binary; capture's answer without PT.
mod pt;
// Damaged captures: every command answers as before or fails clearly.
mod faults;
// `| explain` on workloads with a known cause of their slow calls.
mod explain;
// weft left running as root: foreign directories refused, a full disk counted.
mod safety;
