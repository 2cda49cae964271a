//! `weft trace`: bpftrace-style one-liners. The arguments become plain
//! [`Options`], which `weft_recording::oneliner` runs.

use std::process::ExitCode;

use anyhow::{Context as _, Result};
use weft_oneliner::Format;
use weft_recording::oneliner::{self, Options};

use crate::cli::{TraceArgs, TraceFormat};

pub fn run(args: &TraceArgs) -> Result<ExitCode> {
    oneliner::run(Options {
        text: program_text(args)?,
        command: args.command.clone(),
        format: match args.format {
            TraceFormat::Text => Format::Text,
            TraceFormat::Json => Format::Json,
            TraceFormat::Folded => Format::Folded,
        },
        explain: args.explain,
        ring_bytes: u32::try_from(args.ring_size.next_power_of_two())
            .context("--ring-size is too large")?,
        store: args.store.clone(),
        symbols: args.symbols.finder(),
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The program: `-e`'s text, or PROGRAM's, or when PROGRAM names a file
/// (a script such as bpftrace's tools, `weft trace opensnoop.bt`) its
/// contents, as `bpftrace FILE` reads it.
fn program_text(args: &TraceArgs) -> Result<String> {
    if let Some(text) = &args.expression {
        return Ok(text.clone());
    }
    let program = args.program.as_deref().context("no program given")?;
    let path = std::path::Path::new(program);
    if !program.contains(['{', '\n']) && path.is_file() {
        return std::fs::read_to_string(path).with_context(|| format!("failed to read {program}"));
    }
    Ok(program.to_owned())
}
