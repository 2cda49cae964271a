//! `weft pt ...`: Intel PT on the command line, over the `weft-pt` crate.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

use crate::cli::{PtCommand, PtDumpArgs};

pub fn run(command: &PtCommand) -> anyhow::Result<ExitCode> {
    match command {
        PtCommand::Dump(args) => dump(args),
    }
}

fn dump(args: &PtDumpArgs) -> anyhow::Result<ExitCode> {
    let trace =
        std::fs::read(&args.trace).with_context(|| format!("reading {}", args.trace.display()))?;
    let options = weft_pt::dump::Options {
        offsets: !args.no_offset,
        sync: !args.no_sync,
        errata: args.cpu.map(weft_pt::Errata::for_cpu).unwrap_or_default(),
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let errors = weft_pt::dump::dump(&trace, options, &mut out)?;
    out.flush()?;
    if errors > 0 {
        eprintln!("weft: {}: {errors} decoding error(s)", args.trace.display());
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
