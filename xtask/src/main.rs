//! `cargo xtask`: weft's build, setup, test and benchmark automation.
//!
//! Each subcommand lives in its own module; the doc comments below are the help.

mod bench;
mod bench_budget;
mod bench_flood;
mod bench_live;
mod bench_loop;
mod bench_oneliners;
mod bench_probe;
mod bench_pt;
mod bench_queries;
mod bench_sources;
mod bench_triggers;
mod bench_tui;
mod build_ebpf;
mod exec;
mod fuzz_pt;
mod gen_syscalls;
#[cfg(test)]
mod imports;
mod install;
#[cfg(test)]
mod layers;
mod run;
mod setup;
mod test;
mod vm;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "xtask",
    about = "weft's build, setup, test and bench automation"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install what a fresh Debian 12 machine lacks to build, run and test weft (idempotent).
    Setup,
    /// Build the eBPF object with Debian's rustc and bpf-linker.
    BuildEbpf,
    /// Build weft (installing the toolchain if needed, not the test tools) and run it with the
    /// given arguments.
    Run(run::Options),
    /// Build weft and put it, its man pages and shell completions under a
    /// prefix (/usr/local unless `--prefix`).
    Install(install::Options),
    /// Setup, build, and run every test: unit, CLI, and root kernel tests.
    Test(test::Options),
    /// Boot other kernels (Debian 6.1, 6.12, ...) in qemu and run the root tests inside each.
    VmTest(vm::Options),
    /// Benchmarks that report ratios against a baseline measured in the same run.
    #[command(subcommand)]
    Bench(bench::Bench),
    /// The PT flow decoder against a model (random programs, the path they
    /// took) and libipt, for a time budget.
    FuzzPt(fuzz_pt::Options),
    /// Regenerate `abi/src/syscall_names.rs` from the x86-64 UAPI header.
    GenSyscalls(gen_syscalls::Options),
    /// Write weft's man pages into `target/man` (from its clap definitions).
    Man,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Setup => setup::run(),
        Command::BuildEbpf => build_ebpf::run().map(|path| println!("{}", path.display())),
        Command::Run(options) => run::run(&options),
        Command::Install(options) => install::run(&options),
        Command::Test(options) => test::run(&options),
        Command::VmTest(options) => vm::run(&options),
        Command::Bench(bench) => bench::run(&bench),
        Command::FuzzPt(options) => fuzz_pt::run(&options),
        Command::GenSyscalls(options) => gen_syscalls::run(&options),
        Command::Man => run::man(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error:#}");
            ExitCode::from(2)
        }
    }
}
