//! `cargo xtask bench`: benchmarks that report ratios against a baseline
//! measured in the same run, with min/median/max over several runs.

use std::process::Command;

use anyhow::Result;

use crate::{
    bench_loop::Loop,
    exec::{exec, workspace_root},
};

#[derive(clap::Subcommand)]
pub enum Bench {
    /// Cost per syscall: untraced, under `weft stat`, under bpftrace, and with
    /// empty programs on the same hooks (the floor).
    ProbeEffect(crate::bench_probe::ProbeEffect),
    /// Store ingest against a raw file append, and query latency over 60 s
    /// of a 1 M records/s source (needs no root).
    Store {
        /// Smaller data: a quick check rather than the reported figures.
        #[arg(long)]
        quick: bool,
    },
    /// The ring -> store path of `weft record` on rings in memory, stage
    /// by stage, against the store's plain append (needs no root).
    Ingest {
        /// Fewer records: a quick check rather than the reported figures.
        #[arg(long)]
        quick: bool,
    },
    /// A one-core getppid flood under `weft stat`, `weft record` and the
    /// live UI: syscalls made, kept, received, lost, and weft's CPU.
    Flood(crate::bench_flood::Options),
    /// The Loom case studies: record RocksDB and Redis, then time each
    /// question with weft's indexes, a weft full scan and DuckDB on Parquet.
    #[expect(clippy::doc_markdown, reason = "product names in help text")]
    Queries(crate::bench_queries::Options),
    /// Every event source: the rate one core can generate for each, what
    /// weft received and lost, its CPU use, and the probe effect of all
    /// sources on a getppid loop and on Redis over `lo`.
    Sources(crate::bench_sources::Options),
    /// One-liners: the getppid loop untraced, under bpftrace and under
    /// `weft trace` for a count by comm and an enter/exit latency histogram,
    /// and each tool's start-up time to its first event.
    Oneliners(crate::bench_oneliners::Options),
    /// The terminal UI: the getppid loop under headless `weft record` and
    /// under `weft tui` in tmux, its frame times and its threads' CPU.
    Tui(crate::bench_tui::Options),
    /// Answering while recording: a live query's time inside `weft record`
    /// and the UI's query worker's CPU, against a baseline binary.
    Live(crate::bench_live::Options),
    /// Triggers: the getppid loop under `weft record` without and with three
    /// triggers, and the time from a matching record to its pinned window.
    Triggers(Loop),
    /// The disk budget against a trigger that matches every record of a
    /// long one-core flood (the soak): the peak disk use against the
    /// budget and one segment, firings, capped windows, released pins.
    Budget(crate::bench_budget::Options),
    /// Intel PT decoding: weft against libipt on the same large synthetic
    /// trace, packets/s, MiB/s and instructions/s (needs no PT hardware).
    Pt(crate::bench_pt::Options),
}

pub fn run(bench: &Bench) -> Result<()> {
    match bench {
        Bench::ProbeEffect(options) => crate::bench_probe::run(options),
        Bench::Queries(options) => crate::bench_queries::run(options),
        Bench::Sources(options) => crate::bench_sources::run(options),
        Bench::Oneliners(options) => crate::bench_oneliners::run(options),
        Bench::Tui(options) => crate::bench_tui::run(options),
        Bench::Live(options) => crate::bench_live::run(options),
        Bench::Triggers(options) => crate::bench_triggers::run(options),
        Bench::Budget(options) => crate::bench_budget::run(options),
        Bench::Pt(options) => crate::bench_pt::run(options),
        Bench::Flood(options) => crate::bench_flood::run(options),
        Bench::Store { quick } => cargo_bench("weft-store", "store", *quick),
        Bench::Ingest { quick } => cargo_bench("weft-ingest", "ingest", *quick),
    }
}

/// `cargo bench` of one crate's bench target, with `--quick` passed on.
fn cargo_bench(package: &str, bench: &str, quick: bool) -> Result<()> {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(workspace_root()).args([
        "bench",
        "--locked",
        "--package",
        package,
        "--bench",
        bench,
        "--",
    ]);
    if quick {
        cmd.arg("--quick");
    }
    exec(&mut cmd)
}
