//! `cargo xtask bench`: benchmarks that report ratios against a baseline
//! measured in the same run.

use anyhow::Result;

#[derive(clap::Subcommand)]
pub enum Bench {}

pub fn run(bench: &Bench) -> Result<()> {
    match *bench {}
}
