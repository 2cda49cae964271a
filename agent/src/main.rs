//! `weft`: eBPF-first observability for Linux. This file only parses arguments
//! and maps the outcome to an exit code: 0 ok, 2 error.

mod cli;
mod ebpf;
mod stat;
mod syscall;
mod tracefs;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match &cli.command {
        cli::Command::Stat(args) => stat::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("weft: {error:#}");
            ExitCode::from(2)
        }
    }
}
